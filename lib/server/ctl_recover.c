/* ctl_recover.c: what a starting server does before its loop runs. Every
 * attempt the store says is open (a job starting, running or stopping when
 * the last server stopped or was killed) is found again through the
 * executor:
 *
 *   - with its stored handle (exec_attach: pid plus process start time, so
 *     a recycled pid is never taken for the trainer);
 *   - without one (the server died between the start and storing the
 *     handle) in the job's folder (exec_find), if it is this attempt;
 *
 * A trainer found keeps running and is polled as if nothing happened (one
 * that ended meanwhile is classified on the first poll); a stopping job
 * gets its SIGTERM again. An attempt that never started goes back to the
 * queue without counting as a failure; one whose process is gone without
 * a trace ends as "lost" and follows the retry rules. The executor's job
 * lock guarantees that no job runs twice, whatever the server saw.
 */
#include "ctl_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The executor's handle of attempt a, or NULL with why. */
static exec_handle *find_handle(ctl *c, const store_attempt *a, char *why, size_t whysz)
{
    exec_handle *h = NULL;
    char err[256] = "";
    exec_rc rc;
    if (a->handle_json) {
        rc = exec_attach(c->be, a->handle_json, &h, err, sizeof err);
    } else {
        char *dir = ctl_job_dir(c, a->job_id);
        rc = exec_find(c->be, dir, &h, err, sizeof err);
        free(dir);
        if (rc == EXEC_OK && h->attempt != a->number) {
            exec_release(h);
            h = NULL;
            rc = EXEC_E_GONE;
        }
    }
    if (rc != EXEC_OK) {
        snprintf(why, whysz, "%s", err[0] ? err : exec_rc_name(rc));
        return NULL;
    }
    return h;
}

static void attached(ctl *c, ctl_job *j, const store_attempt *a, const store_job *s)
{
    char msg[200];
    snprintf(msg, sizeof msg, "re-attached to attempt %d after a server restart; the trainer kept running",
             a->number);
    if (!a->handle_json || s->state == STORE_STARTING) {
        ctl_record_start(c, j, " (found again after a server restart)");
    } else {
        store_event ev = {.actor = "controller", .type = "reattached", .message = msg};
        store_event_append(c->st, j->id, &ev);
    }
    ctl_log(c, "job %s/%s: %s", j->team, j->name, msg);
}

static void recover_attempt(ctl *c, const store_attempt *a, double now)
{
    store_job s;
    if (store_job_get(c->st, a->job_id, &s) != STORE_OK) return;
    if (s.state == STORE_QUEUED || store_state_final(s.state)) {
        /* an attempt left open by a job that is not running: close it */
        store_attempt_finish(c->st, a->job_id, a->number, -1, 0, "lost");
        store_job_clear(&s);
        return;
    }
    ctl_job *j = ctl_adopt(c, &s);
    ctl_job_load(c, j);
    j->attempt = a->number;
    j->run_started = a->started_at;
    ctl_placement_gpus(c, s.placement_json, &j->gpus, &j->n_gpus);
    j->share = ctl_placement_share(s.placement_json);
    j->cpu_slot = j->n_gpus == 0;
    j->price = j->n_gpus ? srv_cluster_price(&c->s->cluster, j->gpus[0]) : 0;
    j->base_gpu_seconds = s.gpu_seconds;
    j->base_cost = s.cost;
    char why[300];
    j->h = find_handle(c, a, why, sizeof why);
    c->placed_stale = true;
    if (j->h) {
        if (j->h->started_at > 0) j->run_started = j->h->started_at;
        attached(c, j, a, &s);
    } else {
        ctl_end e;
        memset(&e, 0, sizeof e);
        e.st.phase = EXEC_LOST;
        e.st.end = EXEC_END_LOST;
        e.st.retryable = true;
        e.st.exit_code = -1;
        e.st.ended_at = now;
        e.not_started = !a->handle_json;
        snprintf(e.st.reason, sizeof e.st.reason,
                 e.not_started ? "the server stopped before the trainer started"
                               : "the trainer is gone and how it ended is unknown (%s)",
                 why);
        ctl_attempt_ended(c, j, &e, now);
    }
    store_job_clear(&s);
}

/* Starting, running or stopping jobs with no open attempt cannot be
 * polled: back to the queue. */
static void requeue_orphans(ctl *c)
{
    store_job_filter f = {.states = STORE_STATES_ACTIVE & ~STORE_STATE_BIT(STORE_QUEUED),
                          .summary = true};
    store_job_list l = {0};
    if (store_jobs_list(c->st, &f, &l) != STORE_OK) return;
    for (size_t i = 0; i < l.n; i++) {
        ctl_job *j = ctl_find(c, l.items[i].id);
        if (j && j->h) continue;
        store_event ev = {.actor = "controller", .type = "requeued",
                          .message = "found without a running attempt after a restart; back in the queue"};
        store_job_update upd = {.set = STORE_SET_PLACEMENT | STORE_SET_NOT_BEFORE};
        char key[32];
        ctl_stop_key(l.items[i].id, key);
        if (store_job_transition(c->st, l.items[i].id, l.items[i].state, STORE_QUEUED, &upd, &ev,
                                 NULL) == STORE_OK)
            store_kv_delete(c->st, key);
    }
    store_job_list_free(&l);
}

void ctl_recover(ctl *c)
{
    store_attempt_list open = {0};
    if (store_attempts_open(c->st, &open) != STORE_OK) {
        ctl_log(c, "cannot read open attempts: %s", store_error(c->st));
        return;
    }
    double now = ctl_now();
    for (size_t i = 0; i < open.n; i++) recover_attempt(c, &open.items[i], now);
    if (open.n) ctl_log(c, "%zu attempt%s open at start", open.n, open.n == 1 ? " was" : "s were");
    store_attempt_list_free(&open);
    requeue_orphans(c);
}
