"""selectors.py: label selectors (=, ==, !=, in, notin, exists, !key, gt,
lt) and field selectors (=, ==, !=) as the API server parses them, plus
LabelSelector objects (matchLabels / matchExpressions)."""
import re

from .util import ApiError, get_path

_KEY = r"[A-Za-z0-9./_-]+"


def _split_top(s):
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip() != ""]


def parse_label_selector(s):
    """A list of (key, op, values); raises ApiError 400 on bad syntax."""
    reqs = []
    if s is None or s.strip() == "":
        return reqs
    for part in _split_top(s):
        m = re.match(r"^(%s)\s+(in|notin)\s+\((.*)\)$" % _KEY, part)
        if m:
            vals = [v.strip() for v in m.group(3).split(",") if v.strip() != ""]
            reqs.append((m.group(1), m.group(2), vals))
            continue
        m = re.match(r"^!\s*(%s)$" % _KEY, part)
        if m:
            reqs.append((m.group(1), "!", []))
            continue
        m = re.match(r"^(%s)\s*(==|!=|=|>|<)\s*([A-Za-z0-9._-]*)$" % _KEY, part)
        if m:
            op = {"==": "=", "=": "="}.get(m.group(2), m.group(2))
            if op in (">", "<"):
                try:
                    int(m.group(3))
                except ValueError:
                    raise ApiError(400, "BadRequest", "unable to parse requirement: for 'gt', 'lt' operators, the value must be an integer")
            reqs.append((m.group(1), op, [m.group(3)]))
            continue
        m = re.match(r"^(%s)$" % _KEY, part)
        if m:
            reqs.append((m.group(1), "exists", []))
            continue
        raise ApiError(400, "BadRequest", "unable to parse requirement: found '%s', expected: identifier" % part)
    return reqs


def labels_match(reqs, labels):
    labels = labels or {}
    for key, op, vals in reqs:
        has = key in labels
        v = labels.get(key)
        if op == "=" and not (has and v == vals[0]):
            return False
        if op == "!=" and has and v == vals[0]:
            return False
        if op == "in" and not (has and v in vals):
            return False
        if op == "notin" and has and v in vals:
            return False
        if op == "exists" and not has:
            return False
        if op == "!" and has:
            return False
        if op in (">", "<"):
            try:
                iv = int(v)
            except (TypeError, ValueError):
                return False
            if op == ">" and not iv > int(vals[0]):
                return False
            if op == "<" and not iv < int(vals[0]):
                return False
    return True


def selector_object_match(sel, labels):
    """A metav1.LabelSelector; None/empty matches everything."""
    if not sel:
        return True
    labels = labels or {}
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in sel.get("matchExpressions") or []:
        k, op, vals = e.get("key"), e.get("operator"), e.get("values") or []
        if op == "In" and labels.get(k) not in vals:
            return False
        if op == "NotIn" and k in labels and labels[k] in vals:
            return False
        if op == "Exists" and k not in labels:
            return False
        if op == "DoesNotExist" and k in labels:
            return False
    return True


# Field selectors supported per resource plural (besides metadata.name and
# metadata.namespace), with how to read them.
_FIELDS = {
    "pods": {"status.phase": ("status", "phase"), "spec.nodeName": ("spec", "nodeName"),
             "spec.restartPolicy": ("spec", "restartPolicy"),
             "spec.schedulerName": ("spec", "schedulerName"),
             "spec.serviceAccountName": ("spec", "serviceAccountName"),
             "spec.hostNetwork": ("spec", "hostNetwork"),
             "status.podIP": ("status", "podIP"),
             "status.nominatedNodeName": ("status", "nominatedNodeName")},
    "nodes": {"spec.unschedulable": ("spec", "unschedulable")},
    "namespaces": {"status.phase": ("status", "phase")},
    "secrets": {"type": ("type",)},
    "jobs": {"status.successful": ("status", "succeeded")},
    "events": {"involvedObject.kind": ("involvedObject", "kind"),
               "involvedObject.namespace": ("involvedObject", "namespace"),
               "involvedObject.name": ("involvedObject", "name"),
               "involvedObject.uid": ("involvedObject", "uid"),
               "involvedObject.apiVersion": ("involvedObject", "apiVersion"),
               "involvedObject.resourceVersion": ("involvedObject", "resourceVersion"),
               "involvedObject.fieldPath": ("involvedObject", "fieldPath"),
               "reason": ("reason",), "source": ("source", "component"), "type": ("type",)},
}


def parse_field_selector(s, plural):
    reqs = []
    if s is None or s.strip() == "":
        return reqs
    allowed = _FIELDS.get(plural, {})
    for part in _split_top(s):
        m = re.match(r"^([A-Za-z0-9._\[\]'/-]+)\s*(==|!=|=)\s*(.*)$", part)
        if not m:
            raise ApiError(400, "BadRequest", "invalid selector: '%s'; can't understand '%s'" % (s, part))
        field, op, val = m.group(1), m.group(2), m.group(3).strip()
        if field in ("metadata.name", "metadata.namespace"):
            path = ("metadata", field.split(".")[1])
        elif field in allowed:
            path = allowed[field]
        else:
            raise ApiError(400, "BadRequest", 'field label not supported: %s' % field)
        reqs.append((path, "!=" if op == "!=" else "=", val))
    return reqs


def _fstr(v):
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def fields_match(reqs, obj):
    for path, op, val in reqs:
        v = _fstr(get_path(obj, *path))
        if op == "=" and v != val:
            return False
        if op == "!=" and v == val:
            return False
    return True
