#!/bin/bash
# plan_cli.sh: `lathe plan` and the model-aware pass of `lathe validate` end
# to end: exit codes, outputs, a target module the model lacks reported at
# its line, the seed job's plan and its ms-swift command.
set -u
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
seed="$LATHE_SOURCE_DIR/examples/seed-lora-job.yaml"

# a target module Qwen2 does not have: error at line 7, column of the entry
cat > "$tmp/bad.yaml" <<'Y'
apiVersion: lathe/v1
kind: LoRATrainingJob
metadata: {name: x}
spec:
  baseModel: {name: Qwen2.5-7B}
  lora:
    targetModules: [q_proj, wqkv]
  trainingData: {datasetPath: /data/x.jsonl}
Y
"$LATHE" validate "$tmp/bad.yaml" 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] || fail "validate exit $rc, expected 2"
grep -q "bad.yaml:7:29: error: spec.lora.targetModules\[1\]" "$tmp/err" || { cat "$tmp/err"; fail "no positioned target error"; }
"$LATHE" plan "$tmp/bad.yaml" > /dev/null 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] || fail "plan exit $rc on a bad target, expected 2"

# the seed job plans; JSON has the per-GPU figure and the spec's own resources
"$LATHE" plan "$seed" -o json > "$tmp/plan.json" 2>/dev/null || fail "plan -o json failed"
python3 - "$tmp/plan.json" <<'P' || fail "plan JSON"
import json, sys
p = json.load(open(sys.argv[1]))
assert p["chosen"]["per_gpu_gib"] > 10, p["chosen"]
assert p["requested"]["gpu_type"] == "A100-40GB"
assert p["run"]["steps"] == 4688
c = p["chosen"]
assert c["micro_batch"] * c["gradient_accumulation"] * c["data_parallel"] == 32
P
"$LATHE" plan "$seed" 2>/dev/null | grep -q "your resources: 1 x A100-40GB" || fail "no verdict on the spec's resources"
"$LATHE" plan "$seed" --emit swift 2>/dev/null | grep -q -- "--lora_rank 16" || fail "swift emit"
"$LATHE" plan "$seed" --emit lathe 2>/dev/null > "$tmp/resolved.yaml" || fail "emit lathe"
"$LATHE" validate "$tmp/resolved.yaml" > /dev/null 2>&1 || fail "the resolved spec does not validate"

# a job that may share its GPU: its part of the GPU, from its planned memory
"$LATHE" plan "$LATHE_SOURCE_DIR/examples/jobs/qwen2.5-0.5b-shared.yaml" 2>/dev/null > "$tmp/shared.txt" || fail "plan of the shared example"
grep -Eq "^  share +[0-9]+% of the GPU, beside other shared jobs" "$tmp/shared.txt" || { cat "$tmp/shared.txt"; fail "no share line"; }
"$LATHE" plan "$seed" 2>/dev/null | grep -q "^  share " && fail "a share line for a job that does not share"

# a bitsandbytes base under the hf stack: the unquantised weights in fp32
# unless --kbit-fp32 off (a recipe that casts them back)
on=$("$LATHE" estimate --model Meta-Llama-3-8B --method qlora --quant nf4-dq -o json) || fail "estimate qlora"
off=$("$LATHE" estimate --model Meta-Llama-3-8B --method qlora --quant nf4-dq --kbit-fp32=off -o json) || fail "estimate --kbit-fp32 off"
python3 - "$on" "$off" <<'P' || fail "--kbit-fp32"
import json, sys
on, off = (json.loads(a)["terms_gib"]["base_weights"] for a in sys.argv[1:3])
assert abs(on - 2 * off) < 1e-6 * on, (on, off)
P

# --ckpt-reentrant off: bitsandbytes keeps each distinct projection input
# (q/k/v, o, gate/up, down) on ctx until the layer's backward:
# 32 layers x 2048 tokens x 2 x (3 x 4096 + 14336) bytes = 3.25 GiB
re=$("$LATHE" estimate --model Meta-Llama-3-8B --method qlora --quant nf4-dq --counter allocated -o json) || fail "estimate qlora allocated"
nr=$("$LATHE" estimate --model Meta-Llama-3-8B --method qlora --quant nf4-dq --counter allocated --ckpt-reentrant off -o json) || fail "estimate --ckpt-reentrant off"
python3 - "$re" "$nr" <<'P' || fail "--ckpt-reentrant"
import json, sys
re, nr = (json.loads(a)["terms_gib"]["activations"] for a in sys.argv[1:3])
want = 32 * 2048 * 2 * (3 * 4096 + 14336) / 2**30
assert abs(nr - re - want) < 0.01 * want, (re, nr, want)
P
"$LATHE" estimate --model Meta-Llama-3-8B --method qlora --ckpt-reentrant maybe > /dev/null 2>&1; [ $? -eq 2 ] || fail "bad --ckpt-reentrant should exit 2"

# usage errors
"$LATHE" plan > /dev/null 2>&1; [ $? -eq 1 ] || fail "plan without a file should exit 1"
"$LATHE" plan "$seed" --emit nope > /dev/null 2>&1; [ $? -eq 1 ] || fail "bad --emit should exit 1"
"$LATHE" plan /nonexistent.yaml > /dev/null 2>&1; [ $? -eq 4 ] || fail "unreadable file should exit 4"
echo "ok"
