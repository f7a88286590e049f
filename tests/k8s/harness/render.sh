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
set -u
fails=0
check() { # check NAME STATUS
    if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fails=$((fails + 1)); fi
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
PY=/usr/bin/python3
VALIDATE="$LATHE_SHARED_DIR/tools/validate-k8s"

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
