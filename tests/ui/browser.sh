#!/bin/bash
# browser.sh: ctest ui/browser. lathe's web console in a real browser:
# Debian's headless Chromium driven by playwright-core (tests/ui, pinned in
# package-lock.json; scripts/install-deps.sh installs both), against a real
# `lathe server` running a workload like the demo's:
#
#   - a cluster of an 8-GPU A100 node (two NVLink groups of four), a 2-GPU
#     L40S node, and this machine's two H100s as NVML reports them (the
#     tests' stand-in libnvidia-ml.so.1), two teams with quotas and budgets;
#   - research's LoRA experiment at ranks 8, 16 and 32, a job on an H100,
#     product's urgent two-GPU job, an L40S job and two jobs sharing the
#     other L40S, and jobs that wait (four A100s of one node while product's
#     quota is taken; over research's quota), so the map has busy, shared,
#     free and fragmented GPUs;
#   - product's budget is small: it reaches 80 % and 100 % during the run,
#     and its next job waits for the budget.
#
# tests/ui/browser.mjs then signs in, opens each page, checks what it shows,
# clicks through to a job and cancels it, signs in as a team to check it
# sees its own jobs only, checks that nothing errored in the browser's
# console and that no token went into a URL, and saves a screenshot of each
# page in build/ui-screenshots/. Last, no token may be written anywhere in
# the server's folder (its log, the audit log, the store, the jobs' folders:
# they hold token names and hashes only). KEEP=1 leaves the server running at the end
# (its address and tokens are printed) to look at the console by hand.
set -u
T0=$(date +%s.%N)
say() { awk -v a="$(date +%s.%N)" -v b="$T0" -v m="$*" 'BEGIN { printf "[%5.1fs] %s\n", a - b, m }'; }
UI="$LATHE_SOURCE_DIR/tests/ui"
SHOTS="$LATHE_BINARY_DIR/ui-screenshots"
CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if ! command -v node >/dev/null 2>&1 || [ ! -d "$UI/node_modules/playwright-core" ] || [ -z "$CHROMIUM" ]; then
    echo "FAIL: node, Chromium or playwright-core is missing: run scripts/install-deps.sh (as root),"
    echo "      or apt-get install chromium && npm ci --prefix tests/ui"
    exit 1
