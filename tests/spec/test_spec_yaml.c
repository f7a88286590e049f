/* test_spec_yaml.c: the YAML layer (spec_yaml.c): node positions, scalar
 * kinds, aliases shared rather than copied, merge keys, several documents,
 * duplicate keys, and hostile input: alias bombs (refused having built a
 * handful of nodes), nesting, the node and size limits, binary garbage,
 * invalid UTF-8, libyaml's own errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "spec/spec_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static bool parse(const char *text, spec_ystream *s, diag_list *d)
{
    diag_list_init(d);
    return spec_yaml_parse("y.yaml", text, strlen(text), s, d);
}

static bool first_diag_has(const diag_list *d, const char *text)
{
    if (d->len == 0) return false;
    sb s;
    sb_init(&s);
    diag_format(&d->items[0], &s);
    bool ok = strstr(sb_str(&s), text) != NULL;
    if (!ok) fprintf(stderr, "diagnostic: %s\n", sb_str(&s));
    sb_free(&s);
    return ok;
}

static void test_positions_and_scalars(void **state)
{
    (void)state;
    spec_ystream s;
    diag_list d;
    assert_true(parse("# comment\n"
                      "a: 1\n"
                      "b:\n"
                      "  - x\n"
                      "  - \"quoted\"\n"
                      "c: {d: ~, e: '', f: null, g: !!str 12}\n"
                      "h: |\n"
                      "  block\n",
                      &s, &d));
    assert_int_equal(d.len, 0);
    assert_int_equal(s.n_docs, 1);
    const spec_ynode *r = s.docs[0].root;
    assert_int_equal(r->kind, SPEC_YMAP);
    assert_int_equal(r->n_items, 8);
    const spec_ynode *a = spec_ymap_get(r, "a");
    assert_int_equal(a->line, 2);
    assert_int_equal(a->col, 4);
    assert_string_equal(a->text, "1");
    assert_false(a->quoted);
    const spec_ynode *b = spec_ymap_get(r, "b");
    assert_int_equal(b->kind, SPEC_YSEQ);
    assert_int_equal(b->n_items, 2);
    assert_int_equal(b->items[1]->line, 5);
    assert_int_equal(b->items[1]->col, 5);
    assert_true(b->items[1]->quoted);
    assert_int_equal(spec_ymap_key(r, "b")->line, 3);
    assert_true(spec_ypath(r, "c.d")->null);
    assert_false(spec_ypath(r, "c.e")->null); /* '' is an empty string */
    assert_true(spec_yabsent(spec_ypath(r, "c.f")));
    assert_true(spec_ypath(r, "c.g")->quoted);
    assert_string_equal(spec_ypath(r, "h")->text, "block\n");
    assert_true(spec_ypath(r, "h")->quoted); /* a block scalar is a string */
    assert_null(spec_ypath(r, "c.zz"));
    assert_null(spec_ypath(r, "a.b"));
    char *flow = spec_yflow_text(b);
    assert_string_equal(flow, "[x, quoted]");
    free(flow);
    flow = spec_yflow_text(spec_ymap_get(r, "c"));
    assert_true(str_starts_with(flow, "{d: ~, e: , f: null"));
    free(flow);
    spec_ystream_free(&s);
    diag_list_free(&d);
}

static void test_aliases_are_shared(void **state)
{
    (void)state;
    spec_ystream s;
    diag_list d;
    assert_true(parse("base: &b {rank: 8}\nx: *b\ny: *b\n", &s, &d));
    const spec_ynode *r = s.docs[0].root;
    assert_ptr_equal(spec_ymap_get(r, "x"), spec_ymap_get(r, "base"));
    assert_ptr_equal(spec_ymap_get(r, "y"), spec_ymap_get(r, "base"));
    size_t built = s.n_all;
    assert_int_equal(built, 7); /* root, 3 keys, the mapping, its key and value */
    spec_ystream_free(&s);
    diag_list_free(&d);

    /* a redefined anchor: later aliases see the new node */
    assert_true(parse("a: &x 1\nb: *x\nc: &x 2\nd: *x\n", &s, &d));
    assert_string_equal(spec_ymap_get(s.docs[0].root, "d")->text, "2");
    assert_string_equal(spec_ymap_get(s.docs[0].root, "b")->text, "1");
    spec_ystream_free(&s);
    diag_list_free(&d);
}

