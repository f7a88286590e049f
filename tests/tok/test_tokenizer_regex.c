/* test_tokenizer_regex.c: the pre-tokenizer's regex matcher: Oniguruma
 * semantics on the constructs tokenizer.json files use (classes, \p{..},
 * (?i:), lookahead, possessive and lazy quantifiers, leftmost-first
 * alternation), clear errors for the rest, and the backtracking budget. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tok/tok_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* All matches of pattern in text (find_iter), as "a|b|c". */
static char *matches(const char *pattern, const char *text)
{
    char err[256];
    tok_regex *re = tok_regex_compile(pattern, err, sizeof err);
    if (!re) fail_msg("%s: %s", pattern, err);
    tok_cps c = {0};
    tok_cps_fill(&c, text, strlen(text));
    sb out;
    sb_init(&out);
    size_t pos = 0, ms, me;
    int r;
    while ((r = tok_regex_find(re, &c, pos, c.n, &ms, &me)) == 1) {
        if (out.len) sb_putc(&out, '|');
        sb_putn(&out, text + c.off[ms], c.off[me] - c.off[ms]);
        pos = me;
    }
    assert_int_equal(r, 0);
    tok_cps_free(&c);
    tok_regex_free(re);
    return out.len ? sb_take(&out) : xstrdup("");
}

static void expect(const char *pattern, const char *text, const char *want)
{
    char *got = matches(pattern, text);
    if (strcmp(got, want) != 0) fail_msg("/%s/ on \"%s\": got [%s], want [%s]", pattern, text, got, want);
    free(got);
}

