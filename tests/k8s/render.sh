#!/bin/bash
# render.sh: `lathe render --target k8s` end to end. Every job in
# examples/jobs/, the seed article's job, a multi-node job, an experiment
# and the cluster files are rendered as YAML and as JSON; each output must
# pass validate-k8s ($LATHE_SHARED_DIR/tools; the official v1.32 strict schemas plus
# the API server's name, restartPolicy and quantity rules), and the YAML,
# read with PyYAML, must be the JSON List's items. Then what the objects
# hold (suspended Jobs, a Service before a multi-node Job, the settings of
# --config, --attempt), and the errors: an invalid file exits 2 with its
# file:line, bad options exit 1, a missing file exits 4.
. "$(dirname "$0")/harness/render.sh"
data="$LATHE_SOURCE_DIR/tests/k8s/data"
cluster="$LATHE_SOURCE_DIR/examples/cluster-example.yaml"

# render NAME ARGS...: `lathe render ARGS...` as yaml and json, validated and compared
render() { local name=$1; shift; render_both "$name" render "$@"; }

# query NAME PYTHON-EXPR: the expression over objs (the JSON List's items) is true
query() {
    $PY - "$tmp/$1.json" "$2" <<'EOF'
import json, sys
objs = json.load(open(sys.argv[1]))["items"]
kinds = [o["kind"] for o in objs]
jobs = [o for o in objs if o["kind"] == "Job"]
def env(job, name):
    for e in job["spec"]["template"]["spec"]["containers"][0]["env"]:
        if e["name"] == name:
            return e.get("value", e.get("valueFrom"))
    return None
def pod(job):
    return job["spec"]["template"]["spec"]
sys.exit(0 if eval(sys.argv[2]) else 1)
EOF
    check "$1: $2" $?
}

