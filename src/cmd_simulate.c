/* cmd_simulate.c: `lathe simulate`: replays a job trace on a cluster
 * through one or more scheduling policies and prints their figures side by
 * side (completion time, wait, allocation rate, makespan, preemptions,
 * fragmentation, team shares, cost). */
#include "cli.h"

#include "base/base.h"
#include "sched/sched.h"
#include "sim/sim.h"
#include "spec/spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char simulate_help[] =
    "usage: lathe simulate (--cluster CLUSTER.yaml | --nodes COUNTxGPUS) --trace TRACE.csv\n"
    "                      [--policy fifo,greedy,easy,lathe] [-o text|json] [--strict]\n"
    "                      [--estimate trace|exact|noise|limit] [--estimate-noise SIGMA]\n"
    "\n"
    "Replays a trace (docs/simulator.md) in simulated time through each policy,\n"
    "with the same scheduler code `lathe server` runs, and prints one row per\n"
    "policy: jobs, average / median / p99 job completion time, average / p99 /\n"
    "max wait, GPU allocation rate over the busy period, makespan, preemptions,\n"
    "GPU-hours lost to preemption, fragmentation, Jain's index of team shares\n"
    "and cost; then each team's average GPUs against its quota.\n"
    "\n"
    "options:\n"
    "  --cluster FILE      a Cluster YAML (GPU types, nodes, teams, priority classes)\n"
    "  --nodes COUNTxGPUS  instead: COUNT nodes of GPUS GPUs (type \"gpu\", 80 GiB,\n"
    "                      no price), 16 nodes per rack, no team quotas\n"
    "  --trace FILE        the trace CSV\n"
    "  --strict            odd rows of real traces are errors (zero or sub-second\n"
    "                      durations, duplicate ids, unsorted arrivals, censored\n"
    "                      durations, jobs wider than the cluster); without it they are\n"
    "                      replayed (wider jobs refused) and counted above the table\n"
    "  --estimate MODE     what the scheduler is told of each job's duration, the same\n"
    "                      for every policy: trace (estimate_s, else exact; default),\n"
    "                      exact, noise (the duration x exp(SIGMA x N(0,1)), a planner's\n"
    "                      estimate), limit (only a round time limit >= 3x the run,\n"
    "                      told as max_duration; finished jobs' durations are told as\n"
    "                      they end)\n"
    "  --estimate-noise SIGMA  noise with this sigma (default 0.5); implies noise\n"
    "  --seed N            seed of the noise (default 1)\n"
    "  --policy LIST       policies to compare (default fifo,greedy,easy,lathe)\n"
    "  -o, --output FMT    text (default) or json\n"
    "  --explain JOB@TIME  say why the scheduler holds JOB (a job_id) at simulated\n"
    "                      TIME (seconds, or a duration such as 20d or 36h)\n"
    "  --jobs-out FILE     also write what happened to each job (CSV: policy, job_id,\n"
    "                      submit, first start, finish, wait, preemptions, status)\n"
    "  --aging DUR|0       lathe: the wait one doubling of a job's estimated work is\n"
    "                      worth in its order (default 1h); 0: the older saturating\n"
    "                      slack of --max-slack and --slack-factor\n"
    "  --fair-share on|off lathe: teams take turns by decayed usage (default on)\n"
    "  --max-slack DUR     lathe, --aging 0: bound of the size slack (default 6h)\n"
    "  --slack-factor X    lathe: slack per estimated GPU-second (default 0.5)\n"
    "  --starve-after DUR  lathe: a job whose order key is this old goes ahead of fair\n"
    "                      share and may borrow beyond the idle pool (default 48h)\n"
    "  --due-preempt on|off  lathe: such a job may preempt newer jobs when that loses\n"
    "                      less work than emptying GPUs for it (default off)\n"
    "  --half-life DUR     fair-share usage half-life (default 7d)\n"
    "  --min-run DUR       jobs younger than this are never preempted (default 10m)\n"
    "  --reclaim-min-run DUR  nor reclaimed by the team that lent the quota (default 1h)\n"
    "\n"
    "exit: 0 ok, 1 usage, 2 invalid cluster or trace, 4 a file cannot be read\n"
    "\n"
    "examples:\n"
    "  lathe trace-gen --jobs 20000 --gpus 512 -o t.csv --cluster-out c.yaml\n"
    "  lathe simulate --cluster c.yaml --trace t.csv\n"
    "  lathe simulate --nodes 1x8 --trace examples/traces/small.csv --policy fifo,lathe -o json\n";

