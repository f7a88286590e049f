/* fuzz_trace_convert.c: libFuzzer target for the public-trace converters
 * and the quota table reader (lib/sim/convert.c, docs/simulator.md). The
 * first byte picks the reader (Philly JSON, Lingjun CSV, PAI openb CSV, or
 * a Helios quota table); the rest is its input. Every error names the file;
 * converted jobs are sorted by submit time from 0, have a non-empty id, at
 * least one GPU, a fraction in (0, 1] (below 1 only for one GPU) and finite
 * non-negative times; the counts add up (kept = jobs, kept + left out <=
 * read); written as CSV they read back without an error into as many jobs.
 * Quota tables give finite positive averages under distinct lowercase
 * names, and drawing teams by them is deterministic. */
#include "base/base.h"
#include "sim/sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_errors(const diag_list *d, const char *name)
{
    for (size_t i = 0; i < d->len; i++)
        if (!d->items[i].file || strcmp(d->items[i].file, name) != 0) abort();
    sb out;
    sb_init(&out);
    for (size_t i = 0; i < d->len; i++) diag_format(&d->items[i], &out);
    sb_free(&out);
}

static void quotas(const char *text, size_t len)
{
    diag_list d;
    diag_list_init(&d);
    char **names;
    double *gpus;
    int n;
    size_t errors = sim_quota_parse("q.csv", text, len, &names, &gpus, &n, &d);
    check_errors(&d, "q.csv");
    if (errors && n) abort();
    for (int i = 0; i < n; i++) {
        if (!(gpus[i] > 0) || !isfinite(gpus[i]) || !names[i][0]) abort();
        for (const char *p = names[i]; *p; p++)
            if (*p >= 'A' && *p <= 'Z') abort();
        for (int k = 0; k < i; k++)
            if (strcmp(names[i], names[k]) == 0) abort();
    }
    if (n > 0) {
        sim_trace t;
        sim_trace_init(&t);
        const char *csv = "job_id,submit_time_s,duration_s,num_gpus\na,0,1,1\nb,0,1,1\n";
        if (sim_trace_parse("t.csv", csv, strlen(csv), &t, &d)) abort();
        sim_assign_teams(&t, names, gpus, n, 7);
        char *a = xstrdup(t.jobs[0].team);
        sim_assign_teams(&t, names, gpus, n, 7);
        if (strcmp(a, t.jobs[0].team) != 0) abort();
        free(a);
        sim_trace_free(&t);
    }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    free(gpus);
    diag_list_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    if (data[0] % 4 == 3) {
        quotas(text, len);
        return 0;
    }
    sim_format f = (sim_format)(data[0] % 4);
    diag_list d;
    diag_list_init(&d);
    sim_trace t;
    sim_trace_init(&t);
    sim_convert_stats st;
    size_t errors = sim_convert(f, "in.x", text, len, &t, &st, &d);
    if (errors != d.errors) abort();
    check_errors(&d, "in.x");
    diag_list_free(&d);
    if (st.kept != t.n || st.kept + st.no_gpu + st.never_ran > st.rows || st.censored > st.kept) abort();
    for (size_t i = 0; i < t.n; i++) {
        const sim_job *j = &t.jobs[i];
        if (!j->id || !j->id[0] || j->gpus < 1) abort();
        if (!(j->fraction > 0 && j->fraction <= 1) || (j->fraction < 1 && j->gpus != 1)) abort();
        if (!isfinite(j->submit) || j->submit < 0 || !isfinite(j->duration) || j->duration < 0) abort();
        if (i > 0 && j->submit < t.jobs[i - 1].submit) abort();
    }
    if (t.n && t.jobs[0].submit != 0) abort();
    if (t.n && !errors) {
        char *csv = sim_trace_to_csv(&t);
        sim_trace u;
        sim_trace_init(&u);
        diag_list_init(&d);
        /* ids and teams come from the input as they are; the CSV quotes what needs it */
        if (sim_trace_parse("out.csv", csv, strlen(csv), &u, &d) != 0 || u.n != t.n) {
            diag_print_all(&d, stderr);
            abort();
        }
        diag_list_free(&d);
        sim_trace_free(&u);
        free(csv);
    }
    sim_trace_free(&t);
    return 0;
}