# every example job and the seed's
for f in "$LATHE_SOURCE_DIR"/examples/jobs/*.yaml; do
    render "example-$(basename "$f" .yaml)" "$f" --target k8s
done
render seed "$LATHE_SOURCE_DIR/examples/seed-lora-job.yaml" --target k8s
query seed "kinds == ['Job']"
query seed "objs[0]['spec']['suspend'] is True and objs[0]['spec']['backoffLimit'] == 0"
query seed "objs[0]['metadata']['name'] == 'lathe-lora-qwen2-7b-r16-1'"
query seed "objs[0]['metadata']['namespace'] == 'ai-training'"
query seed "pod(objs[0])['volumes'][0]['persistentVolumeClaim']['claimName'] == 'lora-checkpoint-pvc'"
query seed "pod(objs[0])['containers'][0]['resources']['requests']['memory'] == '32Gi'"
query seed "pod(objs[0])['containers'][0]['command'] == ['lathe', 'train', '/etc/lathe/spec.yaml']"
query seed "objs[0]['spec']['activeDeadlineSeconds'] == 8 * 3600 + 120 + 60" # a backstop behind lathe's own
query seed "'nodeSelector' not in pod(objs[0]) and 'affinity' not in pod(objs[0])" # placed at admission
query seed "env(objs[0], 'CHECKPOINT_DIR').startswith('/checkpoints/')"
query seed "'lathe.dev/spec' in objs[0]['spec']['template']['metadata']['annotations']"

# the experiment: every job of it
render experiment "$LATHE_SOURCE_DIR/examples/jobs/sweep-rank-lr.yaml"
query experiment "kinds == ['Job'] * 6"
query experiment "len({j['metadata']['name'] for j in jobs}) == 6"
query experiment "all(j['metadata']['labels'].get('lathe.dev/experiment') for j in jobs)"

# a multi-node job, planned against the example cluster
render multi-node "$data/multi-node.yaml" --cluster "$cluster"
query multi-node "kinds == ['Service', 'Job']"
query multi-node "objs[0]['spec']['clusterIP'] == 'None' and objs[0]['metadata']['name'] == objs[1]['metadata']['name']"
query multi-node "jobs[0]['spec']['completionMode'] == 'Indexed' and jobs[0]['spec']['completions'] == 2"
query multi-node "pod(jobs[0])['subdomain'] == jobs[0]['metadata']['name']"
query multi-node "env(jobs[0], 'MASTER_ADDR') == jobs[0]['metadata']['name'] + '-0.' + jobs[0]['metadata']['name']"
query multi-node "'fieldRef' in env(jobs[0], 'NODE_RANK')"
query multi-node "env(jobs[0], 'NNODES') == '2' and env(jobs[0], 'NPROC_PER_NODE') == '8'"
query multi-node "env(jobs[0], 'ON') == 'yes' and env(jobs[0], 'NCCL_DEBUG') == 'WARN'"
query multi-node "pod(jobs[0])['containers'][0]['command'][0] == 'torchrun'"
query multi-node "pod(jobs[0])['priorityClassName'] == 'high-priority'"
query multi-node "jobs[0]['spec']['podFailurePolicy']['rules'][0]['onPodConditions'][0]['type'] == 'DisruptionTarget'"

# the settings of a ServerConfig, and another attempt
render configured "$data/multi-node.yaml" --cluster "$cluster" --config "$data/server.yaml" --attempt 3
query configured "jobs[0]['metadata']['name'] == 'lathe-llama3-70b-lora-2x8-3'"
query configured "jobs[0]['metadata']['labels']['lathe.dev/attempt'] == '3'"
query configured "jobs[0]['metadata']['namespace'] == 'lathe-team-a'"
query configured "pod(jobs[0])['serviceAccountName'] == 'lathe-trainer'"
query configured "pod(jobs[0])['containers'][0]['imagePullPolicy'] == 'IfNotPresent'"
query configured "'data' not in [v['name'] for v in pod(jobs[0])['volumes']]"
query configured "env(jobs[0], 'MASTER_PORT') == '23456' and objs[0]['spec']['ports'][0]['port'] == 23456"
query configured "'ttlSecondsAfterFinished' not in jobs[0]['spec']"
query configured "pod(jobs[0])['securityContext']['runAsUser'] == 2000"

# the cluster files
render cluster-example "$cluster"
query cluster-example "kinds.count('PriorityClass') == 2 and kinds.count('Namespace') == 2"
query cluster-example "kinds.count('ResourceQuota') == 2 and kinds.count('LimitRange') == 2"
query cluster-example "kinds.count('PersistentVolumeClaim') == 6"
# team-a: A100 quota 64 + borrowing 32, L4 quota 2 borrowing without limit (the 4 L4s)
query cluster-example "[o for o in objs if o['kind'] == 'ResourceQuota'][0]['spec']['hard'] == {'requests.nvidia.com/gpu': '100'}"
for f in "$LATHE_SOURCE_DIR"/examples/demo/cluster.yaml "$LATHE_SOURCE_DIR"/examples/seed-scenario/cluster.yaml \
         "$LATHE_SOURCE_DIR"/examples/traces/small-cluster.yaml; do
    render "cluster-$(basename "$(dirname "$f")")" "$f"
done
# the seed's setup: team ml has no quota, so its cap is the server's 8 GPUs
query cluster-seed-scenario "kinds == ['PriorityClass', 'Namespace', 'ResourceQuota', 'LimitRange'] + ['PersistentVolumeClaim'] * 3"
query cluster-seed-scenario "objs[2]['spec']['hard'] == {'requests.nvidia.com/gpu': '8'} and objs[2]['metadata']['namespace'] == 'ml'"
query cluster-seed-scenario "objs[0]['globalDefault'] is True"
render cluster-configured "$cluster" --config "$data/server.yaml"
query cluster-configured "sorted(o['metadata']['name'] for o in objs if o['kind'] == 'Namespace') == ['lathe-team-a', 'research']"
query cluster-configured "all(o['spec']['storageClassName'] == 'cephfs' for o in objs if o['kind'] == 'PersistentVolumeClaim')"

# errors
"$LATHE" render "$data/bad-job.yaml" > "$tmp/bad.out" 2> "$tmp/bad.err"
rc=$?
[ $rc -eq 2 ]; check "an invalid job exits 2 (got $rc)" $?
grep -q "bad-job.yaml:10:11: error: spec.lora.rank" "$tmp/bad.err"; check "the error names file:line:col and the field" $?
[ ! -s "$tmp/bad.out" ]; check "an invalid job prints no objects" $?
"$LATHE" render "$data/multi-node.yaml" --config "$data/bad-job.yaml" > /dev/null 2> "$tmp/badcfg.err"
rc=$?
[ $rc -eq 2 ]; check "a --config that is no ServerConfig exits 2 (got $rc)" $?
grep -q "bad-job.yaml:[0-9]*:[0-9]*:" "$tmp/badcfg.err"; check "the config's error names file:line:col" $?
"$LATHE" render "$tmp/missing.yaml" > /dev/null 2>&1
rc=$?
[ $rc -eq 4 ]; check "a missing file exits 4 (got $rc)" $?
for args in "-o text" "--target slurm" "--attempt 0" "--attempt x" "--bogus"; do
    # shellcheck disable=SC2086
    "$LATHE" render "$cluster" $args > /dev/null 2>&1
    rc=$?
    [ $rc -eq 1 ]; check "render $args exits 1 (got $rc)" $?
done
"$LATHE" render > /dev/null 2>&1
[ $? -eq 1 ]; check "render without a file exits 1" $?
"$LATHE" help render | grep -q -- "--target k8s"; check "lathe help render" $?

[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "lathe render: every object valid"
