# tests/slurm/harness/lib.sh: what the Slurm scenario tests share (sourced,
# never run by itself; CTest runs tests/slurm/*.sh only, after the fixture
# slurm/cluster_start has started a real Slurm with harness/cluster.sh).
#
#   slurm_setup              the cluster's environment (SLURM_CONF), a tiny
#                            model and the dataset, the Cluster and server
#                            files (executor slurm); exit 77 (skip) when the
#                            fixture started no cluster
#   check, finish, wait_for, srv_start / srv_kill, submit, job_field,
#   wait_state               tests/common/scenario-lib.bash (shared with the
#                            other scenario harnesses)
#   slurm_id NAME [ATTEMPT]  the Slurm job id of an attempt (squeue/sacct by name)
#   sacct_rows SECS MIN FILTER ARGS...  sacct's rows, asked until MIN come back
#
# Every wait is bounded; the EXIT trap kills the server, cancels this
# test's Slurm jobs and removes the folder.
set -u
T=$(mktemp -d /tmp/lathe-slurm-t.XXXXXX)
chmod 755 "$T"
. "$(dirname "${BASH_SOURCE[0]}")/../../common/scenario-lib.bash"
finish_extra() {
    echo "--- squeue"; squeue 2>&1 | head -20
    if [ -s "$T/sacct.err" ]; then echo "--- sacct's errors"; tail -5 "$T/sacct.err"; fi
}
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

# sacct_rows SECS MIN FILTER SACCT-ARGS...: the rows of `sacct SACCT-ARGS`
# (use -P) that FILTER keeps (an awk program over '|'-separated fields, with
# t set to $T), asked again until at least MIN rows come back or SECS pass.
# slurmdbd records a job a moment after slurmctld runs it, and a busy slurmdbd
# can refuse a query; sacct's errors are kept in $T/sacct.err.
sacct_rows() {
    local secs=$1 min=$2 filter=$3 out
    shift 3
    local end=$((SECONDS + secs))
    while :; do
        out=$(sacct "$@" 2>>"$T/sacct.err" | awk -F'|' -v t="$T" "$filter")
        [ "$(printf '%s' "$out" | grep -c .)" -ge "$min" ] && break
        [ $SECONDS -ge $end ] && break
        sleep 0.5
    done
    [ -z "$out" ] || printf '%s\n' "$out"
}

# slurm_jobs NAME: "ID STATE" of every Slurm job of lathe job NAME of team-a
# or team-b (its name lathe-TEAM-NAME-ATTEMPT), whose output is under $T
slurm_jobs() {
    squeue -h -t all -o '%i %T %j %o' 2>/dev/null |
        awk -v t="$T" -v n="$1" 'index($4, t) == 1 && $3 ~ ("^lathe-team-[ab]-" n "-[0-9]+$") {print $1, $2, $3}'
}
