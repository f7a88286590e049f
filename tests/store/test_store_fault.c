/* test_store_fault.c: the store under injected faults (store_fault.h), in
 * the SQLite style: for every write and every sync an operation makes, one
 * run fails exactly there (once, or from there on; as an I/O error or a
 * full disk) and one run "crashes the machine" there. After each run the
 * database, reopened with the default VFS, must pass the integrity check
 * and hold exactly a prefix of the workload (store_test_util.h): every
 * acknowledged operation, never half of one. A failed write must be
 * reported, and the store must keep working once the disk does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "store/store_fault.h"
#include "store_test_util.h"

#include <sqlite3.h>

typedef struct fx {
    char *dir;
    store_fault *fault;
    int run; /* a fresh database file per run */
} fx;

static int setup(void **state)
{
    fx *f = xcalloc(1, sizeof *f);
    f->dir = su_tempdir_fast();
    f->fault = store_fault_new("lathe-fault");
    if (!f->fault) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    store_fault_free(f->fault);
    su_rmdir(f->dir);
    free(f);
    return 0;
}

static char *fresh_path(fx *f)
{
    char name[32];
    snprintf(name, sizeof name, "run-%d.db", f->run++);
    return path_join(f->dir, name);
}

static store *open_fault(fx *f, const char *path)
{
    char err[512];
    store_options o = {.vfs = store_fault_vfs_name(f->fault)};
    store *st = store_open(path, &o, err, sizeof err);
    if (!st) fail_msg("open through the fault VFS: %s", err);
    return st;
}

/* Reopens with the default VFS and returns the prefix the file holds. */
static long reopen_check(const char *path, long max_ops)
{
    char err[512], why[512];
    store *st = store_open(path, NULL, err, sizeof err);
    if (!st) fail_msg("reopen %s: %s", path, err);
    long applied = su_check(st, max_ops, why, sizeof why);
    if (applied < 0) fail_msg("%s: %s", path, why);
    store_close(st);
    return applied;
}

static void apply_ops(store *st, long from, long to)
{
    for (long k = from; k < to; k++)
        if (su_op(st, k) != STORE_OK) fail_msg("op %ld: %s", k, store_error(st));
}

/* One run: ops 0..k-1 succeed, then op k meets the armed fault at its nth
 * write or sync. Returns false when op k made fewer than n of them (the
 * fault did not fire: every position has been tried). */
static bool fault_run(fx *f, long k, store_fault_kind kind, long n, bool persistent)
{
    char *path = fresh_path(f);
    store *st = open_fault(f, path);
    apply_ops(st, 0, k);
    store_fault_arm(f->fault, kind, n, persistent, 0);
    store_rc rc = su_op(st, k);
    store_fault_disarm(f->fault);
    bool fired = store_fault_fired(f->fault);
    if (fired && kind != STORE_FAULT_SYNC && rc == STORE_OK)
        fail_msg("op %ld: a failed write (#%ld) was not reported", k, n);
    if (!fired) assert_int_equal(rc, STORE_OK);
    if (rc != STORE_OK) assert_int_equal(rc, STORE_ERROR);
    /* The same handle goes on working once the disk does. */
    char why[512];
    long now = su_check(st, k + 2, why, sizeof why);
    if (now < 0) fail_msg("op %ld, fault #%ld: %s", k, n, why);
    if (now == k) assert_int_equal(su_op(st, k), STORE_OK);
    assert_int_equal(su_op(st, k + 1), STORE_OK);
    store_close(st);
    assert_int_equal(reopen_check(path, k + 2), k + 2);
    free(path);
    return fired;
}

static void fault_sweep(fx *f, store_fault_kind kind)
{
    int runs = 0;
    for (long k = 0; k < 2 * SU_PHASES; k++)
        for (int persistent = 0; persistent < 2; persistent++)
            for (long n = 1; fault_run(f, k, kind, n, persistent); n++) runs++;
    print_message("%d runs with a fault\n", runs);
    assert_true(runs > 2 * SU_PHASES);
}

static void test_write_errors(void **state)
{
    fault_sweep(*state, STORE_FAULT_WRITE);
}

