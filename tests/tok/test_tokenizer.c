/* test_tokenizer.c: the byte-level BPE tokenizer against the real Qwen3
 * and Llama 3 tokenizer.json files: every Hugging Face test vector of
 * tests/ref/tokenizers/testvectors (ids, token spellings, decoded text),
 * decode(encode(x)) == x on varied Unicode, offsets, the two merge loops,
 * special-token flags and the look-ups. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tok/tok.h"
#include "tok/tok_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TV LATHE_SOURCE_DIR "/tests/ref/tokenizers/testvectors/"

typedef struct fixture {
    tok_tokenizer *qwen, *llama;
} fixture;

static tok_tokenizer *load_or_fail(const char *path)
{
    diag_list d;
    diag_list_init(&d);
    tok_tokenizer *t = tok_load(path, &d);
    if (!t) diag_print_all(&d, stderr);
    diag_list_free(&d);
    return t;
}

static int setup(void **state)
{
    fixture *f = xcalloc(1, sizeof *f);
    f->qwen = load_or_fail(LATHE_SOURCE_DIR "/share/tokenizers/qwen3");
    f->llama = load_or_fail(LATHE_SOURCE_DIR "/share/tokenizers/llama3/tokenizer.json");
    *state = f;
    return f->qwen && f->llama ? 0 : -1;
}

static int teardown(void **state)
{
    fixture *f = *state;
    tok_free(f->qwen);
    tok_free(f->llama);
    free(f);
    return 0;
}

static char *read_file(const char *path, size_t *len)
{
    char err[256];
    char *s = file_read_all(path, 1 << 24, len, err, sizeof err);
    if (!s) fail_msg("%s", err);
    return s;
}

/* Encodes text and compares with the expected ids; prints both on failure. */
static void expect_ids(tok_tokenizer *t, const char *text, size_t len, const int32_t *want,
                       size_t nwant, const char *label)
{
    tok_ids ids;
    tok_ids_init(&ids);
    char err[256];
    assert_true(tok_encode(t, text, len, 0, &ids, err, sizeof err));
    bool same = ids.len == nwant && (nwant == 0 || memcmp(ids.ids, want, nwant * sizeof *want) == 0);
    if (!same) {
        fprintf(stderr, "%s: text \"%.*s\"\n  want:", label, (int)len, text);
        for (size_t i = 0; i < nwant; i++) fprintf(stderr, " %d", want[i]);
        fprintf(stderr, "\n  got: ");
        for (size_t i = 0; i < ids.len; i++) fprintf(stderr, " %d", ids.ids[i]);
        fprintf(stderr, "\n");
    }
    tok_ids_free(&ids);
    assert_true(same);
}

/* llama.cpp's format: .inp holds texts each followed by
 * "\n__ggml_vocab_test__\n"; line i of .out the ids of text i. */
static void run_ggml_vectors(tok_tokenizer *t, const char *name)
{
    char path[512];
    size_t ilen, olen;
    snprintf(path, sizeof path, TV "ggml-vocab-%s.gguf.inp", name);
    char *inp = read_file(path, &ilen);
    snprintf(path, sizeof path, TV "ggml-vocab-%s.gguf.out", name);
    char *out = read_file(path, &olen);
    const char *sep = "\n__ggml_vocab_test__\n";
    char *p = inp, *o = out;
    int count = 0;
    for (;;) {
        char *end = strstr(p, sep);
        if (!end) break;
        char *eol = strchr(o, '\n');
        assert_non_null(eol);
        int32_t want[512];
        size_t nwant = 0;
        for (char *q = o; q < eol;) {
            char *next;
            long v = strtol(q, &next, 10);
            if (next == q) break;
            assert_true(nwant < 512);
            want[nwant++] = (int32_t)v;
            q = next;
        }
        char label[64];
        snprintf(label, sizeof label, "%s vector %d", name, count + 1);
        expect_ids(t, p, (size_t)(end - p), want, nwant, label);
        p = end + strlen(sep);
        o = eol + 1;
        count++;
    }
    assert_int_equal(count, 46);
    free(inp);
    free(out);
}

static void test_ggml_vectors_qwen2(void **state)
{
    fixture *f = *state;
    run_ggml_vectors(f->qwen, "qwen2");
}

static void test_ggml_vectors_llama_bpe(void **state)
{
    fixture *f = *state;
    run_ggml_vectors(f->llama, "llama-bpe");
}

