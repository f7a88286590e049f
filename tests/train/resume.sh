#!/bin/bash
# resume.sh: exact resume. A run killed with SIGKILL (right after an
# optimizer step, halfway through writing a checkpoint, and at a random
# moment from outside) or stopped with SIGTERM, then resumed, must end with
# the same adapter, bit for bit, as an uninterrupted run. Evaluation is on
# (a held-out share, every 3 steps): it must not change the run, and the
# best eval loss survives the resumes.
set -u
# the trainer contract's variables come from the test, not the caller
unset LATHE_SPEC BASE_MODEL_PATH DATASET_PATH LORA_RANK CHECKPOINT_DIR CHECKPOINT_INTERVAL LATHE_THREADS
MODEL="$LATHE_SOURCE_DIR/tests/ref/models/llama2c-260K-plctlab/hf"
TEXT="$LATHE_SOURCE_DIR/share/data/tinyshakespeare/input.txt"
WORK=$(mktemp -d /tmp/lathe-resume-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# dropout and accumulation on, so RNG state and data position both matter
ARGS=(--model "$MODEL" --text "$TEXT" --seq-len 48 --checkpoint-interval 2 --keep 2 --rank 4
      --targets all-linear --dropout 0.1 --batch-size 2 --grad-accum 2 --lr 5e-3 --warmup 2
      --threads 2 --seed 7 --eval-split 0.002 --eval-steps 3)
train() { # DIR STEPS [extra options]
    local dir=$1 steps=$2; shift 2
    "$LATHE" train "${ARGS[@]}" --checkpoint-dir "$dir" --max-steps "$steps" "$@" >>"$dir.log" 2>&1
}
train_bg() { # DIR STEPS: in the background, pid in $pid (the trainer's own)
    "$LATHE" train "${ARGS[@]}" --checkpoint-dir "$1" --max-steps "$2" >>"$1.log" 2>&1 &
    pid=$!
}

# 1. the uninterrupted reference
mkdir -p "$WORK/ref"
train "$WORK/ref" 14 || fail "reference run failed: $(tail -3 "$WORK/ref.log")"
[ -f "$WORK/ref/final/adapter_model.safetensors" ] || fail "no final adapter"
n=$(ls -d "$WORK/ref"/checkpoint-* | wc -l)
best=$(grep -o '"best_eval_step": [0-9]*' "$WORK/ref/checkpoint-14/trainer_state.json" | grep -o '[0-9]*$')
want=2 # the last 2, and the best eval's when that is an older checkpoint
case $best in 12|14) ;; *) [ $((best % 2)) = 0 ] && want=3 ;; esac
[ "$n" = $want ] || fail "expected $want checkpoints kept (the last 2; best eval at $best), found $n"

# 2. deterministic kill points: after the update of step 3 (its checkpoint
#    never written), in the middle of checkpoint 6, after the update of 9
mkdir -p "$WORK/kill"
for point in 3:1 6:2 9:1; do
    train "$WORK/kill" 14 --fault-kill "$point"
    rc=$?
    [ $rc = 137 ] || fail "--fault-kill $point: expected death by SIGKILL (137), got $rc"
    if [ $point = 6:2 ]; then
        ls -a "$WORK/kill" | grep -q '^\.tmp-checkpoint-6' || fail "the mid-checkpoint kill left no partial folder"
        [ -d "$WORK/kill/checkpoint-6" ] && fail "a half-written checkpoint-6 is visible"
    fi
done 2>/dev/null
train "$WORK/kill" 14 || fail "resumed run failed: $(tail -3 "$WORK/kill.log")"
grep -q 'resume step=8' "$WORK/kill.log" || fail "did not resume from checkpoint-8 after the kill at 9"
ls -a "$WORK/kill" | grep -q '^\.tmp-checkpoint' && fail "partial checkpoint folder not cleaned"
cmp "$WORK/ref/final/adapter_model.safetensors" "$WORK/kill/final/adapter_model.safetensors" \
    || fail "adapter after kills differs from the uninterrupted run"
