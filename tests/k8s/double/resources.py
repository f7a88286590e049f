"""resources.py: the resources the double serves (group, version, plural,
kind, scope, short names, subresources) and the registry that CRDs extend."""
import threading

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


class Resource:
    def __init__(self, group, version, plural, kind, namespaced=True, short=(), singular=None,
                 subresources=("status",), schema=True, categories=()):
        self.group = group
        self.version = version
        self.plural = plural
        self.kind = kind
        self.namespaced = namespaced
        self.short = list(short)
        self.singular = singular or kind.lower()
        self.subresources = list(subresources)
        self.schema = schema  # a JSON schema file is expected (False = CRD / none shipped)
        self.crd_schema = None  # openAPIV3Schema of a CRD version
        self.printer_columns = None  # additionalPrinterColumns of a CRD version
        self.categories = list(categories)

    @property
    def api_version(self):
        return self.group + "/" + self.version if self.group else self.version

    @property
    def key(self):
        """Storage key: group/plural (one stored version per resource)."""
        return (self.group or "core") + "/" + self.plural

    def has_status(self):
        return "status" in self.subresources

    def __repr__(self):
        return "<Resource %s %s>" % (self.api_version, self.plural)


BUILTIN = [
    Resource("", "v1", "namespaces", "Namespace", False, ["ns"], subresources=("status", "finalize")),
    Resource("", "v1", "nodes", "Node", False, ["no"]),
    Resource("", "v1", "pods", "Pod", True, ["po"], subresources=("status", "log", "eviction", "binding"),
             categories=["all"]),
    Resource("", "v1", "services", "Service", True, ["svc"], categories=["all"]),
    Resource("", "v1", "configmaps", "ConfigMap", True, ["cm"], subresources=()),
    Resource("", "v1", "secrets", "Secret", True, [], subresources=()),
    Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, ["pvc"]),
    Resource("", "v1", "resourcequotas", "ResourceQuota", True, ["quota"]),
    Resource("", "v1", "limitranges", "LimitRange", True, ["limits"], subresources=()),
    Resource("", "v1", "events", "Event", True, ["ev"], subresources=()),
    Resource("", "v1", "serviceaccounts", "ServiceAccount", True, ["sa"], subresources=()),
    Resource("batch", "v1", "jobs", "Job", True, [], categories=["all"]),
    Resource("batch", "v1", "cronjobs", "CronJob", True, ["cj"], categories=["all"]),
    Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, ["pc"], subresources=()),
    Resource("coordination.k8s.io", "v1", "leases", "Lease", True, [], subresources=()),
    Resource("apps", "v1", "deployments", "Deployment", True, ["deploy"], categories=["all"]),
    Resource("apps", "v1", "statefulsets", "StatefulSet", True, ["sts"], categories=["all"]),
    Resource("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True, ["hpa"],
             categories=["all"]),
    Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ["pdb"]),
    Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
             False, ["crd", "crds"]),
    Resource("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", False, [],
             subresources=(), schema=False),
    Resource("rbac.authorization.k8s.io", "v1", "roles", "Role", True, [], subresources=()),
    Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True, [], subresources=()),
    Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False, [], subresources=()),
    Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False, [],
             subresources=()),
]

# Kinds without a JSON schema in the shipped set: checked structurally only.
NO_SCHEMA = {"Node", "Event", "Lease"}
for _r in BUILTIN:
    if _r.kind in NO_SCHEMA:
        _r.schema = False


class Registry:
    def __init__(self):
        self.lock = threading.Lock()
        self.res = {}  # (group, version, plural) -> Resource
        for r in BUILTIN:
            self.res[(r.group, r.version, r.plural)] = r

    def get(self, group, version, plural):
        with self.lock:
            return self.res.get((group, version, plural))

    def by_kind(self, api_version, kind):
        group, _, version = api_version.rpartition("/")
        with self.lock:
            for r in self.res.values():
                if r.group == group and r.version == version and r.kind == kind:
                    return r
        return None

    def all(self):
        with self.lock:
            return list(self.res.values())

    def groups(self):
        """Ordered {group: [versions]} without the core group."""
        out = {}
        for r in self.all():
            if r.group:
                vs = out.setdefault(r.group, [])
                if r.version not in vs:
                    vs.append(r.version)
        return out

    def add(self, r):
        with self.lock:
            self.res[(r.group, r.version, r.plural)] = r

    def remove_group_resource(self, group, plural):
        with self.lock:
            for k in [k for k in self.res if k[0] == group and k[2] == plural]:
                del self.res[k]


def gvk_schema_file(api_version, kind):
    if "/" in api_version:
        group, version = api_version.split("/", 1)
        return "%s-%s-%s.json" % (kind.lower(), group.split(".")[0], version)
    return "%s-%s.json" % (kind.lower(), api_version)
