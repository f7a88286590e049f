#!/bin/sh
# demo.sh: the README's main command. Installs what lathe needs (as root),
# builds lathe, and runs `lathe demo`: a server with a virtual GPU cluster
# and two teams, a LoRA experiment (r8 / r16 / r32) on the shipped
# instruction data, an urgent job that preempts one of them, a trainer
# killed and resumed from its checkpoint, and a table per job at the end
# (docs/cli.md). Arguments go to `lathe demo` (--clean, --steps N, ...).
set -eu
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}

scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$JOBS" >/dev/null

exec build/lathe demo "$@"  # its data: share/ of this tree
