#!/bin/bash
# restart.sh: the server killed with SIGKILL at random instants, many
# times, while jobs are queued, admitted and running: every new server
# re-attaches to the Jobs it made, every job succeeds, and no attempt ever
# has two Jobs (the double counts every create; a 409 is adopted by the
# labels that say which job and attempt a Job is).
. "$(dirname "$0")/harness/lib.sh"

k8s_start
srv_start
for n in r1 r2 r3 r4 r5; do
    STEPS=${R_STEPS:-30} CKPT_EVERY=5 write_job $n team-a
    submit "$T/$n.yaml"; check "submit $n" $?
done
kills=${KILLS:-8}
for i in $(seq "$kills"); do
    sleep "$(awk -v s=$RANDOM 'BEGIN { srand(s); printf "%.2f", 0.3 + rand() * 2.5 }')"
    srv_kill
    srv_start
done
check "killed and restarted the server $kills times" 0
for n in r1 r2 r3 r4 r5; do wait_state $n succeeded 500; check "$n succeeded" $?; done
dbl GET /_double/stats > "$T/stats.json"
"$PY" - "$T/stats.json" <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1]))
creates = s.get("creates", {}).get("batch/v1/jobs", 0)
print("  Job creates seen by the API:", creates)
PYEOF
# every Job is one (job, attempt), and there is one create of each name at most
kc get jobs -n team-a -o json > "$T/jobs.json"
"$PY" - "$T/jobs.json" <<'PYEOF'
import collections, json, sys
items = json.load(open(sys.argv[1]))["items"]
pairs = collections.Counter((j["metadata"]["labels"]["lathe.dev/job"], j["metadata"]["labels"]["lathe.dev/attempt"]) for j in items)
dup = [p for p, n in pairs.items() if n > 1]
print("  Jobs:", sorted(j["metadata"]["name"] for j in items))
sys.exit(1 if dup else 0)
PYEOF
check "no attempt has two Jobs" $?
bad=$(kc get pods -n team-a -o json | "$PY" -c '
import collections, json, sys
pods = json.load(sys.stdin)["items"]
c = collections.Counter(p["metadata"]["labels"].get("batch.kubernetes.io/job-name") for p in pods)
print(sum(1 for n in c.values() if n > 1))')
[ "$bad" = "0" ]; check "no Job ran its trainer twice" $?
finish
