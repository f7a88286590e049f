/* convert.c: public cluster traces in lathe's trace form: Microsoft Philly
 * 2017 (JSON, read with jansson), Alibaba Lingjun 2023 and Alibaba PAI 2023
 * openb (CSV). Columns are found by name (the names of the published files
 * and of ../shared/data/traces); jobs that asked for no GPU or never ran
 * are left out and counted; times are shifted so the first job comes at 0
 * and the jobs sorted by submit time. Formats: docs/simulator.md. */
#include "sim.h"
#include "sim_internal.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_ERRORS 50

bool sim_format_parse(const char *s, sim_format *out)
{
    static const char *const names[] = {"philly", "lingjun", "pai-openb"};
    for (int i = 0; i < 3; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = (sim_format)i;
            return true;
        }
    return false;
}

static int cmp_submit(const void *a, const void *b)
{
    const sim_job *x = a, *y = b;
    if (x->submit != y->submit) return x->submit < y->submit ? -1 : 1;
    return x->line - y->line;
}

/* Sorted by submit time, the first at 0. */
static void normalise(sim_trace *t)
{
    if (!t->n) return;
    qsort(t->jobs, t->n, sizeof *t->jobs, cmp_submit);
    double t0 = t->jobs[0].submit;
    for (size_t i = 0; i < t->n; i++) t->jobs[i].submit -= t0;
}

/* ---- CSV formats ---- */

enum { C_ID, C_SUBMIT, C_SCHED, C_END, C_DURATION, C_GPUS, C_MILLI, C_CENSORED, C_STATUS, N_C };

/* Accepted names of each column, "|"-separated. */
static const char *const aliases[N_C] = {
    "job_id|name|job_name", "submit_time_s|submit_time|creation_time", "scheduled_time_s|scheduled_time",
    "end_time_s|end_time|deletion_time", "duration_s|duration", "num_gpus|num_gpu|gpu_num", "gpu_milli",
    "duration_censored", "status|pod_phase"};

static bool alias_of(const char *h, int k)
{
    const char *a = aliases[k];
    size_t n = strlen(h);
    while (*a) {
        size_t m = strcspn(a, "|");
        if (m == n && strncmp(a, h, n) == 0) return true;
        a += m + (a[m] == '|');
    }
    return false;
}

typedef struct cctx {
    const char *name;
    diag_list *d;
    size_t errors;
    int line;
} cctx;

static bool num(cctx *c, const field *f, int k, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(f->text, &end);
    if (!f->text[0] || *end || errno == ERANGE || !isfinite(v) || v < 0) {
        c->errors++;
        diag *x = diag_add(c->d, DIAG_ERROR, c->name, c->line, f->col, aliases[k], "not a number >= 0");
        diag_set_found(x, "\"%s\"", f->text);
        return false;
    }
    *out = v;
    return true;
}

/* One row; false when it is left out (counted in st, or an error). */
static bool csv_job(cctx *c, sim_format fmt, const row *r, const int *ix, sim_job *j, sim_convert_stats *st)
{
    const field *f[N_C];
    for (int k = 0; k < N_C; k++) f[k] = ix[k] >= 0 ? &r->f[ix[k]] : NULL;
    size_t before = c->errors;
    memset(j, 0, sizeof *j);
    j->fraction = 1;
    j->line = c->line;
    double gpus = 0, v;
    num(c, f[C_GPUS], C_GPUS, &gpus);
    num(c, f[C_SUBMIT], C_SUBMIT, &j->submit);
    if (c->errors != before) return false;
    if (gpus > 1e6 || (gpus >= 1 && gpus != floor(gpus))) {
        c->errors++;
        diag *x = diag_add(c->d, DIAG_ERROR, c->name, c->line, f[C_GPUS]->col, aliases[C_GPUS],
                           "not a number of GPUs");
        diag_set_found(x, "\"%s\"", f[C_GPUS]->text);
        diag_set_expected(x, "a whole number from 0 to 1,000,000, or a part of one GPU below 1");
        return false;
    }
    if (gpus <= 0) {
        st->no_gpu++;
        return false;
    }
    j->gpus = gpus < 1 ? 1 : (int)gpus;
    if (gpus < 1) j->fraction = gpus;
    if (fmt == SIM_FROM_PAI_OPENB && f[C_MILLI] && f[C_MILLI]->text[0] && num(c, f[C_MILLI], C_MILLI, &v) &&
        j->gpus == 1 && v > 0 && v < 1000)
        j->fraction = v / 1000;
    const char *status = f[C_STATUS] ? f[C_STATUS]->text : "";
    bool running = strcmp(status, "Running") == 0 || strcmp(status, "Pending") == 0;
    if (f[C_DURATION] && f[C_DURATION]->text[0]) {
        num(c, f[C_DURATION], C_DURATION, &j->duration);
    } else if (f[C_SCHED] && f[C_SCHED]->text[0] && f[C_END] && f[C_END]->text[0]) {
        double s = 0, e = 0;
        if (num(c, f[C_SCHED], C_SCHED, &s) && num(c, f[C_END], C_END, &e)) j->duration = e > s ? e - s : 0;
    } else {
        st->never_ran++;
        return false;
    }
    if (fmt == SIM_FROM_PAI_OPENB && f[C_SCHED] && !f[C_SCHED]->text[0]) { /* never scheduled */
        st->never_ran++;
        return false;
    }
    if (f[C_CENSORED] && f[C_CENSORED]->text[0])
        j->censored = strcmp(f[C_CENSORED]->text, "1") == 0 || strcmp(f[C_CENSORED]->text, "true") == 0;
    else
        j->censored = running;
    if (c->errors != before) return false;
    j->id = xstrdup(f[C_ID]->text[0] ? f[C_ID]->text : "?");
    return true;
}

