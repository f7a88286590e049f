# tests/common/scenario-lib.bash: what the scenario tests against a real
# `lathe server` share, whatever runs its jobs (tests/k8s/harness/lib.sh,
# tests/slurm/harness/lib.sh source it after setting T, their folder).
# Sourced, never run (CTest runs tests/<dir>/*.sh only).
#
#   check NAME STATUS        count a check, print ok / FAIL
#   finish                   print the counts (and, on a failure, the
#                            server's log and what finish_extra prints, a
#                            function the harness may define); exit 0 only
#                            when nothing failed
#   wait_for SECONDS CMD...  until CMD succeeds, at most SECONDS
#   srv_start / srv_kill     `lathe server --config $T/server.yaml` / SIGKILL it
#   submit FILE, job_field NAME FIELD, wait_state NAME STATE [SECONDS]
fails=0
passes=0
PY=/usr/bin/python3
SRV_PID=

check() { # check NAME STATUS
    if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fails=$((fails + 1)); else echo "ok: $1"; passes=$((passes + 1)); fi
}

finish() {
    if [ "$fails" -ne 0 ]; then
        echo "--- server log (last 60 lines)"; tail -n 60 "$T/server.log" 2>/dev/null
        if declare -F finish_extra > /dev/null; then finish_extra; fi
    fi
    echo "$((passes)) passed, $fails failed"
    [ "$fails" -eq 0 ]
    exit $?
}

wait_for() { # wait_for SECONDS CMD...
    local secs=$1; shift
    local end=$((SECONDS + secs))
    while [ $SECONDS -lt $end ]; do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.3
    done
    return 1
}

srv_start() {
    rm -f "$T/data/server.addr"
    "$LATHE" server --config "$T/server.yaml" >> "$T/server.log" 2>&1 &
    SRV_PID=$!
    wait_for 60 test -s "$T/data/server.addr" || { echo "FAIL: the server did not start"; tail -30 "$T/server.log"; exit 1; }
    export LATHE_SERVER; LATHE_SERVER=$(cat "$T/data/server.addr")
    export LATHE_TOKEN; LATHE_TOKEN=$(cat "$T/data/admin-token")
}

srv_kill() {
    [ -n "$SRV_PID" ] && kill -KILL "$SRV_PID" 2>/dev/null
    wait "$SRV_PID" 2>/dev/null
    SRV_PID=
}

submit() { "$LATHE" submit "$1" > "$T/submit.out" 2>&1 || { cat "$T/submit.out"; return 1; }; }

job_field() { # job_field NAME FIELD: a field of `lathe get jobs NAME -o json` (a.b for nested)
    "$LATHE" get jobs "$1" -o json 2>/dev/null | "$PY" -c '
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

wait_state() { # wait_state NAME STATE [SECONDS]
    local end=$((SECONDS + ${3:-180}))
    while [ $SECONDS -lt $end ]; do
        [ "$(job_field "$1" state)" = "$2" ] && return 0
        sleep 0.5
    done
    echo "  $1 is $(job_field "$1" state), not $2"
    return 1
}
