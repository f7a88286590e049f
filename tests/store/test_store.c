/* test_store.c: the store's contract, call by call: opening (WAL, schema
 * version, a newer schema refused, not a database), idempotent submission
 * and conflicts, state changes as compare-and-set with their events (also
 * between two processes racing for the same jobs), field updates, explicit
 * transactions and savepoints, attempts, events, batched progress with
 * thinning, listing with filters and page tokens, counts, deletion,
 * experiments and named values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "store_test_util.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef su_db fx;

static int setup(void **state)
{
    fx *f = xcalloc(1, sizeof *f);
    if (!su_db_open(f)) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    su_db_close(f);
    free(f);
    return 0;
}

static int64_t submit(store *st, const char *team, const char *name, int variant)
{
    su_req b;
    su_make_req(&b, team, name, variant);
    int64_t id = 0;
    assert_int_equal(store_submit(st, &b.r, &id), STORE_OK);
    assert_true(id > 0);
    return id;
}

static const store_event ev_start = {"scheduler", "started", "placed", NULL};

/* ---- opening ---- */

static void test_open_pragmas_and_version(void **state)
{
    fx *f = *state;
    assert_int_equal(store_schema_version(), 4);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    sqlite3_stmt *s;
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(s, 0), "wal");
    sqlite3_finalize(s);
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(s, 0), store_schema_version());
    sqlite3_finalize(s);
    sqlite3_close(db);
    assert_int_equal(store_check(f->st), STORE_OK);
    /* Reopening keeps the data and applies nothing twice. */
    int64_t id = submit(f->st, "a", "j1", 0);
    store_close(f->st);
    char err[512];
    f->st = store_open(f->path, NULL, err, sizeof err);
    assert_non_null(f->st);
    store_job j;
    assert_int_equal(store_job_get(f->st, id, &j), STORE_OK);
    assert_string_equal(j.name, "j1");
    store_job_clear(&j);
}

static void test_open_newer_schema_refused(void **state)
{
    fx *f = *state;
    store_close(f->st);
    f->st = NULL;
    sqlite3 *db;
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    char err[512];
    assert_null(store_open(f->path, NULL, err, sizeof err));
    assert_non_null(strstr(err, "newer lathe"));
    assert_non_null(strstr(err, "99"));
    f->st = store_open(f->path, &(store_options){.read_only = true}, err, sizeof err);
    assert_null(f->st);
}

static void test_open_not_a_database(void **state)
{
    fx *f = *state;
    char *bad = path_join(f->dir, "notes.txt");
    const char text[] = "this is not a database, just some words that fill a page or so.\n";
    char page[8192];
    for (size_t i = 0; i < sizeof page; i++) page[i] = text[i % (sizeof text - 1)];
    assert_int_equal(file_write_atomic(bad, page, sizeof page), 0);
    char err[512];
    assert_null(store_open(bad, NULL, err, sizeof err));
    assert_non_null(strstr(err, "notes.txt"));
    char *missing = path_join(f->dir, "no/such/folder/x.db");
    assert_null(store_open(missing, NULL, err, sizeof err));
    assert_non_null(strstr(err, "x.db"));
    free(bad);
    free(missing);
}

/* ---- submission ---- */

static void test_submit_idempotent_and_conflict(void **state)
{
    fx *f = *state;
    int64_t id = submit(f->st, "team-a", "lora-r16", 0);
    su_req b;
    su_make_req(&b, "team-a", "lora-r16", 0);
    int64_t again = 0;
    assert_int_equal(store_submit(f->st, &b.r, &again), STORE_EXISTS);
    assert_int_equal(again, id);
    su_make_req(&b, "team-a", "lora-r16", 1);
    int64_t other = 0;
    assert_int_equal(store_submit(f->st, &b.r, &other), STORE_CONFLICT);
    assert_int_equal(other, id);
    assert_non_null(strstr(store_error(f->st), "different spec"));
    /* Another team may use the same name. */
    int64_t id_b = submit(f->st, "team-b", "lora-r16", 1);
    assert_true(id_b > id);
    /* One job, one event, whatever the retries. */
    store_event_list ev;
    assert_int_equal(store_events_list(f->st, id, 0, 0, &ev), STORE_OK);
    assert_int_equal(ev.n, 1);
    assert_string_equal(ev.items[0].type, "submitted");
    assert_string_equal(ev.items[0].actor, "controller");
    store_event_list_free(&ev);
    store_job j;
    assert_int_equal(store_job_get(f->st, id, &j), STORE_OK);
    assert_int_equal(j.state, STORE_QUEUED);
    assert_string_equal(j.spec_hash, "h-lora-r16-0");
    assert_int_equal(j.max_retries, 3);
    assert_int_equal(j.progress.step, -1);
    assert_int_equal(j.exit_code, -1);
    assert_int_equal(j.checkpoint_step, -1);
    assert_true(j.created_at > 1.6e9);
    store_job_clear(&j);
}

