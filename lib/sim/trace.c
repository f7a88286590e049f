/* trace.c: the trace CSV: parsing with clear errors (file:line, column,
 * what is wrong, the fix) and writing. The format is in docs/simulator.md.
 * CSV is simple enough to read by hand here: one header line, one job per
 * line, fields separated by commas, double quotes around a field that holds
 * a comma ("" for a quote inside). */
#include "sim.h"
#include "sim_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ERRORS 50

enum {
    COL_ID, COL_SUBMIT, COL_DURATION, COL_GPUS, COL_TYPE, COL_TEAM, COL_PRIORITY, COL_FRACTION,
    COL_CHECKPOINT, COL_ESTIMATE, COL_MILLI, COL_CENSORED, N_COLS
};

static const char *const col_names[N_COLS] = {
    "job_id", "submit_time_s", "duration_s", "num_gpus", "gpu_type", "team", "priority",
    "gpu_fraction", "checkpoint_interval_s", "estimate_s", "gpu_milli", "duration_censored"};

static const char *const odd_names[SIM_N_ODD] = {
    "zero duration", "very short duration", "duplicate job id", "unsorted arrival",
    "censored duration", "fractional GPU"};

const char *sim_odd_name(sim_odd k)
{
    return (unsigned)k < SIM_N_ODD ? odd_names[k] : "?";
}

void sim_trace_init(sim_trace *t)
{
    memset(t, 0, sizeof *t);
}

static void job_free(sim_job *j)
{
    free(j->id);
    free(j->gpu_type);
    free(j->team);
    free(j->priority);
}

void sim_trace_free(sim_trace *t)
{
    for (size_t i = 0; i < t->n; i++) job_free(&t->jobs[i]);
    free(t->jobs);
    free(t->path);
    memset(t, 0, sizeof *t);
}

/* ---- splitting a line ---- */

static void row_clear(row *r)
{
    for (int i = 0; i < r->n; i++) free(r->f[i].text);
    r->n = 0;
}

void sim_row_free(row *r)
{
    row_clear(r);
    free(r->f);
    r->f = NULL;
    r->cap = 0;
}

static void row_push(row *r, sb *text, int col)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 16;
        r->f = xrealloc(r->f, (size_t)r->cap * sizeof *r->f);
    }
    /* trim surrounding blanks of unquoted text */
    const char *s = sb_str(text);
    size_t len = text->len;
    while (len && (s[len - 1] == ' ' || s[len - 1] == '\t')) len--;
    while (len && (*s == ' ' || *s == '\t')) s++, len--, col++;
    r->f[r->n].text = xstrndup(s, len);
    r->f[r->n].col = col;
    r->n++;
    sb_clear(text);
}

/* Splits one line into fields. Returns NULL, or the message of a quoting error. */
const char *sim_csv_split(const char *line, size_t len, row *r, sb *tmp)
{
    row_clear(r);
    sb_clear(tmp);
    size_t i = 0;
    int start = 1;
    bool quoted = false;
    while (i <= len) {
        if (i == len || line[i] == ',') {
            row_push(r, tmp, start);
            start = (int)i + 2;
            i++;
            quoted = false;
            continue;
        }
        if (line[i] == '"' && tmp->len == 0 && !quoted) {
            quoted = true;
            i++;
            for (;;) {
                if (i >= len) return "a quoted field is not closed on its line (add the closing \")";
                if (line[i] == '"') {
                    if (i + 1 < len && line[i + 1] == '"') {
                        sb_putc(tmp, '"');
                        i += 2;
                        continue;
                    }
                    i++;
                    break;
                }
                sb_putc(tmp, line[i++]);
            }
            while (i < len && (line[i] == ' ' || line[i] == '\t')) i++;
            if (i < len && line[i] != ',') return "text after a closing quote (put the whole field in quotes)";
            continue;
        }
        sb_putc(tmp, line[i++]);
    }
    return NULL;
}

/* ---- checking values ---- */

typedef struct ctx {
    const char *name;
    diag_list *d;
    size_t errors;
    int line;
    sim_trace *t;
    double last_submit; /* of the row above (unsorted arrivals) */
} ctx;

