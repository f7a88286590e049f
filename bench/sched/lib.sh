# shellcheck shell=bash
# bench/sched/lib.sh: what the scheduler's bench scripts share (sourced).

# Two replays at a time, one per core of the 2-core machines these run
# on: call after starting one in the background.
two_at_a_time() {
    while [ "$(jobs -r | wc -l)" -ge 2 ]; do sleep 0.2; done
}

# Sets w to a new work folder, removed when the script exits unless KEEP=1
# (then its path is printed).
make_work_dir() {
    w=$(mktemp -d)
    if [ "${KEEP:-0}" = 1 ]; then echo "work files: $w"; else trap 'rm -rf "$w"' EXIT; fi
}
