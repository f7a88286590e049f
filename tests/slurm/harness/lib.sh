# tests/slurm/harness/lib.sh: what the Slurm scenario tests share (sourced,
# never run by itself; CTest runs tests/slurm/*.sh only, after the fixture
# slurm/cluster_start has started a real Slurm with harness/cluster.sh).
#
#   slurm_setup              the cluster's environment (SLURM_CONF), a tiny
#                            model and the dataset, the Cluster and server
#                            files (executor slurm); exit 77 (skip) when the
#                            fixture started no cluster
#   srv_start / srv_kill     `lathe server` / SIGKILL it
#   submit FILE, wait_state NAME STATE [SECONDS], job_field NAME FIELD
#   slurm_id NAME [ATTEMPT]  the Slurm job id of an attempt (squeue/sacct by name)
#
# Every wait is bounded; the EXIT trap kills the server, cancels this
# test's Slurm jobs and removes the folder.
set -u
fails=0
passes=0
check() { # check NAME STATUS
    if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fails=$((fails + 1)); else echo "ok: $1"; passes=$((passes + 1)); fi
}
finish() {
    if [ "$fails" -ne 0 ]; then
        echo "--- server log (last 60 lines)"; tail -n 60 "$T/server.log" 2>/dev/null
        echo "--- squeue"; squeue 2>&1 | head -20
    fi
    echo "$((passes)) passed, $fails failed"
    [ "$fails" -eq 0 ]
    exit $?
}
PY=/usr/bin/python3
T=$(mktemp -d /tmp/lathe-slurm-t.XXXXXX)
chmod 755 "$T"
SRV_PID=
cleanup() {
    if [ -n "$SRV_PID" ]; then kill -KILL "$SRV_PID" 2>/dev/null; wait "$SRV_PID" 2>/dev/null; fi
    # this test's jobs only: their names hold the test's teams, their output is in $T
    if [ -n "${SLURM_CONF:-}" ]; then
        ids=$(squeue -h -o '%i %o' 2>/dev/null | awk -v t="$T" 'index($2, t) == 1 {print $1}')
        [ -n "$ids" ] && scancel $ids 2>/dev/null
    fi
    rm -rf "$T"
}
trap cleanup EXIT

wait_for() { # wait_for SECONDS CMD...
    local secs=$1; shift
    local end=$((SECONDS + secs))
    while [ $SECONDS -lt $end ]; do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.3
    done
    return 1
}

slurm_setup() {
    local envf
    envf=$(bash "$(dirname "${BASH_SOURCE[0]}")/cluster.sh" env)
    if [ ! -f "$envf" ]; then
        echo "SKIP: no Slurm cluster (the fixture slurm/cluster_start started none: see its output)"
        exit 77
    fi
    # shellcheck disable=SC1090
    . "$envf"
    mkdir -p "$T/models" "$T/datasets" "$T/data"
    local tok=()
    [ -f "$LATHE_SOURCE_DIR/share/tokenizers/qwen3/tokenizer.json" ] &&
        tok=(--tokenizer "$LATHE_SOURCE_DIR/share/tokenizers/qwen3/tokenizer.json")
    "$LATHE" init-model "$T/models/tiny" --preset tiny --arch qwen3 --init-std 0.125 "${tok[@]}" \
        > "$T/init-model.log" 2>&1 || { echo "FAIL: init-model"; cat "$T/init-model.log"; exit 1; }
    cp "$LATHE_SOURCE_DIR/share/data/self-instruct/seed_tasks.alpaca.jsonl" "$T/datasets/train.jsonl"
    write_cluster
    write_server
}

write_cluster() {
    cat > "$T/cluster.yaml" <<'EOF2'
apiVersion: lathe/v1
kind: Cluster
metadata:
  name: slurm-test
spec:
  gpuTypes:
    - name: L4-24GB
      memory: 24Gi
      pricePerHour: 0.80
  teams:
    - name: team-a
      quota: {L4-24GB: 4}
      borrowingLimit: {L4-24GB: 4}
    - name: team-b
      quota: {L4-24GB: 4}
      borrowingLimit: {L4-24GB: 4}
  priorityClasses:
    - name: urgent
      value: 1000
      preemptionPolicy: PreemptLowerPriority
    - name: default
      value: 0
      globalDefault: true
EOF2
}