static diag *err(ctx *c, int col, int column, const char *msg)
{
    c->errors++;
    return diag_add(c->d, DIAG_ERROR, c->name, c->line, col, column >= 0 ? col_names[column] : NULL, msg);
}

static bool parse_number(const char *s, double *out)
{
    if (!*s) return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || errno == ERANGE || !isfinite(v)) return false;
    *out = v;
    return true;
}

/* A number field: min <= v (or > min when strict), and an integer if asked. */
static bool number(ctx *c, const field *f, int column, double min, bool strict, bool integer, double *out)
{
    double v;
    if (!parse_number(f->text, &v) || v < min || (strict && v == min) || (integer && v != floor(v)) ||
        (integer && v > 1e6)) {
        diag *x = err(c, f->col, column, "not a valid value");
        diag_set_found(x, "\"%s\"", f->text);
        diag_set_expected(x, "%s %s %g", integer ? "a whole number" : "a number", strict ? ">" : ">=", min);
        if (column == COL_SUBMIT || column == COL_DURATION || column == COL_CHECKPOINT || column == COL_ESTIMATE)
            diag_set_suggestion(x, "write seconds as a plain number, e.g. 3600 for one hour");
        return false;
    }
    *out = v;
    return true;
}

/* ---- the header ---- */

static void header(ctx *c, const row *r, int *index)
{
    for (int i = 0; i < N_COLS; i++) index[i] = -1;
    for (int i = 0; i < r->n; i++) {
        const char *h = r->f[i].text;
        int k = -1;
        for (int j = 0; j < N_COLS; j++)
            if (strcmp(h, col_names[j]) == 0) k = j;
        if (k < 0) {
            const char *s = str_suggest(h, col_names, N_COLS);
            diag *x = diag_add(c->d, s ? DIAG_ERROR : DIAG_WARNING, c->name, 1, r->f[i].col, h,
                               s ? "unknown column" : "unknown column, ignored");
            if (s) {
                c->errors++;
                diag_set_suggestion(x, "did you mean '%s'?", s);
            }
            continue;
        }
        if (index[k] >= 0) {
            err(c, r->f[i].col, k, "column given twice");
            continue;
        }
        index[k] = i;
    }
    for (int k = 0; k <= COL_GPUS; k++)
        if (index[k] < 0) {
            diag *x = err(c, 1, k, "required column missing from the header");
            diag_set_expected(x, "a header line starting with job_id,submit_time_s,duration_s,num_gpus");
        }
}

/* ---- odd rows ---- */

/* Counts an odd row; with strict, an error at its field. */
static void odd(ctx *c, sim_odd kind, const field *f, int column, const char *why, const char *fix)
{
    sim_trace *t = c->t;
    if (!t->odd[kind]) t->odd_line[kind] = c->line;
    t->odd[kind]++;
    if (!t->strict || kind == SIM_ODD_FRACTIONAL) return;
    diag *x = err(c, f ? f->col : 0, column, why);
    if (f) diag_set_found(x, "\"%s\"", f->text);
    diag_set_suggestion(x, "%s; without --strict it is replayed and counted", fix);
}

static void odd_rows(ctx *c, const field *const *f, const sim_job *j)
{
    if (j->duration == 0)
        odd(c, SIM_ODD_ZERO, f[COL_DURATION], COL_DURATION, "a zero duration",
            "drop the row if the job never ran");
    else if (j->duration < SIM_SHORT_DURATION)
        odd(c, SIM_ODD_SHORT, f[COL_DURATION], COL_DURATION, "a duration below one second",
            "drop the row if the job failed at its start");
    if (j->submit < c->last_submit)
        odd(c, SIM_ODD_UNSORTED, f[COL_SUBMIT], COL_SUBMIT, "submitted before a row above it",
            "sort the rows by submit_time_s");
    else
        c->last_submit = j->submit;
    if (j->censored)
        odd(c, SIM_ODD_CENSORED, f[COL_CENSORED], COL_CENSORED, "a censored duration (a lower bound)",
            "drop the row, or replay it for the duration it had when the trace ended");
    if (j->fraction < 1) odd(c, SIM_ODD_FRACTIONAL, NULL, -1, NULL, NULL);
}

