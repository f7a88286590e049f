/* fuzz_policy_path.c: libFuzzer target for the policy's path checker
 * (lib/policy/policy_path.c). The input is one or two paths (split at the
 * first NUL byte). Properties, each a finding (__builtin_trap) when broken:
 *   - policy_normalize is idempotent, and its output is absolute with no
 *     "//", "/./", "/../", no trailing "/" (but "/") and no "." or ".."
 *     component;
 *   - policy_path_under(a, b) holds exactly when b is a or one of a's
 *     ancestors (walked one component at a time), for normalised a and b;
 *   - policy_resolve never crashes on any bytes, and what it returns is
 *     normalised and absolute, or a sentence saying why not.
 * The relative paths start in a temporary folder holding links: out of a
 * root, absolute, to "/", a loop of two, a chain, one to itself. See
 * docs/fuzzing.md. */
#include "policy/policy.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char base[64];

static void remove_base(void)
{
    char err[256];
    file_remove_tree(base, err, sizeof err);
}

static void make_tree(void)
{
    snprintf(base, sizeof base, "/tmp/lathe-fuzz-policy-XXXXXX");
    if (!mkdtemp(base)) __builtin_trap();
    char *real = realpath(base, NULL);
    snprintf(base, sizeof base, "%s", real);
    free(real);
    atexit(remove_base);
    static const char *const dirs[] = {"data", "data/sub", "other", "jobs", "jobs/1"};
    static const char *const links[][2] = {
        {"../other", "data/up"},   {"/", "data/root"},   {"loop-b", "data/loop-a"},
        {"loop-a", "data/loop-b"}, {"self", "data/self"}, {"sub", "data/c1"},
        {"c1", "data/c2"},         {"../../jobs/1", "data/sub/job"},
        {"data", "data-link"},
    };
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char *p = path_join(base, dirs[i]);
        if (mkdir(p, 0755) != 0) __builtin_trap();
        free(p);
    }
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
        char *p = path_join(base, links[i][1]);
        if (symlink(links[i][0], p) != 0) __builtin_trap();
        free(p);
    }
    char *abs_target = path_join(base, "other");
    char *p = path_join(base, "data/abs");
    if (symlink(abs_target, p) != 0) __builtin_trap();
    free(p);
    free(abs_target);
}

/* Absolute, "/" or components that are neither empty, "." nor "..". */
static void check_normal(const char *n)
{
    if (!n || n[0] != '/') __builtin_trap();
    if (!n[1]) return;
    size_t len = strlen(n);
    if (n[len - 1] == '/') __builtin_trap();
    if (strstr(n, "//") || strstr(n, "/./") || strstr(n, "/../")) __builtin_trap();
    if ((len >= 2 && strcmp(n + len - 2, "/.") == 0) ||
        (len >= 3 && strcmp(n + len - 3, "/..") == 0))
        __builtin_trap();
    char *again = policy_normalize(NULL, n);
    if (!again || strcmp(again, n) != 0) __builtin_trap();
    free(again);
}

/* b is a or an ancestor of a, found by dropping a's last components. */
static bool ancestor(const char *a, const char *b)
{
    char *cur = xstrdup(a);
    bool found = false;
    for (;;) {
        if (strcmp(cur, b) == 0) {
            found = true;
            break;
        }
        if (strcmp(cur, "/") == 0) break;
        char *slash = strrchr(cur, '/');
        if (slash == cur) slash[1] = '\0';
        else *slash = '\0';
    }
    free(cur);
    return found;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!base[0]) make_tree();
    if (size > 16384) return 0;
    char *buf = xcalloc(size + 2, 1);
    memcpy(buf, data, size);
    const char *p1 = buf;
    const char *p2 = buf + strlen(buf) + 1; /* after the first NUL, or "" */
    if (p2 > buf + size) p2 = buf + size;

    char *a = policy_normalize(base, p1), *b = policy_normalize(base, p2);
    if (a) {
        check_normal(a);
        if (!policy_path_under(a, a) || !policy_path_under(a, "/")) __builtin_trap();
    }
    if (b) check_normal(b);
    if (a && b) {
        bool under = policy_path_under(a, b);
        if (under != ancestor(a, b)) __builtin_trap();
        if (under && policy_path_under(b, a) && strcmp(a, b) != 0) __builtin_trap();
    }

    char *out = (char *)1, why[512];
    why[0] = 'x';
    policy_rc rc = policy_resolve(base, p1, &out, why, sizeof why);
    if (rc == POLICY_OK) {
        check_normal(out);
        free(out);
    } else {
        if (out || !why[0] || rc == POLICY_E_OUTSIDE || rc == POLICY_E_DENIED) __builtin_trap();
        (void)policy_rc_name(rc);
    }
    free(a);
    free(b);
    free(buf);
    return 0;
}
