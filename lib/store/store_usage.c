/* store_usage.c: what jobs used. The attempts that held GPUs in a window
 * of time, with the job they belong to and its plan's estimate (what
 * `lathe cost` and the console's budget burn-down add up), and each job's
 * GPU history as NVML reported it (the gpu_samples table). */
#include "store_internal.h"

#include "base/base.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- attempts in a window ---- */

/* Attempts written before schema 4 have no gpus or price: the GPUs of
 * their gpus_json, and the job's mean price (its cost over its
 * GPU-seconds), stand in. The plan's estimate (plan_gpu_hours, plan_cost:
 * triggers keep them from plan_json) is there only when it is for the
 * whole run. */
static const char usage_sql[] =
    "SELECT a.job_id, j.team, j.name, j.experiment, j.state, a.number, a.started_at,"
    " a.ended_at,"
    " coalesce(a.gpus, json_array_length(a.gpus_json), 0),"
    " coalesce(a.price, CASE WHEN j.gpu_seconds > 0 THEN j.cost * 3600.0 / j.gpu_seconds"
    "                   ELSE 0 END),"
    " a.gpu_seconds, a.cost, j.gpu_seconds, j.cost, j.plan_gpu_hours, j.plan_cost"
    " FROM attempts a JOIN jobs j ON j.id = a.job_id"
    " WHERE (?1 IS NULL OR j.team = ?1)"
    "   AND (a.ended_at IS NULL OR a.ended_at >= ?2)"
    "   AND a.started_at <= ?3"
    "   AND coalesce(a.gpus, json_array_length(a.gpus_json), 0) > 0"
    " ORDER BY a.job_id, a.number";

void store_usage_free(store_usage_row *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(rows[i].team);
        free(rows[i].name);
        free(rows[i].experiment);
    }
    free(rows);
}

store_rc store_usage_list(store *st, const char *team, double since, double until,
                          store_usage_row **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *s = st_stmt(st, usage_sql);
    if (!s) return STORE_ERROR;
    st_bind_text(s, 1, team);
    st_bind_double(s, 2, since > 0 ? since : 0);
    st_bind_double(s, 3, until > 0 ? until : HUGE_VAL);
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        *out = st_grow(*out, *n, &cap, sizeof **out);
        store_usage_row *r = &(*out)[(*n)++];
        memset(r, 0, sizeof *r);
        r->job_id = st_col_int(s, 0, 0);
        r->team = st_col_text(s, 1);
        r->name = st_col_text(s, 2);
        r->experiment = st_col_text(s, 3);
        char *state = st_col_text(s, 4);
        if (!state || !store_state_parse(state, &r->state)) r->state = STORE_QUEUED;
        free(state);
        r->attempt = (int)st_col_int(s, 5, 0);
        r->started_at = st_col_time(s, 6);
        r->ended_at = st_col_time(s, 7);
        r->gpus = st_col_double(s, 8);
        r->price = st_col_double(s, 9);
        r->gpu_seconds = st_col_double(s, 10);
        r->cost = st_col_double(s, 11);
        r->job_gpu_seconds = st_col_double(s, 12);
        r->job_cost = st_col_double(s, 13);
        r->planned_gpu_hours = st_col_double(s, 14);
        r->planned_cost = st_col_double(s, 15);
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
        store_usage_free(*out, *n);
        *out = NULL;
        *n = 0;
        return st_fail(st, rc, "reading usage");
    }
    return STORE_OK;
}

/* ---- GPU samples ---- */

static store_rc add_samples(store *st, const store_gpu_sample *x, size_t n)
{
    static const char sql[] = "INSERT OR REPLACE INTO gpu_samples (job_id, at, attempt, gpus, util,"
                              " mem_used, mem_total, power, temp)"
                              " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";
    for (size_t i = 0; i < n; i++) {
        if (x[i].gpus < 1 || !(x[i].at > 0))
            return st_failf(st, STORE_INVALID, "a GPU sample needs a time and at least one GPU");
        sqlite3_stmt *s = st_stmt(st, sql);
        if (!s) return STORE_ERROR;
        st_bind_int64(s, 1, x[i].job_id);
        st_bind_double(s, 2, x[i].at);
        st_bind_int64(s, 3, x[i].attempt);
        st_bind_int64(s, 4, x[i].gpus);
        st_bind_double(s, 5, x[i].util);
        st_bind_double(s, 6, x[i].mem_used);
        st_bind_double(s, 7, x[i].mem_total);
        st_bind_double(s, 8, x[i].power);
        st_bind_double(s, 9, x[i].temp);
        store_rc rc = st_exec_stmt(st, s, "adding a GPU sample");
        if (rc != STORE_OK) return rc;
    }
    return STORE_OK;
}

store_rc store_gpu_samples_add(store *st, const store_gpu_sample *s, size_t n)
{
    if (n == 0) return STORE_OK;
    store_rc rc = st_op_begin(st);
    if (rc != STORE_OK) return rc;
    return st_op_end(st, add_samples(st, s, n));
}

store_rc store_gpu_samples_list(store *st, int64_t job_id, size_t max_points,
                                store_gpu_sample **out, size_t *n)
{
    static const char sql[] = "SELECT at, attempt, gpus, util, mem_used, mem_total, power, temp"
                              " FROM gpu_samples WHERE job_id = ?1 ORDER BY at";
    *out = NULL;
    *n = 0;
    sqlite3_stmt *s = st_stmt(st, sql);
    if (!s) return STORE_ERROR;
    st_bind_int64(s, 1, job_id);
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        *out = st_grow(*out, *n, &cap, sizeof **out);
        store_gpu_sample *x = &(*out)[(*n)++];
        x->job_id = job_id;
        x->at = st_col_time(s, 0);
        x->attempt = (int)st_col_int(s, 1, 0);
        x->gpus = (int)st_col_int(s, 2, 0);
        x->util = st_col_double(s, 3);
        x->mem_used = st_col_double(s, 4);
        x->mem_total = st_col_double(s, 5);
        x->power = st_col_double(s, 6);
        x->temp = st_col_double(s, 7);
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
        free(*out);
        *out = NULL;
        *n = 0;
        return st_fail(st, rc, "reading GPU samples");
    }
    *n = st_thin(*out, *n, sizeof **out, max_points);
    return STORE_OK;
}

store_rc store_gpu_summary_get(store *st, int64_t job_id, store_gpu_summary *out)
{
    static const char sql[] = "SELECT count(*), avg(util), max(mem_used), avg(power), min(at),"
                              " max(at) FROM gpu_samples WHERE job_id = ?1";
    memset(out, 0, sizeof *out);
    out->util_avg = out->mem_peak = out->power_avg = NAN;
    sqlite3_stmt *s = st_stmt(st, sql);
    if (!s) return STORE_ERROR;
    st_bind_int64(s, 1, job_id);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        out->samples = (size_t)st_col_int(s, 0, 0);
        out->util_avg = st_col_double(s, 1);
        out->mem_peak = st_col_double(s, 2);
        out->power_avg = st_col_double(s, 3);
        out->first_at = st_col_time(s, 4);
        out->last_at = st_col_time(s, 5);
        rc = SQLITE_DONE;
    }
    sqlite3_reset(s);
    return rc == SQLITE_DONE ? STORE_OK : st_fail(st, rc, "reading a GPU summary");
}
