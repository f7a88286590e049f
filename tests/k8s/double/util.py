"""util.py: small shared helpers of the double: times, quantities, API
errors as Status objects, random names, JSON helpers."""
import copy
import datetime
import json
import random
import re
import threading
import time

_rand = random.Random(int.from_bytes(__import__("os").urandom(16), "big"))  # names, not secrets
_ALNUM = "bcdfghjklmnpqrstvwxz2456789"  # the alphabet of apimachinery's rand.String


def rand_suffix(n=5):
    return "".join(_rand.choice(_ALNUM) for _ in range(n))


def now_rfc3339(t=None):
    t = time.time() if t is None else t
    return datetime.datetime.fromtimestamp(int(t), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339nano(t):
    dt = datetime.datetime.fromtimestamp(t, datetime.timezone.utc)
    ns = int(round((t - int(t)) * 1e9))
    if ns >= 1000000000:
        ns = 999999999
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + ".%09dZ" % ns


_TS = re.compile(r"^(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(\.\d+)?([Zz]|[+-]\d\d:\d\d)$")


def parse_time(s):
    """RFC 3339 (with or without fractions) to epoch seconds; None if bad."""
    if not isinstance(s, str):
        return None
    m = _TS.match(s.strip())
    if not m:
        return None
    y, mo, d, h, mi, se = (int(x) for x in m.groups()[:6])
    frac = float(m.group(7)) if m.group(7) else 0.0
    tz = m.group(8)
    off = 0
    if tz not in ("Z", "z"):
        sign = 1 if tz[0] == "+" else -1
        off = sign * (int(tz[1:3]) * 3600 + int(tz[4:6]) * 60)
    try:
        dt = datetime.datetime(y, mo, d, h, mi, se, tzinfo=datetime.timezone.utc)
    except ValueError:
        return None
    return dt.timestamp() - off + frac


def deep(o):
    return copy.deepcopy(o)


def dumps(o):
    return json.dumps(o, separators=(",", ":"))


def meta(obj):
    m = obj.get("metadata")
    if not isinstance(m, dict):
        m = {}
        obj["metadata"] = m
    return m


def get_path(obj, *keys, default=None):
    cur = obj
    for k in keys:
        if isinstance(cur, dict) and k in cur:
            cur = cur[k]
        elif isinstance(cur, list) and isinstance(k, int) and 0 <= k < len(cur):
            cur = cur[k]
        else:
            return default
    return cur


# ---- quantities (k8s.io/apimachinery resource.Quantity, parsing only) ----
_SUFFIX = {
    "": 1, "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
    "P": 1e15, "E": 1e18, "Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3, "Ti": 1024 ** 4,
    "Pi": 1024 ** 5, "Ei": 1024 ** 6,
}
_QTY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?)$")


def parse_quantity(v):
    """A quantity (string or number) as a float; None when it does not parse."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if not isinstance(v, str):
        return None
    m = _QTY.match(v.strip())
    if not m:
        return None
    num = float(m.group(1))
    if m.group(2):
        return num * 10 ** int(m.group(2)[1:])
    return num * _SUFFIX[m.group(3) or ""]


QTY_MSG = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


# ---- API errors ----
class ApiError(Exception):
    """An answer that is a Status (or a prepared body) with an HTTP code."""

    def __init__(self, code, reason, message, details=None, headers=None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self):
        st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
              "message": self.message, "reason": self.reason, "code": self.code}
        if self.details is not None:
            st["details"] = self.details
        if self.reason in ("", None):
            del st["reason"]
        return st


def qualified(res):
    """jobs.batch, pods (core), priorityclasses.scheduling.k8s.io."""
    return res.plural + ("." + res.group if res.group else "")


def kind_group(res):
    return res.kind + ("." + res.group if res.group else "")


def not_found(res, name):
    return ApiError(404, "NotFound", '%s "%s" not found' % (qualified(res), name),
                    {"name": name, "group": res.group, "kind": res.plural})


def ns_not_found(name):
    return ApiError(404, "NotFound", 'namespaces "%s" not found' % name,
                    {"name": name, "kind": "namespaces"})


def already_exists(res, name):
    return ApiError(409, "AlreadyExists", '%s "%s" already exists' % (qualified(res), name),
                    {"name": name, "group": res.group, "kind": res.plural})


def conflict(res, name, msg=None):
    return ApiError(409, "Conflict",
                    'Operation cannot be fulfilled on %s "%s": %s' % (
                        qualified(res), name,
                        msg or "the object has been modified; please apply your changes to the latest version and try again"),
                    {"name": name, "group": res.group, "kind": res.plural})


def bad_request(msg):
    return ApiError(400, "BadRequest", msg)


def invalid(res, name, causes):
    """422 Invalid: causes [{reason, message, field}] (message without the field)."""
    parts = ["%s: %s" % (c["field"], c["message"]) if c.get("field") else c["message"] for c in causes]
    body = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    msg = '%s "%s" is invalid: %s' % (kind_group(res), name, body)
    return ApiError(422, "Invalid", msg, {"name": name, "group": res.group, "kind": res.kind,
                                          "causes": [dict(c, message=(c["message"]))
                                                     for c in causes]})


def quote_val(v):
    if isinstance(v, str):
        return json.dumps(v)
    return dumps(v)


def cause(reason, field, message):
    return {"reason": reason, "message": message, "field": field}


def c_invalid(field, value, detail):
    return cause("FieldValueInvalid", field, "Invalid value: %s: %s" % (quote_val(value), detail))


def c_required(field, detail=""):
    return cause("FieldValueRequired", field, "Required value" + (": " + detail if detail else ""))


def c_unsupported(field, value, supported):
    return cause("FieldValueNotSupported", field, "Unsupported value: %s: supported values: %s" % (
        quote_val(value), ", ".join('"%s"' % s for s in supported)))


def c_forbidden(field, detail):
    return cause("FieldValueForbidden", field, "Forbidden: " + detail)


def c_immutable(field, value):
    return cause("FieldValueInvalid", field, "Invalid value: %s: field is immutable" % quote_val(value))


def c_notfound(field, value):
    return cause("FieldValueNotFound", field, "Not found: %s" % quote_val(value))


def c_duplicate(field, value):
    return cause("FieldValueDuplicate", field, "Duplicate value: %s" % quote_val(value))


class Stopper:
    """A process-wide stop flag with a bounded wait."""

    def __init__(self):
        self.ev = threading.Event()

    def stopped(self):
        return self.ev.is_set()

    def wait(self, secs):
        return self.ev.wait(secs)

    def stop(self):
        self.ev.set()
