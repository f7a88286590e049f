#!/bin/bash
# overload.sh: lathe against fifo, greedy and easy in long overloads of
# mostly 1-GPU jobs, the kind of the production trace issue 15 names (it is
# not in ../shared). Synthetic traces from `lathe trace-gen`, made like
# that trace rather than like the default benchmark: 1,280 GPUs (160 nodes
# of 8), 30,000 jobs over about two weeks at offered load 1.0 and 1.3, no
# teams, no checkpoints (a real trace carries none), no priority classes;
# seeds 1-3; every estimate mode. Prints one row per trace and mode with
# the four conditions of issue 15 (JCT below easy's and greedy's, at most
# half of fifo's, allocation at least every baseline's), then each job
# size's average wait for one trace: where lathe's time goes. A bench,
# never run by CTest.
#
#   bench/sched/overload.sh [LATHE] [ARGS...]
#
# LATHE defaults to build/lathe; ARGS go to lathe's `simulate` (e.g.
# `--aging 12h`, `--without rent-reserve`). About a minute on 2 cores.
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=bench/sched/lib.sh
. "$here/bench/sched/lib.sh"
L=$here/build/lathe
if [ $# -gt 0 ] && [ -x "$1" ] && [ ! -d "$1" ]; then L=$1; shift; fi
[ -x "$L" ] || { echo "overload.sh: no lathe at $L (build it first)" >&2; exit 1; }
make_work_dir

traces=()
for s in 1 2 3; do
    for load in 1.0 1.3; do
        t=ov-$s-$load
        "$L" trace-gen --jobs 30000 --gpus 1280 --load "$load" --seed "$s" --teams 0 \
            --checkpoint 0 --high-priority 0 -o "$w/$t.csv" > /dev/null
        traces+=("$t")
    done
done
for t in "${traces[@]}"; do
    for m in exact noise limit; do
        extra=""; [ "$t $m" = "ov-3-1.3 exact" ] && extra="--jobs-out $w/jobs.csv"
        # shellcheck disable=SC2086
        "$L" simulate --nodes 160x8 --trace "$w/$t.csv" --estimate "$m" $extra "$@" -o json \
            > "$w/$t-$m.json" 2> "$w/$t-$m.err" &
        two_at_a_time
    done
done
wait

python3 - "$w" "${traces[@]}" <<'PY'
import csv, json, sys, collections
w, traces = sys.argv[1], sys.argv[2:]
def h(s): return "%.1f d" % (s / 86400) if s >= 100 * 3600 else "%.2f h" % (s / 3600)
print("| trace (seed-load) | estimates | avg JCT fifo / greedy / easy / lathe | lathe / easy | lathe / greedy | lathe / fifo | allocation fifo / greedy / easy / lathe | longest wait greedy / easy / lathe | misses |")
print("|---|---|---|---|---|---|---|---|---|")
rows = wins = 0
ratios = []
for t in traces:
    for m in ("exact", "noise", "limit"):
        d = json.load(open("%s/%s-%s.json" % (w, t, m)))
        p = {x["policy"]: x for x in d["policies"]}
        f, g, e, l = (p[k] for k in ("fifo", "greedy", "easy", "lathe"))
        j = lambda x: x["jct_avg_s"]
        a = lambda x: x["allocation_rate"]
        miss = []
        if not j(l) < j(e): miss.append("easy's JCT")
        if not j(l) < j(g): miss.append("greedy's JCT")
        if not j(l) <= 0.5 * j(f): miss.append("half of fifo's")
        if a(l) < max(a(x) for x in (f, g, e)) - 5e-5: miss.append("allocation")
        rows += 1
        wins += not miss
        ratios.append(j(l) / j(g))
        print("| %s | %s | %s | %.3f | %.3f | %.3f | %s | %s | %s |" % (
            t[3:], m, " / ".join(h(j(x)) for x in (f, g, e, l)), j(l) / j(e), j(l) / j(g), j(l) / j(f),
            " / ".join("%.1f %%" % (100 * a(x)) for x in (f, g, e, l)),
            " / ".join(h(x["wait_max_s"]) for x in (g, e, l)), ", ".join(miss) or "none"))
ratios.sort()
print("\nlathe meets every condition on %d of %d rows; lathe / greedy: %.2f to %.2f, median %.2f" % (
    wins, rows, ratios[0], ratios[-1], ratios[len(ratios) // 2]))

size = {r["job_id"]: int(r["num_gpus"]) for r in csv.DictReader(open("%s/ov-3-1.3.csv" % w))}
agg = collections.defaultdict(lambda: [0, 0.0])
for r in csv.DictReader(open("%s/jobs.csv" % w)):
    a = agg[(r["policy"], size[r["job_id"]])]
    a[0] += 1
    a[1] += float(r["wait_s"])
pols = ("fifo", "greedy", "easy", "lathe")
print("\nseed 3, load 1.3, exact estimates: average wait by job size\n")
print("| GPUs | jobs | " + " | ".join(pols) + " |")
print("|---|---|" + "---|" * len(pols))
for s in sorted({k[1] for k in agg}):
    print("| %d | %d | " % (s, agg[("lathe", s)][0]) + " | ".join(h(agg[(p, s)][1] / agg[(p, s)][0]) for p in pols) + " |")
PY
