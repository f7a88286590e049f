/* engine_adapters.c: the serving engine's adapter registry. Adapters are
 * registered by name and folder (checked against the base model by loading
 * them once); at most max_adapters are in memory (tr_adapter, fp32 A and B);
 * when one more is needed the least recently used one that no running
 * request uses is freed, and it is loaded again on demand, on the engine
 * thread at admission. Everything here runs under the engine's mutex, except
 * the file reading of a load. */
#include "serve/engine_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int64_t sv_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

sv_adapter_ent *sv_adapter_find(sv_engine *e, const char *name)
{
    for (sv_adapter_ent *a = e->adapters; a; a = a->next)
        if (!a->removed && strcmp(a->name, name) == 0) return a;
    return NULL;
}

static void touch(sv_engine *e, sv_adapter_ent *a)
{
    a->last_used = sv_now_ms();
    a->use_seq = ++e->use_seq;
}

bool sv_adapter_evict_lru(sv_engine *e)
{
    sv_adapter_ent *lru = NULL;
    for (sv_adapter_ent *a = e->adapters; a; a = a->next)
        if (a->loaded && a->active == 0 && !a->loading && (!lru || a->use_seq < lru->use_seq))
            lru = a;
    if (!lru) return false;
    tr_adapter_free(&lru->ad);
    lru->loaded = false;
    e->n_loaded--;
    e->st.adapter_evictions++;
    return true;
}

bool sv_adapter_make_room(sv_engine *e)
{
    while (e->n_loaded >= e->o.max_adapters)
        if (!sv_adapter_evict_lru(e)) return false;
    return true;
}

static void ent_free(sv_adapter_ent *a)
{
    if (a->loaded) tr_adapter_free(&a->ad);
    free(a->name);
    free(a->dir);
    free(a);
}

void sv_adapter_unref(sv_engine *e, sv_adapter_ent *a)
{
    if (--a->refs > 0 || !a->removed) return;
    sv_adapter_ent **pp = &e->adapters;
    while (*pp != a) pp = &(*pp)->next;
    *pp = a->next;
    if (a->loaded) e->n_loaded--;
    ent_free(a);
}

void sv_adapters_free_all(sv_engine *e)
{
    while (e->adapters) {
        sv_adapter_ent *a = e->adapters;
        e->adapters = a->next;
        ent_free(a);
    }
    e->n_loaded = 0;
}

bool sv_adapter_load_locked(sv_engine *e, sv_adapter_ent *a, char **message)
{
    char err[1024];
    tr_adapter ad;
    a->loading = true;
    pthread_mutex_unlock(&e->mu);
    bool ok = tr_adapter_load(&ad, e->m, a->dir, err, sizeof err);
    pthread_mutex_lock(&e->mu);
    a->loading = false;
    if (!ok) {
        *message = xasprintf("adapter %s could not be loaded again: %s", a->name, err);
        return false;
    }
    sv_adapter_make_room(e); /* add_adapter may have filled it meanwhile */
    a->ad = ad;
    a->loaded = true;
    e->n_loaded++;
    e->st.adapter_loads++;
    touch(e, a);
    return true;
}

bool sv_engine_add_adapter(sv_engine *e, const char *name, const char *dir, char *err,
                           size_t errsz)
{
    if (!name || !*name || !dir || !*dir) {
        snprintf(err, errsz, "an adapter needs a name and a folder");
        return false;
    }
    pthread_mutex_lock(&e->mu);
    bool taken = sv_adapter_find(e, name) != NULL;
    pthread_mutex_unlock(&e->mu);
    if (taken) {
        snprintf(err, errsz, "adapter %s is registered already (remove it first)", name);
        return false;
    }
    tr_adapter ad;
    if (!tr_adapter_load(&ad, e->m, dir, err, errsz)) return false;
    sv_adapter_ent *a = xcalloc(1, sizeof *a);
    a->name = xstrdup(name);
    a->dir = xstrdup(dir);
    a->rank = ad.lora.rank;
    pthread_mutex_lock(&e->mu);
    if (sv_adapter_find(e, name)) { /* registered meanwhile */
        pthread_mutex_unlock(&e->mu);
        tr_adapter_free(&ad);
        ent_free(a);
        snprintf(err, errsz, "adapter %s is registered already (remove it first)", name);
        return false;
    }
    if (sv_adapter_make_room(e)) { /* keep it in memory: it is likely used soon */
        a->ad = ad;
        a->loaded = true;
        e->n_loaded++;
        e->st.adapter_loads++;
    } else {
        tr_adapter_free(&ad);
    }
    touch(e, a);
    a->last_used = 0; /* never used by a request yet */
    sv_adapter_ent **pp = &e->adapters;
    while (*pp) pp = &(*pp)->next;
    *pp = a;
    pthread_mutex_unlock(&e->mu);
    return true;
}

bool sv_engine_remove_adapter(sv_engine *e, const char *name)
{
    pthread_mutex_lock(&e->mu);
    sv_adapter_ent *a = sv_adapter_find(e, name);
    if (a) {
        a->removed = true;
        a->refs++;
        sv_adapter_unref(e, a); /* frees it now when no request names it */
    }
    pthread_mutex_unlock(&e->mu);
    return a != NULL;
}

sv_adapter_info *sv_engine_adapters(sv_engine *e, size_t *n)
{
    pthread_mutex_lock(&e->mu);
    size_t k = 0;
    for (sv_adapter_ent *a = e->adapters; a; a = a->next) k += !a->removed;
    sv_adapter_info *out = xcalloc(k + 1, sizeof *out);
    k = 0;
    for (sv_adapter_ent *a = e->adapters; a; a = a->next) {
        if (a->removed) continue;
        out[k++] = (sv_adapter_info){xstrdup(a->name), xstrdup(a->dir), a->rank, a->loaded,
                                     a->last_used};
    }
    pthread_mutex_unlock(&e->mu);
    *n = k;
    return out;
}

void sv_adapter_info_free(sv_adapter_info *a, size_t n)
{
    for (size_t i = 0; a && i < n; i++) {
        free(a[i].name);
        free(a[i].dir);
    }
    free(a);
}
