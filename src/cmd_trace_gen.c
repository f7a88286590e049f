/* cmd_trace_gen.c: `lathe trace-gen`: writes a synthetic job trace (CSV)
 * shaped like published GPU cluster studies, and optionally the Cluster
 * YAML it was sized for. Seeded: the same options give the same bytes. */
#include "cli.h"

#include "base/base.h"
#include "sim/sim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char trace_gen_help[] =
    "usage: lathe trace-gen [-o TRACE.csv] [--cluster-out CLUSTER.yaml] [options]\n"
    "\n"
    "Writes a synthetic trace for `lathe simulate`: mostly 1-GPU jobs with a heavy\n"
    "tail of 8-64-GPU gangs, lognormal durations per size class (minutes to days),\n"
    "bursty arrivals with a daily cycle, teams sharing the cluster 4:3:2:1, some\n"
    "jobs asking for part of a GPU, a few high-priority jobs. The arrival rate is\n"
    "set so that the offered GPU-time is --load times the capacity of --gpus GPUs.\n"
    "Without -o the trace goes to stdout.\n"
    "\n"
    "options:\n"
    "  -o, --output FILE       the trace CSV\n"
    "  --cluster-out FILE      also write a matching Cluster YAML (nodes, team quotas,\n"
    "                          priority classes high and default)\n"
    "  --jobs N                jobs (default 20000)\n"
    "  --gpus N                cluster size the load is computed for (default 512)\n"
    "  --gpus-per-node N       (default 8)\n"
    "  --load X                offered load, e.g. 0.9 (default 0.9)\n"
    "  --teams N               teams team-1..team-N (default 4; 0: no team column)\n"
    "  --seed N                random seed (default 1)\n"
    "  --share-jobs X          part of 1-GPU jobs asking for 1/4 or 1/2 GPU (default 0.1)\n"
    "  --high-priority X       part of jobs in priority class high (default 0.02)\n"
    "  --estimate-noise S      write estimate_s = duration x lognormal(0, S) (default: none)\n"
    "  --checkpoint DUR        checkpoint interval of every job (default 30m; 0 = none)\n"
    "\n"
    "exit: 0 ok, 1 usage, 4 a file cannot be written\n"
    "\n"
    "example:\n"
    "  lathe trace-gen --jobs 20000 --gpus 512 --load 0.95 -o t.csv --cluster-out c.yaml\n";

static bool num(const char *name, const char *v, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (*end || !*v || errno || !(x >= lo && x <= hi)) {
        cli_usage_error("trace-gen", "%s: '%s' is not a number in [%g, %g]", name, v, lo, hi);
        return false;
    }
    *out = x;
    return true;
}

static int parse(int argc, char **argv, sim_gen_opts *g, const char **out, const char **cluster_out)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) return cli_usage_error("trace-gen", "'%s' needs a value or is unknown", a);
        const char *v = argv[++i];
        double x;
        if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
            *out = v;
        } else if (strcmp(a, "--cluster-out") == 0) {
            *cluster_out = v;
        } else if (strcmp(a, "--jobs") == 0) {
            if (!num(a, v, 1, SIM_MAX_JOBS, &x)) return LT_EXIT_USAGE;
            g->jobs = (size_t)x;
        } else if (strcmp(a, "--gpus") == 0) {
            if (!num(a, v, 1, 10000000, &x)) return LT_EXIT_USAGE;
            g->gpus = (int)x;
        } else if (strcmp(a, "--gpus-per-node") == 0) {
            if (!num(a, v, 1, 64, &x)) return LT_EXIT_USAGE;
            g->gpus_per_node = (int)x;
        } else if (strcmp(a, "--load") == 0) {
            if (!num(a, v, 0.001, 100, &g->load)) return LT_EXIT_USAGE;
        } else if (strcmp(a, "--teams") == 0) {
            if (!num(a, v, 0, 1000, &x)) return LT_EXIT_USAGE;
            g->teams = (int)x;
        } else if (strcmp(a, "--seed") == 0) {
            if (!num(a, v, 0, 9007199254740992.0, &x)) return LT_EXIT_USAGE;
            g->seed = (uint64_t)x;
        } else if (strcmp(a, "--share-jobs") == 0) {
            if (!num(a, v, 0, 1, &g->share_jobs)) return LT_EXIT_USAGE;
        } else if (strcmp(a, "--high-priority") == 0) {
            if (!num(a, v, 0, 1, &g->high_priority)) return LT_EXIT_USAGE;
        } else if (strcmp(a, "--estimate-noise") == 0) {
            if (!num(a, v, 0, 5, &g->estimate_noise)) return LT_EXIT_USAGE;
        } else if (strcmp(a, "--checkpoint") == 0) {
            if (strcmp(v, "0") == 0)
                g->checkpoint = 0;
            else if (!units_parse_duration(v, &g->checkpoint))
                return cli_usage_error("trace-gen", "--checkpoint: '%s' is not a duration (e.g. 30m)", v);
        } else {
            return cli_usage_error("trace-gen", "unknown option '%s'", a);
        }
    }
    return LT_EXIT_OK;
}

static int write_file(const char *path, const char *text)
{
    int e = file_write_atomic(path, text, strlen(text));
    if (e) {
        fprintf(stderr, "lathe trace-gen: cannot write %s: %s\n", path, strerror(e));
        return LT_EXIT_IO;
    }
    return LT_EXIT_OK;
}

static int trace_gen_run(int argc, char **argv)
{
    sim_gen_opts g;
    sim_gen_defaults(&g);
    const char *out = NULL, *cluster_out = NULL;
    int rc = parse(argc, argv, &g, &out, &cluster_out);
    if (rc) return rc;
    sim_trace t;
    sim_gen(&g, &t);
    char *csv = sim_trace_to_csv(&t);
    if (out)
        rc = write_file(out, csv);
    else
        fputs(csv, stdout);
    free(csv);
    if (!rc && cluster_out) {
        char *y = sim_gen_cluster_yaml(&g);
        if (!y) {
            fprintf(stderr, "lathe trace-gen: the YAML emitter failed\n");
            rc = LT_EXIT_INTERNAL;
        } else {
            rc = write_file(cluster_out, y);
        }
        free(y);
    }
    if (!rc && out)
        fprintf(stderr, "lathe trace-gen: %zu jobs over %.1f days written to %s\n", t.n,
                t.n ? t.jobs[t.n - 1].submit / 86400.0 : 0.0, out);
    sim_trace_free(&t);
    return rc;
}

const cli_command cli_cmd_trace_gen = {
    "trace-gen",
    "write a synthetic job trace (and its cluster) for lathe simulate",
    trace_gen_help,
    trace_gen_run,
};
