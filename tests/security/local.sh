#!/bin/bash
# tests/security/local.sh: the attacks of issue 12 against a real
# `lathe server` with the local executor, run as root, each submitted with
# a team's own token (`lathe submit`) and read back with `lathe logs`:
#
#   - the built-in trainer trains in the sandbox as the team's user
#   - trainer.command [/bin/cat, DATA/admin-token, /etc/shadow]: it runs,
#     and its log holds neither file's content
#   - datasetPath = DATA/lathe.db, another job's folder, a link into team
#     B's folder, a path with `..` into it: refused at submission naming the
#     field (or, failing that, refused by the supervisor's re-check)
#   - a dataset link swapped after submission while the job waits in the
#     queue: refused at start ("changed after submission")
#   - a command writing outside its folder (the data folder, team B's
#     folder, its own output.log): nothing written
#   - a fork bomb and a memory hog: the attempt fails, the server answers
#   - reading /proc of the server: nothing of its environment or cmdline
#
# Two teams with tokens of scope submit, trainers as uid 61001 (team-a) and
# 61002 (team-b), roots in the test folder. Skips (exit 0 with a message)
# when not root or where this machine cannot make a sandbox. Every wait is
# bounded; the EXIT trap stops the server and removes the folder.
set -u
fails=0
passes=0
check() { # check NAME STATUS; returns STATUS
    if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fails=$((fails + 1)); else echo "ok: $1"; passes=$((passes + 1)); fi
    return "$2"
}
if [ "$(id -u)" -ne 0 ]; then
    echo "skipped: tests/security/local.sh runs the server as root (uid $(id -u) here)"
    exit 0
fi
: "${LATHE:?LATHE must name the lathe binary}"
PY=/usr/bin/python3
T=$(mktemp -d /tmp/lathe-security.XXXXXX)
chmod 755 "$T"
SRV_PID=
cleanup() {
    if [ -n "$SRV_PID" ]; then kill -TERM "$SRV_PID" 2>/dev/null; wait "$SRV_PID" 2>/dev/null; fi
    rm -rf "$T"
}
trap cleanup EXIT

# Where this machine cannot make the sandbox, the server (mode required)
# refuses to start and says why: the test is skipped then.
wait_for() { # wait_for SECONDS CMD...
    local end=$((SECONDS + $1)); shift
    while [ $SECONDS -lt $end ]; do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.3
    done
    return 1
}

DATA=$T/srv
mkdir -p "$T/models" "$T/team-a" "$T/team-b" "$T/outside"
tok=()
TOKENIZER=$LATHE_SOURCE_DIR/share/tokenizers/qwen3/tokenizer.json
[ -f "$TOKENIZER" ] && tok=(--tokenizer "$TOKENIZER")
"$LATHE" init-model "$T/models/tiny" --preset tiny --arch qwen3 "${tok[@]}" > "$T/init.log" 2>&1 ||
    { echo "FAIL: init-model"; cat "$T/init.log"; exit 1; }
SEED=$LATHE_SOURCE_DIR/share/data/self-instruct/seed_tasks.alpaca.jsonl
if [ -f "$SEED" ]; then head -40 "$SEED" > "$T/team-a/train.jsonl"
else echo '{"instruction": "say hi", "output": "hi"}' > "$T/team-a/train.jsonl"; fi
echo '{"instruction": "TEAM-B-SECRET", "output": "x"}' > "$T/team-b/secret.jsonl"
echo 'OUTSIDE-SECRET' > "$T/outside/data.jsonl"
ln -s "$T/team-b/secret.jsonl" "$T/team-a/link.jsonl"
ln -s "$T/team-a/train.jsonl" "$T/team-a/swap.jsonl"
chmod -R a+rX "$T/models" "$T/team-a" "$T/team-b" "$T/outside"

