/* client_out.c: how the client commands print: JSON as indented JSON or as
 * YAML (libyaml's emitter), aligned tables, times and ages, progress bars.
 */
#include "client.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <yaml.h>

/* ---- JSON accessors ---- */

const char *client_str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

double client_num(const json_t *o, const char *key, double fallback)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : fallback;
}

long long client_int(const json_t *o, const char *key, long long fallback)
{
    const json_t *v = json_object_get(o, key);
    if (json_is_integer(v)) return json_integer_value(v);
    if (json_is_real(v)) return (long long)json_real_value(v);
    return fallback;
}

/* ---- YAML ---- */

typedef struct yout {
    yaml_emitter_t em;
    sb text;
    bool failed;
} yout;

static int yout_write(void *data, unsigned char *buf, size_t size)
{
    sb_putn(&((yout *)data)->text, (const char *)buf, size);
    return 1;
}

static void yemit(yout *y, yaml_event_t *ev)
{
    if (!y->failed && !yaml_emitter_emit(&y->em, ev)) y->failed = true;
}

/* True when a YAML reader would take s as something other than a string
 * (a number, a boolean, null) or could not read it plain. */
static bool needs_quotes(const char *s)
{
    static const char *const words[] = {"true", "false", "yes", "no", "on", "off", "null", "~", "y", "n"};
    if (!*s) return true;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (str_ieq(s, words[i])) return true;
    char *end;
    strtod(s, &end);
    if (*end == 0) return true;
    return strchr("-?:,[]{}#&*!|>'\"%@` ", s[0]) != NULL || strstr(s, ": ") || strstr(s, " #") ||
           s[strlen(s) - 1] == ' ' || s[strlen(s) - 1] == ':';
}

static void yscalar(yout *y, const char *v, bool plain)
{
    yaml_event_t ev;
    yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)v, (int)strlen(v), 1, 1,
                                 plain ? YAML_PLAIN_SCALAR_STYLE : YAML_DOUBLE_QUOTED_SCALAR_STYLE);
    yemit(y, &ev);
}

/* The shortest text of d that reads back as d. */
static void number_text(char *buf, size_t n, double d)
{
    if (d == floor(d) && fabs(d) < 1e15) {
        snprintf(buf, n, "%.1f", d);
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, n, "%.*g", p, d);
        if (strtod(buf, NULL) == d) return;
    }
}

static void yvalue(yout *y, const json_t *v);

static void ymapping(yout *y, const json_t *v)
{
    yaml_event_t ev;
    yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE);
    yemit(y, &ev);
    const char *k;
    const json_t *x;
    json_object_foreach((json_t *)v, k, x) {
        yscalar(y, k, !needs_quotes(k));
        yvalue(y, x);
    }
    yaml_mapping_end_event_initialize(&ev);
    yemit(y, &ev);
}

static void ysequence(yout *y, const json_t *v)
{
    yaml_event_t ev;
    yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
                                         json_array_size(v) ? YAML_BLOCK_SEQUENCE_STYLE
                                                            : YAML_FLOW_SEQUENCE_STYLE);
    yemit(y, &ev);
    size_t i;
    const json_t *x;
    json_array_foreach(v, i, x) yvalue(y, x);
    yaml_sequence_end_event_initialize(&ev);
    yemit(y, &ev);
}

static void yvalue(yout *y, const json_t *v)
{
    char buf[64];
    switch (json_typeof(v)) {
    case JSON_OBJECT: ymapping(y, v); break;
    case JSON_ARRAY: ysequence(y, v); break;
    case JSON_STRING: {
        const char *s = json_string_value(v);
        yscalar(y, s, !needs_quotes(s));
        break;
    }
    case JSON_INTEGER:
        snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        yscalar(y, buf, true);
        break;
    case JSON_REAL: number_text(buf, sizeof buf, json_real_value(v)); yscalar(y, buf, true); break;
    case JSON_TRUE: yscalar(y, "true", true); break;
    case JSON_FALSE: yscalar(y, "false", true); break;
    case JSON_NULL: yscalar(y, "null", true); break;
    }
}

char *client_json_to_yaml(const json_t *v)
{
    yout y = {.failed = false};
    sb_init(&y.text);
    yaml_emitter_initialize(&y.em);
    yaml_emitter_set_output(&y.em, yout_write, &y);
    yaml_emitter_set_unicode(&y.em, 1);
    yaml_emitter_set_width(&y.em, 120);
    yaml_event_t ev;
    yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING);
    yemit(&y, &ev);
    yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1);
    yemit(&y, &ev);
    yvalue(&y, v);
    yaml_document_end_event_initialize(&ev, 1);
    yemit(&y, &ev);
    yaml_stream_end_event_initialize(&ev);
    yemit(&y, &ev);
    yaml_emitter_flush(&y.em);
    yaml_emitter_delete(&y.em);
    if (y.failed) {
        sb_free(&y.text);
        return xstrdup("# (this value could not be written as YAML)\n");
    }
    return sb_take(&y.text);
}

