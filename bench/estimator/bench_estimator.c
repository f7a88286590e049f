/* bench_estimator.c: the GPU memory estimator against published
 * measurements, side by side with the seed article's formula.
 *
 *   bench_estimator [FILE.jsonl] [-v] [--fit]
 *
 * FILE defaults to LATHE_SHARED_DIR/data/memory-calibration.jsonl; any file
 * of that schema (a held-out set) runs the same way. Rows lathe cannot use
 * are skipped (-v says why). Prints, per method and overall: rows, mean
 * absolute percentage error, median, share within +-10 % and +-20 %, for
 * lathe and the seed formula; then a leave-one-source-out cross-validation
 * (the calibrated constants refitted without each source, then scored on
 * it), and the time per estimate against the seed formula's.
 * -v prints every row; --fit prints the constants fitted on every usable
 * row (what est_calib_default holds) and the metrics they give. */
#include "plan/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct bench_opts {
    const char *path;
    bool verbose, fit;
} bench_opts;

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

static void print_metrics_line(const char *label, const double *a, const double *b, size_t n)
{
    est_metrics ml, ms;
    est_metrics_of(a, n, &ml);
    est_metrics_of(b, n, &ms);
    printf("  %-8s %5zu | %6.1f %7.1f %6.0f%% %6.0f%% | %6.1f %7.1f %6.0f%% %6.0f%%\n", label, n,
           ml.mape, ml.median_ape, ml.within10 * 100, ml.within20 * 100, ms.mape, ms.median_ape,
           ms.within10 * 100, ms.within20 * 100);
}

/* Per method and overall, lathe (constants c) against the seed formula. */
static void print_table(const est_row *rows, size_t n, const est_calib *c)
{
    static const struct {
        const char *name;
        spec_method m;
    } methods[] = {{"lora", METHOD_LORA}, {"qlora", METHOD_QLORA}, {"dora", METHOD_DORA},
                   {"full", METHOD_FULL}};
    double *a = xmalloc((n + 1) * sizeof *a), *b = xmalloc((n + 1) * sizeof *b);
    printf("  %-8s %5s | %-31s | %s\n", "", "", "lathe", "seed formula");
    printf("  %-8s %5s | %6s %7s %7s %7s | %6s %7s %7s %7s\n", "method", "rows", "MAPE", "median",
           "+-10%", "+-20%", "MAPE", "median", "+-10%", "+-20%");
    for (size_t k = 0; k <= sizeof methods / sizeof methods[0]; k++) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            if (!rows[i].usable) continue;
            if (k < 4 && rows[i].in.method != methods[k].m) continue;
            a[m] = est_row_ape(&rows[i], c);
            b[m] = ape(seed_gib(&rows[i]), rows[i].measured_gib);
            m++;
        }
        if (k < 4 && m == 0) continue;
        print_metrics_line(k < 4 ? methods[k].name : "all", a, b, m);
    }
    free(a);
    free(b);
}

static void print_row(const est_row *r, const est_calib *c)
{
    const model_shape *m = &r->shape;
    if (!r->usable) {
        printf("%5d %-34.34s skipped: %s\n", r->id, r->model, r->skip_reason);
        return;
    }
    est_result res;
    est_estimate(&r->in, c, &res);
    sb t;
    sb_init(&t);
    if (r->in.method != METHOD_FULL) {
        model_targets_format(m, r->in.targets, &t);
        sb_printf(&t, " r%d", r->in.rank);
    }
    double seed = seed_gib(r), est = res.peak / GIB;
    printf("%5d %-34.34s %-9s %-5s %-6s %-22.22s b%-2d s%-5d %s %s %-8s %-6s %dx%-6s %-9s | %7.2f %7.2f %7.2f | "
           "%+6.1f%% %+7.1f%%  (%s)\n",
           r->id, r->model, est_stack_name(r->in.stack), spec_method_name(r->in.method),
           r->in.quant == QUANT_NONE ? "" : spec_quant_name(r->in.quant), sb_str(&t), r->in.batch,
           r->in.seq, r->in.grad_ckpt ? "gc" : "--", r->in.flash_attn ? "fa" : "--",
           spec_optimizer_name(r->in.optimizer), spec_precision_name(r->in.precision), r->in.gpus,
           r->in.pipeline_stages > 1 ? "pipe" : spec_strategy_name(r->in.strategy), r->memory_kind,
           r->measured_gib, est, seed, (est - r->measured_gib) / r->measured_gib * 100,
           (seed - r->measured_gib) / r->measured_gib * 100, est_phase_name(res.peak_phase));
    sb_free(&t);
}