static size_t convert_csv(sim_format fmt, cctx *c, const char *text, size_t len, sim_trace *out,
                          sim_convert_stats *st)
{
    row r = {0};
    sb tmp;
    sb_init(&tmp);
    int ix[N_C];
    bool header = false;
    size_t pos = 0;
    while (pos < len && c->errors < MAX_ERRORS) {
        size_t end = pos;
        while (end < len && text[end] != '\n') end++;
        size_t l = end - pos;
        if (l && text[pos + l - 1] == '\r') l--;
        const char *line = text + pos;
        pos = end + 1;
        c->line++;
        if (!l || memchr(line, '\0', l)) continue;
        const char *bad = sim_csv_split(line, l, &r, &tmp);
        if (bad) {
            c->errors++;
            diag_add(c->d, DIAG_ERROR, c->name, c->line, 0, NULL, bad);
            continue;
        }
        if (!header) {
            header = true;
            for (int k = 0; k < N_C; k++) {
                ix[k] = -1;
                for (int i = 0; i < r.n; i++)
                    if (alias_of(r.f[i].text, k)) ix[k] = i;
            }
            static const int need[] = {C_ID, C_SUBMIT, C_GPUS};
            for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
                if (ix[need[i]] < 0) {
                    c->errors++;
                    diag *x = diag_add(c->d, DIAG_ERROR, c->name, 1, 1, aliases[need[i]], "required column missing");
                    diag_set_suggestion(x, "a header naming one of: %s", aliases[need[i]]);
                }
            if (ix[C_DURATION] < 0 && (ix[C_SCHED] < 0 || ix[C_END] < 0)) {
                c->errors++;
                diag *x = diag_add(c->d, DIAG_ERROR, c->name, 1, 1, "duration_s", "no duration");
                diag_set_suggestion(x, "a duration_s column, or scheduled_time and deletion_time");
            }
            if (c->errors) break;
            continue;
        }
        if (r.n < 1) continue;
        st->rows++;
        bool ok = true;
        for (int k = 0; k < N_C && ok; k++)
            if (ix[k] >= r.n) {
                c->errors++;
                diag_add(c->d, DIAG_ERROR, c->name, c->line, 0, NULL, "fewer fields than the header");
                ok = false;
            }
        sim_job j;
        if (ok && csv_job(c, fmt, &r, ix, &j, st)) sim_trace_push(out, &j);
    }
    if (!header) {
        c->errors++;
        diag_add(c->d, DIAG_ERROR, c->name, 1, 0, NULL, "the file is empty");
    }
    sim_row_free(&r);
    sb_free(&tmp);
    return c->errors;
}

/* ---- Philly (JSON) ---- */