void client_print_json(const json_t *v, FILE *f)
{
    char *s = json_dumps(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
    fprintf(f, "%s\n", s ? s : "null");
    free(s);
}

void client_print_yaml(const json_t *v, FILE *f)
{
    char *s = client_json_to_yaml(v);
    fputs(s, f);
    free(s);
}

/* ---- times ---- */

double client_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

bool client_parse_time(const char *s, double *out)
{
    if (!s) return false;
    struct tm tm = {0};
    int used = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
               &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &used) != 6 || used != 19)
        return false;
    const char *p = s + used;
    double frac = 0;
    if (*p == '.') {
        char *end;
        frac = strtod(p, &end);
        p = end;
    }
    int off = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh, om, n = 0;
        if (sscanf(p + 1, "%2d:%2d%n", &oh, &om, &n) != 2 || n != 5) return false;
        off = (oh * 60 + om) * 60 * (*p == '-' ? -1 : 1);
        p += 6;
    } else {
        return false;
    }
    if (*p) return false;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    time_t t = timegm(&tm);
    if (t == (time_t)-1) return false;
    *out = (double)t - off + frac;
    return true;
}

void client_format_age(char *out, size_t outsz, double t, double now)
{
    if (t <= 0) {
        snprintf(out, outsz, "-");
        return;
    }
    double d = now - t;
    if (d < 0) d = 0;
    if (d < 60) snprintf(out, outsz, "%.0fs", floor(d));
    else if (d < 3600) snprintf(out, outsz, "%.0fm%s", floor(d / 60), "");
    else if (d < 86400) snprintf(out, outsz, "%.0fh%.0fm", floor(d / 3600), floor(fmod(d, 3600) / 60));
    else snprintf(out, outsz, "%.0fd", floor(d / 86400));
}

void client_format_money(char *out, size_t outsz, double v)
{
    snprintf(out, outsz, fabs(v) >= 1 || v == 0 ? "%.2f" : "%.4f", v);
}

/* ---- tables ---- */

void client_table_init(client_table *t, size_t ncols, ...)
{
    memset(t, 0, sizeof *t);
    t->ncols = ncols;
    t->cap = 16;
    t->cells = xmalloc(t->cap * ncols * sizeof *t->cells);
    va_list ap;
    va_start(ap, ncols);
    for (size_t i = 0; i < ncols; i++) t->cells[i] = xstrdup(va_arg(ap, const char *));
    va_end(ap);
    t->nrows = 1;
}

void client_table_row(client_table *t, ...)
{
    if (t->nrows == t->cap) {
        t->cap *= 2;
        t->cells = xrealloc(t->cells, t->cap * t->ncols * sizeof *t->cells);
    }
    va_list ap;
    va_start(ap, t);
    for (size_t i = 0; i < t->ncols; i++) {
        const char *s = va_arg(ap, const char *);
        t->cells[t->nrows * t->ncols + i] = xstrdup(s && *s ? s : "-");
    }
    va_end(ap);
    t->nrows++;
}

void client_table_print(const client_table *t, FILE *f)
{
    size_t *w = xcalloc(t->ncols, sizeof *w);
    for (size_t r = 0; r < t->nrows; r++)
        for (size_t c = 0; c < t->ncols; c++) {
            size_t n = strlen(t->cells[r * t->ncols + c]);
            if (n > w[c]) w[c] = n;
        }
    for (size_t r = 0; r < t->nrows; r++) {
        for (size_t c = 0; c < t->ncols; c++) {
            const char *s = t->cells[r * t->ncols + c];
            if (c + 1 == t->ncols) fprintf(f, "%s", s);
            else fprintf(f, "%-*s   ", (int)w[c], s);
        }
        fputc('\n', f);
    }
    free(w);
}

void client_table_free(client_table *t)
{
    for (size_t i = 0; i < t->nrows * t->ncols; i++) free(t->cells[i]);
    free(t->cells);
    memset(t, 0, sizeof *t);
}

/* ---- progress ---- */

void client_progress_bar(char *out, size_t outsz, double frac, int width)
{
    if (outsz == 0) return;
    if (!(frac >= 0)) frac = 0;
    if (frac > 1) frac = 1;
    if (width > (int)outsz - 1) width = (int)outsz - 1;
    int full = (int)lround(frac * width);
    for (int i = 0; i < width; i++) out[i] = i < full ? '#' : '-';
    out[width] = 0;
}

void client_progress_text(char *out, size_t outsz, const json_t *job)
{
    const json_t *p = json_object_get(job, "progress");
    long long step = client_int(p, "step", -1);
    if (!json_is_object(p) || step < 0) {
        snprintf(out, outsz, "%s", "");
        return;
    }
    sb s;
    sb_init(&s);
    long long total = client_int(p, "total_steps", -1);
    if (total > 0) sb_printf(&s, "step %lld/%lld", step, total);
    else sb_printf(&s, "step %lld", step);
    double loss = client_num(p, "loss", NAN);
    if (isfinite(loss)) sb_printf(&s, "  loss %.4f", loss);
    double tps = client_num(p, "tokens_per_second", NAN);
    if (isfinite(tps)) sb_printf(&s, "  %.0f tok/s", tps);
    double eta = client_num(p, "eta_seconds", NAN);
    if (isfinite(eta) && eta >= 0) {
        char d[32];
        if (eta < 1) snprintf(d, sizeof d, "0s");
        else units_format_duration(d, sizeof d, eta);
        sb_printf(&s, "  eta %s", d);
    }
    snprintf(out, outsz, "%s", sb_str(&s));
    sb_free(&s);
}
