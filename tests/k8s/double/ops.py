"""ops.py: the semantics of every write, shared by the HTTP API and the
controllers: create (generateName, defaults, namespace checks, admission:
priority classes and resource quotas), update and status update
(conflicts, immutable fields, generation), patch (merge, JSON, strategic,
server-side apply), delete (graceful pods, finalizers, propagation
policies), validation (strict schemas + semantic rules) and CRDs."""
import copy
import json
import time
import uuid

from . import patch as P
from .defaults import apply_create_defaults, apply_update_defaults
from .resources import Resource
from .util import (ApiError, already_exists, bad_request, c_immutable, c_forbidden, conflict, deep, get_path, invalid, not_found, now_rfc3339, ns_not_found, parse_quantity, rand_suffix)
from .validate import schema_causes, semantic_causes, unknown_fields

TERMINAL = ("Succeeded", "Failed")


class Ops:
    def __init__(self, store, registry, schemas, stats):
        self.store = store
        self.reg = registry
        self.schemas = schemas
        self.stats = stats
        self.lock = store.lock
        self.applied = {}  # (key, uid, fieldManager, sub) -> the paths that manager applied last
        self.no_kubelet = False  # --kubelet none: no graceful pod deletion (nothing would finish it)

    # ---- helpers ----
    def res_of(self, obj):
        r = self.reg.by_kind(obj.get("apiVersion", ""), obj.get("kind", ""))
        if r is None:
            raise bad_request("no kind %s in %s" % (obj.get("kind"), obj.get("apiVersion")))
        return r

    def get(self, res, ns, name):
        o = self.store.get(res.key, ns if res.namespaced else "", name)
        if o is None:
            raise not_found(res, name)
        return o

    def find(self, res, ns, name):
        return self.store.get(res.key, ns if res.namespaced else "", name)

    def core(self, plural):
        return self.reg.get("", "v1", plural)

    def batch_jobs(self):
        return self.reg.get("batch", "v1", "jobs")

    # ---- validation ----
    def check(self, res, obj, field_validation, op_path=None, internal=False, old=None):
        """Validates obj; prunes unknown fields for fieldValidation=Ignore.
        Raises ApiError 400 (Strict, unknown fields) or 422."""
        v = None
        if internal:
            pass  # the controllers' own writes: semantic checks only (the schema costs milliseconds)
        elif res.schema and self.schemas.available():
            v = self.schemas.validator(res.api_version, res.kind)
        elif res.crd_schema is not None:
            v = res.crd_schema
        name = (obj.get("metadata") or {}).get("name") or (obj.get("metadata") or {}).get("generateName") or ""
        causes = []
        if v is not None:
            errors = list(v.iter_errors(obj))
        if v is not None and errors:
            unknown = unknown_fields(v, obj, errors) if res.crd_schema is None else []
            if unknown:
                if field_validation == "Strict":
                    raise ApiError(400, "BadRequest", '%s in version "%s" cannot be handled as a %s: strict decoding error: %s' % (
                        res.kind, res.version, res.kind, ", ".join('unknown field "%s"' % u for u in unknown)))
                if field_validation == "Ignore":
                    for u in unknown:
                        _prune(obj, u)
                    errors = list(v.iter_errors(obj))
            causes += schema_causes(v, obj, skip_unknown=(field_validation == "Ignore" or res.crd_schema is not None),
                                    errors=errors)
        elif v is None:
            for k in ("metadata", "spec", "status"):
                if k in obj and not isinstance(obj[k], dict):
                    causes.append({"reason": "FieldValueInvalid", "field": k,
                                   "message": "Invalid value: %s: must be an object" % json.dumps(obj[k])[:80]})
        causes += semantic_causes(res, obj)
        if old is not None:
            causes += self.immutable_causes(res, old, obj)
        if causes:
            raise invalid(res, name, causes)

    def immutable_causes(self, res, old, new):
        out = []
        if res.kind == "Job":
            os_, ns_ = old.get("spec") or {}, new.get("spec") or {}
            for k in ("selector", "completionMode", "podFailurePolicy", "manualSelector", "backoffLimitPerIndex", "managedBy"):
                if os_.get(k) != ns_.get(k) and not (k == "podFailurePolicy" and os_.get("suspend")):
                    out.append(c_immutable("spec." + k, ns_.get(k)))
            if os_.get("completions") != ns_.get("completions"):
                elastic = os_.get("completionMode") == "Indexed" and ns_.get("completions") == ns_.get("parallelism")
                if not elastic:
                    out.append(c_immutable("spec.completions", ns_.get("completions")))
            ot, nt = copy.deepcopy(os_.get("template") or {}), copy.deepcopy(ns_.get("template") or {})
            if ot != nt:
                mutable = bool(os_.get("suspend")) and not get_path(old, "status", "startTime")
                if mutable:
                    # scheduling directives of a suspended Job that never started
                    for t in (ot, nt):
                        t.setdefault("metadata", {}).pop("labels", None)
                        t["metadata"].pop("annotations", None)
                        for k in ("nodeSelector", "affinity", "tolerations", "schedulingGates"):
                            t.setdefault("spec", {}).pop(k, None)
                if ot != nt:
                    out.append(c_immutable("spec.template", ns_.get("template")))
        elif res.kind == "Pod":
            os_, ns_ = copy.deepcopy(old.get("spec") or {}), copy.deepcopy(new.get("spec") or {})
            for s in (os_, ns_):
                for k in ("containers", "initContainers"):
                    for c in s.get(k) or []:
                        c.pop("image", None)
                s.pop("activeDeadlineSeconds", None)
                s.pop("tolerations", None)
                s.pop("terminationGracePeriodSeconds", None)
            if os_ != ns_:
                out.append(c_forbidden("spec", "pod updates may not change fields other than `spec.containers[*].image`,"
                                       "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
                                       "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
                                       "(allow it to be set to 1 if it was previously negative)"))
        elif res.kind == "PersistentVolumeClaim":
            os_, ns_ = copy.deepcopy(old.get("spec") or {}), copy.deepcopy(new.get("spec") or {})
            for s in (os_, ns_):
                (s.get("resources") or {}).pop("requests", None)
            if os_ != ns_:
                out.append(c_forbidden("spec", "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"))
        elif res.kind == "Service":
            oc, nc = get_path(old, "spec", "clusterIP"), get_path(new, "spec", "clusterIP")
            if nc not in (None, "") and oc != nc:
                out.append(c_immutable("spec.clusterIP", nc))
        if res.kind == "PriorityClass" and old.get("value") != new.get("value"):
            out.append(c_forbidden("value", "may not be changed in an update."))
        return out

    # ---- admission ----
    def priority_of(self, name, default_class=False, obj=False):
        """The value of priority class name (Priority admission); with
        default_class the globalDefault class (or None); with obj the class."""
        if default_class:
            for pc in self.store.list("scheduling.k8s.io/priorityclasses"):
                if pc.get("globalDefault"):
                    return pc
            return None
        if obj:
            return self.store.get("scheduling.k8s.io/priorityclasses", "", name)
        if not name:
            return 0
        pc = self.store.get("scheduling.k8s.io/priorityclasses", "", name)
        if pc is None:
            if name in ("system-cluster-critical", "system-node-critical"):
                return 2000000000 if name == "system-cluster-critical" else 2000001000
            raise ApiError(403, "Forbidden", 'pods "%%s" is forbidden: no PriorityClass with name %s was found' % name)
        return pc.get("value", 0)

    def one_default_class(self, name):
        for pc in self.store.list("scheduling.k8s.io/priorityclasses"):
            if pc.get("globalDefault") and pc["metadata"]["name"] != name:
                raise ApiError(403, "Forbidden", 'priorityclasses.scheduling.k8s.io "%s" is forbidden: PriorityClass %s is '
                               'already marked as default. Only one default can exist' % (name, pc["metadata"]["name"]),
                               {"name": name, "group": "scheduling.k8s.io", "kind": "priorityclasses"})

    def quota_check(self, pod, ns):
        quotas = self.store.list("core/resourcequotas", ns)
        if not quotas:
            return
        req = pod_requests(pod)
        used = {}
        for p in self.store.list("core/pods", ns):
            if get_path(p, "status", "phase") in TERMINAL:
                continue
            for k, v in pod_requests(p).items():
                used[k] = used.get(k, 0) + v
        name = pod["metadata"].get("name") or pod["metadata"].get("generateName", "")
        for q in quotas:
            hard = get_path(q, "spec", "hard") or {}
            over = []
            for hk, hv in sorted(hard.items()):
                key = quota_key(hk)
                if key is None:
                    continue
                limit = parse_quantity(hv)
                want = req.get(key, 0)
                if want and used.get(key, 0) + want > (limit or 0) + 1e-9:
                    over.append((hk, want, used.get(key, 0), hv))
            if over:
                raise ApiError(403, "Forbidden", 'pods "%s" is forbidden: exceeded quota: %s, requested: %s, used: %s, limited: %s' % (
                    name, q["metadata"]["name"],
                    ",".join("%s=%s" % (o[0], fmt_qty(o[1])) for o in over),
                    ",".join("%s=%s" % (o[0], fmt_qty(o[2])) for o in over),
                    ",".join("%s=%s" % (o[0], o[3]) for o in over)),
                    {"name": name, "kind": "pods"})

    def limit_ranges(self, pod, ns):
        """LimitRange admission of a pod: default limits and requests of
        containers that lack them, then max / min per container (403)."""
        from .defaults import qos_class
        lrs = self.store.list("core/limitranges", ns)
        if not lrs:
            return
        name = pod["metadata"].get("name") or pod["metadata"].get("generateName", "")
        spec = pod.get("spec") or {}
        conts = (spec.get("initContainers") or []) + (spec.get("containers") or [])
        for lr in sorted(lrs, key=lambda x: x["metadata"]["name"]):
            for item in get_path(lr, "spec", "limits") or []:
                if item.get("type") != "Container":
                    continue
                for c in conts:
                    r = c.setdefault("resources", {})
                    for k, v in (item.get("default") or {}).items():
                        r.setdefault("limits", {}).setdefault(k, v)
                    for k, v in (item.get("defaultRequest") or {}).items():
                        req = r.setdefault("requests", {})
                        req.setdefault(k, v)
                    for k, v in (item.get("max") or {}).items():
                        lim = (r.get("limits") or {}).get(k)
                        if lim is None or (parse_quantity(lim) or 0) > (parse_quantity(v) or 0):
                            raise ApiError(403, "Forbidden", 'pods "%s" is forbidden: %s' % (
                                name, "maximum %s usage per Container is %s, but limit is %s" % (k, v, lim) if lim is not None
                                else "maximum %s usage per Container is %s.  No limit is specified" % (k, v)),
                                {"name": name, "kind": "pods"})
                    for k, v in (item.get("min") or {}).items():
                        rq = (r.get("requests") or {}).get(k)
                        if rq is None or (parse_quantity(rq) or 0) < (parse_quantity(v) or 0):
                            raise ApiError(403, "Forbidden", 'pods "%s" is forbidden: %s' % (
                                name, "minimum %s usage per Container is %s, but request is %s" % (k, v, rq) if rq is not None
                                else "minimum %s usage per Container is %s.  No request is specified" % (k, v)),
                                {"name": name, "kind": "pods"})
        pod.setdefault("status", {})["qosClass"] = qos_class(spec)

    def update_quota_usage(self, namespaces=None):
        """Keeps status.used of the ResourceQuotas current (quota controller)."""
        with self.lock:
            for q in self.store.list("core/resourcequotas"):
                ns = q["metadata"]["namespace"]
                if namespaces is not None and ns not in namespaces:
                    continue
                used = {}
                for p in self.store.list("core/pods", ns):
                    if get_path(p, "status", "phase") in TERMINAL:
                        continue
                    for k, v in pod_requests(p).items():
                        used[k] = used.get(k, 0) + v
                hard = get_path(q, "spec", "hard") or {}
                st = {"hard": dict(hard), "used": {}}
                for hk in hard:
                    key = quota_key(hk)
                    st["used"][hk] = fmt_qty(used.get(key, 0)) if key else "0"
                if q.get("status") != st:
                    n = deep(q)
                    n["status"] = st
                    self.store.put("core/resourcequotas", n)

    # ---- create ----
    def create(self, res, ns, body, dry_run=False, field_validation=None, internal=False):
        if not isinstance(body, dict):
            raise bad_request("the body of the request was in an unknown format")
        obj = deep(body)
        if obj.get("apiVersion") in (None, ""):
            obj["apiVersion"] = res.api_version
        if obj.get("kind") in (None, ""):
            obj["kind"] = res.kind
        if obj["apiVersion"] != res.api_version or obj["kind"] != res.kind:
            raise bad_request("the API version in the data (%s) does not match the expected API version (%s)" % (
                obj["apiVersion"], res.api_version) if obj["apiVersion"] != res.api_version else
                "%s in version \"%s\" cannot be handled as a %s: no kind \"%s\" is registered" % (res.kind, res.version, res.kind, obj["kind"]))
        m = obj.get("metadata")
        if m is None:
            m = obj["metadata"] = {}
        if not isinstance(m, dict):
            raise bad_request("%s in version \"%s\" cannot be handled as a %s: metadata must be an object" % (res.kind, res.version, res.kind))
        if res.namespaced:
            if m.get("namespace") and ns and m["namespace"] != ns:
                raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
            m["namespace"] = ns or m.get("namespace") or "default"
            ns = m["namespace"]
        else:
            m.pop("namespace", None)
            ns = ""
        with self.lock:
            if not m.get("name") and m.get("generateName"):
                for _ in range(10):
                    cand = m["generateName"] + rand_suffix()
                    if self.store.get(res.key, ns, cand) is None:
                        m["name"] = cand
                        break
            for k in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
                m.pop(k, None)
            m.pop("managedFields", None)
            if res.namespaced:
                nso = self.store.get("core/namespaces", "", ns)
                if nso is None:
                    raise ns_not_found(ns)
                if nso["metadata"].get("deletionTimestamp"):
                    raise ApiError(403, "Forbidden", 'unable to create new content in namespace %s because it is being terminated' % ns,
                                   {"name": m.get("name", ""), "group": res.group, "kind": res.plural,
                                    "causes": [{"reason": "NamespaceTerminating", "message": "namespace %s is being terminated" % ns,
                                                "field": "metadata.namespace"}]})
            uid = str(uuid.uuid4())
            keep_status = obj.get("status") if (res.kind == "Node" or (internal and res.kind == "Pod")) else None
            try:
                apply_create_defaults(res, obj, uid, self.priority_of if res.kind == "Pod" else None)
            except ApiError as e:
                if "%s" in e.message:
                    e.message = e.message % (m.get("name") or m.get("generateName", ""))
                    e.details = {"name": m.get("name", ""), "kind": "pods"}
                raise
            if keep_status is not None:
                obj["status"] = keep_status
            normalize(res, obj)
            if res.kind == "Pod":
                self.limit_ranges(obj, ns)
                self.quota_check(obj, ns)
            self.check(res, obj, field_validation, internal=internal)
            if res.kind == "PriorityClass" and obj.get("globalDefault"):
                self.one_default_class(m["name"])
            if self.store.get(res.key, ns, m["name"]) is not None:
                raise already_exists(res, m["name"])
            m["uid"] = uid
            m["creationTimestamp"] = now_rfc3339()
            m["generation"] = 1
            if res.kind == "CustomResourceDefinition":
                obj["status"] = crd_status(obj)
            if dry_run:
                m["resourceVersion"] = ""
                return obj
            self.store.put(res.key, obj)
            if res.kind == "CustomResourceDefinition":
                self.register_crd(obj)
            return obj

    # ---- update ----
    def update(self, res, ns, name, body, sub=None, dry_run=False, field_validation=None, internal=False):
        if not isinstance(body, dict):
            raise bad_request("the body of the request was in an unknown format")
        with self.lock:
            old = self.get(res, ns, name)
            new = deep(body)
            bm = new.get("metadata")
            if not isinstance(bm, dict):
                bm = new["metadata"] = {}
            if bm.get("name") not in (None, name):
                raise bad_request("the name of the object (%s) does not match the name on the URL (%s)" % (bm.get("name"), name))
            if res.namespaced and bm.get("namespace") not in (None, "", ns):
                raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
            brv = bm.get("resourceVersion")
            if brv not in (None, "") and brv != old["metadata"].get("resourceVersion"):
                raise conflict(res, name)
            new.setdefault("apiVersion", res.api_version)
            new.setdefault("kind", res.kind)
            if sub == "status":
                out = deep(old)
                out["status"] = new.get("status")
                if out["status"] is None:
                    out.pop("status", None)
                new = out
            else:
                om = old["metadata"]
                for k in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
                    if k in om:
                        bm[k] = om[k]
                    else:
                        bm.pop(k, None)
                bm["name"] = name
                if res.namespaced:
                    bm["namespace"] = om["namespace"]
                else:
                    bm.pop("namespace", None)
                bm.pop("managedFields", None)
                apply_update_defaults(res, new, old)
                if res.has_status() and not internal:
                    if "status" in old:
                        new["status"] = deep(old["status"])
                    else:
                        new.pop("status", None)
                if res.kind == "Pod" and not internal:
                    # spec.nodeName is set by binding only
                    if get_path(old, "spec", "nodeName") and "spec" in new:
                        new["spec"].setdefault("nodeName", old["spec"]["nodeName"])
            normalize(res, new)
            return self._write(res, old, new, sub, dry_run, field_validation, internal)

    def _write(self, res, old, new, sub, dry_run, field_validation, internal):
        nm = new["metadata"]
        nm["resourceVersion"] = old["metadata"].get("resourceVersion")
        # generation: bumped when anything but metadata and status changed
        strip = lambda o: {k: v for k, v in o.items() if k not in ("metadata", "status")}
        if strip(old) != strip(new):
            nm["generation"] = old["metadata"].get("generation", 1) + 1
        else:
            nm["generation"] = old["metadata"].get("generation", 1)
        if old["metadata"].get("deletionTimestamp") and not internal:
            # finalizers may only be removed once deletion started
            added = set(nm.get("finalizers") or []) - set(old["metadata"].get("finalizers") or [])
            if added:
                raise invalid(res, nm["name"], [c_forbidden("metadata.finalizers", "no new finalizers can be added if the object is being deleted, found new finalizers %s" % json.dumps(sorted(added)))])
        self.check(res, new, field_validation, internal=internal, old=None if (internal or sub == "status") else old)
        if res.kind == "PriorityClass" and new.get("globalDefault") and not old.get("globalDefault"):
            self.one_default_class(nm["name"])
        if res.kind == "CustomResourceDefinition":
            new["status"] = crd_status(new)
        if new == old:
            return old
        if dry_run:
            return new
        if self._finished(res, new):
            self.store.remove(res.key, nm.get("namespace") or "", nm["name"])
            return new
        self.store.put(res.key, new)
        if res.kind == "CustomResourceDefinition":
            self.register_crd(new)
        return new

    @staticmethod
    def _finished(res, obj):
        m = obj["metadata"]
        if not m.get("deletionTimestamp") or m.get("finalizers"):
            return False
        if res.kind == "Pod" and m.get("deletionGracePeriodSeconds", 0) > 0:
            return False
        if res.kind == "Namespace" and (get_path(obj, "spec", "finalizers") or []):
            return False
        return True

    def mutate(self, res, ns, name, fn, status_only=False):
        """Internal read-modify-write under the lock: fn(copy) edits the copy
        in place (or returns False for no change). Returns the new object,
        or None when the object is gone."""
        with self.lock:
            old = self.find(res, ns, name)
            if old is None:
                return None
            new = deep(old)
            if fn(new) is False or new == old:
                return old
            new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            try:
                return self._write(res, old, new, "status" if status_only else None, False, None, True)
            except ApiError as e:
                self.stats.record_invalid("INTERNAL", "%s %s/%s" % (res.plural, ns, name), e.code, e.message)
                raise

    # ---- patch ----
    def patch(self, res, ns, name, ctype, body_bytes, sub=None, dry_run=False, field_validation=None,
              field_manager=None, force=False):
        ctype = (ctype or "").split(";")[0].strip().lower()
        with self.lock:
            old = self.find(res, ns, name)
            if ctype == "application/apply-patch+yaml":
                import yaml
                if not field_manager:
                    raise bad_request("PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch")
                try:
                    applied = yaml.safe_load(body_bytes.decode("utf-8")) if body_bytes else None
                except Exception as e:  # noqa: BLE001 - yaml's errors vary
                    raise bad_request("error decoding YAML: %s" % e)
                if not isinstance(applied, dict):
                    raise bad_request("error decoding patch: the patch is not an object")
                am = applied.get("metadata") or {}
                if am.get("name") not in (None, name):
                    raise bad_request("metadata.name in the applied object (%s) does not match the name in the URL (%s)" % (am.get("name"), name))
                if applied.get("apiVersion") != res.api_version or applied.get("kind") != res.kind:
                    raise bad_request("apply patches must have apiVersion %s and kind %s" % (res.api_version, res.kind))
                if old is None:
                    if sub:
                        raise not_found(res, name)
                    applied.setdefault("metadata", {})["name"] = name
                    out = self.create(res, ns, applied, dry_run, field_validation)
                    if not dry_run:
                        self.applied[(res.key, out["metadata"]["uid"], field_manager, None)] = P.applied_paths(applied)
                    return out, True
                merged = P.strategic_merge(old, applied, apply_mode=True)
                akey = (res.key, old["metadata"].get("uid"), field_manager, sub)
                now_paths = P.applied_paths(applied)
                merged = P.prune_unapplied(merged, self.applied.get(akey, set()), now_paths)
                out = self._patched(res, old, merged, applied, sub, dry_run, field_validation)
                if not dry_run:
                    self.applied[akey] = now_paths
                return out, False
            if old is None:
                raise not_found(res, name)
            try:
                p = json.loads(body_bytes.decode("utf-8") or "null")
            except ValueError as e:
                raise bad_request("error decoding patch: %s" % e)
            if ctype == "application/json-patch+json":
                merged = P.json_patch(old, p)
                pm = {}
            elif ctype == "application/merge-patch+json":
                if not isinstance(p, dict):
                    raise bad_request("error decoding patch: the patch is not an object")
                merged = P.merge_patch(old, p)
                pm = p
            elif ctype == "application/strategic-merge-patch+json":
                if not isinstance(p, dict):
                    raise bad_request("error decoding patch: the patch is not an object")
                merged = P.strategic_merge(old, p)
                pm = p
            else:
                raise ApiError(415, "UnsupportedMediaType", 'the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json')
            return self._patched(res, old, merged, pm, sub, dry_run, field_validation), False

    def _patched(self, res, old, merged, patch_obj, sub, dry_run, fv):
        if not isinstance(merged, dict):
            raise bad_request("the patch did not give an object")
        prv = get_path(patch_obj, "metadata", "resourceVersion") if isinstance(patch_obj, dict) else None
        m = merged.setdefault("metadata", {})
        m["resourceVersion"] = prv if prv else old["metadata"].get("resourceVersion")
        return self.update(res, old["metadata"].get("namespace") or "", old["metadata"]["name"], merged, sub, dry_run, fv)

    # ---- delete ----
    def delete(self, res, ns, name, opts=None, dry_run=False, internal=False):
        """Returns (code, body)."""
        opts = opts or {}
        with self.lock:
            obj = self.get(res, ns, name)
            pre = opts.get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != obj["metadata"].get("uid"):
                raise conflict(res, name, "Precondition failed: UID in precondition: %s, UID in object meta: %s" % (pre["uid"], obj["metadata"].get("uid")))
            if pre.get("resourceVersion") and pre["resourceVersion"] != obj["metadata"].get("resourceVersion"):
                raise conflict(res, name, "Precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %s" % (
                    pre["resourceVersion"], obj["metadata"].get("resourceVersion")))
            policy = opts.get("propagationPolicy")
            if policy is None and opts.get("orphanDependents") is not None:
                policy = "Orphan" if opts["orphanDependents"] else "Background"
            if policy is None:
                # batch/v1 Jobs default to orphaning their pods (compatibility)
                policy = "Orphan" if res.kind == "Job" else "Background"
            if policy not in ("Foreground", "Background", "Orphan"):
                raise invalid(res, name, [{"reason": "FieldValueNotSupported", "field": "propagationPolicy",
                                           "message": 'Unsupported value: "%s": supported values: "Foreground", "Background", "Orphan"' % policy}])
            grace = opts.get("gracePeriodSeconds")
            if res.kind == "Pod":
                if grace is None:
                    grace = get_path(obj, "spec", "terminationGracePeriodSeconds", default=30)
                if not get_path(obj, "spec", "nodeName") or get_path(obj, "status", "phase") in TERMINAL or self.no_kubelet:
                    grace = 0
                grace = max(0, int(grace))
            else:
                grace = 0
            if dry_run:
                return 200, obj
            if res.kind == "Namespace":
                return self._delete_namespace(res, obj)
            m = obj["metadata"]
            if m.get("deletionTimestamp"):
                # already being deleted: a shorter grace period for pods
                if res.kind == "Pod" and grace < m.get("deletionGracePeriodSeconds", 0):
                    def shorten(o):
                        o["metadata"]["deletionGracePeriodSeconds"] = grace
                        o["metadata"]["deletionTimestamp"] = now_rfc3339(time.time() + grace)
                    out = self.mutate(res, ns, name, shorten)
                    return 202, out
                if policy == "Foreground" and "foregroundDeletion" not in (m.get("finalizers") or []):
                    out = self.mutate(res, ns, name, lambda o: o["metadata"].setdefault("finalizers", []).append("foregroundDeletion"))
                    return 202, out
                return 202, obj
            if policy == "Orphan":
                self.orphan_dependents(m.get("uid"))
            fin = list(m.get("finalizers") or [])
            if policy == "Foreground" and self.has_dependents(m.get("uid")):
                fin.append("foregroundDeletion")
            if grace > 0 or fin:
                def mark(o):
                    om = o["metadata"]
                    om["deletionTimestamp"] = now_rfc3339(time.time() + grace)
                    om["deletionGracePeriodSeconds"] = grace
                    if fin:
                        om["finalizers"] = fin
                out = self.mutate(res, ns, name, mark)
                return 202, out
            last = self.store.remove(res.key, ns if res.namespaced else "", name)
            if res.kind == "CustomResourceDefinition":
                self.unregister_crd(obj)
            if res.kind == "Pod":
                return 200, last
            return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                         "details": {"name": name, "group": res.group, "kind": res.plural, "uid": m.get("uid")}}

    def _delete_namespace(self, res, obj):
        name = obj["metadata"]["name"]
        if name in ("default", "kube-system", "kube-public", "kube-node-lease"):
            raise ApiError(403, "Forbidden", 'namespaces "%s" is forbidden: this namespace may not be deleted' % name,
                           {"name": name, "kind": "namespaces"})
        def mark(o):
            o["metadata"].setdefault("deletionTimestamp", now_rfc3339())
            o["metadata"]["deletionGracePeriodSeconds"] = 0
            o["status"] = {"phase": "Terminating"}
        out = self.mutate(res, "", name, mark)
        return 200, out

    def dependents(self, uid):
        out = []
        if not uid:
            return out
        for key, o in self.store.dependents(uid):
            r = self.res_by_key(key)
            if r is not None:
                out.append((r, o))
        return out

    def res_by_key(self, key):
        for r in self.reg.all():
            if r.key == key:
                return r
        return None

    def has_dependents(self, uid):
        return bool(self.dependents(uid))

    def orphan_dependents(self, uid):
        for r, o in self.dependents(uid):
            self.mutate(r, o["metadata"].get("namespace") or "", o["metadata"]["name"],
                        lambda x: x["metadata"].__setitem__("ownerReferences", [
                            ref for ref in x["metadata"].get("ownerReferences") or [] if ref.get("uid") != uid]) if True else None)

    # ---- CRDs ----
    def register_crd(self, crd):
        spec = crd.get("spec") or {}
        group, names = spec.get("group"), spec.get("names") or {}
        if not group or not names.get("plural"):
            return
        import jsonschema
        for v in spec.get("versions") or []:
            if not v.get("served", True):
                continue
            subs = ["status"] if "status" in (v.get("subresources") or {}) else []
            r = Resource(group, v["name"], names["plural"], names.get("kind"),
                         spec.get("scope") == "Namespaced", names.get("shortNames") or [],
                         names.get("singular"), subresources=subs, schema=False,
                         categories=names.get("categories") or [])
            r.printer_columns = v.get("additionalPrinterColumns")
            sch = get_path(v, "schema", "openAPIV3Schema")
            if sch:
                try:
                    r.crd_schema = jsonschema.Draft4Validator(_crd_schema(sch))
                except Exception:  # noqa: BLE001 - a schema jsonschema cannot take: no validation
                    r.crd_schema = None
            self.reg.add(r)

    def unregister_crd(self, crd):
        spec = crd.get("spec") or {}
        group, plural = spec.get("group"), (spec.get("names") or {}).get("plural")
        if group and plural:
            self.store.drop_key(group + "/" + plural)
            self.reg.remove_group_resource(group, plural)


