/* test_ratelimit.c: the pure parts of the API's defences, without a
 * server: the token bucket (burst, refill, the wait it reports, a clock
 * that goes back, no limit), the table of buckets (a bucket per key,
 * Retry-After in whole seconds of at least 1, the refused counter by
 * label, eviction when full), token lookup (scope and admin from the
 * spec, unknown / expired / none), and the token table swapped while
 * threads hold and read references (no torn read, nothing freed early:
 * the ASan build checks). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "server/srv_internal.h"

#include <string.h>

static void test_bucket(void **state)
{
    (void)state;
    srv_bucket b = {0};
    /* a new bucket holds the burst */
    for (int i = 0; i < 5; i++) assert_true(srv_bucket_take(&b, 2, 5, 100) == 0);
    double wait = srv_bucket_take(&b, 2, 5, 100);
    assert_true(wait > 0.49 && wait < 0.51); /* one request per 0.5 s */
    /* refilled at the rate */
    assert_true(srv_bucket_take(&b, 2, 5, 100.5) == 0);
    assert_true(srv_bucket_take(&b, 2, 5, 100.5) > 0);
    /* never more than the burst, however long it rested */
    for (int i = 0; i < 5; i++) assert_true(srv_bucket_take(&b, 2, 5, 1000) == 0);
    assert_true(srv_bucket_take(&b, 2, 5, 1000) > 0);
    /* a clock that goes back refills nothing */
    assert_true(srv_bucket_take(&b, 2, 5, 900) > 0);
    /* no limit */
    srv_bucket c = {0};
    for (int i = 0; i < 1000; i++) assert_true(srv_bucket_take(&c, 0, 1, 1) == 0);
    /* a slow rate: the wait is long */
    srv_bucket d = {0};
    assert_true(srv_bucket_take(&d, 0.1, 1, 0) == 0);
    wait = srv_bucket_take(&d, 0.1, 1, 0);
    assert_true(wait > 9.9 && wait < 10.1);
}

static void key_of(const char *s, unsigned char key[32])
{
    srv_sha256(s, strlen(s), key);
}

static void test_table(void **state)
{
    (void)state;
    srv_ratelimit rl;
    srv_ratelimit_init(&rl, 0.4, 2, 3);
    unsigned char a[32], b[32];
    key_of("a", a);
    key_of("b", b);
    int retry = -1;
    assert_true(srv_ratelimit_take(&rl, a, "alice", 10, &retry));
    assert_int_equal(retry, 0);
    assert_true(srv_ratelimit_take(&rl, a, "alice", 10, &retry));
    assert_false(srv_ratelimit_take(&rl, a, "alice", 10, &retry));
    assert_int_equal(retry, 3); /* 2.5 s, rounded up to whole seconds */
    /* b has its own bucket */
    assert_true(srv_ratelimit_take(&rl, b, "bob", 10, &retry));
    /* Retry-After is at least 1 */
    assert_false(srv_ratelimit_take(&rl, a, "alice", 12.4, &retry));
    assert_int_equal(retry, 1);
    assert_true(srv_ratelimit_take(&rl, a, "alice", 12.5, &retry));
    sb out;
    sb_init(&out);
    srv_ratelimit_metrics(&rl, &out);
    assert_non_null(strstr(sb_str(&out), "lathe_http_rate_limited_total{token=\"alice\"} 2\n"));
    assert_null(strstr(sb_str(&out), "bob"));
    sb_free(&out);
    /* full (3 buckets): a full bucket goes first, and a key that comes
     * back starts full */
    unsigned char k[32];
    for (int i = 0; i < 10; i++) {
        char name[16];
        snprintf(name, sizeof name, "addr-%d", i);
        key_of(name, k);
        assert_true(srv_ratelimit_take(&rl, k, "unknown", 20 + i, &retry));
        assert_true(rl.n <= 3);
    }
    srv_ratelimit_free(&rl);
    /* rate 0: no limit and no bucket */
    srv_ratelimit_init(&rl, 0, 1, 4);
    for (int i = 0; i < 100; i++) assert_true(srv_ratelimit_take(&rl, a, "alice", 1, &retry));
    assert_int_equal(rl.n, 0);
    srv_ratelimit_free(&rl);
}

