/* bench_estimator.c: the GPU memory estimator against published
 * measurements, side by side with the seed article's formula.
 *
 *   bench_estimator [FILE.jsonl] [-v] [--fit]
 *
 * FILE defaults to share/calibration/memory-calibration.jsonl in the source
 * tree; any file of that schema (a held-out set) runs the same way. Rows
 * lathe cannot use are skipped (-v says why). Prints:
 *   - per method and overall: rows, mean absolute percentage error, median,
 *     share within +-10 % and +-20 %, for lathe and the seed formula, on
 *     the whole file
 *   - the same per source, with lathe's mean signed error (its bias)
 *   - leave-one-source-out cross-validation: each source predicted with
 *     the constants fitted on the other sources (framework_gib, the only
 *     one a fit may set; lathe's default fits nothing), per method and
 *     overall, lathe and seed side by side
 *   - the time per estimate against the seed formula's, for fixed and for
 *     varying sample lengths
 * -v prints every row; --fit prints the framework_gib fitted on every row
 * and the metrics it gives. */
#include "plan/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct bench_opts {
    const char *path;
    bool verbose, fit;
    double seq_min; /* --seq-min N: the shortest sample of every row with varying lengths */
    unsigned long long seed; /* --replay-seed N: the replays' first seed (0: lathe's default) */
} bench_opts;

/* What the bench computes once per row. */
typedef struct bench_row {
    const est_row *row;
    double lathe;   /* GiB, lathe's default constants */
    double seed;    /* GiB, the seed formula */
    double loso;    /* GiB, with framework_gib fitted without the row's source */
    double fw_loso; /* that framework_gib */
    est_phase phase;
} bench_row;

static double seed_gib(const est_row *r)
{
    const model_shape *m = &r->shape;
    model_params p;
    model_count_params(m, &p);
    est_seed s;
    est_seed_formula((double)p.total, r->in.rank, r->n_targets, r->in.method == METHOD_FULL,
                     r->in.batch, r->in.seq, m->hidden, m->layers, &s);
    return s.total_gib / r->in.gpus; /* the seed splits its total evenly over the GPUs */
}

static double ape(double est, double measured)
{
    return fabs(est - measured) / measured * 100.0;
}

static void metrics_cols(const double *a, size_t n, char *out, size_t outsz)
{
    est_metrics m;
    est_metrics_of(a, n, &m);
    snprintf(out, outsz, "%6.1f %7.1f %6.0f%% %6.0f%%", m.mape, m.median_ape, m.within10 * 100, m.within20 * 100);
}

/* Per method and overall: lathe's figure (which: 0 default, 1 LOSO) and the seed's. */
static void print_table(const bench_row *b, size_t n, int which)
{
    static const struct {
        const char *name;
        spec_method m;
    } methods[] = {{"lora", METHOD_LORA}, {"qlora", METHOD_QLORA}, {"dora", METHOD_DORA},
                   {"full", METHOD_FULL}};
    double *x = xmalloc((n + 1) * sizeof *x), *y = xmalloc((n + 1) * sizeof *y);
    printf("  %-8s %5s | %-31s | %s\n", "", "", which ? "lathe, leave one source out" : "lathe", "seed formula");
    printf("  %-8s %5s | %6s %7s %7s %7s | %6s %7s %7s %7s\n", "method", "rows", "MAPE", "median", "+-10%",
           "+-20%", "MAPE", "median", "+-10%", "+-20%");
    for (size_t k = 0; k <= sizeof methods / sizeof methods[0]; k++) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            if (k < 4 && b[i].row->in.method != methods[k].m) continue;
            x[m] = ape(which ? b[i].loso : b[i].lathe, b[i].row->measured_gib);
            y[m] = ape(b[i].seed, b[i].row->measured_gib);
            m++;
        }
        if (k < 4 && m == 0) continue;
        char l[64], s[64];
        metrics_cols(x, m, l, sizeof l);
        metrics_cols(y, m, s, sizeof s);
        printf("  %-8s %5zu | %s | %s\n", k < 4 ? methods[k].name : "all", m, l, s);
        if (k == 4) { /* the shares as counts, so that rounding cannot hide a row */
            size_t w10 = 0, w20 = 0;
            for (size_t i = 0; i < m; i++) {
                w10 += x[i] <= 10.0;
                w20 += x[i] <= 20.0;
            }
            printf("  lathe: %zu of %zu rows within +-10 %%, %zu within +-20 %%\n", w10, m, w20);
        }
    }
    free(x);
    free(y);
}

