#!/bin/bash
# tests/slurm/harness/cluster.sh start|stop: the CTest fixture of the Slurm
# tests (slurm/cluster_start, slurm/cluster_stop). It runs
# $LATHE_SHARED_DIR/tools/slurm-local (a real Slurm 22.05: 2 nodes x 4 fake
# GPUs, slurmdbd accounting) in a folder and on ports of this build's own
# (derived from LATHE_BINARY_DIR, so a normal and an ASan build do not
# share one), and writes its SLURM_CONF into that folder's lathe-env.sh,
# which the tests source. Without the tool, or without root (the daemons
# run as root), start says SKIP and writes no env file: the tests then
# skip (exit 77).
set -u
key=$(printf '%s' "${LATHE_BINARY_DIR:-default}" | md5sum | cut -c1-8)
export SLURM_LOCAL_DIR=/tmp/lathe-slurm-$key
export SLURM_LOCAL_PORT_BASE=$((20000 + (16#${key:0:4} % 200) * 50))
export SLURM_LOCAL_LINK_ETC=0
export SLURM_LOCAL_TIMEOUT=90
TOOL=${LATHE_SHARED_DIR:+$LATHE_SHARED_DIR/tools/slurm-local}
ENV=$SLURM_LOCAL_DIR/lathe-env.sh
case ${1:-} in
start)
    rm -f "$ENV"
    if [ -z "$TOOL" ] || [ ! -x "$TOOL" ]; then
        echo "SKIP: no slurm-local (${TOOL:-LATHE_SHARED_DIR is not set}); give -DLATHE_SHARED_DIR=DIR, the folder that holds tools/slurm-local"
        exit 0
    fi
    if [ "$(id -u)" != 0 ]; then
        echo "SKIP: slurm-local runs its daemons as root; run the Slurm tests as root"
        exit 0
    fi
    # A daemon that dies while the cluster comes up (CI once saw slurmdbd
    # exit within 2 s with nothing in its log) gets its logs printed and a
    # clean second and third try: 13 tests hang on this fixture, and a
    # start that works on the next try is not what they test.
    tries=0
    until "$TOOL" start; do
        tries=$((tries + 1))
        echo "slurm-local start failed (try $tries of 3); its logs:"
        for f in "$SLURM_LOCAL_DIR"/log/*; do
            if [ ! -s "$f" ] || [ "${f##*/}" = mariadb-install.log ]; then continue; fi
            echo "--- $f (last 10 lines)"
            tail -n 10 "$f"
        done
        if [ "$tries" -ge 3 ]; then echo "FAIL: slurm-local start"; exit 1; fi
        "$TOOL" clean || true
        sleep 3
    done
    [ "$tries" = 0 ] || echo "WARNING: slurm-local came up on try $((tries + 1)) (logs of the failed tries above)"
    # shellcheck disable=SC1091
    . "$SLURM_LOCAL_DIR/env.sh"
    # accounts and QOS the tests use (quotas and priorities from Slurm)
    sacctmgr -i add qos high Priority=1000 > /dev/null 2>&1
    sacctmgr -i add qos capped MaxTRESPerUser=gres/gpu=1 > /dev/null 2>&1
    sacctmgr -i add account ai-training Cluster=local > /dev/null 2>&1
    sacctmgr -i add user root Account=ai-training > /dev/null 2>&1
    sacctmgr -i modify user root set qos=normal,high,capped > /dev/null 2>&1
    { echo "export SLURM_CONF=$SLURM_CONF"; echo "export SLURM_LOCAL_DIR=$SLURM_LOCAL_DIR"; } > "$ENV"
    echo "Slurm up: SLURM_CONF=$SLURM_CONF"
    ;;
stop)
    [ -n "$TOOL" ] && [ -x "$TOOL" ] && [ -d "$SLURM_LOCAL_DIR" ] || exit 0
    "$TOOL" stop
    rm -f "$ENV"
    ;;
env)
    echo "$ENV"
    ;;
*)
    echo "usage: cluster.sh start|stop|env" >&2
    exit 1
    ;;
esac
