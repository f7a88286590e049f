/* srv_ratelimit.c: the per-token rate limit (rateLimit in the
 * ServerConfig). Each token has a token bucket keyed by its hash; a request
 * without a known token (none, unknown, expired) takes from the bucket of
 * its client address instead, so guessing tokens is limited too. A bucket
 * holds up to `burst` requests and refills at `requestsPerSecond`; a
 * request finding it empty is refused with 429 and Retry-After, the whole
 * seconds until the bucket holds one again.
 *
 * The bucket arithmetic (srv_bucket_take) is pure, the time passed in, so
 * tests drive it with a clock of their own. The table of buckets is one
 * array under a mutex: tokens are few, and addresses are bounded by `max`:
 * when it is full, a bucket that has refilled completely is dropped first
 * (a fresh one equals it), else the one used longest ago. */
#include "srv_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double srv_bucket_take(srv_bucket *b, double rate, double burst, double now)
{
    if (rate <= 0) return 0;
    if (burst < 1) burst = 1;
    if (!b->used) {
        b->tokens = burst; /* a new bucket starts full */
        b->at = now;
        b->used = true;
    } else if (now > b->at) { /* a clock that goes back refills nothing */
        b->tokens += (now - b->at) * rate;
        if (b->tokens > burst) b->tokens = burst;
        b->at = now;
    }
    if (b->tokens >= 1) {
        b->tokens -= 1;
        return 0;
    }
    return (1 - b->tokens) / rate;
}

void srv_ratelimit_init(srv_ratelimit *rl, double rate, double burst, size_t max)
{
    memset(rl, 0, sizeof *rl);
    pthread_mutex_init(&rl->mu, NULL);
    rl->rate = rate;
    rl->burst = burst < 1 ? 1 : burst;
    rl->max = max ? max : 1;
}

/* Frees a slot when the table is full: a full bucket, else the oldest. */
static void evict(srv_ratelimit *rl, double now)
{
    size_t victim = 0;
    for (size_t i = 0; i < rl->n; i++) {
        const srv_bucket *b = &rl->items[i].b;
        if (b->tokens + (now - b->at) * rl->rate >= rl->burst) {
            victim = i;
            break;
        }
        if (b->at < rl->items[victim].b.at) victim = i;
    }
    rl->items[victim] = rl->items[--rl->n];
}

static void count(srv_ratelimit *rl, const char *label)
{
    for (size_t i = 0; i < rl->n_counts; i++)
        if (strcmp(rl->counts[i].label, label) == 0) {
            rl->counts[i].n++;
            return;
        }
    rl->counts = xrealloc(rl->counts, (rl->n_counts + 1) * sizeof *rl->counts);
    rl->counts[rl->n_counts++] = (srv_rl_count){xstrdup(label), 1};
}

bool srv_ratelimit_take(srv_ratelimit *rl, const unsigned char key[32], const char *label,
                        double now, int *retry_after)
{
    *retry_after = 0;
    if (rl->rate <= 0) return true;
    pthread_mutex_lock(&rl->mu);
    size_t i = 0;
    while (i < rl->n && memcmp(rl->items[i].key, key, 32) != 0) i++;
    if (i == rl->n) {
        if (rl->n >= rl->max) evict(rl, now);
        if (rl->n == rl->cap) {
            rl->cap = rl->cap ? rl->cap * 2 : 16;
            rl->items = xrealloc(rl->items, rl->cap * sizeof *rl->items);
        }
        i = rl->n++;
        memcpy(rl->items[i].key, key, 32);
        rl->items[i].b = (srv_bucket){0};
    }
    double wait = srv_bucket_take(&rl->items[i].b, rl->rate, rl->burst, now);
    if (wait > 0) {
        double whole = ceil(wait);
        *retry_after = whole < 1 ? 1 : whole > 86400 ? 86400 : (int)whole;
        count(rl, label && *label ? label : "unknown");
    }
    pthread_mutex_unlock(&rl->mu);
    return wait <= 0;
}

/* A label value with \, " and newline escaped. */
static void put_label(sb *out, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"') sb_putc(out, '\\'), sb_putc(out, *v);
        else if (*v == '\n') sb_puts(out, "\\n");
        else sb_putc(out, *v);
    }
}

void srv_ratelimit_metrics(srv_ratelimit *rl, sb *out)
{
    sb_puts(out, "# HELP lathe_http_rate_limited_total Requests refused with 429, by token "
                 "(\"unknown\": requests without a known token, limited by address).\n"
                 "# TYPE lathe_http_rate_limited_total counter\n");
    pthread_mutex_lock(&rl->mu);
    for (size_t i = 0; i < rl->n_counts; i++) {
        sb_puts(out, "lathe_http_rate_limited_total{token=\"");
        put_label(out, rl->counts[i].label);
        sb_printf(out, "\"} %llu\n", (unsigned long long)rl->counts[i].n);
    }
    pthread_mutex_unlock(&rl->mu);
}

void srv_ratelimit_free(srv_ratelimit *rl)
{
    for (size_t i = 0; i < rl->n_counts; i++) free(rl->counts[i].label);
    free(rl->counts);
    free(rl->items);
    pthread_mutex_destroy(&rl->mu);
    memset(rl, 0, sizeof *rl);
}
