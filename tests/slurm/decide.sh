#!/bin/bash
# decide.sh: quotas and priorities from lathe and from Slurm.
#  - lathe's quota: team-b may hold 1 GPU; of its two jobs one runs and
#    the other waits in lathe's queue (reason: its quota), never reaching
#    Slurm, although Slurm has room.
#  - Slurm decides (slurm.decide: slurm): lathe submits with no --nodelist
#    and shows slurmctld's pending reason as the job's wait reason while
#    jobs lathe did not submit hold every GPU; when they end, Slurm places
#    the job and it succeeds.
#  - the priority class's QOS goes with the job (urgent -> --qos=high).
. "$(dirname "$0")/harness/lib.sh"
slurm_setup
"$PY" - "$T/cluster.yaml" <<'PYEOF'
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
for t in d["spec"]["teams"]:
    if t["name"] == "team-b":
        t["quota"] = {"L4-24GB": 1}
        t["borrowingLimit"] = {"L4-24GB": 0}
yaml.safe_dump(d, open(sys.argv[1], "w"))
PYEOF
write_server "    decide: slurm"
srv_start

# lathe's quota
for n in b1 b2; do
    STEPS=100000 write_job $n team-b
    submit "$T/$n.yaml"; check "submit $n" $?
done
wait_for 60 sh -c "[ \"\$('$LATHE' get jobs -o json 2>/dev/null | $PY -c 'import json,sys; d=json.load(sys.stdin); print(sum(1 for j in d.get(\"items\", []) if j.get(\"state\") == \"running\"))')\" = 1 ]"
check "one of team-b's jobs runs" $?
sleep 2
q=$(for n in b1 b2; do job_field $n state; done | grep -c queued)
[ "$q" -eq 1 ]; check "the other waits in lathe's queue ($q queued)" $?
"$LATHE" describe job b2 > "$T/b2" 2>&1; "$LATHE" describe job b1 > "$T/b1" 2>&1
cat "$T/b1" "$T/b2" | grep -qi "quota"; check "its wait reason is team-b's quota" $?
n=$(for n in b1 b2; do slurm_jobs $n; done | wc -l); [ "$n" -eq 1 ]; check "only the running one reached Slurm ($n)" $?
for n in b1 b2; do "$LATHE" cancel $n > /dev/null 2>&1; done

# Slurm decides: jobs lathe did not submit hold all 8 GPUs
f1=$(sbatch --parsable -J foreign -o /dev/null --gres=gpu:4 -N1 --wrap 'sleep 300')
f2=$(sbatch --parsable -J foreign -o /dev/null --gres=gpu:4 -N1 --wrap 'sleep 300')
wait_for 30 sh -c "[ \$(squeue -h -t R -n foreign | wc -l) -eq 2 ]"; check "two foreign jobs hold every GPU" $?
STEPS=12 write_job sd team-a "  priorityClassName: urgent"
submit "$T/sd.yaml"; check "submit" $?
wait_for 60 sh -c "'$LATHE' describe job sd 2>/dev/null | grep -q 'Slurm: pending (Resources)'"
check "its wait reason is slurmctld's pending reason (Resources)" $?
id=$(slurm_jobs sd | awk '{print $1}' | head -1)
scontrol show job "${id:-none}" > "$T/sd.txt" 2>&1
grep -q "ReqNodeList=(null)" "$T/sd.txt"; check "no --nodelist: Slurm places it" $?
grep -q "QOS=high" "$T/sd.txt"; check "the priority class's QOS" $?
scancel "$f1" "$f2"
wait_state sd succeeded 120; check "once the GPUs are free Slurm runs it and it succeeds" $?
finish
