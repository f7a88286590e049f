#!/bin/bash
# operator_quota_change.sh: quotas and priority classes live in the API.
# team-b's ResourceQuota allows 1 GPU, so an object asking for 2 is
# Invalid; raising the quota to 2 with kubectl makes the server start
# itself again (the scheduler's cluster is fixed while it runs), rebuild
# from the API, and run the object; a new PriorityClass becomes a lathe
# priority class the same way. A ResourceQuota's usage moving (its status)
# restarts nothing.
. "$(dirname "$0")/harness/lib.sh"

k8s_start
op_setup
op_team_b_from_api; check "team-b's ResourceQuota: 1 GPU" $?
op_start 1
wait_for 60 op_ready 1; check "the operator leads" $?
EXTRA="  resources:
    gpu:
      count: 2" cr_job wide team-b 8
kc apply -f "$T/cr-wide.yaml" > /dev/null 2>&1
wait_phase team-b wide Invalid 60; check "2 GPUs in team-b are beyond its quota: Invalid" $?

# a change of the quota's status only (what the quota controller writes) restarts nothing
kc patch resourcequota gpus -n team-b --subresource=status --type=merge \
    -p '{"status":{"hard":{"requests.nvidia.com/gpu":"1"},"used":{"requests.nvidia.com/gpu":"0"}}}' > /dev/null 2>&1
sleep 4
! grep -q "starting again" "$T/server-1.log"; check "a quota's status moving restarts nothing" $?

kc patch resourcequota gpus -n team-b --type=merge -p '{"spec":{"hard":{"requests.nvidia.com/gpu":"2"}}}' \
    > /dev/null 2>&1; check "kubectl raises team-b's quota to 2" $?
restarted() { grep -q "a ResourceQuota or PriorityClass changed: starting again" "$T/server-1.log"; }
wait_for 30 restarted; check "the server starts itself again to apply it" $?
wait_for 60 op_ready 1; check "and leads again" $?
wait_phase team-b wide Running 120; check "the object is checked again and runs" $?
wait_phase team-b wide Succeeded 300; check "and succeeds" $?

cat > "$T/pc.yaml" <<'EOF2'
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: research-low
value: 10
preemptionPolicy: Never
EOF2
kc apply -f "$T/pc.yaml" > /dev/null 2>&1; check "kubectl makes a PriorityClass" $?
has_pc() {
    curl -sf -H "Authorization: Bearer $(cat "$T/data-1/admin-token")" \
        "http://$(cat "$T/data-1/server.addr")/v1/priorityclasses" | grep -q research-low
}
wait_for 60 has_pc; check "it becomes a lathe priority class" $?
[ "$(grep -c "starting again" "$T/server-1.log")" = 2 ]; check "two restarts in all" $?
finish
