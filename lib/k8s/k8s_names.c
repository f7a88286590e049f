/* k8s_names.c: the names lathe gives the objects of an attempt. */
#include "k8s.h"

#include "base/base.h"

#include <stdio.h>
#include <string.h>

/* FNV-1a, 32 bits: short, stable across builds and machines. */
static uint32_t fnv1a(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 16777619u;
    }
    return h;
}

/* Keeps [a-z0-9-] (upper case lowered, anything else '-'), no '-' twice. */
static void dns_clean(const char *in, sb *out)
{
    char prev = '-';
    for (const char *p = in; *p; p++) {
        char c = *p;
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) c = '-';
        if (c == '-' && prev == '-') continue;
        sb_putc(out, c);
        prev = c;
    }
}

void k8s_job_name(const char *job, int attempt, char *out, size_t outsz)
{
    enum { MAX = 52 };
    sb clean;
    sb_init(&clean);
    dns_clean(job ? job : "", &clean);
    const char *j = sb_str(&clean);
    size_t jl = strlen(j);
    while (jl > 0 && j[jl - 1] == '-') jl--;
    char tail[24];
    snprintf(tail, sizeof tail, "-%d", attempt);
    char full[MAX + 64];
    /* "lathe-" + job + "-N" when it fits and the job was already clean */
    if (6 + jl + strlen(tail) <= MAX && strcmp(j, job ? job : "") == 0 && jl > 0) {
        snprintf(full, sizeof full, "lathe-%.*s%s", (int)jl, j, tail);
    } else {
        char hash[16];
        snprintf(hash, sizeof hash, "-%08x", fnv1a(job ? job : ""));
        size_t room = MAX - 6 - strlen(hash) - strlen(tail);
        size_t keep = jl < room ? jl : room;
        while (keep > 0 && j[keep - 1] == '-') keep--;
        if (keep > 0)
            snprintf(full, sizeof full, "lathe-%.*s%s%s", (int)keep, j, hash, tail);
        else
            snprintf(full, sizeof full, "lathe%s%s", hash, tail);
    }
    snprintf(out, outsz, "%s", full);
    sb_free(&clean);
}
