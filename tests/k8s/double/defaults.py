"""defaults.py: the defaults the real API server fills in on create (the
subset clients look at): pods, jobs, namespaces, services, PVCs, priority
classes, deployments; and the initial status of each kind."""
import random

from .util import parse_quantity

_svc_rand = random.Random(42)


def _container_defaults(c):
    img = c.get("image") or ""
    if "imagePullPolicy" not in c:
        tag = img.rsplit("/", 1)[-1]
        c["imagePullPolicy"] = "IfNotPresent" if (":" in tag and not tag.endswith(":latest")) or "@" in img else "Always"
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    c.setdefault("resources", {})
    res = c["resources"]
    # requests default to limits (as the real defaulting does)
    lims = res.get("limits") or {}
    if lims:
        req = res.setdefault("requests", {})
        for k, v in lims.items():
            req.setdefault(k, v)
    for p in c.get("ports") or []:
        p.setdefault("protocol", "TCP")
    for e in c.get("env") or []:
        fr = (e.get("valueFrom") or {}).get("fieldRef")
        if fr is not None:
            fr.setdefault("apiVersion", "v1")


def pod_spec_defaults(spec):
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        _container_defaults(c)
    for v in spec.get("volumes") or []:
        if "emptyDir" in v and v["emptyDir"] is None:
            v["emptyDir"] = {}
        for k in ("configMap", "secret", "downwardAPI"):
            if k in v and isinstance(v[k], dict):
                v[k].setdefault("defaultMode", 420)
        if "hostPath" in v:
            v["hostPath"].setdefault("type", "")
    return spec


