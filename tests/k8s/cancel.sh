#!/bin/bash
# cancel.sh: `lathe cancel` of a running job suspends its Job: the pod gets
# SIGTERM and the grace period, the built-in trainer saves a checkpoint and
# stops; then the Job is deleted (foreground) and the job is cancelled.
# A job cancelled while it waits has its suspended Job removed too.
. "$(dirname "$0")/harness/lib.sh"

k8s_start
srv_start
STEPS=100000 CKPT_EVERY=100000 write_job long team-a
submit "$T/long.yaml"; check "submit" $?
wait_state long running 120; check "running" $?
# wait for training steps in the log
wait_for 120 sh -c "'$LATHE' logs long 2>/dev/null | grep -q 'step='"; check "it trains" $?
"$LATHE" cancel long > "$T/cancel.out" 2>&1; check "lathe cancel" $?
wait_state long cancelled 90; check "cancelled" $?
"$LATHE" logs long > "$T/logs" 2>&1
grep -q "\[lathe-train\] stopped" "$T/logs"; check "the trainer got SIGTERM and stopped (checkpoint saved)" $?
find "$T/kube/volumes/team-a/lathe-checkpoints/long" -maxdepth 1 -name 'checkpoint-*' | grep -q .
check "its checkpoint is in the PVC" $?
wait_for 30 sh -c "! KUBECONFIG='$T/kube/kubeconfig' kubectl get job lathe-long-1 -n team-a >/dev/null 2>&1"
check "the Job was deleted" $?
n=$(kc get pods -n team-a -l batch.kubernetes.io/job-name=lathe-long-1 -o name 2>/dev/null | wc -l)
[ "$n" -eq 0 ]; check "no pod left ($n)" $?

# a job that waits (team-a may hold 3 GPUs: quota 2 + borrowing 1; two jobs of 2 do not fit)
for n in w1 w2; do
    STEPS=100000 write_job $n team-a "$(printf '  resources:\n    gpu:\n      count: 2\n      type: L4-24GB')"
    submit "$T/$n.yaml"; check "submit $n (2 GPUs)" $?
done
wait_state w1 running 60; check "w1 runs" $?
wait_for 60 kc get job lathe-w2-1 -n team-a; check "w2's Job exists while it waits" $?
[ "$(kc get job lathe-w2-1 -n team-a -o jsonpath='{.spec.suspend}')" = "true" ]; check "suspended" $?
[ "$(job_field w2 state)" = "queued" ]; check "w2 is queued" $?
"$LATHE" cancel w2 > /dev/null 2>&1; check "cancel w2" $?
wait_for 30 sh -c "! KUBECONFIG='$T/kube/kubeconfig' kubectl get job lathe-w2-1 -n team-a >/dev/null 2>&1"
check "its suspended Job was removed" $?
"$LATHE" cancel w1 > /dev/null 2>&1
wait_state w1 cancelled 90; check "w1 cancelled" $?
finish
