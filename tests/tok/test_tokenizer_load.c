/* test_tokenizer_load.c: tokenizer.json variants built in the test: the
 * features the Qwen / Llama files do not exercise (GPT-2 style ByteLevel
 * with prefix space and its own regex, TemplateProcessing, added-token
 * lstrip / rstrip / single_word / normalized, ignore_merges, String
 * splits, pair-form merges) and a clear error, naming the file and field,
 * for every malformed or unsupported file, SentencePiece ones included. */
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
#include <sys/stat.h>
#include <unistd.h>

/* The byte-level spelling of a short ASCII/bytes string. */
static char *spell(const char *s)
{
    sb o;
    sb_init(&o);
    tok_map(s, strlen(s), &o);
    return sb_take(&o);
}

/* A byte-level BPE tokenizer: ids 0..255 are the bytes, then
 * 256 he, 257 ll, 258 hell, 259 hello, 260 " w" and 261 hexl (no merge
 * path to it). Merges in the "a b" form. */
static json_t *base_tokenizer(void)
{
    json_t *vocab = json_object();
    for (int b = 0; b < 256; b++) {
        char s[2] = {(char)b, 0};
        sb o;
        sb_init(&o);
        tok_map(s, 1, &o);
        json_object_set_new(vocab, sb_str(&o), json_integer(b));
        sb_free(&o);
    }
    const char *extra[] = {"he", "ll", "hell", "hello", " w", "hexl"};
    for (int i = 0; i < 6; i++) {
        char *sp = spell(extra[i]);
        json_object_set_new(vocab, sp, json_integer(256 + i));
        free(sp);
    }
    json_t *merges = json_array();
    const char *m[][2] = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {" ", "w"}};
    for (int i = 0; i < 5; i++) {
        char *a = spell(m[i][0]), *b = spell(m[i][1]);
        json_array_append_new(merges, json_sprintf("%s %s", a, b));
        free(a);
        free(b);
    }
    return json_pack("{s:s, s:o, s:n, s:{s:s, s:b, s:b}, s:n, s:{s:s}, s:{s:s, s:o, s:o, s:b, s:b}}",
                     "version", "1.0", "added_tokens", json_array(), "normalizer", "pre_tokenizer",
                     "type", "ByteLevel", "add_prefix_space", 0, "use_regex", 0, "post_processor",
                     "decoder", "type", "ByteLevel", "model", "type", "BPE", "vocab", vocab,
                     "merges", merges, "ignore_merges", 0, "byte_fallback", 0);
}

static tok_tokenizer *load_json(json_t *root, const char *config, diag_list *d)
{
    char *s = json_dumps(root, 0);
    tok_tokenizer *t = tok_load_json(s, strlen(s), config, config ? strlen(config) : 0,
                                     "test/tokenizer.json", d);
    free(s);
    return t;
}

static void expect_encode(tok_tokenizer *t, const char *text, unsigned flags, const int32_t *want,
                          size_t n)
{
    tok_ids ids;
    tok_ids_init(&ids);
    char err[256];
    assert_true(tok_encode(t, text, strlen(text), flags, &ids, err, sizeof err));
    if (ids.len != n || (n && memcmp(ids.ids, want, n * sizeof *want) != 0)) {
        fprintf(stderr, "\"%s\":", text);
        for (size_t i = 0; i < ids.len; i++) fprintf(stderr, " %d", ids.ids[i]);
        fprintf(stderr, "\n");
        fail_msg("unexpected ids for \"%s\"", text);
    }
    tok_ids_free(&ids);
}

#define IDS(...) (const int32_t[]){__VA_ARGS__}, sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t)