/* extra-lenml-js.json: ids, spellings and decoded text per case. */
static void run_extra(tok_tokenizer *t, json_t *cases)
{
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c) {
        const char *text = json_string_value(json_object_get(c, "text"));
        json_t *ids = json_object_get(c, "ids"), *toks = json_object_get(c, "tokens");
        int32_t want[256];
        size_t n = json_array_size(ids);
        assert_true(n < 256);
        for (size_t k = 0; k < n; k++) want[k] = (int32_t)json_integer_value(json_array_get(ids, k));
        expect_ids(t, text, strlen(text), want, n, "extra");
        for (size_t k = 0; k < n; k++)
            assert_string_equal(tok_token_str(t, want[k]), json_string_value(json_array_get(toks, k)));
        char err[256];
        char *dec = tok_decode(t, want, n, false, NULL, err, sizeof err);
        assert_non_null(dec);
        assert_string_equal(dec, json_string_value(json_object_get(c, "decoded")));
        free(dec);
    }
}

static void test_extra_vectors(void **state)
{
    fixture *f = *state;
    json_error_t je;
    json_t *root = json_load_file(TV "extra-lenml-js.json", 0, &je);
    assert_non_null(root);
    run_extra(f->qwen, json_object_get(root, "qwen3"));
    run_extra(f->llama, json_object_get(root, "llama3"));
    json_decref(root);
}

/* Texts in many scripts, with spacing, digits, emoji, controls. */
static const char *const VARIED[] = {
    "",
    " ",
    "Hello, world! How's it going? I'd've thought so.",
    "naïve café résumé Ångström ÆØÅ æøå ß ẞ ﬁ ﬂ",
    "Привет, мир! Съешь же ещё этих мягких французских булок.",
    "Γειά σου Κόσμε; ΑΒΓ αβγ",
    "שלום עולם مرحبا بالعالم",
    "नमस्ते दुनिया ক্ষ ஸ்ரீ",
    "日本語のテキスト、漢字とひらがな。中文：你好，世界！한국어 텍스트",
    "ไทย ລາວ ខ្មែរ ᠮᠣᠩᠭᠣᠯ",
    "😀👍🏽👨‍👩‍👧‍👦🇫🇷🏳️‍🌈 ✅ ❤️",
    "tabs\tand\nnew\r\nlines\r\r\n\n\n   spaces   \u00a0nbsp\u2009thin\u3000ideo",
    "digits 0123456789 ١٢٣ ०१२ ½ ² Ⅻ 3.14159e-10 1,000,000",
    "code: for (int i = 0; i < n; ++i) { x[i] = y[i] * 2; } // done",
    "'s 't 're 've 'm 'll 'd 'S 'T 'RE 'VE 'M 'LL 'D 'ſ",
    "e\xcc\x81 a\xcc\x8a o\xcc\x88 (decomposed) \xe1\x84\x80\xe1\x85\xa1 (jamo)",
    "\x01\x02\x1f\x7f control \xc2\x80\xc2\x9f",
    "mixed<|im_start|>special<|im_end|>tokens<|endoftext|><|begin_of_text|><|eot_id|>",
    "<|im_start|<|im_end||>><<|>>",
    "\xf4\x8f\xbf\xbf \xef\xbf\xbf \xee\x80\x80 private and noncharacters",
};

static void roundtrip(tok_tokenizer *t, const char *text, bool nfc)
{
    tok_ids ids;
    tok_ids_init(&ids);
    char err[256];
    size_t len = strlen(text);
    assert_true(tok_encode(t, text, len, 0, &ids, err, sizeof err));
    size_t dlen;
    char *dec = tok_decode(t, ids.ids, ids.len, false, &dlen, err, sizeof err);
    assert_non_null(dec);
    sb want;
    sb_init(&want);
    if (nfc) assert_true(uni_normalize(text, len, UNI_NFC, &want));
    else sb_putn(&want, text, len);
    if (dlen != want.len || memcmp(dec, sb_str(&want), dlen) != 0)
        fail_msg("round trip of \"%s\" gave \"%s\"", text, dec);
    /* offsets: non-decreasing, inside the text */
    for (size_t i = 0; i < ids.len; i++) {
        assert_true(ids.offsets[i] <= len);
        if (i) assert_true(ids.offsets[i] >= ids.offsets[i - 1]);
    }
    sb_free(&want);
    free(dec);
    tok_ids_free(&ids);
}

static void test_roundtrip(void **state)
{
    fixture *f = *state;
    for (size_t i = 0; i < sizeof VARIED / sizeof VARIED[0]; i++) {
        roundtrip(f->llama, VARIED[i], false);
        roundtrip(f->qwen, VARIED[i], true);
    }
}

