/* test_store_audit.c: the audit table (schema version 3): rows appended
 * with the store's clock or their own time, read newest first with the
 * since / team / limit filters, an invalid row refused, a row written in
 * a caller's transaction that rolls back gone with it, and a database of
 * version 2 (before the table) upgraded in place with its jobs kept. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "store_test_util.h"

#include <sqlite3.h>

typedef struct fx {
    su_db db;
    double now; /* the store's clock */
} fx;

static double fixed_clock(void *ctx)
{
    return ((fx *)ctx)->now;
}

static int setup(void **state)
{
    fx *f = xcalloc(1, sizeof *f);
    if (!su_db_open(&f->db)) return -1;
    f->now = 1000;
    store_set_clock(f->db.st, fixed_clock, f);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    su_db_close(&f->db);
    free(f);
    return 0;
}

static void append(fx *f, const char *actor, const char *team, const char *method,
                   const char *path, int status, const char *detail)
{
    store_audit a = {.actor = (char *)actor, .team = (char *)team,
                     .address = (char *)"127.0.0.1:40000", .method = (char *)method,
                     .path = (char *)path, .target = (char *)"job-1", .status = status,
                     .detail = (char *)detail};
    assert_int_equal(store_audit_append(f->db.st, &a), STORE_OK);
    f->now += 10;
}

static void test_append_and_list(void **state)
{
    fx *f = *state;
    append(f, "alice", "team-a", "POST", "/v1/jobs", 201, "created job 1");
    append(f, "bob", "team-b", "DELETE", "/v1/jobs/job-1", 403, "scope read");
    append(f, "admin", NULL, "POST", "/v1/jobs/job-1/cancel", 200, NULL);
    append(f, "sighup", NULL, "SIGHUP", "/etc/tokens.yaml", 200, "3 tokens");
    store_audit *l;
    size_t n;
    assert_int_equal(store_audit_list(f->db.st, NULL, &l, &n), STORE_OK);
    assert_int_equal(n, 4);
    /* newest first, every column back */
    assert_string_equal(l[0].actor, "sighup");
    assert_string_equal(l[0].method, "SIGHUP");
    assert_null(l[0].team);
    assert_string_equal(l[3].actor, "alice");
    assert_string_equal(l[3].team, "team-a");
    assert_string_equal(l[3].address, "127.0.0.1:40000");
    assert_string_equal(l[3].path, "/v1/jobs");
    assert_string_equal(l[3].target, "job-1");
    assert_string_equal(l[3].detail, "created job 1");
    assert_int_equal(l[3].status, 201);
    assert_true(l[3].at == 1000);
    assert_true(l[0].id > l[1].id && l[1].id > l[2].id && l[2].id > l[3].id);
    assert_null(l[1].detail);
    store_audit_free(l, n);

    /* since, team and limit */
    assert_int_equal(store_audit_list(f->db.st, &(store_audit_filter){.since = 1010}, &l, &n),
                     STORE_OK);
    assert_int_equal(n, 3);
    assert_string_equal(l[2].actor, "bob");
    store_audit_free(l, n);
    assert_int_equal(store_audit_list(f->db.st, &(store_audit_filter){.team = "team-b"}, &l, &n),
                     STORE_OK);
    assert_int_equal(n, 1);
    assert_string_equal(l[0].actor, "bob");
    assert_int_equal(l[0].status, 403);
    store_audit_free(l, n);
    assert_int_equal(store_audit_list(f->db.st, &(store_audit_filter){.limit = 2}, &l, &n), STORE_OK);
    assert_int_equal(n, 2);
    assert_string_equal(l[1].actor, "admin");
    store_audit_free(l, n);
    assert_int_equal(store_audit_list(f->db.st, &(store_audit_filter){.since = 5000}, &l, &n),
                     STORE_OK);
    assert_int_equal(n, 0);
    assert_null(l);

    /* a time of its own is kept */
    store_audit a = {.actor = (char *)"x", .method = (char *)"POST", .at = 42};
    assert_int_equal(store_audit_append(f->db.st, &a), STORE_OK);
    assert_int_equal(store_audit_list(f->db.st, &(store_audit_filter){.limit = 1}, &l, &n), STORE_OK);
    assert_true(l[0].at == 42);
    assert_string_equal(l[0].path, "");
    store_audit_free(l, n);
}