static void test_basic_bpe(void **state)
{
    (void)state;
    diag_list d;
    diag_list_init(&d);
    json_t *root = base_tokenizer();
    tok_tokenizer *t = load_json(root, NULL, &d);
    assert_non_null(t);
    expect_encode(t, "hello", 0, IDS(259));
    expect_encode(t, " hello", 0, IDS(32, 259));
    expect_encode(t, "hexl", 0, IDS(256, 120, 108)); /* no merge reaches 261 */
    expect_encode(t, " w", 0, IDS(260));
    tok_free(t);
    /* ignore_merges: a word that is itself a token is taken whole */
    json_object_set_new(json_object_get(root, "model"), "ignore_merges", json_true());
    t = load_json(root, NULL, &d);
    expect_encode(t, "hexl", 0, IDS(261));
    tok_free(t);
    /* merges in the ["a", "b"] form give the same result */
    json_t *merges = json_object_get(json_object_get(root, "model"), "merges"), *pairs = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(merges, i, m) {
        const char *s = json_string_value(m), *sp = strchr(s, ' ');
        json_array_append_new(pairs, json_pack("[s#, s]", s, (int)(sp - s), sp + 1));
    }
    json_object_set_new(json_object_get(root, "model"), "merges", pairs);
    json_object_set_new(json_object_get(root, "model"), "ignore_merges", json_false());
    t = load_json(root, NULL, &d);
    expect_encode(t, "hello hexl", 0, IDS(259, 32, 256, 120, 108));
    tok_free(t);
    json_decref(root);
    assert_int_equal(d.errors, 0);
    diag_list_free(&d);
}

/* GPT-2 style: ByteLevel alone with add_prefix_space and its own regex. */
static void test_gpt2_bytelevel(void **state)
{
    (void)state;
    diag_list d;
    diag_list_init(&d);
    json_t *root = base_tokenizer();
    json_object_set_new(root, "pre_tokenizer",
                        json_pack("{s:s, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 1, "use_regex", 1));
    tok_tokenizer *t = load_json(root, NULL, &d);
    assert_non_null(t);
    /* "hello" becomes " hello", one piece of the GPT-2 regex (" ?\p{L}+") */
    expect_encode(t, "hello", 0, IDS(32, 259));
    expect_encode(t, "wa", 0, IDS(260, 97));
    /* the added space and the word both point at the word's start */
    tok_ids ids;
    tok_ids_init(&ids);
    char err[100];
    assert_true(tok_encode(t, "hello", 5, 0, &ids, err, sizeof err));
    assert_int_equal(ids.offsets[0], 0); /* the added space points at the piece */
    assert_int_equal(ids.offsets[1], 0);
    tok_ids_free(&ids);
    tok_free(t);
    json_decref(root);
    diag_list_free(&d);
}

static void test_added_tokens(void **state)
{
    (void)state;
    diag_list d;
    diag_list_init(&d);
    json_t *root = base_tokenizer();
    json_t *added = json_object_get(root, "added_tokens");
    json_array_append_new(added, json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", 300, "content",
                                           "<s>", "single_word", 0, "lstrip", 0, "rstrip", 0,
                                           "normalized", 0, "special", 1));
    json_array_append_new(added, json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", 301, "content",
                                           "[L]", "single_word", 0, "lstrip", 1, "rstrip", 1,
                                           "normalized", 0, "special", 1));
    json_array_append_new(added, json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", 302, "content",
                                           "cat", "single_word", 1, "lstrip", 0, "rstrip", 0,
                                           "normalized", 0, "special", 0));
    json_array_append_new(added, json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", 303, "content",
                                           "<s>x", "single_word", 0, "lstrip", 0, "rstrip", 0,
                                           "normalized", 0, "special", 1));
    /* normalized: matched after NFC, so the decomposed form matches too */
    json_array_append_new(added, json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", 304, "content",
                                           "\xc3\xa9t\xc3\xa9", "single_word", 0, "lstrip", 0,
                                           "rstrip", 0, "normalized", 1, "special", 0));
    json_object_set_new(root, "normalizer", json_pack("{s:s}", "type", "NFC"));
    tok_tokenizer *t = load_json(root, NULL, &d);
    assert_non_null(t);
    expect_encode(t, "a<s>b", 0, IDS(97, 300, 98));
    expect_encode(t, "<s>x", 0, IDS(303));                 /* longest wins */
    expect_encode(t, "a  [L]  b", 0, IDS(97, 301, 98));    /* strips spaces both sides */
    expect_encode(t, "cat concat cats", 0, IDS(302, 32, 99, 111, 110, 99, 97, 116, 32, 99, 97, 116, 115));
    expect_encode(t, "e\xcc\x81te\xcc\x81", 0, IDS(304)); /* decomposed input */
    expect_encode(t, "a<s>b", TOK_SPLIT_SPECIAL, IDS(97, 60, 115, 62, 98));
    /* decode: added tokens go through the ByteLevel decoder too, as in
     * Hugging Face (tokenizers issue #1392): "é" is the mapped form of the
     * byte 0xE9, so "été" decodes to a lone byte, repaired to U+FFFD */
    char err[100];
    int32_t seq[] = {97, 301, 304};
    char *s = tok_decode(t, seq, 3, false, NULL, err, sizeof err);
    assert_string_equal(s, "a[L]\xef\xbf\xbdt\xef\xbf\xbd");
    free(s);
    assert_int_equal(tok_token_id(t, "[L]"), 301);
    assert_true(tok_is_special(t, 301));
    assert_false(tok_is_special(t, 302));
    tok_free(t);
    json_decref(root);
    diag_list_free(&d);
}