def normalize(res, obj):
    """What the server rewrites on every write: a Secret's stringData into data."""
    if res.kind == "Secret":
        import base64
        sd = obj.pop("stringData", None)
        if isinstance(sd, dict):
            data = obj.setdefault("data", {}) or {}
            obj["data"] = data
            for k, v in sd.items():
                data[k] = base64.b64encode(str(v).encode()).decode()
        obj.setdefault("type", "Opaque")


def _crd_schema(s):
    """openAPIV3Schema to a JSON schema jsonschema accepts (drops x- keys,
    nullable as a type union)."""
    if isinstance(s, dict):
        out = {k: _crd_schema(v) for k, v in s.items() if not k.startswith("x-kubernetes")}
        if s.get("nullable") and "type" in out:
            out["type"] = [out["type"], "null"]
        out.pop("nullable", None)
        if s.get("x-kubernetes-int-or-string"):
            out.pop("type", None)
        return out
    if isinstance(s, list):
        return [_crd_schema(x) for x in s]
    return s


def crd_status(crd):
    spec = crd.get("spec") or {}
    names = dict(spec.get("names") or {})
    names.setdefault("singular", (names.get("kind") or "").lower())
    names.setdefault("listKind", (names.get("kind") or "") + "List")
    t = now_rfc3339()
    return {"acceptedNames": names, "storedVersions": [v["name"] for v in spec.get("versions") or [] if v.get("storage")],
            "conditions": [{"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                            "message": "no conflicts found", "lastTransitionTime": t},
                           {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                            "message": "the initial names have been accepted", "lastTransitionTime": t}]}


def _prune(obj, path):
    import re
    parts = re.findall(r"[^.\[\]]+|\[\d+\]", path)
    cur = obj
    for p in parts[:-1]:
        if p.startswith("["):
            cur = cur[int(p[1:-1])]
        else:
            cur = cur.get(p)
        if cur is None:
            return
    last = parts[-1]
    if isinstance(cur, dict):
        cur.pop(last, None)


def quota_key(hard_key):
    """ResourceQuota spec.hard key -> the pod request key it counts."""
    if hard_key == "pods":
        return "pods"
    if hard_key.startswith("requests."):
        return hard_key[len("requests."):]
    if hard_key.startswith("limits."):
        return "limits:" + hard_key[len("limits."):]
    if hard_key in ("cpu", "memory", "ephemeral-storage"):
        return hard_key
    return None


def pod_requests(pod):
    """Effective requests of a pod: max(sum(containers), max(init)); limits as limits:X; pods=1."""
    spec = pod.get("spec") or {}
    tot = {"pods": 1}
    for kind in ("requests", "limits"):
        s, init = {}, {}
        for c in spec.get("containers") or []:
            for k, v in ((c.get("resources") or {}).get(kind) or {}).items():
                s[k] = s.get(k, 0) + (parse_quantity(v) or 0)
        for c in spec.get("initContainers") or []:
            for k, v in ((c.get("resources") or {}).get(kind) or {}).items():
                init[k] = max(init.get(k, 0), parse_quantity(v) or 0)
        for k in set(s) | set(init):
            val = max(s.get(k, 0), init.get(k, 0))
            tot[k if kind == "requests" else "limits:" + k] = val
    return tot


def fmt_qty(v):
    if abs(v - round(v)) < 1e-9:
        return str(int(round(v)))
    return "%dm" % int(round(v * 1000))
