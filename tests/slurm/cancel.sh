#!/bin/bash
# cancel.sh: `lathe cancel` of a running job: scancel --batch
# --signal=TERM reaches the trainer through lathe slurm-step, the trainer
# saves a checkpoint and stops, the job is cancelled.
. "$(dirname "$0")/harness/lib.sh"
slurm_setup
srv_start

STEPS=100000 CKPT_EVERY=1000 write_job long team-a
submit "$T/long.yaml"; check "submit" $?
wait_state long running 120; check "running" $?
wait_for 120 sh -c "'$LATHE' logs long 2>/dev/null | grep -q 'step='"; check "it trains" $?
"$LATHE" cancel long > "$T/cancel.out" 2>&1; check "lathe cancel" $?
wait_state long cancelled 90; check "cancelled" $?
"$LATHE" logs long > "$T/logs" 2>&1
grep -q "\[lathe-train\] stopped" "$T/logs"; check "the trainer got SIGTERM and stopped (checkpoint saved)" $?
find "$T/data" -type d -name 'checkpoint-*' | grep -q .; check "its checkpoint is in the job's folder" $?
st=$(slurm_jobs long | awk '{print $2}')
case "$st" in FAILED|CANCELLED|COMPLETED) r=0 ;; *) r=1 ;; esac
check "the Slurm job ended ($st)" $r
reason=$("$LATHE" describe job long 2>&1 | grep -ci "sigterm")
[ "$reason" -ge 1 ]; check "describe says it stopped after SIGTERM" $?
finish
