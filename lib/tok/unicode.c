/* unicode.c: strict UTF-8 decoding and lossy repair, White_Space, Python's
 * isspace, categories, case folding and normalisation (utf8proc does the
 * tables). See unicode.h. */
#include "tok/unicode.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* How many continuation bytes follow lead byte b, and the allowed range of
 * the first of them (Unicode 15, Table 3-7 "Well-Formed UTF-8 Byte
 * Sequences"). Returns -1 for a byte that cannot start a sequence. */
static int utf8_lead(unsigned char b, unsigned char *lo, unsigned char *hi)
{
    *lo = 0x80;
    *hi = 0xBF;
    if (b < 0x80) return 0;
    if (b >= 0xC2 && b <= 0xDF) return 1;
    if (b == 0xE0) {
        *lo = 0xA0;
        return 2;
    }
    if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) return 2;
    if (b == 0xED) {
        *hi = 0x9F;
        return 2;
    }
    if (b == 0xF0) {
        *lo = 0x90;
        return 3;
    }
    if (b >= 0xF1 && b <= 0xF3) return 3;
    if (b == 0xF4) {
        *hi = 0x8F;
        return 3;
    }
    return -1;
}

/* Length of the valid sequence at s[i], or, when it is invalid, minus the
 * length of its maximal invalid subpart (at least 1). */
static int utf8_seq(const unsigned char *s, size_t len, size_t i)
{
    unsigned char lo, hi;
    int more = utf8_lead(s[i], &lo, &hi);
    if (more < 0) return -1;
    for (int k = 1; k <= more; k++) {
        if (i + (size_t)k >= len) return -k;
        unsigned char c = s[i + (size_t)k];
        if (k > 1) {
            lo = 0x80;
            hi = 0xBF;
        }
        if (c < lo || c > hi) return -k;
    }
    return more + 1;
}

bool uni_next(const char *s, size_t len, size_t *i, uint32_t *cp)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t p = *i;
    if (p >= len) return false;
    if (u[p] < 0x80) { /* the common case */
        *cp = u[p];
        *i = p + 1;
        return true;
    }
    int n = utf8_seq(u, len, p);
    if (n < 0) return false;
    uint32_t c = u[p] & (0x7F >> n);
    for (int k = 1; k < n; k++) c = (c << 6) | (u[p + (size_t)k] & 0x3F);
    *cp = c;
    *i = p + (size_t)n;
    return true;
}

size_t uni_encode(uint32_t cp, char out[4])
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

bool uni_valid(const char *s, size_t len, size_t *bad)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        int n = utf8_seq(u, len, i);
        if (n < 0) {
            if (bad) *bad = i;
            return false;
        }
        i += (size_t)n;
    }
    return true;
}

void uni_append_lossy(sb *out, const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, run = 0; /* run: start of the pending valid bytes */
    while (i < len) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        int n = utf8_seq(u, len, i);
        if (n > 0) {
            i += (size_t)n;
            continue;
        }
        sb_putn(out, s + run, i - run);
        sb_puts(out, "\xEF\xBF\xBD"); /* U+FFFD */
        i += (size_t)(-n);
        run = i;
    }
    sb_putn(out, s + run, len - run);
}

bool uni_is_white_space(uint32_t cp)
{
    /* PropList.txt, White_Space (Unicode 15). */
    if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
    if (cp < 0x85) return false;
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool uni_is_py_space(uint32_t cp)
{
    /* CPython's _PyUnicode_IsWhitespace: bidirectional class WS, B or S, or
     * category Zs, which adds the four information separators 1C..1F. */
    return (cp >= 0x1C && cp <= 0x1F) || uni_is_white_space(cp);
}

int uni_category(uint32_t cp)
{
    return (int)utf8proc_category((utf8proc_int32_t)cp);
}

uint32_t uni_fold(uint32_t cp)
{
    if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    utf8proc_int32_t buf[4];
    int last = 0;
    utf8proc_ssize_t n = utf8proc_decompose_char((utf8proc_int32_t)cp, buf, 4, UTF8PROC_CASEFOLD,
                                                 &last);
    return n == 1 ? (uint32_t)buf[0] : cp;
}

bool uni_normalize(const char *s, size_t len, uni_form form, sb *out)
{
    utf8proc_option_t opt = UTF8PROC_STABLE;
    switch (form) {
    case UNI_NFC: opt |= UTF8PROC_COMPOSE; break;
    case UNI_NFD: opt |= UTF8PROC_DECOMPOSE; break;
    case UNI_NFKC: opt |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case UNI_NFKD: opt |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    }
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)len, &dst, opt);
    if (n < 0) return false;
    sb_putn(out, (const char *)dst, (size_t)n);
    free(dst);
    return true;
}
