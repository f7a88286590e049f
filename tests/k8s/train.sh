#!/bin/bash
# train.sh: a job submitted through lathe's API runs as a batch/v1 Job on
# the Kubernetes API double: created suspended, admitted with its
# placement (nodeSelector, node affinity), the built-in trainer really
# trains in the pod and checkpoints into the PVC's folder, its log reaches
# `lathe logs`, and the job succeeds with its PEFT adapter in the PVC.
. "$(dirname "$0")/harness/lib.sh"

k8s_start
srv_start
curl -sf "http://$LATHE_SERVER/readyz" >/dev/null; check "readyz says ready with the API's view current" $?

STEPS=12 CKPT_EVERY=4 write_job train-r8 team-a "  priorityClassName: urgent"
sed -i 's/^  lora:$/  lora:\n    rank: 8/' "$T/train-r8.yaml"
submit "$T/train-r8.yaml"; check "submit" $?

# the Job exists while the job waits or runs; one per attempt, named lathe-<job>-<attempt>
wait_for 60 kc get job lathe-train-r8-1 -n team-a; check "the Job lathe-train-r8-1 is in namespace team-a" $?
wait_state train-r8 succeeded 300; check "the job succeeded" $?

kc get job lathe-train-r8-1 -n team-a -o json > "$T/job.json"
"$PY" - "$T/job.json" <<'PYEOF'
import json, sys
j = json.load(open(sys.argv[1]))
s, t = j["spec"], j["spec"]["template"]
pod = t["spec"]
c = pod["containers"][0]
env = {e["name"]: e.get("value") for e in c.get("env", [])}
checks = {
    "labels": j["metadata"]["labels"].get("lathe.dev/team") == "team-a"
              and j["metadata"]["labels"].get("lathe.dev/attempt") == "1",
    "admitted (suspend false)": s.get("suspend") is False,
    "backoffLimit 0": s.get("backoffLimit") == 0,
    "podFailurePolicy": any(r["action"] == "FailJob" and "onPodConditions" in r
                            for r in s["podFailurePolicy"]["rules"]),
    "podReplacementPolicy": s.get("podReplacementPolicy") == "Failed",
    "restartPolicy Never": pod.get("restartPolicy") == "Never",
    "grace period": pod.get("terminationGracePeriodSeconds") == 20,
    "priority class": pod.get("priorityClassName") == "urgent",
    "node affinity": "nodeAffinity" in pod.get("affinity", {}),
    "gpu product selector": pod.get("nodeSelector", {}).get("nvidia.com/gpu.product") == "NVIDIA-L4",
    "gpu request": c["resources"]["limits"].get("nvidia.com/gpu") in ("1", 1),
    "no shell": c["command"][0].endswith("lathe") and c["command"][1] == "train",
    "contract env": env.get("LORA_RANK") == "8" and env.get("CHECKPOINT_DIR", "").endswith("/train-r8"),
    "non-root": pod.get("securityContext", {}).get("runAsNonRoot") is True,
    "Complete": any(x["type"] == "Complete" and x["status"] == "True"
                    for x in j.get("status", {}).get("conditions", [])),
}
bad = [k for k, v in checks.items() if not v]
print("Job fields not as expected:", bad) if bad else None
sys.exit(1 if bad else 0)
PYEOF
check "the Job has the fields of the issue (labels, admission, podFailurePolicy, placement, resources, argv, env)" $?

ls "$T/kube/volumes/team-a/lathe-checkpoints/train-r8" > "$T/ckpts" 2>&1
grep -q "checkpoint-" "$T/ckpts"; check "checkpoints in the PVC folder" $?
find "$T/kube/volumes/team-a/lathe-checkpoints/train-r8" -name adapter_model.safetensors | grep -q .
check "the PEFT adapter is in the PVC folder" $?
"$LATHE" logs train-r8 > "$T/logs" 2>&1; grep -q "\[lathe-train\] done" "$T/logs"
check "lathe logs shows the pod's log" $?
loss=$(job_field train-r8 progress.loss); [ -n "$loss" ]; check "progress (loss $loss) came through the pod log" $?
"$LATHE" describe job train-r8 > "$T/describe" 2>&1; grep -qi "started" "$T/describe"; check "describe shows the attempt" $?
n=$(kc get jobs -n team-a -l lathe.dev/job=train-r8 -o name | wc -l); [ "$n" -eq 1 ]; check "one Job for one attempt ($n)" $?
finish
