# shellcheck shell=bash
# bench/sched/lib.sh: what the scheduler's bench scripts share (sourced).

# Two replays at a time, one per core of the 2-core machines these run
# on: call after starting one in the background.
two_at_a_time() {
    while [ "$(jobs -r | wc -l)" -ge 2 ]; do sleep 0.2; done
}