typedef struct opts {
    const char *cluster, *nodes, *trace, *policies, *jobs_out, *explain;
    cli_output out;
    double max_slack, slack_factor, half_life, min_run, starve_after, reclaim_min_run;
    double reclaim_wait, long_after, long_max, head_after, aging; /* -1: default */
    int fair_share; /* -1 default, 0 off, 1 on */
    int long_gpus;    /* -1: default */
    unsigned without; /* lathe rules turned off */
    unsigned with;    /* lathe rules turned on (those off by default: learn-limit) */
    int due_preempt; /* -1 default, 0 off, 1 on */
    bool strict;
    sim_est_mode estimate;
    double sigma;
    uint64_t seed;
} opts;

static bool take_duration(const char *cmd, const char *name, const char *v, double *out)
{
    if (!units_parse_duration(v, out)) {
        cli_usage_error(cmd, "%s: '%s' is not a duration (e.g. 6h, 90m, 3600)", name, v);
        return false;
    }
    return true;
}

/* --without end-pack,pool-head / --with learn-limit: the lathe rules to turn off / on. */
static int parse_rules(const char *opt, const char *list, unsigned *out)
{
    char **parts;
    size_t k = str_split(list, ',', &parts);
    int rc = LT_EXIT_OK;
    *out = 0;
    for (size_t i = 0; i < k && rc == LT_EXIT_OK; i++) {
        unsigned r;
        if (sched_rule_parse(parts[i], &r))
            *out |= r;
        else
            rc = cli_usage_error("simulate", "%s: '%s' is not a rule (end-pack, idle-reserve, "
                                 "oldest-head, pool-head, reclaim-borrowed, reclaim-small, "
                                 "reclaim-backoff, overrun, reclaim-cheap, reclaim-tail, learn-limit, reserve-tail, "
                                 "rent-reserve)", opt, parts[i]);
    }
    str_list_free(parts, k);
    return rc;
}

/* A duration that may also be 0 ("0" or "off"): a setting turned off. */
static bool take_duration_or_off(const char *cmd, const char *name, const char *v, double *out)
{
    if (strcmp(v, "0") == 0 || strcmp(v, "off") == 0) {
        *out = 0;
        return true;
    }
    return take_duration(cmd, name, v, out);
}

