#!/bin/bash
# demo.sh: `lathe demo` end to end, as the README runs it but with fewer
# steps: a server with the virtual cluster, the r8/r16/r32 experiment on the
# shipped base model, the urgent job that preempts one of them, a trainer
# killed with SIGKILL that resumes from its checkpoint, every job succeeded,
# the summary table, every rank's training loss fallen, the best adapter
# answering the eval instruction otherwise than the base model, and nothing
# left running. Also: the files it writes are examples/demo, and
# --setup-only leaves the files, the eval file and the model and runs
# nothing.
set -u
fails=0
check() { # check NAME STATUS
    if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fails=$((fails + 1)); fi
}
has() { # has NAME PATTERN: the demo's output holds PATTERN
    grep -qE -- "$2" "$tmp/out"; check "$1" $?
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# the templates are the files in examples/demo
"$LATHE" demo --write-templates "$tmp/templates"; check "write-templates exits 0" $?
diff -r "$tmp/templates" "$LATHE_SOURCE_DIR/examples/demo"; check "examples/demo = the demo's templates" $?

# --setup-only: files and model, no server
"$LATHE" demo --setup-only --dir "$tmp/setup" > "$tmp/setup.out"; check "setup-only exits 0" $?
"$LATHE" validate "$tmp/setup/cluster.yaml" "$tmp/setup/experiment.yaml" "$tmp/setup/hotfix.yaml" >/dev/null
check "the demo's files are valid" $?
[ -f "$tmp/setup/model/config.json" ] && [ -f "$tmp/setup/model/tokenizer.json" ] && [ ! -e "$tmp/setup/data" ]
check "a model with its tokenizer, no server data" $?
cmp -s "$tmp/setup/model/model.safetensors" "$LATHE_SOURCE_DIR/share/models/demo-base/model.safetensors"
check "the model is the shipped base" $?
[ "$(wc -l < "$tmp/setup/eval.jsonl")" -eq 32 ] &&
    cmp -s "$tmp/setup/eval.jsonl" <(head -32 "$LATHE_SOURCE_DIR/share/data/self-instruct/user_oriented_instructions.alpaca.jsonl")
check "the eval file: the first 32 evaluation tasks" $?
grep -q "submit $tmp/setup/experiment.yaml" "$tmp/setup.out"; check "setup-only prints the commands" $?
"$LATHE" demo --dir "$tmp/setup" >/dev/null 2>&1; [ $? -eq 4 ]; check "a folder that is not empty is refused" $?

# the demo itself
start=$(date +%s)
timeout 600 "$LATHE" demo --steps 36 --plain --dir "$tmp/demo" > "$tmp/out" 2>&1
rc=$?
check "demo exits 0 (got $rc)" $rc
has "the experiment is submitted" "team research submits experiment demo-lora"
has "the hotfix is submitted" "product submits hotfix-r16"
has "a research job is preempted" "demo-lora-r(8|16|32): preempted"
has "a trainer is killed" "SIGKILL to the trainer of demo-lora-r"
has "the summary table" "^JOB +TEAM +STATE +STEPS +FINAL LOSS +BEST EVAL"
has "the experiment's best eval loss" "^Best eval loss of experiment demo-lora: demo-lora-r(8|16|32), [0-9.]+ at step [0-9]+"
for j in demo-lora-r8 demo-lora-r16 demo-lora-r32; do
    has "$j succeeded with 36 steps" "^$j +research +succeeded +36 "
done
has "hotfix-r16 succeeded" "^hotfix-r16 +product +succeeded +24 "
has "a preempted job resumed from its checkpoint" "preempted -> resumed from step [0-9]+"
has "the killed job resumed from its checkpoint" "killed \(SIGKILL\), retried -> resumed from step [0-9]+"
has "the folder is left for inspection" "Everything is in $tmp/demo"
has "the eval loss falls as it goes" "demo-lora-r(8|16|32): eval loss [0-9.]+ at step [0-9]+ \(-[0-9.]+ since its first evaluation\)"
has "how each rank learned" "^How each rank learned"
has "the rank that learned most" "^Learned most in the same steps: demo-lora-r(8|16|32) "
for r in 8 16 32; do # TRAIN LOSS "first -> last" fell
    line=$(grep -E "^demo-lora-r$r +$r +[0-9.]+ -> [0-9.]+ " "$tmp/out")
    check "r$r has its loss row" $?
    read -r first last <<< "$(echo "$line" | awk '{print $3, $5}')"
    awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }'
    check "r$r: its training loss fell ($first -> $last)" $?
done
has "the answers' table" "^base model +[^ ]"
has "the best adapter's answer" "^\+ demo-lora-r(8|16|32) \(step [0-9]+\) +[^ ]"
! grep -q "the adapter answers as the base model does" "$tmp/out"
check "the adapter answers otherwise than the base" $?
! grep -q $'\033\[' "$tmp/out"; check "--plain: no terminal escapes" $?
for j in 1 2 3 4; do
    [ -f "$tmp/demo/data/jobs/$j/checkpoints/final/adapter_model.safetensors" ]
    check "job $j has its final adapter" $?
done
sleep 0.5
leftover=$(grep -ls "CHECKPOINT_DIR=$tmp/demo" /proc/[0-9]*/environ 2>/dev/null | wc -l)
[ "$leftover" -eq 0 ]; check "no trainer left running ($leftover)" $?
if ! kill -0 "$(grep -oE 'pid [0-9]+' "$tmp/out" | head -1 | cut -d' ' -f2)" 2>/dev/null; then
    check "the server stopped" 0
else
    check "the server stopped" 1
fi
echo "demo: $(( $(date +%s) - start )) s"

# --clean removes the folder; a data folder without the base model is
# refused with the path it looked for
timeout 600 "$LATHE" demo --steps 12 --plain --clean > "$tmp/clean" 2>&1
check "a short demo with --clean exits 0" $?
grep -q "^removed " "$tmp/clean"; check "--clean removes the folder" $?
mkdir -p "$tmp/nobase/data/self-instruct"
cp "$LATHE_SOURCE_DIR/share/data/self-instruct/"*.alpaca.jsonl "$tmp/nobase/data/self-instruct/"
"$LATHE" demo --data-dir "$tmp/nobase" --dir "$tmp/nb" > "$tmp/nobase.out" 2>&1
[ $? -eq 4 ] && grep -q "models/demo-base/config.json is missing" "$tmp/nobase.out"
check "no base model: exit 4 naming it" $?

if [ "$fails" -ne 0 ]; then
    echo "--- the demo's output:"; cat "$tmp/out"
    echo "--- the short demo's output:"; cat "$tmp/clean" 2>/dev/null
    echo "--- server.log:"; tail -30 "$tmp/demo/server.log"
    echo "$fails checks failed"; exit 1
fi
echo "all checks passed"
