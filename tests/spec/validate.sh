#!/bin/bash
# validate.sh: `lathe validate` end to end: the OK lines, every diagnostic
# on stderr, -o json, checks across documents, and the exit codes
# (0 valid, 1 usage, 2 invalid, 4 unreadable).
set -u
fails=0
check() { # check NAME CONDITION-EXIT-STATUS
    if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fails=$((fails + 1)); fi
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
seed="$LATHE_SOURCE_DIR/examples/seed-lora-job.yaml"
cluster="$LATHE_SOURCE_DIR/examples/cluster-example.yaml"

out=$("$LATHE" validate "$seed" "$cluster" 2>"$tmp/err"); rc=$?
check "valid files exit 0" $rc
grep -qF "$seed: OK (LoRATrainingJob lora-qwen2-7b-r16)" <<<"$out"; check "seed OK line" $?
grep -qF "$cluster: OK (Cluster example)" <<<"$out"; check "cluster OK line" $?
[ ! -s "$tmp/err" ]; check "nothing on stderr for valid files" $?

out=$("$LATHE" validate "$LATHE_SOURCE_DIR/examples/jobs/sweep-rank-lr.yaml" 2>&1); rc=$?
check "experiment exit 0" $rc
grep -qF "OK (LoRAExperiment sweep: 6 jobs)" <<<"$out"; check "experiment job count" $?

bad="$LATHE_TEST_DATA/invalid/unknown-key.yaml"
out=$("$LATHE" validate "$seed" "$bad" 2>"$tmp/err"); rc=$?
[ $rc -eq 2 ]; check "an invalid file exits 2 (got $rc)" $?
grep -qF "unknown-key.yaml:10:5: error: spec.lora.targetModule: unknown field \"targetModule\"" "$tmp/err"
check "file:line:col, path and message" $?
grep -qF "hint: did you mean targetModules?" "$tmp/err"; check "suggestion" $?
grep -qF "batchsize" "$tmp/err"; check "every error, not the first only" $?
grep -qF "invalid (2 errors, 0 warnings)" "$tmp/err"; check "summary" $?
grep -qF "lora-qwen2-7b-r16" <<<"$out"; check "valid files still reported" $?

"$LATHE" validate "$tmp/missing.yaml" "$bad" 2>/dev/null; rc=$?
[ $rc -eq 4 ]; check "an unreadable file exits 4 (got $rc)" $?
"$LATHE" validate 2>/dev/null; rc=$?
[ $rc -eq 1 ]; check "no file is a usage error (got $rc)" $?
"$LATHE" validate -o xml "$seed" 2>/dev/null; rc=$?
[ $rc -eq 1 ]; check "unknown format is a usage error (got $rc)" $?

out=$("$LATHE" validate -o json "$seed" "$bad" "$tmp/missing.yaml"); rc=$?
[ $rc -eq 4 ]; check "json exit code (got $rc)" $?
grep -qF '"file": "'"$seed"'"' <<<"$out"; check "json file" $?
grep -qF '"valid": true' <<<"$out"; check "json valid" $?
grep -qF '"valid": false' <<<"$out"; check "json invalid" $?
grep -qF '"kind": "LoRATrainingJob"' <<<"$out"; check "json kind" $?
grep -qF '"line": 10' <<<"$out"; check "json line" $?
grep -qF '"column": 5' <<<"$out"; check "json column" $?
grep -qF '"path": "spec.lora.targetModule"' <<<"$out"; check "json path" $?
grep -qF '"suggestion": "did you mean targetModules?"' <<<"$out"; check "json suggestion" $?
grep -qF '"expected": ' <<<"$out"; check "json expected" $?
grep -qF '"found": ' <<<"$out"; check "json found" $?
if command -v python3 >/dev/null; then
    python3 -c 'import json,sys; d=json.load(sys.stdin); assert len(d)==3 and d[2]["valid"] is False' <<<"$out"
    check "json parses" $?
fi
out=$("$LATHE" validate --output=json "$LATHE_SOURCE_DIR/examples/jobs/sweep-rank-lr.yaml")
grep -qF '"jobs": 6' <<<"$out"; check "json jobs of an experiment" $?

# across documents: a job naming a priority class its cluster lacks,
# two jobs with one name
cat >"$tmp/both.yaml" <<'YAML'
apiVersion: lathe/v1
kind: Cluster
metadata: {name: lab}
spec:
  priorityClasses: [{name: batch, value: 1}]
  teams: [{name: ml}]
---
apiVersion: lathe/v1
kind: LoRATrainingJob
metadata: {name: j, namespace: ml}
spec:
  priorityClassName: urgent
  baseModel: {name: Qwen2-7B}
  trainingData: {datasetPath: /d}
---
apiVersion: lathe/v1
kind: LoRATrainingJob
metadata: {name: j}
spec:
  baseModel: {name: Qwen2-7B}
  trainingData: {datasetPath: /d}
YAML
"$LATHE" validate "$tmp/both.yaml" 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ]; check "cross-document errors exit 2 (got $rc)" $?
grep -qF 'cluster lab has no priority class "urgent"' "$tmp/err"; check "priority class check" $?
grep -qF 'two jobs in this file are named "j"' "$tmp/err"; check "duplicate job names" $?
grep -qF 'warning: spec.team: cluster lab has no team "default"' "$tmp/err"; check "team warning" $?

[ $fails -eq 0 ] && echo "validate.sh: all checks passed"
exit $fails
