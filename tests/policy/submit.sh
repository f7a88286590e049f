#!/bin/bash
# submit.sh: the server's policy at submission (lib/policy through
# srv_submit.c) and at start (srv_config.c), against the real `lathe
# server`: a dataset that is a link into the server's data folder or into
# another team's folder, ".." out of a root, a team without commands, a
# program outside the programs roots, an allowed job; each refusal exits 2
# from `lathe submit` with the field, the path, what it resolved to and
# the rule. Then configs the server refuses to start with: an unknown
# team user (as root), a root that is a loop of links, and a team listed
# twice.
set -u
fails=0
check() { # check NAME STATUS
    if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fails=$((fails + 1)); fi
}
has() { # has NAME FILE PATTERN
    grep -qF -- "$3" "$2"; check "$1" $?
}
T=$(mktemp -d)
chmod 755 "$T"
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT

mkdir -p "$T/srv/data/team-a" "$T/srv/data/team-b" "$T/srv/progs" "$T/srv/models"
echo '{"instruction": "hi", "output": "there"}' > "$T/srv/data/team-a/train.jsonl"
echo '{"instruction": "secret", "output": "b"}' > "$T/srv/data/team-b/secret.jsonl"
ln -s ../team-b/secret.jsonl "$T/srv/data/team-a/borrowed.jsonl"
ln -s "$T/data/lathe.db" "$T/srv/data/team-a/db.jsonl"
printf '#!/bin/sh\necho ok\n' > "$T/srv/progs/train.sh"
chmod 755 "$T/srv/progs/train.sh"
cat > "$T/cluster.yaml" <<'EOF'
apiVersion: lathe/v1
kind: Cluster
metadata: {name: policy-test}
spec:
  gpuTypes:
    - {name: A100-80GB, memory: 80Gi}
  nodes:
    - {name: node-1, gpuType: A100-80GB, gpus: 1}
  teams:
    - {name: team-a, quota: {A100-80GB: 1}}
    - {name: team-b, quota: {A100-80GB: 1}}
EOF
ha=$("$LATHE" server hash-token token-a)
hb=$("$LATHE" server hash-token token-b)
config() { # config EXTRA-POLICY-LINES: the server config with the team rules
    cat > "$T/server.yaml" <<EOF
apiVersion: lathe/v1
kind: ServerConfig
spec:
  listen: 127.0.0.1:0
  dataDir: data
  cluster: {file: cluster.yaml}
  tokens:
    - {sha256: $ha, team: team-a}
    - {sha256: $hb, team: team-b}
  policy:
    paths: {programs: [srv/progs]}
    sandbox: {mode: off}
    teams:
      - team: team-a
        paths: {data: [srv/data/team-a]}
      - team: team-b
        paths: {data: [srv/data/team-b]}
        commands: false
$1
EOF
}
config ""
"$LATHE" server --config "$T/server.yaml" > "$T/server.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do [ -s "$T/data/server.addr" ] && break; sleep 0.1; done
[ -s "$T/data/server.addr" ]; check "the server starts" $?
export LATHE_SERVER
LATHE_SERVER=$(cat "$T/data/server.addr")

job() { # job NAME DATASET [TRAINER-LINES]
    cat > "$T/$1.yaml" <<EOF
apiVersion: lathe/v1
kind: LoRATrainingJob
metadata: {name: $1}
spec:
  baseModel: {name: Qwen2.5-0.5B}
  trainingData:
    datasetPath: $2
    samples: 10
${3:-}
EOF
}
submit() { # submit TOKEN NAME: exit code; output in $T/NAME.out
    "$LATHE" submit "$T/$2.yaml" --token "$1" > "$T/$2.out" 2>&1
}

job ok "$T/srv/data/team-a/train.jsonl" "  trainer: {command: [\"$T/srv/progs/train.sh\"]}"
submit token-a ok; check "an allowed job is accepted ($(cat "$T/ok.out"))" $?

job borrowed "$T/srv/data/team-a/borrowed.jsonl"
submit token-a borrowed; [ $? -eq 2 ]; check "a link into another team's folder is refused" $?
has "the refusal names the field and line" "$T/borrowed.out" "$T/borrowed.yaml:7:18: error: spec.trainingData.datasetPath"
has "the refusal says where the link leads" "$T/borrowed.out" "resolves to $T/srv/data/team-b/secret.jsonl"
has "the refusal names the rule" "$T/borrowed.out" "outside every data root allowed for team team-a"

job dotdot "$T/srv/data/team-a/../team-b/secret.jsonl"
submit token-a dotdot; [ $? -eq 2 ]; check "'..' out of the root is refused" $?
has "'..' resolves" "$T/dotdot.out" "resolves to $T/srv/data/team-b/secret.jsonl"

job db "$T/srv/data/team-a/db.jsonl"
submit token-a db; [ $? -eq 2 ]; check "a link into the data folder is refused" $?
has "the data folder is named" "$T/db.out" "inside the server's data folder"

job direct "$T/data/lathe.db"
submit token-a direct; [ $? -eq 2 ]; check "the database itself is refused" $?

job cmd-b "$T/srv/data/team-b/secret.jsonl" "  trainer: {command: [/bin/true]}"
submit token-b cmd-b; [ $? -eq 2 ]; check "a team without commands cannot run one" $?
has "the command refusal says why" "$T/cmd-b.out" "team team-b may not run its own programs"
job plain-b "$T/srv/data/team-b/secret.jsonl"
submit token-b plain-b; check "team-b's own data with the built-in trainer is accepted ($(cat "$T/plain-b.out"))" $?

job prog "$T/srv/data/team-a/train.jsonl" "  trainer: {command: [\"$T/srv/data/team-a/train.jsonl\"]}"
submit token-a prog; [ $? -eq 2 ]; check "a program outside the programs roots is refused" $?
has "the program refusal lists the roots" "$T/prog.out" "outside every programs root"

kill "$pid"; wait "$pid" 2>/dev/null; pid=

# configs the server refuses to start with (exit 2, the reason on stderr)
refused() { # refused NAME PATTERN
    "$LATHE" server --config "$T/server.yaml" > "$T/refused.log" 2>&1
    local rc=$?
    [ $rc -eq 2 ]; check "$1: exit 2 (got $rc)" $?
    has "$1: the reason" "$T/refused.log" "$2"
}
if [ "$(id -u)" -eq 0 ]; then
    sed -i 's/^        commands: false$/        commands: false\n        user: no-such-user-lathe/' "$T/server.yaml"
    refused "an unknown team user" 'policy.teams[1] (team team-b).user: no user "no-such-user-lathe"'
else
    echo "SKIP: team users are looked up only by a server that runs as root"
fi
ln -s loop "$T/srv/loop"
config "      - team: team-c
        paths: {models: [srv/loop]}"
refused "a root that is a loop of links" "a loop of symbolic links"
config "      - team: team-a"
refused "a team listed twice" "team team-a is listed twice"

[ $fails -eq 0 ] && echo "policy submit: all passed"
exit $((fails > 0))