cmp "$WORK/ref/checkpoint-14/optimizer.safetensors" "$WORK/kill/checkpoint-14/optimizer.safetensors" \
    || fail "optimizer state after kills differs"
done_line() { grep -o 'done step=.*adapter=' "$1" | tail -1; }
[ -n "$(done_line "$WORK/ref.log")" ] && grep -q 'best_eval_step=' "$WORK/ref.log" \
    || fail "the reference run printed no eval loss"
[ "$(done_line "$WORK/ref.log")" = "$(done_line "$WORK/kill.log")" ] \
    || fail "eval losses after kills differ: $(done_line "$WORK/ref.log") vs $(done_line "$WORK/kill.log")"
grep -q '"best_eval_step"' "$WORK/kill/checkpoint-14/trainer_state.json" \
    || fail "trainer_state.json holds no best eval loss"
echo "ok: SIGKILL at steps 3 (after update), 6 (mid-checkpoint), 9 -> identical adapter and eval losses"

# SIGTERM in the middle of step 5 (after its first of 4 sequences): the step
# is abandoned, checkpoint-4 written, exit 143; the resume redoes step 5
mkdir -p "$WORK/term"
train "$WORK/term" 14 --fault-kill 5:3
rc=$?
[ $rc = 143 ] || fail "SIGTERM mid-step: exit $rc, expected 143"
grep -q 'stopped step=4 (SIGTERM during step 5' "$WORK/term.log" || fail "SIGTERM mid-step: $(tail -2 "$WORK/term.log")"
[ -d "$WORK/term/checkpoint-4" ] || fail "SIGTERM mid-step: no checkpoint-4"
train "$WORK/term" 14 || fail "resume after mid-step SIGTERM failed"
cmp "$WORK/ref/final/adapter_model.safetensors" "$WORK/term/final/adapter_model.safetensors" \
    || fail "adapter after a mid-step SIGTERM differs"
echo "ok: SIGTERM in the middle of a step -> checkpoint of the previous step, identical adapter"

# 3. signals from outside at whatever moment: SIGTERM (checkpoint + 143),
#    then SIGKILL, then run to the end
mkdir -p "$WORK/ref2" "$WORK/sig"
train "$WORK/ref2" 60 || fail "second reference failed"
wait_step() { # LOG STEP: wait until the log shows that step (at most 60 s)
    for _ in $(seq 600); do
        grep -q "step=$2/" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}
train_bg "$WORK/sig" 60
wait_step "$WORK/sig.log" 5 || fail "no progress"
kill -TERM $pid
wait $pid; rc=$?
if [ $rc = 143 ]; then
    grep -q 'stopped step=' "$WORK/sig.log" || fail "SIGTERM: no 'stopped' line"
    s=$(grep -o 'stopped step=[0-9]*' "$WORK/sig.log" | tail -1 | cut -d= -f2)
    [ -d "$WORK/sig/checkpoint-$s" ] || fail "SIGTERM: no checkpoint-$s"
    echo "ok: SIGTERM at step $s saved checkpoint-$s and exited 143"
else
    [ $rc = 0 ] || fail "SIGTERM: exit $rc"
    echo "note: the run finished before SIGTERM arrived"
fi
train_bg "$WORK/sig" 60
wait_step "$WORK/sig.log" $(( ${s:-0} + 7 )) || true
kill -KILL $pid 2>/dev/null
wait $pid 2>/dev/null
train "$WORK/sig" 60 || fail "final resume failed: $(tail -3 "$WORK/sig.log")"
cmp "$WORK/ref2/final/adapter_model.safetensors" "$WORK/sig/final/adapter_model.safetensors" \
    || fail "adapter after SIGTERM + SIGKILL differs from the uninterrupted run"
echo "ok: SIGTERM + external SIGKILL -> identical adapter"
echo "1 passed, 0 failed"