static int parse_args(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof *o);
    o->policies = "fifo,greedy,easy,lathe";
    o->out = CLI_OUT_TEXT;
    o->slack_factor = -1;
    o->reclaim_wait = o->long_after = o->long_max = o->head_after = o->aging = -1;
    o->fair_share = -1;
    o->long_gpus = -1;
    o->due_preempt = -1;
    o->estimate = SIM_EST_TRACE;
    o->sigma = 0.5;
    o->seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--strict") == 0) {
            o->strict = true;
            continue;
        }
        if (i + 1 >= argc) return cli_usage_error("simulate", "'%s' needs a value or is unknown", a);
        const char *v = argv[++i];
        if (strcmp(a, "--cluster") == 0) {
            o->cluster = v;
        } else if (strcmp(a, "--nodes") == 0) {
            o->nodes = v;
        } else if (strcmp(a, "--trace") == 0) {
            o->trace = v;
        } else if (strcmp(a, "--explain") == 0) {
            o->explain = v;
        } else if (strcmp(a, "--jobs-out") == 0) {
            o->jobs_out = v;
        } else if (strcmp(a, "--policy") == 0) {
            o->policies = v;
        } else if (strcmp(a, "--estimate") == 0) {
            static const char *const modes[] = {"trace", "exact", "noise", "limit"};
            int m = -1;
            for (int k = 0; k < 4; k++)
                if (strcmp(v, modes[k]) == 0) m = k;
            if (m < 0) return cli_usage_error("simulate", "--estimate: '%s' is not trace, exact, noise or limit", v);
            o->estimate = (sim_est_mode)m;
        } else if (strcmp(a, "--estimate-noise") == 0) {
            char *end;
            o->sigma = strtod(v, &end);
            if (*end || end == v || !(o->sigma >= 0 && o->sigma <= 10))
                return cli_usage_error("simulate", "--estimate-noise: '%s' is not a sigma in [0, 10]", v);
            o->estimate = SIM_EST_NOISE;
        } else if (strcmp(a, "--seed") == 0) {
            char *end;
            unsigned long long n = strtoull(v, &end, 10);
            if (*end || end == v || v[0] == '-')
                return cli_usage_error("simulate", "--seed: '%s' is not a whole number >= 0", v);
            o->seed = n;
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
            if (!cli_parse_output(v, &o->out) || o->out == CLI_OUT_WIDE || o->out == CLI_OUT_YAML)
                return cli_usage_error("simulate", "-o: '%s' is not text or json", v);
        } else if (strcmp(a, "--max-slack") == 0) {
            if (!take_duration("simulate", a, v, &o->max_slack)) return LT_EXIT_USAGE;
        } else if (strcmp(a, "--starve-after") == 0) {
            if (!take_duration("simulate", a, v, &o->starve_after)) return LT_EXIT_USAGE;
        } else if (strcmp(a, "--due-preempt") == 0) {
            if (strcmp(v, "on") && strcmp(v, "off"))
                return cli_usage_error("simulate", "--due-preempt: '%s' is not on or off", v);
            o->due_preempt = strcmp(v, "on") == 0;
        } else if (strcmp(a, "--fair-share") == 0) {
            if (strcmp(v, "on") && strcmp(v, "off"))
                return cli_usage_error("simulate", "--fair-share: '%s' is not on or off", v);
            o->fair_share = strcmp(v, "on") == 0;
        } else if (strcmp(a, "--aging") == 0) {
            if (!take_duration_or_off("simulate", a, v, &o->aging)) return LT_EXIT_USAGE;
        } else if (strcmp(a, "--half-life") == 0) {
            if (!take_duration("simulate", a, v, &o->half_life)) return LT_EXIT_USAGE;
        } else if (strcmp(a, "--reclaim-min-run") == 0) {
            if (!take_duration("simulate", a, v, &o->reclaim_min_run)) return LT_EXIT_USAGE;
        } else if (strcmp(a, "--reclaim-wait") == 0) {
            if (!take_duration_or_off("simulate", a, v, &o->reclaim_wait)) return LT_EXIT_USAGE;
        } else if (strcmp(a, "--head-after") == 0) {
            if (!take_duration_or_off("simulate", a, v, &o->head_after)) return LT_EXIT_USAGE;
        } else if (strcmp(a, "--long-after") == 0) {
            if (!take_duration("simulate", a, v, &o->long_after)) return LT_EXIT_USAGE;
        } else if (strcmp(a, "--long-max") == 0) {
            if (!take_duration_or_off("simulate", a, v, &o->long_max)) return LT_EXIT_USAGE;
        } else if (strcmp(a, "--long-gpus") == 0) {
            char *end;
            long n = strtol(v, &end, 10);
            if (*end || end == v || n < 0 || n > 1000000)
                return cli_usage_error("simulate", "--long-gpus: '%s' is not a whole number >= 0", v);
            o->long_gpus = (int)n;
        } else if (strcmp(a, "--without") == 0) {
            if (parse_rules(a, v, &o->without) != LT_EXIT_OK) return LT_EXIT_USAGE;
        } else if (strcmp(a, "--with") == 0) {
            if (parse_rules(a, v, &o->with) != LT_EXIT_OK) return LT_EXIT_USAGE;
        } else if (strcmp(a, "--min-run") == 0) {
            if (!take_duration("simulate", a, v, &o->min_run)) return LT_EXIT_USAGE;
        } else if (strcmp(a, "--slack-factor") == 0) {
            char *end;
            o->slack_factor = strtod(v, &end);
            if (*end || !(o->slack_factor >= 0))
                return cli_usage_error("simulate", "--slack-factor: '%s' is not a number >= 0", v);
        } else {
            return cli_usage_error("simulate", "unknown option '%s'", a);
        }
    }
    if (!o->trace) return cli_usage_error("simulate", "--trace is required");
    if (!o->cluster == !o->nodes) return cli_usage_error("simulate", "give --cluster or --nodes (one of them)");
    return LT_EXIT_OK;
}

