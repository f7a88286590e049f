#!/bin/bash
# operator_seed.sh: the seed article's LoRATrainingJob, applied with
# `kubectl apply -f` exactly as the article prints it (group
# training.example.com, namespace ai-training, an A100-40GB, a PVC named
# lora-checkpoint-pvc), is validated, planned and queued, and its Job is
# made with the seed's settings: GPUs of the A100 product (four: the
# planner's choice, as one would need 1d8h, beyond the seed's 8h), 4 CPUs and
# 32Gi, LORA_RANK 16, CHECKPOINT_INTERVAL 500, the seed's model and data
# paths, its checkpoint PVC, activeDeadlineSeconds of 8h.
. "$(dirname "$0")/harness/lib.sh"
seed="$LATHE_SOURCE_DIR/examples/seed-lora-job.yaml"

cat > "$T/a100.json" <<'EOF2'
[{"name": "a100-1", "gpus": 4, "product": "NVIDIA-A100-SXM4-40GB", "memoryMiB": 40960, "cpu": "64",
  "memory": "512Gi", "labels": {"rack-id": "rack-1"}}]
EOF2
k8s_start "$T/a100.json"
OP_NAMESPACES="ai-training" op_setup
cat > "$T/cluster.yaml" <<'EOF2'
apiVersion: lathe/v1
kind: Cluster
metadata:
  name: seed
spec:
  gpuTypes:
    - name: A100-40GB
      memory: 40Gi
      pricePerHour: 1.10
EOF2
sed -i 's|gpuProducts: {L4-24GB: NVIDIA-L4}|gpuProducts: {A100-40GB: NVIDIA-A100-SXM4-40GB}|' "$T/op-1.yaml"
# the seed's paths are those of its cluster's mounts (/models, /data), not
# the double's: the policy allows them as roots
sed -i 's|^  policy:$|  policy:\n    paths: {models: [/models], data: [/data]}|' "$T/op-1.yaml"
kc create namespace ai-training > /dev/null 2>&1; check "the seed's namespace ai-training" $?
op_start 1
wait_for 60 op_ready 1; check "the operator leads" $?

kc apply -f "$seed" > "$T/apply.out" 2>&1; check "kubectl apply -f of the seed's file as it is ($(cat "$T/apply.out"))" $?
job=lathe-lora-qwen2-7b-r16-1
wait_for 60 kc get job $job -n ai-training; check "its Job $job is made in ai-training" $?
admitted() { [ "$(kc get job $job -n ai-training -o 'jsonpath={.spec.suspend}')" = false ]; }
wait_for 60 admitted; check "lathe admits it (suspend false)" $?
kc get job $job -n ai-training -o json > "$T/job.json"
"$PY" - "$T/job.json" <<'PYEOF'
import json, sys
j = json.load(open(sys.argv[1]))
pod = j["spec"]["template"]["spec"]
c = pod["containers"][0]
env = {e["name"]: e.get("value") for e in c.get("env", [])}
claims = [v["persistentVolumeClaim"]["claimName"] for v in pod.get("volumes", []) if "persistentVolumeClaim" in v]
res = c["resources"]
checks = {
    # the planner's choice: 1 x A100-40GB would need 1d8h, beyond the seed's
    # maxDuration of 8h, so it plans 4 (lathe plan says why)
    "4 GPUs as planned": str(res["limits"].get("nvidia.com/gpu")) == "4",
    "the A100 product": pod.get("nodeSelector", {}).get("nvidia.com/gpu.product") == "NVIDIA-A100-SXM4-40GB",
    "4 CPUs": str(res["requests"].get("cpu")) == "4",
    "32Gi": str(res["requests"].get("memory")) == "32Gi",
    "LORA_RANK 16": env.get("LORA_RANK") == "16",
    "CHECKPOINT_INTERVAL 500": env.get("CHECKPOINT_INTERVAL") == "500",
    "BASE_MODEL_PATH": env.get("BASE_MODEL_PATH") == "/models/qwen2-7b-instruct",
    "DATASET_PATH": env.get("DATASET_PATH") == "/data/training/qwen2-finetune",
    "the seed's PVC": "lora-checkpoint-pvc" in claims,
    "8h deadline (plus the grace period)": 28800 <= j["spec"].get("activeDeadlineSeconds", 0) <= 28800 + 600,
    "owned by the object": any(r["kind"] == "LoRATrainingJob" for r in j["metadata"].get("ownerReferences", [])),
}
bad = [k for k, v in checks.items() if not v]
if bad:
    print("not as the seed says:", bad, json.dumps(res), json.dumps(env)[:400], claims)
sys.exit(1 if bad else 0)
PYEOF
check "the Job has the seed's settings" $?
wait_for 60 sh -c "[ -n \"\$(KUBECONFIG=$T/kube/kubeconfig kubectl get lorajobs lora-qwen2-7b-r16 -n ai-training -o jsonpath='{.status.phase}')\" ]"
check "the object has a status" $?
kc get lorajobs -n ai-training > "$T/get.out" 2>&1
grep -q "^lora-qwen2-7b-r16 " "$T/get.out"; check "kubectl get lorajobs lists it ($(tail -1 "$T/get.out"))" $?
kc delete -f "$seed" > /dev/null 2>&1; check "kubectl delete -f of the seed's file" $?
gone() { ! kc get job $job -n ai-training > /dev/null 2>&1; }
wait_for 90 gone; check "its Job goes with it" $?
finish