static void test_template_and_config(void **state)
{
    (void)state;
    diag_list d;
    diag_list_init(&d);
    json_t *root = base_tokenizer();
    json_array_append_new(json_object_get(root, "added_tokens"),
                          json_pack("{s:i, s:s, s:b}", "id", 400, "content", "<bos>", "special", 1));
    json_array_append_new(json_object_get(root, "added_tokens"),
                          json_pack("{s:i, s:s, s:b}", "id", 401, "content", "<eos>", "special", 1));
    json_object_set_new(
        root, "post_processor",
        json_pack("{s:s, s:[{s:{s:s, s:i}}, {s:{s:s, s:i}}, {s:{s:s, s:i}}], s:{s:{s:[i]}, s:{s:[i]}}}",
                  "type", "TemplateProcessing", "single", "SpecialToken", "id", "<bos>", "type_id", 0,
                  "Sequence", "id", "A", "type_id", 0, "SpecialToken", "id", "<eos>", "type_id", 0,
                  "special_tokens", "<bos>", "ids", 400, "<eos>", "ids", 401));
    const char *config = "{\"bos_token\": {\"__type\": \"AddedToken\", \"content\": \"<bos>\"},"
                         " \"eos_token\": \"<eos>\", \"pad_token\": \"<missing>\","
                         " \"model_max_length\": 1000000000000000019884624838656,"
                         " \"chat_template\": [{\"name\": \"default\", \"template\": \"<|im_start|>\"}]}";
    tok_tokenizer *t = load_json(root, config, &d);
    assert_non_null(t);
    expect_encode(t, "hello", TOK_ADD_SPECIAL, IDS(400, 259, 401));
    expect_encode(t, "hello", 0, IDS(259));
    assert_int_equal(tok_bos_id(t), 400);
    assert_int_equal(tok_eos_id(t), 401);
    assert_int_equal(tok_pad_id(t), -1);
    assert_int_equal(d.warnings, 1); /* pad_token not in the vocabulary */
    assert_string_equal(d.items[0].path, "pad_token");
    assert_string_equal(tok_chat_template(t), "<|im_start|>");
    tok_free(t);
    json_decref(root);
    diag_list_free(&d);
}

/* Bytes without a token are dropped, as in Hugging Face (no unk_token);
 * found by fuzz_tokenizer (a word of such bytes gave no ids, twice: the
 * second time from the cache). */
static void test_missing_byte_tokens(void **state)
{
    (void)state;
    diag_list d;
    diag_list_init(&d);
    json_t *root = json_pack("{s:{s:s, s:{s:i, s:i, s:i}, s:[s]}, s:{s:s, s:b}, s:{s:s}}", "model", "type",
                             "BPE", "vocab", "a", 0, "b", 1, "ab", 2, "merges", "a b", "pre_tokenizer",
                             "type", "ByteLevel", "use_regex", 1, "decoder", "type", "ByteLevel");
    tok_tokenizer *t = load_json(root, NULL, &d);
    assert_non_null(t);
    expect_encode(t, "xyz", 0, NULL, 0);
    expect_encode(t, "xyz xyz", 0, NULL, 0);
    expect_encode(t, "axb", 0, IDS(2)); /* as HF: x dropped, a and b then merge */
    tok_free(t);
    json_decref(root);
    diag_list_free(&d);
}

