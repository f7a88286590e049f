/* test_tok_train.c: learning a byte-level BPE tokenizer (tok_trainer_*,
 * `lathe init-tokenizer`): merges in frequency order on a text whose
 * counts are worked out by hand, the written files loaded back by
 * tok_load_json with every id, merge and special token where the format
 * says, a lossless round trip of every text it learned from (and of text
 * it never saw, bytes outside the text included), the same bytes from the
 * same input, an early stop when pairs run out, the ChatML template
 * detected exactly, and the errors (invalid UTF-8, a vocabulary out of
 * range, no text). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tok/tok.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Learns from texts[0..n) with vocab ids in all; the tokenizer.json text. */
static char *learn(const char *const *texts, size_t n, size_t vocab, uint64_t min_freq,
                   tok_train_result *res)
{
    tok_trainer *tr = tok_trainer_new();
    char err[256];
    for (size_t i = 0; i < n; i++)
        assert_true(tok_trainer_feed(tr, texts[i], strlen(texts[i]), err, sizeof err));
    tok_train_options o = {.vocab_size = vocab, .min_frequency = min_freq};
    char *json = tok_trainer_run(tr, &o, res, err, sizeof err);
    if (!json) fail_msg("%s", err);
    tok_trainer_free(tr);
    return json;
}

static tok_tokenizer *load(const char *json)
{
    char *cfg = tok_train_config_json();
    diag_list d;
    diag_list_init(&d);
    tok_tokenizer *t = tok_load_json(json, strlen(json), cfg, strlen(cfg), "trained.json", &d);
    if (!t) {
        diag_print_all(&d, stderr);
        fail_msg("the trained tokenizer does not load");
    }
    diag_list_free(&d);
    free(cfg);
    return t;
}

/* encode(text) decodes back to text; returns the number of tokens. */
static size_t round_trip(tok_tokenizer *t, const char *text)
{
    tok_ids ids;
    tok_ids_init(&ids);
    char err[256];
    assert_true(tok_encode(t, text, strlen(text), TOK_SPLIT_SPECIAL, &ids, err, sizeof err));
    size_t len;
    char *back = tok_decode(t, ids.ids, ids.len, false, &len, err, sizeof err);
    assert_non_null(back);
    assert_int_equal(len, strlen(text));
    assert_memory_equal(back, text, len);
    size_t n = ids.len;
    free(back);
    tok_ids_free(&ids);
    return n;
}

/* The merges of a text counted by hand. Pre-tokens (a leading space joins
 * the word): "low" 1, " low" 4, " lower" 1, " newest" 2. Pairs: l-o 6 and
 * o-w 6 (a tie: the pair of smaller ids, 'l'=108 'o'=111, first), Ġ-l 5,
 * w-e 3, ... After "lo": lo-w 6, Ġ-lo 5; after "low": Ġ-low 5. */
static void test_merge_order(void **state)
{
    (void)state;
    const char *texts[] = {"low low low", " low low", " lower", " newest newest"};
    tok_train_result res;
    char *json = learn(texts, 4, 256 + 3 + 3, 1, &res);
    assert_int_equal(res.vocab, 262);
    assert_int_equal(res.merges, 3);
    assert_false(res.stopped_early);
    json_error_t je;
    json_t *root = json_loads(json, 0, &je);
    assert_non_null(root);
    json_t *merges = json_object_get(json_object_get(root, "model"), "merges");
    assert_int_equal(json_array_size(merges), 3);
    assert_string_equal(json_string_value(json_array_get(json_array_get(merges, 0), 0)), "l");
    assert_string_equal(json_string_value(json_array_get(json_array_get(merges, 0), 1)), "o");
    assert_string_equal(json_string_value(json_array_get(json_array_get(merges, 1), 0)), "lo");
    assert_string_equal(json_string_value(json_array_get(json_array_get(merges, 1), 1)), "w");
    json_t *vocab = json_object_get(json_object_get(root, "model"), "vocab");
    assert_int_equal(json_integer_value(json_object_get(vocab, "l")), 'l'); /* id = byte */
    assert_int_equal(json_integer_value(json_object_get(vocab, "Ġ")), ' ');
    assert_int_equal(json_integer_value(json_object_get(vocab, "lo")), 256);
    assert_int_equal(json_integer_value(json_object_get(vocab, "low")), 257);
    json_t *added = json_object_get(root, "added_tokens");
    assert_int_equal(json_array_size(added), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(added, 2), "content")),
                        "<|im_end|>");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(added, 0), "id")), 259);

    tok_tokenizer *t = load(json);
    assert_int_equal(tok_vocab_size(t), 262);
    assert_int_equal(tok_eos_id(t), 261);
    assert_int_equal(tok_pad_id(t), 259);
    assert_int_equal(tok_bos_id(t), -1);
    assert_int_equal(tok_token_id(t, "<|im_start|>"), 260);
    assert_true(tok_is_special(t, 261));
    assert_int_equal(round_trip(t, "low"), 1);
    for (size_t i = 0; i < 4; i++) round_trip(t, texts[i]);
    tok_free(t);
    json_decref(root);
    free(json);
}

