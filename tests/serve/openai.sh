#!/bin/bash
# openai.sh: `lathe serve` end to end with OpenAI's own Node client
# (tests/serve/client, the openai package pinned in package-lock.json;
# scripts/install-deps.sh installs it). A tiny random Qwen3 model with the
# real Qwen3 tokenizer and two adapters trained for a few steps are served;
# client/api.mjs covers models, completions, chat, streams, n, stop strings,
# seeds, adapters at run time, every error, 50 clients at once and greedy
# output equal to `lathe generate`'s. /metrics passes promtool (when
# installed). client/busy.mjs gets a 429 from a server with --max-batch 1
# --max-waiting 1. A server whose tokenizer is a FIFO answers 503 while it
# loads. client/drain.mjs sends SIGTERM during a stream, which completes,
# and the server exits 0. Then the command line's errors.
set -u
fails=0
check() { # check NAME STATUS
    if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fails=$((fails + 1)); else echo "ok: $1"; fi
}
CLIENT="$LATHE_SOURCE_DIR/tests/serve/client"
if ! command -v node >/dev/null 2>&1 || [ ! -d "$CLIENT/node_modules/openai" ]; then
    echo "FAIL: node or the openai package is missing: run scripts/install-deps.sh (as root) or"
    echo "      npm ci --prefix tests/serve/client"
    exit 1
fi
W=$(mktemp -d /tmp/lathe-serve.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    rm -rf "$W"
}
trap cleanup EXIT
TEXT="$LATHE_SOURCE_DIR/share/data/tinyshakespeare/input.txt"
TOK="$LATHE_SOURCE_DIR/share/tokenizers/qwen3/tokenizer.json"

"$LATHE" init-model "$W/model" --arch qwen3 --preset tiny --tokenizer "$TOK" --seed 7 --init-std 0.1 \
    >/dev/null || { echo "FAIL: init-model"; exit 1; }
head -c 4000 "$TEXT" > "$W/text.txt"
train() { # train DIR RANK TARGETS SEED
    CHECKPOINT_DIR="$W/ck-$1" "$LATHE" train --model "$W/model" --text "$W/text.txt" --byte-offset 0 \
        --seq-len 32 --max-steps 3 --rank "$2" --targets "$3" --seed "$4" --lr 2e-2 --threads 2 \
        --checkpoint-interval 100 --output "$W/$1" >"$W/train-$1.log" 2>&1
}
train a1 4 q_proj,v_proj 1 && train a2 2 all-linear 2 || { echo "FAIL: train: $(tail -3 "$W"/train-*.log)"; exit 1; }
# an adapter of another base model (other shapes), which the server must refuse
"$LATHE" init-model "$W/other" --arch llama --preset small --vocab 300 --seed 3 >/dev/null &&
    CHECKPOINT_DIR="$W/ck-other" "$LATHE" train --model "$W/other" --text "$W/text.txt" --byte-offset 0 \
        --seq-len 32 --max-steps 1 --rank 4 --threads 2 --output "$W/other-adapter" >"$W/train-other.log" 2>&1 ||
    { echo "FAIL: train the other model's adapter: $(tail -3 "$W/train-other.log")"; exit 1; }

head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$W/key"
KEY=$(cat "$W/key")

# start_server LOG ARGS...: `lathe serve` in the background, waits for
# "ready"; sets SRV_PID and SRV_URL
start_server() {
    local log=$1; shift
    "$LATHE" serve --model "$W/model" --port 0 --api-key-file "$W/key" --threads 2 "$@" >"$log" 2>&1 &
    SRV_PID=$!
    PIDS+=("$SRV_PID")
    for _ in $(seq 600); do
        grep -q "lathe serve: ready" "$log" && break
        kill -0 "$SRV_PID" 2>/dev/null || break
        sleep 0.1
    done
    SRV_URL=$(grep -o 'listening on http://[^ ]*' "$log" | head -1 | sed 's/listening on //')
    grep -q "lathe serve: ready" "$log"
}

# node_test FILE: one client file against $SRV_URL
node_test() {
    SERVE_URL=$SRV_URL SERVE_KEY=$KEY SERVE_BASE="$W/model" SERVE_ADAPTERS=a1,a2 \
    SERVE_MODEL_DIR="$W/model" SERVE_ADAPTER_DIRS="{\"a1\": \"$W/a1\", \"a2\": \"$W/a2\"}" \
    SERVE_WORK="$W" SERVE_PID=$SRV_PID LATHE="$LATHE" SERVE_OTHER_ADAPTER="$W/other-adapter" \
        timeout 240 node "$CLIENT/$1"
}

start_server "$W/serve.log" --adapter a1="$W/a1" --adapter a2="$W/a2" --max-adapters 1 --max-body 64Ki
check "lathe serve starts and says ready" $?
MAIN_PID=$SRV_PID MAIN_URL=$SRV_URL
node_test api.mjs
check "client/api.mjs" $?
if command -v promtool >/dev/null 2>&1; then
    promtool check metrics < "$W/metrics.txt" >"$W/promtool.out" 2>&1
    [ $? -eq 0 ] && [ ! -s "$W/promtool.out" ] # lint findings are printed with status 0
    check "promtool check metrics $(head -c 300 "$W/promtool.out")" $?