TOK_A=tok-a-$RANDOM$RANDOM$RANDOM
TOK_B=tok-b-$RANDOM$RANDOM$RANDOM
HASH_A=$("$LATHE" server hash-token "$TOK_A")
HASH_B=$("$LATHE" server hash-token "$TOK_B")
cat > "$T/server.yaml" <<EOF
apiVersion: lathe/v1
kind: ServerConfig
metadata: {name: security-test}
spec:
  listen: 127.0.0.1:0
  dataDir: $DATA
  cluster:
    gpus: none
    cpuSlots: 1
  tokens:
    - {name: a, sha256: $HASH_A, team: team-a, scope: submit}
    - {name: b, sha256: $HASH_B, team: team-b, scope: submit}
  scheduler: {interval: 1s, minRunTime: 1s, reclaimMinRun: 1s}
  pollInterval: 250ms
  policy:
    paths:
      models: [$T/models]
    commands: true
    sandbox:
      mode: required
      memory: 1Gi
      processes: 64
      openFiles: 1024
    teams:
      - team: team-a
        user: "61001"
        group: "61001"
        paths: {data: [$T/team-a]}
      - team: team-b
        user: "61002"
        group: "61002"
        paths: {data: [$T/team-b]}
EOF

# an admin token in the data folder, as a server without `tokens:` makes one
mkdir -p "$DATA"
ADMIN_MARK=admin-token-c0ffee-$RANDOM
echo "$ADMIN_MARK" > "$DATA/admin-token"
chmod 600 "$DATA/admin-token"

# the server, with a secret of its own in its environment
SERVER_MARK=server-env-c0ffee-$RANDOM
LATHE_TEST_SECRET=$SERVER_MARK OPENAI_API_KEY=$SERVER_MARK \
    "$LATHE" server --config "$T/server.yaml" > "$T/server.log" 2>&1 &
SRV_PID=$!
wait_for 60 sh -c "test -s '$DATA/server.addr' || ! kill -0 $SRV_PID"
if [ ! -s "$DATA/server.addr" ]; then
    if grep -qi "sandbox" "$T/server.log"; then
        echo "skipped: this machine cannot make the sandbox:"; cat "$T/server.log"; exit 0
    fi
    echo "FAIL: the server did not start"; cat "$T/server.log"; exit 1
fi
export LATHE_SERVER; LATHE_SERVER=$(cat "$DATA/server.addr")
unset LATHE_TOKEN

# job NAME DATASET [COMMAND_YAML]: a job file of team-a
job() {
    local name=$1 ds=$2 cmd=${3:-}
    cat > "$T/$name.yaml" <<EOF
apiVersion: lathe/v1
kind: LoRATrainingJob
metadata:
  name: $name
spec:
  team: team-a
  method: lora
  baseModel:
    path: $T/models/tiny
  trainingData:
    datasetPath: $ds
  hyperparams: {maxSteps: 2, maxSeqLength: 32}
  retryPolicy: {maxRetries: 0}
  timeout: {gracePeriod: 5s}
EOF
    [ -n "$cmd" ] && printf '  trainer:\n    command: %s\n' "$cmd" >> "$T/$name.yaml"
    return 0
}

sub_a() { "$LATHE" submit "$T/$1.yaml" --token "$TOK_A" > "$T/$1.submit" 2>&1; }

# job_field NAME FIELD [TOKEN]: a field of `lathe get jobs NAME -o json`
job_field() {
    "$LATHE" get jobs "$1" -o json --token "${3:-$TOK_A}" 2>/dev/null | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
items = d.get("items", [d]) if isinstance(d, dict) else d
for it in items:
    v = it
    for k in sys.argv[1].split("."):
        v = v.get(k) if isinstance(v, dict) else None
    print("" if v is None else v)
    break' "$2"
}

# wait_end NAME [SECONDS]: until the job is succeeded, failed or cancelled
wait_end() {
    local end=$((SECONDS + ${2:-120})) s
    while [ $SECONDS -lt $end ]; do
        s=$(job_field "$1" state)
        case "$s" in succeeded | failed | cancelled | timed_out) echo "$s"; return 0 ;; esac
        sleep 0.5
    done
    echo "still-$(job_field "$1" state)"
    return 1
}

# everything the server says of a job (its description and events)
describe() { "$LATHE" describe job "$1" --token "$TOK_A" 2>&1; }

# refused NAME FIELD: the job is refused at submission naming FIELD, or
# (a submission check missing) it ends failed at start naming FIELD
refused() {
    local name=$1 field=$2
    if sub_a "$name"; then
        wait_end "$name" 60 > /dev/null
        describe "$name" > "$T/$name.describe"
        [ "$(job_field "$name" state)" = failed ] && grep -q "$field" "$T/$name.describe"
    else
        grep -q "$field" "$T/$name.submit"
    fi
}

