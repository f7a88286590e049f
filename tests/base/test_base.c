/* test_base.c: units (bytes, counts, durations), suggestions, string
 * buffer, diagnostics formatting and atomic file writes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_bytes(void **state)
{
    (void)state;
    double b;
    assert_true(units_parse_bytes("32Gi", &b));
    assert_true(b == 32.0 * GIB);
    assert_true(units_parse_bytes("28GB", &b));
    assert_true(b == 28e9);
    assert_true(units_parse_bytes("50Gi", &b));
    assert_true(units_parse_bytes("512Mi", &b));
    assert_true(b == 512.0 * 1048576);
    assert_true(units_parse_bytes("1.5TB", &b));
    assert_true(b == 1.5e12);
    assert_true(units_parse_bytes("1024", &b));
    assert_true(b == 1024);
    assert_true(units_parse_bytes("80GiB", &b));
    assert_true(b == 80 * GIB);
    assert_false(units_parse_bytes("", &b));
    assert_false(units_parse_bytes("Gi", &b));
    assert_false(units_parse_bytes("-3Gi", &b));
    assert_false(units_parse_bytes("32 gigs", &b));
    assert_false(units_parse_bytes("0x20", &b));
    assert_false(units_parse_bytes("inf", &b));
    assert_false(units_parse_bytes("nan", &b));
    assert_false(units_parse_bytes("1e999Gi", &b));
}

static void test_counts(void **state)
{
    (void)state;
    double c;
    assert_true(units_parse_count("7B", &c));
    assert_true(c == 7e9);
    assert_true(units_parse_count("0.5b", &c));
    assert_true(c == 5e8);
    assert_true(units_parse_count("135M", &c));
    assert_true(c == 135e6);
    assert_true(units_parse_count("32", &c));
    assert_true(c == 32);
    assert_false(units_parse_count("7 billion", &c));
    assert_false(units_parse_count("B", &c));
    assert_false(units_parse_count("7X", &c));
}

static void test_durations(void **state)
{
    (void)state;
    double s;
    assert_true(units_parse_duration("8h", &s));
    assert_true(s == 8 * 3600);
    assert_true(units_parse_duration("90m", &s));
    assert_true(s == 5400);
    assert_true(units_parse_duration("1h30m", &s));
    assert_true(s == 5400);
    assert_true(units_parse_duration("PT8H", &s));
    assert_true(s == 8 * 3600);
    assert_true(units_parse_duration("P1DT2H30M", &s));
    assert_true(s == 86400 + 2 * 3600 + 1800);
    assert_true(units_parse_duration("3600", &s));
    assert_true(s == 3600);
    assert_true(units_parse_duration("2d", &s));
    assert_true(s == 2 * 86400);
    assert_true(units_parse_duration("1500ms", &s));
    assert_true(s == 1.5);
    assert_false(units_parse_duration("eight hours", &s));
    assert_false(units_parse_duration("8x", &s));
    assert_false(units_parse_duration("h", &s));
    assert_false(units_parse_duration("0s", &s));
    assert_false(units_parse_duration("PT", &s));
    assert_false(units_parse_duration("P1Y", &s));
    assert_false(units_parse_duration("PT8D", &s));
    assert_false(units_parse_duration("", &s));
    char out[32];
    units_format_duration(out, sizeof out, 5400);
    assert_string_equal(out, "1h30m");
    units_format_duration(out, sizeof out, 8 * 3600);
    assert_string_equal(out, "8h");
    units_format_bytes(out, sizeof out, 28 * GIB);
    assert_string_equal(out, "28.0 GiB");
}

/* RFC 3339 times: the zone required, every field checked. */
static void test_times(void **state)
{
    (void)state;
    double t;
    assert_true(units_parse_time("1970-01-01T00:01:40Z", &t));
    assert_true(t == 100);
    assert_true(units_parse_time("1970-01-01T01:00:00.5+01:00", &t));
    assert_true(t == 0.5);
    assert_true(units_parse_time("2024-02-29T00:00:00z", &t));
    assert_true(t == 1709164800);
    assert_int_equal(units_days_from_civil(2027, 1, 31), 20849);
    assert_false(units_parse_time("2023-02-29T00:00:00Z", &t));
    assert_false(units_parse_time("2027-13-01T00:00:00Z", &t));
    assert_false(units_parse_time("2027-01-31T24:00:00Z", &t));
    assert_false(units_parse_time("2027-01-31T00:00:00", &t));
    assert_false(units_parse_time("2027-01-31T00:00:00.Z", &t));
    assert_false(units_parse_time("2027-01-31T00:00:00Zjunk", &t));
    assert_false(units_parse_time("2027-01-31T00:00:00+0100", &t));
    assert_false(units_parse_time("", &t));
}

static void test_suggest(void **state)
{
    (void)state;
    const char *keys[] = {"rank", "alpha", "targetModules", "dropout", "useRslora"};
    assert_string_equal(str_suggest("targetModule", keys, 5), "targetModules");
    assert_string_equal(str_suggest("alpah", keys, 5), "alpha");
    assert_string_equal(str_suggest("Rank", keys, 5), "rank");
    assert_string_equal(str_suggest("dropuot", keys, 5), "dropout");
    assert_null(str_suggest("completelydifferent", keys, 5));
    assert_int_equal(str_edit_distance("abc", "acb"), 1);
    assert_int_equal(str_edit_distance("", "abc"), 3);
}

