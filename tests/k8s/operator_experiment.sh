#!/bin/bash
# operator_experiment.sh: a LoRAExperiment (lathe's own group, lathe.dev/v1)
# applied with kubectl expands into its matrix's jobs, at most maxConcurrent
# at a time, each a Job owned by the experiment; its status counts them by
# state and lists each with its loss; `kubectl get loraexperiments` shows
# it. The leader is killed while the first job trains: the standby rebuilds
# the experiment's jobs from the API (the running one keeps its Job, the
# waiting one stays queued) and the experiment succeeds with one Job per
# job, none made twice.
. "$(dirname "$0")/harness/lib.sh"

k8s_start
op_setup
op_start 1
wait_for 60 op_ready 1; check "replica 1 leads" $?
op_start 2

cat > "$T/exp.yaml" <<EOF2
apiVersion: lathe.dev/v1
kind: LoRAExperiment
metadata:
  name: sweep
  namespace: team-a
spec:
  maxConcurrent: 1
  template:
    spec:
      method: lora
      baseModel:
        path: $T/mnt/models/tiny
      lora:
        targetModules: [all-linear]
      trainingData:
        datasetPath: $T/mnt/data/train.jsonl
      hyperparams:
        maxSteps: 40
        learningRate: 5e-3
        warmupSteps: 2
        maxSeqLength: 64
      checkpoint:
        intervalSteps: 4
      timeout:
        gracePeriod: 20s
      trainer:
        env:
          LATHE_THREADS: "1"
  matrix:
    lora.rank: [4, 8]
EOF2
kc apply -f "$T/exp.yaml" > "$T/apply.out" 2>&1; check "kubectl apply -f of a LoRAExperiment ($(cat "$T/apply.out"))" $?
ef() { kc get loraexperiments.lathe.dev sweep -n team-a -o "jsonpath={$1}" 2>/dev/null; }
total() { [ "$(ef .status.jobs.total)" = 2 ]; }
wait_for 60 total; check "its status counts 2 jobs" $?
running1() { [ "$(ef .status.jobs.running)" = 1 ] && [ "$(ef .status.jobs.queued)" = 1 ]; }
wait_for 120 running1; check "one runs, one waits (maxConcurrent 1)" $?
names=$(ef '.status.items[*].name')
echo "  jobs: $names"
first=$(kc get jobs -n team-a -o name | grep lathe- | head -1 | sed 's|.*/||')
[ -n "$first" ]; check "the running job's Job is made ($first)" $?
uid=$(ef .metadata.uid)
[ "$(kc get job "$first" -n team-a -o 'jsonpath={.metadata.ownerReferences[0].uid}')" = "$uid" ]
check "the Job is owned by the experiment" $?
kc get loraexperiments.lathe.dev -n team-a > "$T/get.out" 2>&1
head -1 "$T/get.out" | grep -q "STATE *JOBS *GPUS *LOSS *AGE"; check "kubectl get loraexperiments: STATE JOBS GPUS LOSS AGE" $?
grep -q "^sweep *Running *2 " "$T/get.out"; check "it lists sweep Running with 2 jobs ($(tail -1 "$T/get.out"))" $?
has_loss() { [ -n "$(ef '.status.items[0].loss')$(ef '.status.items[1].loss')" ]; }
wait_for 120 has_loss; check "the running job reports a loss in items" $?
fuid=$(kc get job "$first" -n team-a -o 'jsonpath={.metadata.uid}')

op_kill 1
wait_for 60 op_ready 2; check "replica 2 takes over" $?
done2() { [ "$(ef .status.phase)" = Succeeded ]; }
wait_for 400 done2; check "the experiment succeeds ($(ef .status.phase))" $?
[ "$(ef .status.jobs.succeeded)" = 2 ]; check "both jobs succeeded" $?
[ "$(kc get job "$first" -n team-a -o 'jsonpath={.metadata.uid}')" = "$fuid" ]; check "the first Job was kept through the failover" $?
n=$(kc get jobs -n team-a -o name | grep -c lathe-)
[ "$n" = 2 ]; check "exactly one Job per job ($n)" $?
kc delete -f "$T/exp.yaml" > /dev/null 2>&1; check "kubectl delete of the experiment" $?
finish
