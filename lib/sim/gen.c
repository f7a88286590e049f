/* gen.c: synthetic traces, seeded and reproducible, shaped like the
 * published studies of shared GPU clusters:
 *
 *   - most jobs use one GPU, with a heavy tail of 8-64-GPU gangs
 *     (Jeon et al., "Analysis of Large-Scale Multi-Tenant GPU Clusters for
 *     DNN Training Workloads", USENIX ATC 2019, on Microsoft's Philly trace;
 *     Weng et al., "MLaaS in the Wild", NSDI 2022, on Alibaba PAI);
 *   - durations lognormal per size class, from minutes to days, larger jobs
 *     running longer (both studies);
 *   - arrivals with a daily cycle and in bursts (a user submitting a sweep:
 *     LoRA ranks r8 / r16 / r32 of one experiment);
 *   - a part of the 1-GPU jobs asking for a fraction of a GPU (PAI's
 *     fractional GPU requests);
 *   - teams sharing the cluster in unequal parts, with quotas to match.
 *
 * The class mix and medians below are this generator's choices in the
 * spirit of those studies, not numbers copied from them.
 *
 * Also here: the distributions over base.h's generator (uniform, normal,
 * exponential) and the matching Cluster YAML, written with libyaml's
 * emitter.
 */
#include "sim.h"
#include "sim_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* ---- random numbers ---- */

void sim_rng_seed(sim_rng *r, uint64_t seed)
{
    rng_seed(r, seed);
}

uint64_t sim_rng_next(sim_rng *r)
{
    return rng_next(r);
}

double sim_rng_uniform(sim_rng *r)
{
    return (double)(sim_rng_next(r) >> 11) * 0x1.0p-53;
}

double sim_rng_normal(sim_rng *r)
{
    /* Box-Muller; one of the pair is enough here */
    double u = sim_rng_uniform(r), v = sim_rng_uniform(r);
    return sqrt(-2 * log(1 - u)) * cos(2 * M_PI * v);
}

double sim_rng_exp(sim_rng *r, double mean)
{
    return -mean * log(1 - sim_rng_uniform(r));
}

/* ---- the workload model ---- */

typedef struct size_class {
    int gpus;
    double p;      /* part of jobs */
    double median; /* median duration, s */
} size_class;

static const size_class classes[] = {
    {1, 0.70, 1800}, {2, 0.08, 2700}, {4, 0.10, 3600}, {8, 0.08, 7200},
    {16, 0.025, 10800}, {32, 0.01, 14400}, {64, 0.005, 21600},
};
#define N_CLASSES (sizeof classes / sizeof classes[0])
#define SIGMA 1.4          /* lognormal shape of durations */
#define BURST_SIGMA 0.3    /* spread of durations inside one burst */
#define BURST_CONTINUE 0.35 /* chance that a burst holds one more job */
#define DAY_AMPLITUDE 0.5  /* arrival rate swings +-50% over a day */
#define MIN_DURATION 60.0
#define MAX_DURATION (14 * 86400.0)

void sim_gen_defaults(sim_gen_opts *o)
{
    memset(o, 0, sizeof *o);
    o->jobs = 20000;
    o->gpus = 512;
    o->gpus_per_node = 8;
    o->nodes_per_rack = 16;
    o->load = 0.9;
    o->teams = 4;
    o->seed = 1;
    o->share_jobs = 0.1;
    o->high_priority = 0.02;
    o->checkpoint = 1800;
}

/* Team i of n (0-based) gets a share proportional to n - i: 4:3:2:1. */
static double team_share(int i, int n)
{
    return (double)(n - i) / (n * (n + 1) / 2.0);
}

/* Expected GPU-seconds per job, for the arrival rate. */
static double mean_work(const sim_gen_opts *o)
{
    double w = 0;
    for (size_t c = 0; c < N_CLASSES; c++) {
        int g = classes[c].gpus < o->gpus ? classes[c].gpus : o->gpus;
        double gpus = g == 1 ? 1 - o->share_jobs * 0.625 : g; /* fractions 1/4, 1/2: mean 3/8 */
        w += classes[c].p * gpus * classes[c].median * exp(SIGMA * SIGMA / 2);
    }
    return w;
}

static int pick_class(sim_rng *r)
{
    double u = sim_rng_uniform(r), acc = 0;
    for (size_t c = 0; c < N_CLASSES; c++) {
        acc += classes[c].p;
        if (u < acc) return (int)c;
    }
    return (int)N_CLASSES - 1;
}