static void test_disk_full(void **state)
{
    fault_sweep(*state, STORE_FAULT_FULL);
}

/* A failed sync is reported too. The transaction may still reach the disk
 * (its frames were written; only the flush failed), so after a reopen it is
 * present or absent as a whole: fault_run checks exactly that. */
static void test_sync_errors(void **state)
{
    fault_sweep(*state, STORE_FAULT_SYNC);
}

/* One crash run: the workload runs through the fault VFS until the armed
 * crash; whatever was acknowledged must be in the file afterwards, and at
 * most the operation in flight besides. The fault stays armed while the
 * handle closes, so the last runs crash inside the checkpoint that moves
 * the WAL into the database file. Returns false when the workload and the
 * close ended before the nth write / sync. */
static bool crash_run(fx *f, store_fault_kind kind, long n, uint64_t seed, long ops)
{
    char *path = fresh_path(f);
    store *st = open_fault(f, path);
    store_fault_arm(f->fault, kind, n, false, seed);
    long acked = 0;
    while (acked < ops && su_op(st, acked) == STORE_OK) acked++;
    bool during_ops = store_fault_crashed(f->fault);
    store_close(st);
    bool crashed = store_fault_crashed(f->fault);
    store_fault_disarm(f->fault);
    long applied = reopen_check(path, ops + 1);
    if (applied < acked || applied > acked + 1)
        fail_msg("crash at %s #%ld (seed %llu): %ld acknowledged, %ld in the file",
                 kind == STORE_FAULT_CRASH_SYNC ? "sync" : "write", n,
                 (unsigned long long)seed, acked, applied);
    if (!during_ops) assert_int_equal(acked, ops);
    free(path);
    return crashed;
}

static void crash_sweep(fx *f, store_fault_kind kind)
{
    const long ops = 3 * SU_PHASES;
    int runs = 0;
    for (long n = 1;; n++) {
        bool a = crash_run(f, kind, n, 0, ops);
        bool b = crash_run(f, kind, n, 0x9e3779b97f4a7c15ull * (uint64_t)n, ops);
        runs += a + b;
        if (!a && !b) break;
    }
    print_message("%d crash runs\n", runs);
    assert_true(runs > ops);
}

static void test_crash_at_each_write(void **state)
{
    crash_sweep(*state, STORE_FAULT_CRASH_WRITE);
}

static void test_crash_at_each_sync(void **state)
{
    crash_sweep(*state, STORE_FAULT_CRASH_SYNC);
}

/* Creating the schema fails at each write: the file then has no schema at
 * all or all of it, never a part. */
static void test_migration_all_or_nothing(void **state)
{
    fx *f = *state;
    int failures = 0;
    for (long n = 1;; n++) {
        char *path = fresh_path(f);
        store_fault_arm(f->fault, STORE_FAULT_WRITE, n, true, 0);
        char err[512];
        store_options o = {.vfs = store_fault_vfs_name(f->fault)};
        store *st = store_open(path, &o, err, sizeof err);
        bool fired = store_fault_fired(f->fault);
        store_fault_disarm(f->fault);
        if (fired) assert_null(st);
        store_close(st);
        sqlite3 *db;
        assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
        sqlite3_stmt *s;
        assert_int_equal(sqlite3_prepare_v2(db,
                                            "SELECT (SELECT user_version FROM pragma_user_version),"
                                            " (SELECT count(*) FROM sqlite_schema)",
                                            -1, &s, NULL),
                         SQLITE_OK);
        assert_int_equal(sqlite3_step(s), SQLITE_ROW);
        int version = sqlite3_column_int(s, 0), objects = sqlite3_column_int(s, 1);
        sqlite3_finalize(s);
        sqlite3_close(db);
        if (version == 0) assert_int_equal(objects, 0);
        else assert_int_equal(version, store_schema_version());
        /* And a later open finishes the job. */
        st = store_open(path, NULL, err, sizeof err);
        assert_non_null(st);
        assert_int_equal(store_check(st), STORE_OK);
        store_close(st);
        free(path);
        if (!fired) break;
        failures++;
    }
    assert_true(failures > 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_write_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disk_full, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sync_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crash_at_each_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crash_at_each_sync, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migration_all_or_nothing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