static const char QWEN[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                           "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* The o200k pattern (tiktoken; used by some Hugging Face byte-level files):
 * case-aware words and an optional (?i:) group. */
static const char O200K[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

static void test_pretokenizer_patterns(void **state)
{
    (void)state;
    expect(O200K, "HelloWorld's CAPS test", "Hello|World's| CAPS| test");
    expect(QWEN, "Hello world", "Hello| world");
    expect(QWEN, "I'VE 'Ll done", "I|'VE| '|Ll| done");
    expect(QWEN, "a  b   \n\n c", "a| | b|   \n\n| c");
    expect(QWEN, "x   ", "x|   ");
    expect(QWEN, "12345", "1|2|3|4|5");
    expect(QWEN, "$$$!!\n\nx", "$$$!!\n\n|x");
    expect(QWEN, "\xc2\xa0word", "\xc2\xa0word"); /* NBSP is not \r\n, not L/N: a prefix */
    expect(QWEN, "\tword", "\tword");
    /* Llama 3: digits in threes */
    expect("\\p{N}{1,3}", "1234567", "123|456|7");
    /* long s folds to s under (?i) */
    expect("(?i:'s)", "'S 'ſ 's", "'S|'ſ|'s");
    expect("(?i:k)", "kK\xe2\x84\xaa", "k|K|\xe2\x84\xaa"); /* Kelvin sign */
}

static void test_constructs(void **state)
{
    (void)state;
    expect("a+?", "aaa", "a|a|a");            /* lazy */
    expect("a*+a", "aaaa", "");               /* possessive gives nothing back */
    expect("a*a", "aaaa", "aaaa");
    expect("(?>a*)b", "aab", "aab");          /* atomic */
    expect("x(?=y)", "xy xz", "x");          /* lookahead */
    expect("x(?!y)", "xy xz", "x");
    expect("ab|a", "aab", "a|ab");            /* leftmost-first, not longest */
    expect("[a-c]+", "abcd", "abc");
    expect("[^a-c]+", "abcd", "d");
    expect("[\\d]+", "a12b", "12");
    expect("\\w+", "héllo_1 x", "héllo_1|x");
    expect("\\W+", "a, b", ", ");
    expect("\\S+", "a b\tc", "a|b|c");
    expect("\\p{Lu}\\p{Ll}+", "Hello World", "Hello|World");
    expect("\\P{L}+", "ab12cd", "12");
    expect("\\p{^L}+", "ab12cd", "12");
    expect("[\\p{Nd}\\p{Lu}]+", "aB1c", "B1");
    expect(".+", "ab\ncd", "ab|cd");
    expect("(?:ab)?c", "abc c", "abc|c");
    expect("(?i)abc", "ABC", "ABC");
    expect("(?i:[a-c])+", "xABCx", "ABC"); /* a group of one class repeats like the class */
    expect("\\x41\\u00e9\\x{1F600}", "A\xc3\xa9\xf0\x9f\x98\x80", "A\xc3\xa9\xf0\x9f\x98\x80");
    expect("a{2}", "aaaaa", "aa|aa");
    expect("a{2,}", "aaaaa", "aaaaa");
    expect("a{,2}b", "aaab", "aab");
    expect("a{x", "a{x", "a{x");             /* not an interval: literal */
    expect("\\.\\*\\+", ".*+", ".*+");
    expect("(?<name>a)b", "ab", "ab");
    expect("(a|)b", "b ab", "b|ab");
}

static void expect_error(const char *pattern, const char *fragment)
{
    char err[256];
    tok_regex *re = tok_regex_compile(pattern, err, sizeof err);
    if (re) fail_msg("/%s/ compiled; expected an error about %s", pattern, fragment);
    if (!strstr(err, fragment)) fail_msg("/%s/: error [%s] lacks [%s]", pattern, err, fragment);
}

static void test_unsupported(void **state)
{
    (void)state;
    expect_error("(?<=a)b", "lookbehind");
    expect_error("(?<!a)b", "lookbehind");
    expect_error("(ab)+", "repeating a group");
    expect_error("(ab)*", "repeating a group");
    expect_error("^a", "anchors");
    expect_error("a$", "anchors");
    expect_error("\\bword", "unsupported escape \\b");
    expect_error("(a)\\1", "unsupported escape \\1");
    expect_error("\\p{Han}", "unsupported property");
    expect_error("[[:alpha:]]", "nested or POSIX");
    expect_error("[a-z&&[^aeiou]]", "intersection");
    expect_error("(?x)a", "flag");
    expect_error("a**", "nested quantifiers");
    expect_error("a{1,3}+", "ambiguous");
    expect_error("*a", "nothing to repeat");
    expect_error("(a", "unbalanced");
    expect_error("a)", "unbalanced");
    expect_error("[abc", "unterminated");
    expect_error("[z-a]", "bad range");
    expect_error("\\x{110000}", "hexadecimal");
    expect_error("a\\", "backslash");
    expect_error("\xff", "UTF-8");
    sb deep;
    sb_init(&deep);
    for (int i = 0; i < 100; i++) sb_putc(&deep, '(');
    for (int i = 0; i < 100; i++) sb_putc(&deep, ')');
    expect_error(deep.buf, "nested too deeply");
    sb_clear(&deep);
    for (int i = 0; i < 600; i++) sb_puts(&deep, "a");
    expect_error(deep.buf, "too long");
    sb_free(&deep);
}

/* Exponential backtracking ends with -1, not a hang. */
static void test_budget(void **state)
{
    (void)state;
    char err[256];
    sb p;
    sb_init(&p);
    for (int i = 0; i < 24; i++) sb_puts(&p, "(?:a|a)?");
    for (int i = 0; i < 24; i++) sb_puts(&p, "a");
    sb_puts(&p, "b");
    tok_regex *re = tok_regex_compile(p.buf, err, sizeof err);
    assert_non_null(re);
    const char *text = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    tok_cps c = {0};
    tok_cps_fill(&c, text, strlen(text));
    size_t ms, me;
    assert_int_equal(tok_regex_find(re, &c, 0, c.n, &ms, &me), -1);
    tok_cps_free(&c);
    tok_regex_free(re);
    sb_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pretokenizer_patterns),
        cmocka_unit_test(test_constructs),
        cmocka_unit_test(test_unsupported),
        cmocka_unit_test(test_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