else
    echo "note: promtool is not installed (Debian's prometheus package); /metrics not linted"
fi

start_server "$W/busy.log" --max-batch 1 --max-waiting 1 --drain-timeout 1 --quiet
check "lathe serve --max-batch 1 --max-waiting 1 starts" $?
node_test busy.mjs # ends with a SIGTERM to the server
check "client/busy.mjs" $?
for _ in $(seq 300); do kill -0 "$SRV_PID" 2>/dev/null || break; sleep 0.1; done
wait "$SRV_PID"
check "the busy server exits 0 after its drain timed out" $?
grep -q "drain timed out after 1 s" "$W/busy.log"
check "the busy server's log tells of the timeout" $?

# while loading: the tokenizer is a FIFO, so the server stays in its load
# until the test writes the file into it
mkdir "$W/fifo" && cp "$(dirname "$TOK")/tokenizer_config.json" "$W/fifo/" && mkfifo "$W/fifo/tokenizer.json"
"$LATHE" serve --model "$W/model" --tokenizer "$W/fifo/tokenizer.json" --port 0 --api-key-file "$W/key" \
    --threads 2 >"$W/loading.log" 2>&1 &
LOAD_PID=$!
PIDS+=("$LOAD_PID")
for _ in $(seq 300); do grep -q "listening on" "$W/loading.log" && break; sleep 0.1; done
LOAD_URL=$(grep -o 'listening on http://[^ ]*' "$W/loading.log" | sed 's/listening on //')
code=$(curl -s -o "$W/h.json" -w '%{http_code}' "$LOAD_URL/health")
[ "$code" = 503 ] && grep -q '"loading"' "$W/h.json"
check "/health is 503 (loading) while the model loads" $?
code=$(curl -s -D "$W/h.hdr" -o "$W/m.json" -w '%{http_code}' -H "Authorization: Bearer $KEY" "$LOAD_URL/v1/models")
[ "$code" = 503 ] && grep -qi '^retry-after: 5' "$W/h.hdr" && grep -q '"unavailable"' "$W/m.json"
check "/v1/models is 503 with Retry-After while the model loads" $?
timeout 60 sh -c 'cat "$1" > "$2"' sh "$TOK" "$W/fifo/tokenizer.json"
for _ in $(seq 600); do grep -q "lathe serve: ready" "$W/loading.log" && break; sleep 0.1; done
code=$(curl -s -o /dev/null -w '%{http_code}' "$LOAD_URL/health")
[ "$code" = 200 ]
check "/health is 200 once loaded" $?
kill -TERM "$LOAD_PID"
wait "$LOAD_PID"
check "the server that loaded late exits 0 on SIGTERM" $?

SRV_PID=$MAIN_PID SRV_URL=$MAIN_URL
node_test drain.mjs
check "client/drain.mjs" $?
for _ in $(seq 300); do kill -0 "$MAIN_PID" 2>/dev/null || break; sleep 0.1; done
wait "$MAIN_PID"
rc=$?
check "after the drain the server exits 0 (exit $rc)" $rc
grep -q "lathe serve: draining" "$W/serve.log" && grep -q "lathe serve: stopped" "$W/serve.log"
check "the log tells of the drain" $?

# the command line
"$LATHE" serve --port 0 >"$W/e1" 2>&1
[ $? -eq 1 ] && grep -q -- "--model" "$W/e1"
check "no --model: exit 1 naming it" $?
"$LATHE" serve --model "$W/model" --api-key a --api-key-file "$W/key" >"$W/e2" 2>&1
[ $? -eq 1 ] && grep -q "not both" "$W/e2"
check "--api-key with --api-key-file: exit 1" $?
"$LATHE" serve --model "$W/model" --adapter nofolder >"$W/e3" 2>&1
[ $? -eq 1 ] && grep -q "NAME=DIR" "$W/e3"
check "--adapter without NAME=: exit 1" $?
"$LATHE" serve --model "$W/model" --port 0 --adapter x="$W/missing" >"$W/e4" 2>&1
[ $? -eq 2 ] && grep -q -- "--adapter x=" "$W/e4"
check "an adapter folder that does not load: exit 2 naming it" $?
"$LATHE" serve --model "$W/missing" --port 0 >"$W/e5" 2>&1
[ $? -eq 2 ]
check "a model folder that does not load: exit 2" $?
"$LATHE" serve --model "$W/model" --max-batch 0 >"$W/e6" 2>&1
[ $? -eq 1 ] && grep -q -- "--max-batch 0" "$W/e6"
check "--max-batch 0: exit 1 naming it" $?

if [ "$fails" -ne 0 ]; then
    echo "--- serve.log (last 40 lines)"; tail -n 40 "$W/serve.log"
    echo "--- busy.log (last 20 lines)"; tail -n 20 "$W/busy.log"
fi
echo "$fails failed"
[ "$fails" -eq 0 ]