/* --nodes COUNTxGPUS: a uniform cluster for quick experiments. */
static sched_cluster *nodes_cluster(const char *spec)
{
    int count = 0, gpus = 0, used = 0;
    if (sscanf(spec, "%dx%d%n", &count, &gpus, &used) != 2 || spec[used] || count < 1 || count > 100000 ||
        gpus < 1 || gpus > SCHED_MAX_NODE_GPUS) {
        cli_usage_error("simulate", "--nodes: '%s' is not COUNTxGPUS (e.g. 64x8; 1..64 GPUs per node)", spec);
        return NULL;
    }
    sched_cluster *c = sched_cluster_new();
    sched_cluster_add_type(c, "gpu", 80 * GIB, 0);
    int nv[SCHED_MAX_NODE_GPUS];
    for (int g = 0; g < gpus; g++) nv[g] = gpus >= 4 && gpus % 2 == 0 ? g / (gpus / 2) : 0;
    for (int i = 0; i < count; i++) {
        char name[32], rack[32];
        snprintf(name, sizeof name, "node-%d", i + 1);
        snprintf(rack, sizeof rack, "rack-%d", i / 16 + 1);
        sched_cluster_add_node(c, name, rack, 0, gpus, nv, SCHED_NODE_READY);
    }
    return c;
}

static sched_cluster *load_cluster(const char *path, int *rc)
{
    spec_file f;
    diag_list d;
    diag_list_init(&d);
    memset(&f, 0, sizeof f);
    size_t errors = spec_load_file(path, &f, &d);
    sched_cluster *c = NULL;
    const spec_cluster *sc = errors ? NULL : spec_file_cluster(&f);
    if (!errors && !sc) {
        diag *x = diag_add(&d, DIAG_ERROR, path, 0, 0, "kind", "the file holds no Cluster");
        diag_set_suggestion(x, "give a file with `kind: Cluster` (see examples/traces/small-cluster.yaml)");
    }
    if (sc) c = sched_cluster_from_spec(sc, &d);
    diag_print_all(&d, stderr);
    *rc = c ? LT_EXIT_OK : f.io_error ? LT_EXIT_IO : LT_EXIT_INVALID;
    spec_file_free(&f);
    diag_list_free(&d);
    return c;
}

static int parse_policies(const char *list, sched_policy *out, size_t *n)
{
    char **parts;
    size_t k = str_split(list, ',', &parts);
    *n = 0;
    int rc = LT_EXIT_OK;
    for (size_t i = 0; i < k && rc == LT_EXIT_OK; i++) {
        if (*n >= SCHED_N_POLICIES || !sched_policy_parse(parts[i], &out[*n]))
            rc = cli_usage_error("simulate", "--policy: '%s' is not one of fifo, greedy, easy, lathe "
                                 "(each at most once)", parts[i]);
        else
            (*n)++;
    }
    str_list_free(parts, k);
    if (rc == LT_EXIT_OK && !*n) rc = cli_usage_error("simulate", "--policy: no policy given");
    return rc;
}

/* --explain JOB@TIME */
static int parse_explain(const char *v, const sim_trace *t, sim_explain *ex)
{
    const char *at = strrchr(v, '@');
    if (!at || at == v || !units_parse_duration(at + 1, &ex->at))
        return cli_usage_error("simulate", "--explain: '%s' is not JOB@TIME (e.g. j000042@20d)", v);
    for (size_t i = 0; i < t->n; i++)
        if (strlen(t->jobs[i].id) == (size_t)(at - v) && strncmp(t->jobs[i].id, v, (size_t)(at - v)) == 0) {
            ex->job = i;
            return LT_EXIT_OK;
        }
    return cli_usage_error("simulate", "--explain: no job '%.*s' in the trace", (int)(at - v), v);
}

static void tune(const opts *o, sched_config *cfg)
{
    if (o->max_slack > 0) cfg->max_slack = o->max_slack;
    if (o->slack_factor >= 0) cfg->slack_factor = o->slack_factor;
    if (o->half_life > 0) cfg->half_life = o->half_life;
    if (o->starve_after > 0) cfg->starve_after = o->starve_after;
    if (o->due_preempt >= 0) cfg->due_preempt = o->due_preempt;
    if (o->fair_share >= 0) cfg->fair_share = o->fair_share;
    if (o->aging >= 0) cfg->aging = o->aging;
    if (o->min_run > 0) cfg->min_run_time = o->min_run;
    if (o->reclaim_min_run > 0) cfg->reclaim_min_run = o->reclaim_min_run;
    if (o->reclaim_wait >= 0) cfg->reclaim_wait = o->reclaim_wait;
    if (o->long_after >= 0) cfg->long_after = o->long_after;
    if (o->head_after >= 0) cfg->head_after = o->head_after;
    if (o->long_max >= 0) cfg->long_max = o->long_max;
    if (o->long_gpus >= 0) cfg->long_gpus = o->long_gpus;
    cfg->rules |= o->with;
    cfg->rules &= ~o->without;
}

