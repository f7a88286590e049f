#!/bin/bash
# render_serve.sh: `lathe render serve --target k8s`, what serves an
# adapter. For a job file (lathe serve and vLLM), an experiment with its
# results (from a file of the API's JSON, and from a real `lathe server`
# whose jobs report eval losses), and options alone, whose rendered
# command starts this build's lathe serve: rendered as YAML and as JSON,
# every object passes validate-k8s ($LATHE_SHARED_DIR/tools; the official v1.32
# strict schemas), the YAML reads back as the JSON List's items, and the
# objects hold what they must: the probes, each runtime's arguments, the
# PVCs the training pods wrote to (read-only), the API key from a Secret,
# the autoscaler's CPU and requests-per-second metrics, the budget of more
# than one pod, the experiment's choice and its explanation (YAML comments
# and stderr). Then the errors and their exit codes.
. "$(dirname "$0")/harness/render.sh"

SEED="$LATHE_SOURCE_DIR/examples/seed-lora-job.yaml"
SWEEP="$LATHE_SOURCE_DIR/examples/jobs/sweep-rank-lr.yaml"
RESULTS="$LATHE_TEST_DATA/serve-sweep-results.json"
NOEVAL="$LATHE_TEST_DATA/serve-sweep-noeval.json"

# render NAME COUNT ARGS...: `lathe render serve --target k8s ARGS...`
render() { local name=$1 count=$2; shift 2; RENDER_COUNT=$count render_both "$name" render serve --target k8s "$@"; }

# query NAME PYTHON-EXPR: true over objs (the List's items)
query() {
    $PY - "$tmp/$1.json" "$2" <<'EOF'
import json, sys
objs = json.load(open(sys.argv[1]))["items"]
kinds = [o["kind"] for o in objs]
def one(kind):
    m = [o for o in objs if o["kind"] == kind]
    assert len(m) == 1, (kind, len(m))
    return m[0]
dep = one("Deployment")
pod = dep["spec"]["template"]["spec"]
ctr = pod["containers"][0]
cmd = ctr["command"]
env = {e["name"]: e for e in ctr.get("env", [])}
mounts = {m["name"]: m for m in ctr["volumeMounts"]}
vols = {v["name"]: v for v in pod["volumes"]}
svc = one("Service")
hpa = [o for o in objs if o["kind"] == "HorizontalPodAutoscaler"]
hpa = hpa[0] if hpa else None
labels = dep["metadata"]["labels"]
def flag(name):
    return cmd[cmd.index(name) + 1]
sys.exit(0 if eval(sys.argv[2]) else 1)
EOF
    check "$1: $2" $?
}

