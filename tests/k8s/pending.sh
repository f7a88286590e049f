#!/bin/bash
# pending.sh: an admitted attempt whose pod Kubernetes cannot schedule
# (it asks for more memory than any node has) waits with Kubernetes' own
# words: the job's wait reason and a "pending" event say "Unschedulable:
# 0/2 nodes are available: ..."; a cancel still ends it.
. "$(dirname "$0")/harness/lib.sh"

k8s_start
srv_start
write_job huge team-a "$(printf '  resources:\n    memory: 4Ti')"
submit "$T/huge.yaml"; check "submit a job that asks for 4Ti of memory" $?
wait_for 90 sh -c "'$LATHE' describe job huge 2>/dev/null | grep -q Unschedulable"
check "describe shows Kubernetes' Unschedulable" $?
"$LATHE" describe job huge > "$T/describe" 2>&1
grep -q "Insufficient memory" "$T/describe"; check "with the scheduler's message (Insufficient memory)" $?
"$LATHE" get jobs huge -o json | grep -q "Unschedulable"; check "as the job's wait reason" $?
"$LATHE" cancel huge > /dev/null 2>&1; check "cancel" $?
wait_state huge cancelled 60; check "cancelled" $?
finish