/* A String split and a Sequence of pre-tokenizers. */
static void test_string_split(void **state)
{
    (void)state;
    diag_list d;
    diag_list_init(&d);
    json_t *root = base_tokenizer();
    json_object_set_new(
        root, "pre_tokenizer",
        json_pack("{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, {s:s, s:b, s:b}]}", "type", "Sequence",
                  "pretokenizers", "type", "Split", "pattern", "String", "l", "behavior", "Isolated",
                  "invert", 0, "type", "ByteLevel", "add_prefix_space", 0, "use_regex", 0));
    tok_tokenizer *t = load_json(root, NULL, &d);
    assert_non_null(t);
    expect_encode(t, "hello", 0, IDS(256, 108, 108, 111)); /* "he" "l" "l" "o" */
    tok_free(t);
    json_decref(root);
    diag_list_free(&d);
}

/* Loading `root` fails with one error whose path and message contain the
 * fragments. */
static void expect_load_error(json_t *root, const char *path, const char *msg)
{
    diag_list d;
    diag_list_init(&d);
    tok_tokenizer *t = load_json(root, NULL, &d);
    if (t) fail_msg("loaded; expected an error at %s", path);
    assert_true(d.errors >= 1);
    diag *x = &d.items[0];
    assert_string_equal(x->file, "test/tokenizer.json");
    if (path && (!x->path || !strstr(x->path, path))) fail_msg("path [%s], expected [%s]", x->path, path);
    sb all;
    sb_init(&all);
    diag_format(x, &all);
    if (!strstr(sb_str(&all), msg)) fail_msg("error [%s] lacks [%s]", sb_str(&all), msg);
    sb_free(&all);
    diag_list_free(&d);
    json_decref(root);
}

static json_t *with(const char *key, json_t *value)
{
    json_t *root = base_tokenizer();
    json_object_set_new(root, key, value);
    return root;
}

static json_t *with_model(const char *key, json_t *value)
{
    json_t *root = base_tokenizer();
    json_object_set_new(json_object_get(root, "model"), key, value);
    return root;
}

static void test_load_errors(void **state)
{
    (void)state;
    /* SentencePiece: Llama 2's tokenizer.json is BPE with byte_fallback */
    expect_load_error(with_model("byte_fallback", json_true()), "model.byte_fallback",
                      "SentencePiece-style BPE tokenizer (byte_fallback), which is not supported yet");
    expect_load_error(with_model("type", json_string("Unigram")), "model.type",
                      "SentencePiece Unigram tokenizer, which is not supported yet");
    expect_load_error(with_model("type", json_string("WordPiece")), "model.type", "not supported");
    expect_load_error(with("normalizer", json_pack("{s:s, s:[{s:s, s:s}]}", "type", "Sequence", "normalizers",
                                                   "type", "Prepend", "prepend", "\xe2\x96\x81")),
                      "normalizer.normalizers[0]", "SentencePiece");
    expect_load_error(with("pre_tokenizer", json_pack("{s:s}", "type", "Metaspace")), "pre_tokenizer",
                      "SentencePiece");
    expect_load_error(with("pre_tokenizer", json_pack("{s:s}", "type", "Whitespace")), "pre_tokenizer",
                      "pre-tokenizer 'Whitespace' is not supported");
    expect_load_error(with("pre_tokenizer", json_null()), "pre_tokenizer", "no ByteLevel pre-tokenizer");
    expect_load_error(with("pre_tokenizer", json_pack("{s:s, s:{s:s}, s:s}", "type", "Split", "pattern",
                                                      "Regex", "(?<=x)y", "behavior", "Isolated")),
                      "pre_tokenizer", "lookbehind");
    expect_load_error(with("pre_tokenizer", json_pack("{s:s, s:{s:s}, s:s}", "type", "Split", "pattern",
                                                      "Regex", "x", "behavior", "Removed")),
                      "pre_tokenizer", "behavior 'Removed'");
    expect_load_error(with("pre_tokenizer", json_pack("{s:s, s:[{s:s}, {s:s, s:{s:s}, s:s}]}", "type", "Sequence",
                                                      "pretokenizers", "type", "ByteLevel", "type", "Split",
                                                      "pattern", "Regex", "x", "behavior", "Isolated")),
                      "pre_tokenizer.pretokenizers[1]", "after ByteLevel");
    expect_load_error(with("normalizer", json_pack("{s:s}", "type", "Lowercase")), "normalizer",
                      "normalizer 'Lowercase' is not supported");
    expect_load_error(with("post_processor", json_pack("{s:s}", "type", "RobertaProcessing")),
                      "post_processor", "not supported");
    expect_load_error(with("decoder", json_pack("{s:s}", "type", "WordPiece")), "decoder", "not supported");
    expect_load_error(with("model", json_string("x")), "model", "not an object");
    expect_load_error(with_model("vocab", json_array()), "model.vocab", "wrong type");
    expect_load_error(with_model("vocab", json_pack("{s:s}", "a", "b")), "model.vocab", "bad id");
    expect_load_error(with_model("vocab", json_pack("{s:i}", "a", 99999999)), "model.vocab", "bad id");
    expect_load_error(with_model("merges", json_pack("[s]", "a b c")), "model.merges[0]", "malformed merge");
    expect_load_error(with_model("merges", json_pack("[s]", "a zz")), "model.merges[0]",
                      "\"zz\", which is not in the vocabulary");
    expect_load_error(with_model("merges", json_string("x")), "model.merges", "wrong type");
    expect_load_error(with_model("continuing_subword_prefix", json_string("##")),
                      "model.continuing_subword_prefix", "not supported");
    expect_load_error(with_model("dropout", json_real(0.1)), "model.dropout", "dropout");
    expect_load_error(with("added_tokens", json_pack("[{s:i}]", "id", 5)), "added_tokens[0]", "malformed added token");
    expect_load_error(with("added_tokens", json_pack("[{s:i, s:s}]", "id", 104, "content", "zz")),
                      "added_tokens[0]", "already belongs to the vocabulary token");
    expect_load_error(with("added_tokens", json_pack("[{s:i, s:s, s:i}]", "id", 500, "content", "zz", "special", 3)),
                      "added_tokens[0].special", "wrong type");

    /* malformed JSON: line and column */
    diag_list d;
    diag_list_init(&d);
    const char *bad = "{\n  \"model\": {\n    \"type\": \"BPE\",,\n  }\n}";
    assert_null(tok_load_json(bad, strlen(bad), NULL, 0, "bad.json", &d));
    assert_int_equal(d.items[0].line, 3);
    assert_true(d.items[0].col > 0);
    diag_list_free(&d);
    /* a bad tokenizer_config.json */
    diag_list_init(&d);
    json_t *root = base_tokenizer();
    assert_null(load_json(root, "{\"chat_template\": 3}", &d));
    assert_string_equal(d.items[0].file, "tokenizer_config.json");
    assert_string_equal(d.items[0].path, "chat_template");
    json_decref(root);
    diag_list_free(&d);
}

