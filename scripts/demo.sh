#!/bin/sh
# demo.sh: the README's main command. Installs what lathe needs (as root),
# builds lathe, and runs its main job: planning the seed article's
# LoRATrainingJob (../shared/examples/seed-lora-job.yaml) — what it needs in
# GPU memory, what it should run on and what it will cost — and the same
# for a LoRA experiment.
set -eu
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
SHARED=$(cd .. && pwd)/shared

scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLATHE_SHARED_DIR="$SHARED" >/dev/null
cmake --build build -j "$JOBS" >/dev/null

echo "== lathe plan $SHARED/examples/seed-lora-job.yaml"
build/lathe plan "$SHARED/examples/seed-lora-job.yaml" || true
echo
echo "== lathe plan $SHARED/examples/seed-lora-job.yaml --emit swift"
build/lathe plan "$SHARED/examples/seed-lora-job.yaml" --emit swift