def qos_class(spec):
    conts = (spec.get("containers") or []) + (spec.get("initContainers") or [])
    any_set, guaranteed = False, True
    for c in conts:
        r = c.get("resources") or {}
        req, lim = r.get("requests") or {}, r.get("limits") or {}
        for k in ("cpu", "memory"):
            if k in req or k in lim:
                any_set = True
            if k not in lim or parse_quantity(req.get(k, lim.get(k))) != parse_quantity(lim.get(k)):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def pod_defaults(pod, priority_of=None):
    spec = pod.setdefault("spec", {})
    pod_spec_defaults(spec)
    spec.setdefault("serviceAccountName", "default")
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    spec.setdefault("enableServiceLinks", True)
    if "priority" not in spec:
        if priority_of and not spec.get("priorityClassName"):
            default = priority_of(None, default_class=True)
            if default is not None:
                spec["priorityClassName"] = default["metadata"]["name"]
                spec["preemptionPolicy"] = default.get("preemptionPolicy", "PreemptLowerPriority")
        spec["priority"] = priority_of(spec.get("priorityClassName")) if priority_of else 0
        if priority_of and spec.get("priorityClassName") and "preemptionPolicy" not in spec:
            pc = priority_of(spec["priorityClassName"], default_class=False, obj=True)
            if pc is not None:
                spec["preemptionPolicy"] = pc.get("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    tol = spec.setdefault("tolerations", [])
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if not any(t.get("key") == key and t.get("effect") in (None, "NoExecute") for t in tol) and \
                not any(t.get("operator") == "Exists" and not t.get("key") for t in tol):
            tol.append({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})
    pod["status"] = {"phase": "Pending", "qosClass": qos_class(spec)}


def job_defaults(job, uid):
    spec = job.setdefault("spec", {})
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    spec.setdefault("parallelism", 1)
    if spec.get("backoffLimitPerIndex") is not None:
        spec.setdefault("backoffLimit", 2147483647)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed")
    tmpl = spec.setdefault("template", {})
    tm = tmpl.setdefault("metadata", {})
    name = job["metadata"]["name"]
    if not spec.get("manualSelector"):
        labels = tm.setdefault("labels", {})
        labels["batch.kubernetes.io/controller-uid"] = uid
        labels["batch.kubernetes.io/job-name"] = name
        labels["controller-uid"] = uid
        labels["job-name"] = name
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    if not job["metadata"].get("labels") and tm.get("labels"):
        job["metadata"]["labels"] = dict(tm["labels"])
    pod_spec_defaults(tmpl.setdefault("spec", {}))
    for r in (spec.get("podFailurePolicy") or {}).get("rules") or []:
        for pc in r.get("onPodConditions") or []:
            pc.setdefault("status", "True")
    job["status"] = {}


def service_defaults(svc):
    spec = svc.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    if spec.get("clusterIP") in (None, ""):
        spec["clusterIP"] = "10.96.%d.%d" % (_svc_rand.randint(0, 254), _svc_rand.randint(1, 254))
    spec.setdefault("clusterIPs", [spec["clusterIP"]])
    spec.setdefault("sessionAffinity", "None")
    spec.setdefault("ipFamilies", ["IPv4"])
    spec.setdefault("ipFamilyPolicy", "SingleStack")
    spec.setdefault("internalTrafficPolicy", "Cluster")
    for p in spec.get("ports") or []:
        p.setdefault("protocol", "TCP")
        p.setdefault("targetPort", p.get("port"))
    svc["status"] = {"loadBalancer": {}}


def pvc_defaults(pvc, uid):
    spec = pvc.setdefault("spec", {})
    spec.setdefault("volumeMode", "Filesystem")
    spec.setdefault("volumeName", "pvc-" + uid)
    req = (spec.get("resources") or {}).get("requests") or {}
    pvc["status"] = {"phase": "Bound", "accessModes": list(spec.get("accessModes") or []),
                     "capacity": {"storage": req.get("storage", "1Gi")}}


def namespace_defaults(ns):
    ns.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    ns["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = ns["metadata"]["name"]
    ns["status"] = {"phase": "Active"}


def apply_create_defaults(res, obj, uid, priority_of=None):
    k = res.kind
    if k == "Pod":
        pod_defaults(obj, priority_of)
    elif k == "Job":
        job_defaults(obj, uid)
    elif k == "Namespace":
        namespace_defaults(obj)
    elif k == "Service":
        service_defaults(obj)
    elif k == "PersistentVolumeClaim":
        pvc_defaults(obj, uid)
    elif k == "PriorityClass":
        obj.setdefault("preemptionPolicy", "PreemptLowerPriority")
    elif k == "Deployment":
        spec = obj.setdefault("spec", {})
        spec.setdefault("replicas", 1)
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
        spec.setdefault("strategy", {"type": "RollingUpdate",
                                     "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}})
        pod_spec_defaults(spec.setdefault("template", {}).setdefault("spec", {}))
        obj["status"] = {}
    elif k == "PodDisruptionBudget":
        obj["status"] = {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}
    elif k == "HorizontalPodAutoscaler":
        obj["status"] = {"desiredReplicas": 0, "currentReplicas": 0}
    elif k == "StatefulSet":
        obj["status"] = {"replicas": 0, "availableReplicas": 0}
    elif k == "ResourceQuota":
        obj["status"] = {"hard": dict((obj.get("spec") or {}).get("hard") or {}), "used": {}}
    elif k == "Node":
        obj.setdefault("spec", {})
    elif res.has_status() and k not in ("Node",):
        obj["status"] = {} if k != "CustomResourceDefinition" else obj.get("status") or {}


def apply_update_defaults(res, new, old):
    """The defaults of decoding, on an update (no new uid, no status reset)."""
    k = res.kind
    uid = old["metadata"].get("uid", "")
    if k == "Job":
        st = new.get("status")
        job_defaults(new, uid)
        if st is None:
            new.pop("status", None)
        else:
            new["status"] = st
    elif k == "Pod":
        spec = new.setdefault("spec", {})
        pod_spec_defaults(spec)
        ospec = old.get("spec") or {}
        for key in ("serviceAccountName", "serviceAccount", "enableServiceLinks", "preemptionPolicy", "priority",
                    "tolerations", "nodeName"):
            if key in ospec and key not in spec:
                spec[key] = ospec[key]
    elif k == "Namespace":
        new.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        new["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = new["metadata"]["name"]
    elif k == "Service":
        spec = new.setdefault("spec", {})
        ospec = old.get("spec") or {}
        for key in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
            if key in ospec and not spec.get(key):
                spec[key] = ospec[key]
        st = new.get("status")
        service_defaults(new)
        new["status"] = st if st is not None else old.get("status", {})
    elif k == "PersistentVolumeClaim":
        spec = new.setdefault("spec", {})
        spec.setdefault("volumeMode", "Filesystem")
        if get_path_simple(old, "spec", "volumeName"):
            spec.setdefault("volumeName", old["spec"]["volumeName"])
        if get_path_simple(old, "spec", "storageClassName") is not None:
            spec.setdefault("storageClassName", old["spec"]["storageClassName"])
    elif k == "PriorityClass":
        new.setdefault("preemptionPolicy", "PreemptLowerPriority")
    elif k == "Deployment":
        spec = new.setdefault("spec", {})
        spec.setdefault("replicas", 1)
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
        spec.setdefault("strategy", {"type": "RollingUpdate",
                                     "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}})
        pod_spec_defaults(spec.setdefault("template", {}).setdefault("spec", {}))


def get_path_simple(o, *keys):
    for key in keys:
        if not isinstance(o, dict) or key not in o:
            return None
        o = o[key]
    return o
