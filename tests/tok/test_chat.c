/* test_chat.c: the chat template families against strings derived by
 * reading the vendor Jinja templates in tests/ref/tokenizers/chat-templates
 * (and one rendering from extra-lenml-js.json), the assistant spans, the
 * loss mask after tokenisation, and template detection. */
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

#define TOKDIR LATHE_SOURCE_DIR "/tests/ref/tokenizers/"

static const chat_message CONV_A[] = {
    {"system", "You are a helpful assistant."},
    {"user", "What is 2+2?"},
    {"assistant", "4"},
};
static const chat_message CONV_B[] = {
    {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}, {"assistant", "See you."},
};
static const chat_message CONV_C[] = {
    {"user", "  padded question \n"},
    {"assistant", "\n answer with spaces  \n"},
};
static const chat_message CONV_D[] = {
    {"user", "Q1"},
    {"assistant", "<think>\nreason one\n</think>\n\nA1"},
    {"user", "Q2"},
    {"assistant", "<think>\nthinking\n</think>\n\nA2"},
};
#define N(a) (sizeof(a) / sizeof((a)[0]))

static void expect_render(chat_family f, const chat_message *m, size_t n, bool gen, int thinking,
                          const char *want)
{
    chat_template t;
    chat_template_force(f, "<|begin_of_text|>", &t);
    chat_options o = {.add_generation_prompt = gen, .enable_thinking = thinking};
    chat_text ct;
    char err[256];
    if (!chat_render(&t, m, n, &o, &ct, err, sizeof err)) fail_msg("%s", err);
    if (strcmp(ct.text, want) != 0)
        fail_msg("%s rendered\n[%s]\nexpected\n[%s]", chat_family_name(f), ct.text, want);
    assert_int_equal(ct.len, strlen(want));
    chat_text_free(&ct);
    chat_template_free(&t);
}

/* The assistant spans' texts, joined with '|'. */
static void expect_spans(chat_family f, const chat_message *m, size_t n, const char *want)
{
    chat_template t;
    chat_template_force(f, "<|begin_of_text|>", &t);
    chat_text ct;
    char err[256];
    assert_true(chat_render(&t, m, n, NULL, &ct, err, sizeof err));
    sb got;
    sb_init(&got);
    for (size_t i = 0; i < ct.nspans; i++) {
        if (i) sb_putc(&got, '|');
        sb_putn(&got, ct.text + ct.spans[i].begin, ct.spans[i].end - ct.spans[i].begin);
    }
    if (strcmp(sb_str(&got), want) != 0) fail_msg("%s spans [%s], expected [%s]", chat_family_name(f), sb_str(&got), want);
    sb_free(&got);
    chat_text_free(&ct);
    chat_template_free(&t);
}

