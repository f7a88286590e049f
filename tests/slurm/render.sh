#!/bin/bash
# render.sh: `lathe render JOB.yaml --target slurm` prints what the Slurm
# executor submits for the job's next attempt, without a cluster: the
# sbatch argv (the options of docs/slurm.md, the settings' partition and
# QOS mapping), the batch script (only `exec LATHE slurm-step "$1"`), and
# the step file (the trainer's argv and the contract's environment); -o
# json gives the same as JSON; a Cluster file is refused.
set -u
fails=0
check() { if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fails=$((fails + 1)); else echo "ok: $1"; fi; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cat > "$T/server.yaml" <<EOF2
apiVersion: lathe/v1
kind: ServerConfig
metadata: {name: r}
spec:
  dataDir: $T/data
  executor: slurm
  slurm:
    partition: gpu
    qos: {urgent: high}
    accounts: {team-a: acct-a}
    lathePath: /opt/lathe/bin/lathe
EOF2
cat > "$T/job.yaml" <<EOF2
apiVersion: lathe/v1
kind: LoRATrainingJob
metadata: {name: r8}
spec:
  team: team-a
  priorityClassName: urgent
  baseModel: {name: Qwen2.5-0.5B}
  trainingData: {datasetPath: /data/x.jsonl}
  trainer:
    command: ["python3", "train.py", "\$(touch $T/pwned)"]
  timeout: {maxDuration: 2h, gracePeriod: 90s}
EOF2
"$LATHE" render "$T/job.yaml" --target slurm --config "$T/server.yaml" > "$T/out" 2> "$T/err"
check "render exits 0 ($(head -c 200 "$T/err"))" $?
for want in "^sbatch$" "^--job-name=lathe-team-a-r8-1$" "^--comment=lathe job=team-a/r8 attempt=1 " \
            "^--partition=gpu$" "^--qos=high$" "^--account=acct-a$" "^--signal=B:TERM@90$" \
            "^--time=0-02:02:00$" "^--requeue$" "^--output=$T/data/jobs/team-a/r8/attempt-1/output.log$" \
            "^--gres=gpu:1$" "^exec /opt/lathe/bin/lathe slurm-step \"\\\$1\"$"; do
    grep -Eq -- "$want" "$T/out"; check "prints $want" $?
done
! grep -q "^python3\|train.py" <(sed -n '/# the batch script/,/# the step file/p' "$T/out"); check "the script names no user string" $?
grep -q '"\$(touch' "$T/out"; check "the user's argument is in the step file, as text" $?
[ ! -e "$T/pwned" ]; check "nothing ran it" $?
"$LATHE" render "$T/job.yaml" --target slurm --config "$T/server.yaml" -o json > "$T/json" 2>/dev/null
/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); i=d[0]; sys.exit(0 if i["sbatch"][0]=="sbatch" and i["step"]["argv"][0]=="python3" else 1)' "$T/json"
check "-o json: sbatch argv and step file" $?
# an experiment when Slurm decides with arrayMax: its jobs, then ONE job array
sed -i 's/^    lathePath:/    decide: slurm\n    arrayMax: 8\n    lathePath:/' "$T/server.yaml"
cat > "$T/exp.yaml" <<EOF2
apiVersion: lathe/v1
kind: LoRAExperiment
metadata: {name: sw}
spec:
  maxConcurrent: 2
  template:
    team: team-a
    baseModel: {name: Qwen2.5-0.5B}
    trainingData: {datasetPath: /data/x.jsonl}
  matrix:
    lora.rank: [4, 8, 16]
EOF2
"$LATHE" render "$T/exp.yaml" --target slurm --config "$T/server.yaml" > "$T/exp.out" 2> "$T/exp.err"
check "render of an experiment exits 0 ($(head -c 200 "$T/exp.err"))" $?
for want in "^--array=0-2%2$" "^--job-name=lathe-team-a-sw-array$" "^exec /opt/lathe/bin/lathe slurm-step --array \"\\\$1\"$" \
            "^--output=$T/data/jobs/team-a/sw-r4/attempt-1/slurm-array/task-%a/output.log$"; do
    grep -Eq -- "$want" "$T/exp.out"; check "the experiment's array: $want" $?
done
n=$(grep -c "slurm-step.json" <(sed -n '/mapping file/,$p' "$T/exp.out")); [ "$n" -eq 3 ]; check "its mapping names 3 step files ($n)" $?
printf 'apiVersion: lathe/v1\nkind: Cluster\nmetadata: {name: c}\nspec: {}\n' > "$T/c.yaml"
"$LATHE" render "$T/c.yaml" --target slurm > /dev/null 2>&1; [ $? -ne 0 ]; check "a Cluster is refused" $?
echo "$fails failed"
[ "$fails" -eq 0 ]
