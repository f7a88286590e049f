/* test_store_batch.c: group commit (store_batcher, store.h). Batches are made
 * deterministic with a "gate": a first write that holds its batch open
 * until the writes under test have queued behind it, one by one in a known
 * order, so they all form the next batch. Checked:
 *
 *   - a thread alone commits its write at once (a batch of one);
 *   - a batch with an invalid write and a write whose second call fails:
 *     those are rolled back to their savepoints, the valid ones commit, all
 *     in one transaction;
 *   - two identical submissions in one batch: the first creates the job,
 *     the second finds it (STORE_EXISTS, the same id), a third with another
 *     spec under the same name is a conflict; one job is stored;
 *   - a failed commit (an injected write error) fails every write of the
 *     batch and leaves nothing in the file; the group works again after;
 *   - many threads at once: every write stored exactly once;
 *   - SIGKILL of a process whose threads write through a group, at random
 *     instants: every acknowledged write is in the file exactly once (and
 *     at most the writes in flight besides). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "store/store_fault.h"
#include "store_test_util.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct fx {
    char *dir;
    char *path;
} fx;

static int setup(void **state)
{
    fx *f = xcalloc(1, sizeof *f);
    f->dir = su_tempdir();
    f->path = path_join(f->dir, "group.db");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    free(f->path);
    su_rmdir(f->dir);
    free(f);
    return 0;
}

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static store *open_store(const char *path, const char *vfs)
{
    char err[512];
    store_options o = {.vfs = vfs};
    store *st = store_open(path, &o, err, sizeof err);
    if (!st) fail_msg("open %s: %s", path, err);
    return st;
}

/* ---- writes ---- */

/* A submission; with then_conflict, a state change that cannot apply
 * follows it in the same write (so the whole write must roll back). */
typedef struct sub_write {
    su_req b;
    int64_t id;
    bool then_conflict;
} sub_write;

static store_rc write_submit(store *st, void *arg)
{
    sub_write *s = arg;
    store_rc rc = store_submit(st, &s->b.r, &s->id);
    if (rc == STORE_OK && s->then_conflict) {
        store_event ev = {"controller", "succeeded", "cannot happen", NULL};
        rc = store_job_transition(st, s->id, STORE_RUNNING, STORE_SUCCEEDED, NULL, &ev, NULL);
    }
    return rc;
}

/* The gate: submits its own job, then waits until `want` writes are queued
 * behind its batch; optionally arms a fault before it returns. */
typedef struct gate {
    store_batcher *g;
    uint64_t want;
    sub_write sub;
    store_fault *arm; /* NULL: none */
    bool entered, timed_out;
} gate;

/* Writes queued behind the batch under way. */
static uint64_t waiting(store_batcher *g)
{
    store_batcher_stats s;
    store_batcher_stats_get(g, &s);
    return s.waiting;
}

/* Writes received so far (taken into a batch, or waiting). */
static uint64_t arrived(store_batcher *g)
{
    store_batcher_stats s;
    store_batcher_stats_get(g, &s);
    return s.writes + s.waiting;
}

static store_rc write_gate(store *st, void *arg)
{
    gate *x = arg;
    x->entered = true;
    store_rc rc = write_submit(st, &x->sub);
    double end = mono_now() + 30;
    while (waiting(x->g) < x->want) {
        if (mono_now() > end) {
            x->timed_out = true;
            break;
        }
        sleep_us(500);
    }
    if (x->arm) store_fault_arm(x->arm, STORE_FAULT_WRITE, 1, true, 0);
    return rc;
}

/* ---- threads ---- */
typedef struct writer {
    store_batcher *g;
    store *st;
    store_write_fn fn;
    void *arg;
    store_rc rc;
    char err[512];
    pthread_t th;
} writer;

static void *writer_main(void *p)
{
    writer *w = p;
    w->rc = store_batcher_write(w->g, w->st, w->fn, w->arg);
    snprintf(w->err, sizeof w->err, "%s", store_error(w->st));
    return NULL;
}

