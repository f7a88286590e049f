#!/bin/bash
# crd.sh: the CustomResourceDefinitions of `lathe render server` against
# real documents. Their openAPIV3Schema (generated from the spec decoder's
# tables; tests/spec/test_spec_openapi.c compares the two field by field)
# must accept every LoRATrainingJob and LoRAExperiment that `lathe
# validate` accepts: the example jobs, the seed article's file and the
# valid test files; and refuse documents lathe refuses for a type, range,
# enum, name or missing field. Documents are read as kubectl reads them
# (YAML 1.2 numbers: 1e-4 is a number) and checked with jsonschema's
# Draft 4 validator (OpenAPI v3.0's boolean exclusiveMinimum). Each CRD
# also passes validate-k8s.
. "$(dirname "$0")/harness/render.sh"
src="$LATHE_SOURCE_DIR"

"$LATHE" render server --target k8s -o json > "$tmp/server.json"
check "lathe render server -o json exits 0" $?

# the documents lathe accepts, and some it refuses for what a structural
# schema can say too (integer ranges, enums, names, missing fields; not a
# number's range: numbers may be quoted, so they are lathe's to check;
# nor unknown keys: the API server prunes them, test_spec_openapi.c checks
# the properties are exactly the decoder's keys)
valid=()
for f in "$src"/examples/jobs/*.yaml "$LATHE_SOURCE_DIR/examples/seed-lora-job.yaml" \
         "$src"/tests/spec/data/valid/*.yaml "$src"/examples/seed-scenario/*.yaml; do
    [ -f "$f" ] || continue
    if "$LATHE" validate "$f" > /dev/null 2>&1; then valid+=("$f"); fi
done
[ "${#valid[@]}" -ge 8 ]; check "at least 8 valid files to try (${#valid[@]})" $?
invalid=()
for n in batch-zero grad-accum-zero rank-zero rank-too-big bad-enums bad-name \
         missing-dataset missing-training-data negative-counts; do
    f="$src/tests/spec/data/invalid/$n.yaml"
    [ -f "$f" ] && invalid+=("$f")
done

$PY - "$tmp/server.json" "${valid[@]}" -- "${invalid[@]}" <<'EOF'
import json, re, sys
import yaml, jsonschema

class Loader(yaml.SafeLoader):
    """YAML as kubectl reads it: 1e-4 is a number (YAML 1.2 core schema)."""
Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$"),
    list("-+0123456789."))

objs = json.load(open(sys.argv[1]))["items"]
crds = {}
for o in objs:
    if o["kind"] == "CustomResourceDefinition":
        v = o["spec"]["versions"][0]
        crds[(o["spec"]["group"], o["spec"]["names"]["kind"])] = v["schema"]["openAPIV3Schema"]
assert len(crds) == 4, crds.keys()
for g in ("training.example.com", "lathe.dev"):
    assert crds[(g, "LoRATrainingJob")] == crds[("lathe.dev", "LoRATrainingJob")]

args = sys.argv[2:]
sep = args.index("--")
valid, invalid = args[:sep], args[sep + 1:]
bad = 0
docs_checked = 0

def errors(doc):
    schema = crds[("training.example.com", doc["kind"])]
    v = jsonschema.Draft4Validator(schema)
    return sorted(v.iter_errors(doc), key=lambda e: list(e.path))

for f in valid:
    for doc in yaml.load_all(open(f), Loader=Loader):
        if not isinstance(doc, dict) or doc.get("kind") not in ("LoRATrainingJob", "LoRAExperiment"):
            continue
        docs_checked += 1
        for e in errors(doc):
            print("FAIL: %s: %s: %s" % (f, "/".join(map(str, e.path)), e.message))
            bad += 1
for f in invalid:
    refused = False
    for doc in yaml.load_all(open(f), Loader=Loader):
        if isinstance(doc, dict) and doc.get("kind") in ("LoRATrainingJob", "LoRAExperiment"):
            refused |= bool(errors(doc))
    if not refused:
        print("FAIL: %s: lathe refuses it, the CRD schema accepts it" % f)
        bad += 1
print("%d valid documents accepted, %d invalid files refused" % (docs_checked, len(invalid)))
sys.exit(1 if bad or docs_checked < 8 else 0)
EOF
check "the CRD schemas accept what lathe accepts and refuse what it refuses" $?

# the CRDs alone pass validate-k8s, in YAML too
"$LATHE" render server --target k8s > "$tmp/server.yaml"
$PY - "$tmp/server.yaml" "$tmp/crds.yaml" <<'EOF'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "CustomResourceDefinition"]
yaml.safe_dump_all(docs, open(sys.argv[2], "w"))
EOF
if have_validate; then
    $PY "$VALIDATE" "$tmp/crds.yaml" > "$tmp/crds.v" 2>&1
    check "the CRDs pass validate-k8s: $(grep -v ': OK$' "$tmp/crds.v" | head -5)" $?
    grep -qE '^4 object\(s\) valid, 0 error\(s\)$' "$tmp/crds.v"
    check "four CRDs" $?
fi

[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "crd: the CRD schemas take what lathe takes"