static void test_chatml_qwen(void **state)
{
    (void)state;
    expect_render(CHAT_QWEN25, CONV_A, N(CONV_A), false, -1,
                  "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                  "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
                  "<|im_start|>assistant\n4<|im_end|>\n");
    expect_render(CHAT_QWEN25, CONV_B, N(CONV_B), true, -1,
                  "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
                  "assistant.<|im_end|>\n"
                  "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
                  "<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\nSee you.<|im_end|>\n"
                  "<|im_start|>assistant\n");
    expect_render(CHAT_QWEN2, CONV_B, 1, true, -1,
                  "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                  "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    expect_render(CHAT_CHATML, CONV_B, 2, false, -1,
                  "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n");
    /* ChatML does not trim */
    expect_render(CHAT_QWEN25, CONV_C, N(CONV_C), false, -1,
                  "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
                  "assistant.<|im_end|>\n"
                  "<|im_start|>user\n  padded question \n<|im_end|>\n"
                  "<|im_start|>assistant\n\n answer with spaces  \n<|im_end|>\n");
    /* consecutive tool messages share one user turn */
    const chat_message tools[] = {{"user", "Q"}, {"assistant", "A"}, {"tool", "r1"},
                                  {"tool", "r2"}, {"assistant", "B"}};
    expect_render(CHAT_QWEN25, tools, N(tools), false, -1,
                  "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
                  "assistant.<|im_end|>\n"
                  "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n"
                  "<|im_start|>user\n<tool_response>\nr1\n</tool_response>\n<tool_response>\nr2\n"
                  "</tool_response><|im_end|>\n<|im_start|>assistant\nB<|im_end|>\n");
}

static void test_qwen3(void **state)
{
    (void)state;
    /* the last assistant turn after the last query gets an empty think block */
    expect_render(CHAT_QWEN3, CONV_A, N(CONV_A), false, -1,
                  "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                  "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
                  "<|im_start|>assistant\n<think>\n\n</think>\n\n4<|im_end|>\n");
    expect_render(CHAT_QWEN3, CONV_B, N(CONV_B), false, -1,
                  "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
                  "<|im_start|>user\nBye<|im_end|>\n"
                  "<|im_start|>assistant\n<think>\n\n</think>\n\nSee you.<|im_end|>\n");
    /* earlier reasoning is dropped, the last one kept */
    expect_render(CHAT_QWEN3, CONV_D, N(CONV_D), true, 0,
                  "<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n"
                  "<|im_start|>user\nQ2<|im_end|>\n"
                  "<|im_start|>assistant\n<think>\nthinking\n</think>\n\nA2<|im_end|>\n"
                  "<|im_start|>assistant\n<think>\n\n</think>\n\n");
    expect_render(CHAT_QWEN3, CONV_D, 3, true, -1,
                  "<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n"
                  "<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\n");
    /* a wrapped tool response is not a query: both assistant turns come
     * after the last query, the middle one has no reasoning (no block) */
    const chat_message tr[] = {{"user", "Q"},
                               {"assistant", "calling"},
                               {"user", "<tool_response>x</tool_response>"},
                               {"assistant", "<think>r</think>done"}};
    expect_render(CHAT_QWEN3, tr, N(tr), false, -1,
                  "<|im_start|>user\nQ<|im_end|>\n"
                  "<|im_start|>assistant\ncalling<|im_end|>\n"
                  "<|im_start|>user\n<tool_response>x</tool_response><|im_end|>\n"
                  "<|im_start|>assistant\n<think>\nr\n</think>\n\ndone<|im_end|>\n");
    /* reasoning in a middle turn after the last query is kept */
    const chat_message mid[] = {{"user", "Q"},
                                {"assistant", "\n<think>\n\nr1\n\n</think>\n\n\nmid"},
                                {"assistant", "end"}};
    expect_render(CHAT_QWEN3, mid, N(mid), false, -1,
                  "<|im_start|>user\nQ<|im_end|>\n"
                  "<|im_start|>assistant\n<think>\nr1\n</think>\n\nmid<|im_end|>\n"
                  "<|im_start|>assistant\n<think>\n\n</think>\n\nend<|im_end|>\n");
}

static void test_llama3(void **state)
{
    (void)state;
    /* the rendering recorded in extra-lenml-js.json (early template) */
    json_error_t je;
    json_t *root = json_load_file(TOKDIR "testvectors/extra-lenml-js.json", 0, &je);
    assert_non_null(root);
    json_t *chat = json_object_get(root, "llama3_chat");
    json_t *msgs = json_object_get(chat, "messages");
    chat_message m[3];
    for (size_t i = 0; i < 3; i++) {
        m[i].role = json_string_value(json_object_get(json_array_get(msgs, i), "role"));
        m[i].content = json_string_value(json_object_get(json_array_get(msgs, i), "content"));
    }
    expect_render(CHAT_LLAMA3_EARLY, m, 3, false, -1,
                  json_string_value(json_object_get(chat, "rendered_full")));
    expect_render(CHAT_LLAMA3_EARLY, m, 2, true, -1,
                  json_string_value(json_object_get(chat, "rendered_with_generation_prompt_on_first_two")));
    json_decref(root);
    /* the fixed template honours add_generation_prompt; content is trimmed */
    expect_render(CHAT_LLAMA3, CONV_C, N(CONV_C), false, -1,
                  "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\npadded question<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\nanswer with spaces<|eot_id|>");
    /* trim is Python's strip(): Unicode spaces and U+001C..U+001F go too */
    const chat_message ws[] = {{"user", "\xe3\x80\x80\x1cx y\xc2\xa0\x1f"}};
    expect_render(CHAT_LLAMA3, ws, 1, true, -1,
                  "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nx y<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void test_llama31(void **state)
{
    (void)state;
    const char *head = "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                       "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";
    char want[1024];
    snprintf(want, sizeof want,
             "%sYou are a helpful assistant.<|eot_id|>"
             "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
             "<|start_header_id|>assistant<|end_header_id|>\n\n4<|eot_id|>"
             "<|start_header_id|>assistant<|end_header_id|>\n\n",
             head);
    expect_render(CHAT_LLAMA31, CONV_A, N(CONV_A), true, -1, want);
    expect_render(CHAT_LLAMA32, CONV_A, N(CONV_A), true, -1, want);
    snprintf(want, sizeof want,
             "%s<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
             "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>",
             head);
    expect_render(CHAT_LLAMA31, CONV_B, 2, false, -1, want);
    /* a tool result is written as a JSON string (a string "is iterable") */
    const chat_message tool[] = {{"user", "Q"}, {"tool", "4\"2\n"}};
    snprintf(want, sizeof want,
             "%s<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nQ<|eot_id|>"
             "<|start_header_id|>ipython<|end_header_id|>\n\n\"4\\\"2\\n\"<|eot_id|>",
             head);
    expect_render(CHAT_LLAMA31, tool, 2, false, -1, want);
    /* the date can be set */
    chat_template t;
    chat_template_force(CHAT_LLAMA32, "<|begin_of_text|>", &t);
    chat_options o = {.date_string = "01 Jan 2025"};
    chat_text ct;
    char err[200];
    assert_true(chat_render(&t, CONV_B, 1, &o, &ct, err, sizeof err));
    assert_non_null(strstr(ct.text, "Today Date: 01 Jan 2025\n\n"));
    chat_text_free(&ct);
    chat_template_free(&t);
}

static void test_spans(void **state)
{
    (void)state;
    expect_spans(CHAT_QWEN25, CONV_A, N(CONV_A), "4<|im_end|>");
    expect_spans(CHAT_QWEN3, CONV_D, N(CONV_D), "A1<|im_end|>|<think>\nthinking\n</think>\n\nA2<|im_end|>");
    expect_spans(CHAT_LLAMA31, CONV_B, N(CONV_B), "Hello!<|eot_id|>|See you.<|eot_id|>");
    expect_spans(CHAT_LLAMA3_EARLY, CONV_C, N(CONV_C), "answer with spaces<|eot_id|>");
    expect_spans(CHAT_CHATML, CONV_B, 1, "");
}

static void test_errors(void **state)
{
    (void)state;
    chat_template t;
    chat_text ct;
    char err[300];
    chat_template_force(CHAT_QWEN25, NULL, &t);
    const chat_message bad[] = {{"user", "x"}, {"function", "y"}};
    assert_false(chat_render(&t, bad, 2, NULL, &ct, err, sizeof err));
    assert_non_null(strstr(err, "role 'function'"));
    assert_false(chat_render(&t, bad, 0, NULL, &ct, err, sizeof err));
    const chat_message nul[] = {{"user", NULL}};
    assert_false(chat_render(&t, nul, 1, NULL, &ct, err, sizeof err));
    const chat_message utf[] = {{"user", "a\xff"}};
    assert_false(chat_render(&t, utf, 1, NULL, &ct, err, sizeof err));
    chat_template_free(&t);
    chat_template_force(CHAT_CHATML, NULL, &t);
    const chat_message tool[] = {{"tool", "x"}};
    assert_false(chat_render(&t, tool, 1, NULL, &ct, err, sizeof err));
    chat_template_free(&t);
}

static void detect_file(const char *name, chat_family want)
{
    char path[512], err[300];
    snprintf(path, sizeof path, TOKDIR "chat-templates/%s", name);
    size_t len;
    char *s = file_read_all(path, 1 << 20, &len, err, sizeof err);
    assert_non_null(s);
    chat_template t;
    if (!chat_template_detect(s, NULL, &t, err, sizeof err)) fail_msg("%s: %s", name, err);
    assert_int_equal(t.family, want);
    assert_true(t.exact);
    assert_false(t.forced);
    chat_template_free(&t);
    /* an edited copy is recognised by its features, not as exact */
    sb edited;
    sb_init(&edited);
    sb_puts(&edited, "{#- edited -#}");
    sb_puts(&edited, s);
    assert_true(chat_template_detect(edited.buf, NULL, &t, err, sizeof err));
    assert_int_equal(t.family, want);
    assert_false(t.exact);
    chat_template_free(&t);
    sb_free(&edited);
    free(s);
}

static void test_detect(void **state)
{
    (void)state;
    detect_file("Qwen-Qwen2.5-7B-Instruct.jinja", CHAT_QWEN25);
    detect_file("Qwen-Qwen3-0.6B.jinja", CHAT_QWEN3);
    detect_file("qwen3-from-tokenizer_config.jinja", CHAT_QWEN3);
    detect_file("llama3-from-tokenizer_config.jinja", CHAT_LLAMA3_EARLY);
    detect_file("meta-llama-Llama-3.1-8B-Instruct.jinja", CHAT_LLAMA31);
    detect_file("meta-llama-Llama-3.2-3B-Instruct.jinja", CHAT_LLAMA32);
    char err[300];
    size_t len;
    char *s = file_read_all(TOKDIR "chat-templates/mistralai-Mistral-Nemo-Instruct-2407.jinja",
                            1 << 20, &len, err, sizeof err);
    chat_template t;
    assert_false(chat_template_detect(s, NULL, &t, err, sizeof err));
    assert_non_null(strstr(err, "[INST]"));
    free(s);
    assert_false(chat_template_detect("{{ messages }}", NULL, &t, err, sizeof err));
    assert_true(chat_template_detect("{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}",
                                     NULL, &t, err, sizeof err));
    assert_int_equal(t.family, CHAT_CHATML);
    chat_template_free(&t);
    /* family names */
    chat_family f;
    assert_true(chat_family_parse("Qwen2.5", &f));
    assert_int_equal(f, CHAT_QWEN25);
    assert_false(chat_family_parse("none", &f));
    assert_string_equal(chat_family_name(CHAT_LLAMA3_EARLY), "llama3-early");
}

static void test_for_tokenizer_and_mask(void **state)
{
    (void)state;
    diag_list d;
    diag_list_init(&d);
    tok_tokenizer *qwen = tok_load(LATHE_SOURCE_DIR "/share/tokenizers/qwen3", &d);
    tok_tokenizer *llama = tok_load(LATHE_SOURCE_DIR "/share/tokenizers/llama3", &d);
    assert_non_null(qwen);
    assert_non_null(llama);
    chat_template tq, tl, tf;
    assert_true(chat_template_for_tokenizer(qwen, NULL, &tq, &d));
    assert_int_equal(tq.family, CHAT_QWEN3);
    assert_true(tq.exact);
    assert_true(chat_template_for_tokenizer(llama, NULL, &tl, &d));
    assert_int_equal(tl.family, CHAT_LLAMA3_EARLY);
    assert_string_equal(tl.bos_token, "<|begin_of_text|>");
    sb desc;
    sb_init(&desc);
    chat_template_describe(&tl, &desc);
    assert_non_null(strstr(desc.buf, "llama3-early"));
    sb_free(&desc);
    /* forcing: a known name, then a misspelt one */
    assert_true(chat_template_for_tokenizer(llama, "llama3.1", &tf, &d));
    assert_true(tf.forced);
    chat_template_free(&tf);
    assert_int_equal(d.errors, 0);
    assert_false(chat_template_for_tokenizer(llama, "lama3.1", &tf, &d));
    assert_int_equal(d.errors, 1);
    assert_non_null(strstr(d.items[0].suggestion, "llama3.1"));

    /* the loss mask covers exactly the assistant's tokens */
    tok_ids ids;
    tok_ids_init(&ids);
    uint8_t *mask = NULL;
    char err[300];
    struct {
        tok_tokenizer *tok;
        chat_template *t;
        const char *want;
    } cases[] = {{qwen, &tq, "<think>\n\n</think>\n\n4<|im_end|>"}, {llama, &tl, "4<|eot_id|>"}};
    for (size_t c = 0; c < 2; c++) {
        assert_true(chat_encode(cases[c].tok, cases[c].t, CONV_A, N(CONV_A), NULL, &ids, &mask, err,
                                sizeof err));
        int32_t kept[64];
        size_t nk = 0;
        for (size_t i = 0; i < ids.len; i++)
            if (mask[i]) kept[nk++] = ids.ids[i];
        char *text = tok_decode(cases[c].tok, kept, nk, false, NULL, err, sizeof err);
        assert_string_equal(text, cases[c].want);
        free(text);
        free(mask);
    }
    tok_ids_free(&ids);
    chat_template_free(&tq);
    chat_template_free(&tl);
    tok_free(qwen);
    tok_free(llama);
    diag_list_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chatml_qwen), cmocka_unit_test(test_qwen3),
        cmocka_unit_test(test_llama3),      cmocka_unit_test(test_llama31),
        cmocka_unit_test(test_spans),       cmocka_unit_test(test_errors),
        cmocka_unit_test(test_detect),      cmocka_unit_test(test_for_tokenizer_and_mask),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