/* Waits until n writes have arrived; false after 30 s. */
static bool wait_arrived(store_batcher *g, uint64_t n)
{
    double end = mono_now() + 30;
    while (arrived(g) < n) {
        if (mono_now() > end) return false;
        sleep_us(200);
    }
    return true;
}

/* Runs the gate, then subs[0..n) queued behind it in that order: they form
 * one batch. rcs[i] is each write's result; the group's stats are checked:
 * two transactions (the gate's and the batch). */
static void run_batch(const char *path, store_fault *fault, sub_write *subs, size_t n,
                      store_rc *rcs, gate *gt)
{
    const char *vfs = fault ? store_fault_vfs_name(fault) : NULL;
    store_batcher *g = store_batcher_new(0);
    writer *ws = xcalloc(n + 1, sizeof *ws);
    for (size_t i = 0; i <= n; i++) {
        ws[i].g = g;
        ws[i].st = open_store(path, vfs);
        ws[i].fn = i == 0 ? write_gate : write_submit;
        ws[i].arg = i == 0 ? (void *)gt : (void *)&subs[i - 1];
    }
    gt->g = g;
    gt->want = n;
    pthread_create(&ws[0].th, NULL, writer_main, &ws[0]);
    bool in_order = wait_arrived(g, 1);
    for (size_t i = 1; i <= n; i++) {
        pthread_create(&ws[i].th, NULL, writer_main, &ws[i]);
        in_order = in_order && wait_arrived(g, i + 1); /* the next queues behind this one */
    }
    for (size_t i = 0; i <= n; i++) pthread_join(ws[i].th, NULL);
    if (!gt->entered) fail_msg("the gate's batch did not run: %s", ws[0].err);
    assert_true(in_order);
    assert_false(gt->timed_out);
    store_batcher_stats s;
    store_batcher_stats_get(g, &s);
    assert_int_equal(s.commits, 2);
    assert_int_equal(s.writes, n + 1);
    assert_int_equal(s.max_batch, n);
    assert_int_equal(s.waiting, 0);
    for (size_t i = 0; i < n; i++) rcs[i] = ws[i + 1].rc;
    rcs[n] = ws[0].rc;
    for (size_t i = 0; i <= n; i++) store_close(ws[i].st);
    free(ws);
    store_batcher_free(g);
}

static size_t count_jobs(const char *path)
{
    store *st = open_store(path, NULL);
    store_job_list l;
    store_job_filter f = {.summary = true};
    assert_int_equal(store_jobs_list(st, &f, &l), STORE_OK);
    size_t n = l.n;
    store_job_list_free(&l);
    store_close(st);
    return n;
}

/* ---- tests ---- */

static void test_alone(void **state)
{
    fx *f = *state;
    store *st = open_store(f->path, NULL);
    store_batcher *g = store_batcher_new(0);
    sub_write s;
    su_make_req(&s.b, "t0", "alone", 0);
    s.then_conflict = false;
    assert_int_equal(store_batcher_write(g, st, write_submit, &s), STORE_OK);
    assert_true(s.id > 0);
    store_job j;
    assert_int_equal(store_job_get(st, s.id, &j), STORE_OK); /* committed: visible */
    assert_string_equal(j.name, "alone");
    store_job_clear(&j);
    store_batcher_stats gs;
    store_batcher_stats_get(g, &gs);
    assert_int_equal(gs.commits, 1);
    assert_int_equal(gs.writes, 1);
    /* inside an open transaction a group write is refused */
    assert_int_equal(store_tx_begin(st), STORE_OK);
    assert_int_equal(store_batcher_write(g, st, write_submit, &s), STORE_INVALID);
    store_tx_rollback(st);
    store_batcher_free(g);
    store_close(st);
}

