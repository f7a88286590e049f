#!/bin/bash
# cli.sh: lathe init-model, train and generate from the command line: a
# random model of each architecture trains, its adapter loads into generate,
# and bad input gets a clear message and the documented exit code.
set -u
# the trainer contract's variables come from the test, not the caller
unset LATHE_SPEC BASE_MODEL_PATH DATASET_PATH LORA_RANK CHECKPOINT_DIR CHECKPOINT_INTERVAL LATHE_THREADS
WORK=$(mktemp -d /tmp/lathe-cli-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
TEXT="$LATHE_SOURCE_DIR/share/data/tinyshakespeare/input.txt"

for arch in llama mistral qwen2 qwen3; do
    "$LATHE" init-model "$WORK/$arch" --arch $arch --preset tiny --vocab 300 --seed 5 >"$WORK/init.out" \
        || fail "init-model --arch $arch"
    grep -q "wrote $WORK/$arch: $arch tiny" "$WORK/init.out" || fail "init-model summary: $(cat "$WORK/init.out")"
    grep -q "\"model_type\": \"$arch\"" "$WORK/$arch/config.json" || fail "config.json of $arch"
    CHECKPOINT_DIR="$WORK/ck-$arch" LORA_RANK=2 CHECKPOINT_INTERVAL=3 \
        "$LATHE" train --model "$WORK/$arch" --text "$TEXT" --byte-offset 0 --seq-len 32 \
        --max-steps 4 --targets all-linear --threads 2 >"$WORK/train.out" 2>&1 \
        || fail "train $arch: $(tail -3 "$WORK/train.out")"
    [ -d "$WORK/ck-$arch/checkpoint-3" ] || fail "CHECKPOINT_INTERVAL=3 gave no checkpoint-3 ($arch)"
    grep -q '"r": 2' "$WORK/ck-$arch/final/adapter_config.json" || fail "LORA_RANK=2 not honoured"
    out=$("$LATHE" generate --model "$WORK/$arch" --adapter "$WORK/ck-$arch/final" --ids "1 2 3" \
          --max-new 5 --no-eos --threads 2) || fail "generate $arch"
    [ $(echo $out | wc -w) = 5 ] || fail "generate $arch printed '$out', expected 5 ids"
done
echo "ok: init-model, train, generate for llama mistral qwen2 qwen3"

# a nested checkpoint folder is created; a finished run started again only
# rewrites its final adapter (replaced as a whole)
"$LATHE" train --model "$WORK/llama" --text "$TEXT" --byte-offset 0 --seq-len 32 --max-steps 2 \
    --checkpoint-dir "$WORK/deep/a/b" --threads 2 >/dev/null 2>&1 || fail "nested checkpoint folder"
cp "$WORK/deep/a/b/final/adapter_model.safetensors" "$WORK/first.safetensors"
"$LATHE" train --model "$WORK/llama" --text "$TEXT" --byte-offset 0 --seq-len 32 --max-steps 2 \
    --checkpoint-dir "$WORK/deep/a/b" --threads 2 >"$WORK/again.out" 2>&1 || fail "restart of a finished run"
grep -q "resume step=2" "$WORK/again.out" || fail "finished run did not resume at its end"
cmp "$WORK/first.safetensors" "$WORK/deep/a/b/final/adapter_model.safetensors" || fail "final adapter changed"
ls "$WORK/deep/a/b" | grep -q -E 'final\.(tmp|old)' && fail "temporary final folders left behind"

# same seed, same model; the sampled output is reproducible with --seed
"$LATHE" init-model "$WORK/again" --arch llama --preset tiny --vocab 300 --seed 5 >/dev/null
cmp "$WORK/llama/model.safetensors" "$WORK/again/model.safetensors" || fail "init-model not deterministic"
a=$("$LATHE" generate --model "$WORK/llama" --ids 1 --max-new 8 --temperature 1 --top-p 0.9 --seed 4 --no-eos)
b=$("$LATHE" generate --model "$WORK/llama" --ids 1 --max-new 8 --temperature 1 --top-p 0.9 --seed 4 --no-eos)
[ "$a" = "$b" ] || fail "sampling with the same seed differs"

# full fine-tuning: the final folder is a complete model that loads again
"$LATHE" train --model "$WORK/qwen3" --text "$TEXT" --byte-offset 0 --seq-len 32 --max-steps 3 --full \
    --lr 1e-3 --checkpoint-dir "$WORK/ck-full" --threads 2 >/dev/null 2>&1 || fail "train --full"
[ -f "$WORK/ck-full/final/model.safetensors" ] && [ -f "$WORK/ck-full/final/config.json" ] || fail "--full: no model in final/"
[ -f "$WORK/ck-full/checkpoint-3/optimizer.safetensors" ] || fail "--full: no optimizer state"
"$LATHE" generate --model "$WORK/ck-full/final" --ids "1 2" --max-new 3 --no-eos >/dev/null || fail "generate from the fully fine-tuned model"
"$LATHE" train --model "$WORK/qwen3" --text "$TEXT" --byte-offset 0 --seq-len 32 --max-steps 4 --full \
    --lr 1e-3 --checkpoint-dir "$WORK/ck-full" --threads 2 >"$WORK/full2.out" 2>&1 || fail "train --full resume"
grep -q "resume step=3" "$WORK/full2.out" || fail "--full did not resume"

# bf16 weights load and train
"$LATHE" init-model "$WORK/bf16" --arch qwen2 --preset tiny --vocab 300 --dtype bf16 >/dev/null || fail "bf16 init"
grep -q '"torch_dtype": "bfloat16"' "$WORK/bf16/config.json" || fail "bf16 config"
"$LATHE" train --model "$WORK/bf16" --text "$TEXT" --byte-offset 0 --seq-len 32 --max-steps 2 \
    --checkpoint-dir "$WORK/ck-bf16" --threads 2 >/dev/null 2>&1 || fail "train on bf16 weights"

# JSONL data through the tokenizer and chat template, from a job YAML; exact
# resume works with the data part's position too
"$LATHE" init-model "$WORK/q3" --arch qwen3 --preset tiny --tokenizer "$LATHE_SOURCE_DIR/share/tokenizers/qwen3/tokenizer.json" \
    >/dev/null || fail "init-model --tokenizer"
[ -f "$WORK/q3/tokenizer.json" ] && [ -f "$WORK/q3/tokenizer_config.json" ] || fail "tokenizer files not copied"
cat >"$WORK/job.yaml" <<YAML
apiVersion: lathe/v1
kind: LoRATrainingJob
metadata:
  name: toy
spec:
  baseModel:
    path: $WORK/q3
  lora:
    rank: 4
    alpha: 8
    targetModules: [q_proj, v_proj]
    dropout: 0.1
  trainingData:
    datasetPath: $LATHE_SOURCE_DIR/share/data/self-instruct/seed_tasks.messages.jsonl
    gradientAccumulation: 2
    evalSplit: 0.05
  hyperparams:
    maxSteps: 4
    maxSeqLength: 64
    evalSteps: 2
  checkpoint:
    intervalSteps: 1
    path: $WORK/ck-yaml
YAML
"$LATHE" train "$WORK/job.yaml" --threads 2 >"$WORK/yaml.out" 2>&1 || fail "train JOB.yaml: $(tail -3 "$WORK/yaml.out")"
grep -q "messages records" "$WORK/yaml.out" || fail "no data summary line"
grep -q "chat template qwen3" "$WORK/yaml.out" || fail "chat template not reported"
grep -q '"r": 4' "$WORK/ck-yaml/final/adapter_config.json" || fail "job's lora.rank not used"
# the job's held-out share: evaluated at steps 2 and 4, reported on the data line
grep -q "eval set heldout:0.05" "$WORK/yaml.out" || fail "no eval set in the data summary"
[ "$(grep -c '] step=[24]/4 .* eval_loss=' "$WORK/yaml.out")" = 2 ] || fail "expected eval_loss at steps 2 and 4"
grep -q 'done step=4 .*best_eval_step=' "$WORK/yaml.out" || fail "no best eval loss on the done line"
# an eval file instead (here the training file itself), from the command line
"$LATHE" train "$WORK/job.yaml" --threads 2 --max-steps 1 --checkpoint-dir "$WORK/ck-evfile" \
    --eval-data "$LATHE_SOURCE_DIR/share/data/self-instruct/seed_tasks.messages.jsonl" >"$WORK/evfile.out" 2>&1 \
    || fail "train --eval-data: $(tail -3 "$WORK/evfile.out")"
grep -q "eval set $LATHE_SOURCE_DIR/share/data/self-instruct/seed_tasks.messages.jsonl: " "$WORK/evfile.out" \
    || fail "--eval-data: no eval set line"
grep -q '] step=1/1 .* eval_loss=.* eval_seqs=' "$WORK/evfile.out" || fail "--eval-data: no eval_loss"
"$LATHE" train "$WORK/job.yaml" --eval-split 0.7 >"$WORK/evbad.out" 2>&1 && fail "--eval-split 0.7 accepted"
grep -q -- "--eval-split 0.7: expected a share above 0 and below 0.5" "$WORK/evbad.out" || fail "--eval-split error: $(cat "$WORK/evbad.out")"
# as an executor runs it: the job through LATHE_SPEC, overridden by the contract's variables
LATHE_SPEC="$WORK/job.yaml" CHECKPOINT_DIR="$WORK/ck-env" LORA_RANK=2 "$LATHE" train --threads 2 \
    --max-steps 1 >"$WORK/env.out" 2>&1 || fail "train with LATHE_SPEC: $(tail -2 "$WORK/env.out")"
grep -q '"r": 2' "$WORK/ck-env/final/adapter_config.json" || fail "LORA_RANK did not override the job"
( "$LATHE" train "$WORK/job.yaml" --threads 2 --checkpoint-dir "$WORK/ck-yaml2" --fault-kill 3:1 >/dev/null 2>&1 ) 2>/dev/null
"$LATHE" train "$WORK/job.yaml" --threads 2 --checkpoint-dir "$WORK/ck-yaml2" >"$WORK/yaml2.out" 2>&1 || fail "resume of JSONL run"
grep -q "resume step=2" "$WORK/yaml2.out" || fail "JSONL run did not resume from step 2"
cmp "$WORK/ck-yaml/final/adapter_model.safetensors" "$WORK/ck-yaml2/final/adapter_model.safetensors" \
    || fail "JSONL run: resumed adapter differs"
# packed records (attention kept inside each record): trains and resumes exactly too
"$LATHE" train "$WORK/job.yaml" --packing --threads 2 --checkpoint-dir "$WORK/ck-pack" >"$WORK/pack.out" 2>&1 \
    || fail "train --packing: $(tail -3 "$WORK/pack.out")"
( "$LATHE" train "$WORK/job.yaml" --packing --threads 2 --checkpoint-dir "$WORK/ck-pack2" --fault-kill 3:1 >/dev/null 2>&1 ) 2>/dev/null
"$LATHE" train "$WORK/job.yaml" --packing --threads 2 --checkpoint-dir "$WORK/ck-pack2" >"$WORK/pack2.out" 2>&1 \
    || fail "resume of a packed run"
grep -q "resume step=2" "$WORK/pack2.out" || fail "packed run did not resume from step 2"
cmp "$WORK/ck-pack/final/adapter_model.safetensors" "$WORK/ck-pack2/final/adapter_model.safetensors" \
    || fail "packed run: resumed adapter differs"
cmp -s "$WORK/ck-yaml/final/adapter_model.safetensors" "$WORK/ck-pack/final/adapter_model.safetensors" \
    && fail "packing changed nothing"
out=$("$LATHE" generate --model "$WORK/q3" --adapter "$WORK/ck-yaml/final" --prompt "Hello" --chat --max-new 4) \
    || fail "generate --prompt --chat"
[ -n "$out" ] || fail "generate printed nothing"
echo "ok: JSONL + job YAML + exact resume + generate --chat"

# bad input: message and exit code
expect() { # CODE PATTERN command...
    local code=$1 pat=$2; shift 2
    "$@" >"$WORK/err.out" 2>&1
    local rc=$?
    [ $rc = $code ] || fail "$* exited $rc, expected $code: $(cat "$WORK/err.out")"
    grep -q -- "$pat" "$WORK/err.out" || fail "$*: message lacks '$pat': $(cat "$WORK/err.out")"
}
unset CHECKPOINT_DIR BASE_MODEL_PATH DATASET_PATH LORA_RANK CHECKPOINT_INTERVAL
expect 1 "no checkpoint folder" "$LATHE" train --model "$WORK/llama" --text "$TEXT"
expect 1 'did you mean "q_proj"' "$LATHE" train --model "$WORK/llama" --text "$TEXT" --checkpoint-dir "$WORK/x" --targets qproj
expect 1 "LORA_RANK=abc" env LORA_RANK=abc "$LATHE" train --model "$WORK/llama" --text "$TEXT" --checkpoint-dir "$WORK/x"
expect 2 "no config.json: not a Hugging Face model folder" "$LATHE" train --model "$WORK" --text "$TEXT" --checkpoint-dir "$WORK/x"
expect 2 "outside the model's vocabulary" "$LATHE" train --model "$WORK/llama" --text "$TEXT" --byte-offset 200 --seq-len 16 --checkpoint-dir "$WORK/x" --max-steps 1
expect 1 "expected llama, mistral, qwen2 or qwen3" "$LATHE" init-model "$WORK/y" --arch gpt2
expect 2 "is not a token id" "$LATHE" generate --model "$WORK/llama" --ids "1 9999"
cp "$WORK/llama/config.json" "$WORK/x/config.json" 2>/dev/null || { mkdir -p "$WORK/x"; cp "$WORK/llama/config.json" "$WORK/x/"; }
expect 2 "no model.safetensors" "$LATHE" generate --model "$WORK/x" --ids 1
printf '{"model_type":"llama","vocab_size":300}' > "$WORK/broken.json"
mkdir -p "$WORK/broken" && cp "$WORK/broken.json" "$WORK/broken/config.json"
expect 2 "field hidden_size" "$LATHE" generate --model "$WORK/broken" --ids 1
sed 's/^spec:$/spec:\n  method: qlora/' "$WORK/job.yaml" >"$WORK/qlora.yaml"
expect 2 "spec.method qlora" "$LATHE" train "$WORK/qlora.yaml"
# a NaN in the weights (the last 4 bytes: model.norm.weight's last entry) is caught
cp -r "$WORK/llama" "$WORK/nanmodel"
printf '\x00\x00\xc0\x7f' | dd of="$WORK/nanmodel/model.safetensors" bs=1 \
    seek=$(( $(stat -c %s "$WORK/nanmodel/model.safetensors") - 4 )) conv=notrunc status=none
expect 2 "training diverged" "$LATHE" train --model "$WORK/nanmodel" --text "$TEXT" --byte-offset 0 --seq-len 16 \
    --checkpoint-dir "$WORK/nan" --max-steps 2 --threads 2
echo "ok: errors"
echo "1 passed, 0 failed"
