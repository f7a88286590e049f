/* serve_text.c: generated tokens to text a client can be sent. Token bytes
 * are decoded incrementally as the WHATWG UTF-8 decoder does (which is also
 * what Hugging Face's decode and a browser or Node give for the same bytes):
 * a character split between two tokens waits for its last bytes, an invalid
 * sequence becomes one U+FFFD per maximal invalid part. Stop strings are
 * searched in that text; a stream holds back the end of the text that could
 * still grow into a stop string. */
#include "serve_internal.h"

#include <string.h>

static const char replacement[] = "\xEF\xBF\xBD"; /* U+FFFD */

void sv_detok_init(sv_detok *d)
{
    memset(d, 0, sizeof *d);
    sb_init(&d->text);
    d->lo = 0x80;
    d->hi = 0xBF;
}

void sv_detok_free(sv_detok *d)
{
    sb_free(&d->text);
}

static void detok_reset(sv_detok *d)
{
    d->npend = 0;
    d->need = 0;
    d->lo = 0x80;
    d->hi = 0xBF;
}

/* A lead byte: starts a sequence, or is itself a character or an error. */
static void detok_lead(sv_detok *d, unsigned char b)
{
    if (b <= 0x7F) {
        sb_putc(&d->text, (char)b);
        return;
    }
    if (b >= 0xC2 && b <= 0xDF) d->need = 1;
    else if (b >= 0xE0 && b <= 0xEF) {
        d->need = 2;
        if (b == 0xE0) d->lo = 0xA0;
        if (b == 0xED) d->hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        d->need = 3;
        if (b == 0xF0) d->lo = 0x90;
        if (b == 0xF4) d->hi = 0x8F;
    } else {
        sb_puts(&d->text, replacement);
        return;
    }
    d->pend[d->npend++] = b;
}

static void detok_byte(sv_detok *d, unsigned char b)
{
    if (d->need == 0) {
        detok_lead(d, b);
        return;
    }
    if (b < d->lo || b > d->hi) {
        /* the sequence so far is one error; b starts afresh */
        detok_reset(d);
        sb_puts(&d->text, replacement);
        detok_lead(d, b);
        return;
    }
    d->lo = 0x80;
    d->hi = 0xBF;
    d->pend[d->npend++] = b;
    if (d->npend == d->need + 1) {
        sb_putn(&d->text, (const char *)d->pend, (size_t)d->npend);
        detok_reset(d);
    }
}

void sv_detok_push(sv_detok *d, const char *bytes, size_t n)
{
    for (size_t i = 0; i < n; i++) detok_byte(d, (unsigned char)bytes[i]);
    if (!d->text.buf) sb_puts(&d->text, "");
}

void sv_detok_flush(sv_detok *d)
{
    if (d->need) {
        sb_puts(&d->text, replacement);
        detok_reset(d);
    }
    if (!d->text.buf) sb_puts(&d->text, "");
}

size_t sv_stop_maxlen(char *const *stops, size_t n)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(stops[i]);
        if (l > m) m = l;
    }
    return m;
}

/* The first occurrence of needle[0..nl) in hay[0..hl), or NULL. */
static const char *find(const char *hay, size_t hl, const char *needle, size_t nl)
{
    for (const char *p = hay; nl && (size_t)(p - hay) + nl <= hl; p++) {
        p = memchr(p, needle[0], hl - nl + 1 - (size_t)(p - hay));
        if (!p) return NULL;
        if (memcmp(p, needle, nl) == 0) return p;
    }
    return NULL;
}

bool sv_stop_cut(sb *text, size_t from, char *const *stops, size_t n)
{
    if (!text->len || from >= text->len) return false;
    size_t best = text->len;
    for (size_t i = 0; i < n; i++) {
        const char *hit = find(text->buf + from, text->len - from, stops[i], strlen(stops[i]));
        if (hit && (size_t)(hit - text->buf) < best) best = (size_t)(hit - text->buf);
    }
    if (best == text->len) return false;
    text->len = best;
    text->buf[best] = '\0';
    return true;
}

size_t sv_stop_holdback(const char *text, size_t len, char *const *stops, size_t n)
{
    size_t hold = 0;
    for (size_t i = 0; i < n; i++) {
        size_t sl = strlen(stops[i]);
        /* the longest proper prefix of stops[i] that text ends with */
        for (size_t k = sl - 1 < len ? sl - 1 : len; k > hold; k--) {
            if (memcmp(text + len - k, stops[i], k) == 0) {
                hold = k;
                break;
            }
        }
    }
    return hold;
}
