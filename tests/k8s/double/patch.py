"""patch.py: JSON merge patch (RFC 7386), JSON patch (RFC 6902), and a
simplified strategic merge patch (maps merged; lists with a known merge key
merged by that key; other lists replaced; $patch / $setElementOrder /
$retainKeys / $deleteFromPrimitiveList directives) that is also the merge
used by server-side apply."""
import copy

from .util import ApiError

# field name -> merge key of its list items (strategic merge)
MERGE_KEYS = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name",
    "env": "name", "volumes": "name", "volumeMounts": "mountPath", "volumeDevices": "devicePath",
    "conditions": "type", "imagePullSecrets": "name", "hostAliases": "ip",
    "ownerReferences": "uid", "resourceClaims": "name", "topologySpreadConstraints": "topologyKey",
    "secrets": "name",  # serviceaccount.secrets
}
# primitive lists merged as sets
MERGE_PRIMITIVE = {"finalizers"}


def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


# ---- JSON patch ----
def _ptr(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, "Invalid", 'the server rejected our request due to an error in our request')
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc, parts, path):
    cur = doc
    for p in parts:
        if isinstance(cur, dict):
            if p not in cur:
                raise ApiError(422, "Invalid", "jsonpatch: the path %s does not exist" % path)
            cur = cur[p]
        elif isinstance(cur, list):
            try:
                cur = cur[int(p)]
            except (ValueError, IndexError):
                raise ApiError(422, "Invalid", "jsonpatch: the path %s does not exist" % path)
        else:
            raise ApiError(422, "Invalid", "jsonpatch: the path %s does not exist" % path)
    return cur


