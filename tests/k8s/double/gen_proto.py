#!/usr/bin/python3
"""gen_proto.py PROTO_DIR > proto_fields.json: the table of protobuf field
numbers the double decodes kubectl's protobuf request bodies with, read from
the generated.proto files of k8s.io/api and k8s.io/apimachinery (v0.32.x:
the wire format of Kubernetes v1.32). A development tool; the double itself
only reads the JSON table."""
import json
import os
import re
import sys

SCALARS = {"string", "bytes", "bool", "int32", "int64", "uint32", "uint64", "sint32", "sint64",
           "double", "float", "fixed32", "fixed64", "sfixed32", "sfixed64"}


def parse(text):
    text = re.sub(r"//[^\n]*", "", text)
    pkg = re.search(r"^\s*package\s+([\w.]+)\s*;", text, re.M).group(1)
    msgs = {}
    for m in re.finditer(r"\bmessage\s+(\w+)\s*\{([^{}]*)\}", text):
        fields = {}
        for f in re.finditer(r"(optional|repeated|required)?\s*(map<\s*(\w+)\s*,\s*([\w.]+)\s*>|[\w.]+)\s+(\w+)\s*=\s*(\d+)", m.group(2)):
            label, typ, mk, mv, name, num = f.groups()
            if mk:
                fields[num] = [name, "map", 0, _q(mv, pkg)]
            else:
                fields[num] = [name, _q(typ, pkg), 1 if label == "repeated" else 0, None]
        msgs[pkg + "." + m.group(1)] = fields
    return msgs


def _q(t, pkg):
    if t in SCALARS:
        return t
    t = t.lstrip(".")
    return t if "." in t else pkg + "." + t


def main():
    out = {}
    d = sys.argv[1]
    for f in sorted(os.listdir(d)):
        if f.endswith(".proto"):
            with open(os.path.join(d, f), encoding="utf-8") as fh:
                out.update(parse(fh.read()))
    json.dump({"source": "k8s.io/api and k8s.io/apimachinery v0.32.9 generated.proto (field numbers)",
               "messages": out}, sys.stdout, separators=(",", ":"), sort_keys=True)


if __name__ == "__main__":
    main()
