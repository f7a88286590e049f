/* store_list.c: listing jobs with filters and keyset pagination (newest
 * first; a page token holds the last id seen), and job counts by state,
 * grouped by team or experiment, for the API and the metrics. */
#include "store_internal.h"

#include "base/base.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Page tokens are "k1." followed by the id the next page starts below. */
#define TOKEN_PREFIX "k1."

static bool token_parse(const char *tok, int64_t *below)
{
    if (!str_starts_with(tok, TOKEN_PREFIX)) return false;
    const char *digits = tok + strlen(TOKEN_PREFIX);
    if (*digits < '1' || *digits > '9') return false;
    char *end;
    errno = 0;
    long long v = strtoll(digits, &end, 10);
    if (errno || *end) return false;
    *below = v;
    return true;
}

/* Builds the listing's SQL for the filter; binds follow in the same order
 * (team, experiment, updated_after, below, limit). */
static char *list_sql(const store_job_filter *f, bool has_below)
{
    sb q;
    sb_init(&q);
    sb_printf(&q, "SELECT %s FROM jobs WHERE 1", f->summary ? ST_JOB_COLS_SUMMARY : ST_JOB_COLS);
    if (f->team) sb_puts(&q, " AND team = ?");
    if (f->experiment) sb_puts(&q, " AND experiment = ?");
    if (f->states) {
        sb_puts(&q, " AND state IN (");
        const char *sep = "";
        for (int i = 0; i < STORE_N_STATES; i++)
            if (f->states & STORE_STATE_BIT(i)) {
                sb_printf(&q, "%s'%s'", sep, store_state_name((store_state)i));
                sep = ",";
            }
        sb_puts(&q, ")");
    }
    if (f->updated_after > 0) sb_puts(&q, " AND updated_at > ?");
    if (has_below) sb_puts(&q, " AND id < ?");
    sb_puts(&q, " ORDER BY id DESC LIMIT ?");
    return sb_take(&q);
}

static void push_job(store_job_list *out, size_t *cap, sqlite3_stmt *s)
{
    if (out->n == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        out->items = xrealloc(out->items, *cap * sizeof *out->items);
    }
    st_job_from_row(s, &out->items[out->n++]);
}

store_rc store_jobs_list(store *st, const store_job_filter *f, store_job_list *out)
{
    memset(out, 0, sizeof *out);
    int64_t below = 0;
    if (f->page_token && !token_parse(f->page_token, &below))
        return st_failf(st, STORE_INVALID, "'%s' is not a page token from this server",
                        f->page_token);
    if (f->states >> STORE_N_STATES) return st_failf(st, STORE_INVALID, "unknown states in filter");
    char *sql = list_sql(f, f->page_token != NULL);
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(st->db, sql, -1, &s, NULL);
    free(sql);
    if (rc != SQLITE_OK) return st_fail(st, rc, "preparing the job list");
    int i = 1;
    if (f->team) st_bind_text(s, i++, f->team);
    if (f->experiment) st_bind_text(s, i++, f->experiment);
    if (f->updated_after > 0) sqlite3_bind_double(s, i++, f->updated_after);
    if (f->page_token) st_bind_int64(s, i++, below);
    /* One row more than the page tells whether another page follows. */
    st_bind_int64(s, i, f->limit ? (int64_t)f->limit + 1 : -1);
    size_t cap = 0;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) push_job(out, &cap, s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE) {
        store_job_list_free(out);
        return st_fail(st, rc, "listing jobs");
    }
    if (f->limit && out->n > f->limit) {
        store_job_clear(&out->items[--out->n]);
        out->next_page_token =
            xasprintf(TOKEN_PREFIX "%" PRId64, out->items[out->n - 1].id);
    }
    return STORE_OK;
}

void store_job_list_free(store_job_list *l)
{
    if (!l) return;
    for (size_t i = 0; i < l->n; i++) store_job_clear(&l->items[i]);
    free(l->items);
    free(l->next_page_token);
    memset(l, 0, sizeof *l);
}

/* ---- counts ---- */

static const char *count_sql(store_group by, bool team)
{
    static const char *const sql[3][2] = {
        {"SELECT NULL, NULL, state, count(*) FROM jobs GROUP BY state",
         "SELECT NULL, NULL, state, count(*) FROM jobs WHERE team = ?1 GROUP BY state"},
        {"SELECT team, team, state, count(*) FROM jobs GROUP BY team, state ORDER BY team",
         "SELECT team, team, state, count(*) FROM jobs WHERE team = ?1"
         " GROUP BY team, state ORDER BY team"},
        {"SELECT team, experiment, state, count(*) FROM jobs WHERE experiment IS NOT NULL"
         " GROUP BY team, experiment, state ORDER BY team, experiment",
         "SELECT team, experiment, state, count(*) FROM jobs WHERE experiment IS NOT NULL"
         " AND team = ?1 GROUP BY team, experiment, state ORDER BY team, experiment"},
    };
    return sql[by][team];
}

static bool same_text(const char *a, const unsigned char *b)
{
    if (!a || !b) return !a && !b;
    return strcmp(a, (const char *)b) == 0;
}

/* The group of the current row: the last one when the row continues it. */
static store_count *group_for(store_count_list *out, size_t *cap, sqlite3_stmt *s)
{
    if (out->n && same_text(out->items[out->n - 1].team, sqlite3_column_text(s, 0)) &&
        same_text(out->items[out->n - 1].group, sqlite3_column_text(s, 1)))
        return &out->items[out->n - 1];
    if (out->n == *cap) {
        *cap = *cap ? *cap * 2 : 8;
        out->items = xrealloc(out->items, *cap * sizeof *out->items);
    }
    store_count *c = &out->items[out->n++];
    memset(c, 0, sizeof *c);
    c->team = st_col_text(s, 0);
    c->group = st_col_text(s, 1);
    return c;
}

store_rc store_count_jobs(store *st, store_group by, const char *team, store_count_list *out)
{
    memset(out, 0, sizeof *out);
    if ((unsigned)by > STORE_GROUP_EXPERIMENT)
        return st_failf(st, STORE_INVALID, "unknown grouping");
    sqlite3_stmt *s = st_stmt(st, count_sql(by, team != NULL));
    if (!s) return STORE_ERROR;
    if (team) st_bind_text(s, 1, team);
    size_t cap = 0;
    if (by == STORE_GROUP_NONE) {
        cap = 1;
        out->items = xcalloc(1, sizeof *out->items);
        out->n = 1;
    }
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        store_count *c = by == STORE_GROUP_NONE ? &out->items[0] : group_for(out, &cap, s);
        store_state state;
        if (!store_state_parse((const char *)sqlite3_column_text(s, 2), &state)) continue;
        c->by_state[state] = sqlite3_column_int64(s, 3);
        c->total += c->by_state[state];
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
        store_count_list_free(out);
        return st_fail(st, rc, "counting jobs");
    }
    return STORE_OK;
}

void store_count_list_free(store_count_list *l)
{
    if (!l) return;
    for (size_t i = 0; i < l->n; i++) {
        free(l->items[i].team);
        free(l->items[i].group);
    }
    free(l->items);
    memset(l, 0, sizeof *l);
}