def _add(doc, parts, value, path, replace=False):
    if not parts:
        return copy.deepcopy(value)
    parent = _walk(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise ApiError(422, "Invalid", "jsonpatch replace operation does not apply: doc is missing key: %s" % path)
        parent[last] = copy.deepcopy(value)
    elif isinstance(parent, list):
        if last == "-" and not replace:
            parent.append(copy.deepcopy(value))
        else:
            try:
                i = int(last)
            except ValueError:
                raise ApiError(422, "Invalid", "jsonpatch: invalid index in %s" % path)
            if replace:
                if not 0 <= i < len(parent):
                    raise ApiError(422, "Invalid", "jsonpatch replace operation does not apply: doc is missing key: %s" % path)
                parent[i] = copy.deepcopy(value)
            else:
                if not 0 <= i <= len(parent):
                    raise ApiError(422, "Invalid", "jsonpatch add operation does not apply: index out of bounds: %d" % i)
                parent.insert(i, copy.deepcopy(value))
    else:
        raise ApiError(422, "Invalid", "jsonpatch: the path %s does not exist" % path)
    return doc


def _remove(doc, parts, path):
    if not parts:
        raise ApiError(422, "Invalid", "jsonpatch: cannot remove the root")
    parent = _walk(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise ApiError(422, "Invalid", "jsonpatch remove operation does not apply: doc is missing path: %s" % path)
        return parent.pop(last)
    if isinstance(parent, list):
        try:
            return parent.pop(int(last))
        except (ValueError, IndexError):
            raise ApiError(422, "Invalid", "jsonpatch remove operation does not apply: doc is missing path: %s" % path)
    raise ApiError(422, "Invalid", "jsonpatch: the path %s does not exist" % path)


def json_patch(doc, ops):
    if not isinstance(ops, list):
        raise ApiError(400, "BadRequest", "json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op:
            raise ApiError(400, "BadRequest", "jsonpatch: an operation without op")
        kind, path = op["op"], op.get("path", "")
        parts = _ptr(path)
        if kind == "add":
            doc = _add(doc, parts, op.get("value"), path)
        elif kind == "replace":
            doc = _add(doc, parts, op.get("value"), path, replace=True)
        elif kind == "remove":
            _remove(doc, parts, path)
        elif kind in ("move", "copy"):
            frm = op.get("from", "")
            val = _walk(doc, _ptr(frm), frm)
            val = copy.deepcopy(val)
            if kind == "move":
                _remove(doc, _ptr(frm), frm)
            doc = _add(doc, parts, val, path)
        elif kind == "test":
            if _walk(doc, parts, path) != op.get("value"):
                raise ApiError(422, "Invalid", "the server rejected our request due to an error in our request: testing value %s failed" % path)
        else:
            raise ApiError(400, "BadRequest", "Unexpected kind: %s" % kind)
    return doc


# ---- strategic merge ----
def _merge_key(field, items):
    if field == "ports":
        for it in items:
            if isinstance(it, dict):
                return "containerPort" if "containerPort" in it else "port"
        return None
    return MERGE_KEYS.get(field)


def strategic_merge(target, patch, apply_mode=False):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        p = {k: v for k, v in patch.items() if k != "$patch"}
        return copy.deepcopy(p)
    if patch.get("$patch") == "delete":
        return None
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    for k, v in patch.items():
        if k.startswith("$setElementOrder/") or k in ("$retainKeys", "$patch"):
            continue
        if k.startswith("$deleteFromPrimitiveList/"):
            f = k.split("/", 1)[1]
            if isinstance(out.get(f), list):
                out[f] = [x for x in out[f] if x not in (v or [])]
            continue
        if v is None:
            out.pop(k, None)
            continue
        cur = out.get(k)
        if isinstance(v, dict):
            r = strategic_merge(cur, v, apply_mode)
            if r is None:
                out.pop(k, None)
            else:
                out[k] = r
        elif isinstance(v, list):
            out[k] = _merge_list(k, cur, v, apply_mode)
        else:
            out[k] = copy.deepcopy(v)
    if isinstance(retain, list):
        for k in list(out.keys()):
            if k not in retain and k not in patch:
                del out[k]
    return out


def _merge_list(field, cur, patch, apply_mode):
    if field in MERGE_PRIMITIVE and isinstance(cur, list):
        out = list(cur)
        for x in patch:
            if x not in out:
                out.append(x)
        return out
    mk = _merge_key(field, patch + (cur if isinstance(cur, list) else []))
    if not mk or not isinstance(cur, list) or not all(isinstance(x, dict) for x in patch):
        return [copy.deepcopy(x) for x in patch if not (isinstance(x, dict) and x.get("$patch") == "delete")]
    if any(isinstance(x, dict) and x.get("$patch") == "replace" for x in patch):
        return [copy.deepcopy({kk: vv for kk, vv in x.items() if kk != "$patch"})
                for x in patch if isinstance(x, dict) and x.get("$patch") != "replace"]
    out = [copy.deepcopy(x) for x in cur]
    for item in patch:
        key = item.get(mk)
        idx = next((i for i, x in enumerate(out) if isinstance(x, dict) and x.get(mk) == key), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                out.pop(idx)
            continue
        if idx is None:
            out.append(strategic_merge({}, item, apply_mode))
        else:
            out[idx] = strategic_merge(out[idx], item, apply_mode)
    return out


# ---- server-side apply: the fields a manager applied ----
def applied_paths(obj, path=()):
    """The leaf paths of an applied configuration: map keys, list items of
    lists with a merge key as ("=", key, value), other lists as leaves."""
    out = set()
    if isinstance(obj, dict):
        for k, v in obj.items():
            p = path + (k,)
            if isinstance(v, dict) and v:
                out |= applied_paths(v, p)
            elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v) and _merge_key(k, v):
                mk = _merge_key(k, v)
                for it in v:
                    ip = p + (("=", mk, it.get(mk)),)
                    out.add(ip)
                    out |= applied_paths({kk: vv for kk, vv in it.items() if kk != mk}, ip)
            else:
                out.add(p)
    return out


def remove_path(obj, path):
    """Removes path (as applied_paths gives them) from obj when it is there."""
    cur = obj
    for i, part in enumerate(path):
        last = i == len(path) - 1
        if isinstance(part, tuple):
            _, mk, val = part
            if not isinstance(cur, list):
                return
            idx = next((j for j, x in enumerate(cur) if isinstance(x, dict) and x.get(mk) == val), None)
            if idx is None:
                return
            if last:
                cur.pop(idx)
                return
            cur = cur[idx]
        else:
            if not isinstance(cur, dict) or part not in cur:
                return
            if last:
                del cur[part]
                return
            cur = cur[part]


def prune_unapplied(merged, before, now):
    """Fields the manager applied before and no longer applies are removed
    (not those it still applies under them)."""
    keep = ({("apiVersion",), ("kind",), ("metadata", "name"), ("metadata", "namespace")})
    for p in sorted(before - now, key=len, reverse=True):
        if p in keep or any(q[:len(p)] == p for q in now):
            continue
        remove_path(merged, p)
    return merged
