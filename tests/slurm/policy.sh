#!/bin/bash
# policy.sh: the team's policy on the Slurm executor (docs/security.md).
# team-a's jobs run under the Slurm account of its policy (slurmAccount);
# a dataset path that is a link inside the data root is accepted at
# submission, then swapped while the job waits in lathe's queue to point
# outside every root: the check right before sbatch refuses it (no Slurm
# job is made) and says which field and why; a trainer.command whose
# program is outside the programs roots is refused at submission.
. "$(dirname "$0")/harness/lib.sh"
slurm_setup
"$PY" - "$T/cluster.yaml" <<'PYEOF'
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
for t in d["spec"]["teams"]:
    if t["name"] == "team-a":
        t["quota"] = {"L4-24GB": 1}
        t["borrowingLimit"] = {"L4-24GB": 0}
yaml.safe_dump(d, open(sys.argv[1], "w"))
PYEOF
srv_start
STEPS=100000 write_job holder team-a
submit "$T/holder.yaml"; check "submit a job that holds team-a's quota" $?
wait_state holder running 60; check "it runs" $?
ln -s "$T/datasets/train.jsonl" "$T/datasets/link.jsonl"
STEPS=8 write_job swapped team-a
sed -i "s|datasetPath: .*|datasetPath: $T/datasets/link.jsonl|" "$T/swapped.yaml"
submit "$T/swapped.yaml"; check "a dataset that is a link inside the root is accepted" $?
sleep 1
[ "$(job_field swapped state)" = "queued" ]; check "it waits for team-a's quota" $?
mkdir -p "$T/outside"; echo '{"instruction": "x", "output": "y"}' > "$T/outside/secret.jsonl"
ln -sfn "$T/outside/secret.jsonl" "$T/datasets/link.jsonl"
"$LATHE" cancel holder > /dev/null 2>&1
wait_for 90 sh -c "'$LATHE' get jobs swapped -o json 2>/dev/null | grep -q '\"state\": *\"failed\"'"
check "swapped after submission: the check before sbatch refuses it" $?
"$LATHE" describe job swapped > "$T/describe" 2>&1
grep -q "trainingData.datasetPath" "$T/describe" && grep -q "outside" "$T/describe"
check "the reason names the field and where it points ($(grep -m1 -i 'datasetPath' "$T/describe" | head -c 200))" $?
n=$(slurm_jobs swapped | wc -l); [ "$n" -eq 0 ]; check "no Slurm job was made for it ($n)" $?
id=$(slurm_jobs holder | awk '{print $1}' | head -1)
scontrol show job "${id:-none}" 2>/dev/null | grep -q "Account=ai-training"; check "team-a's jobs run under its slurmAccount" $?
STEPS=8 write_job cmd team-a
"$PY" - "$T/cmd.yaml" "$T" <<'PYEOF'
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
d["spec"]["trainer"] = {"command": [sys.argv[2] + "/outside/run.sh"]}
yaml.safe_dump(d, open(sys.argv[1], "w"))
PYEOF
! "$LATHE" submit "$T/cmd.yaml" > "$T/cmd.out" 2>&1; check "a trainer.command outside the programs roots is refused" $?
grep -q "trainer.command" "$T/cmd.out"; check "naming trainer.command" $?
finish
