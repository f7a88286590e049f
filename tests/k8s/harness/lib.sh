# tests/k8s/harness/lib.sh: what the Kubernetes scenario tests share
# (sourced, never run by itself; CTest runs tests/k8s/*.sh only).
#
#   k8s_start [NODES_JSON]   the API double (tests/k8s/kube-double) with
#                            its nodes, the teams' namespaces, quotas,
#                            priority classes and PVCs applied with kubectl
#                            from `lathe render cluster.yaml --target k8s`,
#                            a tiny model and the dataset in the model and
#                            data PVCs
#   check, finish, wait_for, srv_start / srv_kill, submit, job_field,
#   wait_state               tests/common/scenario-lib.bash (shared with the
#                            other scenario harnesses)
#   kc ARGS...               kubectl against the double
#   dbl METHOD PATH          a control call to the double (/_double/...)
#
# Every wait is bounded; the EXIT trap stops the server and the double
# (whose pods' processes end with it) and removes the folder.
set -u
T=$(mktemp -d /tmp/lathe-k8s.XXXXXX)
DOUBLE_PID=
. "$(dirname "${BASH_SOURCE[0]}")/../../common/scenario-lib.bash"
finish_extra() { echo "--- double log (last 40 lines)"; tail -n 40 "$T/double.log" 2>/dev/null; }
cleanup() {
    if [ -n "$SRV_PID" ]; then kill -KILL "$SRV_PID" 2>/dev/null; wait "$SRV_PID" 2>/dev/null; fi
    [ -n "$DOUBLE_PID" ] && kill -TERM "$DOUBLE_PID" 2>/dev/null
    for _ in $(seq 50); do
        [ -n "$DOUBLE_PID" ] && kill -0 "$DOUBLE_PID" 2>/dev/null || break
        sleep 0.2
    done
    [ -n "$DOUBLE_PID" ] && kill -KILL "$DOUBLE_PID" 2>/dev/null
    # mounts the double's kubelet made live in its pods' namespaces only
    rm -rf "$T"
}
trap cleanup EXIT

kc() { KUBECONFIG="$T/kube/kubeconfig" kubectl "$@"; }

# dbl METHOD PATH: a control call to the double
dbl() {
    curl -sS --cacert "$T/kube/pki/ca.crt" -H "Authorization: Bearer $(cat "$T/kube/token")" \
        -X "$1" "$(cat "$T/kube/url")$2"
}

default_nodes() {
    cat > "$T/nodes.json" <<'EOF'
[
  {"name": "gpu-a1", "gpus": 2, "product": "NVIDIA-L4", "memoryMiB": 23034, "cpu": "16",
   "memory": "64Gi", "labels": {"rack-id": "rack-1", "topology.kubernetes.io/zone": "z1"}},
  {"name": "gpu-b1", "gpus": 2, "product": "NVIDIA-L4", "memoryMiB": 23034, "cpu": "16",
   "memory": "64Gi", "labels": {"rack-id": "rack-2", "topology.kubernetes.io/zone": "z1"}}
]
EOF
}

# The cluster: teams a (quota 2) and b (quota 2, each may borrow 1), an
# urgent priority class. `write_cluster team-a-only`: team a alone and no
# priority class (operator mode then takes the rest from the API).
write_cluster() {
    cat > "$T/cluster.yaml" <<'EOF'
apiVersion: lathe/v1
kind: Cluster
metadata:
  name: k8s-test
spec:
  gpuTypes:
    - name: L4-24GB
      memory: 24Gi
      pricePerHour: 0.80
  teams:
    - name: team-a
      quota: {L4-24GB: 2}
      borrowingLimit: {L4-24GB: 1}
EOF
    [ "${1:-}" = team-a-only ] && return 0
    cat >> "$T/cluster.yaml" <<'EOF'
    - name: team-b
      quota: {L4-24GB: 2}
      borrowingLimit: {L4-24GB: 1}
  priorityClasses:
    - name: urgent
      value: 1000
      preemptionPolicy: PreemptLowerPriority
    - name: default
      value: 0
      globalDefault: true
EOF
}

