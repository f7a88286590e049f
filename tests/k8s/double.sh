#!/bin/bash
# tests/k8s/double.sh: the API double (tests/k8s/kube-double) itself: it
# starts, writes its files, answers the checks of data/double-checks.py
# (API, watches, controllers, kubelet), comes back after an outage, exits
# with its parent, and stops every container process on SIGTERM.
# Every wait is bounded.
set -u
PY=/usr/bin/python3
SRC=${LATHE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
T=$(mktemp -d /tmp/kube-double-test.XXXXXX)
PID=
PID2=
fails=0
cleanup() {
    for p in $PID $PID2; do kill -TERM "$p" 2>/dev/null; done
    for _ in $(seq 50); do
        alive=0
        for p in $PID $PID2; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ $alive -eq 0 ] && break
        sleep 0.2
    done
    for p in $PID $PID2; do kill -KILL "$p" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT
ok() { echo "ok: $1"; }
fail() { echo "FAIL: $1"; fails=$((fails + 1)); }
wait_for() { # wait_for SECONDS CMD...
    local end=$((SECONDS + $1)); shift
    while [ $SECONDS -lt $end ]; do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
    return 1
}
[ -x "$PY" ] || { echo "FAIL: $PY is missing (scripts/install-deps.sh installs it)"; exit 1; }
"$PY" -c 'import yaml, jsonschema' || { echo "FAIL: $PY lacks python3-yaml / python3-jsonschema (scripts/install-deps.sh)"; exit 1; }
command -v curl >/dev/null || { echo "FAIL: curl is missing"; exit 1; }

cat > "$T/nodes.json" <<'JSON'
[{"name": "node-a", "gpus": 4, "product": "NVIDIA-L4", "memoryMiB": 23034, "cpu": "32", "memory": "128Gi",
  "labels": {"rack-id": "rack-1"}},
 {"name": "node-b", "gpus": 2, "product": "NVIDIA-L4", "memoryMiB": 23034, "cpu": "32", "memory": "128Gi",
  "labels": {"rack-id": "rack-2"}}]
JSON
mkdir -p "$T/tmp"
"$PY" "$SRC/tests/k8s/kube-double" --state "$T/state" --nodes "$T/nodes.json" --bookmark-interval 1 \
    --parent-pid $$ > "$T/double.log" 2>&1 &
PID=$!
if ! wait_for 60 test -f "$T/state/ready"; then
    echo "FAIL: the double did not start"; cat "$T/double.log"; exit 1
fi
for f in kubeconfig kubeconfig-cert token port pki/ca.crt; do
    [ -s "$T/state/$f" ] && ok "wrote $f" || fail "wrote $f"
done
PORT=$(cat "$T/state/port")
grep -q "^kube-double: listening on https://127.0.0.1:$PORT\$" "$T/double.log" && ok "says where it listens" || fail "says where it listens"
CURL=(curl -sS --max-time 20 --cacert "$T/state/pki/ca.crt")
AUTH=(-H "Authorization: Bearer $(cat "$T/state/token")")
URL="https://127.0.0.1:$PORT"
[ "$("${CURL[@]}" -o /dev/null -w '%{http_code}' --cert "$T/state/pki/admin.crt" --key "$T/state/pki/admin.key" "$URL/api/v1/nodes")" = 200 ] &&
    ok "client certificate" || fail "client certificate"
# the listening sockets of the port in /proc/net/tcp{,6}: 127.0.0.1 (0100007F) only
HEXPORT=$(printf '%04X' "$PORT")
LISTEN=$(awk -v p=":$HEXPORT" '$4 == "0A" && $2 ~ p"$" {print $2}' /proc/net/tcp /proc/net/tcp6 2>/dev/null)
if [ -z "$LISTEN" ]; then
    fail "listens on 127.0.0.1 only (no listening socket on port $PORT in /proc/net/tcp)"
elif [ "$LISTEN" = "0100007F:$HEXPORT" ]; then
    ok "listens on 127.0.0.1 only"
else
    fail "listens on 127.0.0.1 only ($LISTEN)"
fi

timeout 300 "$PY" "$SRC/tests/k8s/data/double-checks.py" "$T/state" "$T/tmp"
rc=$?
[ $rc -eq 0 ] || { fails=$((fails + 1)); echo "--- double log (last 40 lines)"; tail -n 40 "$T/double.log"; }

# an outage: open watches are cut, connections refused for a while, then the same port again
curl -sS --max-time 60 --cacert "$T/state/pki/ca.crt" "${AUTH[@]}" "$URL/api/v1/namespaces?watch=1" > "$T/watch.out" 2>&1 &
WPID=$!
wait_for 10 test -s "$T/watch.out"
"${CURL[@]}" "${AUTH[@]}" -X POST "$URL/_double/outage?seconds=2" >/dev/null
wait_for 10 bash -c "! kill -0 $WPID" && ok "outage: an open watch is cut" || { fail "outage: an open watch is cut"; kill "$WPID"; }
wait "$WPID" 2>/dev/null
if wait_for 5 bash -c "! curl -s --max-time 2 --cacert '$T/state/pki/ca.crt' '$URL/_double/healthz'"; then
    ok "outage: refused"
else
    fail "outage: refused"
fi
wait_for 20 "${CURL[@]}" -f "$URL/_double/healthz" && ok "outage: back on the same port" || fail "outage: back on the same port"

# SIGTERM stops the double and every container process
cat > "$T/sleeper.json" <<'JSON'
{"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "sleeper"},
 "spec": {"template": {"spec": {"restartPolicy": "Never",
   "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "300"]}]}}}}
JSON
"${CURL[@]}" "${AUTH[@]}" -H 'Content-Type: application/json' -X POST --data @"$T/sleeper.json" \
    "$URL/apis/batch/v1/namespaces/default/jobs" >/dev/null
procs() { "${CURL[@]}" "${AUTH[@]}" "$URL/_double/processes"; }
wait_for 30 bash -c "curl -s --cacert '$T/state/pki/ca.crt' -H 'Authorization: Bearer $(cat "$T/state/token")' '$URL/_double/processes' | grep -q sleeper"
CPID=$(procs | "$PY" -c 'import json,sys; print(" ".join(str(p["pid"]) for p in json.load(sys.stdin) if p["pod"].startswith("sleeper")))')
if [ -n "$CPID" ]; then
    kill -TERM "$PID"
    wait_for 20 bash -c "! kill -0 $PID" && ok "SIGTERM: the double exits" || fail "SIGTERM: the double exits"
    # a killed process may take a moment to die and be reaped once its
    # parent is gone (CI saw one still there right after the double
    # exited): wait for each to be gone or a zombie
    gone=1
    for p in $CPID; do
        wait_for 10 bash -c "! kill -0 $p 2>/dev/null || grep -q '^[^)]*) Z' /proc/$p/stat 2>/dev/null" || gone=0
    done
    [ $gone -eq 1 ] && ok "SIGTERM: container processes killed" || fail "SIGTERM: container processes killed ($CPID)"
else
    fail "the sleeper's process"
fi
PID=

# it exits by itself when its parent goes
sleep 300 &
PARENT=$!
"$PY" "$SRC/tests/k8s/kube-double" --state "$T/state2" --no-tls --parent-pid $PARENT > "$T/double2.log" 2>&1 &
PID2=$!
wait_for 60 test -f "$T/state2/ready" && ok "second double (no TLS) starts" || fail "second double (no TLS) starts"
[ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(cat "$T/state2/token")" \
    "http://127.0.0.1:$(cat "$T/state2/port")/api/v1/namespaces/default")" = 200 ] && ok "plain HTTP" || fail "plain HTTP"
kill "$PARENT"
wait "$PARENT" 2>/dev/null
wait_for 20 bash -c "! kill -0 $PID2" && ok "exits when its parent goes" || fail "exits when its parent goes"
PID2=

[ $fails -eq 0 ] && echo "double.sh: all passed" || echo "double.sh: $fails failed"
[ $fails -eq 0 ]
