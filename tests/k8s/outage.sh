#!/bin/bash
# outage.sh: the API server is unreachable for a while (connections
# refused): /readyz says why, jobs go on running in the cluster, a job
# submitted meanwhile waits in the queue (no start is tried on a cluster
# lathe cannot see), nothing is lost, and once the API is back the server
# catches up (the job's end and its progress are recorded) and /readyz is
# ready again.
. "$(dirname "$0")/harness/lib.sh"

k8s_start
srv_start
STEPS=40 CKPT_EVERY=5 write_job out team-a
submit "$T/out.yaml"; check "submit" $?
wait_state out running 90; check "running" $?
wait_for 60 sh -c "'$LATHE' logs out 2>/dev/null | grep -q 'step='"
dbl POST "/_double/outage?seconds=10" > /dev/null; check "the API goes away for 10 s" $?
wait_for 20 sh -c "curl -s 'http://$LATHE_SERVER/readyz' | grep -qi kubernetes"
check "readyz says the Kubernetes API is not reachable" $?
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$LATHE_SERVER/readyz"); [ "$code" = 503 ]
check "with 503 ($code)" $?
# a job submitted meanwhile waits: nothing is started on a cluster lathe cannot see
STEPS=5 write_job during team-a
submit "$T/during.yaml"; check "submit while the API is away" $?
sleep 2
[ "$(job_field during state)" = queued ]; check "it stays queued ($(job_field during state))" $?
wait_for 60 curl -sf "http://$LATHE_SERVER/readyz"; check "ready again once the API is back" $?
wait_state out succeeded 300; check "the job succeeded" $?
wait_state during succeeded 300; check "the job submitted during the outage succeeded" $?
[ "$(job_field during attempt)" = 1 ]; check "in its first attempt (no start was spent on the outage)" $?
"$LATHE" logs out > "$T/logs" 2>&1
grep -q "\[lathe-train\] done" "$T/logs"; check "its whole log came through" $?
steps=$(grep -c "step=" "$T/logs"); [ "$steps" -ge 40 ]; check "every step line is there once or more ($steps)" $?
dup=$(grep "step=" "$T/logs" | sort | uniq -d | wc -l); [ "$dup" -eq 0 ]; check "no line twice ($dup)" $?
finish