static void test_merge_keys(void **state)
{
    (void)state;
    spec_ystream s;
    diag_list d;
    assert_true(parse("base: &b {rank: 8, alpha: 16, dropout: 0.1}\n"
                      "more: &m {alpha: 99, useRslora: true}\n"
                      "job:\n  <<: [*b, *m]\n  alpha: 32\n",
                      &s, &d));
    assert_int_equal(d.len, 0);
    const spec_ynode *job = spec_ymap_get(s.docs[0].root, "job");
    assert_int_equal(job->n_items / 2, 4);
    assert_string_equal(spec_ymap_get(job, "alpha")->text, "32");   /* written wins */
    assert_string_equal(spec_ymap_get(job, "rank")->text, "8");     /* from the first */
    assert_string_equal(spec_ymap_get(job, "useRslora")->text, "true");
    assert_null(spec_ymap_get(job, "<<"));
    spec_ystream_free(&s);
    diag_list_free(&d);

    assert_true(parse("a: {<<: 5}\n", &s, &d));
    assert_true(first_diag_has(&d, "a merge key takes a mapping"));
    spec_ystream_free(&s);
    diag_list_free(&d);
}

static void test_documents(void **state)
{
    (void)state;
    spec_ystream s;
    diag_list d;
    assert_true(parse("---\na: 1\n---\n---\n# empty\n---\nb: &x 2\n...\n---\nc: 3\n", &s, &d));
    assert_int_equal(s.n_docs, 3); /* the empty ones are skipped */
    assert_int_equal(s.docs[1].line, 6);
    spec_ystream_free(&s);
    diag_list_free(&d);

    /* anchors belong to their document */
    assert_true(parse("a: &x 1\n---\nb: *x\n", &s, &d));
    assert_true(first_diag_has(&d, "the alias *x refers to no anchor"));
    assert_int_equal(s.docs[1].errors, 1);
    assert_int_equal(s.docs[0].errors, 0);
    spec_ystream_free(&s);
    diag_list_free(&d);
}

static void test_duplicate_keys(void **state)
{
    (void)state;
    spec_ystream s;
    diag_list d;
    assert_true(parse("spec:\n  lora:\n    rank: 1\n    rank: 2\n    alpha: 3\n    rank: 4\n", &s,
                      &d));
    assert_int_equal(d.errors, 2);
    assert_int_equal(d.items[0].line, 4);
    assert_int_equal(d.items[1].line, 6);
    assert_string_equal(d.items[0].path, "spec.lora.rank");
    assert_true(first_diag_has(&d, "first at line 3, column 5"));
    spec_ystream_free(&s);
    diag_list_free(&d);

    /* 20000 distinct keys: no quadratic check */
    sb t;
    sb_init(&t);
    for (int i = 0; i < 20000; i++) sb_printf(&t, "k%d: %d\n", i, i);
    sb_puts(&t, "k77: again\n");
    assert_true(parse(sb_str(&t), &s, &d));
    assert_int_equal(d.errors, 1);
    assert_int_equal(d.items[0].line, 20001);
    sb_free(&t);
    spec_ystream_free(&s);
    diag_list_free(&d);
}

/* Nine levels of nine aliases stand for 9^9 nodes: refused at once, and
 * the tree holds only the nodes written in the file. */