static void test_invalid_and_rollback(void **state)
{
    fx *f = *state;
    store_audit a = {.method = (char *)"POST"};
    assert_int_equal(store_audit_append(f->db.st, &a), STORE_INVALID);
    assert_non_null(strstr(store_error(f->db.st), "actor"));
    a = (store_audit){.actor = (char *)"alice"};
    assert_int_equal(store_audit_append(f->db.st, &a), STORE_INVALID);
    assert_int_equal(store_audit_append(f->db.st, NULL), STORE_INVALID);
    /* inside a transaction that rolls back: not written */
    assert_int_equal(store_tx_begin(f->db.st), STORE_OK);
    append(f, "alice", "team-a", "POST", "/v1/jobs", 201, NULL);
    store_tx_rollback(f->db.st);
    store_audit *l;
    size_t n;
    assert_int_equal(store_audit_list(f->db.st, NULL, &l, &n), STORE_OK);
    assert_int_equal(n, 0);
    /* and one that commits: written */
    assert_int_equal(store_tx_begin(f->db.st), STORE_OK);
    append(f, "alice", "team-a", "POST", "/v1/jobs", 201, NULL);
    assert_int_equal(store_tx_commit(f->db.st), STORE_OK);
    assert_int_equal(store_audit_list(f->db.st, NULL, &l, &n), STORE_OK);
    assert_int_equal(n, 1);
    store_audit_free(l, n);
}

static int sql_int(const char *path, const char *sql)
{
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *s;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    int v = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(db);
    return v;
}

/* A database as version 2 wrote it (no audit table nor what version 4
 * added, user_version 2) with a job in it: opening it migrates to the
 * current version and keeps the job. */
static void test_upgrade_from_version_2(void **state)
{
    fx *f = *state;
    su_req b;
    su_make_req(&b, "team-a", "old-job", 0);
    int64_t id = 0;
    assert_int_equal(store_submit(f->db.st, &b.r, &id), STORE_OK);
    store_close(f->db.st);
    f->db.st = NULL;
    sqlite3 *db;
    assert_int_equal(sqlite3_open(f->db.path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "DROP INDEX audit_team; DROP INDEX audit_at; DROP TABLE audit;"
                                  " " SU_UNDO_V4 " PRAGMA user_version = 2",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(sql_int(f->db.path, "SELECT count(*) FROM sqlite_schema WHERE name = 'audit'"), 0);

    char err[512];
    f->db.st = store_open(f->db.path, NULL, err, sizeof err);
    assert_non_null(f->db.st);
    assert_int_equal(sql_int(f->db.path, "PRAGMA user_version"), store_schema_version());
    assert_int_equal(sql_int(f->db.path, "SELECT count(*) FROM sqlite_schema WHERE name = 'audit'"), 1);
    store_job j;
    assert_int_equal(store_job_get(f->db.st, id, &j), STORE_OK);
    assert_string_equal(j.name, "old-job");
    store_job_clear(&j);
    store_audit a = {.actor = (char *)"alice", .method = (char *)"POST", .path = (char *)"/v1/jobs",
                     .status = 201};
    assert_int_equal(store_audit_append(f->db.st, &a), STORE_OK);
    store_audit *l;
    size_t n;
    assert_int_equal(store_audit_list(f->db.st, NULL, &l, &n), STORE_OK);
    assert_int_equal(n, 1);
    store_audit_free(l, n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_append_and_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_and_rollback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upgrade_from_version_2, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