static void test_batch_with_failures(void **state)
{
    fx *f = *state;
    sub_write subs[7];
    const char *names[7] = {"v1", "v2", "bad", "v3", "half", "v4", "v5"};
    for (int i = 0; i < 7; i++) {
        su_make_req(&subs[i].b, "t1", names[i], 0);
        subs[i].then_conflict = !strcmp(names[i], "half");
    }
    subs[2].b.r.spec_hash = NULL; /* invalid: no hash */
    gate gt;
    memset(&gt, 0, sizeof gt);
    su_make_req(&gt.sub.b, "t1", "gate", 0);
    store_rc rc[8];
    run_batch(f->path, NULL, subs, 7, rc, &gt);
    assert_int_equal(rc[7], STORE_OK); /* the gate */
    for (int i = 0; i < 7; i++) {
        store_rc want = i == 2 ? STORE_INVALID : i == 4 ? STORE_CONFLICT : STORE_OK;
        if (rc[i] != want) fail_msg("%s: %s, expected %s", names[i], store_rc_name(rc[i]),
                                    store_rc_name(want));
    }
    store *st = open_store(f->path, NULL);
    for (int i = 0; i < 7; i++) {
        store_job j;
        store_rc r = store_job_find(st, "t1", names[i], &j);
        assert_int_equal(r, i == 2 || i == 4 ? STORE_NOT_FOUND : STORE_OK);
        if (r == STORE_OK) {
            store_event_list ev;
            assert_int_equal(store_events_list(st, j.id, 0, 0, &ev), STORE_OK);
            assert_int_equal(ev.n, 1); /* its submitted event, once */
            store_event_list_free(&ev);
        }
        store_job_clear(&j);
    }
    assert_int_equal(store_check(st), STORE_OK);
    store_close(st);
    assert_int_equal(count_jobs(f->path), 6); /* the gate and v1..v5 */
}

static void test_identical_in_one_batch(void **state)
{
    fx *f = *state;
    sub_write subs[4];
    su_make_req(&subs[0].b, "t2", "same", 0);
    su_make_req(&subs[1].b, "t2", "same", 0);  /* the same spec: idempotent */
    su_make_req(&subs[2].b, "t2", "same", 1);  /* another spec, same name: conflict */
    su_make_req(&subs[3].b, "t0", "same", 1);  /* another team may use the name */
    for (int i = 0; i < 4; i++) subs[i].then_conflict = false;
    gate gt;
    memset(&gt, 0, sizeof gt);
    su_make_req(&gt.sub.b, "t2", "gate", 0);
    store_rc rc[5];
    run_batch(f->path, NULL, subs, 4, rc, &gt);
    assert_int_equal(rc[0], STORE_OK);
    assert_int_equal(rc[1], STORE_EXISTS);
    assert_int_equal(subs[1].id, subs[0].id);
    assert_int_equal(rc[2], STORE_CONFLICT);
    assert_int_equal(subs[2].id, subs[0].id);
    assert_int_equal(rc[3], STORE_OK);
    assert_true(subs[3].id != subs[0].id);
    store *st = open_store(f->path, NULL);
    store_job j;
    assert_int_equal(store_job_find(st, "t2", "same", &j), STORE_OK);
    assert_string_equal(j.spec_hash, "h-same-0");
    store_event_list ev;
    assert_int_equal(store_events_list(st, j.id, 0, 0, &ev), STORE_OK);
    assert_int_equal(ev.n, 1);
    store_event_list_free(&ev);
    store_job_clear(&j);
    store_close(st);
    assert_int_equal(count_jobs(f->path), 3);
}

