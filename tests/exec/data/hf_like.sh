#!/bin/sh
# A fake trainer that leaves what Hugging Face Trainer ($2 = hf:
# checkpoint-40/trainer_state.json) or ms-swift ($2 = swift: logging.jsonl
# in a versioned sub-folder) leave in the output folder, copied from $1
# (this folder). Each file appears whole (written aside, then renamed): a
# poll in the middle of a copy would see the evaluation at step 5 apart from
# its step's line, a point of its own that the store joins but this test's
# count of points would not.
if [ "$2" = hf ]; then
    mkdir -p "$CHECKPOINT_DIR/checkpoint-40"
    cp "$1/trainer_state.json" "$CHECKPOINT_DIR/checkpoint-40/.trainer_state.json.tmp"
    mv "$CHECKPOINT_DIR/checkpoint-40/.trainer_state.json.tmp" "$CHECKPOINT_DIR/checkpoint-40/trainer_state.json"
else
    mkdir -p "$CHECKPOINT_DIR/v0-20250101-000000"
    cp "$1/logging.jsonl" "$CHECKPOINT_DIR/v0-20250101-000000/.logging.jsonl.tmp"
    mv "$CHECKPOINT_DIR/v0-20250101-000000/.logging.jsonl.tmp" "$CHECKPOINT_DIR/v0-20250101-000000/logging.jsonl"
fi
echo "{'loss': 1.0, 'note': 'a printed dict is not a progress line'}"