write_server() { # write_server [EXTRA SLURM LINES]
    cat > "$T/server.yaml" <<EOF2
apiVersion: lathe/v1
kind: ServerConfig
metadata:
  name: slurm-test
spec:
  listen: 127.0.0.1:0
  dataDir: $T/data
  executor: slurm
  cluster:
    file: $T/cluster.yaml
  slurm:
    lathePath: $LATHE
    gpuType: L4-24GB
    stateInterval: 200ms
    qos: {urgent: high}
${1:-}
  scheduler:
    interval: 1s
    minRunTime: 1s
    reclaimMinRun: 1s
  pollInterval: 250ms
  policy:
    paths:
      models: [$T/models]
      data: [$T/datasets]
    teams:
      - team: team-a
        slurmAccount: ai-training
EOF2
}

srv_start() {
    rm -f "$T/data/server.addr"
    "$LATHE" server --config "$T/server.yaml" >> "$T/server.log" 2>&1 &
    SRV_PID=$!
    wait_for 60 test -s "$T/data/server.addr" || { echo "FAIL: the server did not start"; tail -30 "$T/server.log"; exit 1; }
    export LATHE_SERVER; LATHE_SERVER=$(cat "$T/data/server.addr")
    export LATHE_TOKEN; LATHE_TOKEN=$(cat "$T/data/admin-token")
}

srv_kill() {
    [ -n "$SRV_PID" ] && kill -KILL "$SRV_PID" 2>/dev/null
    wait "$SRV_PID" 2>/dev/null
    SRV_PID=
}

# A LoRA job for team $2 named $1 (extra YAML lines under spec in $3).
write_job() {
    local name=$1 team=$2 extra=${3:-}
    cat > "$T/$name.yaml" <<EOF2
apiVersion: lathe/v1
kind: LoRATrainingJob
metadata:
  name: $name
spec:
  team: $team
  method: lora
  baseModel:
    path: $T/models/tiny
  lora:
    targetModules: [all-linear]
  trainingData:
    datasetPath: $T/datasets/train.jsonl
  hyperparams:
    maxSteps: ${STEPS:-12}
    learningRate: 5e-3
    warmupSteps: 2
    maxSeqLength: 64
  checkpoint:
    intervalSteps: ${CKPT_EVERY:-4}
    keepLast: 2
  retryPolicy:
    maxRetries: 3
    backoffSeconds: 1
    maxBackoffSeconds: 2
  timeout:
    gracePeriod: 20s
${MAXDUR:+    maxDuration: $MAXDUR}
  trainer:
    env:
      LATHE_THREADS: "1"
$extra
EOF2
}

submit() { "$LATHE" submit "$1" > "$T/submit.out" 2>&1 || { cat "$T/submit.out"; return 1; }; }

job_field() { # job_field NAME FIELD
    "$LATHE" get jobs "$1" -o json 2>/dev/null | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
items = d.get("items", [d]) if isinstance(d, dict) else d
for it in items:
    v = it
    for k in sys.argv[1].split("."):
        v = v.get(k) if isinstance(v, dict) else None
    print("" if v is None else v)
    break' "$2"
}

wait_state() { # wait_state NAME STATE [SECONDS]
    local end=$((SECONDS + ${3:-180}))
    while [ $SECONDS -lt $end ]; do
        [ "$(job_field "$1" state)" = "$2" ] && return 0
        sleep 0.5
    done
    echo "  $1 is $(job_field "$1" state), not $2"
    return 1
}

# slurm_jobs NAME: "ID STATE" of every Slurm job of lathe job NAME of team-a
# or team-b (its name lathe-TEAM-NAME-ATTEMPT), whose output is under $T
slurm_jobs() {
    squeue -h -t all -o '%i %T %j %o' 2>/dev/null |
        awk -v t="$T" -v n="$1" 'index($4, t) == 1 && $3 ~ ("^lathe-team-[ab]-" n "-[0-9]+$") {print $1, $2, $3}'
}