static void test_sb_and_split(void **state)
{
    (void)state;
    sb s;
    sb_init(&s);
    assert_string_equal(sb_str(&s), "");
    for (int i = 0; i < 1000; i++) sb_printf(&s, "%d,", i);
    assert_true(s.len > 3000);
    char *t = sb_take(&s);
    assert_true(str_starts_with(t, "0,1,2,"));
    free(t);
    char **parts;
    size_t n = str_split(" q_proj, v_proj ,,o_proj ", ',', &parts);
    assert_int_equal(n, 3);
    assert_string_equal(parts[1], "v_proj");
    str_list_free(parts, n);
    char th[32];
    str_thousands(th, sizeof th, 6738415616ULL);
    assert_string_equal(th, "6,738,415,616");
    str_thousands(th, sizeof th, 12);
    assert_string_equal(th, "12");
}

static void test_diag(void **state)
{
    (void)state;
    diag_list d;
    diag_list_init(&d);
    diag *x = diag_add(&d, DIAG_ERROR, "job.yaml", 12, 5, "spec.lora.targetModule", "unknown field");
    diag_set_suggestion(x, "did you mean 'targetModules'?");
    diag *y = diag_add(&d, DIAG_ERROR, "job.yaml", 3, 9, "spec.lora.rank", "out of range");
    diag_set_expected(y, "an integer from 1 to 1024");
    diag_set_found(y, "%d", 0);
    diag_add(&d, DIAG_WARNING, NULL, 0, 0, NULL, "just a warning");
    assert_int_equal(d.errors, 2);
    assert_int_equal(d.warnings, 1);
    sb s;
    sb_init(&s);
    diag_format(&d.items[0], &s);
    assert_string_equal(sb_str(&s), "job.yaml:12:5: error: spec.lora.targetModule: unknown field\n"
                                    "    hint: did you mean 'targetModules'?");
    sb_clear(&s);
    diag_format(&d.items[1], &s);
    assert_string_equal(sb_str(&s), "job.yaml:3:9: error: spec.lora.rank: out of range "
                                    "(expected an integer from 1 to 1024, found 0)");
    sb_free(&s);
    diag_list_free(&d);
}

static void test_files(void **state)
{
    (void)state;
    char dir[] = "/tmp/lathe-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *p = path_join(dir, "a.txt");
    assert_int_equal(file_write_atomic(p, "hello", 5), 0);
    assert_int_equal(file_write_atomic(p, "world!", 6), 0);
    char err[256];
    size_t len;
    char *buf = file_read_all(p, 100, &len, err, sizeof err);
    assert_non_null(buf);
    assert_int_equal(len, 6);
    assert_string_equal(buf, "world!");
    free(buf);
    assert_null(file_read_all(p, 3, &len, err, sizeof err));
    assert_non_null(strstr(err, "larger than the limit"));
    assert_null(file_read_all(dir, 100, &len, err, sizeof err));
    assert_null(file_read_all("/nonexistent/x", 100, &len, err, sizeof err));
    assert_non_null(strstr(err, "cannot open"));
    unlink(p);
    free(p);
    rmdir(dir);
}

/* A tree with files, empty and nested folders and links goes entirely; what
 * a link points to outside the tree stays; a missing folder is no error. */
static void test_remove_tree(void **state)
{
    (void)state;
    char top[] = "/tmp/lathe-test-XXXXXX";
    assert_non_null(mkdtemp(top));
    char *tree = path_join(top, "tree"), *outside = path_join(top, "outside");
    char *deep = xasprintf("%s/a/b/c", tree), *empty = xasprintf("%s/empty", tree);
    char *mid = xasprintf("%s/a", tree), *mid2 = xasprintf("%s/a/b", tree);
    assert_int_equal(mkdir(tree, 0755), 0);
    assert_int_equal(mkdir(mid, 0755), 0);
    assert_int_equal(mkdir(mid2, 0755), 0);
    assert_int_equal(mkdir(deep, 0755), 0);
    assert_int_equal(mkdir(empty, 0755), 0);
    assert_int_equal(mkdir(outside, 0755), 0);
    char *keep = path_join(outside, "keep.txt"), *f1 = path_join(deep, "x.bin"), *f2 = path_join(tree, "top.txt");
    assert_int_equal(file_write_atomic(keep, "keep", 4), 0);
    assert_int_equal(file_write_atomic(f1, "x", 1), 0);
    assert_int_equal(file_write_atomic(f2, "y", 1), 0);
    char *l1 = path_join(mid, "to-outside"), *l2 = path_join(tree, "dangling");
    assert_int_equal(symlink(outside, l1), 0);
    assert_int_equal(symlink("/nonexistent/target", l2), 0);
    char err[256];
    assert_int_equal(file_remove_tree(tree, err, sizeof err), 0);
    assert_false(dir_exists(tree));
    assert_true(file_exists(keep)); /* the link went, not what it pointed to */
    assert_int_equal(file_remove_tree(tree, err, sizeof err), 0); /* gone already */
    /* a file or a link given as the tree is removed alone */
    assert_int_equal(symlink(outside, tree), 0);
    assert_int_equal(file_remove_tree(tree, err, sizeof err), 0);
    assert_true(file_exists(keep));
    assert_int_equal(file_remove_tree(outside, err, sizeof err), 0);
    assert_int_equal(rmdir(top), 0);
    char *paths[] = {tree, outside, deep, empty, mid, mid2, keep, f1, f2, l1, l2};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) free(paths[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes),       cmocka_unit_test(test_counts),
        cmocka_unit_test(test_durations),   cmocka_unit_test(test_times),
        cmocka_unit_test(test_suggest),
        cmocka_unit_test(test_sb_and_split), cmocka_unit_test(test_diag),
        cmocka_unit_test(test_files),       cmocka_unit_test(test_remove_tree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
