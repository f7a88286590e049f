/* test_policy.c: the policy part (lib/policy): paths resolved as the
 * kernel would (links, "..", loops, a missing tail, a root that is a link),
 * the component-wise prefix, and the compiled policy's checks of a job's
 * paths, commands, images and users, each refusal naming the field, the
 * path, what it resolved to and the rule. Every case builds its own tree
 * under a temporary folder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "policy/policy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmp[64];

/* tmp + "/" + rel; caller frees */
static char *at(const char *rel)
{
    return xasprintf("%s/%s", tmp, rel);
}

static void mkdir_at(const char *rel)
{
    char *p = at(rel);
    assert_int_equal(mkdir(p, 0755), 0);
    free(p);
}

static void touch_at(const char *rel)
{
    char *p = at(rel);
    assert_int_equal(file_write_atomic(p, "x", 1), 0);
    free(p);
}

static void link_at(const char *target, const char *rel)
{
    char *p = at(rel);
    assert_int_equal(symlink(target, p), 0);
    free(p);
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmp, sizeof tmp, "/tmp/lathe-policy-XXXXXX");
    if (!mkdtemp(tmp)) return -1;
    /* mkdtemp's folder may sit under a link (/tmp on some systems): use
     * the resolved name so that expectations are exact */
    char *real = realpath(tmp, NULL);
    snprintf(tmp, sizeof tmp, "%s", real);
    free(real);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char err[256];
    return file_remove_tree(tmp, err, sizeof err) == 0 ? 0 : -1;
}

/* resolve and compare with tmp-relative expectation */
static void expect_resolved(const char *path, const char *want_rel)
{
    char *out = NULL, why[256];
    policy_rc rc = policy_resolve(tmp, path, &out, why, sizeof why);
    if (rc != POLICY_OK) fprintf(stderr, "%s: %s\n", path, why);
    assert_int_equal(rc, POLICY_OK);
    char *want = want_rel[0] == '/' ? xstrdup(want_rel) : at(want_rel);
    assert_string_equal(out, want);
    free(want);
    free(out);
}

/* ---- paths ---- */
static void test_normalize(void **state)
{
    (void)state;
    struct {
        const char *base, *path, *want;
    } cases[] = {
        {NULL, "/", "/"},
        {NULL, "/a/b", "/a/b"},
        {NULL, "//a///b/", "/a/b"},
        {NULL, "/a/./b/.", "/a/b"},
        {NULL, "/a/../../..", "/"},
        {NULL, "/a/b/../c", "/a/c"},
        {"/srv", "x/y", "/srv/x/y"},
        {"/srv/", "../etc", "/etc"},
        {"/", ".", "/"},
        {NULL, "/..a/.b/...", "/..a/.b/..."},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *n = policy_normalize(cases[i].base, cases[i].path);
        assert_non_null(n);
        assert_string_equal(n, cases[i].want);
        char *again = policy_normalize(NULL, n); /* idempotent */
        assert_string_equal(again, n);
        free(again);
        free(n);
    }
    assert_null(policy_normalize("/srv", ""));
    assert_null(policy_normalize(NULL, "relative"));
    assert_null(policy_normalize("relative", "x"));
    assert_null(policy_normalize("/srv", "a\nb"));
    assert_null(policy_normalize(NULL, NULL));
}

static void test_under(void **state)
{
    (void)state;
    assert_true(policy_path_under("/data", "/data"));
    assert_true(policy_path_under("/data/x", "/data"));
    assert_false(policy_path_under("/database", "/data"));
    assert_false(policy_path_under("/dat", "/data"));
    assert_true(policy_path_under("/anything", "/"));
    assert_true(policy_path_under("/data/x", "/data/"));
    assert_false(policy_path_under("data/x", "/data"));
    assert_false(policy_path_under("/data", "/data/x"));
    assert_string_equal(policy_rc_name(POLICY_E_DENIED), "denied");
    assert_string_equal(policy_rc_name(POLICY_E_OUTSIDE), "outside");
    assert_string_equal(policy_rc_name(POLICY_OK), "ok");
}

static void test_resolve(void **state)
{
    (void)state;
    mkdir_at("r");
    mkdir_at("r/data");
    mkdir_at("r/data/sub");
    touch_at("r/data/sub/f.jsonl");
    mkdir_at("r/other");
    touch_at("r/other/secret");
    link_at("../other", "r/data/up");           /* relative link out */
    link_at("sub/f.jsonl", "r/data/alias");     /* relative link inside */
    char *abs_other = at("r/other/secret");
    link_at(abs_other, "r/data/abs");           /* absolute link out */
    free(abs_other);
    link_at("loop-b", "r/data/loop-a");         /* a loop */
    link_at("loop-a", "r/data/loop-b");
    link_at("data", "r/data-link");             /* a root that is a link */

    expect_resolved("r/data/sub/f.jsonl", "r/data/sub/f.jsonl");
    expect_resolved("r/data/alias", "r/data/sub/f.jsonl");
    expect_resolved("r/data/up/secret", "r/other/secret");
    expect_resolved("r/data/abs", "r/other/secret");
    expect_resolved("r/data-link/sub", "r/data/sub");
    /* ".." after a link is the parent of the link's target, as the kernel does */
    expect_resolved("r/data/up/../data/sub", "r/data/sub");
    /* a file in the middle: the rest cannot exist, kept as written */
    expect_resolved("r/data/alias/x", "r/data/sub/f.jsonl/x");
    /* lexical ".." escaping */
    expect_resolved("r/data/../other/secret", "r/other/secret");
    /* a tail that does not exist yet: appended, normalised */
    expect_resolved("r/data/new/./later/../file", "r/data/new/file");
    expect_resolved("r/data-link/new", "r/data/new");
    /* absolute input ignores the base */
    expect_resolved("/", "/");

    char *out = (char *)1, why[256];
    assert_int_equal(policy_resolve(tmp, "r/data/loop-a/x", &out, why, sizeof why),
                     POLICY_E_INVALID);
    assert_null(out);
    assert_non_null(strstr(why, "a loop of symbolic links"));
    assert_int_equal(policy_resolve(tmp, "", &out, why, sizeof why), POLICY_E_INVALID);
    assert_non_null(strstr(why, "empty"));
    assert_int_equal(policy_resolve(NULL, "rel", &out, why, sizeof why), POLICY_E_INVALID);
    assert_int_equal(policy_resolve(tmp, "a\tb", &out, why, sizeof why), POLICY_E_INVALID);
    char *lng = xcalloc(5000, 1);
    memset(lng, 'a', 4999);
    lng[0] = '/';
    assert_int_equal(policy_resolve(tmp, lng, &out, why, sizeof why), POLICY_E_INVALID);
    free(lng);
}

/* A folder the server cannot search is an I/O refusal, never "missing".
 * Root passes every permission check: as root the check runs in a child
 * that has become nobody (65534). */
static void test_resolve_eacces(void **state)
{
    (void)state;
    mkdir_at("closed");
    touch_at("closed/f");
    char *p = at("closed");
    assert_int_equal(chmod(p, 0), 0);
    assert_int_equal(chmod(tmp, 0755), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(3);
        char *out = NULL, why[256];
        policy_rc rc = policy_resolve(tmp, "closed/f", &out, why, sizeof why);
        _exit(rc == POLICY_E_IO && strstr(why, "permission denied") && !out ? 0 : 1);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_int_equal(chmod(p, 0755), 0);
    free(p);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_normalize),
        cmocka_unit_test(test_under),
        cmocka_unit_test_setup_teardown(test_resolve, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resolve_eacces, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
