#!/bin/bash
# init_tokenizer.sh: `lathe init-tokenizer` end to end: a tokenizer learned
# from the shipped text and instruction data (a plain file and a JSONL
# file), the same bytes twice, read back by `lathe tokenize` (its size,
# special tokens and ChatML template; a text through it and back), a model
# made with it by `lathe init-model`, and the errors with their exit codes.
set -u
fails=0
check() { # check NAME STATUS
    if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fails=$((fails + 1)); fi
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
TEXT="$LATHE_SOURCE_DIR/share/data/tinyshakespeare/input.txt"
DATA="$LATHE_SOURCE_DIR/share/data/self-instruct/seed_tasks.alpaca.jsonl"

"$LATHE" init-tokenizer "$tmp/a" "$TEXT" "$DATA" --vocab 512 > "$tmp/a.out" 2>&1
check "init-tokenizer exits 0 ($(cat "$tmp/a.out"))" $?
grep -qE "^wrote $tmp/a: byte-level BPE, vocab 512 \(256 bytes, 253 learned, 3 special\) from [0-9,]+ bytes of 2 files .* [0-9.]+ bytes per token on them$" "$tmp/a.out"
check "it says what it wrote" $?
"$LATHE" init-tokenizer "$tmp/b" "$TEXT" "$DATA" --vocab 512 > /dev/null 2>&1
cmp -s "$tmp/a/tokenizer.json" "$tmp/b/tokenizer.json" && cmp -s "$tmp/a/tokenizer_config.json" "$tmp/b/tokenizer_config.json"
check "the same files twice" $?

"$LATHE" tokenize --tokenizer "$tmp/a" --info > "$tmp/info" 2>&1
check "tokenize --info reads it" $?
grep -q "^vocabulary: 512 ids" "$tmp/info"; check "512 ids" $?
grep -q "^eos: 511 <|im_end|>" "$tmp/info"; check "eos <|im_end|>" $?
grep -q "^chat template: chatml" "$tmp/info"; check "a ChatML template" $?
text="To be, or not to be: that is the question. Give me 3 reasons!"
ids=$("$LATHE" tokenize --tokenizer "$tmp/a" "$text")
check "it encodes" $?
[ "$(echo "$ids" | wc -w)" -lt "${#text}" ]; check "fewer tokens than bytes ($ids)" $?
[ "$("$LATHE" tokenize --tokenizer "$tmp/a" --decode "$ids")" = "$text" ]; check "and decodes back" $?

"$LATHE" init-model "$tmp/model" --preset tiny --arch qwen3 --tokenizer "$tmp/a/tokenizer.json" > "$tmp/model.out" 2>&1
check "init-model takes it" $?
grep -q "vocab 512," "$tmp/model.out"; check "a model of 512 ids" $?

expect() { # expect CODE NAME ARGS...: the exit code and a message
    local code=$1 name=$2
    shift 2
    "$LATHE" init-tokenizer "$@" > "$tmp/err" 2>&1
    local rc=$?
    [ "$rc" -eq "$code" ]; check "$name: exit $code (got $rc: $(head -c 300 "$tmp/err"))" $?
    [ -s "$tmp/err" ]; check "$name: says why" $?
}
printf '{"instruction": "a"}\n{"instruction": \n' > "$tmp/bad.jsonl"
printf 'caf\xe9\n' > "$tmp/latin1.txt"
expect 1 "no FILE" "$tmp/c"
expect 1 "a vocabulary too small" "$tmp/c" "$TEXT" --vocab 100
expect 1 "an unknown option" "$tmp/c" "$TEXT" --merges 3
expect 4 "a missing file" "$tmp/c" "$tmp/none.txt"
expect 2 "a bad JSONL line" "$tmp/c" "$tmp/bad.jsonl"
grep -q "bad.jsonl:2:" "$tmp/err"; check "the bad line is named" $?
expect 2 "a file that is not UTF-8" "$tmp/c" "$tmp/latin1.txt"
grep -q "latin1.txt: not valid UTF-8 at byte 3" "$tmp/err"; check "the file and the byte are named" $?
[ ! -e "$tmp/c" ]; check "nothing written after an error" $?

[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "init_tokenizer: all checks passed"
