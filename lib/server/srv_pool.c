/* srv_pool.c: store handles for the HTTP threads. A store handle is used by
 * one thread at a time (store.h), so each request takes one from this pool
 * and gives it back when its reply is queued. Handles are opened on demand
 * and kept for the next request; WAL lets them read while the controller
 * writes. */
#include "srv_internal.h"

#include <stdio.h>
#include <stdlib.h>

void srv_pool_init(srv_pool *p, const char *db_path)
{
    pthread_mutex_init(&p->mu, NULL);
    p->path = xstrdup(db_path);
    p->free = NULL;
    p->n_free = p->cap = 0;
}

store *srv_pool_get(srv_pool *p, char *err, size_t errsz)
{
    pthread_mutex_lock(&p->mu);
    store *st = p->n_free ? p->free[--p->n_free] : NULL;
    pthread_mutex_unlock(&p->mu);
    if (st) return st;
    return store_open(p->path, NULL, err, errsz);
}

void srv_pool_put(srv_pool *p, store *st)
{
    if (!st) return;
    pthread_mutex_lock(&p->mu);
    if (p->n_free == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 16;
        p->free = xrealloc(p->free, p->cap * sizeof *p->free);
    }
    p->free[p->n_free++] = st;
    pthread_mutex_unlock(&p->mu);
}

void srv_pool_free(srv_pool *p)
{
    for (size_t i = 0; i < p->n_free; i++) store_close(p->free[i]);
    free(p->free);
    free(p->path);
    pthread_mutex_destroy(&p->mu);
}
