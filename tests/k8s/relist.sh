#!/bin/bash
# relist.sh: the API server compacts its history while jobs run, so the
# server's watches get 410 Gone (both as an ERROR event in the stream and
# as the answer to a new watch): the informers relist, and no transition
# is lost: every job's end is seen and recorded once.
. "$(dirname "$0")/harness/lib.sh"

k8s_start
srv_start
for n in w1 w2 w3; do
    STEPS=15 CKPT_EVERY=5 write_job $n team-a
    submit "$T/$n.yaml"; check "submit $n" $?
done
for i in $(seq 12); do
    sleep 1
    mode=event; [ $((i % 2)) -eq 0 ] && mode=status
    dbl POST "/_double/compact?mode=$mode" > /dev/null
done
check "compacted the history 12 times" 0
for n in w1 w2 w3; do wait_state $n succeeded 300; check "$n succeeded" $?; done
for n in w1 w2 w3; do
    "$LATHE" describe job $n > "$T/$n.describe" 2>&1
    c=$(grep -c "attempt 1 succeeded" "$T/$n.describe"); [ "$c" -le 1 ]; check "$n's end recorded once ($c)" $?
done
finish
