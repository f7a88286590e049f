/* diag.c: the list of problems found in an input, each with where it is
 * (file:line:col), which field (a dotted path), what was expected, what was
 * found, and how to fix it. Every validator in lathe reports through this. */
#include "base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void diag_list_init(diag_list *d)
{
    memset(d, 0, sizeof *d);
}

static void diag_free_one(diag *x)
{
    free(x->file);
    free(x->path);
    free(x->message);
    free(x->expected);
    free(x->found);
    free(x->suggestion);
}

void diag_list_free(diag_list *d)
{
    for (size_t i = 0; i < d->len; i++) diag_free_one(&d->items[i]);
    free(d->items);
    diag_list_init(d);
}

static char *dup_or_null(const char *s)
{
    return s ? xstrdup(s) : NULL;
}

diag *diag_add(diag_list *d, diag_level level, const char *file, int line, int col,
               const char *path, const char *message)
{
    if (d->len == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 8;
        d->items = xrealloc(d->items, d->cap * sizeof *d->items);
    }
    diag *x = &d->items[d->len++];
    memset(x, 0, sizeof *x);
    x->level = level;
    x->file = dup_or_null(file);
    x->line = line;
    x->col = col;
    x->path = dup_or_null(path);
    x->message = xstrdup(message ? message : "");
    if (level == DIAG_ERROR) d->errors++;
    if (level == DIAG_WARNING) d->warnings++;
    return x;
}

static void set_fmt(char **slot, const char *fmt, va_list ap)
{
    sb s;
    sb_init(&s);
    sb_vprintf(&s, fmt, ap);
    free(*slot);
    *slot = sb_take(&s);
}

void diag_set_expected(diag *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_fmt(&x->expected, fmt, ap);
    va_end(ap);
}

void diag_set_found(diag *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_fmt(&x->found, fmt, ap);
    va_end(ap);
}

void diag_set_suggestion(diag *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_fmt(&x->suggestion, fmt, ap);
    va_end(ap);
}

static const char *level_name(diag_level l)
{
    return l == DIAG_ERROR ? "error" : l == DIAG_WARNING ? "warning" : "note";
}

void diag_format(const diag *x, sb *out)
{
    if (x->file) {
        sb_puts(out, x->file);
        if (x->line > 0) sb_printf(out, ":%d", x->line);
        if (x->line > 0 && x->col > 0) sb_printf(out, ":%d", x->col);
        sb_puts(out, ": ");
    }
    sb_printf(out, "%s: ", level_name(x->level));
    if (x->path && x->path[0]) sb_printf(out, "%s: ", x->path);
    sb_puts(out, x->message);
    if (x->expected || x->found) {
        sb_puts(out, " (");
        if (x->expected) sb_printf(out, "expected %s", x->expected);
        if (x->expected && x->found) sb_puts(out, ", ");
        if (x->found) sb_printf(out, "found %s", x->found);
        sb_puts(out, ")");
    }
    if (x->suggestion) sb_printf(out, "\n    hint: %s", x->suggestion);
}

void diag_print_all(const diag_list *d, void *stream)
{
    sb s;
    sb_init(&s);
    for (size_t i = 0; i < d->len; i++) {
        sb_clear(&s);
        diag_format(&d->items[i], &s);
        fprintf((FILE *)stream, "%s\n", sb_str(&s));
    }
    sb_free(&s);
}