/* Per source: lathe's errors, its bias, the framework_gib fitted without
 * the source and what cross-validation gives, and the seed's MAPE. */
static void print_sources(const bench_row *b, size_t n)
{
    printf("\nper source (bias: mean signed error; fw: framework_gib fitted on the other sources):\n");
    printf("  %-46s %5s | %6s %7s %7s %7s | %5s %7s | %6s\n", "source", "rows", "MAPE", "median", "bias", "+-10%",
           "fw", "LOSO", "seed");
    double *x = xmalloc((n + 1) * sizeof *x), *y = xmalloc((n + 1) * sizeof *y), *z = xmalloc((n + 1) * sizeof *z);
    for (size_t s = 0; s < n; s++) {
        bool first = true;
        for (size_t j = 0; j < s; j++)
            if (strcmp(b[j].row->source, b[s].row->source) == 0) first = false;
        if (!first) continue;
        size_t m = 0;
        double bias = 0;
        for (size_t i = 0; i < n; i++) {
            if (strcmp(b[i].row->source, b[s].row->source) != 0) continue;
            double meas = b[i].row->measured_gib;
            x[m] = ape(b[i].lathe, meas);
            y[m] = ape(b[i].loso, meas);
            z[m] = ape(b[i].seed, meas);
            bias += (b[i].lathe - meas) / meas * 100.0;
            m++;
        }
        est_metrics ml, mo, ms;
        est_metrics_of(x, m, &ml);
        est_metrics_of(y, m, &mo);
        est_metrics_of(z, m, &ms);
        printf("  %-46.46s %5zu | %6.1f %7.1f %+6.1f%% %6.0f%% | %5.2f %6.1f%% | %6.1f\n", b[s].row->source, m, ml.mape,
               ml.median_ape, bias / (double)m, ml.within10 * 100, b[s].fw_loso, mo.mape, ms.mape);
    }
    free(x);
    free(y);
    free(z);
}

static void print_row(const est_row *r, const bench_row *b)
{
    const model_shape *m = &r->shape;
    if (!b) {
        printf("%5d %-34.34s skipped: %s\n", r->id, r->model, r->skip_reason);
        return;
    }
    sb t;
    sb_init(&t);
    if (r->in.method != METHOD_FULL) {
        model_targets_format(m, r->in.targets, &t);
        sb_printf(&t, " r%d", r->in.rank);
    }
    printf("%5d %-34.34s %-9s %-5s %-6s %-22.22s b%-2d s%-5d %s %s %-8s %-6s %dx%-6s %-9s%s | %7.2f %7.2f %7.2f | "
           "%+6.1f%% %+7.1f%%  (%s)\n",
           r->id, r->model, est_stack_name(r->in.stack), spec_method_name(r->in.method),
           r->in.quant == QUANT_NONE ? "" : spec_quant_name(r->in.quant), sb_str(&t), r->in.batch,
           r->in.seq, r->in.grad_ckpt ? "gc" : "--", r->in.flash_attn ? "fa" : "--",
           spec_optimizer_name(r->in.optimizer), spec_precision_name(r->in.precision), r->in.gpus,
           r->in.pipeline_stages > 1 ? "pipe" : spec_strategy_name(r->in.strategy), r->memory_kind,
           r->in.seq_sd > 0 ? "~" : " ", r->measured_gib, b->lathe, b->seed,
           (b->lathe - r->measured_gib) / r->measured_gib * 100, (b->seed - r->measured_gib) / r->measured_gib * 100,
           est_phase_name(b->phase));
    sb_free(&t);
}

