#!/bin/bash
# restart.sh: the server is killed with SIGKILL at random instants while it
# submits (six jobs of one GPU on eight); each time it starts again it
# re-attaches to its Slurm jobs from their handles (or, for an attempt whose
# handle it never stored, from the Slurm job whose comment names the job's
# folder and attempt) and looks for a job of the same name and comment
# before any sbatch: no attempt is ever submitted twice, and every job
# succeeds.
. "$(dirname "$0")/harness/lib.sh"
slurm_setup
srv_start
jobs="j1 j2 j3 j4 j5 j6"
for n in $jobs; do
    STEPS=30 CKPT_EVERY=5 write_job $n team-a
    submit "$T/$n.yaml"; check "submit $n" $?
done
seed=${SLURM_RESTART_SEED:-$RANDOM}
echo "kill instants from seed $seed"
RANDOM=$seed
for round in 1 2 3 4 5; do
    sleep "0.$((RANDOM % 9 + 1))"
    srv_kill
    srv_start
done
for n in $jobs; do wait_state $n succeeded 300; check "$n succeeded" $?; done
dups=$(squeue -h -t all -o '%j %o' | awk -v t="$T" 'index($2, t) == 1 {print $1}' | sort | uniq -d)
[ -z "$dups" ]; check "no attempt was submitted twice (duplicates: ${dups:-none})" $?
for n in $jobs; do
    a=$(job_field $n attempt)
    c=$(slurm_jobs $n | wc -l)
    [ "$c" -le "${a:-0}" ] && [ "$c" -ge 1 ]; check "$n: $c Slurm job(s) for $a attempt(s)" $?
done
finish
