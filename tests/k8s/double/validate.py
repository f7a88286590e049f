"""validate.py: what the API server checks on every write: the strict JSON
schema of the kind (unknown fields, types, enums), object names, labels,
and a set of the real server's semantic rules for Pods and Jobs. Returns
causes (reason, field, message) as the real Status carries them."""
import json
import os
import re
import threading

import jsonschema

from .resources import gvk_schema_file
from .util import (c_duplicate, c_forbidden, c_invalid, c_notfound, c_required, c_unsupported,
                   cause, get_path, parse_quantity, QTY_MSG)

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUB = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")

MSG_SUB = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
           "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
           "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
MSG_LABEL = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
             "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
             "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
MSG_1035 = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
            "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
            "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
MSG_LVAL = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
            "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
            "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")


class Schemas:
    def __init__(self, directory):
        self.dir = directory
        self.cache = {}
        self.lock = threading.Lock()

    def available(self):
        return bool(self.dir) and os.path.isdir(self.dir)

    def validator(self, api_version, kind):
        key = (api_version, kind)
        with self.lock:
            if key in self.cache:
                return self.cache[key]
        v = None
        path = os.path.join(self.dir or "", gvk_schema_file(api_version, kind))
        if self.dir and os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                v = jsonschema.Draft4Validator(json.load(f))
        with self.lock:
            self.cache[key] = v
        return v


def field_path(parts):
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += "[%d]" % p
        else:
            out += ("." if out else "") + str(p)
    return out


def unknown_fields(validator, obj, errors=None):
    """Paths ("spec.foo") of the fields the schema does not declare."""
    out = []
    for e in (errors if errors is not None else validator.iter_errors(obj)):
        for sub in [e] + list(e.context or []):
            if sub.validator == "additionalProperties" and isinstance(sub.instance, dict):
                props = sub.schema.get("properties") or {}
                for k in sub.instance:
                    if k not in props:
                        p = field_path(list(sub.absolute_path) + [k])
                        if p not in out:
                            out.append(p)
    return out


def schema_causes(validator, obj, skip_unknown=False, errors=None):
    causes = []
    errs = errors if errors is not None else list(validator.iter_errors(obj))
    for e in sorted(errs, key=lambda e: list(map(str, e.absolute_path))):
        path = list(e.absolute_path)
        if e.validator == "additionalProperties":
            if skip_unknown:
                continue
            props = e.schema.get("properties") or {}
            for k in e.instance:
                if k not in props:
                    causes.append(cause("FieldValueInvalid", field_path(path + [k]),
                                        'Invalid value: %s: unknown field "%s"' % (
                                            json.dumps(k), field_path(path + [k]))))
            continue
        f = field_path(path)
        if e.validator == "required":
            m = re.match(r"'(.*)' is a required property", e.message)
            name = m.group(1) if m else "?"
            causes.append(c_required(field_path(path + [name])))
        elif e.validator == "enum":
            causes.append(c_unsupported(f, e.instance, [str(x) for x in e.validator_value if x is not None]))
        elif e.validator == "type":
            t = e.validator_value
            t = [x for x in t if x != "null"] if isinstance(t, list) else [t]
            causes.append(c_invalid(f, e.instance, "%s in body must be of type %s: \"%s\"" % (
                f, " or ".join(t), _jtype(e.instance))))
        else:
            causes.append(c_invalid(f, e.instance, e.message))
    return causes