fi
W=$(mktemp -d /tmp/lathe-ui.XXXXXX)
mkdir -p "$W/pids" "$SHOTS"
SRV=""
cleanup() {
    [ -n "${KEEP:-}" ] && return
    if [ -n "$SRV" ] && kill -0 "$SRV" 2>/dev/null; then
        # end every job (their trainers outlive the server), then the server
        for j in $(curl -s -H "Authorization: Bearer $ADMIN" "http://$ADDR/v1/jobs?state=queued,starting,running,stopping&limit=1000" |
                   node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{for(const j of JSON.parse(s).items)console.log(j.team+"/"+j.name)})'); do
            curl -s -o /dev/null -X POST -H "Authorization: Bearer $ADMIN" "http://$ADDR/v1/jobs/${j#*/}/cancel?team=${j%/*}"
        done
        for _ in $(seq 100); do
            [ -z "$(ls "$W/pids")" ] && break
            sleep 0.1
        done
        kill -TERM "$SRV"; wait "$SRV" 2>/dev/null
        say "the server stopped"
    fi
    for f in "$W"/pids/*; do [ -e "$f" ] && kill -KILL "$(basename "$f")" 2>/dev/null; done
    rm -rf "$W"
}
trap cleanup EXIT

ADMIN=ui-admin-$RANDOM$RANDOM$RANDOM
RESEARCH=ui-research-$RANDOM$RANDOM$RANDOM
PRODUCT=ui-product-$RANDOM$RANDOM$RANDOM
cp "$LATHE_TEST_DATA/trainer.sh" "$W/trainer.sh"
echo '{"instruction": "Summarise the text.", "input": "lathe runs LoRA jobs.", "output": "It trains adapters."}' > "$W/data.jsonl"

cat > "$W/cluster.yaml" <<EOF
apiVersion: lathe/v1
kind: Cluster
metadata: {name: ui}
spec:
  gpuTypes:
    - {name: A100-80GB, memory: 80Gi, pricePerHour: 2.2}
    - {name: L40S-48GB, memory: 48Gi, pricePerHour: 1.1}
    - {name: H100-80GB, memory: 80Gi, pricePerHour: 400}
  nodes:
    - {name: a100-1, gpuType: A100-80GB, gpus: 8, rack: r1, nvlinkGroups: [[0, 1, 2, 3], [4, 5, 6, 7]]}
    - {name: l40s-1, gpuType: L40S-48GB, gpus: 2, rack: r2}
  teams:
    - {name: research, quota: {A100-80GB: 4, L40S-48GB: 2, H100-80GB: 2}, borrowingLimit: {A100-80GB: 0, H100-80GB: 0}, budgetPerMonth: 60}
    - {name: product, quota: {A100-80GB: 4, L40S-48GB: 4}, budgetPerMonth: 0.01}
  priorityClasses:
    - {name: urgent, value: 1000, preemptionPolicy: PreemptLowerPriority}
    - {name: default, value: 0, globalDefault: true}
EOF
cat > "$W/server.yaml" <<EOF
apiVersion: lathe/v1
kind: ServerConfig
spec:
  listen: 127.0.0.1:0
  dataDir: data
  cluster: {file: cluster.yaml, gpus: nvml}
  tokens:
    - {name: ui-admin, sha256: $("$LATHE" server hash-token "$ADMIN"), admin: true}
    - {name: ui-research, sha256: $("$LATHE" server hash-token "$RESEARCH"), team: research}
    - {name: ui-product, sha256: $("$LATHE" server hash-token "$PRODUCT"), team: product}
  policy:
    paths: {data: [.], programs: [.]}
    sandbox: {mode: off}
  scheduler: {interval: 1s, minRunTime: 1s}
  pollInterval: 200ms
  monitoring: {sampleInterval: 500ms}
EOF
# this machine's GPUs, as the stand-in NVML describes them (set again below
# once we know which one the H100 job got)
nvml() { # nvml UTIL0 USED0 UTIL1 USED1
    cat > "$W/gpus.json.tmp" <<EOF
{"driver": "550.54.15", "gpus": [
 {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-6c1b2e9a-1d1e-4f2a-9a51-0c3f5e7d8a01", "memory": 85520809984,
  "used": $2, "util": $1, "mem_util": 38, "power_mw": $((120000 + $1 * 4000)), "temp": $((35 + $1 / 3)), "sm_clock": 1980, "energy_mj": 91000000, "minor": 0},
 {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-6c1b2e9a-1d1e-4f2a-9a51-0c3f5e7d8a02", "memory": 85520809984,
  "used": $4, "util": $3, "mem_util": 0, "power_mw": $((120000 + $3 * 4000)), "temp": $((35 + $3 / 3)), "sm_clock": 1980, "energy_mj": 42000000, "minor": 1}]}
EOF
    mv "$W/gpus.json.tmp" "$W/gpus.json"
}
nvml 0 536870912 0 536870912

cd "$W"
LATHE_NVML_STANDIN="$W/gpus.json" LD_LIBRARY_PATH="$LATHE_BINARY_DIR/tests/nvml" \
    "$LATHE" server --config server.yaml > server.log 2>&1 &
SRV=$!
for _ in $(seq 300); do
    [ -s data/server.addr ] && curl -sf -o /dev/null "http://$(cat data/server.addr)/healthz" && break
    kill -0 "$SRV" 2>/dev/null || break
    sleep 0.1
done
ADDR=$(cat data/server.addr 2>/dev/null)
say "the server listens on $ADDR"
if [ -z "$ADDR" ] || ! curl -sf -o /dev/null "http://$ADDR/healthz"; then
    echo "FAIL: lathe server did not start"; cat server.log; exit 1
fi
if ! curl -sf -o /dev/null "http://$ADDR/vendor/uplot/uPlot.iife.min.js"; then
    echo "FAIL: this lathe was built without uPlot (lib/console/node_modules): run scripts/install-deps.sh, then cmake again"
    exit 1
fi

job() { # job NAME TEAM-TOKEN GPU-TYPE COUNT [EXTRA-YAML]
    cat > "$W/$1.yaml" <<EOF
apiVersion: lathe/v1
kind: LoRATrainingJob
metadata: {name: $1}
spec:
  baseModel: {name: Qwen2.5-0.5B}
  trainingData: {datasetPath: $W/data.jsonl, samples: 20000}
  resources: {gpu: {type: $3, count: $4${6:-}}}
  trainer:
    command: [/bin/sh, $W/trainer.sh]
    env:
      - {name: PIDS_DIR, value: $W/pids}
      - {name: STEPS, value: "2000"}
${5:-}
EOF
    "$LATHE" submit "$W/$1.yaml" --server "$ADDR" --token "$2" >/dev/null || { echo "FAIL: submit $1"; exit 1; }
}
cat > "$W/sweep.yaml" <<EOF
apiVersion: lathe/v1
kind: LoRAExperiment
metadata: {name: rank-sweep}
spec:
  template:
    spec:
      baseModel: {name: Qwen2.5-0.5B}
      trainingData: {datasetPath: $W/data.jsonl, samples: 20000}
      resources: {gpu: {type: A100-80GB, count: 1}}
      trainer:
        command: [/bin/sh, $W/trainer.sh]
        env:
          - {name: PIDS_DIR, value: $W/pids}
          - {name: STEPS, value: "2000"}
  matrix:
    lora.rank: [8, 16, 32]
EOF
"$LATHE" submit "$W/sweep.yaml" --server "$ADDR" --token "$RESEARCH" >/dev/null || { echo "FAIL: submit the experiment"; exit 1; }
job h100-probe "$RESEARCH" H100-80GB 1 ""
job tokenizer-bench "$PRODUCT" L40S-48GB 1 ""
running() { curl -s -H "Authorization: Bearer $ADMIN" "http://$ADDR/v1/jobs?state=running&limit=100" | grep -o '"state":"running"' | wc -l; }
wait_running() {
    for _ in $(seq 300); do
        [ "$(running)" -ge "$1" ] && return 0
        sleep 0.1
    done
    echo "FAIL: the workload did not start ($(running) of $1 jobs run); what waits:"
    "$LATHE" get jobs --state queued -o wide --server "$ADDR" --token "$ADMIN"
    tail -40 server.log; exit 1
}
say "submitted"; wait_running 5; say "5 run"
# two jobs sharing the other L40S
job shared-eval "$PRODUCT" L40S-48GB 1 "" ", shared: true"
job shared-embed "$PRODUCT" L40S-48GB 1 "" ", shared: true"
wait_running 7; say "7 run"
# product's urgent job comes last: it spends product's small budget in
# seconds, after which product's new jobs wait
job hotfix "$PRODUCT" A100-80GB 2 "  priorityClassName: urgent"
wait_running 8; say "8 run"
# jobs that wait: four A100s of one node (over product's quota: the node's
# three free A100s are fragmented for it), and two H100s over research's
job big-eval "$PRODUCT" A100-80GB 4 ""
job ctx-32k "$RESEARCH" H100-80GB 2 ""

# the H100 the probe runs on works hard; the other idles
gpu=$(curl -s -H "Authorization: Bearer $ADMIN" "http://$ADDR/v1/jobs/h100-probe" |
      node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).placement.gpus[0]))')
if [ "$gpu" = 0 ]; then nvml 94 41875931136 0 536870912; else nvml 0 536870912 94 41875931136; fi

# once product's budget is spent, its next job waits for the budget
threshold() { # threshold TEAM: the budget threshold it reached this month
    curl -s -H "Authorization: Bearer $ADMIN" "http://$ADDR/v1/teams" |
        node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const t=JSON.parse(s).items.find(x=>x.name===process.argv[1]);console.log(t?t.budget_threshold:0)})' "$1"
}
for _ in $(seq 600); do
    [ "$(threshold product)" = 1 ] && break
    sleep 0.1
done
[ "$(threshold product)" = 1 ] || { echo "FAIL: product's budget was not spent"; tail -20 server.log; exit 1; }
say "budget spent"; job nightly-eval "$PRODUCT" L40S-48GB 1 ""

UI_URL="http://$ADDR" UI_ADMIN="$ADMIN" UI_RESEARCH="$RESEARCH" UI_SHOTS="$SHOTS" \
    CHROMIUM="$CHROMIUM" timeout 300 node "$UI/browser.mjs"
rc=$?
say "the browser is done"
if [ -n "${KEEP:-}" ]; then
    echo "KEEP: the console is at http://$ADDR/ (admin token $ADMIN, research $RESEARCH, product $PRODUCT); server pid $SRV, folder $W"
fi
[ $rc -eq 0 ] || { echo "---- server.log (tail) ----"; tail -30 "$W/server.log"; exit $rc; }
# the tokens were used for every request above; none may have been written
for t in "$ADMIN" "$RESEARCH" "$PRODUCT"; do
    if leaked=$(grep -rlaF -- "$t" "$W"); then
        echo "FAIL: a token was written to: $leaked"; exit 1
    fi
done
say "no token in the server's folder"
exit 0
