#!/bin/bash
# oom.sh: a container the OOM killer ends (the pod says OOMKilled, exit
# code 137) is an out-of-memory end: lathe re-plans the job (half the
# micro-batch, twice the accumulation, gradient checkpointing) and retries;
# here the trainer runs out of memory on its first attempt only.
. "$(dirname "$0")/harness/lib.sh"

k8s_start
srv_start
write_job oomy team-a
"$PY" - "$T/oomy.yaml" <<'PYEOF'
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
d["spec"]["trainingData"]["batchSize"] = 4
d["spec"]["trainer"] = {"image": "lathe:test", "command": ["/bin/sh", "-c",
    'echo "attempt $LATHE_ATTEMPT"; if [ "$LATHE_ATTEMPT" = 1 ]; then kill -KILL $$; fi; echo fine']}
yaml.safe_dump(d, open(sys.argv[1], "w"))
PYEOF
submit "$T/oomy.yaml"; check "submit" $?
wait_state oomy succeeded 180; check "it succeeded on its second attempt" $?
[ "$(job_field oomy attempt)" = "2" ]; check "two attempts" $?
"$LATHE" describe job oomy > "$T/describe" 2>&1
grep -qi "out of memory" "$T/describe"; check "the first attempt ended out of memory (OOMKilled)" $?
grep -Eqi "re-?plan|micro-batch|batch 2|batchSize" "$T/describe"; check "and the job was re-planned" $?
kc get job lathe-oomy-2 -n team-a -o json | grep -q '"LATHE_ATTEMPT"'; check "attempt 2 is its own Job" $?
finish