/* "2017-10-03 04:43:57" as seconds (UTC); false for "None" or anything else. */
static bool philly_time(json_t *v, double *out)
{
    const char *s = json_string_value(v);
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    int used = 0;
    if (!s || sscanf(s, "%d-%d-%d %d:%d:%d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                     &tm.tm_sec, &used) != 6 || s[used])
        return false;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    *out = (double)timegm(&tm);
    return true;
}

static size_t convert_philly(cctx *c, const char *text, size_t len, sim_trace *out, sim_convert_stats *st)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    if (!json_is_array(root)) {
        c->errors++;
        diag *x = diag_add(c->d, DIAG_ERROR, c->name, root ? 1 : je.line, root ? 0 : je.column, NULL,
                           root ? "not a JSON array of jobs" : je.text);
        diag_set_suggestion(x, "give Philly's cluster_job_log file");
        json_decref(root);
        return c->errors;
    }
    size_t i;
    json_t *job;
    json_array_foreach(root, i, job) {
        st->rows++;
        sim_job j;
        memset(&j, 0, sizeof j);
        j.fraction = 1;
        j.line = (int)(i + 1); /* the job's place in the array */
        json_t *atts = json_object_get(job, "attempts");
        const char *id = json_string_value(json_object_get(job, "jobid"));
        if (!json_is_object(job) || !id || !philly_time(json_object_get(job, "submitted_time"), &j.submit)) {
            if (c->errors++ < MAX_ERRORS) {
                diag *x = diag_add(c->d, DIAG_ERROR, c->name, 0, 0, "jobid", "a job without jobid or submitted_time");
                diag_set_found(x, "job %zu of the array", i + 1);
            }
            continue;
        }
        size_t na = json_array_size(atts), k;
        json_t *a, *last = na ? json_array_get(atts, na - 1) : NULL;
        bool ended = true;
        json_array_foreach(atts, k, a) {
            double s, e;
            if (philly_time(json_object_get(a, "start_time"), &s) && philly_time(json_object_get(a, "end_time"), &e))
                j.duration += e > s ? e - s : 0;
            else if (k == na - 1)
                ended = false;
        }
        json_t *det, *detail = json_object_get(last, "detail");
        size_t ngpus = 0;
        json_array_foreach(detail, k, det) ngpus += json_array_size(json_object_get(det, "gpus"));
        j.gpus = ngpus > 2000000 ? 2000000 : (int)ngpus;
        if (!last || (!ended && j.duration == 0)) {
            st->never_ran++;
            continue;
        }
        if (j.gpus < 1) {
            st->no_gpu++;
            continue;
        }
        if (j.gpus > 1000000) {
            if (c->errors++ < MAX_ERRORS) {
                diag *x = diag_add(c->d, DIAG_ERROR, c->name, 0, 0, "detail", "more than 1,000,000 GPUs");
                diag_set_found(x, "job %zu of the array (%s)", i + 1, id);
            }
            continue;
        }
        j.censored = !ended;
        j.id = xstrdup(id);
        const char *vc = json_string_value(json_object_get(job, "vc"));
        j.team = vc && vc[0] ? xstrdup(vc) : NULL;
        sim_trace_push(out, &j);
    }
    json_decref(root);
    return c->errors;
}

size_t sim_convert(sim_format f, const char *name, const char *text, size_t len, sim_trace *out,
                   sim_convert_stats *st, diag_list *d)
{
    cctx c = {name, d, 0, 0};
    memset(st, 0, sizeof *st);
    if (!out->path) out->path = xstrdup(name);
    size_t e = f == SIM_FROM_PHILLY ? convert_philly(&c, text, len, out, st)
                                    : convert_csv(f, &c, text, len, out, st);
    normalise(out);
    st->kept = out->n;
    for (size_t i = 0; i < out->n; i++) st->censored += out->jobs[i].censored;
    return e;
}

/* ---- teams from real quotas ---- */

size_t sim_quota_parse(const char *name, const char *text, size_t len, char ***teams, double **gpus, int *n,
                       diag_list *d)
{
    cctx c = {name, d, 0, 0};
    row r = {0};
    sb tmp;
    sb_init(&tmp);
    int cols = 0, days = 0;
    char **names = NULL;
    double *sum = NULL;
    size_t pos = 0;
    while (pos < len && c.errors < MAX_ERRORS) {
        size_t end = pos;
        while (end < len && text[end] != '\n') end++;
        size_t l = end - pos;
        if (l && text[pos + l - 1] == '\r') l--;
        const char *line = text + pos;
        pos = end + 1;
        c.line++;
        if (!l || memchr(line, '\0', l) || sim_csv_split(line, l, &r, &tmp)) continue;
        if (!names) {
            cols = r.n;
            if (cols < 2 || cols > 4096 || strcmp(r.f[0].text, "date") != 0) {
                c.errors++;
                diag *x = diag_add(d, DIAG_ERROR, name, 1, 1, NULL, "not a quota table");
                diag_set_expected(x, "a header date,<team>...[,total]");
                break;
            }
            names = xcalloc((size_t)cols, sizeof *names);
            sum = xcalloc((size_t)cols, sizeof *sum);
            for (int i = 1; i < cols; i++) {
                names[i] = xstrdup(r.f[i].text);
                if (!names[i][0]) {
                    c.errors++;
                    diag *x = diag_add(d, DIAG_ERROR, name, 1, r.f[i].col, NULL, "a column without a team name");
                    diag_set_suggestion(x, "name every column after date");
                }
            }
            continue;
        }
        if (r.n != cols) {
            c.errors++;
            diag *x = diag_add(d, DIAG_ERROR, name, c.line, 0, NULL, "wrong number of fields");
            diag_set_expected(x, "%d, as in the header", cols);
            continue;
        }
        bool ok = true;
        double v[4096];
        for (int i = 1; i < cols && ok; i++) {
            char *e;
            v[i] = strtod(r.f[i].text, &e);
            if (!r.f[i].text[0] || *e || !(v[i] >= 0) || !isfinite(v[i])) {
                c.errors++;
                diag *x = diag_add(d, DIAG_ERROR, name, c.line, r.f[i].col, names[i], "not a number of GPUs");
                diag_set_found(x, "\"%s\"", r.f[i].text);
                ok = false;
            }
        }
        if (!ok) continue;
        for (int i = 1; i < cols; i++) sum[i] += v[i];
        days++;
    }
    *teams = NULL;
    *gpus = NULL;
    *n = 0;
    if (names && !days && !c.errors) {
        c.errors++;
        diag_add(d, DIAG_ERROR, name, c.line, 0, NULL, "no day in the quota table");
    }
    for (int i = 1; i < cols && !c.errors; i++) {
        if (strcmp(names[i], "total") == 0 || sum[i] <= 0) continue;
        /* a Cluster's team names are DNS-1123 labels: lowercase, "vcEwI" becomes "vcewi" */
        char *low = xstrdup(names[i]);
        for (char *p = low; *p; p++) *p = (*p >= 'A' && *p <= 'Z') ? (char)(*p - 'A' + 'a') : *p;
        for (int k = 0; k < *n; k++)
            if (strcmp((*teams)[k], low) == 0) {
                c.errors++;
                diag *x = diag_add(d, DIAG_ERROR, name, 1, 0, names[i], "two teams with one lowercase name");
                diag_set_found(x, "\"%s\"", low);
                diag_set_suggestion(x, "rename one of them in the header");
            }
        *teams = xrealloc(*teams, (size_t)(*n + 1) * sizeof **teams);
        *gpus = xrealloc(*gpus, (size_t)(*n + 1) * sizeof **gpus);
        (*teams)[*n] = low;
        (*gpus)[*n] = sum[i] / days;
        (*n)++;
    }
    if (!names && !c.errors) {
        c.errors++;
        diag_add(d, DIAG_ERROR, name, 1, 0, NULL, "the quota table is empty");
    }
    if (c.errors) { /* nothing from a table with errors */
        for (int i = 0; i < *n; i++) free((*teams)[i]);
        free(*teams);
        free(*gpus);
        *teams = NULL;
        *gpus = NULL;
        *n = 0;
    }
    for (int i = 1; i < cols; i++) free(names ? names[i] : NULL);
    free(names);
    free(sum);
    sim_row_free(&r);
    sb_free(&tmp);
    return c.errors;
}

void sim_assign_teams(sim_trace *t, char *const *teams, const double *weights, int n, uint64_t seed)
{
    double total = 0;
    for (int i = 0; i < n; i++) total += weights[i];
    if (n <= 0 || total <= 0) return;
    sim_rng r;
    sim_rng_seed(&r, seed);
    for (size_t k = 0; k < t->n; k++) {
        double u = sim_rng_uniform(&r) * total, acc = 0;
        int pick = n - 1;
        for (int i = 0; i < n; i++) {
            acc += weights[i];
            if (u < acc) {
                pick = i;
                break;
            }
        }
        free(t->jobs[k].team);
        t->jobs[k].team = xstrdup(teams[pick]);
    }
}