/* ---- one job ---- */

static char *opt_text(const field *f)
{
    return f && f->text[0] ? xstrdup(f->text) : NULL;
}

static bool job_row(ctx *c, const row *r, const int *index, sim_job *j)
{
    size_t before = c->errors;
    const field *f[N_COLS];
    for (int k = 0; k < N_COLS; k++) f[k] = index[k] >= 0 ? &r->f[index[k]] : NULL;
    memset(j, 0, sizeof *j);
    j->line = c->line;
    j->fraction = 1;
    if (!f[COL_ID]->text[0]) err(c, f[COL_ID]->col, COL_ID, "empty job id");
    double v;
    if (number(c, f[COL_SUBMIT], COL_SUBMIT, 0, false, false, &v)) j->submit = v;
    if (number(c, f[COL_DURATION], COL_DURATION, 0, false, false, &v)) j->duration = v;
    if (number(c, f[COL_GPUS], COL_GPUS, 1, false, true, &v)) j->gpus = (int)v;
    if (f[COL_MILLI] && f[COL_MILLI]->text[0] && number(c, f[COL_MILLI], COL_MILLI, 0, true, true, &v)) {
        if (v > 1000) {
            diag *x = err(c, f[COL_MILLI]->col, COL_MILLI, "more than one GPU in thousandths");
            diag_set_found(x, "%s", f[COL_MILLI]->text);
            diag_set_expected(x, "1 to 1000 thousandths of one GPU per GPU");
            diag_set_suggestion(x, "for several whole GPUs set num_gpus and gpu_milli 1000");
        } else if (v < 1000 && j->gpus > 1) {
            diag *x = err(c, f[COL_MILLI]->col, COL_MILLI, "a GPU fraction with more than one GPU");
            diag_set_suggestion(x, "a job may share a GPU only when num_gpus is 1");
        } else if (f[COL_FRACTION] && f[COL_FRACTION]->text[0]) {
            diag *x = err(c, f[COL_MILLI]->col, COL_MILLI, "both gpu_milli and gpu_fraction given");
            diag_set_suggestion(x, "keep one of the two columns");
        } else {
            j->fraction = v / 1000;
        }
    }
    if (f[COL_CENSORED] && f[COL_CENSORED]->text[0]) {
        const char *x = f[COL_CENSORED]->text;
        if (strcmp(x, "1") == 0 || strcmp(x, "true") == 0) {
            j->censored = true;
        } else if (strcmp(x, "0") && strcmp(x, "false")) {
            diag *e = err(c, f[COL_CENSORED]->col, COL_CENSORED, "not a valid value");
            diag_set_found(e, "\"%s\"", x);
            diag_set_expected(e, "1 (the run was cut off at the end of the trace) or 0");
        }
    }
    if (f[COL_FRACTION] && f[COL_FRACTION]->text[0]) {
        if (number(c, f[COL_FRACTION], COL_FRACTION, 0, true, false, &v)) {
            if (v > 1) {
                diag *x = err(c, f[COL_FRACTION]->col, COL_FRACTION, "a GPU fraction above 1");
                diag_set_found(x, "%s", f[COL_FRACTION]->text);
                diag_set_suggestion(x, "for several whole GPUs set num_gpus and leave gpu_fraction empty or 1");
            } else if (v < 1 && j->gpus > 1) {
                diag *x = err(c, f[COL_FRACTION]->col, COL_FRACTION, "a GPU fraction with more than one GPU");
                diag_set_suggestion(x, "a job may share a GPU only when num_gpus is 1");
            } else {
                j->fraction = v;
            }
        }
    }
    if (f[COL_CHECKPOINT] && f[COL_CHECKPOINT]->text[0] &&
        number(c, f[COL_CHECKPOINT], COL_CHECKPOINT, 0, false, false, &v))
        j->checkpoint = v;
    if (f[COL_ESTIMATE] && f[COL_ESTIMATE]->text[0] &&
        number(c, f[COL_ESTIMATE], COL_ESTIMATE, 0, true, false, &v))
        j->estimate = v;
    if (c->errors != before) return false;
    odd_rows(c, f, j);
    if (c->errors != before) return false;
    j->id = xstrdup(f[COL_ID]->text);
    j->gpu_type = opt_text(f[COL_TYPE]);
    j->team = opt_text(f[COL_TEAM]);
    j->priority = opt_text(f[COL_PRIORITY]);
    return true;
}