write_server() {
    cat > "$T/server.yaml" <<EOF
apiVersion: lathe/v1
kind: ServerConfig
metadata:
  name: k8s-test
spec:
  listen: 127.0.0.1:0
  dataDir: $T/data
  executor: k8s
  cluster:
    file: $T/cluster.yaml
  kubernetes:
    kubeconfig: $T/kube/kubeconfig
    image: lathe:test
    lathePath: $LATHE
    gpuProducts: {L4-24GB: NVIDIA-L4}
    checkpointMount: $T/mnt/checkpoints
    modelMount: $T/mnt/models
    dataMount: $T/mnt/data
    specMount: $T/mnt/spec
    ttlSecondsAfterFinished: -1
  scheduler:
    interval: 1s
    minRunTime: 1s
    reclaimMinRun: 1s
  pollInterval: 250ms
  policy:
    # the jobs' paths are the pods' mounts (the engine's own roots: the
    # double runs pods as local processes on \$T/mnt/*); the custom images
    # that the tests' jobs name
    images: ["registry.example.com/*", "modelscope/ms-swift:*"]
EOF
}

k8s_start() {
    mkdir -p "$T/kube" "$T/mnt/checkpoints" "$T/mnt/models" "$T/mnt/data" "$T/mnt/spec"
    if [ $# -ge 1 ]; then cp "$1" "$T/nodes.json"; else default_nodes; fi
    "$PY" "$LATHE_SOURCE_DIR/tests/k8s/kube-double" --state "$T/kube" --port 0 \
        --nodes "$T/nodes.json" --bookmark-interval 1 --parent-pid $$ > "$T/double.log" 2>&1 &
    DOUBLE_PID=$!
    wait_for 60 test -f "$T/kube/ready" || { echo "FAIL: the double did not start"; cat "$T/double.log"; exit 1; }
    echo "https://127.0.0.1:$(cat "$T/kube/port")" > "$T/kube/url"
    write_cluster
    write_server
    "$LATHE" render "$T/cluster.yaml" --target k8s --config "$T/server.yaml" > "$T/setup.yaml" ||
        { echo "FAIL: lathe render of the cluster"; exit 1; }
    kc apply -f "$T/setup.yaml" > "$T/apply.log" 2>&1 ||
        { echo "FAIL: kubectl apply of the cluster's setup"; cat "$T/apply.log"; exit 1; }
    # a tiny model and the dataset, as the shared PVCs hold them
    local tok=()
    [ -f "$LATHE_SOURCE_DIR/share/tokenizers/qwen3/tokenizer.json" ] &&
        tok=(--tokenizer "$LATHE_SOURCE_DIR/share/tokenizers/qwen3/tokenizer.json")
    "$LATHE" init-model "$T/mnt/models/tiny" --preset tiny --arch qwen3 --init-std 0.125 "${tok[@]}" \
        > "$T/init-model.log" 2>&1 || { echo "FAIL: init-model"; cat "$T/init-model.log"; exit 1; }
    cp "$LATHE_SOURCE_DIR/share/data/self-instruct/seed_tasks.alpaca.jsonl" "$T/mnt/data/train.jsonl"
    for ns in team-a team-b; do
        mkdir -p "$T/kube/volumes/$ns/lathe-models" "$T/kube/volumes/$ns/lathe-data"
        cp -r "$T/mnt/models/tiny" "$T/kube/volumes/$ns/lathe-models/"
        cp "$T/mnt/data/train.jsonl" "$T/kube/volumes/$ns/lathe-data/"
    done
}

# A LoRA job for team $2 named $1 (extra YAML lines under spec in $3).
write_job() {
    local name=$1 team=$2 extra=${3:-}
    cat > "$T/$name.yaml" <<EOF
apiVersion: lathe/v1
kind: LoRATrainingJob
metadata:
  name: $name
spec:
  team: $team
  method: lora
  baseModel:
    path: $T/mnt/models/tiny
  lora:
    targetModules: [all-linear]
  trainingData:
    datasetPath: $T/mnt/data/train.jsonl
  hyperparams:
    maxSteps: ${STEPS:-20}
    learningRate: 5e-3
    warmupSteps: 2
    maxSeqLength: 64
  checkpoint:
    intervalSteps: ${CKPT_EVERY:-5}
    keepLast: 2
  retryPolicy:
    maxRetries: 3
    backoffSeconds: 1
    maxBackoffSeconds: 2
  timeout:
    gracePeriod: 20s
  trainer:
    env:
      LATHE_THREADS: "1"
$extra
EOF
}

# ---- operator mode (tests/k8s/operator*.sh) ----
# op_setup: the CustomResourceDefinitions of `lathe render server` applied
# with kubectl, the Lease's namespace, and the ServerConfig of replica $1
# (default 1) in $T/op-$1.yaml: operator mode on team-a and team-b.
op_setup() {
    "$LATHE" render server --target k8s -o json > "$T/install.json" || { echo "FAIL: render server"; exit 1; }
    "$PY" -c '
import json, sys
items = json.load(open(sys.argv[1]))["items"]
import yaml
print(yaml.safe_dump_all([o for o in items if o["kind"] == "CustomResourceDefinition"]))' \
        "$T/install.json" > "$T/crds.yaml"
    kc apply -f "$T/crds.yaml" > "$T/crds.log" 2>&1 || { echo "FAIL: kubectl apply of the CRDs"; cat "$T/crds.log"; exit 1; }
    kc create namespace lathe-system > /dev/null 2>&1
    for r in 1 2; do op_config "$r"; done
    trap 'op_kill 1; op_kill 2; cleanup' EXIT
}

# op_team_b_from_api: the Cluster file keeps team-a only, and team-b's
# quota is a ResourceQuota "gpus" of 1 GPU, applied with kubectl.
op_team_b_from_api() {
    write_cluster team-a-only
    cat > "$T/rq.yaml" <<'EOF2'
apiVersion: v1
kind: ResourceQuota
metadata:
  name: gpus
  namespace: team-b
spec:
  hard:
    requests.nvidia.com/gpu: "1"
EOF2
    kc apply -f "$T/rq.yaml" > /dev/null 2>&1
}

op_config() {
    local r=$1
    sed -e "s|dataDir: $T/data|dataDir: $T/data-$r|" "$T/server.yaml" > "$T/op-$r.yaml"
    "$PY" - "$T/op-$r.yaml" "$r" "${OP_NAMESPACES:-team-a, team-b}" <<'PYEOF'
import sys
p, r, nss = sys.argv[1], sys.argv[2], sys.argv[3]
s = open(p).read()
s = s.replace("  kubernetes:\n", "  kubernetes:\n    operator:\n      enabled: true\n"
              "      namespaces: [" + nss + "]\n      leaseNamespace: lathe-system\n"
              "      identity: replica-%s\n      leaseDuration: 4s\n      renewDeadline: 3s\n"
              "      retryPeriod: 500ms\n      statusInterval: 250ms\n" % r, 1)
open(p, "w").write(s)
PYEOF
}

# op_start R: replica R of the server (pid in OP_PID_R); waits for its address.
op_start() {
    local r=$1
    rm -f "$T/data-$r/server.addr"
    "$LATHE" server --config "$T/op-$r.yaml" >> "$T/server-$r.log" 2>&1 &
    eval "OP_PID_$r=$!"
    wait_for 60 test -s "$T/data-$r/server.addr" || { echo "FAIL: replica $r did not start"; tail -30 "$T/server-$r.log"; exit 1; }
}

op_kill() {
    local pid; eval "pid=\${OP_PID_$1:-}"
    [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    eval "OP_PID_$1="
}

# op_ready R: replica R leads (its readyz answers 200)
op_ready() { curl -sf "http://$(cat "$T/data-$1/server.addr")/readyz" > /dev/null; }

# a field of a LoRATrainingJob (of group $GROUP, default the seed's
# training.example.com): cr_field NS NAME JSONPATH
cr_field() { kc get "lorajobs.${GROUP:-training.example.com}" "$2" -n "$1" -o "jsonpath={$3}" 2>/dev/null; }

# wait_phase NS NAME PHASE [SECONDS]
wait_phase() {
    local end=$((SECONDS + ${4:-180}))
    while [ $SECONDS -lt $end ]; do
        [ "$(cr_field "$1" "$2" .status.phase)" = "$3" ] && return 0
        sleep 0.5
    done
    echo "  $1/$2 is $(cr_field "$1" "$2" .status.phase), not $3"
    return 1
}

# cr_job NAME NS [STEPS]: a LoRATrainingJob (group $GROUP) of the tiny model
cr_job() {
    local name=$1 ns=$2
    cat > "$T/cr-$name.yaml" <<EOF2
apiVersion: ${GROUP:-training.example.com}/v1
kind: LoRATrainingJob
metadata:
  name: $name
  namespace: $ns
spec:
  method: lora
  baseModel:
    path: $T/mnt/models/tiny
  lora:
    targetModules: [all-linear]
  trainingData:
    datasetPath: $T/mnt/data/train.jsonl
  hyperparams:
    maxSteps: ${3:-12}
    learningRate: 5e-3
    warmupSteps: 2
    maxSeqLength: 64
  checkpoint:
    intervalSteps: ${CKPT_EVERY:-4}
    keepLast: 2
  retryPolicy:
    maxRetries: 3
    backoffSeconds: 1
  timeout:
    gracePeriod: 20s
  trainer:
    env:
      LATHE_THREADS: "1"
${EXTRA:-}
EOF2
}
