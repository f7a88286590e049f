/* store_batch.c: group commit (store.h). Writes from many threads queue in
 * arrival order; the thread whose write is at the head of the queue leads
 * one batch: it takes the writes queued so far, runs them on its own handle
 * in one transaction (each in a savepoint of its own), commits, marks them
 * done and wakes their threads, then wakes the new head of the queue, which
 * leads the next batch. The queue's mutex is held only to link, unlink and
 * hand over; never while SQLite works. */
#include "store_internal.h"

#include "base/base.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One queued write; it lives on its caller's stack until done. */
typedef struct group_write {
    store_write_fn fn;
    void *arg;
    store_rc rc;
    bool done;
    pthread_cond_t cv; /* signalled when done, or when it became the head */
    char err[512];     /* the failure's message, for the caller's handle */
    struct group_write *next;
} group_write;

struct store_batcher {
    pthread_mutex_t mu;
    group_write *head, *tail; /* the head's thread leads while it is there */
    size_t max_batch;
    store_batcher_stats stats;
};

store_batcher *store_batcher_new(size_t max_batch)
{
    store_batcher *g = xcalloc(1, sizeof *g);
    pthread_mutex_init(&g->mu, NULL);
    g->max_batch = max_batch ? max_batch : 128;
    return g;
}

void store_batcher_free(store_batcher *g)
{
    if (!g) return;
    pthread_mutex_destroy(&g->mu);
    free(g);
}

void store_batcher_stats_get(store_batcher *g, store_batcher_stats *out)
{
    pthread_mutex_lock(&g->mu);
    *out = g->stats;
    pthread_mutex_unlock(&g->mu);
}

/* ---- running a batch (the leader, without the mutex) ---- */

static const char sql_sp_begin[] = "SAVEPOINT write";
static const char sql_sp_release[] = "RELEASE write";
static const char sql_sp_undo[] = "ROLLBACK TO write";

static store_rc run_sql(store *st, const char *sql, const char *what)
{
    sqlite3_stmt *s = st_stmt(st, sql);
    return s ? st_exec_stmt(st, s, what) : STORE_ERROR;
}

static void fail_write(group_write *w, store_rc rc, const char *msg)
{
    w->rc = rc;
    snprintf(w->err, sizeof w->err, "%s", msg);
}

/* One write inside the open transaction, in its own savepoint. */
static void run_write(store *st, group_write *w)
{
    store_rc rc = run_sql(st, sql_sp_begin, "starting a write's savepoint");
    if (rc != STORE_OK) {
        fail_write(w, rc, store_error(st));
        return;
    }
    st->err[0] = '\0';
    rc = w->fn(st, w->arg);
    w->rc = rc;
    if (rc != STORE_OK) snprintf(w->err, sizeof w->err, "%s", store_error(st));
    if (rc != STORE_OK && rc != STORE_EXISTS && !sqlite3_get_autocommit(st->db))
        run_sql(st, sql_sp_undo, "rolling a write back");
    if (!sqlite3_get_autocommit(st->db)) run_sql(st, sql_sp_release, "releasing a write");
    /* An I/O error may have made SQLite roll the whole transaction back. */
    if (sqlite3_get_autocommit(st->db)) st->tx_broken = true;
}

/* Runs the n writes from `first` on in one transaction. Only their links
 * are followed: writes queued behind them meanwhile are the next batch's. */
static void run_batch(store *st, group_write *first, size_t n)
{
    store_rc rc = store_tx_begin(st);
    group_write *w = first;
    if (rc != STORE_OK) {
        for (size_t i = 0; i < n; i++, w = w->next) fail_write(w, rc, store_error(st));
        return;
    }
    for (size_t i = 0; i < n; i++, w = w->next) {
        if (st->tx_broken) fail_write(w, STORE_ERROR, "the batch's transaction was rolled back "
                                                      "after an earlier error");
        else run_write(st, w);
    }
    rc = store_tx_commit(st);
    if (rc == STORE_OK) return;
    /* Nothing of the batch is on disk (or not known to be): no write of it
     * is acknowledged, whatever it returned. */
    w = first;
    for (size_t i = 0; i < n; i++, w = w->next) fail_write(w, STORE_ERROR, store_error(st));
}

/* ---- the queue ---- */

/* Called by the head's thread with the mutex held: leads one batch. */
static void lead(store_batcher *g, store *st, group_write *me)
{
    group_write *last = me;
    size_t n = 1;
    while (last->next && n < g->max_batch) {
        last = last->next;
        n++;
    }
    g->stats.commits++;
    g->stats.writes += n;
    g->stats.waiting -= n;
    if (n > g->stats.max_batch) g->stats.max_batch = n;
    pthread_mutex_unlock(&g->mu);

    run_batch(st, me, n);

    pthread_mutex_lock(&g->mu);
    group_write *next = last->next; /* writes queued while the batch ran */
    for (group_write *w = me; w != next;) {
        group_write *after = w->next;
        w->done = true;
        if (w != me) pthread_cond_signal(&w->cv);
        w = after;
    }
    g->head = next;
    if (!next) g->tail = NULL;
    else pthread_cond_signal(&next->cv); /* it leads the next batch */
}

store_rc store_batcher_write(store_batcher *g, store *st, store_write_fn fn, void *arg)
{
    if (st->in_tx)
        return st_failf(st, STORE_INVALID, "a group write cannot join an open transaction");
    group_write w;
    memset(&w, 0, sizeof w);
    w.fn = fn;
    w.arg = arg;
    pthread_cond_init(&w.cv, NULL);

    pthread_mutex_lock(&g->mu);
    if (g->tail) g->tail->next = &w;
    else g->head = &w;
    g->tail = &w;
    g->stats.waiting++;
    while (!w.done && g->head != &w) pthread_cond_wait(&w.cv, &g->mu);
    if (!w.done) lead(g, st, &w);
    pthread_mutex_unlock(&g->mu);

    pthread_cond_destroy(&w.cv);
    if (w.rc != STORE_OK) snprintf(st->err, sizeof st->err, "%s", w.err);
    return w.rc;
}
