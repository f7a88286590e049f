#!/bin/sh
# A fake trainer that leaves what Hugging Face Trainer ($2 = hf:
# checkpoint-40/trainer_state.json) or ms-swift ($2 = swift: logging.jsonl
# in a versioned sub-folder) leave in the output folder, copied from $1
# (this folder).
if [ "$2" = hf ]; then
    mkdir -p "$CHECKPOINT_DIR/checkpoint-40"
    cp "$1/trainer_state.json" "$CHECKPOINT_DIR/checkpoint-40/trainer_state.json"
else
    mkdir -p "$CHECKPOINT_DIR/v0-20250101-000000"
    cp "$1/logging.jsonl" "$CHECKPOINT_DIR/v0-20250101-000000/logging.jsonl"
fi
echo "{'loss': 1.0, 'note': 'a printed dict is not a progress line'}"
