#!/bin/bash
# operator_failover.sh: two replicas behind one Lease. The leader is
# killed (SIGKILL, as a node loss would) while a job trains and another
# waits; the standby takes the Lease, rebuilds its store from the API and
# carries on: the running job keeps its Job (not made again, no second
# attempt) and succeeds, the queued one runs, an object applied while no
# one led is served too. No job is lost or run twice. Then the leader dies
# while an attempt is being stopped: the next leader ends that attempt and
# resumes the job from its checkpoint.
. "$(dirname "$0")/harness/lib.sh"

k8s_start
op_setup
op_start 1
wait_for 60 op_ready 1; check "replica 1 leads" $?
op_start 2
sleep 1
! op_ready 2; check "replica 2 is a standby" $?

EXTRA="  resources:
    gpu:
      count: 2" cr_job long team-a 60
kc apply -f "$T/cr-long.yaml" > /dev/null 2>&1; check "apply a job of 2 GPUs that trains a while" $?
EXTRA="  resources:
    gpu:
      count: 2" cr_job second team-a 12
wait_phase team-a long Running 120; check "it runs" $?
kc apply -f "$T/cr-second.yaml" > /dev/null 2>&1
has_loss() { [ -n "$(cr_field team-a long .status.loss)" ]; }
wait_for 120 has_loss; check "it reports a loss before the leader dies" $?
uid1=$(kc get job lathe-long-1 -n team-a -o 'jsonpath={.metadata.uid}')
wait_phase team-a second Queued 60; check "the second waits for the team's GPUs (quota 2)" $?

op_kill 1
EXTRA= cr_job late team-b 8
kc apply -f "$T/cr-late.yaml" > /dev/null 2>&1; check "apply an object while no replica leads" $?
wait_for 60 op_ready 2; check "replica 2 takes the Lease and becomes ready" $?
[ "$(kc get lease lathe-server -n lathe-system -o 'jsonpath={.spec.holderIdentity}')" = replica-2 ]
check "the Lease names replica-2" $?
grep -q "objects restored from the API" "$T/server-2.log"; check "replica 2 rebuilt its store from the API" $?

wait_phase team-a long Succeeded 300; check "the running job succeeds under the new leader" $?
[ "$(kc get job lathe-long-1 -n team-a -o 'jsonpath={.metadata.uid}')" = "$uid1" ]
check "its Job is the same object (not made again)" $?
! kc get job lathe-long-2 -n team-a > /dev/null 2>&1; check "no second attempt was made" $?
[ "$(cr_field team-a long .status.attempts)" = 1 ]; check "status.attempts stays 1" $?
wait_phase team-a second Succeeded 300; check "the queued job runs and succeeds" $?
wait_phase team-b late Succeeded 300; check "the object applied without a leader succeeds" $?
n=$(kc get jobs -n team-a -o name | grep -c lathe-)
[ "$n" = 2 ]; check "team-a has exactly its two Jobs ($n)" $?

# the leader dies while it stops an attempt (a preemption, a cancel: its
# Job suspended, the trainer checkpointing): the new leader counts that
# attempt as over, removes its Job and resumes from the checkpoint
op_start 1
CKPT_EVERY=3 cr_job paused team-b 300 # long enough to be stopped mid-run
kc apply -f "$T/cr-paused.yaml" > /dev/null 2>&1
wait_phase team-b paused Running 120; check "a third job runs (leader replica 2)" $?
has_ckpt() { [ -n "$(cr_field team-b paused .status.checkpoint.step)" ]; }
wait_for 120 has_ckpt; check "it saved a checkpoint" $?
op_kill 2
kc patch job lathe-paused-1 -n team-b --type=merge -p '{"spec":{"suspend":true}}' > /dev/null 2>&1
check "its Job is suspended while no replica leads" $?
wait_for 60 op_ready 1; check "replica 1 leads again" $?
second() { kc get job lathe-paused-2 -n team-b > /dev/null 2>&1; }
wait_for 120 second; check "the stopped attempt is over: attempt 2's Job is made" $?
gone1() { ! kc get job lathe-paused-1 -n team-b > /dev/null 2>&1; }
wait_for 60 gone1; check "the stopped attempt's Job is removed" $?
wait_phase team-b paused Succeeded 300; check "the job succeeds" $?
[ "$(cr_field team-b paused .status.attempts)" = 2 ]; check "in two attempts" $?
export LATHE_SERVER; LATHE_SERVER=$(cat "$T/data-1/server.addr")
export LATHE_TOKEN; LATHE_TOKEN=$(cat "$T/data-1/admin-token")
"$LATHE" logs paused --team team-b --attempt 2 > "$T/paused2.log" 2>&1
grep -q "\[lathe-train\] resume" "$T/paused2.log"; check "attempt 2 resumed from the checkpoint" $?
finish
