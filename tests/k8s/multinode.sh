#!/bin/bash
# multinode.sh: a job on 2 nodes of 2 GPUs runs as an Indexed Job of 2 pods
# with a headless Service; each pod sees NNODES=2, its NODE_RANK (from the
# completion index), MASTER_ADDR = pod 0's stable name, MASTER_PORT and
# NPROC_PER_NODE, as torchrun / ms-swift read them. Lines of the pod of
# rank 1 reach the job's log prefixed "[node 1]".
. "$(dirname "$0")/harness/lib.sh"

k8s_start
srv_start
cat > "$T/mn.yaml" <<EOF2
apiVersion: lathe/v1
kind: LoRATrainingJob
metadata:
  name: mn
spec:
  team: team-a
  baseModel:
    path: $T/mnt/models/tiny
  trainingData:
    datasetPath: $T/mnt/data/train.jsonl
  resources:
    gpu:
      count: 1
      type: L4-24GB
    nodes: 2
  timeout:
    gracePeriod: 5s
  trainer:
    image: registry.example.com/torchrun:2.4
    command: ["/bin/sh", "-c", "echo rank=\$NODE_RANK of=\$NNODES master=\$MASTER_ADDR:\$MASTER_PORT nproc=\$NPROC_PER_NODE idx=\$JOB_COMPLETION_INDEX"]
EOF2
submit "$T/mn.yaml"; check "submit a 2-node job" $?
wait_state mn succeeded 180; check "the 2-node job succeeded" $?
kc get job lathe-mn-1 -n team-a -o json > "$T/job.json"
"$PY" - "$T/job.json" <<'PYEOF'
import json, sys
j = json.load(open(sys.argv[1]))
s = j["spec"]
ok = s.get("completionMode") == "Indexed" and s.get("completions") == 2 and s.get("parallelism") == 2 \
     and s["template"]["spec"].get("subdomain") == "lathe-mn-1"
sys.exit(0 if ok else 1)
PYEOF
check "an Indexed Job of 2 with the Service's subdomain" $?
kc get service lathe-mn-1 -n team-a -o json > "$T/svc.json" 2>/dev/null
"$PY" -c 'import json,sys; s=json.load(open(sys.argv[1]))["spec"]; sys.exit(0 if s.get("clusterIP")=="None" and s.get("publishNotReadyAddresses") else 1)' "$T/svc.json"
check "a headless Service that publishes not-ready addresses" $?
"$LATHE" logs mn > "$T/logs" 2>&1
grep -q "^rank=0 of=2 master=lathe-mn-1-0.lathe-mn-1:29500 nproc=1 idx=0" "$T/logs"; check "rank 0's environment" $?
grep -q "^\[node 1\] rank=1 of=2 master=lathe-mn-1-0.lathe-mn-1:29500 nproc=1 idx=1" "$T/logs"; check "rank 1's environment, its lines prefixed" $?
pods=$(kc get pods -n team-a -l batch.kubernetes.io/job-name=lathe-mn-1 -o name | wc -l)
[ "$pods" -eq 2 ]; check "two pods ($pods)" $?
placed=$(kc get job lathe-mn-1 -n team-a -o json | "$PY" -c '
import json, sys
t = json.load(sys.stdin)["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
terms = t["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
print(" ".join(sorted(v for term in terms for e in term["matchExpressions"]
                      if e["key"] == "kubernetes.io/hostname" for v in e["values"])))')
ran=$(kc get pods -n team-a -l batch.kubernetes.io/job-name=lathe-mn-1 -o jsonpath='{.items[*].spec.nodeName}' | tr ' ' '\n' | sort -u | tr '\n' ' ' | sed 's/ $//')
[ -n "$ran" ] && [ "$ran" = "$placed" ]; check "the pods ran on the nodes lathe admitted them to ($ran / $placed)" $?
finish
