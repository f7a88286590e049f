# tests/k8s/harness/render.sh: what the render tests share (sourced by
# tests/k8s/render.sh, render_server.sh and crd.sh; CTest runs only
# tests/k8s/*.sh).
#
#   check NAME STATUS          a FAIL line when STATUS is not 0
#   render_both NAME ARGS...   `$LATHE ARGS... -o yaml` and `-o json` into
#                              $tmp/NAME.{yaml,json}; both must exit 0, pass
#                              validate-k8s (the official v1.32 strict
#                              schemas) with COUNT objects when
#                              RENDER_COUNT=COUNT is set (any number else),
#                              and the YAML must read back as the JSON
#                              List's items
#   have_validate              true when validate-k8s is there; else says
#                              once that its checks are skipped
set -u
fails=0
check() { # check NAME STATUS
    if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fails=$((fails + 1)); fi
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
PY=/usr/bin/python3
# validate-k8s is a tool of the project's reference folder (code, so not in
# this repository): where LATHE_SHARED_DIR does not hold it, its checks are
# skipped (said once) and every other check runs.
VALIDATE=${LATHE_SHARED_DIR:+$LATHE_SHARED_DIR/tools/validate-k8s}
have_validate() {
    [ -n "$VALIDATE" ] && [ -f "$VALIDATE" ] && return 0
    [ -n "${validate_said:-}" ] ||
        echo "SKIP: the validate-k8s checks (${VALIDATE:+$VALIDATE is not there}${VALIDATE:-LATHE_SHARED_DIR is not set};" \
             "give -DLATHE_SHARED_DIR=DIR, the folder that holds tools/validate-k8s)"
    validate_said=1
    return 1
}

render_both() {
    local name=$1
    shift
    local count='[1-9][0-9]*'
    [ -n "${RENDER_COUNT:-}" ] && count=$RENDER_COUNT
    "$LATHE" "$@" -o yaml > "$tmp/$name.yaml" 2> "$tmp/$name.err"
    check "$name: -o yaml exits 0 ($(head -c 300 "$tmp/$name.err"))" $?
    "$LATHE" "$@" -o json > "$tmp/$name.json" 2>> "$tmp/$name.err"
    check "$name: -o json exits 0" $?
    for fmt in yaml json; do
        have_validate || break
        $PY "$VALIDATE" "$tmp/$name.$fmt" > "$tmp/$name.$fmt.v" 2>&1
        check "$name ($fmt) is valid: $(grep -v ': OK$' "$tmp/$name.$fmt.v" | head -5)" $?
        grep -qE "^$count object\(s\) valid, 0 error\(s\)$" "$tmp/$name.$fmt.v"
        check "$name ($fmt): validate-k8s says $count valid" $?
    done
    $PY - "$tmp/$name.yaml" "$tmp/$name.json" <<'PYEOF'
import json, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d is not None]
lst = json.load(open(sys.argv[2]))
assert lst["apiVersion"] == "v1" and lst["kind"] == "List", "not a v1 List"
if docs != lst["items"]:
    sys.exit("the YAML documents are not the JSON List's items")
PYEOF
    check "$name: the YAML reads back as the JSON" $?
}
