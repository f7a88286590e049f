/* exec_k8s_map.c: a string-keyed hash table (open addressing, linear
 * probing, deletion by backward shift) for the Kubernetes backend's
 * tables of Jobs, pods and nodes. */
#include "exec_k8s_internal.h"

#include <stdlib.h>
#include <string.h>

static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a, 64 bits */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

void kmap_init(kmap *m)
{
    memset(m, 0, sizeof *m);
}

void kmap_free(kmap *m, void (*free_val)(void *))
{
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->e[i].key) continue;
        free(m->e[i].key);
        if (free_val) free_val(m->e[i].val);
    }
    free(m->e);
    memset(m, 0, sizeof *m);
}

static size_t slot(const kmap *m, const char *key)
{
    size_t i = (size_t)hash(key) & (m->cap - 1);
    while (m->e[i].key && strcmp(m->e[i].key, key) != 0) i = (i + 1) & (m->cap - 1);
    return i;
}

void *kmap_get(const kmap *m, const char *key)
{
    if (!m->cap) return NULL;
    size_t i = slot(m, key);
    return m->e[i].key ? m->e[i].val : NULL;
}

static void grow(kmap *m)
{
    kmap old = *m;
    m->cap = old.cap ? old.cap * 2 : 16;
    m->e = xcalloc(m->cap, sizeof *m->e);
    m->n = 0;
    for (size_t i = 0; i < old.cap; i++) {
        if (!old.e[i].key) continue;
        size_t k = slot(m, old.e[i].key);
        m->e[k] = old.e[i];
        m->n++;
    }
    free(old.e);
}

void *kmap_put(kmap *m, const char *key, void *val)
{
    if ((m->n + 1) * 4 > m->cap * 3) grow(m);
    size_t i = slot(m, key);
    if (m->e[i].key) {
        void *old = m->e[i].val;
        m->e[i].val = val;
        return old;
    }
    m->e[i].key = xstrdup(key);
    m->e[i].val = val;
    m->n++;
    return NULL;
}

void *kmap_del(kmap *m, const char *key)
{
    if (!m->cap) return NULL;
    size_t i = slot(m, key);
    if (!m->e[i].key) return NULL;
    void *val = m->e[i].val;
    free(m->e[i].key);
    m->e[i].key = NULL;
    m->n--;
    /* shift back the entries of the run after i that hash at or before it */
    size_t j = i;
    for (;;) {
        j = (j + 1) & (m->cap - 1);
        if (!m->e[j].key) break;
        size_t home = (size_t)hash(m->e[j].key) & (m->cap - 1);
        bool move = (j > i) ? (home <= i || home > j) : (home <= i && home > j);
        if (move) {
            m->e[i] = m->e[j];
            m->e[j].key = NULL;
            i = j;
        }
    }
    return val;
}
