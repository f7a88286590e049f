/* test_spec_cases.c: spec files as data, curl style. Every
 * tests/spec/data/invalid/NAME.yaml must fail to load and every
 * tests/spec/data/valid/NAME.yaml must load without errors; NAME.expect
 * (optional for valid files) lists every error and warning the file must
 * give, one per line:
 *
 *     # comment
 *     error 9:11 spec.lora.rank | out of range | LoRA ranks are usually
 *     warning 10:5 spec.lora | the lora settings are ignored
 *     docs 1
 *
 * LEVEL LINE:COL PATH (- for none), then "|"-separated texts that must all
 * appear in the formatted diagnostic (message, expected, found, hint).
 * Diagnostics the file does not list fail the test, so do missing ones.
 * "docs N" checks how many documents loaded cleanly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "spec/spec.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct expect {
    diag_level level;
    int line, col;
    char path[200];
    char **texts;
    size_t n_texts;
    bool matched;
} expect;

static void expects_free(expect *e, size_t n)
{
    for (size_t i = 0; i < n; i++) str_list_free(e[i].texts, e[i].n_texts);
    free(e);
}

/* Parses NAME.expect; a missing file means "no diagnostics". docs = -1
 * when the file does not say. */
static size_t read_expect(const char *path, expect **out, long *docs)
{
    *out = NULL;
    *docs = -1;
    char err[256];
    char *text = file_read_all(path, 1 << 20, NULL, err, sizeof err);
    if (!text) return 0;
    char **lines;
    size_t nl = str_split(text, '\n', &lines), n = 0;
    expect *e = xcalloc(nl + 1, sizeof *e);
    for (size_t i = 0; i < nl; i++) {
        const char *l = lines[i];
        if (l[0] == '#') continue;
        if (sscanf(l, "docs %ld", docs) == 1) continue;
        char level[16];
        int used = 0;
        if (sscanf(l, "%15s %d:%d %199s %n", level, &e[n].line, &e[n].col, e[n].path, &used) < 4) {
            fail_msg("%s: cannot read line \"%s\"", path, l);
        }
        e[n].level = !strcmp(level, "error") ? DIAG_ERROR : !strcmp(level, "warning") ? DIAG_WARNING
                                                                                   : DIAG_NOTE;
        const char *rest = l + used;
        if (*rest == '|') rest++;
        e[n].n_texts = str_split(rest, '|', &e[n].texts);
        n++;
    }
    str_list_free(lines, nl);
    free(text);
    *out = e;
    return n;
}

static bool diag_matches(const diag *x, const expect *e)
{
    if (x->level != e->level || x->line != e->line || x->col != e->col) return false;
    const char *p = x->path ? x->path : "-";
    if (strcmp(p, e->path) != 0) return false;
    sb s;
    sb_init(&s);
    diag_format(x, &s);
    bool ok = true;
    for (size_t i = 0; i < e->n_texts && ok; i++) ok = strstr(sb_str(&s), e->texts[i]) != NULL;
    sb_free(&s);
    return ok;
}

static void dump(const char *file, const diag_list *d)
{
    fprintf(stderr, "diagnostics of %s:\n", file);
    diag_print_all(d, stderr);
}

/* Loads one case and compares its diagnostics with its .expect. */
static void run_case(const char *dir, const char *name, bool must_fail)
{
    char *yaml = xasprintf("%s/%s", dir, name);
    char *exp = xasprintf("%.*s.expect", (int)(strlen(yaml) - 5), yaml);
    expect *e;
    long docs;
    size_t ne = read_expect(exp, &e, &docs);
    if (must_fail && ne == 0) fail_msg("%s has no .expect file", yaml);

    spec_file f;
    diag_list d;
    diag_list_init(&d);
    size_t errors = spec_load_file(yaml, &f, &d);
    assert_int_equal(errors, d.errors);
    bool ok = must_fail ? errors > 0 : errors == 0;
    for (size_t i = 0; i < d.len; i++) {
        if (d.items[i].level == DIAG_NOTE) continue;
        bool found = false;
        for (size_t k = 0; k < ne && !found; k++)
            if (!e[k].matched && diag_matches(&d.items[i], &e[k])) e[k].matched = found = true;
        if (!found) {
            sb s;
            sb_init(&s);
            diag_format(&d.items[i], &s);
            fprintf(stderr, "%s: unexpected diagnostic: %s\n", name, sb_str(&s));
            sb_free(&s);
            ok = false;
        }
    }
    for (size_t k = 0; k < ne; k++)
        if (!e[k].matched) {
            fprintf(stderr, "%s: expected but missing: %d:%d %s |%s\n", name, e[k].line,
                    e[k].col, e[k].path, e[k].n_texts ? e[k].texts[0] : "");
            ok = false;
        }
    if (docs >= 0 && (size_t)docs != f.n_docs) {
        fprintf(stderr, "%s: %zu documents loaded, expected %ld\n", name, f.n_docs, docs);
        ok = false;
    }
    if (!ok) dump(yaml, &d);
    expects_free(e, ne);
    spec_file_free(&f);
    diag_list_free(&d);
    free(yaml);
    free(exp);
    if (!ok) fail_msg("case %s/%s failed", dir, name);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs every NAME.yaml of a folder; returns how many. */
static size_t run_folder(const char *sub, bool must_fail)
{
    char *dir = xasprintf("%s/%s", LATHE_TEST_DATA, sub);
    DIR *dp = opendir(dir);
    assert_non_null(dp);
    char **names = NULL;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(dp))) {
        if (!str_ends_with(de->d_name, ".yaml")) continue;
        names = xrealloc(names, (n + 1) * sizeof *names);
        names[n++] = xstrdup(de->d_name);
    }
    closedir(dp);
    qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n; i++) run_case(dir, names[i], must_fail);
    str_list_free(names, n);
    free(dir);
    return n;
}

static void test_invalid_cases(void **state)
{
    (void)state;
    assert_true(run_folder("invalid", true) >= 40);
}

static void test_valid_cases(void **state)
{
    (void)state;
    assert_true(run_folder("valid", false) >= 5);
}

/* The lathe examples shipped in examples/jobs load without a warning. */
static void test_examples(void **state)
{
    (void)state;
    assert_true(run_folder("../../../examples/jobs", false) >= 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invalid_cases),
        cmocka_unit_test(test_valid_cases),
        cmocka_unit_test(test_examples),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
