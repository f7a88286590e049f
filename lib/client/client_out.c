/* client_out.c: how the client commands print: JSON as indented JSON or as
 * YAML (spec_json_to_yaml), aligned tables, times and ages, progress bars.
 */
#include "client.h"
#include "spec/spec.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

char *client_json_to_yaml(const json_t *v)
{
    return spec_json_to_yaml(v, false);
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
    return s && units_parse_time(s, out);
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
