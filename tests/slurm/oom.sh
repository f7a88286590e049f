#!/bin/bash
# oom.sh: a job over its --mem (resources.memory 100Mi; its first attempt
# touches 300 MiB) is an out-of-memory end: where Slurm's cgroups hold the
# job to --mem its state is OUT_OF_MEMORY; on slurm-local (no cgroup task
# plugin) lathe slurm-step watches the trainer's memory and kills it with
# "lathe: out of memory". Either way lathe re-plans the job (half the
# micro-batch, twice the accumulation, gradient checkpointing) and
# retries; the second attempt stays under its --mem and succeeds.
. "$(dirname "$0")/harness/lib.sh"
slurm_setup
srv_start
write_job oomy team-a "  resources:
    memory: 100Mi"
"$PY" - "$T/oomy.yaml" <<'PYEOF'
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
d["spec"]["trainingData"]["batchSize"] = 4
d["spec"]["trainer"] = {"command": ["/bin/sh", "-c",
    'echo "attempt $LATHE_ATTEMPT"; if [ "$LATHE_ATTEMPT" = 1 ]; then '
    'exec /usr/bin/python3 -c "import time; x = b\'a\' * (300 << 20); time.sleep(30)"; fi; echo fine']}
yaml.safe_dump(d, open(sys.argv[1], "w"))
PYEOF
submit "$T/oomy.yaml"; check "submit" $?
wait_state oomy succeeded 180; check "it succeeded on its second attempt" $?
[ "$(job_field oomy attempt)" = "2" ]; check "two attempts" $?
id=$(slurm_jobs oomy | awk '{print $1}' | sort -n | head -1)
scontrol show job "${id:-none}" 2>/dev/null | grep -q "MinMemoryNode=100M"; check "--mem=100M" $?
"$LATHE" describe job oomy > "$T/describe" 2>&1
grep -qi "out of memory" "$T/describe"; check "the first attempt ended out of memory" $?
grep -Eqi "re-?plan|micro-batch|batch 2|batchSize" "$T/describe"; check "and the job was re-planned" $?
finish
