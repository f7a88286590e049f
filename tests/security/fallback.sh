#!/bin/bash
# tests/security/fallback.sh: the local executor where the machine cannot
# make the trainers' sandbox. tests/exec/test_exec_sandbox.c runs in a user
# namespace of its own with every capability dropped (setpriv), where
# unshare of the mount namespace is refused: its sandbox tests skip, and
# test_auto_fallback checks that an optional sandbox is skipped (said in
# shim.log and the handle) and a required one refuses the start. Skipped
# where user namespaces or setpriv are not there.
set -u
: "${LATHE_BINARY_DIR:?}"
bin=$LATHE_BINARY_DIR/tests/exec_test_exec_sandbox
if [ ! -x "$bin" ]; then echo "FAIL: $bin is not built"; exit 1; fi
if ! command -v unshare > /dev/null || ! command -v setpriv > /dev/null ||
    ! unshare -U -r true 2> /dev/null; then
    echo "skipped: no user namespaces (unshare -U) or no setpriv here"
    exit 0
fi
out=$(unshare -U -r setpriv --inh-caps=-all --ambient-caps=-all --bounding-set=-all -- \
    "$bin" 2>&1)
rc=$?
echo "$out"
if [ $rc -ne 0 ]; then echo "FAIL: the sandbox test without capabilities (exit $rc)"; exit 1; fi
if ! grep -q "^\[       OK \] test_auto_fallback" <<< "$out"; then
    echo "FAIL: test_auto_fallback did not run (the probe still made a sandbox?)"
    exit 1
fi
echo "ok: the fallback without a sandbox"