/* Without normalisation, each token's bytes sit at its offset. */
static void test_offsets(void **state)
{
    fixture *f = *state;
    const char *text = "Hello, world!<|eot_id|> naïve 😀 'll  done";
    tok_ids ids;
    tok_ids_init(&ids);
    char err[256];
    assert_true(tok_encode(f->llama, text, strlen(text), 0, &ids, err, sizeof err));
    for (size_t i = 0; i < ids.len; i++) {
        size_t blen;
        const char *b = tok_token_bytes(f->llama, ids.ids[i], &blen);
        assert_non_null(b);
        assert_memory_equal(text + ids.offsets[i], b, blen);
    }
    /* Qwen normalises: "e" + combining acute becomes one token's worth */
    const char *dec = "x e\xcc\x81t\xc3\xa9";
    tok_ids_clear(&ids);
    assert_true(tok_encode(f->qwen, dec, strlen(dec), 0, &ids, err, sizeof err));
    for (size_t i = 0; i < ids.len; i++) assert_true(ids.offsets[i] < strlen(dec));
    tok_ids_free(&ids);
}

/* The scan and heap merge loops agree on words of every length. */
static void test_merge_loops_agree(void **state)
{
    fixture *f = *state;
    size_t len;
    char *text = read_file(LATHE_SOURCE_DIR "/share/data/tinyshakespeare/input.txt", &len);
    const char *more[] = {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                          "antidisestablishmentarianismsupercalifragilisticexpialidocious",
                          "                                                             ",
                          "日本語のテキスト漢字とひらがな中文你好世界한국어텍스트ไทย"};
    tok_ids a, b;
    tok_ids_init(&a);
    tok_ids_init(&b);
    tok_tokenizer *ts[2] = {f->qwen, f->llama};
    for (int k = 0; k < 2; k++) {
        /* words of the play, and growing prefixes of long strings */
        for (size_t start = 0, n = 0; start < 200000 && n < 3000; start += 61, n++) {
            size_t wl = 1 + (n % 40);
            tok_ids_clear(&a);
            tok_ids_clear(&b);
            tok_bpe_merge_scan(ts[k], text + start, wl, &a);
            tok_bpe_merge_heap(ts[k], text + start, wl, &b);
            assert_int_equal(a.len, b.len);
            assert_memory_equal(a.ids, b.ids, a.len * sizeof *a.ids);
        }
        for (size_t m = 0; m < 4; m++)
            for (size_t wl = 1; wl <= strlen(more[m]); wl++) {
                tok_ids_clear(&a);
                tok_ids_clear(&b);
                tok_bpe_merge_scan(ts[k], more[m], wl, &a);
                tok_bpe_merge_heap(ts[k], more[m], wl, &b);
                assert_int_equal(a.len, b.len);
                assert_memory_equal(a.ids, b.ids, a.len * sizeof *a.ids);
            }
    }
    tok_ids_free(&a);
    tok_ids_free(&b);
    free(text);
}

/* The fast path (cache, scan / heap merge loops) equals the textbook BPE
 * without a cache on a long text in several scripts. */
static void test_fast_equals_textbook(void **state)
{
    fixture *f = *state;
    size_t len;
    char *play = read_file(LATHE_SOURCE_DIR "/share/data/tinyshakespeare/input.txt", &len);
    sb text;
    sb_init(&text);
    sb_putn(&text, play, len > 150000 ? 150000 : len);
    for (size_t i = 0; i < sizeof VARIED / sizeof VARIED[0]; i++) sb_puts(&text, VARIED[i]);
    tok_tokenizer *ts[2] = {f->qwen, f->llama};
    for (int k = 0; k < 2; k++) {
        tok_ids a, b;
        tok_ids_init(&a);
        tok_ids_init(&b);
        char err[256];
        assert_true(tok_encode(ts[k], text.buf, text.len, 0, &a, err, sizeof err));
        ts[k]->naive = true;
        assert_true(tok_encode(ts[k], text.buf, text.len, 0, &b, err, sizeof err));
        ts[k]->naive = false;
        assert_int_equal(a.len, b.len);
        assert_memory_equal(a.ids, b.ids, a.len * sizeof *a.ids);
        assert_memory_equal(a.offsets, b.offsets, a.len * sizeof *a.offsets);
        tok_ids_free(&a);
        tok_ids_free(&b);
    }
    sb_free(&text);
    free(play);
}

/* Encoding twice gives the same result: the cache changes nothing. */
static void test_cache_consistent(void **state)
{
    fixture *f = *state;
    const char *text = "the the the The THE the, the. the the\nthe the";
    tok_ids a, b;
    tok_ids_init(&a);
    tok_ids_init(&b);
    char err[256];
    assert_true(tok_encode(f->qwen, text, strlen(text), 0, &a, err, sizeof err));
    assert_true(tok_encode(f->qwen, text, strlen(text), 0, &b, err, sizeof err));
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.ids, b.ids, a.len * sizeof *a.ids);
    tok_ids_free(&a);
    tok_ids_free(&b);
}

