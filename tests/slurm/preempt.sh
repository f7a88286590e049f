#!/bin/bash
# preempt.sh: lathe decides. team-a fills both Slurm nodes (two jobs of 4
# GPUs, one on borrowed GPUs); team-b's urgent job takes 4 GPUs back:
# lathe stops the victim with scancel --signal=TERM, its trainer saves a
# checkpoint, the job goes back to lathe's queue (no retry spent), the
# urgent job runs pinned (--nodelist) where the victim was, and the victim
# then resumes from its checkpoint in a new Slurm job (attempt 2).
. "$(dirname "$0")/harness/lib.sh"
slurm_setup
srv_start
four="$(printf '  resources:\n    gpu:\n      count: 4\n      type: L4-24GB')"
for n in a1 a2; do
    STEPS=${A_STEPS:-80} CKPT_EVERY=3 write_job $n team-a "$four"
    submit "$T/$n.yaml"; check "submit $n" $?
done
for n in a1 a2; do wait_state $n running 90; check "$n runs" $?; done
# both have a checkpoint (a trainer still starting has no SIGTERM handler yet)
wait_for 120 sh -c "n=0; for d in '$T'/data/jobs/*/; do ls -d \"\$d\"checkpoints/checkpoint-* >/dev/null 2>&1 || exit 1; n=\$((n + 1)); done; [ \$n -ge 2 ]"
check "both have saved a checkpoint" $?
STEPS=8 write_job urgent team-b "  priorityClassName: urgent
$four"
submit "$T/urgent.yaml"; check "submit team-b's urgent job" $?
wait_state urgent running 120; check "the urgent job runs" $?
victim=
for n in a1 a2; do
    "$LATHE" describe job $n 2>/dev/null | grep -q "preempted for urgent" && victim="$victim$n"
done
[ -n "$victim" ] && [ ${#victim} -eq 2 ]; check "one of team-a's jobs was preempted ($victim)" $?
wait_state urgent succeeded 240; check "the urgent job succeeded" $?
for n in a1 a2; do wait_state $n succeeded 400; check "$n succeeded" $?; done
if [ -n "$victim" ]; then
    "$LATHE" logs $victim --attempt 1 > "$T/victim1.log" 2>&1
    grep -q "\[lathe-train\] stopped" "$T/victim1.log"; check "the victim's trainer stopped on SIGTERM" $?
    "$LATHE" logs $victim --attempt 2 > "$T/victim2.log" 2>&1
    grep -q "\[lathe-train\] resume" "$T/victim2.log"; check "and resumed from its checkpoint" $?
    [ "$(job_field $victim attempt)" = "2" ]; check "two attempts, the preemption spent no retry" $?
    n=$(slurm_jobs $victim | wc -l); [ "$n" -eq 2 ]; check "one Slurm job per attempt ($n)" $?
fi
finish
