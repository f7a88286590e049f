#!/bin/bash
# preempt.sh: on a node of 3 GPUs team-a runs 3 jobs (one on a borrowed
# GPU); team-b's urgent job takes one back: lathe suspends the preempted
# job's Job, its pod gets SIGTERM and the grace period, the trainer saves a
# checkpoint, the job returns to lathe's queue (no retry spent), and once
# the urgent job is done it resumes from that checkpoint in a new Job
# (attempt 2) and succeeds.
. "$(dirname "$0")/harness/lib.sh"

cat > "$T/one-node.json" <<'EOF2'
[{"name": "gpu-a1", "gpus": 3, "product": "NVIDIA-L4", "memoryMiB": 23034, "cpu": "16",
  "memory": "64Gi", "labels": {"rack-id": "rack-1"}}]
EOF2
k8s_start "$T/one-node.json"
srv_start
for n in a1 a2 a3; do
    STEPS=${A_STEPS:-60} CKPT_EVERY=3 write_job $n team-a
    submit "$T/$n.yaml"; check "submit $n" $?
done
for n in a1 a2 a3; do wait_state $n running 90; check "$n runs" $?; done
# let them train and checkpoint
wait_for 120 sh -c "ls '$T'/kube/volumes/team-a/lathe-checkpoints/*/ 2>/dev/null | grep -c checkpoint- | grep -qv '^[012]$'"
STEPS=8 write_job urgent team-b "  priorityClassName: urgent"
submit "$T/urgent.yaml"; check "submit team-b's urgent job" $?
wait_state urgent running 120; check "the urgent job runs" $?
victim=
for n in a1 a2 a3; do
    "$LATHE" describe job $n 2>/dev/null | grep -q "preempted for urgent" && victim="$victim$n"
done
[ -n "$victim" ] && [ ${#victim} -eq 2 ]; check "one of team-a's jobs was preempted ($victim)" $?
wait_state urgent succeeded 240; check "the urgent job succeeded" $?
for n in a1 a2 a3; do wait_state $n succeeded 400; check "$n succeeded" $?; done
if [ -n "$victim" ]; then
    "$LATHE" logs $victim --attempt 1 > "$T/victim1.log" 2>&1
    grep -q "\[lathe-train\] stopped" "$T/victim1.log"; check "the victim's trainer stopped on SIGTERM" $?
    "$LATHE" logs $victim --attempt 2 > "$T/victim2.log" 2>&1
    grep -q "\[lathe-train\] resume" "$T/victim2.log"; check "and resumed from its checkpoint" $?
    [ "$(job_field $victim attempt)" = "2" ]; check "two attempts, the preemption spent no retry" $?
    kc get job "lathe-$victim-2" -n team-a >/dev/null 2>&1; check "its resumed attempt is a new Job (lathe-$victim-2)" $?
    ! kc get job "lathe-$victim-1" -n team-a >/dev/null 2>&1; check "the preempted attempt's Job is gone" $?
fi
finish