static void test_auth(void **state)
{
    (void)state;
    char hr[65], hs_[65], ha[65], he[65];
    srv_hash_token("t-read", hr);
    srv_hash_token("t-submit", hs_);
    srv_hash_token("t-admin", ha);
    srv_hash_token("t-expired", he);
    spec_server_token spec[] = {
        {.name = "r", .sha256 = hr, .team = "team-a", .scope = "read"},
        {.name = "s", .sha256 = hs_, .team = "team-a"},
        {.name = "a", .sha256 = ha, .admin = true},
        {.name = "e", .sha256 = he, .team = "team-a", .expires_at = 1000},
    };
    srv_token *items = NULL;
    size_t n = 0;
    srv_tokens_add_spec(&items, &n, spec, 4);
    assert_int_equal(n, 4);
    assert_int_equal(items[0].scope, SRV_SCOPE_READ);
    assert_false(items[0].admin);
    assert_int_equal(items[1].scope, SRV_SCOPE_SUBMIT);
    assert_int_equal(items[2].scope, SRV_SCOPE_ADMIN);
    assert_true(items[2].admin);
    assert_string_equal(srv_scope_name(items[0].scope), "read");
    srv_token_table t;
    srv_token_table_init(&t, items, n);
    srv_token_list_free(items, n);
    srv_tokens *x = srv_token_table_get(&t);
    const srv_token *tok;
    assert_int_equal(srv_auth_check(x, "Bearer t-read", 500, &tok), SRV_AUTH_OK);
    assert_string_equal(tok->name, "r");
    assert_int_equal(srv_auth_check(x, "bearer  t-admin  ", 500, &tok), SRV_AUTH_OK);
    assert_string_equal(tok->name, "a");
    assert_int_equal(srv_auth_check(x, "Bearer t-expired", 999, &tok), SRV_AUTH_OK);
    assert_int_equal(srv_auth_check(x, "Bearer t-expired", 1000, &tok), SRV_AUTH_EXPIRED);
    assert_string_equal(tok->name, "e");
    assert_int_equal(srv_auth_check(x, "Bearer t-other", 500, &tok), SRV_AUTH_UNKNOWN);
    assert_null(tok);
    assert_int_equal(srv_auth_check(x, "Basic dXNlcg==", 500, &tok), SRV_AUTH_NONE);
    assert_int_equal(srv_auth_check(x, "Bearer ", 500, &tok), SRV_AUTH_NONE);
    assert_int_equal(srv_auth_check(x, NULL, 500, &tok), SRV_AUTH_NONE);
    /* a swap while x is held: x and its tokens stay valid */
    assert_int_equal(srv_auth_check(x, "Bearer t-read", 500, &tok), SRV_AUTH_OK);
    srv_token_table_swap(&t, xcalloc(1, sizeof(srv_token)), 0);
    assert_string_equal(tok->name, "r");
    srv_tokens *y = srv_token_table_get(&t);
    assert_int_equal(srv_auth_check(y, "Bearer t-read", 500, &tok), SRV_AUTH_UNKNOWN);
    srv_token_table_put(&t, y);
    srv_token_table_put(&t, x); /* the last reference: freed here */
    srv_token_table_free(&t);
}

/* Readers take the table, look a token up and read its name while a
 * writer swaps tables as fast as it can. */
typedef struct race {
    srv_token_table *t;
    atomic_bool stop;
    atomic_long reads;
} race;

static void *reader(void *arg)
{
    race *r = arg;
    while (!atomic_load(&r->stop)) {
        srv_tokens *x = srv_token_table_get(r->t);
        const srv_token *tok;
        if (srv_auth_check(x, "Bearer t-1", 0, &tok) == SRV_AUTH_OK) {
            /* every table of the writer holds t-1 named "one" */
            if (strcmp(tok->name, "one") != 0) abort();
        } else {
            abort();
        }
        srv_token_table_put(r->t, x);
        atomic_fetch_add(&r->reads, 1);
    }
    return NULL;
}

static srv_token *table_of(size_t gen, size_t *n)
{
    char h1[65], h2[65], other[32];
    srv_hash_token("t-1", h1);
    snprintf(other, sizeof other, "t-gen-%zu", gen);
    srv_hash_token(other, h2);
    spec_server_token spec[] = {{.name = "one", .sha256 = h1, .team = "team-a"},
                                {.name = "gen", .sha256 = h2, .team = "team-b"}};
    srv_token *items = NULL;
    *n = 0;
    srv_tokens_add_spec(&items, n, spec, 2);
    return items;
}

static void test_swap_race(void **state)
{
    (void)state;
    srv_token_table t;
    size_t n;
    srv_token *items = table_of(0, &n);
    srv_token_table_init(&t, items, n);
    srv_token_list_free(items, n);
    race r = {.t = &t};
    atomic_init(&r.stop, false);
    atomic_init(&r.reads, 0);
    pthread_t th[4];
    for (int i = 0; i < 4; i++) assert_int_equal(pthread_create(&th[i], NULL, reader, &r), 0);
    for (size_t gen = 1; gen <= 2000; gen++) {
        items = table_of(gen, &n);
        srv_token_table_swap(&t, items, n);
    }
    atomic_store(&r.stop, true);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    assert_true(atomic_load(&r.reads) > 0);
    srv_token_table_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bucket),
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_auth),
        cmocka_unit_test(test_swap_race),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
