/* fuzz_trace.c: libFuzzer target for the simulator's trace CSV reader
 * (lib/sim/trace.c, format in docs/simulator.md). Any bytes are parsed; every
 * error must name the file and a line. The jobs that were read must satisfy
 * the reader's own promises (a non-empty id, at least one GPU, a fraction in
 * (0, 1] and below 1 only for one GPU, finite non-negative times); a trace
 * read without an error, written back as CSV, must read again without an
 * error into the same jobs and write the same text a second time (the
 * writer is a fixed point after one round). Odd rows of real traces (zero
 * or sub-second durations, duplicate ids, unsorted arrivals, censored
 * durations) are counted, with the line of the first; read again with
 * strict, each counted kind but fractional GPUs becomes errors and no job
 * is read that the lenient reading did not read; the summary of the
 * counts never fails. */
#include "base/base.h"
#include "sim/sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool same_text(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a && b && strcmp(a, b) == 0);
}

static void check_job(const sim_job *j)
{
    if (!j->id || !j->id[0] || j->gpus < 1 || j->line < 1) abort();
    if (!(j->fraction > 0 && j->fraction <= 1) || (j->fraction < 1 && j->gpus != 1)) abort();
    if (!isfinite(j->submit) || j->submit < 0 || !isfinite(j->duration) || j->duration < 0) abort();
    if (!isfinite(j->estimate) || j->estimate < 0 || !isfinite(j->checkpoint) || j->checkpoint < 0)
        abort();
}

/* Numbers went through "%.15g": equal to 15 significant digits. */
static bool close_enough(double a, double b)
{
    return fabs(a - b) <= 1e-14 * fmax(fabs(a), fabs(b));
}

static void check_same_jobs(const sim_trace *a, const sim_trace *b)
{
    if (a->n != b->n) abort();
    for (size_t i = 0; i < a->n; i++) {
        const sim_job *x = &a->jobs[i], *y = &b->jobs[i];
        if (strcmp(x->id, y->id) != 0 || x->gpus != y->gpus || x->censored != y->censored) abort();
        if (!same_text(x->gpu_type, y->gpu_type) || !same_text(x->team, y->team) ||
            !same_text(x->priority, y->priority))
            abort();
        if (!close_enough(x->submit, y->submit) || !close_enough(x->duration, y->duration) ||
            !close_enough(x->fraction, y->fraction) || !close_enough(x->checkpoint, y->checkpoint) ||
            !close_enough(x->estimate, y->estimate))
            abort();
    }
}

/* Parses text that lathe wrote: it must read without an error. */
static void reparse(const char *csv, sim_trace *t)
{
    diag_list d;
    diag_list_init(&d);
    sim_trace_init(t);
    if (sim_trace_parse("round-trip.csv", csv, strlen(csv), t, &d) != 0) {
        diag_print_all(&d, stderr);
        abort();
    }
    diag_list_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    diag_list d;
    diag_list_init(&d);
    sim_trace t;
    sim_trace_init(&t);
    size_t errors = sim_trace_parse("fuzz.csv", (const char *)data, size, &t, &d);
    if (errors != d.errors) abort();
    for (size_t i = 0; i < d.len; i++)
        if (!d.items[i].file || strcmp(d.items[i].file, "fuzz.csv") != 0) abort();
    sb out;
    sb_init(&out);
    for (size_t i = 0; i < d.len; i++) diag_format(&d.items[i], &out);
    sb_free(&out);
    diag_list_free(&d);

    for (size_t i = 0; i < t.n; i++) check_job(&t.jobs[i]);
    size_t odd = 0;
    for (int k = 0; k < SIM_N_ODD; k++) {
        if (t.odd[k] && t.odd_line[k] < 2) abort();
        if (k != SIM_ODD_FRACTIONAL) odd += t.odd[k];
    }
    sb sum;
    sb_init(&sum);
    sim_trace_summary(&t, NULL, &sum);
    if ((odd || t.odd[SIM_ODD_FRACTIONAL]) != (sum.len > 0)) abort();
    sb_free(&sum);
    {
        sim_trace s;
        sim_trace_init(&s);
        s.strict = true;
        diag_list_init(&d);
        size_t strict_errors = sim_trace_parse("fuzz.csv", (const char *)data, size, &s, &d);
        /* both stop after 50 errors, so only an unstopped lenient reading can be compared */
        if (errors == 0 && odd > 0 && strict_errors == 0) abort();
        if (errors == 0 && s.n > t.n) abort();
        for (size_t i = 0; i < s.n; i++) check_job(&s.jobs[i]);
        diag_list_free(&d);
        sim_trace_free(&s);
    }
    if (t.n > 0 && errors == 0) {
        char *csv1 = sim_trace_to_csv(&t);
        sim_trace t2;
        reparse(csv1, &t2);
        check_same_jobs(&t, &t2);
        char *csv2 = sim_trace_to_csv(&t2);
        if (strcmp(csv1, csv2) != 0) abort();
        free(csv1);
        free(csv2);
        sim_trace_free(&t2);
    }
    sim_trace_free(&t);
    return 0;
}