void sim_trace_push(sim_trace *t, const sim_job *j)
{
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 1024;
        t->jobs = xrealloc(t->jobs, t->cap * sizeof *t->jobs);
    }
    t->jobs[t->n++] = *j;
}

/* ---- duplicates ---- */

static int cmp_id(const void *a, const void *b)
{
    const sim_job *x = *(const sim_job *const *)a, *y = *(const sim_job *const *)b;
    int c = strcmp(x->id, y->id);
    return c ? c : x->line - y->line;
}

static void check_unique(ctx *c, sim_trace *t)
{
    if (t->n < 2) return;
    const sim_job **v = xmalloc(t->n * sizeof *v);
    for (size_t i = 0; i < t->n; i++) v[i] = &t->jobs[i];
    qsort(v, t->n, sizeof *v, cmp_id);
    for (size_t i = 1; i < t->n && c->errors < MAX_ERRORS; i++)
        if (strcmp(v[i]->id, v[i - 1]->id) == 0) {
            c->line = v[i]->line;
            if (!t->odd[SIM_ODD_DUPLICATE] || v[i]->line < t->odd_line[SIM_ODD_DUPLICATE])
                t->odd_line[SIM_ODD_DUPLICATE] = v[i]->line;
            t->odd[SIM_ODD_DUPLICATE]++;
            if (!t->strict) continue;
            diag *x = err(c, 1, COL_ID, "job id used twice");
            diag_set_found(x, "\"%s\", first on line %d", v[i]->id, v[i - 1]->line);
            diag_set_suggestion(x, "give every job its own id; without --strict it is replayed and counted");
        }
    free(v);
}

/* ---- the file ---- */

size_t sim_trace_parse(const char *name, const char *text, size_t len, sim_trace *t, diag_list *d)
{
    ctx c = {name, d, 0, 0, t, -INFINITY};
    if (!t->path) t->path = xstrdup(name);
    row r = {0};
    sb tmp;
    sb_init(&tmp);
    int index[N_COLS];
    int nfields = 0;
    bool have_header = false;
    size_t pos = 0;
    while (pos < len && c.errors < MAX_ERRORS) {
        size_t end = pos;
        while (end < len && text[end] != '\n') end++;
        size_t l = end - pos;
        if (l && text[pos + l - 1] == '\r') l--;
        c.line++;
        const char *line = text + pos;
        pos = end + 1;
        size_t blank = 0;
        while (blank < l && (line[blank] == ' ' || line[blank] == '\t')) blank++;
        if (blank == l || line[blank] == '#') continue;
        if (memchr(line, '\0', l)) {
            diag *x = err(&c, 0, -1, "a NUL byte: this is binary data, not CSV text");
            diag_set_suggestion(x, "check that the file is the trace (UTF-8 or ASCII text)");
            continue;
        }
        const char *bad = sim_csv_split(line, l, &r, &tmp);
        if (bad) {
            err(&c, 0, -1, bad);
            continue;
        }
        if (!have_header) {
            have_header = true;
            if (r.n > 256) {
                err(&c, 1, -1, "more than 256 columns in the header");
                break;
            }
            nfields = r.n;
            header(&c, &r, index);
            if (c.errors) break;
            continue;
        }
        if (r.n != nfields) {
            diag *x = err(&c, 0, -1, "wrong number of fields");
            diag_set_expected(x, "%d, as in the header", nfields);
            diag_set_found(x, "%d", r.n);
            diag_set_suggestion(x, "put a field in double quotes if it holds a comma");
            continue;
        }
        if (t->n >= SIM_MAX_JOBS) {
            err(&c, 0, -1, "too many jobs (the limit is 5,000,000)");
            break;
        }
        sim_job j;
        if (job_row(&c, &r, index, &j)) sim_trace_push(t, &j);
    }
    if (c.errors >= MAX_ERRORS && pos < len)
        diag_add(d, DIAG_NOTE, name, c.line, 0, NULL, "stopped after 50 errors");
    if (!have_header) {
        c.line = 1;
        diag *x = err(&c, 1, -1, "the trace is empty");
        diag_set_expected(x, "a header line job_id,submit_time_s,duration_s,num_gpus[,...] and one line per job");
    }
    check_unique(&c, t);
    row_clear(&r);
    free(r.f);
    sb_free(&tmp);
    return c.errors;
}