/* Leave one source out: framework_gib fitted on the other sources' rows. */
static void cross_validate(bench_row *b, size_t n)
{
    double *peak = xmalloc((n + 1) * sizeof *peak), *meas = xmalloc((n + 1) * sizeof *meas);
    bool *use = xmalloc((n + 1) * sizeof *use);
    for (size_t i = 0; i < n; i++) {
        peak[i] = b[i].lathe;
        meas[i] = b[i].row->measured_gib;
    }
    for (size_t s = 0; s < n; s++) {
        for (size_t i = 0; i < n; i++) use[i] = strcmp(b[i].row->source, b[s].row->source) != 0;
        double fw = est_calib_fit_framework(peak, meas, use, n);
        b[s].fw_loso = fw;
        b[s].loso = b[s].lathe + fw;
    }
    free(peak);
    free(meas);
    free(use);
}

/* Time per estimate, against the seed formula measured in the same run. */
static void timing(const bench_row *b, size_t n)
{
    for (int varied = 0; varied < 2; varied++) {
        const est_row *row = NULL;
        for (size_t i = 0; i < n && !row; i++)
            if ((b[i].row->in.seq_sd > 0) == varied) row = b[i].row;
        if (!row) continue;
        int reps = varied ? 4 : 40, seed_reps = 100000;
        volatile double sink = 0;
        clock_t t0 = clock();
        for (int k = 0; k < reps; k++) {
            est_result r;
            est_estimate(&row->in, NULL, &r);
            sink += r.peak;
        }
        clock_t t1 = clock();
        for (int k = 0; k < seed_reps; k++) sink += seed_gib(row);
        clock_t t2 = clock();
        double lathe_us = (double)(t1 - t0) / CLOCKS_PER_SEC * 1e6 / reps;
        double seed_us = (double)(t2 - t1) / CLOCKS_PER_SEC * 1e6 / seed_reps;
        printf("timing, %s lengths (row %d): %.0f us per estimate; seed formula %.3f us (ratio %.0fx)\n",
               varied ? "varying" : "fixed", row->id, lathe_us, seed_us, seed_us > 0 ? lathe_us / seed_us : 0.0);
        (void)sink;
    }
}

static bool parse_args(int argc, char **argv, bench_opts *o)
{
    o->path = LATHE_SOURCE_DIR "/share/calibration/memory-calibration.jsonl";
    o->verbose = o->fit = false;
    o->seq_min = 0;
    o->seed = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-v") == 0)
            o->verbose = true;
        else if (strcmp(argv[i], "--replay-seed") == 0 && i + 1 < argc) {
            char *end;
            o->seed = strtoull(argv[++i], &end, 0);
            if (*end || o->seed == 0) {
                fprintf(stderr, "bench_estimator: --replay-seed takes a positive integer, not '%s'\n", argv[i]);
                return false;
            }
        } else if (strcmp(argv[i], "--seq-min") == 0 && i + 1 < argc) {
            char *end;
            o->seq_min = strtod(argv[++i], &end);
            if (*end || !(o->seq_min > 0)) {
                fprintf(stderr, "bench_estimator: --seq-min takes a positive number of tokens, not '%s'\n", argv[i]);
                return false;
            }
        }
        else if (strcmp(argv[i], "--fit") == 0)
            o->fit = true;
        else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: bench_estimator [FILE.jsonl] [-v] [--fit] [--seq-min N] [--replay-seed N]\n");
            return false;
        } else
            o->path = argv[i];
    }
    return true;
}

