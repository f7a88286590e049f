#!/bin/sh
# A fake trainer that speaks like `lathe train` (docs/trainer.md): a start
# line, step lines, a checkpoint written the way the contract says (aside,
# then renamed), a data line, and the done line. It checks the contract's
# CHECKPOINT_DIR is set.
[ -n "$CHECKPOINT_DIR" ] || { echo "lathe train: no CHECKPOINT_DIR" >&2; exit 2; }
echo "[lathe-train] data x.jsonl: messages records, 12 sequences"
echo "[lathe-train] start step=0/6 model=/m mode=lora trainable=100 threads=1"
for s in 1 2 3; do
    echo "[lathe-train] step=$s/6 epoch=0.$s loss=2.$s lr=1.000000e-04 grad_norm=0.5 tokens_per_s=100.0 step_s=0.1 elapsed_s=$s.0 eta_s=9 eta=9s"
done
mkdir -p "$CHECKPOINT_DIR/checkpoint-3.tmp"
mv "$CHECKPOINT_DIR/checkpoint-3.tmp" "$CHECKPOINT_DIR/checkpoint-3"
echo "[lathe-train] checkpoint step=3 path=$CHECKPOINT_DIR/checkpoint-3"
for s in 4 5 6; do
    echo "[lathe-train] step=$s/6 epoch=0.$s loss=1.$s lr=5.000000e-05 grad_norm=0.5 tokens_per_s=120.0 step_s=0.1 elapsed_s=$s.0 eta_s=1 eta=1s"
done
echo "[lathe-train] done step=6 loss=1.600000 adapter=$CHECKPOINT_DIR/final"