static void test_special_flags(void **state)
{
    fixture *f = *state;
    const char *text = "a<|im_end|>b";
    tok_ids ids;
    tok_ids_init(&ids);
    char err[256];
    assert_true(tok_encode(f->qwen, text, strlen(text), 0, &ids, err, sizeof err));
    assert_int_equal(ids.len, 3);
    assert_int_equal(ids.ids[1], 151645);
    assert_int_equal(ids.offsets[1], 1);
    assert_int_equal(ids.offsets[2], 11);
    tok_ids_clear(&ids);
    assert_true(tok_encode(f->qwen, text, strlen(text), TOK_SPLIT_SPECIAL, &ids, err, sizeof err));
    assert_true(ids.len > 3);
    for (size_t i = 0; i < ids.len; i++) assert_false(tok_is_special(f->qwen, ids.ids[i]));
    /* neither file has a TemplateProcessing post-processor: nothing added */
    tok_ids_clear(&ids);
    assert_true(tok_encode(f->llama, "hi", 2, TOK_ADD_SPECIAL, &ids, err, sizeof err));
    assert_int_equal(ids.len, 1);
    /* skip_special in decode */
    int32_t seq[] = {128000, 9906, 128009};
    char *s = tok_decode(f->llama, seq, 3, true, NULL, err, sizeof err);
    assert_string_equal(s, "Hello");
    free(s);
    tok_ids_free(&ids);
}

static void test_errors(void **state)
{
    fixture *f = *state;
    tok_ids ids;
    tok_ids_init(&ids);
    char err[256];
    tok_ids_push(&ids, 7, 0);
    assert_false(tok_encode(f->qwen, "ok \xff bad", 8, 0, &ids, err, sizeof err));
    assert_non_null(strstr(err, "invalid UTF-8 at byte 3"));
    assert_int_equal(ids.len, 1); /* left as it was */
    assert_false(tok_encode(f->llama, "\xed\xa0\x80", 3, 0, &ids, err, sizeof err)); /* surrogate */
    int32_t bad[] = {9906, 999999};
    assert_null(tok_decode(f->llama, bad, 2, false, NULL, err, sizeof err));
    assert_non_null(strstr(err, "999999"));
    int32_t neg[] = {-1};
    assert_null(tok_decode(f->llama, neg, 1, false, NULL, err, sizeof err));
    /* a character cut between ids decodes to U+FFFD */
    int32_t cut[] = {9468}; /* "ðŁ": the first two bytes of an emoji */
    char *s = tok_decode(f->llama, cut, 1, false, NULL, err, sizeof err);
    assert_string_equal(s, "\xef\xbf\xbd");
    free(s);
    tok_ids_free(&ids);
}

static void test_lookups(void **state)
{
    fixture *f = *state;
    assert_int_equal(tok_vocab_size(f->qwen), 151669);
    assert_int_equal(tok_vocab_size(f->llama), 128256);
    assert_int_equal(tok_token_id(f->qwen, "Ġworld"), 1879);
    assert_int_equal(tok_token_id(f->qwen, "<|im_end|>"), 151645);
    assert_int_equal(tok_token_id(f->qwen, "no such token at all"), -1);
    assert_string_equal(tok_token_str(f->llama, 128009), "<|eot_id|>");
    assert_null(tok_token_str(f->llama, 128256));
    assert_true(tok_is_special(f->llama, 128000));
    assert_false(tok_is_special(f->llama, 9906));
    assert_int_equal(tok_bos_id(f->qwen), -1);
    assert_int_equal(tok_eos_id(f->qwen), 151645);
    assert_int_equal(tok_pad_id(f->qwen), 151643);
    assert_int_equal(tok_bos_id(f->llama), 128000);
    assert_int_equal(tok_eos_id(f->llama), 128001);
    assert_int_equal(tok_pad_id(f->llama), -1);
    assert_string_equal(tok_bos_token(f->llama), "<|begin_of_text|>");
    assert_non_null(tok_chat_template(f->qwen));
    size_t n;
    const char *b = tok_token_bytes(f->qwen, 1879, &n);
    assert_int_equal(n, 6);
    assert_memory_equal(b, " world", 6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ggml_vectors_qwen2),
        cmocka_unit_test(test_ggml_vectors_llama_bpe),
        cmocka_unit_test(test_extra_vectors),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_offsets),
        cmocka_unit_test(test_merge_loops_agree),
        cmocka_unit_test(test_fast_equals_textbook),
        cmocka_unit_test(test_cache_consistent),
        cmocka_unit_test(test_special_flags),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_lookups),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