size_t sim_trace_load(const char *path, sim_trace *t, diag_list *d)
{
    char msg[256];
    size_t len;
    char *text = file_read_all(path, SIM_MAX_TRACE_BYTES, &len, msg, sizeof msg);
    if (!text) {
        diag *x = diag_add(d, DIAG_ERROR, path, 0, 0, NULL, msg);
        diag_set_suggestion(x, "check the path; `lathe trace-gen -o FILE` writes a synthetic trace");
        return 1;
    }
    free(t->path);
    t->path = xstrdup(path);
    size_t e = sim_trace_parse(path, text, len, t, d);
    free(text);
    return e;
}

/* ---- writing ---- */

static void put_text(sb *o, const char *s)
{
    if (!s) return;
    /* quoted when it holds what would split or end the field or line, or
     * starts with '#' (an unquoted one would read as a comment line) */
    if (!strpbrk(s, ",\"\n\r") && s[0] != '#') {
        sb_puts(o, s);
        return;
    }
    sb_putc(o, '"');
    for (; *s; s++) {
        if (*s == '"') sb_putc(o, '"');
        sb_putc(o, *s);
    }
    sb_putc(o, '"');
}

char *sim_trace_to_csv(const sim_trace *t)
{
    bool has[N_COLS] = {true, true, true, true};
    for (size_t i = 0; i < t->n; i++) {
        const sim_job *j = &t->jobs[i];
        has[COL_TYPE] |= j->gpu_type != NULL;
        has[COL_TEAM] |= j->team != NULL;
        has[COL_PRIORITY] |= j->priority != NULL;
        has[COL_FRACTION] |= j->fraction < 1;
        has[COL_CHECKPOINT] |= j->checkpoint > 0;
        has[COL_ESTIMATE] |= j->estimate > 0;
        has[COL_CENSORED] |= j->censored;
    }
    sb o;
    sb_init(&o);
    for (int k = 0, first = 1; k < N_COLS; k++)
        if (has[k]) {
            sb_printf(&o, "%s%s", first ? "" : ",", col_names[k]);
            first = 0;
        }
    sb_putc(&o, '\n');
    for (size_t i = 0; i < t->n; i++) {
        const sim_job *j = &t->jobs[i];
        put_text(&o, j->id);
        sb_printf(&o, ",%.15g,%.15g,%d", j->submit, j->duration, j->gpus);
        if (has[COL_TYPE]) sb_putc(&o, ','), put_text(&o, j->gpu_type);
        if (has[COL_TEAM]) sb_putc(&o, ','), put_text(&o, j->team);
        if (has[COL_PRIORITY]) sb_putc(&o, ','), put_text(&o, j->priority);
        if (has[COL_FRACTION]) sb_printf(&o, ",%.15g", j->fraction);
        if (has[COL_CHECKPOINT]) {
            sb_putc(&o, ',');
            if (j->checkpoint > 0) sb_printf(&o, "%.15g", j->checkpoint);
        }
        if (has[COL_ESTIMATE]) {
            sb_putc(&o, ',');
            if (j->estimate > 0) sb_printf(&o, "%.15g", j->estimate);
        }
        if (has[COL_CENSORED]) sb_puts(&o, j->censored ? ",1" : ",0");
        sb_putc(&o, '\n');
    }
    return sb_take(&o);
}
