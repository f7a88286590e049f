#!/bin/sh
# test.sh: the README's test command. Installs what lathe needs (as root),
# builds lathe, runs every test, then builds again with AddressSanitizer +
# UndefinedBehaviorSanitizer and runs every test again.
#
#   scripts/test.sh              both builds
#   scripts/test.sh --fast       the normal build only
# Environment: JOBS (parallel jobs, default: the number of cores);
# LATHE_SHARED_DIR (optional: a folder with tools/validate-k8s and
# tools/slurm-local, which some tests use and skip without).
set -eu
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
fast=0
[ "${1:-}" = "--fast" ] && fast=1

scripts/install-deps.sh --torch

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLATHE_SHARED_DIR="${LATHE_SHARED_DIR:-}"
cmake --build build -j "$JOBS"
ctest --test-dir build --output-on-failure -j "$JOBS"

[ "$fast" = 1 ] && exit 0

cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DLATHE_SANITIZE=ON -DLATHE_BENCH=OFF \
      -DLATHE_SHARED_DIR="${LATHE_SHARED_DIR:-}"
cmake --build build-asan -j "$JOBS"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
LATHE_SANITIZED=1 \
  ctest --test-dir build-asan --output-on-failure -j "$JOBS"
