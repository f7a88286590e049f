#!/bin/bash
# export_cli.sh: `lathe export --to gguf` from the command line: a tiny
# Qwen3 model made by `lathe init-model` with the real Qwen3 tokenizer
# (copied into the folder, where export finds it), exported with and
# without options, its summary line and file magic; usage errors exit 1,
# invalid input 2, an unwritable output 4, and nothing is left behind.
set -u
fails=0
check() { # check NAME STATUS
    if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fails=$((fails + 1)); fi
}
code() { # code NAME WANT COMMAND...: COMMAND exits WANT
    local name=$1 want=$2
    shift 2
    "$@" > "$tmp/out" 2> "$tmp/err"
    local got=$? msg
    msg=$(head -c 300 "$tmp/err")
    [ "$got" -eq "$want" ]; check "$name (exit $got, want $want: $msg)" $?
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tok="$LATHE_SOURCE_DIR/share/tokenizers/qwen3/tokenizer.json"
"$LATHE" init-model "$tmp/m" --arch qwen3 --dim 32 --layers 1 --heads 2 --kv-heads 1 \
    --hidden 48 --tokenizer "$tok" > /dev/null; check "init-model" $?

code "export, default f16" 0 "$LATHE" export --to gguf --model "$tmp/m" "$tmp/m.gguf"
grep -q "qwen3, 13 tensors (f16 weights, f32 norms), 151669 tokens, 151387 merges, pre qwen2" "$tmp/out"
check "the summary line" $?
[ "$(head -c 4 "$tmp/m.gguf")" = GGUF ]; check "the file starts with GGUF" $?
code "export -o, f32, a name" 0 "$LATHE" export --to gguf --model "$tmp/m" --dtype f32 --name toy -o "$tmp/f.gguf"
grep -q "(f32)" "$tmp/out"; check "f32 in the summary" $?
[ "$(stat -c %s "$tmp/f.gguf")" -gt "$(stat -c %s "$tmp/m.gguf")" ]; check "f32 is larger than f16" $?
grep -q toy "$tmp/f.gguf"; check "general.name is written" $?
code "--no-tokenizer" 0 "$LATHE" export --to gguf --model "$tmp/m" --no-tokenizer "$tmp/n.gguf"
! grep -q "tokens" "$tmp/out"; check "no tokens without a tokenizer" $?

code "no --to" 1 "$LATHE" export --model "$tmp/m" "$tmp/x.gguf"
code "--to onnx" 1 "$LATHE" export --to onnx --model "$tmp/m" "$tmp/x.gguf"
code "--dtype bf16" 1 "$LATHE" export --to gguf --model "$tmp/m" --dtype bf16 "$tmp/x.gguf"
code "no output" 1 "$LATHE" export --to gguf --model "$tmp/m"
code "two outputs" 1 "$LATHE" export --to gguf --model "$tmp/m" "$tmp/x.gguf" "$tmp/y.gguf"
code "no model folder" 2 "$LATHE" export --to gguf --model "$tmp/none" "$tmp/x.gguf"
grep -q "config.json: not found" "$tmp/err"; check "the missing config.json is named" $?
code "another family's tokenizer" 2 "$LATHE" export --to gguf --model "$tmp/m" \
    --tokenizer "$LATHE_SOURCE_DIR/share/tokenizers/llama3" "$tmp/x.gguf"
code "a missing adapter" 2 "$LATHE" export --to gguf --model "$tmp/m" --adapter "$tmp/none" "$tmp/x.gguf"
code "an unwritable output" 4 "$LATHE" export --to gguf --model "$tmp/m" "$tmp/no/such/x.gguf"
[ ! -e "$tmp/x.gguf" ] && [ -z "$(find "$tmp" -name '*.tmp.*')" ]; check "no output or temp file left" $?

[ "$fails" -eq 0 ] || { echo "$fails failed"; exit 1; }
echo "lathe export: all checks passed"