static void test_failed_commit_fails_all(void **state)
{
    fx *f = *state;
    store_fault *fault = store_fault_new("lathe-group-fault");
    assert_non_null(fault);
    store_close(open_store(f->path, store_fault_vfs_name(fault))); /* the schema, before the fault */
    static const char *const names[4] = {"f0", "f1", "f2", "f3"};
    sub_write subs[4];
    for (int i = 0; i < 4; i++) {
        su_make_req(&subs[i].b, "t0", names[i], 0);
        subs[i].then_conflict = false;
    }
    gate gt;
    memset(&gt, 0, sizeof gt);
    su_make_req(&gt.sub.b, "t0", "gate", 0);
    gt.arm = fault; /* every write to the disk fails from the gate's commit on */
    store_rc rc[5];
    run_batch(f->path, fault, subs, 4, rc, &gt);
    assert_true(store_fault_fired(fault));
    for (int i = 0; i <= 4; i++) assert_int_equal(rc[i], STORE_ERROR);
    store_fault_disarm(fault);
    assert_int_equal(count_jobs(f->path), 0); /* nothing was acknowledged, nothing is there */
    /* the disk works again: so does the group */
    store *st = open_store(f->path, store_fault_vfs_name(fault));
    store_batcher *g = store_batcher_new(0);
    assert_int_equal(store_batcher_write(g, st, write_submit, &subs[0]), STORE_OK);
    store_batcher_free(g);
    store_close(st);
    assert_int_equal(count_jobs(f->path), 1);
    store_fault_free(fault);
}

/* ---- many threads ---- */
#define MANY_THREADS 8
#define MANY_WRITES 60

typedef struct many {
    store_batcher *g;
    const char *path;
    int t;
    int failures;
} many;

static void *many_main(void *p)
{
    many *m = p;
    store *st = open_store(m->path, NULL);
    for (int k = 0; k < MANY_WRITES; k++) {
        char name[32], team[8];
        snprintf(name, sizeof name, "m%d-%d", m->t, k);
        snprintf(team, sizeof team, "t%d", m->t % 3);
        sub_write s;
        su_make_req(&s.b, team, name, 0);
        s.then_conflict = false;
        if (store_batcher_write(m->g, st, write_submit, &s) != STORE_OK) m->failures++;
    }
    store_close(st);
    return NULL;
}

static void test_many_threads(void **state)
{
    fx *f = *state;
    store_close(open_store(f->path, NULL));
    store_batcher *g = store_batcher_new(0);
    many ms[MANY_THREADS];
    pthread_t th[MANY_THREADS];
    for (int t = 0; t < MANY_THREADS; t++) {
        ms[t] = (many){g, f->path, t, 0};
        pthread_create(&th[t], NULL, many_main, &ms[t]);
    }
    for (int t = 0; t < MANY_THREADS; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < MANY_THREADS; t++) assert_int_equal(ms[t].failures, 0);
    store_batcher_stats s;
    store_batcher_stats_get(g, &s);
    print_message("%llu writes in %llu transactions (largest %llu)\n",
                  (unsigned long long)s.writes, (unsigned long long)s.commits,
                  (unsigned long long)s.max_batch);
    assert_int_equal(s.writes, MANY_THREADS * MANY_WRITES);
    assert_true(s.commits <= s.writes);
    store_batcher_free(g);
    assert_int_equal(count_jobs(f->path), MANY_THREADS * MANY_WRITES);
}

/* ---- SIGKILL while batches commit ---- */
#define CRASH_THREADS 6
#define CRASH_KILLS 25

typedef struct ack {
    int t;
    int k;
} ack;

typedef struct crash_thread {
    store_batcher *g;
    const char *path;
    int t, start, fd;
} crash_thread;

static void crash_name(int t, int k, char *out, size_t n)
{
    snprintf(out, n, "c%d-%d", t, k);
}

static void *crash_main(void *p)
{
    crash_thread *c = p;
    char err[512];
    store *st = store_open(c->path, NULL, err, sizeof err);
    if (!st) _exit(3);
    for (int k = c->start;; k++) {
        char name[32];
        crash_name(c->t, k, name, sizeof name);
        sub_write s;
        su_make_req(&s.b, "t0", name, 0);
        s.then_conflict = false;
        /* k == start may have been stored before the last kill without its
         * acknowledgement: then it is found (a client's retry) */
        store_rc rc = store_batcher_write(c->g, st, write_submit, &s);
        if (rc != STORE_OK && !(rc == STORE_EXISTS && k == c->start)) _exit(4);
        ack a = {c->t, k};
        if (write(c->fd, &a, sizeof a) != sizeof a) _exit(5);
    }
    return NULL;
}

