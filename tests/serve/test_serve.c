/* test_serve.c: lathe serve's parts that need no model or network: the
 * incremental UTF-8 decoder against the WHATWG decoder's results, stop
 * strings cut and held back, the OpenAI request parser (every check names
 * its field), the error and reply shapes, the metrics' histograms and label
 * escaping, and the command line (defaults, --adapter, the key file and
 * LATHE_API_KEY). */
#include "serve/serve_internal.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include <cmocka.h>

/* ---------------------------------------------------------------- text */

/* Pushes the pieces one after another; returns the text after flush. */
static char *decode(const char *const *pieces, size_t n, size_t *mid_len)
{
    sv_detok d;
    sv_detok_init(&d);
    for (size_t i = 0; i < n; i++) sv_detok_push(&d, pieces[i], strlen(pieces[i]));
    if (mid_len) *mid_len = d.text.len;
    sv_detok_flush(&d);
    char *out = xstrdup(sb_str(&d.text));
    sv_detok_free(&d);
    return out;
}

static void test_detok_whole_characters(void **state)
{
    (void)state;
    size_t mid;
    /* é (C3 A9) and 😀 (F0 9F 98 80) cut between tokens wait for their bytes */
    const char *a[] = {"caf\xC3", "\xA9 \xF0\x9F", "\x98", "\x80!"};
    char *t = decode(a, 4, &mid);
    assert_string_equal(t, "caf\xC3\xA9 \xF0\x9F\x98\x80!");
    free(t);
    const char *b[] = {"ab\xE4\xBD"};
    t = decode(b, 1, &mid);
    assert_int_equal(mid, 2); /* the unfinished character is not in the text yet */
    assert_string_equal(t, "ab\xEF\xBF\xBD"); /* ... and one U+FFFD at the end */
    free(t);
}