static int print(const opts *o, const sched_cluster *c, const sim_stats *st, size_t n)
{
    if (o->out == CLI_OUT_JSON) {
        char *j = sim_report_json(c, st, n);
        fputs(j, stdout);
        free(j);
        return LT_EXIT_OK;
    }
    sb s;
    sb_init(&s);
    sim_report_text(c, st, n, &s);
    fputs(sb_str(&s), stdout);
    sb_free(&s);
    return LT_EXIT_OK;
}

static int run_all(const opts *o, sched_cluster *c, const sim_trace *t)
{
    sched_policy pol[SCHED_N_POLICIES];
    size_t np;
    int rc = parse_policies(o->policies, pol, &np);
    if (rc) return rc;
    diag_list d;
    diag_list_init(&d);
    sim_bound b;
    size_t errors = sim_bind(t, c, &b, &d);
    diag_print_all(&d, stderr);
    diag_list_free(&d);
    if (errors) {
        sim_bound_free(&b);
        return LT_EXIT_INVALID;
    }
    sb sum;
    sb_init(&sum);
    sim_trace_summary(t, &b, &sum);
    fputs(sb_str(&sum), o->out == CLI_OUT_JSON ? stderr : stdout);
    sb_free(&sum);
    sim_explain ex, *exp = NULL;
    if (o->explain) {
        rc = parse_explain(o->explain, t, &ex);
        if (rc) {
            sim_bound_free(&b);
            return rc;
        }
        exp = &ex;
    }
    sim_stats st[SCHED_N_POLICIES];
    size_t done = 0;
    for (; done < np; done++) {
        sched_config cfg;
        sched_config_default(&cfg, pol[done]);
        tune(o, &cfg);
        char err[256];
        if (sim_run(c, &b, &cfg, exp, &st[done], err, sizeof err) < 0) {
            fprintf(stderr, "lathe simulate: internal error in policy %s: %s\n", sched_policy_name(pol[done]), err);
            rc = LT_EXIT_INTERNAL;
            break;
        }
    }
    if (!rc) rc = print(o, c, st, done);
    for (size_t i = 0; i < done && !rc; i++)
        if (st[i].explained) fprintf(stderr, "%s: %s\n", sched_policy_name(st[i].policy), st[i].explained);
    if (!rc && o->jobs_out) {
        char *csv = sim_report_jobs_csv(t, st, done);
        int e = file_write_atomic(o->jobs_out, csv, strlen(csv));
        free(csv);
        if (e) {
            fprintf(stderr, "lathe simulate: cannot write %s: %s\n", o->jobs_out, strerror(e));
            rc = LT_EXIT_IO;
        }
    }
    for (size_t i = 0; i < done; i++) sim_stats_free(&st[i]);
    sim_bound_free(&b);
    return rc;
}

static int simulate_run(int argc, char **argv)
{
    opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc;
    sched_cluster *c = o.nodes ? nodes_cluster(o.nodes) : load_cluster(o.cluster, &rc);
    if (!c) return rc ? rc : LT_EXIT_USAGE;
    sim_trace t;
    sim_trace_init(&t);
    t.strict = o.strict;
    diag_list d;
    diag_list_init(&d);
    size_t errors = sim_trace_load(o.trace, &t, &d);
    sim_trace_set_estimates(&t, o.estimate, o.sigma, o.seed);
    diag_print_all(&d, stderr);
    bool unreadable = errors && t.n == 0 && d.len == 1 && d.items[0].line == 0;
    diag_list_free(&d);
    if (errors)
        rc = unreadable ? LT_EXIT_IO : LT_EXIT_INVALID;
    else
        rc = run_all(&o, c, &t);
    sim_trace_free(&t);
    sched_cluster_free(c);
    return rc;
}

const cli_command cli_cmd_simulate = {
    "simulate",
    "replay a job trace through scheduling policies and compare them",
    simulate_help,
    simulate_run,
};
