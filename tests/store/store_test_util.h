/* store_test_util.h: helpers shared by the store's tests: temporary
 * folders, submission requests, and a deterministic workload (a sequence
 * of operations on jobs) whose effect on the database can be checked
 * exactly after a fault or a crash: the database must equal the state after
 * some prefix of the operations, never anything in between. */
#ifndef LATHE_TEST_STORE_UTIL_H
#define LATHE_TEST_STORE_UTIL_H

#include "base/base.h"
#include "store/store.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline char *su_tempdir(void)
{
    char *d = xstrdup("/tmp/lathe-store-test-XXXXXX");
    if (!mkdtemp(d)) abort();
    return d;
}

/* A folder in memory (/dev/shm) when there is one: the fault tests model
 * the disk themselves, so real flushes would only cost time. */
static inline char *su_tempdir_fast(void)
{
    char *d = xstrdup("/dev/shm/lathe-store-test-XXXXXX");
    if (dir_exists("/dev/shm") && mkdtemp(d)) return d;
    free(d);
    return su_tempdir();
}

static inline void su_rmdir(char *dir)
{
    char err[512];
    if (file_remove_tree(dir, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        abort();
    }
    free(dir);
}

/* A fresh database in a temporary folder: DIR/lathe.db opened. The
 * fixture of the tests that call the store directly. */
typedef struct su_db {
    char *dir;
    char *path;
    store *st;
} su_db;

/* False (with the store's message on stderr) when it cannot be opened. */
static inline bool su_db_open(su_db *d)
{
    d->dir = su_tempdir();
    d->path = path_join(d->dir, "lathe.db");
    char err[512];
    d->st = store_open(d->path, NULL, err, sizeof err);
    if (!d->st) {
        fprintf(stderr, "%s\n", err);
        return false;
    }
    return true;
}

/* SQL that takes a database of the current schema back to version 3
 * (what version 4 added: usage, GPU samples, the plans' estimates), for
 * the upgrade tests; the caller sets user_version. */
#define SU_UNDO_V4                                                                             \
    "DROP TRIGGER jobs_plan_insert; DROP TRIGGER jobs_plan_update;"                            \
    " ALTER TABLE jobs DROP COLUMN plan_gpu_hours; ALTER TABLE jobs DROP COLUMN plan_cost;"    \
    " DROP TABLE gpu_samples; DROP INDEX attempts_ended;"                                      \
    " ALTER TABLE attempts DROP COLUMN gpus; ALTER TABLE attempts DROP COLUMN price;"          \
    " ALTER TABLE attempts DROP COLUMN gpu_seconds; ALTER TABLE attempts DROP COLUMN cost;"

/* Closes the store and removes the folder. */
static inline void su_db_close(su_db *d)
{
    store_close(d->st);
    free(d->path);
    su_rmdir(d->dir);
}

/* A submission of job `name` in `team` whose spec text and hash derive
 * from `variant`. Strings live in the static buffers of *b. */
typedef struct su_req {
    char spec[160], hash[64];
    store_submit_req r;
} su_req;

static inline void su_make_req(su_req *b, const char *team, const char *name, int variant)
{
    memset(b, 0, sizeof *b);
    snprintf(b->spec, sizeof b->spec, "kind: LoRATrainingJob\nname: %s\nvariant: %d\n", name,
             variant);
    snprintf(b->hash, sizeof b->hash, "h-%s-%d", name, variant);
    b->r.team = team;
    b->r.name = name;
    b->r.spec_text = b->spec;
    b->r.spec_hash = b->hash;
    b->r.spec_json = "{\"lora\":{\"rank\":16}}";
    b->r.max_retries = 3;
}

/* ---- the workload ----
 * Operation k acts on job k / SU_PHASES (named "job-<j>", team "t<j % 3>"),
 * phase k % SU_PHASES:
 *   0  submit
 *   1  queued -> starting, and attempt 1 (one explicit transaction)
 *   2  SU_POINTS progress points, then starting -> running (one transaction)
 *   3  running -> succeeded with exit code 0 and usage, and kv "done" = j + 1
 *      (one transaction)
 * Every operation is all or nothing; su_check verifies the database is the
 * state after exactly `applied` operations and returns that count. */
#define SU_PHASES 4
#define SU_POINTS 5

static inline void su_job_name(long j, char *name, size_t n, char *team, size_t tn)
{
    snprintf(name, n, "job-%ld", j);
    snprintf(team, tn, "t%ld", j % 3);
}

/* Runs operation k; returns its result. */
static inline store_rc su_op(store *st, long k)
{
    long j = k / SU_PHASES;
    char name[32], team[8];
    su_job_name(j, name, sizeof name, team, sizeof team);
    if (k % SU_PHASES == 0) {
        su_req b;
        su_make_req(&b, team, name, 0);
        int64_t id;
        return store_submit(st, &b.r, &id);
    }
    store_job job;
    store_rc rc = store_job_find(st, team, name, &job);
    if (rc != STORE_OK) return rc;
    int64_t id = job.id;
    store_job_clear(&job);
    rc = store_tx_begin(st);
    if (rc != STORE_OK) return rc;
    if (k % SU_PHASES == 1) {
        store_event ev = {"scheduler", "started", "placed on node-1", "{\"gpus\":[0]}"};
        rc = store_job_transition(st, id, STORE_QUEUED, STORE_STARTING, NULL, &ev, NULL);
        if (rc == STORE_OK) rc = store_attempt_add(st, id, "node-1", "[0]", NULL);
    } else if (k % SU_PHASES == 2) {
        store_progress pts[SU_POINTS];
        for (int i = 0; i < SU_POINTS; i++)
            pts[i] = (store_progress){i + 1, 100, NAN, 2.0 - 0.1 * i, 2e-4, 1000, 60, 0, false, 0};
        rc = store_progress_add(st, id, 1, pts, SU_POINTS);
        store_event ev = {"executor", "running", "trainer started", NULL};
        if (rc == STORE_OK)
            rc = store_job_transition(st, id, STORE_STARTING, STORE_RUNNING, NULL, &ev, NULL);
    } else {
        store_job_update u = {0};
        u.set = STORE_SET_EXIT | STORE_SET_USAGE;
        u.exit_code = 0;
        u.gpu_seconds = 10.0 * (double)(j + 1);
        u.cost = 0.5;
        store_event ev = {"executor", "succeeded", "exit code 0", NULL};
        rc = store_job_transition(st, id, STORE_RUNNING, STORE_SUCCEEDED, &u, &ev, NULL);
        char v[32];
        snprintf(v, sizeof v, "%ld", j + 1);
        if (rc == STORE_OK) rc = store_kv_set(st, "done", v);
    }
    if (rc != STORE_OK) {
        store_tx_rollback(st);
        return rc;
    }
    return store_tx_commit(st);
}

/* How many phases of job j are applied, or -1 with a message in why when
 * the job's rows match no phase exactly (a half-applied operation). */
static inline int su_job_phases(store *st, long j, char *why, size_t whysz)
{
    char name[32], team[8];
    su_job_name(j, name, sizeof name, team, sizeof team);
    store_job job;
    store_rc rc = store_job_find(st, team, name, &job);
    if (rc == STORE_NOT_FOUND) return 0;
    if (rc != STORE_OK) {
        snprintf(why, whysz, "%s: %s", name, store_error(st));
        return -1;
    }
    int phase = job.state == STORE_QUEUED      ? 1
                : job.state == STORE_STARTING  ? 2
                : job.state == STORE_RUNNING   ? 3
                : job.state == STORE_SUCCEEDED ? 4
                                               : -1;
    store_event_list ev;
    store_attempt_list at;
    store_progress *pts = NULL;
    size_t np = 0;
    store_events_list(st, job.id, 0, 0, &ev);
    store_attempts_list(st, job.id, &at);
    store_progress_list(st, job.id, 0, &pts, &np);
    size_t want_np = phase >= 3 ? SU_POINTS : 0;
    int want_attempts = phase >= 2 ? 1 : 0;
    bool ok = phase > 0 && ev.n == (size_t)phase && at.n == (size_t)want_attempts &&
              job.attempts == want_attempts && np == want_np &&
              (phase >= 3 ? job.progress.step == SU_POINTS : job.progress.step == -1) &&
              (phase == 4 ? job.exit_code == 0 && job.gpu_seconds == 10.0 * (double)(j + 1) &&
                                job.finished_at > 0
                          : job.exit_code == -1 && job.finished_at == 0);
    if (!ok)
        snprintf(why, whysz,
                 "%s half-applied: state %s, %zu events, %zu attempts (count %d), %zu points, "
                 "exit %d",
                 name, store_state_name(job.state), ev.n, at.n, job.attempts, np, job.exit_code);
    free(pts);
    store_event_list_free(&ev);
    store_attempt_list_free(&at);
    store_job_clear(&job);
    return ok ? phase : -1;
}

/* Returns the number of operations the database holds (a prefix of the
 * workload), or -1 with a message in why. */
static inline long su_check(store *st, long max_ops, char *why, size_t whysz)
{
    if (store_check(st) != STORE_OK) {
        snprintf(why, whysz, "integrity: %s", store_error(st));
        return -1;
    }
    long applied = 0;
    bool ended = false;
    long jobs = max_ops / SU_PHASES + 1;
    long done = 0;
    for (long j = 0; j < jobs; j++) {
        int p = su_job_phases(st, j, why, whysz);
        if (p < 0) return -1;
        if (ended && p > 0) {
            snprintf(why, whysz, "job-%ld has phase %d after an unfinished job", j, p);
            return -1;
        }
        if (p < SU_PHASES) ended = true;
        if (p == SU_PHASES) done = j + 1;
        applied += p;
    }
    char *v = NULL;
    long kv = store_kv_get(st, "done", &v) == STORE_OK ? atol(v) : 0;
    free(v);
    if (kv != done) {
        snprintf(why, whysz, "kv done = %ld but %ld jobs succeeded", kv, done);
        return -1;
    }
    return applied;
}

#endif