static void test_submit_invalid(void **state)
{
    fx *f = *state;
    su_req b;
    su_make_req(&b, "", "x", 0);
    int64_t id;
    assert_int_equal(store_submit(f->st, &b.r, &id), STORE_INVALID);
    su_make_req(&b, "t", "x", 0);
    b.r.spec_hash = NULL;
    assert_int_equal(store_submit(f->st, &b.r, &id), STORE_INVALID);
    su_make_req(&b, "t", "x", 0);
    b.r.spec_json = "{not json";
    assert_int_equal(store_submit(f->st, &b.r, &id), STORE_INVALID);
    store_event bad_ev = {"user:t", "submitted", "", "[1,"};
    su_make_req(&b, "t", "x", 0);
    b.r.event = &bad_ev;
    assert_int_equal(store_submit(f->st, &b.r, &id), STORE_INVALID);
    /* Nothing of the failed submissions is left behind. */
    store_job j;
    assert_int_equal(store_job_find(f->st, "t", "x", &j), STORE_NOT_FOUND);
}

static void test_submit_many_all_or_nothing(void **state)
{
    fx *f = *state;
    submit(f->st, "a", "exp-r16", 5);
    su_req b[3];
    su_make_req(&b[0], "a", "exp-r8", 0);
    su_make_req(&b[1], "a", "exp-r16", 0); /* conflicts: variant 5 is stored */
    su_make_req(&b[2], "a", "exp-r32", 0);
    store_submit_req reqs[3] = {b[0].r, b[1].r, b[2].r};
    for (int i = 0; i < 3; i++) reqs[i].experiment = "exp";
    int64_t ids[3];
    bool existed[3];
    size_t bad = 99;
    assert_int_equal(store_submit_many(f->st, reqs, 3, ids, existed, &bad), STORE_CONFLICT);
    assert_int_equal(bad, 1);
    store_job j;
    assert_int_equal(store_job_find(f->st, "a", "exp-r8", &j), STORE_NOT_FOUND);
    /* Without the conflict: all created, then all existing. */
    su_make_req(&b[1], "a", "exp-r16", 5);
    reqs[1] = b[1].r;
    reqs[1].experiment = "exp";
    assert_int_equal(store_submit_many(f->st, reqs, 3, ids, existed, &bad), STORE_OK);
    assert_false(existed[0]);
    assert_true(existed[1]);
    assert_false(existed[2]);
    assert_int_equal(store_submit_many(f->st, reqs, 3, ids, existed, &bad), STORE_EXISTS);
    assert_int_equal(store_job_find(f->st, "a", "exp-r32", &j), STORE_OK);
    assert_int_equal(j.id, ids[2]);
    assert_string_equal(j.experiment, "exp");
    store_job_clear(&j);
}

/* ---- state changes ---- */

static void test_transition_cas_and_events(void **state)
{
    fx *f = *state;
    int64_t id = submit(f->st, "a", "j", 0);
    store_state cur = STORE_FAILED;
    assert_int_equal(store_job_transition(f->st, id, STORE_QUEUED, STORE_STARTING, NULL, &ev_start,
                                          &cur),
                     STORE_OK);
    assert_int_equal(cur, STORE_STARTING);
    /* A second actor expecting queued loses and learns where the job is. */
    assert_int_equal(store_job_transition(f->st, id, STORE_QUEUED, STORE_STARTING, NULL, &ev_start,
                                          &cur),
                     STORE_CONFLICT);
    assert_int_equal(cur, STORE_STARTING);
    store_job j;
    assert_int_equal(store_job_get(f->st, id, &j), STORE_OK);
    assert_true(j.started_at == 0);
    store_job_clear(&j);
    store_event run = {"executor", "running", "pid 42", "{\"pid\":42}"};
    assert_int_equal(
        store_job_transition(f->st, id, STORE_STARTING, STORE_RUNNING, NULL, &run, NULL),
        STORE_OK);
    assert_int_equal(store_job_get(f->st, id, &j), STORE_OK);
    double started = j.started_at;
    assert_true(started > 0);
    assert_true(j.finished_at == 0);
    store_job_clear(&j);
    store_job_update u = {.set = STORE_SET_EXIT, .exit_code = 1, .exit_reason = "oom"};
    store_event fail = {"executor", "failed", "out of memory", NULL};
    assert_int_equal(store_job_transition(f->st, id, STORE_RUNNING, STORE_FAILED, &u, &fail, NULL),
                     STORE_OK);
    assert_int_equal(store_job_get(f->st, id, &j), STORE_OK);
    assert_int_equal(j.state, STORE_FAILED);
    assert_int_equal(j.exit_code, 1);
    assert_int_equal(j.exit_signal, 0);
    assert_string_equal(j.exit_reason, "oom");
    assert_true(j.finished_at >= started);
    store_job_clear(&j);
    /* A final state is never left; unknown jobs are reported. */
    assert_int_equal(store_job_transition(f->st, id, STORE_FAILED, STORE_QUEUED, NULL, &ev_start,
                                          NULL),
                     STORE_INVALID);
    assert_int_equal(store_job_transition(f->st, 9999, STORE_QUEUED, STORE_STARTING, NULL,
                                          &ev_start, NULL),
                     STORE_NOT_FOUND);
    assert_int_equal(store_job_transition(f->st, id, STORE_RUNNING, STORE_FAILED, NULL, NULL, NULL),
                     STORE_INVALID);
    /* Every applied change left exactly one event, in order. */
    store_event_list ev;
    assert_int_equal(store_events_list(f->st, id, 0, 0, &ev), STORE_OK);
    assert_int_equal(ev.n, 4);
    assert_string_equal(ev.items[1].type, "started");
    assert_string_equal(ev.items[2].data_json, "{\"pid\":42}");
    assert_string_equal(ev.items[3].type, "failed");
    assert_true(ev.items[1].seq < ev.items[2].seq);
    int64_t after = ev.items[1].seq;
    store_event_list_free(&ev);
    assert_int_equal(store_events_list(f->st, id, after, 1, &ev), STORE_OK);
    assert_int_equal(ev.n, 1);
    assert_string_equal(ev.items[0].type, "running");
    store_event_list_free(&ev);
}