static void test_billion_laughs(void **state)
{
    (void)state;
    sb t;
    sb_init(&t);
    sb_puts(&t, "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    const char *names = "abcdefghij";
    for (int i = 1; i < 10; i++) {
        sb_printf(&t, "%c: &%c [", names[i], names[i]);
        for (int k = 0; k < 9; k++) sb_printf(&t, "%s*%c", k ? ", " : "", names[i - 1]);
        sb_puts(&t, "]\n");
    }
    spec_ystream s;
    diag_list d;
    clock_t t0 = clock();
    assert_false(parse(sb_str(&t), &s, &d));
    double ms = 1000.0 * (double)(clock() - t0) / CLOCKS_PER_SEC;
    printf("billion laughs refused in %.3f ms\n", ms); /* reported, not asserted */
    assert_int_equal(d.errors, 1);
    assert_true(first_diag_has(&d, "billion laughs"));
    assert_true(s.n_all < 200); /* nothing was expanded */
    spec_ystream_free(&s);
    diag_list_free(&d);
    sb_free(&t);

    /* a recursive alias is refused, not followed */
    assert_true(parse("a: &x [1, *x]\n", &s, &d));
    assert_true(first_diag_has(&d, "refers to a node that holds it"));
    spec_ystream_free(&s);
    diag_list_free(&d);
}

static char *nested(int depth)
{
    sb t;
    sb_init(&t);
    for (int i = 0; i < depth; i++) sb_putc(&t, '[');
    for (int i = 0; i < depth; i++) sb_putc(&t, ']');
    sb_putc(&t, '\n');
    return sb_take(&t);
}

static void test_depth_limit(void **state)
{
    (void)state;
    spec_ystream s;
    diag_list d;
    char *ok = nested(SPEC_MAX_DEPTH), *deep = nested(SPEC_MAX_DEPTH + 1);
    assert_true(parse(ok, &s, &d));
    assert_int_equal(d.len, 0);
    spec_ystream_free(&s);
    diag_list_free(&d);
    assert_false(parse(deep, &s, &d));
    assert_true(first_diag_has(&d, "deeper than 64 levels"));
    spec_ystream_free(&s);
    diag_list_free(&d);
    free(ok);
    free(deep);

    /* far deeper than libyaml would like: refused at level 65, no stack growth */
    char *huge = nested(1000000);
    assert_false(parse(huge, &s, &d));
    assert_int_equal(d.errors, 1);
    spec_ystream_free(&s);
    diag_list_free(&d);
    free(huge);
}

static void test_node_limit(void **state)
{
    (void)state;
    sb t;
    sb_init(&t);
    sb_puts(&t, "[");
    for (int i = 0; i < SPEC_MAX_NODES + 10; i++) sb_puts(&t, "1,");
    sb_puts(&t, "1]\n");
    spec_ystream s;
    diag_list d;
    assert_false(parse(sb_str(&t), &s, &d));
    assert_true(first_diag_has(&d, "more than 200000 YAML nodes"));
    spec_ystream_free(&s);
    diag_list_free(&d);
    sb_free(&t);
}

static void test_size_limit(void **state)
{
    (void)state;
    size_t n = SPEC_MAX_FILE_BYTES + 1;
    char *big = xmalloc(n + 1);
    memset(big, '#', n);
    big[n] = '\0';
    spec_file f;
    diag_list d;
    diag_list_init(&d);
    assert_int_equal(spec_load_string("big.yaml", big, n, &f, &d), 1);
    assert_true(first_diag_has(&d, "the file is too large"));
    spec_file_free(&f);
    diag_list_free(&d);

    /* the same through a file: invalid input, not a read error */
    char path[] = "/tmp/lathe-spec-big-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, big, n), (ssize_t)n);
    close(fd);
    diag_list_init(&d);
    assert_int_equal(spec_load_file(path, &f, &d), 1);
    assert_false(f.io_error);
    assert_true(first_diag_has(&d, "larger than the limit"));
    spec_file_free(&f);
    diag_list_free(&d);
    unlink(path);

    /* at the limit: read, and found to hold no document */
    diag_list_init(&d);
    assert_int_equal(spec_load_string("edge.yaml", big, n - 1, &f, &d), 1);
    assert_true(first_diag_has(&d, "holds no document"));
    spec_file_free(&f);
    diag_list_free(&d);
    free(big);
}

/* Random bytes: one error, never a crash (the fuzzer goes much further). */
static void test_garbage(void **state)
{
    (void)state;
    uint64_t x = 88172645463325252ULL; /* xorshift64 */
    for (int round = 0; round < 300; round++) {
        size_t n = 1 + (size_t)(round * 37 % 4000);
        unsigned char *buf = xmalloc(n);
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            buf[i] = (unsigned char)x;
        }
        spec_file f;
        diag_list d;
        diag_list_init(&d);
        size_t e = spec_load_string("junk", (const char *)buf, n, &f, &d);
        assert_true(e >= 1);
        assert_int_equal(f.n_docs, 0);
        spec_file_free(&f);
        diag_list_free(&d);
        free(buf);
    }
}

