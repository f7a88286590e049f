/* text.c: small string helpers: case-insensitive comparison, edit distance
 * and "did you mean" suggestions, splitting, thousands separators. */
#define _GNU_SOURCE /* strcasestr */
#include "base.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

bool str_ieq(const char *a, const char *b)
{
    return strcasecmp(a, b) == 0;
}

bool str_starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

bool str_ends_with(const char *s, const char *suffix)
{
    size_t ls = strlen(s), lx = strlen(suffix);
    return ls >= lx && memcmp(s + ls - lx, suffix, lx) == 0;
}

bool str_iends_with(const char *s, const char *suffix)
{
    size_t ls = strlen(s), lx = strlen(suffix);
    return ls >= lx && strcasecmp(s + ls - lx, suffix) == 0;
}

static size_t min3(size_t a, size_t b, size_t c)
{
    size_t m = a < b ? a : b;
    return m < c ? m : c;
}

size_t str_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 256 || lb > 256) return la > lb ? la : lb; /* not a misspelling */
    /* three rows: two back (for swaps), previous, current */
    size_t *rows = xcalloc(3 * (lb + 1), sizeof *rows);
    size_t *pp = rows, *p = rows + lb + 1, *c = rows + 2 * (lb + 1);
    for (size_t j = 0; j <= lb; j++) p[j] = j;
    for (size_t i = 1; i <= la; i++) {
        c[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
            size_t cost = ca == cb ? 0 : 1;
            c[j] = min3(p[j] + 1, c[j - 1] + 1, p[j - 1] + cost);
            if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
                tolower((unsigned char)a[i - 2]) == cb && pp[j - 2] + 1 < c[j])
                c[j] = pp[j - 2] + 1;
        }
        size_t *t = pp;
        pp = p;
        p = c;
        c = t;
    }
    size_t d = p[lb];
    free(rows);
    return d;
}

const char *str_suggest(const char *word, const char *const *candidates, size_t n)
{
    const char *best = NULL;
    size_t best_d = (size_t)-1;
    size_t len = strlen(word);
    size_t limit = len / 3 > 1 ? len / 3 : 1;
    for (size_t i = 0; i < n; i++) {
        size_t d = str_edit_distance(word, candidates[i]);
        if (d < best_d) {
            best_d = d;
            best = candidates[i];
        }
    }
    if (best && best_d <= limit) return best;
    /* A prefix or suffix of a candidate ("targetModule" vs "targetModules",
     * "rank" vs "loraRank") is a plausible slip too. */
    for (size_t i = 0; i < n && len >= 3; i++) {
        if (strcasestr(candidates[i], word) || strcasestr(word, candidates[i])) {
            size_t lc = strlen(candidates[i]);
            size_t diff = lc > len ? lc - len : len - lc;
            if (diff <= 2 + len / 2) return candidates[i];
        }
    }
    return NULL;
}

size_t str_split(const char *s, char sep, char ***out)
{
    size_t n = 0, cap = 4;
    char **list = xmalloc(cap * sizeof *list);
    const char *p = s;
    for (;;) {
        const char *e = strchr(p, sep);
        size_t len = e ? (size_t)(e - p) : strlen(p);
        const char *b = p;
        while (len && isspace((unsigned char)*b)) b++, len--;
        while (len && isspace((unsigned char)b[len - 1])) len--;
        if (len) {
            if (n == cap) list = xrealloc(list, (cap *= 2) * sizeof *list);
            list[n++] = xstrndup(b, len);
        }
        if (!e) break;
        p = e + 1;
    }
    *out = list;
    return n;
}

void str_list_free(char **list, size_t n)
{
    for (size_t i = 0; i < n; i++) free(list[i]);
    free(list);
}

void str_thousands(char *out, size_t outsz, uint64_t v)
{
    char digits[32];
    int nd = snprintf(digits, sizeof digits, "%llu", (unsigned long long)v);
    size_t o = 0;
    for (int i = 0; i < nd && o + 1 < outsz; i++) {
        if (i > 0 && (nd - i) % 3 == 0 && o + 2 < outsz) out[o++] = ',';
        out[o++] = digits[i];
    }
    if (outsz) out[o < outsz ? o : outsz - 1] = '\0';
}