static void test_detok_invalid_as_whatwg(void **state)
{
    (void)state;
    /* results of new TextDecoder().decode() (and Hugging Face's decode) */
    struct { const char *in, *out; } cases[] = {
        {"\xFF", "\xEF\xBF\xBD"},
        {"a\x80" "b", "a\xEF\xBF\xBD" "b"},
        {"\xE0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD"},          /* E0 needs A0..BF next */
        {"\xED\xA0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, /* no surrogates */
        {"\xF0\x9F\x98" "A", "\xEF\xBF\xBD" "A"},          /* one U+FFFD per maximal part */
        {"\xC0\xAF", "\xEF\xBF\xBD\xEF\xBF\xBD"},          /* overlong */
        {"\xF4\x90\x80\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, /* > U+10FFFF */
        {"\xE2\x82" "\xE2\x82\xAC", "\xEF\xBF\xBD\xE2\x82\xAC"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *p[] = {cases[i].in};
        char *t = decode(p, 1, NULL);
        assert_string_equal(t, cases[i].out);
        free(t);
        /* byte by byte gives the same */
        sv_detok d;
        sv_detok_init(&d);
        for (const char *c = cases[i].in; *c; c++) sv_detok_push(&d, c, 1);
        sv_detok_flush(&d);
        assert_string_equal(sb_str(&d.text), cases[i].out);
        sv_detok_free(&d);
    }
}

static void test_stop_strings(void **state)
{
    (void)state;
    char *stops[] = {"world", "\n\n"};
    assert_int_equal(sv_stop_maxlen(stops, 2), 5);
    assert_int_equal(sv_stop_holdback("hello wor", 9, stops, 2), 3);
    assert_int_equal(sv_stop_holdback("hello\n", 6, stops, 2), 1);
    assert_int_equal(sv_stop_holdback("hello", 5, stops, 2), 0);
    assert_int_equal(sv_stop_holdback("w", 1, stops, 2), 1);
    sb t;
    sb_init(&t);
    sb_puts(&t, "hello world, and\n\nmore");
    assert_true(sv_stop_cut(&t, 0, stops, 2));
    assert_string_equal(t.buf, "hello ");
    sb_clear(&t);
    sb_puts(&t, "a\n\nb world");
    assert_true(sv_stop_cut(&t, 0, stops, 2)); /* the earliest of them */
    assert_string_equal(t.buf, "a");
    sb_clear(&t);
    sb_puts(&t, "nothing here");
    assert_false(sv_stop_cut(&t, 0, stops, 2));
    assert_false(sv_stop_cut(&t, 100, stops, 2));
    sb_free(&t);
}

/* ---------------------------------------------------------------- requests */

static bool parse(sv_api api, const char *json, sv_oai_req *r, sv_error *e)
{
    return sv_oai_parse(api, json, strlen(json), r, e);
}

static void test_parse_chat(void **state)
{
    (void)state;
    sv_oai_req r;
    sv_error e;
    assert_true(parse(SV_API_CHAT,
                      "{\"model\": \"a1\", \"messages\": [{\"role\": \"developer\", \"content\": \"Be "
                      "brief.\"}, {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": "
                      "\"Hi \"}, {\"type\": \"text\", \"text\": \"there\"}]}], \"max_tokens\": 9, "
                      "\"max_completion_tokens\": 7, \"temperature\": 0, \"top_p\": 0.5, \"seed\": -1, "
                      "\"stop\": \"END\", \"n\": 3, \"stream\": true, \"stream_options\": "
                      "{\"include_usage\": true}, \"user\": \"x\", \"logprobs\": false, "
                      "\"chat_template_kwargs\": {\"enable_thinking\": false}}",
                      &r, &e));
    assert_string_equal(r.model, "a1");
    assert_int_equal(r.n_msgs, 2);
    assert_string_equal(r.msgs[0].role, "system");
    assert_string_equal(r.msgs[1].content, "Hi there");
    assert_int_equal(r.max_tokens, 7);
    assert_string_equal(r.max_tokens_param, "max_completion_tokens");
    assert_true(r.temperature == 0 && r.top_p == 0.5f);
    assert_true(r.has_seed && r.seed == UINT64_MAX);
    assert_int_equal(r.n_stop, 1);
    assert_string_equal(r.stop[0], "END");
    assert_int_equal(r.n, 3);
    assert_true(r.stream && r.include_usage);
    assert_int_equal(r.enable_thinking, 0);
    sv_oai_req_free(&r);
}

static void test_parse_completions(void **state)
{
    (void)state;
    sv_oai_req r;
    sv_error e;
    assert_true(parse(SV_API_COMPLETIONS, "{\"prompt\": \"Hello\"}", &r, &e));
    assert_null(r.model);
    assert_int_equal(r.n_prompts, 1);
    assert_string_equal(r.prompts[0].text, "Hello");
    assert_true(r.temperature == 1 && r.top_p == 1 && r.n == 1 && !r.has_seed && !r.stream);
    sv_oai_req_free(&r);
    assert_true(parse(SV_API_COMPLETIONS, "{\"prompt\": [1, 2, 3]}", &r, &e));
    assert_int_equal(r.n_prompts, 1);
    assert_int_equal(r.prompts[0].n_ids, 3);
    assert_int_equal(r.prompts[0].ids[2], 3);
    sv_oai_req_free(&r);
    assert_true(parse(SV_API_COMPLETIONS, "{\"prompt\": [\"a\", [4, 5]], \"n\": 2}", &r, &e));
    assert_int_equal(r.n_prompts, 2);
    assert_string_equal(r.prompts[0].text, "a");
    assert_int_equal(r.prompts[1].n_ids, 2);
    sv_oai_req_free(&r);
}

/* Each body is refused with 400 naming param. */
static void test_parse_errors_name_the_field(void **state)
{
    (void)state;
    struct { sv_api api; const char *body, *param; } cases[] = {
        {SV_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"temperature\": 2.5}", "temperature"},
        {SV_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"temperature\": true}", "temperature"},
        {SV_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"top_p\": 0}", "top_p"},
        {SV_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"n\": 17}", "n"},
        {SV_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"max_tokens\": 0}", "max_tokens"},
        {SV_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"seed\": 1.5}", "seed"},
        {SV_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"stop\": {}}", "stop"},
        {SV_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"stop\": [\"a\", 1]}", "stop"},
        {SV_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"stream_options\": {}}", "stream_options"},
        {SV_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"model\": 5}", "model"},
        {SV_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"logprobs\": true}", "logprobs"},
        {SV_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"frequency_penalty\": 0.5}", "frequency_penalty"},
        {SV_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"response_format\": {\"type\": \"json_object\"}}", "response_format"},
        {SV_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tool_choice\": \"auto\"}", "tool_choice"},
        {SV_API_CHAT, "{\"messages\": [{\"role\": \"user\"}]}", "messages"},
        {SV_API_CHAT, "{\"messages\": [{\"content\": \"x\"}]}", "messages"},
        {SV_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\"}]}]}", "messages"},
        {SV_API_CHAT, "{\"messages\": {}}", "messages"},
        {SV_API_COMPLETIONS, "{}", "prompt"},
        {SV_API_COMPLETIONS, "{\"prompt\": []}", "prompt"},
        {SV_API_COMPLETIONS, "{\"prompt\": [1, -2]}", "prompt"},
        {SV_API_COMPLETIONS, "{\"prompt\": [\"a\", 3]}", "prompt"},
        {SV_API_COMPLETIONS, "{\"prompt\": \"a\", \"echo\": true}", "echo"},
        {SV_API_COMPLETIONS, "{\"prompt\": \"a\", \"best_of\": 2}", "best_of"},
        {SV_API_COMPLETIONS, "{\"prompt\": \"a\", \"suffix\": \"z\"}", "suffix"},
        {SV_API_COMPLETIONS, "{\"prompt\": [\"a\",\"b\",\"c\",\"d\",\"e\"], \"n\": 16}", "n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sv_oai_req r;
        sv_error e;
        if (parse(cases[i].api, cases[i].body, &r, &e)) fail_msg("accepted: %s", cases[i].body);
        assert_int_equal(e.status, 400);
        if (strcmp(e.param, cases[i].param) != 0)
            fail_msg("%s: param %s, want %s (%s)", cases[i].body, e.param, cases[i].param, e.message);
        assert_true(e.message[0] != '\0');
    }
}

static void test_parse_bad_json(void **state)
{
    (void)state;
    sv_oai_req r;
    sv_error e;
    assert_false(parse(SV_API_CHAT, "{\"model\": ", &r, &e));
    assert_int_equal(e.status, 400);
    assert_non_null(strstr(e.message, "not valid JSON"));
    assert_false(parse(SV_API_CHAT, "[1]", &r, &e));
    assert_non_null(strstr(e.message, "must be a JSON object"));
    assert_false(sv_oai_parse(SV_API_CHAT, "", 0, &r, &e));
}

static void test_error_shape(void **state)
{
    (void)state;
    sv_error e;
    sv_error_field(&e, "temperature", "temperature is %d", 3);
    json_t *j = sv_error_json(&e);
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(s, "{\"error\":{\"code\":null,\"message\":\"temperature is 3\",\"param\":"
                           "\"temperature\",\"type\":\"invalid_request_error\"}}");
    free(s);
    json_decref(j);
    sv_error_set(&e, 429, "rate_limit_error", "rate_limit_exceeded", NULL, "busy");
    j = sv_error_json(&e);
    assert_true(json_is_null(json_object_get(json_object_get(j, "error"), "param")));
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "code")),
                        "rate_limit_exceeded");
    json_decref(j);
}

static void test_adapter_body(void **state)
{
    (void)state;
    char *name, *path;
    sv_error e;
    const char *ok = "{\"lora_name\": \"sql-v2\", \"lora_path\": \"/m/sql\"}";
    assert_true(sv_oai_parse_adapter(ok, strlen(ok), true, &name, &path, &e));
    assert_string_equal(name, "sql-v2");
    assert_string_equal(path, "/m/sql");
    free(name);
    free(path);
    const char *bad = "{\"lora_name\": \"a b\", \"lora_path\": \"/m\"}";
    assert_false(sv_oai_parse_adapter(bad, strlen(bad), true, &name, &path, &e));
    assert_string_equal(e.param, "lora_name");
    const char *nopath = "{\"lora_name\": \"a\"}";
    assert_false(sv_oai_parse_adapter(nopath, strlen(nopath), true, &name, &path, &e));
    assert_string_equal(e.param, "lora_path");
    assert_true(sv_oai_parse_adapter(nopath, strlen(nopath), false, &name, NULL, &e));
    free(name);
    assert_false(sv_name_ok(""));
    assert_false(sv_name_ok("a\"b"));
    assert_true(sv_name_ok("org/model:v1.2+x@y_z-w"));
}

static void test_reply_shapes(void **state)
{
    (void)state;
    json_t *c = sv_oai_chunk_choice(SV_API_CHAT, 2, "hi", true, NULL);
    char *s = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(s, "{\"delta\":{\"content\":\"hi\",\"role\":\"assistant\"},\"finish_reason\":"
                           "null,\"index\":2,\"logprobs\":null}");
    free(s);
    json_decref(c);
    c = sv_oai_chunk_choice(SV_API_COMPLETIONS, 0, NULL, false, "length");
    s = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(s, "{\"finish_reason\":\"length\",\"index\":0,\"logprobs\":null,\"text\":\"\"}");
    free(s);
    json_decref(c);
    json_t *u = sv_oai_usage(3, 4);
    assert_int_equal(json_integer_value(json_object_get(u, "total_tokens")), 7);
    json_decref(u);
    json_t *m = sv_oai_model("a1", 5, "/ad", "base", 2048);
    s = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(s, "{\"created\":5,\"id\":\"a1\",\"max_model_len\":2048,\"object\":\"model\","
                           "\"owned_by\":\"lathe\",\"parent\":\"base\",\"root\":\"/ad\"}");
    free(s);
    json_decref(m);
}

/* ---------------------------------------------------------------- metrics */

static void test_metrics_pieces(void **state)
{
    (void)state;
    sv_metrics m;
    sv_metrics_init(&m);
    sv_hist_observe(&m.ttft, 500000);      /* 0.5 ms: the first bucket */
    sv_hist_observe(&m.ttft, 3000000000LL); /* 3 s */
    sv_hist_observe(&m.ttft, 999000000000LL);
    assert_int_equal(atomic_load(&m.ttft.counts[0]), 1);
    assert_int_equal(atomic_load(&m.ttft.counts[m.ttft.n]), 1); /* +Inf */
    assert_int_equal(atomic_load(&m.ttft.total), 3);
    sv_metrics_request(&m, "a1", 200);
    sv_metrics_request(&m, "a1", 200);
    sv_metrics_request(&m, NULL, 401);
    assert_int_equal(m.n_reqs, 2);
    assert_int_equal(m.reqs[0].n, 2);
    assert_string_equal(m.reqs[1].model, "");
    sv_metrics_free(&m);
    sb out;
    sb_init(&out);
    sv_prom_label(&out, "a\"b\\c\nd");
    assert_string_equal(out.buf, "a\\\"b\\\\c\\nd");
    sb_free(&out);
}

/* ---------------------------------------------------------------- options */

static int parse_args(sv_serve_opts *o, char *err, size_t errsz, ...)
{
    char *argv[32];
    int argc = 0;
    argv[argc++] = "serve";
    va_list ap;
    va_start(ap, errsz);
    for (char *a; argc < 31 && (a = va_arg(ap, char *));) argv[argc++] = a;
    va_end(ap);
    return sv_opts_parse(o, argc, argv, err, errsz);
}

static void test_options(void **state)
{
    (void)state;
    sv_serve_opts o;
    char err[512];
    unsetenv("LATHE_API_KEY");
    assert_int_equal(parse_args(&o, err, sizeof err, "--model", "/m", NULL), LT_EXIT_OK);
    assert_string_equal(o.host, "127.0.0.1");
    assert_int_equal(o.port, 8000);
    assert_int_equal(o.max_body, 4 << 20);
    assert_null(o.api_key);
    sv_opts_free(&o);
    assert_int_equal(parse_args(&o, err, sizeof err, "--model", "/m", "--adapter", "a=/x",
                                "--adapter", "b=/y", "--kv-memory", "64Mi", "--max-batch", "4",
                                "--drain-timeout", "2m", "--port", "0", "--quiet", NULL),
                     LT_EXIT_OK);
    assert_int_equal(o.n_adapters, 2);
    assert_string_equal(o.adapters[1].name, "b");
    assert_string_equal(o.adapters[1].dir, "/y");
    assert_int_equal(o.engine.kv_bytes, 64 << 20);
    assert_int_equal(o.engine.max_batch, 4);
    assert_true(o.drain_timeout == 120 && o.quiet && o.port == 0);
    sv_opts_free(&o);
    struct { const char *a, *b, *want; } bad[] = {
        {"--port", "70000", "--port 70000"},
        {"--adapter", "noequals", "NAME=DIR"},
        {"--adapter", "/m=/x", "base model"},
        {"--chat-template", "jinja", "--chat-template jinja"},
        {"--max-batch", "0", "--max-batch 0"},
        {"--kv-memory", "lots", "--kv-memory lots"},
        {"--frobnicate", "1", "unknown option --frobnicate"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(parse_args(&o, err, sizeof err, "--model", "/m", bad[i].a, bad[i].b, NULL),
                         LT_EXIT_USAGE);
        if (!strstr(err, bad[i].want)) fail_msg("%s %s: %s", bad[i].a, bad[i].b, err);
    }
    assert_int_equal(parse_args(&o, err, sizeof err, "--port", "1", NULL), LT_EXIT_USAGE);
    assert_non_null(strstr(err, "--model"));
}

static void test_api_key_sources(void **state)
{
    (void)state;
    char path[] = "/tmp/lathe-serve-key-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "  s3cret\n", 9), 9);
    close(fd);
    sv_serve_opts o;
    char err[512];
    assert_int_equal(parse_args(&o, err, sizeof err, "--model", "/m", "--api-key-file", path, NULL),
                     LT_EXIT_OK);
    assert_string_equal(o.api_key, "s3cret");
    sv_opts_free(&o);
    assert_int_equal(parse_args(&o, err, sizeof err, "--model", "/m", "--api-key-file", path,
                                "--api-key", "x", NULL),
                     LT_EXIT_USAGE);
    assert_non_null(strstr(err, "not both"));
    setenv("LATHE_API_KEY", "from-env", 1);
    assert_int_equal(parse_args(&o, err, sizeof err, "--model", "/m", NULL), LT_EXIT_OK);
    assert_string_equal(o.api_key, "from-env");
    sv_opts_free(&o);
    assert_int_equal(parse_args(&o, err, sizeof err, "--model", "/m", "--api-key", "opt", NULL),
                     LT_EXIT_OK);
    assert_string_equal(o.api_key, "opt");
    sv_opts_free(&o);
    unsetenv("LATHE_API_KEY");
    fd = open(path, O_WRONLY | O_TRUNC);
    assert_int_equal(write(fd, "a\nb\n", 4), 4);
    close(fd);
    assert_int_equal(parse_args(&o, err, sizeof err, "--model", "/m", "--api-key-file", path, NULL),
                     LT_EXIT_USAGE);
    assert_non_null(strstr(err, "one line"));
    unlink(path);
    assert_int_equal(parse_args(&o, err, sizeof err, "--model", "/m", "--api-key-file", path, NULL),
                     LT_EXIT_USAGE);
    assert_non_null(strstr(err, "--api-key-file"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_detok_whole_characters),
        cmocka_unit_test(test_detok_invalid_as_whatwg),
        cmocka_unit_test(test_stop_strings),
        cmocka_unit_test(test_parse_chat),
        cmocka_unit_test(test_parse_completions),
        cmocka_unit_test(test_parse_errors_name_the_field),
        cmocka_unit_test(test_parse_bad_json),
        cmocka_unit_test(test_error_shape),
        cmocka_unit_test(test_adapter_body),
        cmocka_unit_test(test_reply_shapes),
        cmocka_unit_test(test_metrics_pieces),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_api_key_sources),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
