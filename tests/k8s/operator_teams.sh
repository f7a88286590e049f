#!/bin/bash
# operator_teams.sh: namespaces are teams. team-b is not in the Cluster
# file: its quota is its namespace's ResourceQuota on requests.nvidia.com/gpu
# (1), with no borrowing; the priority classes are the cluster's
# PriorityClass objects. On one node of 3 GPUs team-a runs 3 jobs (one on a
# borrowed GPU); team-b's urgent job takes it back (preemption between
# namespaces); an object asking for more than team-b's quota is Invalid;
# a user's own suspended Job labelled lathe.dev/queue waits under team-b's
# quota and is admitted once the urgent job is done.
. "$(dirname "$0")/harness/lib.sh"

cat > "$T/one-node.json" <<'EOF2'
[{"name": "gpu-a1", "gpus": 3, "product": "NVIDIA-L4", "memoryMiB": 23034, "cpu": "16",
  "memory": "64Gi", "labels": {"rack-id": "rack-1"}}]
EOF2
k8s_start "$T/one-node.json"
op_setup
# the Cluster file keeps team-a only and no priority class: the rest is the API's
op_team_b_from_api; check "a ResourceQuota of 1 GPU in team-b" $?
op_start 1
wait_for 60 op_ready 1; check "the operator leads" $?
export LATHE_SERVER; LATHE_SERVER=$(cat "$T/data-1/server.addr")
export LATHE_TOKEN; LATHE_TOKEN=$(cat "$T/data-1/admin-token")
curl -sf -H "Authorization: Bearer $LATHE_TOKEN" "http://$LATHE_SERVER/v1/teams" > "$T/teams.json"
"$PY" - "$T/teams.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
items = d.get("items", d)
b = [t for t in items if t.get("name") == "team-b"]
print(json.dumps(b))
sys.exit(0 if b and "1" in json.dumps(b[0].get("quota")) else 1)
PYEOF
check "team-b's quota is its ResourceQuota's 1 GPU" $?
curl -sf -H "Authorization: Bearer $LATHE_TOKEN" "http://$LATHE_SERVER/v1/priorityclasses" | grep -q '"urgent"'
check "the PriorityClass objects are lathe's priority classes" $?

# long enough that none ends before the urgent job comes (a preemption is what is tested)
for n in a1 a2 a3; do CKPT_EVERY=3 cr_job $n team-a 300; kc apply -f "$T/cr-$n.yaml" > /dev/null 2>&1; done
for n in a1 a2 a3; do wait_phase team-a $n Running 120; check "$n runs" $?; done
# as long as team-a's: on an idle machine 40 steps ended within the 3 s
# the user's Job is watched below, and the check saw the quota free
EXTRA="  priorityClassName: urgent" cr_job urgent team-b 300
kc apply -f "$T/cr-urgent.yaml" > /dev/null 2>&1
EXTRA="  resources:
    gpu:
      count: 2" cr_job toobig team-b 8
kc apply -f "$T/cr-toobig.yaml" > /dev/null 2>&1
wait_phase team-b toobig Invalid 60; check "an object beyond team-b's quota is Invalid" $?
case "$(cr_field team-b toobig '.status.conditions[0].message')" in
    *"can never run"*) true ;; *) false ;; esac
check "with the scheduler's sentence" $?

# a user's own Job, suspended and labelled for lathe's queue
cat > "$T/userjob.yaml" <<'EOF2'
apiVersion: batch/v1
kind: Job
metadata:
  name: swift-sft
  namespace: team-b
  labels:
    lathe.dev/queue: default
spec:
  suspend: true
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: swift
          image: modelscope/ms-swift:latest
          command: ["/bin/sh", "-c", "echo user job runs; sleep 2"]
          resources:
            limits:
              nvidia.com/gpu: "1"
EOF2
wait_phase team-b urgent Running 120; check "team-b's urgent job runs (preempting a borrowed GPU)" $?
kc apply -f "$T/userjob.yaml" > /dev/null 2>&1; check "kubectl apply of a user's suspended Job" $?
sleep 3
[ "$(kc get job swift-sft -n team-b -o 'jsonpath={.spec.suspend}')" = true ] &&
    [ "$(cr_field team-b urgent .status.phase)" = Running ]
check "it stays suspended while team-b's urgent job holds the quota" $?
"$LATHE" get jobs swift-sft --team team-b -o json > "$T/uj.json" 2>&1
grep -q '"wait_reason": *"[^"]*quota' "$T/uj.json"; check "its wait reason names the quota" $?
grep -q "team-a/a[123]: preempted: preempted for urgent" "$T/server-1.log"
check "a team-a job was preempted for it (back to the queue, resumed later)" $?
wait_phase team-b urgent Succeeded 240; check "the urgent job succeeds" $?
unsuspended() { [ "$(kc get job swift-sft -n team-b -o 'jsonpath={.spec.suspend}')" = false ]; }
wait_for 120 unsuspended; check "then the user's Job is admitted (suspend false)" $?
kc get job swift-sft -n team-b -o 'jsonpath={.metadata.annotations}' | grep -q "lathe.dev/placement"
check "with its placement annotated" $?
complete() { kc get job swift-sft -n team-b -o 'jsonpath={.status.conditions[?(@.type=="Complete")].status}' | grep -q True; }
wait_for 120 complete; check "and completes" $?
for n in a1 a2 a3; do wait_phase team-a $n Succeeded 400; check "$n succeeds" $?; done
finish