static int pick_team(sim_rng *r, int n)
{
    double u = sim_rng_uniform(r), acc = 0;
    for (int i = 0; i < n; i++) {
        acc += team_share(i, n);
        if (u < acc) return i;
    }
    return n - 1;
}

static double clip(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* One burst of similar jobs from one team at time t. */
static void burst(const sim_gen_opts *o, sim_rng *r, double t, sim_trace *out)
{
    const size_class *sc = &classes[pick_class(r)];
    int gpus = sc->gpus < o->gpus ? sc->gpus : o->gpus;
    int team = o->teams > 0 ? pick_team(r, o->teams) : -1;
    double base = sc->median * exp(SIGMA * sim_rng_normal(r));
    bool high = sim_rng_uniform(r) < o->high_priority;
    double frac = 1;
    if (gpus == 1 && sim_rng_uniform(r) < o->share_jobs) frac = sim_rng_uniform(r) < 0.5 ? 0.25 : 0.5;
    do {
        if (out->n >= o->jobs) return;
        sim_job j;
        memset(&j, 0, sizeof j);
        j.id = xasprintf(o->jobs >= 1000000 ? "j%07zu" : "j%06zu", out->n + 1);
        j.submit = floor(t);
        j.duration = round(clip(base * exp(BURST_SIGMA * sim_rng_normal(r)), MIN_DURATION, MAX_DURATION));
        j.gpus = gpus;
        j.fraction = frac;
        j.checkpoint = o->checkpoint;
        if (o->estimate_noise > 0)
            j.estimate = round(clip(j.duration * exp(o->estimate_noise * sim_rng_normal(r)), 1, 4 * MAX_DURATION));
        if (team >= 0) j.team = xasprintf("team-%d", team + 1);
        if (high) j.priority = xstrdup("high");
        sim_trace_push(out, &j);
        t += sim_rng_uniform(r) * 60;
    } while (sim_rng_uniform(r) < BURST_CONTINUE);
}

static int cmp_submit(const void *a, const void *b)
{
    const sim_job *x = a, *y = b;
    if (x->submit != y->submit) return x->submit < y->submit ? -1 : 1;
    return strcmp(x->id, y->id);
}

void sim_gen(const sim_gen_opts *o, sim_trace *out)
{
    sim_trace_init(out);
    sim_rng r;
    sim_rng_seed(&r, o->seed);
    double jobs_per_burst = 1 / (1 - BURST_CONTINUE);
    double rate = o->load * o->gpus / mean_work(o) / jobs_per_burst; /* bursts per second */
    double peak = rate * (1 + DAY_AMPLITUDE), t = 0;
    while (out->n < o->jobs) {
        /* thinning: candidates at the peak rate, kept in proportion to the daily cycle */
        t += sim_rng_exp(&r, 1 / peak);
        double m = 1 + DAY_AMPLITUDE * sin(2 * M_PI * (t / 86400.0 - 0.25));
        if (sim_rng_uniform(&r) * (1 + DAY_AMPLITUDE) < m) burst(o, &r, t, out);
    }
    qsort(out->jobs, out->n, sizeof *out->jobs, cmp_submit);
    for (size_t i = 0; i < out->n; i++) out->jobs[i].line = (int)(i + 2);
}

/* ---- the matching cluster, in YAML ---- */

typedef struct yout {
    yaml_emitter_t em;
    sb text;
    bool failed;
} yout;

static int y_write(void *data, unsigned char *buf, size_t size)
{
    sb_putn(data, (const char *)buf, size);
    return 1;
}

static void y_emit(yout *y, yaml_event_t *ev)
{
    if (!y->failed && !yaml_emitter_emit(&y->em, ev)) y->failed = true;
}

static void y_str(yout *y, const char *v)
{
    yaml_event_t ev;
    yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)v, (int)strlen(v), 1, 1,
                                 YAML_ANY_SCALAR_STYLE);
    y_emit(y, &ev);
}

static void y_num(yout *y, double v)
{
    char b[32];
    snprintf(b, sizeof b, "%.15g", v);
    y_str(y, b);
}

static void y_map(yout *y, bool start)
{
    yaml_event_t ev;
    if (start)
        yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE);
    else
        yaml_mapping_end_event_initialize(&ev);
    y_emit(y, &ev);
}

static void y_seq(yout *y, bool start, bool flow)
{
    yaml_event_t ev;
    if (start)
        yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
                                             flow ? YAML_FLOW_SEQUENCE_STYLE : YAML_BLOCK_SEQUENCE_STYLE);
    else
        yaml_sequence_end_event_initialize(&ev);
    y_emit(y, &ev);
}

