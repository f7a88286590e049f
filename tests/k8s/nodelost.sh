#!/bin/bash
# nodelost.sh: the node a job runs on goes NotReady: its pod is lost
# (DisruptionTarget, DeletionByTaintManager), the attempt ends as lost, the
# node's GPUs leave lathe's scheduler, and the job is retried on the other
# node from its newest checkpoint.
. "$(dirname "$0")/harness/lib.sh"

k8s_start
srv_start
STEPS=${NL_STEPS:-60} CKPT_EVERY=3 write_job nl team-a
submit "$T/nl.yaml"; check "submit" $?
wait_state nl running 90; check "running" $?
wait_for 120 sh -c "ls '$T'/kube/volumes/team-a/lathe-checkpoints/nl/ 2>/dev/null | grep -q checkpoint-"
node=$(kc get pods -n team-a -l batch.kubernetes.io/job-name=lathe-nl-1 -o jsonpath='{.items[0].spec.nodeName}')
[ -n "$node" ]; check "its pod runs on $node" $?
dbl POST "/_double/nodes/$node/ready?value=false" > /dev/null; check "node $node goes NotReady" $?
wait_for 120 kc get job lathe-nl-2 -n team-a; check "attempt 2 is a new Job" $?
wait_for 120 sh -c "[ \"\$(KUBECONFIG='$T/kube/kubeconfig' kubectl get job lathe-nl-2 -n team-a -o jsonpath='{.spec.suspend}')\" = false ]"
check "attempt 2 was admitted" $?
other=$(kc get job lathe-nl-2 -n team-a -o json | "$PY" -c '
import json, sys
t = json.load(sys.stdin)["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
print(t["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0])')
[ -n "$other" ] && [ "$other" != "$node" ]; check "placed on the other node ($other)" $?
wait_state nl succeeded 400; check "it succeeded" $?
"$LATHE" describe job nl > "$T/describe" 2>&1
grep -qi "lost" "$T/describe"; check "the first attempt is recorded as lost" $?
"$LATHE" logs nl --attempt 2 > "$T/logs" 2>&1; grep -q "\[lathe-train\] resume" "$T/logs"; check "it resumed from a checkpoint" $?
grep -q "node $node" "$T/server.log"; check "the server noted the node's GPUs gone" $?
finish
