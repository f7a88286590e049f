#!/bin/bash
# array.sh: an experiment as one Slurm job array when Slurm decides
# (slurm.decide: slurm, slurm.arrayMax). Its 3 jobs with maxConcurrent 2
# go in as ONE sbatch --array=0-2%2 (one array job id, throttle 2); at
# most 2 tasks run at once (sampled from squeue); each task is one lathe
# attempt (its handle names the array task) and all 3 succeed.
# Then an array with %1: its pending tasks (one collapsed squeue record)
# wait on JobArrayTaskLimit; cancelling one pending task (scancel ID_TASK)
# ends that job only, the running task goes on. Last, the server is
# killed with SIGKILL at random instants while it submits an array: every
# job succeeds and no attempt goes to Slurm twice (Slurm tasks <= attempts).
. "$(dirname "$0")/harness/lib.sh"
slurm_setup
write_server "    decide: slurm
    arrayMax: 8"
srv_start

cat > "$T/exp.yaml" <<EOF2
apiVersion: lathe/v1
kind: LoRAExperiment
metadata:
  name: arr
spec:
  maxConcurrent: 2
  template:
    team: team-a
    method: lora
    baseModel:
      path: $T/models/tiny
    lora:
      targetModules: [all-linear]
    trainingData:
      datasetPath: $T/datasets/train.jsonl
    hyperparams:
      maxSteps: 40
      learningRate: 5e-3
      warmupSteps: 2
      maxSeqLength: 64
    timeout:
      gracePeriod: 20s
    trainer:
      env:
        LATHE_THREADS: "1"
  matrix:
    lora.rank: [4, 8, 16]
EOF2
submit "$T/exp.yaml"; check "submit the experiment" $?

# sample Slurm's view while the array runs: the most tasks running at once
states() {
    "$LATHE" get jobs -o json 2>/dev/null | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
print(" ".join(sorted(it.get("state", "") for it in d.get("items", []))))'
}
max=0; seen=0; end=$((SECONDS + 240))
while [ $SECONDS -lt $end ]; do
    r=$(squeue -h -t R -o '%K %o' 2>/dev/null | awk -v t="$T" 'index($2, t) == 1 && $1 != "N/A"' | wc -l)
    [ "$r" -gt "$max" ] && max=$r
    [ "$r" -gt 0 ] && seen=1
    if [ ! -s "$T/array.txt" ]; then # the array as slurmctld holds it (its throttle)
        a=$(squeue -h -o '%F %o' 2>/dev/null | awk -v t="$T" 'index($2, t) == 1 {print $1}' | head -1)
        [ -n "$a" ] && scontrol show job "$a" > "$T/array.txt" 2>&1
    fi
    [ "$(states)" = "succeeded succeeded succeeded" ] && break
    sleep 0.3
done
s=$(states)
[ "$s" = "succeeded succeeded succeeded" ]; check "all 3 jobs succeed ($s)" $?
[ "$seen" -eq 1 ] && [ "$max" -le 2 ]; check "at most 2 tasks ran at once ($max)" $?

# one array: every task of this test's jobs has the same array job id
sacct_rows 60 3 '$2 == "lathe-team-a-arr-array" && index($3, t) == 1 && $1 ~ /_[0-9]+$/' \
    -n -X -P -o JobID,JobName,WorkDir%300 -S now-1hour > "$T/sacct.txt"
arrays=$(cut -d'|' -f1 "$T/sacct.txt" | cut -d_ -f1 | sort -u | wc -l)
tasks=$(cut -d'|' -f1 "$T/sacct.txt" | grep -c '_')
[ "$arrays" -eq 1 ] && [ "$tasks" -eq 3 ]; check "one sbatch: one array job with 3 tasks ($arrays arrays, $tasks tasks)" $?
aid=$(cut -d'|' -f1 "$T/sacct.txt" | cut -d_ -f1 | head -1)
grep -q "ArrayTaskThrottle=2" "$T/array.txt"; check "--array=0-2%2: its throttle is 2" $?
n=$(grep -l "\"slurm_job_id\":${aid:-0}," "$T/data"/jobs/*/attempt-1/handle.json 2>/dev/null | xargs -r grep -l '"array_task"' | wc -l)
[ "$n" -eq 3 ]; check "each attempt's handle names the array and its task ($n)" $?

# %1: one runs, the pending two wait on the array's throttle; cancel one of them
sed -e 's/name: arr$/name: arc/' -e 's/maxConcurrent: 2/maxConcurrent: 1/' -e 's/maxSteps: 40/maxSteps: 100000/' \
    "$T/exp.yaml" > "$T/exp2.yaml"
submit "$T/exp2.yaml"; check "submit the second experiment" $?
running() { squeue -h -t R -o '%K %o' 2>/dev/null | awk -v t="$T" 'index($2, t) == 1 && $1 != "N/A"' | wc -l; }
wait_for 90 sh -c "[ \$(squeue -h -t R -o '%K %o' | awk -v t='$T' 'index(\$2, t) == 1' | wc -l) -eq 1 ]"
check "one task of the %1 array runs" $?
wait_for 60 sh -c "'$LATHE' describe job arc-r16 2>/dev/null | grep -q 'JobArrayTaskLimit'"
check "a pending task's wait reason is the array's throttle (JobArrayTaskLimit)" $?
"$LATHE" cancel arc-r16 > /dev/null 2>&1; check "cancel the pending task's job" $?
wait_state arc-r16 cancelled 60; check "it is cancelled" $?
sleep 2
[ "$(running)" -eq 1 ] && [ "$(job_field arc-r4 state)" = running ]; check "the running task goes on" $?
s=$(job_field arc-r8 state); [ "$s" = running ] || [ "$s" = queued ]; check "the other pending task still waits ($s)" $?
for n in arc-r4 arc-r8; do "$LATHE" cancel $n > /dev/null 2>&1; done
wait_state arc-r4 cancelled 90; check "cancel the running task's job" $?
wait_state arc-r8 cancelled 60; check "and the last one" $?

# SIGKILL during the array's submission: re-attached, never twice
sed -e 's/name: arr$/name: ark/' -e 's/maxSteps: 40/maxSteps: 20/' "$T/exp.yaml" > "$T/exp3.yaml"
submit "$T/exp3.yaml"; check "submit the third experiment" $?
seed=${SLURM_RESTART_SEED:-$RANDOM}
echo "kill instants from seed $seed"
RANDOM=$seed
for round in 1 2 3; do
    sleep "0.$((RANDOM % 9 + 1))"
    srv_kill
    srv_start
done
for n in ark-r4 ark-r8 ark-r16; do wait_state $n succeeded 240; check "$n succeeded" $?; done
att=0; for n in ark-r4 ark-r8 ark-r16; do att=$((att + $(job_field $n attempt))); done
tasks=$(sacct_rows 60 3 '$2 == "lathe-team-a-ark-array" && index($3, t) == 1 && $1 ~ /_[0-9]+$/' \
    -n -X -P -o JobID,JobName,WorkDir%300 -S now-1hour | grep -c '_')
[ "$tasks" -ge 3 ] && [ "$tasks" -le "$att" ]
check "no attempt went to Slurm twice ($tasks array tasks for $att attempts)" $?
finish