/* A real text: every text it learned from comes back byte for byte, in
 * fewer tokens than bytes; text it never saw (other scripts, control
 * bytes, special-token spellings) too. */
static void test_real_text(void **state)
{
    (void)state;
    char err[256];
    size_t len;
    char *play = file_read_all(LATHE_SOURCE_DIR "/share/data/tinyshakespeare/input.txt", 1 << 24,
                               &len, err, sizeof err);
    assert_non_null(play);
    play[len < 200000 ? len : 200000] = '\0'; /* a sixth of it is enough */
    const char *texts[] = {play};
    tok_train_result res;
    char *json = learn(texts, 1, 1024, 2, &res);
    assert_int_equal(res.vocab, 1024);
    assert_true(res.distinct_words > 1000);
    tok_tokenizer *t = load(json);
    size_t n = round_trip(t, play);
    printf("# %zu bytes in %zu tokens (%.2f bytes per token)\n", strlen(play), n,
           (double)strlen(play) / (double)n);
    assert_true((double)strlen(play) / (double)n > 2.0);
    round_trip(t, "Grüße, 世界! \x01\t\r\n 12345 <|im_end|> ");
    tok_free(t);

    /* the same input gives the same bytes */
    tok_train_result res2;
    char *again = learn(texts, 1, 1024, 2, &res2);
    assert_string_equal(json, again);
    free(again);
    free(json);
    free(play);
}

/* Too few pairs for the vocabulary asked: it stops and says so. */
static void test_stops_early(void **state)
{
    (void)state;
    const char *texts[] = {"ab ab ab cd"};
    tok_train_result res;
    char *json = learn(texts, 1, 400, 2, &res);
    assert_true(res.stopped_early);
    /* "ab" 3 (in "ab" and " ab" x2: a-b 3, Ġ-a 2); "cd" once */
    assert_true(res.vocab < 400 && res.vocab > 259);
    tok_tokenizer *t = load(json);
    round_trip(t, texts[0]);
    tok_free(t);
    free(json);
}

/* The config's chat template is ChatML, detected exactly, and renders a
 * conversation with the assistant's span (and <|im_end|>) as the target. */
static void test_chat_template(void **state)
{
    (void)state;
    const char *texts[] = {"hello world"};
    tok_train_result res;
    char *json = learn(texts, 1, 300, 1, &res);
    tok_tokenizer *t = load(json);
    chat_template tmpl;
    diag_list d;
    diag_list_init(&d);
    assert_true(chat_template_for_tokenizer(t, NULL, &tmpl, &d));
    assert_int_equal(tmpl.family, CHAT_CHATML);
    assert_true(tmpl.exact);
    chat_message msgs[2] = {{"user", "hi"}, {"assistant", "hello"}};
    chat_options co = {.enable_thinking = -1};
    tok_ids ids;
    tok_ids_init(&ids);
    uint8_t *mask = NULL;
    char err[256];
    assert_true(chat_encode(t, &tmpl, msgs, 2, &co, &ids, &mask, err, sizeof err));
    assert_int_equal(ids.ids[0], tok_token_id(t, "<|im_start|>"));
    size_t targets = 0, last = 0;
    for (size_t i = 0; i < ids.len; i++)
        if (mask[i]) targets++, last = i;
    assert_true(targets >= 2);
    assert_int_equal(ids.ids[last], tok_eos_id(t)); /* the answer ends with <|im_end|> */
    free(mask);
    tok_ids_free(&ids);
    chat_template_free(&tmpl);
    diag_list_free(&d);
    tok_free(t);
    free(json);
}

static void test_errors(void **state)
{
    (void)state;
    tok_trainer *tr = tok_trainer_new();
    char err[256];
    tok_train_options o = {.vocab_size = 300};
    tok_train_result res;
    assert_null(tok_trainer_run(tr, &o, &res, err, sizeof err));
    assert_non_null(strstr(err, "no text"));
    assert_false(tok_trainer_feed(tr, "ok \xff\xfe", 5, err, sizeof err));
    assert_non_null(strstr(err, "UTF-8 at byte 3"));
    assert_true(tok_trainer_feed(tr, "fine", 4, err, sizeof err));
    o.vocab_size = 258;
    assert_null(tok_trainer_run(tr, &o, &res, err, sizeof err));
    assert_non_null(strstr(err, "259"));
    o.vocab_size = 259; /* bytes and specials only */
    char *json = tok_trainer_run(tr, &o, &res, err, sizeof err);
    assert_non_null(json);
    assert_int_equal(res.merges, 0);
    tok_tokenizer *t = load(json);
    assert_int_equal(round_trip(t, "fine"), 4);
    tok_free(t);
    free(json);
    tok_trainer_free(tr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge_order), cmocka_unit_test(test_real_text),
        cmocka_unit_test(test_stops_early), cmocka_unit_test(test_chat_template),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
