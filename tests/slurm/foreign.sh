#!/bin/bash
# foreign.sh: lathe decides, and Slurm runs jobs lathe did not submit. A
# foreign job holds all 4 GPUs of n1; lathe reads that from scontrol show
# nodes (AllocTRES) and squeue (the job's comment is not lathe's), takes
# n1's GPUs out of its view, and places a job of 4 GPUs on n2 (pinned with
# --nodelist) instead of leaving it pending behind the foreign job.
. "$(dirname "$0")/harness/lib.sh"
slurm_setup
f=$(sbatch --parsable -J foreign -w n1 -o /dev/null --gres=gpu:4 --wrap 'sleep 300')
wait_for 30 sh -c "[ \"\$(squeue -h -j $f -o %T)\" = RUNNING ]"; check "a foreign job holds n1's 4 GPUs" $?
srv_start
wait_for 30 grep -q "node n1: 4 of its 4 GPUs not available (held by Slurm jobs lathe did not submit)" "$T/server.log"
check "lathe sees n1's GPUs held by a job it did not submit" $?
STEPS=8 write_job four team-a "$(printf '  resources:\n    gpu:\n      count: 4\n      type: L4-24GB')"
submit "$T/four.yaml"; check "submit a job of 4 GPUs" $?
wait_state four succeeded 120; check "it succeeded" $?
id=$(slurm_jobs four | awk '{print $1}' | head -1)
node=$(sacct_rows 30 1 'NF' -n -X -j "${id:-0}" -o NodeList -P | head -1)
[ "$node" = n2 ]; check "placed on n2, the node with free GPUs ($node)" $?
scancel "$f"
wait_for 30 grep -q "node n1: 0 of its 4 GPUs available again" "$T/server.log"
check "n1's GPUs come back once the foreign job ends" $?
finish
