#!/bin/bash
# multinode.sh: a job on 2 nodes of 1 GPU is one Slurm job of --nodes=2;
# lathe slurm-step starts one task per node with srun, and each task sees
# NNODES=2, its NODE_RANK (SLURM_NODEID), MASTER_ADDR = the first host of
# SLURM_JOB_NODELIST, MASTER_PORT, NPROC_PER_NODE and the GPU Slurm gave it
# (CUDA_VISIBLE_DEVICES, also as LATHE_GPUS), as torchrun / ms-swift read
# them.
. "$(dirname "$0")/harness/lib.sh"
slurm_setup
srv_start
cat > "$T/mn.yaml" <<EOF2
apiVersion: lathe/v1
kind: LoRATrainingJob
metadata:
  name: mn
spec:
  team: team-a
  baseModel:
    path: $T/models/tiny
  trainingData:
    datasetPath: $T/datasets/train.jsonl
  resources:
    gpu:
      count: 1
      type: L4-24GB
    nodes: 2
  timeout:
    gracePeriod: 5s
  trainer:
    command: ["/bin/sh", "-c", "echo rank=\$NODE_RANK of=\$NNODES master=\$MASTER_ADDR:\$MASTER_PORT nproc=\$NPROC_PER_NODE gpus=\$LATHE_GPUS/\$CUDA_VISIBLE_DEVICES host=\$SLURMD_NODENAME"]
EOF2
submit "$T/mn.yaml"; check "submit a 2-node job" $?
wait_state mn succeeded 180; check "the 2-node job succeeded" $?
id=$(slurm_jobs mn | awk '{print $1}' | head -1)
scontrol show job "${id:-none}" > "$T/job.txt" 2>&1
grep -q "NumNodes=2" "$T/job.txt"; check "one Slurm job of 2 nodes" $?
"$LATHE" logs mn > "$T/logs" 2>&1
grep -Eq "^rank=0 of=2 master=n1:[0-9]+ nproc=1 gpus=0/0 host=n1" "$T/logs"; check "rank 0's environment" $?
grep -Eq "^rank=1 of=2 master=n1:[0-9]+ nproc=1 gpus=0/0 host=n2" "$T/logs"; check "rank 1's environment" $?
p0=$(grep -o 'master=n1:[0-9]*' "$T/logs" | sort -u | wc -l); [ "$p0" -eq 1 ]; check "one MASTER_PORT for both" $?
finish
