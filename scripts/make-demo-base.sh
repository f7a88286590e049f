#!/bin/sh
# make-demo-base.sh: makes share/models/demo-base, the base model `lathe demo`
# fine-tunes, with lathe alone, from the text in share/:
#
#   1. a byte-level BPE tokenizer of 1,024 ids learned from tinyshakespeare
#      and the Self-Instruct seed tasks (`lathe init-tokenizer`);
#   2. a random Qwen3-shaped model of the tiny preset with that vocabulary
#      (`lathe init-model`: dim 64, 2 layers, 4 heads, 158,080 parameters);
#   3. every weight of it trained on tinyshakespeare as one text record,
#      packed into sequences of 256 tokens (`lathe train --full`): 1,500
#      steps of 8 sequences, about three million tokens, seven passes.
#
# One thread, fixed seeds: the result is the same file, bit for bit, on any
# machine with the same lathe (docs/trainer.md, "Threads"). It takes about
# five minutes of one core (275 s of CPU time, 20 minutes of wall time on
# the loaded development machine). Its steps' losses are printed.
#
#   scripts/make-demo-base.sh [OUT]     (default share/models/demo-base)
# Environment: LATHE (the lathe binary, default build/lathe).
set -eu
cd "$(dirname "$0")/.."
LATHE=${LATHE:-build/lathe}
OUT=${1:-share/models/demo-base}
TEXT=share/data/tinyshakespeare/input.txt
TASKS=share/data/self-instruct/seed_tasks.alpaca.jsonl
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$LATHE" init-tokenizer "$tmp/tok" "$TEXT" "$TASKS" --vocab 1024
"$LATHE" init-model "$tmp/init" --preset tiny --arch qwen3 --init-std 0.1 --seed 42 \
    --tokenizer "$tmp/tok/tokenizer.json"
# the play as one text record: packing cuts it into sequences of 256 tokens
python3 -c 'import json, sys; print(json.dumps({"text": sys.stdin.read()}))' < "$TEXT" > "$tmp/text.jsonl"
"$LATHE" train --model "$tmp/init" --data "$tmp/text.jsonl" --packing --seq-len 256 --full \
    --batch-size 8 --lr 1e-2 --warmup 30 --max-steps 1500 --threads 1 --seed 42 \
    --checkpoint-dir "$tmp/run" --checkpoint-interval 0 --output "$tmp/out" > "$tmp/train.log"
grep -E '^\[lathe-train\] (start|step=(1|100|500|1000|1500)/|done)' "$tmp/train.log"
mkdir -p "$OUT"
cp "$tmp/out/config.json" "$tmp/out/model.safetensors" "$tmp/tok/tokenizer.json" \
    "$tmp/tok/tokenizer_config.json" "$OUT/"
echo "wrote $OUT"
