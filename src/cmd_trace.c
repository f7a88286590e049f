/* cmd_trace.c: `lathe trace convert` (public cluster traces into lathe's
 * trace CSV) and `lathe trace teams` (teams drawn in proportion to real
 * per-team quotas, with a matching Cluster YAML). The real data stays as
 * it is: both write new files. */
#include "cli.h"

#include "base/base.h"
#include "sim/sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char trace_help[] =
    "usage: lathe trace convert --from philly|lingjun|pai-openb IN OUT\n"
    "       lathe trace teams --quotas QUOTAS.csv [--seed N] [--gpus N] [--gpus-per-node N]\n"
    "                         [--cluster-out CLUSTER.yaml] IN OUT\n"
    "\n"
    "convert: reads a public GPU cluster trace and writes it as a lathe trace CSV\n"
    "(docs/simulator.md): jobs sorted by submit time, the first at 0. Jobs that asked\n"
    "for no GPU or never ran are left out and counted; runs cut off by the end of\n"
    "the trace are kept with duration_censored 1.\n"
    "  philly     Microsoft Philly 2017 cluster_job_log (JSON); vc becomes the team\n"
    "  lingjun    Alibaba Lingjun 2023 jobs (job_id,submit_time_s,duration_s,num_gpus)\n"
    "  pai-openb  Alibaba PAI 2023 openb pod list (creation, scheduled and deletion\n"
    "             times, num_gpu, gpu_milli, pod_phase)\n"
    "\n"
    "teams: gives every job of IN a team, drawn with chances in proportion to each\n"
    "team's average GPUs in QUOTAS (Helios' cluster_gpu_number.csv: date,<team>...,\n"
    "total; names lowercased), seeded (--seed, default 1), and writes the trace with a team column to\n"
    "OUT. --cluster-out also writes a Cluster of --gpus GPUs (default 1024) in nodes\n"
    "of --gpus-per-node (8) with those quotas scaled to it (borrowing allowed).\n"
    "\n"
    "exit: 0 ok, 1 usage, 2 invalid input, 4 a file cannot be read or written\n"
    "\n"
    "examples:\n"
    "  lathe trace convert --from pai-openb openb_pod_list_default.csv openb.csv\n"
    "  lathe trace teams --quotas helios_venus_2020_vc_gpus_daily.csv --seed 1 \\\n"
    "      --gpus 1024 --cluster-out c.yaml lingjun.csv lingjun-teams.csv\n";

static int write_file(const char *path, const char *text)
{
    int e = file_write_atomic(path, text, strlen(text));
    if (e) {
        fprintf(stderr, "lathe trace: cannot write %s: %s\n", path, strerror(e));
        return LT_EXIT_IO;
    }
    return LT_EXIT_OK;
}

static char *read_input(const char *path, size_t *len, int *rc)
{
    char msg[256];
    char *text = file_read_all(path, SIM_MAX_TRACE_BYTES, len, msg, sizeof msg);
    if (!text) {
        fprintf(stderr, "%s: error: %s\n", path, msg);
        *rc = LT_EXIT_IO;
    }
    return text;
}

static int convert(int argc, char **argv)
{
    const char *from = NULL, *files[2] = {NULL, NULL};
    int nf = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--from") == 0 && i + 1 < argc)
            from = argv[++i];
        else if (argv[i][0] == '-' && argv[i][1])
            return cli_usage_error("trace", "convert: unknown option '%s'", argv[i]);
        else if (nf < 2)
            files[nf++] = argv[i];
        else
            return cli_usage_error("trace", "convert: more than IN and OUT given ('%s')", argv[i]);
    }
    sim_format f;
    if (!from || !sim_format_parse(from, &f))
        return cli_usage_error("trace", "convert: --from philly, lingjun or pai-openb is required");
    if (nf != 2) return cli_usage_error("trace", "convert: give IN and OUT");
    int rc = LT_EXIT_OK;
    size_t len;
    char *text = read_input(files[0], &len, &rc);
    if (!text) return rc;
    sim_trace t;
    sim_trace_init(&t);
    sim_convert_stats st;
    diag_list d;
    diag_list_init(&d);
    size_t errors = sim_convert(f, files[0], text, len, &t, &st, &d);
    free(text);
    diag_print_all(&d, stderr);
    diag_list_free(&d);
    if (errors) {
        rc = LT_EXIT_INVALID;
    } else {
        char *csv = sim_trace_to_csv(&t);
        rc = write_file(files[1], csv);
        free(csv);
    }
    if (!rc)
        fprintf(stderr, "lathe trace convert: %zu jobs read, %zu written to %s (%zu with a censored duration); "
                "left out: %zu asked for no GPU, %zu never ran\n",
                st.rows, st.kept, files[1], st.censored, st.no_gpu, st.never_ran);
    sim_trace_free(&t);
    return rc;
}