# a job file, lathe serve
render job 3 "$SEED"
query job "kinds == ['Service', 'Deployment', 'HorizontalPodAutoscaler']"
query job "cmd[:4] == ['lathe', 'serve', '--model', '/models/qwen2-7b-instruct']"
query job "flag('--served-model-name') == 'Qwen2-7B-Instruct' and pod['terminationGracePeriodSeconds'] == 130"
query job "flag('--adapter') == 'lora-qwen2-7b-r16=/checkpoints/lora-qwen2-7b-r16/final' and flag('--port') == '8000' and flag('--host') == '0.0.0.0'"
query job "vols['adapters']['persistentVolumeClaim'] == {'claimName': 'lora-checkpoint-pvc', 'readOnly': True} and mounts['adapters'] == {'name': 'adapters', 'mountPath': '/checkpoints', 'readOnly': True}"
query job "vols['models']['persistentVolumeClaim'] == {'claimName': 'lathe-models', 'readOnly': True} and mounts['models']['readOnly'] is True"
query job "all(o['metadata']['namespace'] == 'ai-training' for o in objs) and labels['lathe.dev/team'] == 'ai-training' and labels['lathe.dev/job'] == 'lora-qwen2-7b-r16'"
query job "ctr['livenessProbe']['httpGet']['path'] == '/health' and ctr['livenessProbe']['initialDelaySeconds'] == 60 and ctr['livenessProbe']['periodSeconds'] == 30"
query job "ctr['readinessProbe']['httpGet']['path'] == '/ready' and ctr['readinessProbe']['initialDelaySeconds'] == 30 and ctr['readinessProbe']['periodSeconds'] == 10"
# 7.6B parameters in bf16 read at 100 MiB/s after lathe's 60 s: about 205 s
query job "ctr['startupProbe']['httpGet']['path'] == '/health' and 200 <= ctr['startupProbe']['periodSeconds'] * ctr['startupProbe']['failureThreshold'] <= 220"
query job "'replicas' not in dep['spec'] and hpa['spec']['minReplicas'] == 1 and hpa['spec']['maxReplicas'] == 4"
query job "hpa['spec']['metrics'][0] == {'type': 'Resource', 'resource': {'name': 'cpu', 'target': {'type': 'Utilization', 'averageUtilization': 70}}}"
query job "hpa['spec']['metrics'][1]['pods']['metric']['name'] == 'lathe_serve_requests_per_second' and hpa['spec']['metrics'][1]['pods']['target'] == {'type': 'AverageValue', 'averageValue': '10'}"
query job "svc['spec']['type'] == 'ClusterIP' and svc['spec']['selector'] == dep['spec']['selector']['matchLabels']"
query job "dep['spec']['selector']['matchLabels'].items() <= dep['spec']['template']['metadata']['labels'].items()"
query job "pod['securityContext']['runAsNonRoot'] is True and pod['automountServiceAccountToken'] is False"
! grep -q '^#' "$tmp/job.yaml"; check "a job file: no choice, no comments" $?

# the same job on vLLM: GPUs, tensor parallel, the key from a Secret, two pods at least
render vllm 4 "$SEED" --runtime vllm --gpus 2 --api-key-secret serve-keys:openai --min-replicas 2 --max-replicas 8 --rps-target 2.5 --cpu-target 60
query vllm "kinds == ['Service', 'Deployment', 'HorizontalPodAutoscaler', 'PodDisruptionBudget']"
query vllm "cmd[:3] == ['vllm', 'serve', '/models/qwen2-7b-instruct'] and flag('--port') == '8000'"
query vllm "flag('--lora-modules') == 'lora-qwen2-7b-r16=/checkpoints/lora-qwen2-7b-r16/final' and '--enable-lora' in cmd and flag('--max-loras') == '1' and flag('--max-lora-rank') == '16'"
query vllm "flag('--tensor-parallel-size') == '2' and flag('--served-model-name') == 'Qwen2-7B-Instruct'"
query vllm "ctr['resources']['requests']['nvidia.com/gpu'] == 2 and ctr['resources']['limits']['nvidia.com/gpu'] == 2"
query vllm "env['VLLM_API_KEY'] == {'name': 'VLLM_API_KEY', 'valueFrom': {'secretKeyRef': {'name': 'serve-keys', 'key': 'openai'}}} and not any('api-key' in a for a in cmd)"
query vllm "ctr['readinessProbe']['httpGet']['path'] == '/health' and ctr['readinessProbe']['periodSeconds'] == 10"
query vllm "hpa['spec']['minReplicas'] == 2 and hpa['spec']['maxReplicas'] == 8 and hpa['spec']['metrics'][0]['resource']['target']['averageUtilization'] == 60"
query vllm "hpa['spec']['metrics'][1]['pods'] == {'metric': {'name': 'vllm_requests_per_second'}, 'target': {'type': 'AverageValue', 'averageValue': '2500m'}}"
query vllm "one('PodDisruptionBudget')['spec'] == {'maxUnavailable': 1, 'selector': {'matchLabels': dep['spec']['selector']['matchLabels']}}"
query vllm "labels['lathe.dev/runtime'] == 'vllm' and 'dshm' in vols"

