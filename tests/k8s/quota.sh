#!/bin/bash
# quota.sh: a team's jobs never hold more GPUs than its quota plus what
# the borrowing rules allow, however many it submits; the Kubernetes pods
# lathe admitted show the same (counted by namespace at every look).
. "$(dirname "$0")/harness/lib.sh"

k8s_start
srv_start
for n in q1 q2 q3 q4 q5; do
    STEPS=25 CKPT_EVERY=5 write_job $n team-a
    submit "$T/$n.yaml"; check "submit $n" $?
done
max=0
end=$((SECONDS + 120))
while [ $SECONDS -lt $end ]; do
    n=$(kc get pods -n team-a -o json 2>/dev/null | "$PY" -c '
import json, sys
pods = json.load(sys.stdin)["items"]
print(sum(1 for p in pods if p["status"].get("phase") in ("Pending", "Running") and not p["metadata"].get("deletionTimestamp")))' 2>/dev/null)
    [ -n "$n" ] && [ "$n" -gt "$max" ] && max=$n
    done_n=0
    for q in q1 q2 q3 q4 q5; do [ "$(job_field $q state)" = succeeded ] && done_n=$((done_n + 1)); done
    [ $done_n -eq 5 ] && break
    sleep 1
done
[ "$max" -le 3 ]; check "team-a never held more than 3 GPUs (quota 2 + borrowing 1): at most $max pods" $?
[ "$max" -ge 2 ]; check "and did use its quota ($max)" $?
for q in q1 q2 q3 q4 q5; do wait_state $q succeeded 300; check "$q succeeded" $?; done
finish