static int teams(int argc, char **argv)
{
    const char *quotas = NULL, *cluster_out = NULL, *files[2] = {NULL, NULL};
    long seed = 1, gpus = 1024, gpn = 8;
    int nf = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if (strcmp(a, "--quotas") == 0 && has) {
            quotas = argv[++i];
        } else if (strcmp(a, "--cluster-out") == 0 && has) {
            cluster_out = argv[++i];
        } else if (strcmp(a, "--seed") == 0 && has) {
            if (!cli_parse_long(argv[++i], 0, 1L << 53, &seed))
                return cli_usage_error("trace", "teams: --seed: '%s' is not a whole number >= 0", argv[i]);
        } else if (strcmp(a, "--gpus") == 0 && has) {
            if (!cli_parse_long(argv[++i], 1, 10000000, &gpus))
                return cli_usage_error("trace", "teams: --gpus: '%s' is not a whole number >= 1", argv[i]);
        } else if (strcmp(a, "--gpus-per-node") == 0 && has) {
            if (!cli_parse_long(argv[++i], 1, 64, &gpn))
                return cli_usage_error("trace", "teams: --gpus-per-node: '%s' is not 1..64", argv[i]);
        } else if (a[0] == '-' && a[1]) {
            return cli_usage_error("trace", "teams: unknown option '%s' (or it needs a value)", a);
        } else if (nf < 2) {
            files[nf++] = a;
        } else {
            return cli_usage_error("trace", "teams: more than IN and OUT given ('%s')", a);
        }
    }
    if (!quotas || nf != 2) return cli_usage_error("trace", "teams: give --quotas QUOTAS.csv, IN and OUT");
    int rc = LT_EXIT_OK;
    size_t len;
    char *text = read_input(quotas, &len, &rc);
    if (!text) return rc;
    char **names;
    double *avg;
    int n;
    diag_list d;
    diag_list_init(&d);
    size_t errors = sim_quota_parse(quotas, text, len, &names, &avg, &n, &d);
    free(text);
    sim_trace t;
    sim_trace_init(&t);
    if (!errors) errors = sim_trace_load(files[0], &t, &d);
    diag_print_all(&d, stderr);
    diag_list_free(&d);
    if (errors) rc = LT_EXIT_INVALID;
    if (!rc) {
        sim_assign_teams(&t, names, avg, n, (uint64_t)seed);
        char *csv = sim_trace_to_csv(&t);
        rc = write_file(files[1], csv);
        free(csv);
    }
    double total = 0;
    for (int i = 0; i < n; i++) total += avg[i];
    if (!rc && cluster_out) {
        sim_gen_opts g;
        sim_gen_defaults(&g);
        g.gpus = (int)gpus;
        g.gpus_per_node = (int)gpn;
        g.teams = n;
        double *share = xcalloc((size_t)n + 1, sizeof *share);
        for (int i = 0; i < n; i++) share[i] = avg[i] / total;
        g.team_names = (const char *const *)names;
        g.team_shares = share;
        g.comment = "Written by `lathe trace teams`: team quotas in proportion to the average GPUs of each team "
                    "in the quota table, scaled to the cluster.";
        g.name = "trace-teams";
        char *y = sim_gen_cluster_yaml(&g);
        rc = y ? write_file(cluster_out, y) : LT_EXIT_INTERNAL;
        free(y);
        free(share);
    }
    if (!rc)
        fprintf(stderr, "lathe trace teams: %zu jobs given %d teams (%.0f GPUs on average in %s), seed %ld, "
                "written to %s\n", t.n, n, total, quotas, seed, files[1]);
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    free(avg);
    sim_trace_free(&t);
    return rc;
}

static int trace_run(int argc, char **argv)
{
    if (argc < 2) return cli_usage_error("trace", "give a subcommand: convert or teams");
    if (strcmp(argv[1], "convert") == 0) return convert(argc - 1, argv + 1);
    if (strcmp(argv[1], "teams") == 0) return teams(argc - 1, argv + 1);
    return cli_usage_error("trace", "'%s' is not a subcommand (convert, teams)", argv[1]);
}

const cli_command cli_cmd_trace = {
    "trace",
    "convert public cluster traces for lathe simulate, give their jobs teams",
    trace_help,
    trace_run,
};
