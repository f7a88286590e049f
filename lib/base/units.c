/* units.c: the quantities people write in job files.
 *
 * Bytes follow Kubernetes: binary suffixes Ki Mi Gi Ti Pi (powers of 1024),
 * decimal suffixes K/k M G T P (powers of 1000), each optionally followed by
 * "B" ("28GB" = 28e9 bytes, "32GiB" = 32 * 2^30). A bare number is bytes.
 * Counts (parameters, samples) take K M B(illion) T, case-insensitive.
 * Durations take Go-style "1h30m15s" (units d h m s ms) or ISO-8601 "PT8H",
 * "P1DT2H30M"; a bare number is seconds. Times are RFC 3339
 * ("2026-11-29T21:54:00Z", fractions, offsets), as the API writes them. */
#include "base.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parses a leading non-negative finite decimal number; *end after it. */
static bool leading_number(const char *s, double *v, const char **end)
{
    if (!isdigit((unsigned char)*s) && !(*s == '.' && isdigit((unsigned char)s[1])))
        return false;
    char *e;
    errno = 0;
    double x = strtod(s, &e);
    if (e == s || errno == ERANGE || !isfinite(x) || x < 0) return false;
    /* strtod accepts hex and inf/nan spellings: only plain decimals here */
    for (const char *p = s; p < e; p++)
        if (!isdigit((unsigned char)*p) && *p != '.' && *p != 'e' && *p != 'E' && *p != '+' &&
            *p != '-')
            return false;
    *v = x;
    *end = e;
    return true;
}

static const char *skip_space(const char *s)
{
    while (*s == ' ' || *s == '\t') s++;
    return s;
}

bool units_parse_bytes(const char *s, double *bytes)
{
    double v;
    const char *e;
    s = skip_space(s);
    if (!leading_number(s, &v, &e)) return false;
    e = skip_space(e);
    static const struct { const char *suffix; double mult; } tab[] = {
        {"", 1},
        {"B", 1},
        {"Ki", 1024.0}, {"KiB", 1024.0},
        {"Mi", 1048576.0}, {"MiB", 1048576.0},
        {"Gi", GIB}, {"GiB", GIB},
        {"Ti", GIB * 1024}, {"TiB", GIB * 1024},
        {"Pi", GIB * 1048576}, {"PiB", GIB * 1048576},
        {"k", 1e3}, {"K", 1e3}, {"KB", 1e3}, {"kB", 1e3},
        {"M", 1e6}, {"MB", 1e6},
        {"G", 1e9}, {"GB", 1e9},
        {"T", 1e12}, {"TB", 1e12},
        {"P", 1e15}, {"PB", 1e15},
    };
    size_t elen = strlen(e);
    while (elen && (e[elen - 1] == ' ' || e[elen - 1] == '\t')) elen--;
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
        if (strlen(tab[i].suffix) == elen && strncmp(tab[i].suffix, e, elen) == 0) {
            *bytes = v * tab[i].mult;
            return isfinite(*bytes);
        }
    }
    return false;
}

bool units_parse_count(const char *s, double *count)
{
    double v;
    const char *e;
    s = skip_space(s);
    if (!leading_number(s, &v, &e)) return false;
    e = skip_space(e);
    double mult = 1;
    switch (toupper((unsigned char)*e)) {
    case '\0': break;
    case 'K': mult = 1e3; e++; break;
    case 'M': mult = 1e6; e++; break;
    case 'B': mult = 1e9; e++; break;
    case 'T': mult = 1e12; e++; break;
    default: return false;
    }
    e = skip_space(e);
    if (*e) return false;
    *count = v * mult;
    return isfinite(*count);
}

static bool parse_go_duration(const char *s, double *out)
{
    double total = 0;
    int parts = 0;
    while (*s) {
        double v;
        const char *e;
        if (!leading_number(s, &v, &e)) return false;
        double mult;
        if (strncmp(e, "ms", 2) == 0) mult = 1e-3, e += 2;
        else if (*e == 'd') mult = 86400, e++;
        else if (*e == 'h') mult = 3600, e++;
        else if (*e == 'm') mult = 60, e++;
        else if (*e == 's') mult = 1, e++;
        else if (*e == '\0' && parts == 0) mult = 1; /* bare number: seconds */
        else return false;
        total += v * mult;
        parts++;
        s = e;
    }
    if (parts == 0) return false;
    *out = total;
    return true;
}

/* ISO-8601 duration: P[nD]T[nH][nM][nS] (also PnW). Years and months have no
 * fixed length, so they are refused. */