def _jtype(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


# ---- names and metadata ----
def name_causes(res, obj):
    m = obj.get("metadata") or {}
    name = m.get("name")
    out = []
    if not name:
        if not m.get("generateName"):
            out.append(c_required("metadata.name", "name or generateName is required"))
        return out
    if res.kind == "Namespace":
        if len(name) > 63 or not DNS1123_LABEL.match(name):
            out.append(c_invalid("metadata.name", name, MSG_LABEL if len(name) <= 63 else "must be no more than 63 characters"))
    elif res.kind == "Service":
        if len(name) > 63 or not DNS1035_LABEL.match(name):
            out.append(c_invalid("metadata.name", name, MSG_1035 if len(name) <= 63 else "must be no more than 63 characters"))
    elif res.group == "" and res.kind in ("Pod", "Node", "ConfigMap", "Secret", "PersistentVolumeClaim", "ResourceQuota", "LimitRange", "ServiceAccount") or res.group != "":
        if len(name) > 253:
            out.append(c_invalid("metadata.name", name, "must be no more than 253 characters"))
        elif not DNS1123_SUB.match(name) and res.kind not in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"):
            out.append(c_invalid("metadata.name", name, MSG_SUB))
    if res.kind == "Job" and len(name) > 63 and DNS1123_SUB.match(name):
        out.append(c_invalid("metadata.name", name, "must be no more than 63 characters"))
    return out


def label_causes(labels, field):
    out = []
    for k, v in (labels or {}).items():
        out += qualified_name_causes(k, field)
        if not isinstance(v, str):
            continue
        if len(v) > 63:
            out.append(c_invalid("%s" % field, v, "must be no more than 63 characters"))
        elif not LABEL_VALUE.match(v):
            out.append(c_invalid("%s" % field, v, MSG_LVAL))
    return out


def qualified_name_causes(k, field):
    prefix, _, name = k.rpartition("/")
    bad = []
    if prefix and (len(prefix) > 253 or not DNS1123_SUB.match(prefix)):
        bad.append("prefix part " + MSG_SUB)
    if not name or len(name) > 63 or not QUALIFIED_NAME.match(name):
        bad.append("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
    return [c_invalid(field, k, b) for b in bad]


def meta_causes(obj):
    m = obj.get("metadata") or {}
    out = label_causes(m.get("labels"), "metadata.labels")
    for k in (m.get("annotations") or {}):
        out += qualified_name_causes(k, "metadata.annotations")
    size = sum(len(k) + len(v or "") for k, v in (m.get("annotations") or {}).items())
    if size > 256 * 1024:
        out.append(c_invalid("metadata.annotations", "", "Too long: must have at most 262144 bytes"))
    for i, f in enumerate(m.get("finalizers") or []):
        if "/" not in f and f not in ("kubernetes", "foregroundDeletion", "orphan"):
            out.append(c_invalid("metadata.finalizers[%d]" % i, f, "name is neither a standard finalizer name nor is it fully qualified"))
    return out


# ---- pods ----
def _resources_causes(res, field, gpu_strict=True):
    out = []
    reqs = (res or {}).get("requests") or {}
    lims = (res or {}).get("limits") or {}
    for which, d in (("requests", reqs), ("limits", lims)):
        for k, v in d.items():
            q = parse_quantity(v)
            if q is None:
                out.append(c_invalid("%s.%s[%s]" % (field, which, k), v, QTY_MSG))
            elif q < 0:
                out.append(c_invalid("%s.%s[%s]" % (field, which, k), v, "must be greater than or equal to 0"))
    for k, v in reqs.items():
        rq, lq = parse_quantity(v), parse_quantity(lims.get(k)) if k in lims else None
        if rq is None:
            continue
        if "/" in k and not k.startswith("kubernetes.io/") and not k.startswith("requests."):
            # extended resources are not overcommitable
            if k not in lims:
                out.append(c_forbidden("%s.limits" % field, "Limit must be set for non overcommitable resources"))
            elif lq is not None and lq != rq:
                out.append(c_invalid("%s.requests" % field, v, "must be equal to %s limit of %s" % (k, lims[k])))
        elif lq is not None and rq > lq:
            out.append(c_invalid("%s.requests" % field, v, "must be less than or equal to %s limit of %s" % (k, lims[k])))
    return out


def pod_spec_causes(spec, field):
    out = []
    if not isinstance(spec, dict):
        return out
    vols = {}
    for i, v in enumerate(spec.get("volumes") or []):
        n = v.get("name")
        if n in vols:
            out.append(c_duplicate("%s.volumes[%d].name" % (field, i), n))
        vols[n] = v
        if n and (len(n) > 63 or not DNS1123_LABEL.match(n)):
            out.append(c_invalid("%s.volumes[%d].name" % (field, i), n, MSG_LABEL))
    conts = spec.get("containers")
    if not conts:
        out.append(c_required("%s.containers" % field))
    names = set()
    for kind in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(kind) or []):
            cf = "%s.%s[%d]" % (field, kind, i)
            n = c.get("name")
            if not n:
                out.append(c_required(cf + ".name"))
            elif n in names:
                out.append(c_duplicate(cf + ".name", n))
            elif len(n) > 63 or not DNS1123_LABEL.match(n):
                out.append(c_invalid(cf + ".name", n, MSG_LABEL))
            names.add(n)
            if not c.get("image"):
                out.append(c_required(cf + ".image"))
            for j, e in enumerate(c.get("env") or []):
                en = e.get("name")
                if not en:
                    out.append(c_required("%s.env[%d].name" % (cf, j)))
                elif not ENV_NAME.match(en):
                    out.append(c_invalid("%s.env[%d].name" % (cf, j), en,
                                         "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')"))
                vf = e.get("valueFrom")
                if vf is not None and e.get("value"):
                    out.append(c_invalid("%s.env[%d].valueFrom" % (cf, j), "", "may not be specified when `value` is not empty"))
            mps = set()
            for j, vm in enumerate(c.get("volumeMounts") or []):
                vn = vm.get("name")
                if vn not in vols:
                    out.append(c_notfound("%s.volumeMounts[%d].name" % (cf, j), vn))
                mp = vm.get("mountPath")
                if not mp:
                    out.append(c_required("%s.volumeMounts[%d].mountPath" % (cf, j)))
                elif mp in mps:
                    out.append(c_invalid("%s.volumeMounts[%d].mountPath" % (cf, j), mp, "must be unique"))
                mps.add(mp)
                sp = vm.get("subPath") or ""
                if sp.startswith("/") or ".." in sp.split("/"):
                    out.append(c_invalid("%s.volumeMounts[%d].subPath" % (cf, j), sp, "must be a relative path without '..'"))
            out += _resources_causes(c.get("resources"), cf + ".resources")
            for j, p in enumerate(c.get("ports") or []):
                cp = p.get("containerPort")
                if isinstance(cp, int) and not 0 < cp < 65536:
                    out.append(c_invalid("%s.ports[%d].containerPort" % (cf, j), cp, "must be between 1 and 65535, inclusive"))
    rp = spec.get("restartPolicy")
    if rp is not None and rp not in ("Always", "OnFailure", "Never"):
        out.append(c_unsupported(field + ".restartPolicy", rp, ["Always", "OnFailure", "Never"]))
    g = spec.get("terminationGracePeriodSeconds")
    if isinstance(g, int) and g < 0:
        out.append(c_invalid(field + ".terminationGracePeriodSeconds", g, "must be greater than or equal to 0"))
    for k in ("hostname", "subdomain"):
        v = spec.get(k)
        if v and (len(v) > 63 or not DNS1123_LABEL.match(v)):
            out.append(c_invalid("%s.%s" % (field, k), v, MSG_LABEL))
    for i, t in enumerate(spec.get("tolerations") or []):
        op = t.get("operator") or "Equal"
        if op not in ("Equal", "Exists"):
            out.append(c_unsupported("%s.tolerations[%d].operator" % (field, i), op, ["Equal", "Exists"]))
        if op == "Exists" and t.get("value"):
            out.append(c_invalid("%s.tolerations[%d].operator" % (field, i), t.get("value"), "value must be empty when `operator` is 'Exists'"))
        eff = t.get("effect")
        if eff and eff not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            out.append(c_unsupported("%s.tolerations[%d].effect" % (field, i), eff, ["NoExecute", "NoSchedule", "PreferNoSchedule"]))
    out += label_causes(spec.get("nodeSelector"), field + ".nodeSelector")
    aff = get_path(spec, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
    if aff is not None:
        terms = aff.get("nodeSelectorTerms")
        if not terms:
            out.append(c_required(field + ".affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms", "must have at least one node selector term"))
        for i, t in enumerate(terms or []):
            for j, e in enumerate(t.get("matchExpressions") or []):
                ef = "%s.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[%d].matchExpressions[%d]" % (field, i, j)
                op, vals = e.get("operator"), e.get("values") or []
                if op not in ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"):
                    out.append(c_unsupported(ef + ".operator", op, ["DoesNotExist", "Exists", "Gt", "In", "Lt", "NotIn"]))
                elif op in ("In", "NotIn") and not vals:
                    out.append(c_required(ef + ".values", "must be specified when `operator` is 'In' or 'NotIn'"))
                elif op in ("Exists", "DoesNotExist") and vals:
                    out.append(c_forbidden(ef + ".values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
                elif op in ("Gt", "Lt") and len(vals) != 1:
                    out.append(c_required(ef + ".values", "must be specified single value when `operator` is 'Lt' or 'Gt'"))
    return out


def job_causes(obj, old=None):
    out = []
    spec = obj.get("spec") or {}
    tmpl = spec.get("template") or {}
    ps = tmpl.get("spec") or {}
    rp = ps.get("restartPolicy")
    if rp not in ("OnFailure", "Never"):
        if rp is None or rp == "Always":
            out.append(c_unsupported("spec.template.spec.restartPolicy", rp or "Always", ["OnFailure", "Never"]))
    for k in ("parallelism", "completions", "backoffLimit"):
        v = spec.get(k)
        if isinstance(v, int) and v < 0:
            out.append(c_invalid("spec." + k, v, "must be greater than or equal to 0"))
    ads = spec.get("activeDeadlineSeconds")
    if isinstance(ads, int) and ads <= 0:
        out.append(c_invalid("spec.activeDeadlineSeconds", ads, "must be greater than 0"))
    ttl = spec.get("ttlSecondsAfterFinished")
    if isinstance(ttl, int) and ttl < 0:
        out.append(c_invalid("spec.ttlSecondsAfterFinished", ttl, "must be greater than or equal to 0"))
    cm = spec.get("completionMode") or "NonIndexed"
    if cm not in ("NonIndexed", "Indexed"):
        out.append(c_unsupported("spec.completionMode", cm, ["NonIndexed", "Indexed"]))
    if cm == "Indexed":
        if spec.get("completions") is None:
            out.append(c_required("spec.completions", "when completion mode is Indexed"))
        elif isinstance(spec.get("parallelism"), int) and spec["parallelism"] > 100000:
            out.append(c_invalid("spec.parallelism", spec["parallelism"], "must be less than or equal to 100000 when completion mode is Indexed"))
    pfp = spec.get("podFailurePolicy")
    if pfp is not None:
        if rp is not None and rp != "Never":
            out.append(c_invalid("spec.template.spec.restartPolicy", rp, 'only "Never" is supported when podFailurePolicy is specified'))
        for i, r in enumerate(pfp.get("rules") or []):
            rf = "spec.podFailurePolicy.rules[%d]" % i
            act = r.get("action")
            if act not in ("FailJob", "FailIndex", "Ignore", "Count"):
                out.append(c_unsupported(rf + ".action", act, ["Count", "FailIndex", "FailJob", "Ignore"]))
            if act == "FailIndex" and spec.get("backoffLimitPerIndex") is None:
                out.append(c_forbidden(rf + ".action", "requires the backoffLimitPerIndex to be set"))
            oec, opc = r.get("onExitCodes"), r.get("onPodConditions")
            if (oec is None) == (opc is None):
                out.append(c_invalid(rf, "", "specifying one of OnExitCodes and OnPodConditions is required"))
            if oec is not None:
                op = oec.get("operator")
                if op not in ("In", "NotIn"):
                    out.append(c_unsupported(rf + ".onExitCodes.operator", op, ["In", "NotIn"]))
                vals = oec.get("values") or []
                if not vals:
                    out.append(c_invalid(rf + ".onExitCodes.values", vals, "at least one value is required"))
                for j, v in enumerate(vals):
                    if op == "In" and v == 0:
                        out.append(c_invalid(rf + ".onExitCodes.values[%d]" % j, 0, "must not be 0 for the In operator"))
                if vals != sorted(set(vals)):
                    out.append(c_invalid(rf + ".onExitCodes.values", vals, "must be ordered"))
                cn = oec.get("containerName")
                if cn and cn not in [c.get("name") for c in (ps.get("containers") or []) + (ps.get("initContainers") or [])]:
                    out.append(c_invalid(rf + ".onExitCodes.containerName", cn, "must be one of the container or initContainer names in the pod template"))
            for j, pc in enumerate(opc or []):
                st = pc.get("status")
                if st not in ("True", "False", "Unknown"):
                    out.append(c_unsupported(rf + ".onPodConditions[%d].status" % j, st, ["True", "False", "Unknown"]))
        prp = spec.get("podReplacementPolicy")
        if prp is not None and prp != "Failed":
            out.append(c_unsupported("spec.podReplacementPolicy", prp, ["Failed"]))
    else:
        prp = spec.get("podReplacementPolicy")
        if prp is not None and prp not in ("Failed", "TerminatingOrFailed"):
            out.append(c_unsupported("spec.podReplacementPolicy", prp, ["Failed", "TerminatingOrFailed"]))
    sel = spec.get("selector")
    tl = (tmpl.get("metadata") or {}).get("labels") or {}
    if sel and sel.get("matchLabels"):
        for k, v in sel["matchLabels"].items():
            if tl.get(k) != v:
                out.append(c_invalid("spec.template.metadata.labels", tl, "`selector` does not match template `labels`"))
                break
    out += label_causes(tl, "spec.template.metadata.labels")
    out += pod_spec_causes(ps, "spec.template.spec")
    return out


def semantic_causes(res, obj):
    out = name_causes(res, obj) + meta_causes(obj)
    if res.kind == "Pod":
        out += pod_spec_causes(obj.get("spec"), "spec")
    elif res.kind == "Job":
        out += job_causes(obj)
    elif res.kind == "Service":
        spec = obj.get("spec") or {}
        typ = spec.get("type") or "ClusterIP"
        if typ not in ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName"):
            out.append(c_unsupported("spec.type", typ, ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]))
        ports = spec.get("ports") or []
        if not ports and spec.get("clusterIP") != "None" and typ != "ExternalName":
            out.append(c_required("spec.ports"))
        names = set()
        for i, pt in enumerate(ports):
            port = pt.get("port")
            if not isinstance(port, int) or not 0 < port < 65536:
                out.append(c_invalid("spec.ports[%d].port" % i, port, "must be between 1 and 65535, inclusive"))
            n = pt.get("name")
            if len(ports) > 1 and not n:
                out.append(c_required("spec.ports[%d].name" % i))
            elif n and n in names:
                out.append(c_duplicate("spec.ports[%d].name" % i, n))
            names.add(n)
    elif res.kind in ("ConfigMap", "Secret"):
        size = 0
        for k in ("data", "binaryData"):
            for key, v in (obj.get(k) or {}).items():
                size += len(key) + len(v or "") * (3 / 4 if res.kind == "Secret" or k == "binaryData" else 1)
        if size > 1048576:
            out.append(cause("FieldValueTooLong", "[]", "Too long: must have at most 1048576 bytes"))
    elif res.kind == "PriorityClass":
        v = obj.get("value")
        if not isinstance(v, int):
            out.append(c_required("value"))
        elif v > 1000000000 and not (obj["metadata"].get("name") or "").startswith("system-"):
            out.append(c_forbidden("value", "maximum allowed value of a user defined priority is 1000000000"))
    elif res.kind in ("ResourceQuota", "LimitRange"):
        for path in (("spec", "hard"),):
            for k, v in (get_path(obj, *path) or {}).items():
                if parse_quantity(v) is None:
                    out.append(c_invalid("spec.hard[%s]" % k, v, QTY_MSG))
    elif res.kind == "PersistentVolumeClaim":
        spec = obj.get("spec") or {}
        if not spec.get("accessModes"):
            out.append(c_required("spec.accessModes", "at least 1 access mode is required"))
        st = get_path(spec, "resources", "requests", "storage")
        if st is None:
            out.append(c_required("spec.resources[storage]"))
        elif parse_quantity(st) is None:
            out.append(c_invalid("spec.resources.requests[storage]", st, QTY_MSG))
    elif res.kind == "Node":
        for k in ("capacity", "allocatable"):
            for rk, v in (get_path(obj, "status", k) or {}).items():
                if parse_quantity(v) is None:
                    out.append(c_invalid("status.%s[%s]" % (k, rk), v, QTY_MSG))
    return out