/* Leave one source out: refit without it, score it. */
static void cross_validate(const est_row *rows, size_t n, const est_calib *start)
{
    printf("\ncross-validation, leave one source out (constants refitted on the other sources):\n");
    printf("  %-46s %5s  %-24s %8s %8s\n", "held-out source", "rows", "framework/base/slack",
           "MAPE", "in-fit");
    bool *use = xcalloc(n, sizeof *use);
    double *all = xmalloc((n + 1) * sizeof *all);
    size_t n_all = 0;
    for (size_t s = 0; s < n; s++) {
        if (!rows[s].usable) continue;
        bool first = true;
        for (size_t j = 0; j < s; j++)
            if (rows[j].usable && strcmp(rows[j].source, rows[s].source) == 0) first = false;
        if (!first) continue;
        for (size_t i = 0; i < n; i++) use[i] = strcmp(rows[i].source, rows[s].source) != 0;
        est_calib fitted;
        est_calib_fit(rows, n, use, start, &fitted);
        double sum = 0, sum_in = 0;
        size_t k = 0, k_in = 0;
        for (size_t i = 0; i < n; i++) {
            if (!rows[i].usable) continue;
            double e = est_row_ape(&rows[i], &fitted);
            if (use[i]) {
                sum_in += e;
                k_in++;
            } else {
                sum += e;
                all[n_all++] = e;
                k++;
            }
        }
        char fit[64];
        snprintf(fit, sizeof fit, "%.2f / %.2f GiB / %.2f", fitted.framework_gib, fitted.reserved_base_gib,
                 fitted.reserved_frac);
        printf("  %-46.46s %5zu  %-24s %7.1f%% %7.1f%%\n", rows[s].source, k, fit, sum / (double)k,
               k_in ? sum_in / (double)k_in : 0.0);
    }
    est_metrics m;
    est_metrics_of(all, n_all, &m);
    printf("  %-46s %5zu  %-24s %7.1f%%   (median %.1f%%, within 10%%: %.0f%%, within 20%%: %.0f%%)\n",
           "all held-out predictions", m.n, "", m.mape, m.median_ape, m.within10 * 100,
           m.within20 * 100);
    free(use);
    free(all);
}

/* Time per estimate, against the seed formula measured in the same run. */
static void timing(const est_row *rows, size_t n)
{
    const int reps = 200;
    volatile double sink = 0;
    size_t count = 0;
    clock_t t0 = clock();
    for (int k = 0; k < reps; k++)
        for (size_t i = 0; i < n; i++)
            if (rows[i].usable) {
                est_result r;
                est_estimate(&rows[i].in, NULL, &r);
                sink += r.peak;
                count++;
            }
    clock_t t1 = clock();
    for (int k = 0; k < reps; k++)
        for (size_t i = 0; i < n; i++)
            if (rows[i].usable) sink += seed_gib(&rows[i]);
    clock_t t2 = clock();
    double lathe_us = (double)(t1 - t0) / CLOCKS_PER_SEC * 1e6 / (double)(count ? count : 1);
    double seed_us = (double)(t2 - t1) / CLOCKS_PER_SEC * 1e6 / (double)(count ? count : 1);
    printf("\ntiming: %zu estimates, %.2f us each; seed formula %.3f us each (ratio %.1fx)\n", count,
           lathe_us, seed_us, seed_us > 0 ? lathe_us / seed_us : 0.0);
    (void)sink;
}

static bool parse_args(int argc, char **argv, bench_opts *o)
{
    o->path = LATHE_SHARED_DIR "/data/memory-calibration.jsonl";
    o->verbose = o->fit = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-v") == 0)
            o->verbose = true;
        else if (strcmp(argv[i], "--fit") == 0)
            o->fit = true;
        else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: bench_estimator [FILE.jsonl] [-v] [--fit]\n");
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
    est_calib c = est_calib_default;
    size_t usable = 0;
    for (size_t i = 0; i < n; i++) usable += rows[i].usable;
    printf("bench_estimator: %zu usable rows of %zu in %s\n", usable, n, o.path);
    if (o.fit) {
        est_calib_fit(rows, n, NULL, &est_calib_default, &c);
        printf("fitted on every usable row: framework_gib %.3f, reserved_base_gib %.3f, reserved_frac %.2f\n",
               c.framework_gib, c.reserved_base_gib, c.reserved_frac);
    }
    printf("constants: framework %.3f GiB, allocator slack %.3f GiB + %.2f of the loss buffers and "
           "weight copies\n\n",
           c.framework_gib, c.reserved_base_gib, c.reserved_frac);
    if (o.verbose) {
        printf("%5s %-34s %-9s %-5s %-6s %-22s %-3s %-6s %-5s %-8s %-6s %-8s %-9s | %7s %7s %7s | %7s %8s\n",
               "id", "model", "stack", "meth", "quant", "targets", "b", "seq", "gc fa", "optim", "prec", "gpus",
               "counter", "meas", "lathe", "seed", "lathe", "seed");
        for (size_t i = 0; i < n; i++) print_row(&rows[i], &c);
        printf("\n");
    }
    print_table(rows, n, &c);
    cross_validate(rows, n, &est_calib_default);
    timing(rows, n);
    est_rows_free(rows, n);
    return 0;
}
