#!/bin/bash
# timeout.sh: the time limit on Slurm's side. A job with maxDuration 30s
# and a grace period of 20s gets --time of 1 minute and
# --signal=B:TERM@20; the server is killed once it trains, so only Slurm
# enforces the limit: its SIGTERM reaches the trainer through lathe
# slurm-step, the trainer saves a checkpoint and stops, and the server,
# started again, re-attaches and records the job as timed out (not failed,
# not retried).
. "$(dirname "$0")/harness/lib.sh"
slurm_setup
srv_start
MAXDUR=30s STEPS=100000 CKPT_EVERY=1000 write_job slow team-a
submit "$T/slow.yaml"; check "submit" $?
wait_state slow running 120; check "running" $?
wait_for 120 sh -c "'$LATHE' logs slow 2>/dev/null | grep -q 'step='"; check "it trains" $?
id=$(slurm_jobs slow | awk '{print $1}' | head -1)
scontrol show job "${id:-none}" > "$T/job.txt" 2>&1
grep -q "TimeLimit=00:01:00" "$T/job.txt"; check "--time of 1 minute (maxDuration + grace)" $?
srv_kill
# Slurm alone now: its --signal, then the job ends (within ~2 minutes)
wait_for 180 sh -c "squeue -h -j ${id:-0} -t all -o %T 2>/dev/null | grep -Eqv 'RUNNING|PENDING|COMPLETING'"
check "the Slurm job ended on its own ($(squeue -h -j "${id:-0}" -t all -o %T 2>/dev/null))" $?
srv_start
wait_state slow timed_out 60; check "timed out" $?
"$LATHE" logs slow > "$T/logs" 2>&1
grep -q "\[lathe-train\] stopped" "$T/logs"; check "the --signal's SIGTERM let the trainer checkpoint" $?
[ "$(job_field slow attempt)" = "1" ]; check "not retried" $?
finish