# an experiment: the job with the best eval loss, explained
render experiment 3 "$SWEEP" --results "$RESULTS" --runtime vllm
query experiment "flag('--lora-modules') == 'sweep=/checkpoints/sweep-r16-lr2e-4/final' and flag('--max-lora-rank') == '16'"
query experiment "labels['lathe.dev/job'] == 'sweep-r16-lr2e-4' and labels['lathe.dev/experiment'] == 'sweep' and dep['metadata']['name'] == 'sweep'"
query experiment "dep['metadata']['annotations']['lathe.dev/selection'].startswith('sweep: serving job sweep-r16-lr2e-4, eval loss 1.2731')"
head -1 "$tmp/experiment.yaml" | grep -q '^# sweep: serving job sweep-r16-lr2e-4, eval loss 1.2731 (final training loss 1.1024)$'
check "the choice is the YAML's first comment" $?
grep -q '^# runner-up 1: sweep-r16-lr1e-4, eval loss 1.2875 (+0.0144)$' "$tmp/experiment.yaml"; check "the runner-up is in the comments" $?
grep -q '^# left out: sweep-r8-lr2e-4 (failed), sweep-r32-lr2e-4 (running)$' "$tmp/experiment.yaml"; check "the jobs left out are in the comments" $?
grep -q '^lathe render: why: the lowest eval loss of the 4 succeeded' "$tmp/experiment.err"; check "the reason is on stderr" $?
grep -q "^# note: sweep-r16-lr2e-4's lowest eval loss was at step 1000; its final adapter, served here, had eval loss 1.2790 at step 1200" "$tmp/experiment.yaml"
check "a best eval loss before the last step: said" $?
# lathe serve needs the model's folder: the sweep names its model only
render experiment-lathe 3 "$SWEEP" --results "$RESULTS" --model-path /models/qwen2.5-7b-instruct --adapter base-chat=/checkpoints/chat/final --name support-bot
query experiment-lathe "cmd[:4] == ['lathe', 'serve', '--model', '/models/qwen2.5-7b-instruct'] and [cmd[i + 1] for i, a in enumerate(cmd) if a == '--adapter'] == ['sweep=/checkpoints/sweep-r16-lr2e-4/final', 'base-chat=/checkpoints/chat/final']"
query experiment-lathe "flag('--max-adapters') == '2' and all(o['metadata']['name'] == 'support-bot' for o in objs)"

# no eval loss anywhere: the final training loss, and the output says so
render fallback 3 "$SWEEP" --results "$NOEVAL" --runtime vllm
query fallback "flag('--lora-modules') == 'sweep=/checkpoints/sweep-r32-lr2e-4/final'"
grep -q '^# fallback: no succeeded job has an eval loss' "$tmp/fallback.yaml"; check "the fallback is said in the YAML" $?
grep -q '^lathe render: fallback: no succeeded job has an eval loss' "$tmp/fallback.err"; check "the fallback is said on stderr" $?

# the results from a real `lathe server` (GET /v1/experiments/NAME through
# lathe's client): three jobs of a trainer that reports lathe's progress
# lines; the lowest eval loss (rank 16) wins, not the lowest training loss
# (rank 32)
mkdir -p "$tmp/srv"
cat > "$tmp/srv/trainer.sh" <<'EOF'
#!/bin/bash
case "$LORA_RANK" in 8) e=1.40 t=1.20 ;; 16) e=1.25 t=1.10 ;; *) e=1.31 t=1.00 ;; esac
echo "[lathe-train] start steps=2"
echo "[lathe-train] step=1/2 loss=1.9 eval_loss=1.6"
echo "[lathe-train] step=2/2 loss=$t eval_loss=$e"
echo "[lathe-train] done step=2 loss=$t eval_loss=$e best_eval_loss=$e best_eval_step=2 adapter=$CHECKPOINT_DIR/final"
EOF
chmod +x "$tmp/srv/trainer.sh"
echo '{"instruction": "Say hi", "output": "hi"}' > "$tmp/srv/train.jsonl"
cat > "$tmp/srv/tiny.yaml" <<EOF
apiVersion: lathe/v1
kind: LoRAExperiment
metadata:
  name: tiny
