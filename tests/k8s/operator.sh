#!/bin/bash
# operator.sh: operator mode with the real kubectl. A LoRATrainingJob
# applied with `kubectl apply -f` into a team's namespace is validated,
# planned, queued and run as a batch/v1 Job owned by the object; `kubectl
# get lorajobs` shows its state, GPUs and loss as it trains; it succeeds.
# An invalid object gets the Invalid condition with lathe validate's
# messages, and is tried again once fixed. Deleting an object cancels its
# job. The store is a cache: the standby answers 503 until it leads.
. "$(dirname "$0")/harness/lib.sh"

k8s_start
op_setup
op_start 1
wait_for 60 op_ready 1; check "the replica takes the Lease and becomes ready" $?
[ "$(kc get lease lathe-server -n lathe-system -o 'jsonpath={.spec.holderIdentity}')" = replica-1 ]
check "the Lease lathe-system/lathe-server names replica-1" $?

# a job that trains, in the seed's group (kubectl get lorajobs finds it first)
cr_job tiny team-a 16
kc apply -f "$T/cr-tiny.yaml" > "$T/apply.out" 2>&1; check "kubectl apply -f of a LoRATrainingJob" $?
wait_phase team-a tiny Running 120; check "its phase becomes Running" $?
wait_for 60 kc get job lathe-tiny-1 -n team-a; check "its Job lathe-tiny-1 exists in team-a" $?
kc get job lathe-tiny-1 -n team-a -o json > "$T/job.json"
"$PY" - "$T/job.json" "$(cr_field team-a tiny .metadata.uid)" <<'PYEOF'
import json, sys
j = json.load(open(sys.argv[1])); uid = sys.argv[2]
m = j["metadata"]
refs = m.get("ownerReferences", [])
ok = (m["labels"].get("lathe.dev/owner-uid") == uid and
      any(r["uid"] == uid and r["kind"] == "LoRATrainingJob" and r.get("controller") for r in refs) and
      "lathe.dev/placement" in m.get("annotations", {}))
sys.exit(0 if ok else 1)
PYEOF
check "the Job is owned by the object (ownerReference, owner-uid label) and annotated with its placement" $?
# kubectl get lorajobs shows state, GPUs and loss while it trains
got_loss=1
for _ in $(seq 120); do
    kc get lorajobs -n team-a > "$T/get.out" 2>&1
    if grep -q "^tiny *Running *1 *[0-9.]" "$T/get.out"; then got_loss=0; break; fi
    [ "$(cr_field team-a tiny .status.phase)" = Succeeded ] && break
    sleep 0.5
done
check "kubectl get lorajobs shows Running, 1 GPU and a loss ($(tail -1 "$T/get.out"))" $got_loss
kc get lorajobs -n team-a | head -1 | grep -q "STATE *GPUS *LOSS *AGE"; check "the printer columns are STATE GPUS LOSS AGE" $?
wait_phase team-a tiny Succeeded 300; check "the job succeeds" $?
[ "$(cr_field team-a tiny '.status.conditions[?(@.type=="Succeeded")].status')" = True ]
check "the Succeeded condition is True" $?
[ -n "$(cr_field team-a tiny .status.checkpoint.step)" ]; check "the status names the newest checkpoint" $?
kc get events -n team-a > "$T/events.out" 2>&1
grep -q "loratrainingjob/tiny *Running" "$T/events.out" &&
    grep -q "loratrainingjob/tiny *Succeeded after 1 attempt" "$T/events.out"
check "kubectl get events shows the object's phases" $?

# an invalid object: the Invalid condition with lathe's messages, then fixed
cr_job bad team-a
sed -i 's/    gracePeriod: 20s/    gracePeriod: 20s\n    maxDuration: "8 hours"/' "$T/cr-bad.yaml"
kc apply -f "$T/cr-bad.yaml" > "$T/apply-bad.out" 2>&1; check "kubectl apply of an object lathe refuses" $?
wait_phase team-a bad Invalid 60; check "its phase is Invalid" $?
msg=$(cr_field team-a bad '.status.conditions[?(@.type=="Invalid")].message')
"$LATHE" validate "$T/cr-bad.yaml" > "$T/validate.out" 2>&1
want=$(grep -o "spec.timeout.maxDuration: not a duration" "$T/validate.out" | head -1)
[ -n "$want" ] && case "$msg" in *"$want"*) true ;; *) false ;; esac
check "the Invalid condition holds lathe validate's message ($want)" $?
sed -i '/    maxDuration: "8 hours"/d' "$T/cr-bad.yaml"
sed -i 's/    maxSteps: 12/    maxSteps: 400/' "$T/cr-bad.yaml"
kc apply -f "$T/cr-bad.yaml" > /dev/null 2>&1
wait_phase team-a bad Running 120; check "fixed, the same object is queued and runs" $?

# deleting the object cancels its job: its Job goes, the store drops it
kc delete lorajob bad -n team-a > /dev/null 2>&1; check "kubectl delete of a running object" $?
gone() { ! kc get job lathe-bad-1 -n team-a > /dev/null 2>&1; }
wait_for 90 gone; check "its Job is deleted" $?
export LATHE_SERVER; LATHE_SERVER=$(cat "$T/data-1/server.addr")
export LATHE_TOKEN; LATHE_TOKEN=$(cat "$T/data-1/admin-token")
dropped() { ! "$LATHE" get jobs bad --team team-a > /dev/null 2>&1; }
wait_for 60 dropped; check "the cancelled job leaves the store's cache" $?
grep -q "LoRATrainingJob team-a/bad deleted" "$T/server-1.log"; check "the server log says the object was deleted" $?

# the HTTP API reads; its writes go through kubectl (the store is a cache)
"$LATHE" get jobs tiny --team team-a -o json > "$T/get-tiny.json" 2>&1
grep -q '"state": *"succeeded"' "$T/get-tiny.json"; check "lathe get jobs shows the object's job" $?
code=$(curl -s -o "$T/post.out" -w '%{http_code}' -X POST -H "Authorization: Bearer $LATHE_TOKEN" \
    --data-binary @"$T/cr-tiny.yaml" "http://$LATHE_SERVER/v1/jobs")
[ "$code" = 409 ] && grep -q "kubectl apply" "$T/post.out"
check "POST /v1/jobs answers 409 with the kubectl to use ($code)" $?

# a standby answers 503 with who leads
op_start 2
sleep 2
code=$(curl -s -o "$T/standby.out" -w '%{http_code}' "http://$(cat "$T/data-2/server.addr")/readyz")
[ "$code" = 503 ] && grep -q "held by replica-1" "$T/standby.out"
check "the standby's readyz is 503 and names the leader ($code)" $?
curl -sf "http://$(cat "$T/data-2/server.addr")/healthz" > /dev/null; check "the standby's healthz is 200" $?
finish