/* Two processes race to move the same 40 jobs from queued to starting, each
 * with its own handle: every job is won exactly once and has exactly one
 * "started" event. */
static void test_transition_race_between_processes(void **state)
{
    fx *f = *state;
    enum { N = 40 };
    int64_t ids[N];
    for (int i = 0; i < N; i++) {
        char name[16];
        snprintf(name, sizeof name, "r%d", i);
        ids[i] = submit(f->st, "a", name, 0);
    }
    int fds[2][2];
    pid_t pid[2];
    for (int p = 0; p < 2; p++) {
        assert_int_equal(pipe(fds[p]), 0);
        pid[p] = fork();
        assert_true(pid[p] >= 0);
        if (pid[p] == 0) {
            char err[512];
            store *mine = store_open(f->path, NULL, err, sizeof err);
            int wins = 0;
            for (int i = 0; mine && i < N; i++) {
                int k = p ? N - 1 - i : i;
                if (store_job_transition(mine, ids[k], STORE_QUEUED, STORE_STARTING, NULL,
                                         &ev_start, NULL) == STORE_OK)
                    wins++;
            }
            store_close(mine);
            ssize_t w = write(fds[p][1], &wins, sizeof wins);
            _exit(w == sizeof wins ? 0 : 1);
        }
        close(fds[p][1]);
    }
    int total = 0;
    for (int p = 0; p < 2; p++) {
        int wins = -1, status;
        assert_int_equal(read(fds[p][0], &wins, sizeof wins), sizeof wins);
        close(fds[p][0]);
        assert_int_equal(waitpid(pid[p], &status, 0), pid[p]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        total += wins;
    }
    assert_int_equal(total, N);
    for (int i = 0; i < N; i++) {
        store_event_list ev;
        assert_int_equal(store_events_list(f->st, ids[i], 0, 0, &ev), STORE_OK);
        assert_int_equal(ev.n, 2);
        store_event_list_free(&ev);
    }
}

static void test_update_fields(void **state)
{
    fx *f = *state;
    int64_t id = submit(f->st, "a", "j", 0);
    store_job_update u = {.set = STORE_SET_WAIT_REASON | STORE_SET_NOT_BEFORE,
                          .wait_reason = "team a uses 8/8 GPUs of its quota",
                          .not_before = 2e9};
    assert_int_equal(store_job_update_fields(f->st, id, STORE_STATE_BIT(STORE_QUEUED), &u, NULL),
                     STORE_OK);
    /* Only in the allowed states. */
    assert_int_equal(store_job_update_fields(f->st, id, STORE_STATE_BIT(STORE_RUNNING), &u, NULL),
                     STORE_CONFLICT);
    store_job_update p = {.set = STORE_SET_PLACEMENT | STORE_SET_PLAN | STORE_SET_CHECKPOINT |
                                 STORE_SET_USAGE | STORE_SET_PRIORITY | STORE_SET_MAX_RETRIES,
                          .placement_json = "{\"node\":\"n1\",\"gpus\":[0,1]}",
                          .plan_json = "{\"gpus\":2}",
                          .checkpoint_step = 500,
                          .checkpoint_path = "/ck/checkpoint-500",
                          .checkpoint_at = 1.7e9,
                          .saved_work = 1234.5,
                          .gpu_seconds = 3600,
                          .cost = 2.5,
                          .priority = 100,
                          .priority_class = "high",
                          .max_retries = 7};
    store_event ev = {"controller", "replanned", "smaller micro-batch", "{\"batch\":1}"};
    assert_int_equal(store_job_update_fields(f->st, id, 0, &p, &ev), STORE_OK);
    store_job j;
    assert_int_equal(store_job_get(f->st, id, &j), STORE_OK);
    assert_string_equal(j.wait_reason, "team a uses 8/8 GPUs of its quota");
    assert_true(j.not_before == 2e9);
    assert_string_equal(j.placement_json, "{\"node\":\"n1\",\"gpus\":[0,1]}");
    assert_string_equal(j.plan_json, "{\"gpus\":2}");
    assert_string_equal(j.spec_json, "{\"lora\":{\"rank\":16}}"); /* kept: NULL given */
    assert_int_equal(j.checkpoint_step, 500);
    assert_string_equal(j.checkpoint_path, "/ck/checkpoint-500");
    assert_true(j.checkpoint_at == 1.7e9);
    assert_true(j.saved_work == 1234.5);
    assert_true(j.gpu_seconds == 3600 && j.cost == 2.5);
    assert_int_equal(j.priority, 100);
    assert_string_equal(j.priority_class, "high");
    assert_int_equal(j.max_retries, 7);
    assert_int_equal(j.state, STORE_QUEUED);
    store_job_clear(&j);
    /* Clearing fields; bad JSON refused and nothing changed. */
    store_job_update c = {.set = STORE_SET_WAIT_REASON | STORE_SET_NOT_BEFORE | STORE_SET_PLACEMENT};
    assert_int_equal(store_job_update_fields(f->st, id, 0, &c, NULL), STORE_OK);
    store_job_update bad = {.set = STORE_SET_PLACEMENT | STORE_SET_WAIT_REASON,
                            .placement_json = "{oops", .wait_reason = "x"};
    assert_int_equal(store_job_update_fields(f->st, id, 0, &bad, NULL), STORE_INVALID);
    assert_int_equal(store_job_get(f->st, id, &j), STORE_OK);
    assert_null(j.wait_reason);
    assert_null(j.placement_json);
    assert_true(j.not_before == 0);
    store_job_clear(&j);
    store_event_list el;
    assert_int_equal(store_events_list(f->st, id, 0, 0, &el), STORE_OK);
    assert_int_equal(el.n, 2);
    store_event_list_free(&el);
}

/* ---- transactions ---- */

static void test_explicit_transactions(void **state)
{
    fx *f = *state;
    int64_t id = submit(f->st, "a", "j", 0);
    /* Committed together. */
    assert_int_equal(store_tx_begin(f->st), STORE_OK);
    assert_int_equal(store_tx_begin(f->st), STORE_INVALID);
    assert_int_equal(store_job_transition(f->st, id, STORE_QUEUED, STORE_STARTING, NULL, &ev_start,
                                          NULL),
                     STORE_OK);
    int n = 0;
    assert_int_equal(store_attempt_add(f->st, id, "node-1", "[0,1]", &n), STORE_OK);
    assert_int_equal(n, 1);
    /* A failing call inside rolls back only itself. */
    assert_int_equal(store_job_transition(f->st, id, STORE_QUEUED, STORE_STARTING, NULL, &ev_start,
                                          NULL),
                     STORE_CONFLICT);
    assert_int_equal(store_tx_commit(f->st), STORE_OK);
    store_job j;
    assert_int_equal(store_job_get(f->st, id, &j), STORE_OK);
    assert_int_equal(j.state, STORE_STARTING);
    assert_int_equal(j.attempts, 1);
    store_job_clear(&j);
    /* Rolled back together. */
    assert_int_equal(store_tx_begin(f->st), STORE_OK);
    assert_int_equal(store_job_transition(f->st, id, STORE_STARTING, STORE_QUEUED, NULL, &ev_start,
                                          NULL),
                     STORE_OK);
    assert_int_equal(store_attempt_finish(f->st, id, 1, -1, 9, "lost"), STORE_OK);
    store_tx_rollback(f->st);
    assert_int_equal(store_job_get(f->st, id, &j), STORE_OK);
    assert_int_equal(j.state, STORE_STARTING);
    store_job_clear(&j);
    store_attempt a;
    assert_int_equal(store_attempt_get(f->st, id, 1, &a), STORE_OK);
    assert_true(a.ended_at == 0);
    store_attempt_clear(&a);
    store_event_list ev;
    assert_int_equal(store_events_list(f->st, id, 0, 0, &ev), STORE_OK);
    assert_int_equal(ev.n, 2);
    store_event_list_free(&ev);
    assert_int_equal(store_tx_commit(f->st), STORE_INVALID);
}

/* ---- attempts ---- */

static void test_attempts(void **state)
{
    fx *f = *state;
    int64_t a = submit(f->st, "a", "ja", 0);
    int64_t b = submit(f->st, "a", "jb", 0);
    int n;
    assert_int_equal(store_attempt_add(f->st, a, "node-1", "[0]", &n), STORE_OK);
    assert_int_equal(n, 1);
    assert_int_equal(store_attempt_add(f->st, b, NULL, NULL, &n), STORE_OK);
    assert_int_equal(n, 1);
    assert_int_equal(store_attempt_add(f->st, 777, NULL, NULL, &n), STORE_NOT_FOUND);
    const char *handle = "{\"backend\":\"local\",\"pid\":123,\"start\":456}";
    assert_int_equal(store_attempt_set_handle(f->st, a, 1, "local", handle, "/w/a/attempt-1",
                                              "/w/a/attempt-1/output.log"),
                     STORE_OK);
    assert_int_equal(store_attempt_set_handle(f->st, a, 9, "local", handle, NULL, NULL),
                     STORE_NOT_FOUND);
    assert_int_equal(store_attempt_set_handle(f->st, a, 1, "local", "{bad", NULL, NULL),
                     STORE_INVALID);
    assert_int_equal(store_attempt_finish(f->st, a, 1, 1, 0, "oom"), STORE_OK);
    assert_int_equal(store_attempt_add(f->st, a, "node-2", "[3]", &n), STORE_OK);
    assert_int_equal(n, 2);
    store_attempt_list l;
    assert_int_equal(store_attempts_list(f->st, a, &l), STORE_OK);
    assert_int_equal(l.n, 2);
    assert_int_equal(l.items[0].number, 1);
    assert_int_equal(l.items[0].exit_code, 1);
    assert_string_equal(l.items[0].reason, "oom");
    assert_string_equal(l.items[0].handle_json, handle);
    assert_string_equal(l.items[0].executor, "local");
    assert_string_equal(l.items[0].log_path, "/w/a/attempt-1/output.log");
    assert_true(l.items[0].ended_at >= l.items[0].started_at);
    assert_string_equal(l.items[1].node, "node-2");
    assert_int_equal(l.items[1].exit_code, -1);
    store_attempt_list_free(&l);
    /* Open attempts: a's second and b's first. */
    assert_int_equal(store_attempts_open(f->st, &l), STORE_OK);
    assert_int_equal(l.n, 2);
    bool seen_a2 = false, seen_b1 = false;
    for (size_t i = 0; i < l.n; i++) {
        seen_a2 |= l.items[i].job_id == a && l.items[i].number == 2;
        seen_b1 |= l.items[i].job_id == b && l.items[i].number == 1;
    }
    assert_true(seen_a2 && seen_b1);
    store_attempt_list_free(&l);
    store_job j;
    assert_int_equal(store_job_get(f->st, a, &j), STORE_OK);
    assert_int_equal(j.attempts, 2);
    store_job_clear(&j);
}

/* ---- progress ---- */

static void test_progress_batches_and_thinning(void **state)
{
    fx *f = *state;
    int64_t id = submit(f->st, "a", "j", 0);
    store_progress pts[100];
    for (int i = 0; i < 100; i++)
        pts[i] = (store_progress){i + 1, 200, (i + 1) / 100.0, 3.0 - i * 0.01, 1e-4, 900, NAN, 0, false, 0};
    assert_int_equal(store_progress_add(f->st, id, 1, pts, 100), STORE_OK);
    store_job j;
    assert_int_equal(store_job_get(f->st, id, &j), STORE_OK);
    assert_int_equal(j.progress.step, 100);
    assert_int_equal(j.progress.total_steps, 200);
    assert_true(fabs(j.progress.loss - 2.01) < 1e-12);
    assert_true(isnan(j.progress.eta_seconds));
    assert_true(j.progress.at > 0);
    store_job_clear(&j);
    /* Re-reading a log after a restart replaces, never duplicates. */
    assert_int_equal(store_progress_add(f->st, id, 1, &pts[95], 5), STORE_OK);
    /* A resumed attempt starts again at step 90. */
    store_progress resumed[20];
    for (int i = 0; i < 20; i++)
        resumed[i] = (store_progress){90 + i, 200, NAN, 2.0 - i * 0.01, 1e-4, 950, 100, 0, false, 0};
    assert_int_equal(store_progress_add(f->st, id, 2, resumed, 20), STORE_OK);
    store_progress *out;
    size_t n;
    assert_int_equal(store_progress_list(f->st, id, 0, &out, &n), STORE_OK);
    assert_int_equal(n, 120);
    assert_int_equal(out[0].step, 1);
    assert_int_equal(out[99].step, 100);
    assert_int_equal(out[100].step, 90);
    assert_int_equal(out[119].step, 109);
    free(out);
    assert_int_equal(store_progress_list(f->st, id, 10, &out, &n), STORE_OK);
    assert_int_equal(n, 10);
    assert_int_equal(out[0].step, 1);
    assert_int_equal(out[9].step, 109); /* the last point is always kept */
    for (size_t i = 1; i < n; i++) assert_true(out[i].step != out[i - 1].step);
    free(out);
    store_progress bad = {-1, 0, NAN, NAN, NAN, NAN, NAN, 0, false, 0};
    assert_int_equal(store_progress_add(f->st, id, 3, &bad, 1), STORE_INVALID);
    assert_int_equal(store_progress_add(f->st, 4242, 1, pts, 1), STORE_NOT_FOUND);
}

/* Evaluated points: the job's latest and best eval loss (the earlier on a
 * tie; over all attempts), an evaluation stored apart from its step joining
 * that step's point without erasing its numbers, and the history. */
static void test_progress_eval(void **state)
{
    fx *f = *state;
    int64_t id = submit(f->st, "a", "ev", 0);
    store_job j;
    assert_int_equal(store_job_get(f->st, id, &j), STORE_OK);
    assert_true(isnan(j.eval_loss) && isnan(j.best_eval_loss));
    assert_int_equal(j.eval_step, -1);
    assert_int_equal(j.best_eval_step, -1);
    store_job_clear(&j);
    store_progress pts[4] = {
        {1, 8, NAN, 2.0, 1e-4, 900, NAN, 0, false, 0},
        {2, 8, NAN, 1.9, 1e-4, 900, NAN, 0, true, 1.8},
        {3, 8, NAN, 1.7, 1e-4, 900, NAN, 0, false, 0},
        {4, 8, NAN, 1.6, 1e-4, 900, NAN, 0, true, 1.5},
    };
    assert_int_equal(store_progress_add(f->st, id, 1, pts, 4), STORE_OK);
    assert_int_equal(store_job_get(f->st, id, &j), STORE_OK);
    assert_true(j.eval_loss == 1.5 && j.eval_step == 4);
    assert_true(j.best_eval_loss == 1.5 && j.best_eval_step == 4);
    store_job_clear(&j);
    /* a worse one later (a resumed attempt): the latest moves, the best stays;
     * the same value again keeps the earlier step */
    store_progress later[2] = {{6, 8, NAN, 1.4, NAN, NAN, NAN, 0, true, 1.7},
                               {8, 8, NAN, 1.3, NAN, NAN, NAN, 0, true, 1.5}};
    assert_int_equal(store_progress_add(f->st, id, 2, later, 2), STORE_OK);
    assert_int_equal(store_job_get(f->st, id, &j), STORE_OK);
    assert_true(j.eval_loss == 1.5 && j.eval_step == 8);
    assert_true(j.best_eval_loss == 1.5 && j.best_eval_step == 4);
    store_job_clear(&j);
    /* an evaluation alone at step 8 (reported after the step): joins it */
    store_progress alone = {8, -1, NAN, NAN, NAN, NAN, NAN, 0, true, 1.2};
    assert_int_equal(store_progress_add(f->st, id, 2, &alone, 1), STORE_OK);
    assert_int_equal(store_job_get(f->st, id, &j), STORE_OK);
    assert_true(j.progress.step == 8 && j.progress.loss == 1.3 && j.progress.total_steps == 8);
    assert_true(j.best_eval_loss == 1.2 && j.best_eval_step == 8);
    store_job_clear(&j);
    store_progress *out;
    size_t n;
    assert_int_equal(store_progress_list(f->st, id, 0, &out, &n), STORE_OK);
    assert_int_equal(n, 6);
    assert_false(out[0].has_eval);
    assert_true(out[1].has_eval && out[1].eval_loss == 1.8);
    assert_true(out[5].step == 8 && out[5].loss == 1.3 && out[5].has_eval && out[5].eval_loss == 1.2);
    free(out);
}

/* ---- listing ---- */

static void test_list_filters_and_pages(void **state)
{
    fx *f = *state;
    int64_t ids[25];
    for (int i = 0; i < 25; i++) {
        char name[16];
        snprintf(name, sizeof name, "j%02d", i);
        ids[i] = submit(f->st, i % 2 ? "odd" : "even", name, 0);
    }
    for (int i = 0; i < 25; i += 5)
        assert_int_equal(store_job_transition(f->st, ids[i], STORE_QUEUED, STORE_STARTING, NULL,
                                              &ev_start, NULL),
                         STORE_OK);
    /* Three pages of 10, 10 and 5, newest first, no repeats. */
    store_job_filter flt = {.limit = 10, .summary = true};
    int64_t seen[25];
    size_t n_seen = 0;
    char *token = NULL;
    int pages = 0;
    do {
        flt.page_token = token;
        store_job_list l;
        assert_int_equal(store_jobs_list(f->st, &flt, &l), STORE_OK);
        free(token);
        token = l.next_page_token ? xstrdup(l.next_page_token) : NULL;
        for (size_t i = 0; i < l.n; i++) {
            assert_null(l.items[i].spec_text);
            assert_non_null(l.items[i].spec_hash);
            seen[n_seen++] = l.items[i].id;
        }
        pages++;
        /* A job submitted between pages does not disturb the next page. */
        if (pages == 1) submit(f->st, "even", "late", 0);
        store_job_list_free(&l);
    } while (token);
    assert_int_equal(pages, 3);
    assert_int_equal(n_seen, 25);
    for (size_t i = 0; i < 25; i++) assert_int_equal(seen[i], ids[24 - i]);
    /* Filters. */
    store_job_list l;
    flt = (store_job_filter){.team = "odd", .states = STORE_STATE_BIT(STORE_STARTING)};
    assert_int_equal(store_jobs_list(f->st, &flt, &l), STORE_OK);
    assert_int_equal(l.n, 2); /* j05, j15 */
    assert_int_equal(l.items[0].id, ids[15]);
    assert_non_null(l.items[0].spec_text);
    assert_null(l.next_page_token);
    store_job_list_free(&l);
    flt = (store_job_filter){.states = STORE_STATE_BIT(STORE_QUEUED) |
                                       STORE_STATE_BIT(STORE_STARTING)};
    assert_int_equal(store_jobs_list(f->st, &flt, &l), STORE_OK);
    assert_int_equal(l.n, 26);
    store_job_list_free(&l);
    flt = (store_job_filter){.experiment = "none-such"};
    assert_int_equal(store_jobs_list(f->st, &flt, &l), STORE_OK);
    assert_int_equal(l.n, 0);
    store_job_list_free(&l);
    /* Tokens are checked. */
    const char *bad[] = {"12", "k1.", "k1.0", "k1.12x", "k1.-5", "zz"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        flt = (store_job_filter){.page_token = bad[i]};
        assert_int_equal(store_jobs_list(f->st, &flt, &l), STORE_INVALID);
    }
}

static void test_counts(void **state)
{
    fx *f = *state;
    su_req b;
    const char *teams[] = {"a", "a", "a", "b", "b"};
    int64_t ids[5];
    for (int i = 0; i < 5; i++) {
        char name[16];
        snprintf(name, sizeof name, "c%d", i);
        su_make_req(&b, teams[i], name, 0);
        b.r.experiment = i < 2 ? "sweep" : i == 3 ? "sweep" : NULL;
        assert_int_equal(store_submit(f->st, &b.r, &ids[i]), STORE_OK);
    }
    assert_int_equal(store_job_transition(f->st, ids[0], STORE_QUEUED, STORE_RUNNING, NULL,
                                          &ev_start, NULL),
                     STORE_OK);
    store_count_list c;
    assert_int_equal(store_count_jobs(f->st, STORE_GROUP_NONE, NULL, &c), STORE_OK);
    assert_int_equal(c.n, 1);
    assert_int_equal(c.items[0].total, 5);
    assert_int_equal(c.items[0].by_state[STORE_QUEUED], 4);
    assert_int_equal(c.items[0].by_state[STORE_RUNNING], 1);
    store_count_list_free(&c);
    assert_int_equal(store_count_jobs(f->st, STORE_GROUP_TEAM, NULL, &c), STORE_OK);
    assert_int_equal(c.n, 2);
    assert_string_equal(c.items[0].group, "a");
    assert_int_equal(c.items[0].total, 3);
    assert_int_equal(c.items[0].by_state[STORE_RUNNING], 1);
    assert_string_equal(c.items[1].group, "b");
    assert_int_equal(c.items[1].total, 2);
    store_count_list_free(&c);
    /* The same experiment name in two teams is two experiments. */
    assert_int_equal(store_count_jobs(f->st, STORE_GROUP_EXPERIMENT, NULL, &c), STORE_OK);
    assert_int_equal(c.n, 2);
    assert_string_equal(c.items[0].team, "a");
    assert_string_equal(c.items[0].group, "sweep");
    assert_int_equal(c.items[0].total, 2);
    assert_string_equal(c.items[1].team, "b");
    assert_int_equal(c.items[1].total, 1);
    store_count_list_free(&c);
    assert_int_equal(store_count_jobs(f->st, STORE_GROUP_NONE, "b", &c), STORE_OK);
    assert_int_equal(c.items[0].total, 2);
    store_count_list_free(&c);
    assert_int_equal(store_count_jobs(f->st, STORE_GROUP_NONE, "nobody", &c), STORE_OK);
    assert_int_equal(c.n, 1);
    assert_int_equal(c.items[0].total, 0);
    store_count_list_free(&c);
}

/* ---- deletion, experiments, values, clock ---- */

static void test_delete(void **state)
{
    fx *f = *state;
    int64_t id = submit(f->st, "a", "j", 0);
    assert_int_equal(store_attempt_add(f->st, id, NULL, NULL, NULL), STORE_OK);
    store_progress p = {1, 2, NAN, 1.0, NAN, NAN, NAN, 0, false, 0};
    assert_int_equal(store_progress_add(f->st, id, 1, &p, 1), STORE_OK);
    assert_int_equal(store_job_delete(f->st, id), STORE_CONFLICT);
    store_event ev = {"user:a", "cancelled", "by the user", NULL};
    assert_int_equal(
        store_job_transition(f->st, id, STORE_QUEUED, STORE_CANCELLED, NULL, &ev, NULL),
        STORE_OK);
    assert_int_equal(store_job_delete(f->st, id), STORE_OK);
    assert_int_equal(store_job_delete(f->st, id), STORE_NOT_FOUND);
    store_event_list el;
    assert_int_equal(store_events_list(f->st, id, 0, 0, &el), STORE_OK);
    assert_int_equal(el.n, 0);
    store_event_list_free(&el);
    store_attempt_list al;
    assert_int_equal(store_attempts_list(f->st, id, &al), STORE_OK);
    assert_int_equal(al.n, 0);
    store_attempt_list_free(&al);
    assert_int_equal(store_check(f->st), STORE_OK);
    /* The name is free again. */
    submit(f->st, "a", "j", 1);
}

static void test_experiments_and_kv(void **state)
{
    fx *f = *state;
    assert_int_equal(store_experiment_put(f->st, "a", "sweep", 2), STORE_OK);
    assert_int_equal(store_experiment_put(f->st, "a", "sweep", 3), STORE_OK);
    assert_int_equal(store_experiment_put(f->st, "b", "sweep", 0), STORE_OK);
    assert_int_equal(store_experiment_put(f->st, "a", "", 0), STORE_INVALID);
    assert_int_equal(store_experiment_put(f->st, "a", "x", -1), STORE_INVALID);
    store_experiment e;
    assert_int_equal(store_experiment_get(f->st, "a", "sweep", &e), STORE_OK);
    assert_int_equal(e.max_concurrent, 3);
    store_experiment_clear(&e);
    assert_int_equal(store_experiment_get(f->st, "c", "sweep", &e), STORE_NOT_FOUND);
    store_experiment *list;
    size_t n;
    assert_int_equal(store_experiments_list(f->st, NULL, &list, &n), STORE_OK);
    assert_int_equal(n, 2);
    assert_string_equal(list[1].team, "b");
    store_experiments_free(list, n);
    assert_int_equal(store_experiments_list(f->st, "b", &list, &n), STORE_OK);
    assert_int_equal(n, 1);
    store_experiments_free(list, n);

    char *v;
    assert_int_equal(store_kv_get(f->st, "usage", &v), STORE_NOT_FOUND);
    assert_null(v);
    assert_int_equal(store_kv_set(f->st, "usage", "{\"a\":12.5}"), STORE_OK);
    assert_int_equal(store_kv_set(f->st, "usage", "{\"a\":13}"), STORE_OK);
    assert_int_equal(store_kv_get(f->st, "usage", &v), STORE_OK);
    assert_string_equal(v, "{\"a\":13}");
    free(v);
    assert_int_equal(store_kv_delete(f->st, "usage"), STORE_OK);
    assert_int_equal(store_kv_delete(f->st, "usage"), STORE_NOT_FOUND);
}

static double fixed_clock(void *ctx)
{
    return *(double *)ctx;
}

static void test_clock_and_names(void **state)
{
    fx *f = *state;
    double t = 1000.0;
    store_set_clock(f->st, fixed_clock, &t);
    int64_t id = submit(f->st, "a", "j", 0);
    t = 1060.0;
    assert_int_equal(
        store_job_transition(f->st, id, STORE_QUEUED, STORE_RUNNING, NULL, &ev_start, NULL),
        STORE_OK);
    store_job j;
    assert_int_equal(store_job_get(f->st, id, &j), STORE_OK);
    assert_true(j.created_at == 1000.0);
    assert_true(j.started_at == 1060.0);
    assert_true(j.updated_at == 1060.0);
    store_job_clear(&j);
    store_set_clock(f->st, NULL, NULL);
    assert_true(store_now(f->st) > 1.6e9);
    for (int s = 0; s < STORE_N_STATES; s++) {
        store_state back;
        assert_true(store_state_parse(store_state_name((store_state)s), &back));
        assert_int_equal(back, s);
    }
    store_state x;
    assert_false(store_state_parse("paused", &x));
    assert_false(store_state_final(STORE_STOPPING));
    assert_true(store_state_final(STORE_TIMED_OUT));
    assert_string_equal(store_rc_name(STORE_CONFLICT), "conflict");
}

/* updated_after: only the jobs a change touched since then (the
 * operator's status pass reads these, not every job). */
static void test_list_updated_after(void **state)
{
    fx *f = *state;
    double t = 1000.0;
    store_set_clock(f->st, fixed_clock, &t);
    int64_t a = submit(f->st, "a", "old", 0), b = submit(f->st, "a", "moved", 0);
    t = 1010.0;
    int64_t c = submit(f->st, "a", "new", 0);
    t = 1020.0;
    assert_int_equal(store_job_transition(f->st, b, STORE_QUEUED, STORE_STARTING, NULL, &ev_start, NULL),
                     STORE_OK);
    t = 1030.0;
    store_progress p = {3, 10, NAN, 1.5, NAN, NAN, NAN, 0, false, 0};
    assert_int_equal(store_progress_add(f->st, a, 1, &p, 1), STORE_OK);
    store_job_filter flt = {.summary = true, .updated_after = 1015.0};
    store_job_list l;
    assert_int_equal(store_jobs_list(f->st, &flt, &l), STORE_OK);
    assert_int_equal(l.n, 2); /* newest first: b (moved at 1020), a (progress at 1030) */
    assert_true(l.items[0].id == b && l.items[1].id == a);
    store_job_list_free(&l);
    flt.updated_after = 1031.0;
    assert_int_equal(store_jobs_list(f->st, &flt, &l), STORE_OK);
    assert_int_equal(l.n, 0);
    store_job_list_free(&l);
    flt.updated_after = 0; /* any */
    assert_int_equal(store_jobs_list(f->st, &flt, &l), STORE_OK);
    assert_int_equal(l.n, 3);
    assert_true(l.items[0].id == c);
    store_job_list_free(&l);
    store_set_clock(f->st, NULL, NULL);
}

/* The workload helper agrees with itself: every prefix checks. */
static void test_workload_prefixes(void **state)
{
    fx *f = *state;
    char why[512];
    for (long k = 0; k < 3 * SU_PHASES + 2; k++) {
        assert_int_equal(su_op(f->st, k), STORE_OK);
        long applied = su_check(f->st, 100, why, sizeof why);
        if (applied != k + 1) fail_msg("after op %ld: %ld (%s)", k, applied, why);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_open_pragmas_and_version, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_newer_schema_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_not_a_database, setup, teardown),
        cmocka_unit_test_setup_teardown(test_submit_idempotent_and_conflict, setup, teardown),
        cmocka_unit_test_setup_teardown(test_submit_invalid, setup, teardown),
        cmocka_unit_test_setup_teardown(test_submit_many_all_or_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transition_cas_and_events, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transition_race_between_processes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_explicit_transactions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_attempts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_progress_batches_and_thinning, setup, teardown),
        cmocka_unit_test_setup_teardown(test_progress_eval, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_filters_and_pages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_counts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_experiments_and_kv, setup, teardown),
        cmocka_unit_test_setup_teardown(test_clock_and_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_updated_after, setup, teardown),
        cmocka_unit_test_setup_teardown(test_workload_prefixes, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
