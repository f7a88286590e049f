#!/bin/bash
# train.sh: a job submitted through lathe's API runs as a Slurm batch job
# on a real Slurm (slurm-local): sbatch with the issue's options (job name
# and comment naming lathe's job and attempt, --gres, --signal, --requeue,
# --nodelist from lathe's placement, the QOS of its priority class), the
# built-in trainer trains on the node, its progress reaches lathe from the
# output file, and the job succeeds with its adapter in the job's folder.
# One Slurm job for one attempt.
. "$(dirname "$0")/harness/lib.sh"
slurm_setup
srv_start

write_job train-r8 team-a "  priorityClassName: urgent"
submit "$T/train-r8.yaml"; check "submit" $?
wait_state train-r8 succeeded 240; check "the job succeeded" $?

slurm_jobs train-r8 > "$T/sj"
n=$(wc -l < "$T/sj"); msg="one Slurm job for one attempt ($n: $(tr '\n' ' ' < "$T/sj"))"
[ "$n" -eq 1 ]; check "$msg" $?
id=$(awk '{print $1}' "$T/sj" | head -1)
[ -n "$id" ] || id=none
scontrol show job "$id" > "$T/job.txt" 2>&1
grep -q "JobName=lathe-team-a-train-r8-1" "$T/job.txt"; check "the job name names lathe's job and attempt" $?
grep -q "Comment=lathe job=team-a/train-r8 attempt=1" "$T/job.txt"; check "the comment names it too" $?
grep -q "Requeue=1" "$T/job.txt"; check "--requeue" $?
grep -qE "QOS=high" "$T/job.txt"; check "the priority class's QOS (urgent -> high)" $?
grep -qE "ReqNodeList=n[12]" "$T/job.txt"; check "--nodelist from lathe's placement" $?
grep -q "Account=ai-training" "$T/job.txt"; check "the team's account from the policy (slurmAccount)" $?
grep -qE "TresPerNode=gres:gpu:1|TresPerNode=gpu:1" "$T/job.txt"; check "--gres=gpu:1" $?
grep -q "StdOut=$T/data/" "$T/job.txt"; check "--output in the job's folder" $?
script=$(find "$T/data" -name slurm-batch.sh | head -1)
grep -q "exec $LATHE slurm-step \"\$1\"" "$script" && ! grep -q "train.jsonl" "$script"
check "the batch script only execs lathe slurm-step with the step file" $?

find "$T/data" -name adapter_model.safetensors | grep -q .; check "the PEFT adapter is in the job's folder" $?
"$LATHE" logs train-r8 > "$T/logs" 2>&1; grep -q "\[lathe-train\] done" "$T/logs"; check "lathe logs shows the output file" $?
"$LATHE" describe job train-r8 > "$T/describe" 2>&1
grep -q "attempt 1 started (Slurm job $id)" "$T/describe"; check "describe names the attempt's Slurm job ($id)" $?
loss=$(job_field train-r8 progress.loss); [ -n "$loss" ]; check "progress (loss $loss) from the output file" $?
finish
