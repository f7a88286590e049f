#!/bin/bash
# cli.sh: `lathe trace-gen` and `lathe simulate` end to end: reproducible
# traces and their cluster file, the example scenarios, JSON and per-job
# output, --explain, and the exit codes (0 ok, 1 usage, 2 invalid, 4 unreadable).
set -u
fails=0
check() { # check NAME STATUS
    if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fails=$((fails + 1)); fi
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ex="$LATHE_SOURCE_DIR/examples"

# trace-gen: the same seed gives the same bytes, another seed other bytes
"$LATHE" trace-gen --jobs 500 --gpus 64 --seed 7 -o "$tmp/a.csv" --cluster-out "$tmp/c.yaml" 2>/dev/null
check "trace-gen exits 0" $?
"$LATHE" trace-gen --jobs 500 --gpus 64 --seed 7 > "$tmp/b.csv"
cmp -s "$tmp/a.csv" "$tmp/b.csv"; check "same seed, same trace (file and stdout)" $?
"$LATHE" trace-gen --jobs 500 --gpus 64 --seed 8 -o "$tmp/d.csv" 2>/dev/null
! cmp -s "$tmp/a.csv" "$tmp/d.csv"; check "another seed, another trace" $?
[ "$(wc -l < "$tmp/a.csv")" -eq 501 ]; check "500 jobs and a header" $?
# every option also takes its value after '=' (--name=VALUE, -o=VALUE)
"$LATHE" trace-gen --jobs=500 --gpus=64 --seed=7 -o="$tmp/e.csv" 2>/dev/null
cmp -s "$tmp/a.csv" "$tmp/e.csv"; check "--name=VALUE reads as --name VALUE" $?
"$LATHE" validate "$tmp/c.yaml" >/dev/null; check "the generated cluster is valid" $?

# simulate the generated trace on its cluster, as JSON and per job
out=$("$LATHE" simulate --cluster "$tmp/c.yaml" --trace "$tmp/a.csv" -o json --jobs-out "$tmp/jobs.csv"); rc=$?
check "simulate exits 0" $rc
for p in fifo greedy easy lathe; do
    grep -q "\"policy\": \"$p\"" <<<"$out"; check "json has $p" $?
done
grep -q '"allocation_rate"' <<<"$out"; check "json has the allocation rate" $?
[ "$(grep -c ',done$' "$tmp/jobs.csv")" -eq 2000 ]; check "every job done under every policy" $?

# the seed article's scenario: lathe finishes sooner than fifo
out=$("$LATHE" simulate --cluster "$ex/seed-scenario/cluster.yaml" --trace "$ex/seed-scenario/trace.csv" --policy fifo,lathe)
check "seed scenario exits 0" $?
fifo=$(awk '$1 == "fifo" && $2 == 8 {print $12}' <<<"$out"); lathe=$(awk '$1 == "lathe" && $2 == 8 {print $12}' <<<"$out")
[ "$fifo" = "10.50h" ] && [ "$lathe" = "10.00h" ]; check "seed makespans fifo 10.50h, lathe 10.00h (got $fifo, $lathe)" $?

# --explain says why a job waits
err=$("$LATHE" simulate --cluster "$ex/traces/small-cluster.yaml" --trace "$ex/traces/small.csv" --policy lathe \
      --explain big-16gpu@1000 2>&1 >/dev/null)
grep -qF "lathe: at 1080 s (0.01 days): big-16gpu is waiting: research uses 10 A100-80GB GPUs (quota 10)" <<<"$err"
check "explain (got: $err)" $?

# lathe's settings: rules turned off one by one, the idle-while-waiting breakdown
out=$("$LATHE" simulate --cluster "$tmp/c.yaml" --trace "$tmp/a.csv" --policy lathe -o json \
      --without end-pack,pool-head --long-max 0 --reclaim-wait 30m --head-after 2h --long-gpus 8); rc=$?
check "simulate with lathe settings exits 0" $rc
for f in idle_reserved idle_shared idle_fragmented idle_other; do
    grep -q "\"${f}_while_waiting\"" <<<"$out"; check "json has ${f}_while_waiting" $?
done
"$LATHE" simulate --nodes 2x8 --trace "$tmp/a.csv" --without end-pack,fast 2>/dev/null; rc=$?
[ $rc -eq 1 ]; check "unknown rule: exit 1 (got $rc)" $?
# --with turns on a rule that is off by default (learn-limit); the baselines are as they were
wl=$("$LATHE" simulate --cluster "$tmp/c.yaml" --trace "$tmp/a.csv" --estimate limit --with learn-limit -o json); rc=$?
check "simulate --with learn-limit exits 0" $rc
nl=$("$LATHE" simulate --cluster "$tmp/c.yaml" --trace "$tmp/a.csv" --estimate limit -o json)
easy_jct() { python3 -c 'import json,sys; print([p["jct_avg_s"] for p in json.load(sys.stdin)["policies"] if p["policy"] == "easy"])'; }
[ "$(easy_jct <<<"$wl")" = "$(easy_jct <<<"$nl")" ] && [ -n "$(easy_jct <<<"$nl")" ]
check "--with learn-limit leaves easy as it was" $?
err=$("$LATHE" simulate --nodes 2x8 --trace "$tmp/a.csv" --with fast 2>&1 >/dev/null); rc=$?
[ $rc -eq 1 ] && grep -qF -- "--with: 'fast' is not a rule" <<<"$err"; check "unknown rule for --with: exit 1 naming it (got $rc: $err)" $?
"$LATHE" simulate --nodes 2x8 --trace "$tmp/a.csv" --long-gpus x 2>/dev/null; rc=$?
[ $rc -eq 1 ]; check "bad --long-gpus: exit 1 (got $rc)" $?

# odd rows of real traces: replayed and counted, or errors with --strict (issue 15)
printf 'job_id,submit_time_s,duration_s,num_gpus,duration_censored\nj1,10,0,1,0\nj2,5,60,1,1\nj3,6,60,64,0\n' > "$tmp/odd.csv"
out=$("$LATHE" simulate --nodes 2x8 --trace "$tmp/odd.csv" --policy easy,lathe); rc=$?
check "odd rows replayed: exit 0 (got $rc)" $rc
grep -qF "odd.csv: 1 job with duration 0: they start and end at once (first: line 2)" <<<"$out"; check "zero duration counted (got: $out)" $?
grep -qF "2 jobs submitted before a row above them" <<<"$out"; check "unsorted counted" $?
grep -qF "1 job with a censored duration" <<<"$out"; check "censored counted" $?
grep -qF "1 job asks for more GPUs than the cluster has: refused" <<<"$out"; check "too wide counted" $?
err=$("$LATHE" simulate --nodes 2x8 --trace "$tmp/odd.csv" --strict 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ]; check "--strict: exit 2 (got $rc)" $?
grep -qF "odd.csv:2:7: error: duration_s: a zero duration" <<<"$err"; check "--strict names file:line:col and field (got: $err)" $?
grep -qF "odd.csv:3:4: error: submit_time_s: submitted before a row above it" <<<"$err"; check "--strict: unsorted named" $?
printf 'job_id,submit_time_s,duration_s,num_gpus\nj1,0,60,64\n' > "$tmp/wide.csv"
err=$("$LATHE" simulate --nodes 2x8 --trace "$tmp/wide.csv" --strict 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ]; check "--strict, too wide: exit 2 (got $rc)" $?
grep -qF "wide.csv:2: error: num_gpus: more GPUs than the cluster has (found 64, the cluster has 16)" <<<"$err"; check "--strict: too wide named (got: $err)" $?
# estimate modes: every policy sees the same estimates; bad modes are usage errors
for m in exact noise limit; do
    "$LATHE" simulate --cluster "$tmp/c.yaml" --trace "$tmp/a.csv" --estimate $m --policy easy,lathe >/dev/null; check "--estimate $m exits 0" $?
done
a1=$("$LATHE" simulate --cluster "$tmp/c.yaml" --trace "$tmp/a.csv" --estimate-noise 0.7 --seed 3 --policy easy -o json)
a2=$("$LATHE" simulate --cluster "$tmp/c.yaml" --trace "$tmp/a.csv" --estimate-noise 0.7 --seed 3 --policy easy -o json)
[ "$(grep jct_avg <<<"$a1")" = "$(grep jct_avg <<<"$a2")" ]; check "same noise seed, same result" $?
"$LATHE" simulate --nodes 2x8 --trace "$tmp/a.csv" --estimate guess 2>/dev/null; rc=$?
[ $rc -eq 1 ]; check "unknown estimate mode: exit 1 (got $rc)" $?

# trace convert: public formats into lathe's trace; trace teams: teams from real quotas
data="$LATHE_SOURCE_DIR/tests/sim/data"
err=$("$LATHE" trace convert --from philly "$data/philly_small.json" "$tmp/philly.csv" 2>&1); rc=$?
check "convert philly: exit 0 (got $rc: $err)" $rc
grep -qF "4 jobs read, 3 written to $tmp/philly.csv (1 with a censored duration); left out: 0 asked for no GPU, 1 never ran" <<<"$err"; check "philly counts (got: $err)" $?
# application_2 is first (submitted 04:40), two attempts 10 m + 5 m on 1 GPU; application_1 237 s later, 4 GPUs for 1 h
[ "$(sed -n 2p "$tmp/philly.csv")" = "application_2,0,900,1,vc-b,0" ]; check "philly: 2 attempts summed, vc as team (got $(sed -n 2p "$tmp/philly.csv"))" $?
[ "$(sed -n 3p "$tmp/philly.csv")" = "application_1,237,3600,4,vc-a,0" ]; check "philly: GPUs of the last attempt" $?
grep -q '^application_4,.*,1$' "$tmp/philly.csv"; check "philly: a run without end is censored" $?
err=$("$LATHE" trace convert --from pai-openb "$data/openb_small.csv" "$tmp/openb.csv" 2>&1); rc=$?
check "convert pai-openb: exit 0 (got $rc: $err)" $rc
grep -qF "5 jobs read, 3 written to $tmp/openb.csv (1 with a censored duration); left out: 1 asked for no GPU, 1 never ran" <<<"$err"; check "openb counts (got: $err)" $?
[ "$(sed -n 2p "$tmp/openb.csv")" = "openb-pod-0003,0,3590,8,1,0" ]; check "openb: sorted, from 0, deletion - scheduled (got $(sed -n 2p "$tmp/openb.csv"))" $?
grep -q '^openb-pod-0001,150,650,1,0.46,0$' "$tmp/openb.csv"; check "openb: gpu_milli as a fraction" $?
out=$("$LATHE" simulate --nodes 1x8 --trace "$tmp/openb.csv" --policy lathe); check "converted openb replays" $?
grep -qF "1 job with a censored duration" <<<"$out"; check "censored counted in the replay" $?
"$LATHE" trace convert --from slurm "$data/openb_small.csv" "$tmp/x.csv" 2>/dev/null; rc=$?
[ $rc -eq 1 ]; check "convert unknown format: exit 1 (got $rc)" $?
printf 'name,creation_time\na,1\n' > "$tmp/nocols.csv"
err=$("$LATHE" trace convert --from pai-openb "$tmp/nocols.csv" "$tmp/x.csv" 2>&1); rc=$?
[ $rc -eq 2 ]; check "convert without GPU column: exit 2 (got $rc)" $?
grep -qF "nocols.csv:1:1: error: num_gpus|num_gpu|gpu_num: required column missing" <<<"$err"; check "missing column named (got: $err)" $?
"$LATHE" trace teams --quotas "$data/quotas_small.csv" --seed 5 --gpus 64 --cluster-out "$tmp/tc.yaml" "$tmp/a.csv" "$tmp/at.csv" 2>/dev/null
check "trace teams: exit 0" $?
"$LATHE" trace teams --quotas "$data/quotas_small.csv" --seed 5 "$tmp/a.csv" "$tmp/at2.csv" 2>/dev/null
cmp -s "$tmp/at.csv" "$tmp/at2.csv"; check "trace teams: same seed, same teams" $?
na=$(grep -c ',vca' "$tmp/at.csv"); nb=$(grep -c ',vcb' "$tmp/at.csv"); nc=$(grep -c ',vcc' "$tmp/at.csv")
[ "$nc" -eq 0 ] && [ "$na" -gt $((2 * nb)) ] && [ $((na + nb)) -eq 500 ]; check "teams 3:1 by quota, none for a team without GPUs (got $na, $nb, $nc)" $?
grep -q 'A100-80GB: 48' "$tmp/tc.yaml" && grep -q 'A100-80GB: 16' "$tmp/tc.yaml"; check "cluster quotas scaled to 64 GPUs" $?
out=$("$LATHE" simulate --cluster "$tmp/tc.yaml" --trace "$tmp/at.csv" --policy lathe); check "teams trace replays on its cluster" $?
grep -q "vca" <<<"$out"; check "team shown in the report" $?

# a slice of a real trace, as published (../shared/data/traces; skipped without it):
# replayed with its zero-duration rows counted, refused with --strict at the first one
real="${LATHE_SHARED_DIR:-}/data/traces/alibaba_lingjun_2023_jobs.csv"
if [ -r "$real" ]; then
    head -n 401 "$real" > "$tmp/lingjun-400.csv"
    for m in exact noise limit; do
        out=$("$LATHE" simulate --nodes 16x8 --trace "$tmp/lingjun-400.csv" --estimate $m); rc=$?
        check "real slice, $m estimates: exit 0 (got $rc)" $rc
        grep -qE "lingjun-400.csv: [0-9]+ jobs with duration 0: they start and end at once \(first: line 23\)" <<<"$out"
        check "real slice: zero durations counted" $?
        grep -qF "ask for more GPUs than the cluster has: refused" <<<"$out"; check "real slice: wider jobs counted" $?
    done
    err=$("$LATHE" simulate --nodes 16x8 --trace "$tmp/lingjun-400.csv" --strict 2>&1 >/dev/null); rc=$?
    [ $rc -eq 2 ]; check "real slice --strict: exit 2 (got $rc)" $?
    grep -qF "lingjun-400.csv:23:18: error: duration_s: a zero duration" <<<"$err"; check "real slice --strict names line 23" $?
else
    echo "SKIP: real-trace slice: $real not found (set LATHE_SHARED_DIR)"
fi

# errors
"$LATHE" simulate --nodes 2x8 2>/dev/null; rc=$?
[ $rc -eq 1 ]; check "no --trace: exit 1 (got $rc)" $?
"$LATHE" simulate --nodes 2x8 --trace "$tmp/a.csv" --policy fifo,slurm 2>/dev/null; rc=$?
[ $rc -eq 1 ]; check "unknown policy: exit 1 (got $rc)" $?
"$LATHE" simulate --nodes 2x8 --trace "$tmp/missing.csv" 2>/dev/null; rc=$?
[ $rc -eq 4 ]; check "unreadable trace: exit 4 (got $rc)" $?
"$LATHE" simulate --cluster "$tmp/missing.yaml" --trace "$tmp/a.csv" 2>/dev/null; rc=$?
[ $rc -eq 4 ]; check "unreadable cluster: exit 4 (got $rc)" $?
printf 'job_id,submit_time_s,duration_s,num_gpus\nj1,0,ten,1\n' > "$tmp/bad.csv"
err=$("$LATHE" simulate --nodes 2x8 --trace "$tmp/bad.csv" 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ]; check "invalid trace: exit 2 (got $rc)" $?
grep -qF "bad.csv:2:6: error: duration_s: not a valid value" <<<"$err"; check "file:line:col in the error (got: $err)" $?
printf 'job_id,submit_time_s,duration_s,num_gpus,gpu_type\nj1,0,10,1,H100\n' > "$tmp/type.csv"
err=$("$LATHE" simulate --cluster "$ex/traces/small-cluster.yaml" --trace "$tmp/type.csv" 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ]; check "unknown GPU type: exit 2 (got $rc)" $?
grep -qF "type.csv:2: error: gpu_type: unknown GPU type" <<<"$err"; check "the line of the unknown type (got: $err)" $?
"$LATHE" trace-gen --load -1 2>/dev/null; rc=$?
[ $rc -eq 1 ]; check "trace-gen bad option: exit 1 (got $rc)" $?

[ $fails -eq 0 ] && echo "cli.sh: all passed"
exit $((fails > 0))