spec:
  template:
    spec:
      baseModel:
        name: Qwen2.5-0.5B-Instruct
      trainingData:
        datasetPath: $tmp/srv/train.jsonl
      trainer:
        command: [$tmp/srv/trainer.sh]
  matrix:
    lora.rank: [8, 16, 32]
EOF
cat > "$tmp/srv/server.yaml" <<EOF
apiVersion: lathe/v1
kind: ServerConfig
spec:
  listen: 127.0.0.1:0
  dataDir: $tmp/srv/data
  cluster:
    gpus: none
  policy:
    # the experiment's dataset and its trainer (files as roots); no sandbox,
    # which has its own tests: this one is about what is rendered
    paths: {data: [train.jsonl], programs: [trainer.sh]}
    sandbox: {mode: off}
EOF
"$LATHE" server --config "$tmp/srv/server.yaml" > "$tmp/srv/server.log" 2>&1 &
srv=$!
trap 'kill $srv 2> /dev/null; wait $srv 2> /dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do
    [ -s "$tmp/srv/data/admin-token" ] && [ -s "$tmp/srv/data/server.addr" ] && break
    sleep 0.1
done
addr="http://$(cat "$tmp/srv/data/server.addr")"
token=$(cat "$tmp/srv/data/admin-token")
"$LATHE" submit "$tmp/srv/tiny.yaml" --server "$addr" --token "$token" > "$tmp/srv/submit.out" 2>&1
check "the experiment is submitted ($(tail -2 "$tmp/srv/submit.out"))" $?
for j in tiny-r8 tiny-r16 tiny-r32; do
    "$LATHE" wait "$j" --quiet --timeout 60s --server "$addr" --token "$token" > /dev/null 2>&1
    check "$j succeeds" $?
done
render server 3 "$tmp/srv/tiny.yaml" --runtime vllm --server "$addr" --token "$token"
query server "flag('--lora-modules') == 'tiny=/checkpoints/tiny-r16/final' and labels['lathe.dev/job'] == 'tiny-r16' and labels['lathe.dev/team'] == 'default'"
grep -q '^# tiny: serving job tiny-r16, eval loss 1.2500 (final training loss 1.1000)$' "$tmp/server.yaml"
check "the server's answer: the lowest eval loss chosen and said" $?
grep -q '^# runner-up 1: tiny-r32, eval loss 1.3100 (+0.0600)$' "$tmp/server.yaml"
check "the server's answer: the runner-up" $?
"$LATHE" render serve "$tmp/srv/tiny.yaml" --runtime vllm --server "$addr" --token wrong > /dev/null 2> "$tmp/srv/refused.err"
rc=$?
[ $rc -eq 1 ]; check "a token the server refuses exits 1 (got $rc: $(head -c 200 "$tmp/srv/refused.err"))" $?
"$LATHE" render serve "$SWEEP" --runtime vllm --server "$addr" --token "$token" > /dev/null 2> "$tmp/srv/missing.err"
rc=$?
[ $rc -eq 2 ]; check "an experiment the server does not have exits 2 (got $rc)" $?
grep -q "experiment sweep not found" "$tmp/srv/missing.err"; check "the missing experiment is named" $?
kill $srv
wait $srv 2> /dev/null

# a job with its own trainer: the adapter where lathe's trainer leaves it, and a word about it
render swift 3 "$LATHE_SOURCE_DIR/examples/jobs/ms-swift-trainer.yaml" --runtime vllm
grep -q "runs its own trainer: its adapter is taken to be in /checkpoints/qwen2-7b-swift/final" "$tmp/swift.err"
check "a command trainer's adapter: said on stderr" $?