/* Files and folders: SentencePiece models are named as such. */
static void test_paths(void **state)
{
    (void)state;
    char dir[] = "/tmp/lathe-tok-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *model = path_join(dir, "tokenizer.model");
    FILE *f = fopen(model, "w");
    fputs("not really protobuf", f);
    fclose(f);
    diag_list d;
    diag_list_init(&d);
    assert_null(tok_load(dir, &d));
    assert_non_null(strstr(d.items[0].suggestion, "SentencePiece"));
    assert_null(tok_load(model, &d));
    assert_non_null(strstr(d.items[1].message, "SentencePiece"));
    assert_null(tok_load("/no/such/tokenizer.json", &d));
    assert_int_equal(d.errors, 3);
    diag_list_free(&d);
    /* a folder with tokenizer.json and chat_template.jinja beside it */
    char *json_path = path_join(dir, "tokenizer.json");
    json_t *root = base_tokenizer();
    assert_int_equal(json_dump_file(root, json_path, 0), 0);
    char *jinja = path_join(dir, "chat_template.jinja");
    f = fopen(jinja, "w");
    fputs("{{ '<|im_start|>' }}", f);
    fclose(f);
    diag_list_init(&d);
    tok_tokenizer *t = tok_load(dir, &d);
    assert_non_null(t);
    assert_string_equal(tok_chat_template(t), "{{ '<|im_start|>' }}");
    assert_string_equal(tok_source(t), json_path);
    tok_free(t);
    diag_list_free(&d);
    unlink(jinja);
    unlink(json_path);
    unlink(model);
    rmdir(dir);
    free(jinja);
    free(json_path);
    free(model);
    json_decref(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic_bpe),   cmocka_unit_test(test_gpt2_bytelevel),
        cmocka_unit_test(test_added_tokens), cmocka_unit_test(test_template_and_config),
        cmocka_unit_test(test_string_split), cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_missing_byte_tokens),
        cmocka_unit_test(test_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
