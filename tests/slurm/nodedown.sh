#!/bin/bash
# nodedown.sh: the node a job runs on is set down (scontrol update
# nodename=N state=down, then drained so that it stays out): Slurm kills
# the job and requeues it (--requeue);
# lathe ends that attempt as lost (and cancels Slurm's requeued copy, which
# would run where lathe did not place it), sees the node down in scontrol
# show nodes, and retries the job on the other node from its newest
# checkpoint.
. "$(dirname "$0")/harness/lib.sh"
slurm_setup
DOWN=
trap '[ -n "$DOWN" ] && scontrol update nodename="$DOWN" state=resume 2>/dev/null; cleanup' EXIT
srv_start
STEPS=${ND_STEPS:-150} CKPT_EVERY=5 write_job nd team-a
submit "$T/nd.yaml"; check "submit" $?
wait_state nd running 120; check "running" $?
wait_for 120 sh -c "find '$T/data' -type d -name 'checkpoint-*' | grep -q ."; check "it saved a checkpoint" $?
id=$(slurm_jobs nd | awk '{print $1}' | head -1)
node=$(squeue -h -j "${id:-0}" -o %N 2>/dev/null)
case "$node" in n1|n2) r=0 ;; *) r=1 ;; esac; check "it runs on node '$node'" $r
DOWN=$node
scontrol update nodename="$node" state=down reason="lathe test: node lost"; check "scontrol sets $node down" $?
# slurm-local's ReturnToService=2 brings a down node back as soon as its
# slurmd registers again: drained, it stays out while the job is retried
scontrol update nodename="$node" state=drain reason="lathe test: node lost"
wait_for 30 sh -c "grep -q 'node $node: 4 of its 4 GPUs not available' '$T/server.log'"
check "lathe sees $node out of service" $?
wait_for 90 sh -c "[ \"\$('$LATHE' get jobs nd -o json 2>/dev/null | $PY -c 'import json,sys; print(json.load(sys.stdin).get(\"attempt\"))')\" = 2 ]"
check "a second attempt" $?
wait_state nd succeeded 240; check "the job succeeded" $?
"$LATHE" describe job nd > "$T/describe" 2>&1
grep -qiE "lost|requeued" "$T/describe"; check "describe says attempt 1 was lost" $?
"$LATHE" logs nd --attempt 2 > "$T/a2.log" 2>&1
grep -q "\[lathe-train\] resume" "$T/a2.log"; check "attempt 2 resumed from the checkpoint" $?
other=$(slurm_jobs nd | awk '{print $1}' | sort -n | tail -1)
n2=$(sacct_rows 30 1 'NF' -n -X -j "$other" -o NodeList -P | head -1)
[ -n "$n2" ] && [ "$n2" != "$node" ]; check "attempt 2 ran on the other node ($n2, not $node)" $?
scontrol update nodename="$node" state=resume; DOWN=
finish
