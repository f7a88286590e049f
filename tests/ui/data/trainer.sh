#!/bin/sh
# trainer.sh: the trainer of tests/ui/browser.sh's workload. It speaks the
# trainer contract as `lathe train` does (docs/trainer.md): [lathe-train]
# progress lines with a loss that falls like a LoRA run's (faster for a
# larger LORA_RANK, so the experiment page has a best job), an eval loss
# every 10 steps, a checkpoint every 25 steps (resumed from after a
# preemption), SIGTERM: checkpoint and exit 143. It sleeps between steps
# instead of computing, so a dozen of them cost the machine nothing.
# STEPS (600) and SLEEP (0.15 s) set its length; it records its pid in
# PIDS_DIR so the test can make sure none outlives it.
steps=${STEPS:-600}
nap=${SLEEP:-0.15}
rank=${LORA_RANK:-16}
ck=$CHECKPOINT_DIR
[ -n "$PIDS_DIR" ] && echo $$ > "$PIDS_DIR/$$"
mkdir -p "$ck"
i=0
last=$(ls "$ck" 2>/dev/null | sed -n 's/^checkpoint-//p' | sort -n | tail -1)
if [ -n "$last" ]; then
  i=$last
  echo "[lathe-train] resume step=$i path=$ck/checkpoint-$i"
fi
save() {
  mkdir -p "$ck/checkpoint-$1"
  echo "[lathe-train] checkpoint step=$1 path=$ck/checkpoint-$1"
}
trap 'save $i; echo "[lathe-train] stopped step=$i (SIGTERM): checkpoint saved"; rm -f "$PIDS_DIR/$$"; exit 143' TERM
echo "[lathe-train] start step=$i/$steps"
echo "training rank $rank on GPUs ${LATHE_GPUS:-none} (attempt $LATHE_ATTEMPT)"
while [ "$i" -lt "$steps" ]; do
  sleep "$nap" &
  wait $!
  i=$((i + 1))
  awk -v s="$i" -v n="$steps" -v r="$rank" 'BEGIN {
    tau = 90 - 1.6 * r; floor = 1.05 + 6 / r
    noise = 0.06 * sin(s * 12.9898 + r) * cos(s * 4.1414)
    loss = floor + 8.5 * exp(-s / tau) + noise
    tps = (1500 - 12 * r) * (1 + 0.015 * sin(s * 2.3) * cos(s * 0.71) + 0.01 * sin(s * 0.05))
    line = sprintf("[lathe-train] step=%d/%d epoch=%.3f loss=%.4f lr=%.2e tokens_per_s=%.1f", s, n, s / 200.0, loss, 2e-4 * (1 - s / n), tps)
    if (s % 10 == 0) line = line sprintf(" eval_loss=%.4f", floor + 0.12 + 8.5 * exp(-s / tau) * 1.08)
    print line
  }'
  if [ $((i % 25)) -eq 0 ]; then save "$i"; fi
done
save "$i"
mkdir -p "$ck/final"
echo "[lathe-train] done step=$i loss=1.0 adapter=$ck/final"
rm -f "$PIDS_DIR/$$"
