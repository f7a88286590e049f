/* k8s_ratelimit.c: the client-side rate limit (a token bucket shared by
 * every thread of a client) and the retries' backoff. */
#include "k8s_internal.h"

void k8s_bucket_init(k8s_bucket *b, double qps, int burst)
{
    pthread_mutex_init(&b->mu, NULL);
    b->qps = qps > 0 ? qps : 50;
    b->burst = burst > 0 ? burst : 100;
    b->tokens = b->burst;
    b->last = k8s_now_mono();
}

void k8s_bucket_destroy(k8s_bucket *b)
{
    pthread_mutex_destroy(&b->mu);
}

/* A reservation: the token is taken at once (the count may go below zero)
 * and the caller sleeps until the bucket would have held it, so waiting
 * callers are served in the order they came and the rate is exact. */
bool k8s_bucket_take(k8s_bucket *b, const atomic_bool *stop)
{
    pthread_mutex_lock(&b->mu);
    double now = k8s_now_mono();
    b->tokens += (now - b->last) * b->qps;
    if (b->tokens > b->burst) b->tokens = b->burst;
    b->last = now;
    b->tokens -= 1;
    double wait = b->tokens < 0 ? -b->tokens / b->qps : 0;
    pthread_mutex_unlock(&b->mu);
    if (wait <= 0) return false;
    k8s_sleep(wait, stop);
    return true;
}

double k8s_backoff(int attempt, double base, double cap, double rnd)
{
    double d = base;
    for (int i = 0; i < attempt && d < cap; i++) d *= 2;
    if (d > cap) d = cap;
    return d / 2 + d / 2 * rnd;
}
