/* sb.c: a growable, always NUL-terminated string buffer. */
#include "base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sb_init(sb *s)
{
    s->buf = NULL;
    s->len = s->cap = 0;
}

void sb_free(sb *s)
{
    free(s->buf);
    sb_init(s);
}

void sb_clear(sb *s)
{
    s->len = 0;
    if (s->buf) s->buf[0] = '\0';
}

static void sb_reserve(sb *s, size_t extra)
{
    size_t need = s->len + extra + 1;
    if (need <= s->cap) return;
    size_t cap = s->cap ? s->cap : 64;
    while (cap < need) cap *= 2;
    s->buf = xrealloc(s->buf, cap);
    s->cap = cap;
}

void sb_putn(sb *s, const char *str, size_t n)
{
    sb_reserve(s, n);
    memcpy(s->buf + s->len, str, n);
    s->len += n;
    s->buf[s->len] = '\0';
}

void sb_putc(sb *s, char c)
{
    sb_putn(s, &c, 1);
}

void sb_puts(sb *s, const char *str)
{
    sb_putn(s, str, strlen(str));
}

void sb_vprintf(sb *s, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) return;
    sb_reserve(s, (size_t)n);
    vsnprintf(s->buf + s->len, (size_t)n + 1, fmt, ap);
    s->len += (size_t)n;
}

void sb_printf(sb *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(s, fmt, ap);
    va_end(ap);
}

const char *sb_str(const sb *s)
{
    return s->buf ? s->buf : "";
}

char *sb_take(sb *s)
{
    char *p = s->buf ? s->buf : xstrdup("");
    sb_init(s);
    return p;
}
