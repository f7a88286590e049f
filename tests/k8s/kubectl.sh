#!/bin/bash
# tests/k8s/kubectl.sh: the real kubectl (v1.32) against the API double:
# apply of a manifest (Namespace, ResourceQuota, PriorityClass, PVC, a
# suspended Job), get (tables, -o json, -o yaml), patch, wait, logs,
# delete --cascade=foreground, apply --server-side, get nodes.
# kubectl is required (scripts/install-deps.sh installs it).
set -u
PY=/usr/bin/python3
SRC=${LATHE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
if ! command -v kubectl >/dev/null; then
    echo "FAIL: kubectl is not on PATH (scripts/install-deps.sh installs it)"
    exit 1
fi
T=$(mktemp -d /tmp/kube-double-kubectl.XXXXXX)
PID=
fails=0
cleanup() {
    [ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null
    for _ in $(seq 50); do [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null || break; sleep 0.2; done
    [ -n "$PID" ] && kill -KILL "$PID" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
ok() { echo "ok: $1"; }
fail() { echo "FAIL: $1"; [ -n "${2:-}" ] && sed 's/^/    /' "$2"; fails=$((fails + 1)); }
wait_for() {
    local end=$((SECONDS + $1)); shift
    while [ $SECONDS -lt $end ]; do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
    return 1
}
# run NAME CMD...: CMD's output in $T/out, a check line
run() {
    local name=$1; shift
    if "$@" > "$T/out" 2>&1; then ok "$name"; return 0; fi
    fail "$name" "$T/out"; return 1
}
has() { # has NAME REGEX: the last output matches
    grep -Eq "$2" "$T/out" && ok "$1" || fail "$1 (no /$2/)" "$T/out"
}

cat > "$T/nodes.json" <<'JSON'
[{"name": "gpu-a1", "gpus": 4, "product": "NVIDIA-L4", "memoryMiB": 23034, "cpu": "32", "memory": "128Gi"}]
JSON
"$PY" "$SRC/tests/k8s/kube-double" --state "$T/state" --nodes "$T/nodes.json" --parent-pid $$ > "$T/double.log" 2>&1 &
PID=$!
wait_for 60 test -f "$T/state/ready" || { echo "FAIL: the double did not start"; cat "$T/double.log"; exit 1; }
export KUBECONFIG="$T/state/kubeconfig"
# the ckpt mount path /ckpt is the test's (the job writes into it): as root a private mount
# namespace hides it from the host; otherwise it is a symlink to the PVC's folder
MAN="$T/manifest.yaml"
sed "s#/ckpt#$T/ckpt#g" "$SRC/tests/k8s/data/double-kubectl.yaml" > "$MAN"

run "kubectl version" kubectl version
has "server version" "Server Version: v1.32"
run "kubectl apply -f" kubectl apply -f "$MAN"
has "apply created the Job" "job.batch/kjob created"
run "kubectl apply -f again (unchanged)" kubectl apply -f "$MAN"
has "apply again (a no-op patch of atomic lists the server defaulted)" "job.batch/kjob (unchanged|configured)"
run "kubectl get jobs,pods" kubectl get jobs,pods -n team-k
has "table of the suspended Job" "^job.batch/kjob +Suspended +0/1"
run "kubectl get job -o json" kubectl get job kjob -n team-k -o json
"$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["spec"]["suspend"] is True and j["metadata"]["uid"]' "$T/out" &&
    ok "-o json parses" || fail "-o json parses" "$T/out"
run "kubectl get job -o yaml" kubectl get job kjob -n team-k -o yaml
has "-o yaml" "^  name: kjob"
run "kubectl get pvc,quota,pc" kubectl get pvc,quota -n team-k
has "PVC bound" "lathe-checkpoints +Bound"
run "kubectl get priorityclass" kubectl get pc lathe-urgent
has "priority class" "lathe-urgent +1000"
run "kubectl patch (resume)" kubectl patch job kjob -n team-k --type=merge -p '{"spec":{"suspend":false}}'
run "kubectl wait --for=condition=complete" kubectl wait --for=condition=complete job/kjob -n team-k --timeout=60s
run "kubectl logs job/kjob" kubectl logs job/kjob -n team-k
has "the container's log" "^hello from kjob-[a-z0-9]{5}$"
has "the container wrote into its PVC" "^saved$"
[ -f "$T/state/volumes/team-k/lathe-checkpoints/done" ] && ok "the PVC's folder has the file" || fail "the PVC's folder has the file"
run "kubectl get pods -o wide" kubectl get pods -n team-k -o wide
has "the pod completed" "kjob-[a-z0-9]{5} +0/1 +Completed"
run "kubectl get quota" kubectl get quota gpu -n team-k -o jsonpath='{.status.hard}'
run "kubectl describe job" kubectl describe job kjob -n team-k
has "describe shows events" "SuccessfulCreate"
run "kubectl delete --cascade=foreground" kubectl delete job kjob -n team-k --cascade=foreground --timeout=60s
wait_for 30 bash -c "! kubectl get job kjob -n team-k" && ok "the Job is gone" || fail "the Job is gone"
run "kubectl get pods after the delete" kubectl get pods -n team-k
has "its pods went first" "No resources found"
run "kubectl apply --server-side" kubectl apply --server-side -f "$MAN"
has "server-side apply" "job.batch/kjob serverside-applied"
run "kubectl apply --server-side again" kubectl apply --server-side -f "$MAN"
run "kubectl get nodes" kubectl get nodes
has "the node" "^gpu-a1 +Ready"
run "kubectl with the client certificate" kubectl --kubeconfig "$T/state/kubeconfig-cert" get ns default
kubectl --token=wrong get ns > "$T/out" 2>&1 && fail "a wrong token: refused" "$T/out" || has "a wrong token: refused" "Unauthorized"
run "kubectl get nodes -o yaml" kubectl get nodes -o yaml
has "allocatable GPUs" "nvidia.com/gpu: \"4\""
run "kubectl cordon" kubectl cordon gpu-a1
run "kubectl get nodes (cordoned)" kubectl get nodes
has "cordoned" "gpu-a1 +Ready,SchedulingDisabled"
run "kubectl uncordon" kubectl uncordon gpu-a1
# a field the schema does not know: kubectl's strict server-side validation
sed 's/^  backoffLimit: 0$/  backoffLimit: 0\n  bogusField: 1/' "$MAN" > "$T/bad.yaml"
if kubectl apply -f "$T/bad.yaml" > "$T/out" 2>&1; then fail "an unknown field is refused" "$T/out"; else
    has "an unknown field is refused" 'unknown field "spec.bogusField"'; fi
# kubectl's generators send protobuf bodies
run "kubectl create namespace" kubectl create namespace gen
run "kubectl create configmap" kubectl create configmap cm1 --from-literal=a=b -n gen
run "kubectl create secret" kubectl create secret generic s1 --from-literal=pw=hunter2 -n gen
run "kubectl get secret" kubectl get secret s1 -n gen -o jsonpath='{.data.pw}'
[ "$(base64 -d < "$T/out")" = hunter2 ] && ok "the secret's value" || fail "the secret's value" "$T/out"
run "kubectl create job" kubectl create job gj -n gen --image=busybox -- /bin/sh -c 'echo made by kubectl create'
run "kubectl wait (created job)" kubectl wait --for=condition=complete job/gj -n gen --timeout=60s
run "kubectl logs (created job)" kubectl logs job/gj -n gen
has "its log" "^made by kubectl create$"
run "kubectl auth can-i" kubectl auth can-i create jobs -n gen
has "the admin can" "^yes$"
echo '{"tok-gen": {"user": "gen-user", "namespaces": ["gen"]}}' > "$T/state/tokens.json"
run "a namespace token in its namespace" kubectl --token=tok-gen get cm -n gen
kubectl --token=tok-gen get cm -n team-k > "$T/out" 2>&1 && fail "a namespace token elsewhere" "$T/out" ||
    has "a namespace token elsewhere: Forbidden" 'User "gen-user" cannot list resource "configmaps"'
kubectl --token=tok-gen auth can-i create jobs -n team-k > "$T/out" 2>&1; has "can-i for the token" "^no"
run "kubectl delete -f" kubectl delete -f "$MAN" --wait=false
run "kubectl get ns" kubectl get ns
[ $fails -eq 0 ] && echo "kubectl.sh: all passed" || { echo "kubectl.sh: $fails failed"; tail -n 30 "$T/double.log"; }
[ $fails -eq 0 ]
