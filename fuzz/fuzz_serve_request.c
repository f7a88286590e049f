/* fuzz_serve_request.c: libFuzzer target for lathe serve's request parser
 * (lib/serve/serve_openai.c): any bytes as the body of /v1/completions,
 * /v1/chat/completions and the adapter routes. A refusal must carry a 400
 * with a message and serialise as OpenAI's error object; a request that
 * parses must hold only values the checks promise (n, temperature, top_p,
 * stop strings, prompts), and its reply shapes must serialise. The input
 * also goes through the incremental UTF-8 decoder (whose output must be
 * valid UTF-8, which jansson checks) and the stop-string search. */
#include "serve/serve_internal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_error(const sv_error *e)
{
    if (e->status != 400 || !e->message[0]) abort();
    json_t *j = sv_error_json(e);
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    if (!s) abort();
    free(s);
    json_decref(j);
}

static void check_request(const sv_oai_req *r)
{
    if (r->n < 1 || r->n > SV_MAX_N) abort();
    if (!(r->temperature >= 0 && r->temperature <= 2)) abort();
    if (!(r->top_p > 0 && r->top_p <= 1)) abort();
    if (r->max_tokens < 0 || r->n_stop > SV_MAX_STOP) abort();
    if (r->include_usage && !r->stream) abort();
    for (size_t i = 0; i < r->n_stop; i++)
        if (!r->stop[i][0] || strlen(r->stop[i]) > SV_MAX_STOP_LEN) abort();
    if (r->api == SV_API_CHAT && r->n_msgs == 0) abort();
    if (r->api == SV_API_COMPLETIONS && (r->n_prompts == 0 || r->n_prompts > SV_MAX_PROMPTS)) abort();
    for (size_t i = 0; i < r->n_prompts; i++)
        if (!r->prompts[i].text == !r->prompts[i].ids) abort();
}

static void check_shapes(const sv_oai_req *r, const char *text)
{
    json_t *reply = sv_oai_response(r->api, "id-1", 1, r->model ? r->model : "base");
    json_t *chunk = sv_oai_chunk(r->api, "id-1", 1, r->model ? r->model : "base", true);
    if (!reply || !chunk) abort();
    json_array_append_new(json_object_get(reply, "choices"), sv_oai_choice(r->api, 0, text, "stop"));
    json_array_append_new(json_object_get(chunk, "choices"),
                          sv_oai_chunk_choice(r->api, 0, text, true, NULL));
    char *a = json_dumps(reply, JSON_COMPACT), *b = json_dumps(chunk, JSON_COMPACT);
    if (!a || !b) abort();
    free(a);
    free(b);
    json_decref(reply);
    json_decref(chunk);
}

/* The input's bytes decoded in two pieces, stop strings cut and held back. */
static void check_text(const uint8_t *data, size_t size, const sv_oai_req *r)
{
    sv_detok d;
    sv_detok_init(&d);
    sv_detok_push(&d, (const char *)data, size / 2);
    sv_detok_push(&d, (const char *)data + size / 2, size - size / 2);
    sv_detok_flush(&d);
    json_t *s = json_stringn(d.text.buf, d.text.len);
    if (!s && memchr(d.text.buf, 0, d.text.len) == NULL) abort(); /* not valid UTF-8 */
    json_decref(s);
    if (r && r->n_stop) {
        size_t hold = sv_stop_holdback(d.text.buf, d.text.len, r->stop, r->n_stop);
        if (hold > d.text.len) abort();
        size_t len = d.text.len;
        if (sv_stop_cut(&d.text, 0, r->stop, r->n_stop) && d.text.len >= len) abort();
    }
    if (r && !memchr(d.text.buf, 0, d.text.len)) check_shapes(r, d.text.buf);
    sv_detok_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *body = (const char *)data;
    for (int api = SV_API_COMPLETIONS; api <= SV_API_CHAT; api++) {
        sv_oai_req r;
        sv_error e;
        if (sv_oai_parse((sv_api)api, body, size, &r, &e)) {
            check_request(&r);
            check_text(data, size, &r);
            sv_oai_req_free(&r);
        } else {
            check_error(&e);
        }
    }
    char *name, *path;
    sv_error e;
    if (sv_oai_parse_adapter(body, size, true, &name, &path, &e)) {
        if (!sv_name_ok(name) || !path[0]) abort();
        free(name);
        free(path);
    } else {
        check_error(&e);
    }
    check_text(data, size, NULL);
    return 0;
}