no_secret_in() { # no_secret_in FILE: none of the secrets the attacks aim at
    local f=$1 shadow_line
    shadow_line=$(head -1 /etc/shadow)
    { [ -z "$shadow_line" ] || ! grep -qF "$shadow_line" "$f"; } &&
        ! grep -q "$ADMIN_MARK\|SQLite format\|TEAM-B-SECRET\|OUTSIDE-SECRET\|$SERVER_MARK\|$TOK_A\|$TOK_B" "$f"
}

# 0. the built-in trainer trains in the sandbox as the team's user (it
# needs a tokenizer: the shared one)
if [ ${#tok[@]} -eq 0 ]; then
    echo "skipped: the built-in trainer's job (no $TOKENIZER)"
else
job builtin "$T/team-a/train.jsonl"
sub_a builtin; check "a job of the built-in trainer is accepted" $?
st=$(wait_end builtin 180)
check "it succeeds in the sandbox ($st)" "$([ "$st" = succeeded ]; echo $?)" ||
    "$LATHE" logs builtin --token "$TOK_A" 2>&1 | tail -20
describe builtin | grep -q "sandboxed as uid 61001"; check "it ran sandboxed as uid 61001" $?
ls "$DATA"/jobs/*/checkpoints/final/adapter_model.safetensors > /dev/null 2>&1
check "its adapter is in its checkpoints" $?
fi

# 1. reading the server's admin token and /etc/shadow
job cat-secrets "$T/team-a/train.jsonl" "[/bin/cat, $DATA/admin-token, /etc/shadow, $DATA/lathe.db]"
sub_a cat-secrets; check "a command reading the secrets is accepted (it runs)" $?
st=$(wait_end cat-secrets)
check "it ran and ended ($st)" "$([ "$st" = failed ] || [ "$st" = succeeded ]; echo $?)"
"$LATHE" logs cat-secrets --token "$TOK_A" > "$T/cat.log" 2>&1
check "lathe logs answers" $?
no_secret_in "$T/cat.log"; check "its log holds neither admin-token nor /etc/shadow nor lathe.db" $?
[ -s "$DATA/lathe.db" ] && [ "$(head -1 /etc/shadow)" != "" ]; check "the secrets it aimed at exist" $?
grep -q "No such file" "$T/cat.log"; check "the data folder does not exist for it" $?
describe cat-secrets | grep -q "sandboxed as uid 61001"; check "the event says it ran sandboxed as uid 61001" $?

# 2. datasets naming what is not the team's
job ds-db "$DATA/lathe.db"
refused ds-db trainingData.datasetPath; check "datasetPath = DATA/lathe.db is refused" $?
job ds-job "$DATA/jobs/1/spec-1.yaml"
refused ds-job trainingData.datasetPath; check "datasetPath = another job's folder is refused" $?
job ds-link "$T/team-a/link.jsonl"
refused ds-link trainingData.datasetPath; check "datasetPath = a link into team-b's folder is refused" $?
job ds-dots "$T/team-a/../team-b/secret.jsonl"
refused ds-dots trainingData.datasetPath; check "datasetPath with '..' into team-b's folder is refused" $?
job ds-outside "$T/outside/data.jsonl"
refused ds-outside trainingData.datasetPath; check "datasetPath outside every root is refused" $?

# 3. a link swapped after submission, while the job is queued behind another
job blocker "$T/team-a/train.jsonl" "[/bin/sleep, '6']"
sub_a blocker; check "a blocker job is submitted" $?
wait_for 30 sh -c "[ \"\$(\"$LATHE\" get jobs blocker -o json --token $TOK_A | grep -o '\"state\": *\"running\"')\" ]"
job swapped "$T/team-a/swap.jsonl" "[/bin/cat, $T/team-a/swap.jsonl]"
sub_a swapped; check "a job with a dataset link is accepted" $?
[ "$(job_field swapped state)" = queued ]; check "it waits behind the blocker" $?
ln -sfn "$T/team-b/secret.jsonl" "$T/team-a/swap.jsonl"
st=$(wait_end swapped 90)
check "the swapped job failed ($st)" "$([ "$st" = failed ]; echo $?)"
describe swapped > "$T/swapped.describe"
grep -q "changed after submission" "$T/swapped.describe"; check "because its path changed after submission" $?
"$LATHE" logs swapped --token "$TOK_A" > "$T/swapped.log" 2>&1
no_secret_in "$T/swapped.log"; check "team-b's data did not reach it" $?

# 4. writing outside its folder
OWN=$DATA/jobs
job writer "$T/team-a/train.jsonl" "[/bin/sh, -c, 'echo HACKED > $DATA/hacked; echo HACKED > $T/team-b/hacked; echo HACKED > $T/team-a/hacked; for f in $OWN/*/attempt-1/output.log $OWN/*/spec-1.yaml; do echo HACKED > \$f; done; echo HACKED > \$CHECKPOINT_DIR/mine && echo wrote-own']"
sub_a writer; check "a writing command is accepted" $?
wait_end writer > /dev/null
"$LATHE" logs writer --token "$TOK_A" > "$T/writer.log" 2>&1
grep -q wrote-own "$T/writer.log"; check "it writes its own checkpoints" $?
[ ! -e "$DATA/hacked" ] && [ ! -e "$T/team-b/hacked" ] && [ ! -e "$T/team-a/hacked" ]
check "nothing written in the data folder or the data roots" $?
! grep -rqsx HACKED "$OWN"/*/attempt-1/output.log "$OWN"/*/spec-1.yaml
check "no job's output.log or spec was overwritten" $?

# 5. a fork bomb and a memory hog
job bomb "$T/team-a/train.jsonl" "[/bin/sh, -c, 'i=0; while [ \$i -lt 5000 ]; do sleep 60 & i=\$((i+1)); done; wait']"
t0=$SECONDS
sub_a bomb; check "a fork bomb is accepted" $?
st=$(wait_end bomb 60)
check "the fork bomb ends ($st) within 60 s" "$([ "$st" = failed ]; echo $?)"
sleep 1
[ "$(pgrep -u 61001 | wc -l)" -eq 0 ]; check "none of its processes is left" $?
job hog "$T/team-a/train.jsonl" "[/bin/sh, -c, 'x=\$(head -c 3000000000 /dev/zero | tr \"\\\\000\" a); echo hog-finished \${#x}']"
sub_a hog; check "a memory hog is accepted" $?
st=$(wait_end hog 90)
check "the memory hog fails ($st)" "$([ "$st" = failed ]; echo $?)"
"$LATHE" logs hog --token "$TOK_A" 2>&1 | grep -q hog-finished
check "it never got its memory" "$([ $? -ne 0 ]; echo $?)"
kill -0 "$SRV_PID" && "$LATHE" get jobs --token "$TOK_A" > /dev/null 2>&1
check "the server is up and answers" $?

# 6. /proc of the server
job proc "$T/team-a/train.jsonl" "[/bin/sh, -c, 'cat /proc/$SRV_PID/environ /proc/$SRV_PID/cmdline; ls /proc; cat /proc/1/environ | tr \"\\\\0\" \"\\\\n\"; echo procs-done']"
sub_a proc; check "a command reading /proc of the server is accepted" $?
wait_end proc > /dev/null
"$LATHE" logs proc --token "$TOK_A" > "$T/proc.log" 2>&1
grep -q procs-done "$T/proc.log"; check "it ran" $?
no_secret_in "$T/proc.log"; check "nothing of the server's environment reached it" $?
! grep -q -- "--config\|server.yaml" "$T/proc.log"; check "nor its command line" $?

# 7. team B does not see team A's jobs or logs
"$LATHE" logs cat-secrets --token "$TOK_B" > "$T/b.log" 2>&1
[ $? -ne 0 ] && ! grep -q "No such file" "$T/b.log"; check "team-b cannot read team-a's logs" $?

if [ "$fails" -ne 0 ]; then
    echo "--- server log (last 60 lines)"; tail -n 60 "$T/server.log"
    for f in "$T"/*.submit "$T"/*.describe; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; }; done
    for f in "$DATA"/jobs/*/attempt-*/shim.log; do [ -s "$f" ] && { echo "--- $f"; cat "$f"; }; done
fi
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