static void test_text_checks(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        size_t len;
        const char *msg;
        int line, col;
    } cases[] = {
        {"a: 1\nb: \0x\n", 10, "binary data", 2, 4},
        {"a: \xc3\x28\n", 6, "not valid UTF-8", 1, 4},
        {"a: \xed\xa0\x80\n", 7, "not valid UTF-8", 1, 4},   /* a surrogate */
        {"a: \xc0\xaf\n", 6, "not valid UTF-8", 1, 4},       /* overlong */
        {"\xff\xfe" "a\0:\0", 6, "UTF-16", 1, 1},
        {"a: \xc3\xa9t\xc3\xa9\x01\n", 10, "U+0001", 1, 7},  /* columns count characters */
        {"a: \x7f\n", 5, "U+007F", 1, 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        spec_ystream s;
        diag_list d;
        diag_list_init(&d);
        assert_false(spec_yaml_parse("t", cases[i].text, cases[i].len, &s, &d));
        assert_int_equal(d.errors, 1);
        assert_true(first_diag_has(&d, cases[i].msg));
        assert_int_equal(d.items[0].line, cases[i].line);
        assert_int_equal(d.items[0].col, cases[i].col);
        spec_ystream_free(&s);
        diag_list_free(&d);
    }
    /* a UTF-8 byte order mark and non-ASCII text are fine */
    spec_ystream s;
    diag_list d;
    assert_true(parse("\xef\xbb\xbf" "name: \xe6\xa8\xa1\xe5\x9e\x8b\n", &s, &d));
    assert_int_equal(d.len, 0);
    spec_ystream_free(&s);
    diag_list_free(&d);
}

static void test_syntax_errors(void **state)
{
    (void)state;
    spec_ystream s;
    diag_list d;
    assert_false(parse("a: b\n  c: d\n", &s, &d));
    assert_int_equal(d.errors, 1);
    assert_int_equal(d.items[0].line, 2);
    assert_true(first_diag_has(&d, "YAML syntax error: mapping values are not allowed"));
    spec_ystream_free(&s);
    diag_list_free(&d);

    assert_false(parse("a: [1, 2\nb: 3\n", &s, &d));
    assert_true(first_diag_has(&d, "did not find expected ',' or ']'"));
    assert_true(first_diag_has(&d, "while parsing a flow sequence at line 1, column 4"));
    spec_ystream_free(&s);
    diag_list_free(&d);

    /* a document before the error still comes through */
    assert_false(parse("a: 1\n---\nb: [\n", &s, &d));
    assert_int_equal(s.n_docs, 1);
    spec_ystream_free(&s);
    diag_list_free(&d);

    assert_true(parse("? [a, b]\n: c\n", &s, &d));
    assert_true(first_diag_has(&d, "a key must be a name"));
    spec_ystream_free(&s);
    diag_list_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_positions_and_scalars),
        cmocka_unit_test(test_aliases_are_shared),
        cmocka_unit_test(test_merge_keys),
        cmocka_unit_test(test_documents),
        cmocka_unit_test(test_duplicate_keys),
        cmocka_unit_test(test_billion_laughs),
        cmocka_unit_test(test_depth_limit),
        cmocka_unit_test(test_node_limit),
        cmocka_unit_test(test_size_limit),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_text_checks),
        cmocka_unit_test(test_syntax_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