static void y_kv(yout *y, const char *k, const char *v)
{
    y_str(y, k);
    y_str(y, v);
}

static void cluster_nodes(yout *y, const sim_gen_opts *o)
{
    int gpn = o->gpus_per_node > 0 ? o->gpus_per_node : 8;
    y_str(y, "gpuTypes");
    y_seq(y, true, false);
    y_map(y, true);
    y_kv(y, "name", "A100-80GB");
    y_kv(y, "memory", "80Gi");
    y_str(y, "pricePerHour");
    y_num(y, 2.5);
    y_map(y, false);
    y_seq(y, false, false);
    y_str(y, "nodeGroups");
    y_seq(y, true, false);
    y_map(y, true);
    y_kv(y, "namePrefix", "a100");
    y_str(y, "count");
    y_num(y, (o->gpus + gpn - 1) / gpn);
    y_str(y, "nodesPerRack");
    y_num(y, o->nodes_per_rack > 0 ? o->nodes_per_rack : 16);
    y_kv(y, "gpuType", "A100-80GB");
    y_str(y, "gpusPerNode");
    y_num(y, gpn);
    if (gpn % 2 == 0 && gpn >= 4) { /* two NVLink groups, as on 8-GPU PCIe/NVLink-bridge boards */
        y_str(y, "nvlinkGroups");
        y_seq(y, true, true);
        for (int g = 0; g < 2; g++) {
            y_seq(y, true, true);
            for (int i = 0; i < gpn / 2; i++) y_num(y, g * (gpn / 2) + i);
            y_seq(y, false, true);
        }
        y_seq(y, false, true);
    }
    y_map(y, false);
    y_seq(y, false, false);
}

static void cluster_teams(yout *y, const sim_gen_opts *o)
{
    if (o->teams <= 0) return;
    y_str(y, "teams");
    y_seq(y, true, false);
    for (int i = 0; i < o->teams; i++) {
        char name[32];
        snprintf(name, sizeof name, "team-%d", i + 1);
        y_map(y, true);
        y_kv(y, "name", o->team_names ? o->team_names[i] : name);
        y_str(y, "quota");
        y_map(y, true);
        y_str(y, "A100-80GB");
        y_num(y, floor(o->gpus * (o->team_shares ? o->team_shares[i] : team_share(i, o->teams))));
        y_map(y, false);
        y_map(y, false);
    }
    y_seq(y, false, false);
}

static void cluster_priorities(yout *y)
{
    y_str(y, "priorityClasses");
    y_seq(y, true, false);
    y_map(y, true);
    y_kv(y, "name", "high");
    y_kv(y, "value", "1000");
    y_kv(y, "preemptionPolicy", "PreemptLowerPriority");
    y_map(y, false);
    y_map(y, true);
    y_kv(y, "name", "default");
    y_kv(y, "value", "0");
    y_kv(y, "globalDefault", "true");
    y_map(y, false);
    y_seq(y, false, false);
}

char *sim_gen_cluster_yaml(const sim_gen_opts *o)
{
    yout y;
    memset(&y, 0, sizeof y);
    sb_init(&y.text);
    sb_printf(&y.text, "# %s\n", o->comment ? o->comment : "Written by `lathe trace-gen`: the cluster its trace was sized for.");
    yaml_emitter_initialize(&y.em);
    yaml_emitter_set_output(&y.em, y_write, &y.text);
    yaml_emitter_set_width(&y.em, 100);
    yaml_event_t ev;
    yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING);
    y_emit(&y, &ev);
    yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1);
    y_emit(&y, &ev);
    y_map(&y, true);
    y_kv(&y, "apiVersion", "lathe/v1");
    y_kv(&y, "kind", "Cluster");
    y_str(&y, "metadata");
    y_map(&y, true);
    y_kv(&y, "name", o->name ? o->name : "synthetic");
    y_map(&y, false);
    y_str(&y, "spec");
    y_map(&y, true);
    cluster_nodes(&y, o);
    cluster_teams(&y, o);
    cluster_priorities(&y);
    y_map(&y, false);
    y_map(&y, false);
    yaml_document_end_event_initialize(&ev, 1);
    y_emit(&y, &ev);
    yaml_stream_end_event_initialize(&ev);
    y_emit(&y, &ev);
    yaml_emitter_delete(&y.em);
    if (y.failed) {
        sb_free(&y.text);
        return NULL;
    }
    return sb_take(&y.text);
}