# the container's command is one lathe serve takes: a tiny model and an
# adapter trained for two steps, served by the rendered argv (with this
# build's lathe) and the key the Secret would give: /health and /ready
# answer, the adapter is a model, /v1 wants the key, /metrics counts requests
mkdir -p "$tmp/run"
"$LATHE" init-model "$tmp/run/model" --preset tiny \
    --tokenizer "$LATHE_SOURCE_DIR/share/tokenizers/qwen3/tokenizer.json" > "$tmp/run/init.log" 2>&1
check "a tiny model ($(tail -2 "$tmp/run/init.log"))" $?
"$LATHE" train --model "$tmp/run/model" --text "$LATHE_SOURCE_DIR/share/data/tinyshakespeare/input.txt" \
    --checkpoint-dir "$tmp/run/ck" --max-steps 2 --seq-len 32 > "$tmp/run/train.log" 2>&1
check "its adapter ($(tail -2 "$tmp/run/train.log"))" $?
port=$($PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
render run 3 --name tiny --model-path "$tmp/run/model" --adapter "shakespeare=$tmp/run/ck/final" \
    --port "$port" --cpu 1 --api-key-secret tiny-key
$PY - "$tmp/run.json" "$LATHE" > "$tmp/run/argv" <<'EOF'
import json, sys
dep = [o for o in json.load(open(sys.argv[1]))["items"] if o["kind"] == "Deployment"][0]
cmd = dep["spec"]["template"]["spec"]["containers"][0]["command"]
sys.stdout.write("\0".join([sys.argv[2]] + cmd[1:]))
EOF
mapfile -d '' -t argv < "$tmp/run/argv"
LATHE_API_KEY=tiny-s3cret "${argv[@]}" > "$tmp/run/serve.log" 2>&1 &
served=$!
trap 'kill $srv $served 2> /dev/null; wait $srv $served 2> /dev/null; rm -rf "$tmp"' EXIT
$PY - "$port" <<'EOF'
import json, sys, time, urllib.error, urllib.request
base = "http://127.0.0.1:%s" % sys.argv[1]
def get(path, key=None):
    req = urllib.request.Request(base + path)
    if key:
        req.add_header("Authorization", "Bearer " + key)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return 0, ""
for _ in range(300):
    if get("/ready")[0] == 200:
        break
    time.sleep(0.1)
assert get("/ready")[0] == 200, "not ready"
assert get("/health")[0] == 200, "not healthy"
assert get("/v1/models")[0] == 401, "no key asked"
code, body = get("/v1/models", "tiny-s3cret")
assert code == 200 and "shakespeare" in [m["id"] for m in json.loads(body)["data"]], body
assert "lathe_serve_requests_total" in get("/metrics")[1], "no request counter"
EOF
check "the rendered lathe serve command serves ($(tail -3 "$tmp/run/serve.log"))" $?
kill $served
wait $served 2> /dev/null

# options alone: no file
render options 3 --name chat --namespace team-a --model-path /models/llama-3-8b --adapter chat=/adapters/chat/final --adapters-pvc chat-adapters --model-pvc base-models --replicas 2 --port 8080 --cpu 8 --memory 24Gi --api-key-secret chat-key --startup-timeout 20m --image registry.example.com/lathe:1.2
query options "kinds == ['Service', 'Deployment', 'PodDisruptionBudget'] and dep['spec']['replicas'] == 2"
query options "all(o['metadata']['namespace'] == 'team-a' for o in objs) and ctr['image'] == 'registry.example.com/lathe:1.2'"
query options "vols['adapters']['persistentVolumeClaim']['claimName'] == 'chat-adapters' and vols['models']['persistentVolumeClaim']['claimName'] == 'base-models'"
query options "flag('--port') == '8080' and ctr['ports'][0]['containerPort'] == 8080 and svc['spec']['ports'][0]['port'] == 8080 and flag('--threads') == '8'"
query options "'--api-key' not in cmd and env['LATHE_API_KEY'] == {'name': 'LATHE_API_KEY', 'valueFrom': {'secretKeyRef': {'name': 'chat-key', 'key': 'api-key'}}}"
query options "ctr['resources'] == {'requests': {'cpu': '8', 'memory': '24Gi'}, 'limits': {'memory': '24Gi'}}"
query options "ctr['startupProbe']['periodSeconds'] * ctr['startupProbe']['failureThreshold'] == 1200"

# errors
expect() { # expect RC DESCRIPTION ARGS...
    local want=$1 what=$2
    shift 2
    "$LATHE" render serve "$@" > "$tmp/err.out" 2> "$tmp/err.err"
    local rc=$?
    [ $rc -eq "$want" ]; check "$what exits $want (got $rc: $(head -c 200 "$tmp/err.err"))" $?
    [ ! -s "$tmp/err.out" ]; check "$what prints no objects" $?
}
expect 1 "no file and no options"
expect 1 "--replicas with --min-replicas" "$SEED" --replicas 2 --min-replicas 1
expect 1 "--min-replicas above --max-replicas" "$SEED" --min-replicas 5 --max-replicas 2
expect 1 "--runtime tgi" "$SEED" --runtime tgi
expect 1 "--adapter without a path" "$SEED" --adapter chat
expect 1 "--adapter with a relative path" "$SEED" --adapter chat=adapters/chat
expect 1 "--adapter with \$" "$SEED" --adapter 'chat=/a/$(HOME)'
expect 1 "--adapter named as the file's" "$SEED" --adapter lora-qwen2-7b-r16=/x
expect 1 "--name that is no DNS-1035 label" "$SEED" --name 9lives
expect 1 "--gpus -1" "$SEED" --gpus -1
expect 1 "--rps-target 0" "$SEED" --rps-target 0
expect 1 "--api-key-secret Bad_Name" "$SEED" --api-key-secret Bad_Name
expect 1 "--results without the experiment's file" --results "$RESULTS" --name x --model-path /m --adapter a=/a
expect 1 "--attempt" "$SEED" --attempt 2
expect 1 "lathe serve with a model named only" "$SWEEP" --results "$RESULTS"
expect 1 "lathe serve with a relative --model-path" --name x --model-path models/m --adapter a=/a
expect 1 "two files" "$SEED" "$SWEEP"
expect 1 "--results with a job file" "$SEED" --results "$RESULTS"
expect 4 "a missing file" "$tmp/missing.yaml"
expect 4 "a missing --results" "$SWEEP" --results "$tmp/missing.json"
echo '{"jobs": [' > "$tmp/broken.json"
expect 2 "a --results that is not JSON" "$SWEEP" --results "$tmp/broken.json" --runtime vllm
echo '{"name": "sweep"}' > "$tmp/shape.json"
expect 2 "a --results of another shape" "$SWEEP" --results "$tmp/shape.json" --runtime vllm
echo '[{"name": "sweep-r8-lr1e-4", "state": "running", "progress": {"loss": 1.2}}]' > "$tmp/running.json"
expect 2 "an experiment with no succeeded job" "$SWEEP" --results "$tmp/running.json" --runtime vllm
grep -q "none of its 1 job(s) has succeeded yet" "$tmp/err.err"; check "no succeeded job: the reason" $?
echo '[{"name": "other-job", "state": "succeeded", "eval": {"best_loss": 1.0}}]' > "$tmp/other.json"
expect 2 "results of another experiment" "$SWEEP" --results "$tmp/other.json" --runtime vllm
grep -q "job other-job of the results is not one of" "$tmp/err.err"; check "another experiment's job: named" $?
expect 2 "a Cluster file" "$LATHE_SOURCE_DIR/examples/cluster-example.yaml" --runtime vllm
expect 5 "an unreachable server" "$SWEEP" --runtime vllm --server http://127.0.0.1:1
"$LATHE" render "$SEED" --runtime vllm > /dev/null 2>&1
[ $? -eq 1 ]; check "a serve option with a job file (not serve) exits 1" $?
"$LATHE" help render | grep -q -- "render serve \[FILE\]"; check "lathe help render shows the serve form" $?

[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "lathe render serve: every object valid"