static bool parse_iso_duration(const char *s, double *out)
{
    if (toupper((unsigned char)*s) != 'P') return false;
    s++;
    bool in_time = false;
    double total = 0;
    int parts = 0;
    while (*s) {
        if (toupper((unsigned char)*s) == 'T') {
            if (in_time) return false;
            in_time = true;
            s++;
            continue;
        }
        double v;
        const char *e;
        if (!leading_number(s, &v, &e)) return false;
        int u = toupper((unsigned char)*e);
        double mult;
        if (!in_time && u == 'W') mult = 7 * 86400;
        else if (!in_time && u == 'D') mult = 86400;
        else if (in_time && u == 'H') mult = 3600;
        else if (in_time && u == 'M') mult = 60;
        else if (in_time && u == 'S') mult = 1;
        else return false;
        total += v * mult;
        parts++;
        s = e + 1;
    }
    if (parts == 0) return false;
    *out = total;
    return true;
}

bool units_parse_duration(const char *s, double *seconds)
{
    s = skip_space(s);
    double v;
    bool ok = (toupper((unsigned char)*s) == 'P') ? parse_iso_duration(s, &v)
                                                   : parse_go_duration(s, &v);
    if (!ok || !(v > 0) || !isfinite(v)) return false;
    *seconds = v;
    return true;
}

void units_format_bytes(char *out, size_t outsz, double bytes)
{
    static const char *names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int i = 0;
    while (fabs(bytes) >= 1024.0 && i < 5) bytes /= 1024.0, i++;
    if (i == 0) snprintf(out, outsz, "%.0f B", bytes);
    else snprintf(out, outsz, "%.*f %s", fabs(bytes) < 10 ? 2 : 1, bytes, names[i]);
}

void units_format_duration(char *out, size_t outsz, double seconds)
{
    if (!(seconds >= 0) || !isfinite(seconds)) {
        snprintf(out, outsz, "?");
        return;
    }
    unsigned long long s = (unsigned long long)llround(seconds);
    unsigned long long d = s / 86400, h = s % 86400 / 3600, m = s % 3600 / 60, sec = s % 60;
    if (d) snprintf(out, outsz, h ? "%llud%lluh" : "%llud", d, h);
    else if (h) snprintf(out, outsz, m ? "%lluh%llum" : "%lluh", h, m);
    else if (m) snprintf(out, outsz, sec ? "%llum%llus" : "%llum", m, sec);
    else snprintf(out, outsz, "%llus", sec);
}

/* ---- times ---- */

/* n digits at s as a number, or -1. */
static int time_digits(const char *s, int n)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i])) return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

/* H. Hinnant's days_from_civil algorithm, a published formula. */
int64_t units_days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* The zone is required: a time without one would mean something else on
 * every machine. Every field is checked (no month 13, no February 30). */
bool units_parse_time(const char *s, double *out)
{
    static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (strlen(s) < 20) return false;
    int y = time_digits(s, 4), mo = time_digits(s + 5, 2), d = time_digits(s + 8, 2);
    int h = time_digits(s + 11, 2), mi = time_digits(s + 14, 2), se = time_digits(s + 17, 2);
    if (y < 0 || mo < 1 || mo > 12 || d < 1 || h < 0 || h > 23 || mi < 0 || mi > 59 ||
        se < 0 || se > 60 || s[4] != '-' || s[7] != '-' || s[13] != ':' || s[16] != ':' ||
        (s[10] != 'T' && s[10] != 't' && s[10] != ' '))
        return false;
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (d > mdays[mo - 1] + (mo == 2 && leap)) return false;
    const char *p = s + 19;
    double frac = 0;
    if (*p == '.') {
        double scale = 0.1;
        if (!isdigit((unsigned char)p[1])) return false;
        for (p++; isdigit((unsigned char)*p); p++, scale /= 10) frac += (*p - '0') * scale;
    }
    int offset = 0;
    if ((*p == 'Z' || *p == 'z') && !p[1]) {
        offset = 0;
    } else if ((*p == '+' || *p == '-') && strlen(p) == 6 && p[3] == ':') {
        int oh = time_digits(p + 1, 2), om = time_digits(p + 4, 2);
        if (oh < 0 || oh > 23 || om < 0 || om > 59) return false;
        offset = (oh * 60 + om) * 60 * (*p == '-' ? -1 : 1);
    } else {
        return false;
    }
    *out = (double)(units_days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + se - offset) +
           frac;
    return true;
}
