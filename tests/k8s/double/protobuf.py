"""protobuf.py: decodes the Kubernetes protobuf request bodies kubectl's
typed clients send (`kubectl create namespace|configmap|secret|job|...`,
`kubectl auth can-i`) into the JSON objects the rest of the double works
on. The envelope is "k8s\\0" + runtime.Unknown {typeMeta, raw}; raw is the
object's message, decoded with the field table proto_fields.json (made by
gen_proto.py from the generated.proto files of k8s.io/api and
k8s.io/apimachinery v0.32). Empty strings are dropped (Go's omitempty),
zero Times become absent; the special types Time, MicroTime, Quantity,
IntOrString, RawExtension, Duration and FieldsV1 get their JSON forms."""
import base64
import datetime
import json
import os

from .util import ApiError

MAGIC = b"k8s\x00"
_TABLE = None
META = "k8s.io.apimachinery.pkg.apis.meta.v1."
# group (as in apiVersion) -> the proto package of its types
PACKAGES = {"": "k8s.io.api.core", "batch": "k8s.io.api.batch", "apps": "k8s.io.api.apps",
            "scheduling.k8s.io": "k8s.io.api.scheduling", "policy": "k8s.io.api.policy",
            "coordination.k8s.io": "k8s.io.api.coordination", "autoscaling": "k8s.io.api.autoscaling",
            "rbac.authorization.k8s.io": "k8s.io.api.rbac", "authorization.k8s.io": "k8s.io.api.authorization"}


def table():
    global _TABLE
    if _TABLE is None:
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "proto_fields.json"), encoding="utf-8") as f:
            _TABLE = json.load(f)["messages"]
    return _TABLE


def _varint(b, i):
    shift = result = 0
    while True:
        if i >= len(b):
            raise ValueError("truncated varint")
        c = b[i]
        i += 1
        result |= (c & 0x7F) << shift
        if not c & 0x80:
            return result, i
        shift += 7
        if shift > 70:
            raise ValueError("varint too long")


def _fields(b):
    """(number, wire type, value) of a message's bytes."""
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 2:
            n, i = _varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wt)
        yield num, wt, v


def _signed(v, bits=64):
    if v >= 1 << (bits - 1):
        v -= 1 << 64 if bits == 64 else 1 << 64
    return v


def _scalar(typ, wt, v):
    import struct
    if typ == "string":
        return bytes(v).decode("utf-8", "replace")
    if typ == "bytes":
        return base64.b64encode(bytes(v)).decode()
    if typ == "bool":
        return bool(v)
    if typ in ("int32", "int64"):
        return _signed(v)
    if typ in ("uint32", "uint64"):
        return v
    if typ in ("sint32", "sint64"):
        return (v >> 1) ^ -(v & 1)
    if typ == "double":
        return struct.unpack("<d", v)[0]
    if typ == "float":
        return struct.unpack("<f", v)[0]
    if typ in ("fixed64", "sfixed64", "fixed32", "sfixed32"):
        return int.from_bytes(v, "little", signed=typ.startswith("s"))
    raise ValueError("type %s" % typ)


def _special(name, b):
    """The JSON form of apimachinery's special messages, or NotImplemented."""
    short = name.rsplit(".", 1)[-1]
    if name in (META + "Time", META + "MicroTime"):
        secs = nanos = 0
        for num, _, v in _fields(b):
            if num == 1:
                secs = _signed(v)
            elif num == 2:
                nanos = _signed(v)
        if secs == 0 and nanos == 0:
            return None
        dt = datetime.datetime.fromtimestamp(secs, datetime.timezone.utc)
        if short == "MicroTime":
            return dt.strftime("%Y-%m-%dT%H:%M:%S") + ".%06dZ" % (nanos // 1000)
        return dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    if name == "k8s.io.apimachinery.pkg.api.resource.Quantity":
        for num, _, v in _fields(b):
            if num == 1:
                return bytes(v).decode()
        return "0"
    if name == "k8s.io.apimachinery.pkg.util.intstr.IntOrString":
        t, iv, sv = 0, 0, ""
        for num, _, v in _fields(b):
            if num == 1:
                t = v
            elif num == 2:
                iv = _signed(v)
            elif num == 3:
                sv = bytes(v).decode()
        return sv if t == 1 else iv
    if name in ("k8s.io.apimachinery.pkg.runtime.RawExtension", META + "FieldsV1"):
        for num, _, v in _fields(b):
            if num == 1 and v:
                try:
                    return json.loads(bytes(v))
                except ValueError:
                    return None
        return None
    if name == META + "Duration":
        for num, _, v in _fields(b):
            if num == 1:
                return "%gs" % (_signed(v) / 1e9)
        return "0s"
    return NotImplemented


def decode_message(name, b):
    sp = _special(name, b)
    if sp is not NotImplemented:
        return sp
    fields = table().get(name)
    if fields is None:
        raise ValueError("no message %s" % name)
    out = {}
    for num, wt, v in _fields(b):
        f = fields.get(str(num))
        if f is None:
            continue
        fname, typ, rep, mval = f
        if typ == "map":
            k, val = None, None
            for n2, wt2, v2 in _fields(v):
                if n2 == 1:
                    k = bytes(v2).decode()
                elif n2 == 2:
                    val = v2
            if mval in ("string", "bytes", "bool", "int32", "int64"):
                val = _scalar(mval, 2, val if val is not None else b"") if mval in ("string", "bytes") else _scalar(mval, 0, val or 0)
            else:
                val = decode_message(mval, val or b"")
            out.setdefault(fname, {})[k or ""] = val
            continue
        if typ in ("string", "bytes", "bool", "int32", "int64", "uint32", "uint64", "sint32", "sint64",
                   "double", "float", "fixed32", "fixed64", "sfixed32", "sfixed64"):
            if rep and wt == 2 and typ not in ("string", "bytes"):
                vals, i = [], 0
                while i < len(v):  # packed
                    x, i = _varint(v, i)
                    vals.append(_scalar(typ, 0, x))
                out.setdefault(fname, []).extend(vals)
                continue
            val = _scalar(typ, wt, v)
        else:
            val = decode_message(typ, v)
        if rep:
            out.setdefault(fname, []).append(val)
        else:
            out[fname] = val
    # omitempty: empty strings and absent times go
    return {k: v for k, v in out.items() if v != "" and v is not None}


def decode(body, res):
    """A protobuf body for resource res as a JSON object (dict)."""
    if not body.startswith(MAGIC):
        raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown format")
    try:
        unknown = {}
        for num, _, v in _fields(memoryview(body)[4:]):
            unknown[num] = bytes(v)
        tm = {}
        for num, _, v in _fields(unknown.get(1, b"")):
            tm[num] = bytes(v).decode()
        api_version, kind = tm.get(1, res.api_version), tm.get(2, res.kind)
        group, _, version = api_version.rpartition("/")
        pkg = PACKAGES.get(group)
        if pkg is None:
            raise ValueError("no protobuf types for group %r" % group)
        obj = decode_message("%s.%s.%s" % (pkg, version, kind), unknown.get(2, b""))
    except (ValueError, IndexError, UnicodeDecodeError) as e:
        raise ApiError(400, "BadRequest", "the protobuf body could not be decoded: %s" % e)
    obj["apiVersion"] = api_version
    obj["kind"] = kind
    return obj