static void crash_child(const char *path, const int *start, int fd)
{
    store_batcher *g = store_batcher_new(0);
    crash_thread cs[CRASH_THREADS];
    pthread_t th[CRASH_THREADS];
    for (int t = 0; t < CRASH_THREADS; t++) {
        cs[t] = (crash_thread){g, path, t, start[t], fd};
        pthread_create(&th[t], NULL, crash_main, &cs[t]);
    }
    for (int t = 0; t < CRASH_THREADS; t++) pthread_join(th[t], NULL);
    _exit(0);
}

/* Every acknowledged write of thread t (k < acked[t]) is there once; of
 * the others only the one in flight (k == acked[t]) may be. */
static void crash_check(const char *path, const int *acked, int kill_no, int *in_flight)
{
    store *st = open_store(path, NULL);
    assert_int_equal(store_check(st), STORE_OK);
    size_t expect = 0;
    for (int t = 0; t < CRASH_THREADS; t++) {
        for (int k = 0; k <= acked[t] + 1; k++) {
            char name[32];
            crash_name(t, k, name, sizeof name);
            store_job j;
            store_rc rc = store_job_find(st, "t0", name, &j);
            bool want = k < acked[t];
            if (want && rc != STORE_OK) fail_msg("kill %d: acknowledged %s is missing", kill_no, name);
            if (k > acked[t] && rc != STORE_NOT_FOUND)
                fail_msg("kill %d: %s is stored but was never sent", kill_no, name);
            if (k == acked[t] && rc == STORE_OK) (*in_flight)++;
            if (rc == STORE_OK) {
                store_event_list ev;
                assert_int_equal(store_events_list(st, j.id, 0, 0, &ev), STORE_OK);
                assert_int_equal(ev.n, 1);
                store_event_list_free(&ev);
                expect++;
            }
            store_job_clear(&j);
        }
    }
    store_close(st);
    assert_int_equal(count_jobs(path), expect); /* nothing else, nothing twice */
}

static void test_sigkill_during_batches(void **state)
{
    fx *f = *state;
    store_close(open_store(f->path, NULL));
    unsigned seed = (unsigned)time(NULL);
    print_message("seed %u\n", seed);
    int acked[CRASH_THREADS] = {0};
    int in_flight = 0;
    for (int i = 0; i < CRASH_KILLS; i++) {
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            crash_child(f->path, acked, fds[1]);
        }
        close(fds[1]);
        sleep_us(5000 + rand_r(&seed) % 40000);
        kill(pid, SIGKILL);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
            fail_msg("kill %d: the child ended by itself (status %d)", i, status);
        ack a;
        ssize_t r;
        while ((r = read(fds[0], &a, sizeof a)) == sizeof a) {
            assert_true(a.t >= 0 && a.t < CRASH_THREADS);
            assert_int_equal(a.k, acked[a.t]); /* each thread acknowledges in order */
            acked[a.t] = a.k + 1;
        }
        assert_int_equal(r, 0);
        close(fds[0]);
        crash_check(f->path, acked, i, &in_flight);
    }
    int total = 0;
    for (int t = 0; t < CRASH_THREADS; t++) total += acked[t];
    print_message("%d kills, %d writes acknowledged, %d found stored without their "
                  "acknowledgement\n", CRASH_KILLS, total, in_flight);
    assert_true(total >= CRASH_KILLS); /* the children got work done between kills */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_alone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_with_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_identical_in_one_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_commit_fails_all, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_threads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigkill_during_batches, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
