#!/bin/bash
# bench/slurm/run.sh: runs build/bench/bench_slurm against a Slurm cluster
# of its own (../shared/tools/slurm-local in /tmp/lathe-slurm-bench, ports
# from 21900; as root), with the partition set down so that every job stays
# queued, and stops it afterwards. Arguments go to bench_slurm
# (--jobs N, default 1000; --turns T; --baseline-turns B).
#
#   bench/slurm/run.sh [--jobs 1000]
set -eu
cd "$(dirname "$0")/../.."
TOOL=${LATHE_SHARED_DIR:-../shared}/tools/slurm-local
BIN=${LATHE_BINARY_DIR:-build}/bench/bench_slurm
[ -x "$TOOL" ] || { echo "bench/slurm: no $TOOL (set LATHE_SHARED_DIR)" >&2; exit 1; }
[ -x "$BIN" ] || { echo "bench/slurm: build $BIN first (cmake --build build)" >&2; exit 1; }
export SLURM_LOCAL_DIR=/tmp/lathe-slurm-bench SLURM_LOCAL_PORT_BASE=21900 SLURM_LOCAL_LINK_ETC=0
W=$(mktemp -d /tmp/lathe-slurm-bench-jobs.XXXXXX)
cleanup() {
    scancel --partition=gpu 2>/dev/null || true
    scontrol update partitionname=gpu state=up 2>/dev/null || true
    "$TOOL" stop > /dev/null 2>&1 || true
    rm -rf "$W"
}
"$TOOL" start >&2
trap cleanup EXIT
# shellcheck disable=SC1091
. "$SLURM_LOCAL_DIR/env.sh"
scontrol update partitionname=gpu state=down
"$BIN" --ctld-pid "$(cat "$SLURM_LOCAL_DIR/run/slurmctld.pid")" --dir "$W" "$@"