int main(int argc, char **argv)
{
    bench_opts o;
    if (!parse_args(argc, argv, &o)) return LT_EXIT_USAGE;
    est_row *rows;
    size_t n;
    diag_list d;
    diag_list_init(&d);
    if (!est_rows_load(o.path, &rows, &n, &d)) {
        diag_print_all(&d, stderr);
        diag_list_free(&d);
        est_rows_free(rows, n);
        return file_exists(o.path) ? LT_EXIT_INVALID : LT_EXIT_IO;
    }
    diag_list_free(&d);
    /* --seq-min: the rows' varying lengths from the gamma shifted by N (docs/estimator.md) */
    for (size_t i = 0; o.seq_min > 0 && i < n; i++)
        if (rows[i].usable && rows[i].in.seq_sd > 0 && !(rows[i].in.seq_min > 0) && o.seq_min < rows[i].in.seq_mean)
            rows[i].in.seq_min = o.seq_min;
    for (size_t i = 0; o.seed && i < n; i++) rows[i].in.replay_seed = o.seed;
    bench_row *b = xcalloc(n + 1, sizeof *b);
    size_t nb = 0;
    for (size_t i = 0; i < n; i++) {
        if (!rows[i].usable) continue;
        est_result r;
        est_estimate(&rows[i].in, NULL, &r);
        b[nb++] = (bench_row){&rows[i], r.peak / GIB, seed_gib(&rows[i]), 0, 0, r.peak_phase};
    }
    printf("bench_estimator: %zu usable rows of %zu in %s\n", nb, n, o.path);
    if (o.seed) printf("replays from seed %llu (--replay-seed)\n", o.seed);
    if (o.seq_min > 0) printf("varying lengths: the gamma shifted by the shortest sample, %g tokens (--seq-min)\n", o.seq_min);
    printf("constants: framework_gib %.3f (nothing fitted), CUDA context %.2f GiB, NCCL %.2f GiB\n\n",
           est_calib_default.framework_gib, est_calib_default.cuda_context_gib, est_calib_default.nccl_gib);
    if (o.verbose) {
        printf("%5s %-34s %-9s %-5s %-6s %-22s %-3s %-6s %-5s %-8s %-6s %-8s %-10s | %7s %7s %7s | %7s %8s\n",
               "id", "model", "stack", "meth", "quant", "targets", "b", "seq", "gc fa", "optim", "prec", "gpus",
               "counter", "meas", "lathe", "seed", "lathe", "seed");
        size_t k = 0;
        for (size_t i = 0; i < n; i++) print_row(&rows[i], rows[i].usable ? &b[k++] : NULL);
        printf("  (~: sample lengths vary; the replay averages several draws)\n\n");
    }
    cross_validate(b, nb);
    printf("calibration set:\n");
    print_table(b, nb, 0);
    print_sources(b, nb);
    printf("\ncross-validation, leave one source out:\n");
    print_table(b, nb, 1);
    if (o.fit) {
        double *peak = xmalloc((nb + 1) * sizeof *peak), *meas = xmalloc((nb + 1) * sizeof *meas);
        for (size_t i = 0; i < nb; i++) {
            peak[i] = b[i].lathe;
            meas[i] = b[i].row->measured_gib;
        }
        double fw = est_calib_fit_framework(peak, meas, NULL, nb);
        double *a = xmalloc((nb + 1) * sizeof *a);
        for (size_t i = 0; i < nb; i++) a[i] = ape(b[i].lathe + fw, meas[i]);
        est_metrics m;
        est_metrics_of(a, nb, &m);
        printf("\nfitted on every row: framework_gib %.3f -> MAPE %.1f%%, median %.1f%%, within 10%%: %.0f%%\n", fw,
               m.mape, m.median_ape, m.within10 * 100);
        free(peak);
        free(meas);
        free(a);
    }
    printf("\n");
    timing(b, nb);
    free(b);
    est_rows_free(rows, n);
    return 0;
}
