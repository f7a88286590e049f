/* serve_openai.c: OpenAI's API as lathe serve reads and writes it: the
 * request bodies of /v1/completions and /v1/chat/completions parsed and
 * checked field by field (a 400 names the field and the fix), the adapter
 * routes' bodies, and the JSON shapes of errors, replies, stream chunks and
 * models. Nothing here touches the engine or the network, so the fuzz
 * target (fuzz/fuzz_serve_request.c) runs all of it. */
#include "serve_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- errors */

static void error_vset(sv_error *e, int status, const char *type, const char *code,
                       const char *param, const char *fmt, va_list ap)
{
    e->status = status;
    e->type = type;
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    vsnprintf(e->message, sizeof e->message, fmt, ap);
}

void sv_error_set(sv_error *e, int status, const char *type, const char *code, const char *param,
                  const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vset(e, status, type, code, param, fmt, ap);
    va_end(ap);
}

void sv_error_field(sv_error *e, const char *param, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vset(e, 400, "invalid_request_error", NULL, param, fmt, ap);
    va_end(ap);
}

static json_t *str_or_null(const char *s)
{
    return s && *s ? json_string(s) : json_null();
}

json_t *sv_error_json(const sv_error *e)
{
    /* a message cut by snprintf inside a multi-byte character is not UTF-8 */
    json_t *msg = json_string(e->message);
    if (!msg) msg = json_string("(the message was not valid UTF-8)");
    return json_pack("{s:{s:o, s:s, s:o, s:o}}", "error", "message", msg, "type",
                     e->type ? e->type : "invalid_request_error", "param", str_or_null(e->param),
                     "code", str_or_null(e->code));
}

/* ---------------------------------------------------------------- fields */

/* A field that is absent or null counts as not given. */
static json_t *field(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return v && !json_is_null(v) ? v : NULL;
}

static bool want_bool(json_t *o, const char *key, bool *out, sv_error *e)
{
    json_t *v = field(o, key);
    if (!v) return true;
    if (!json_is_boolean(v)) {
        sv_error_field(e, key, "%s must be true or false, not %s", key, json_kind(v));
        return false;
    }
    *out = json_is_true(v);
    return true;
}

/* A number in [lo, hi] (lo excluded when lo_open); *given tells whether it
 * was there. */
static bool want_number(json_t *o, const char *key, double lo, double hi, bool lo_open,
                        double *out, sv_error *e)
{
    json_t *v = field(o, key);
    if (!v) return true;
    if (!json_is_number(v)) {
        sv_error_field(e, key, "%s must be a number, not %s", key, json_kind(v));
        return false;
    }
    double d = json_number_value(v);
    if (!isfinite(d) || d > hi || d < lo || (lo_open && d == lo)) {
        sv_error_field(e, key, "%s is %g; it must be %s %g and at most %g", key, d,
                       lo_open ? "more than" : "at least", lo, hi);
        return false;
    }
    *out = d;
    return true;
}

static bool want_int(json_t *o, const char *key, json_int_t lo, json_int_t hi, json_int_t *out,
                     sv_error *e)
{
    json_t *v = field(o, key);
    if (!v) return true;
    if (!json_is_integer(v)) {
        sv_error_field(e, key, "%s must be an integer, not %s", key, json_kind(v));
        return false;
    }
    json_int_t i = json_integer_value(v);
    if (i < lo || i > hi) {
        sv_error_field(e, key, "%s is %lld; it must be from %lld to %lld", key, (long long)i,
                       (long long)lo, (long long)hi);
        return false;
    }
    *out = i;
    return true;
}

/* ---------------------------------------------------------------- unsupported */

/* Fields of OpenAI's API that lathe serve does not implement: refused when
 * they ask for something (false, 0, null, "none" and empty ask nothing). */
static bool refuse_unsupported(json_t *o, sv_error *e)
{
    static const char *const flags[] = {"logprobs", "echo"};
    for (size_t i = 0; i < 2; i++) {
        json_t *v = field(o, flags[i]);
        if (v && !json_is_false(v) && !(json_is_integer(v) && json_integer_value(v) == 0)) {
            sv_error_field(e, flags[i], "%s is not supported by lathe serve; leave it out",
                           flags[i]);
            return false;
        }
    }
    static const char *const present[] = {"top_logprobs", "functions", "function_call",
                                          "suffix", "tools", "logit_bias"};
    for (size_t i = 0; i < 6; i++) {
        json_t *v = field(o, present[i]);
        bool empty = !v || (json_is_array(v) && json_array_size(v) == 0) ||
                     (json_is_object(v) && json_object_size(v) == 0) ||
                     (json_is_string(v) && json_string_length(v) == 0) ||
                     (json_is_integer(v) && json_integer_value(v) == 0);
        if (!empty) {
            sv_error_field(e, present[i], "%s is not supported by lathe serve; leave it out",
                           present[i]);
            return false;
        }
    }
    json_t *tc = field(o, "tool_choice");
    if (tc && !(json_is_string(tc) && strcmp(json_string_value(tc), "none") == 0)) {
        sv_error_field(e, "tool_choice", "tools are not supported by lathe serve; leave "
                       "tool_choice out (or \"none\")");
        return false;
    }
    json_t *rf = field(o, "response_format");
    if (rf) {
        const char *t = json_string_value(json_object_get(rf, "type"));
        if (!json_is_object(rf) || !t || strcmp(t, "text") != 0) {
            sv_error_field(e, "response_format", "only {\"type\": \"text\"} is supported as "
                           "response_format");
            return false;
        }
    }
    static const char *const penalties[] = {"presence_penalty", "frequency_penalty"};
    for (size_t i = 0; i < 2; i++) {
        double p = 0;
        if (!want_number(o, penalties[i], -2, 2, false, &p, e)) return false;
        if (p != 0) {
            sv_error_field(e, penalties[i], "%s is not supported by lathe serve; give 0 or leave "
                           "it out", penalties[i]);
            return false;
        }
    }
    json_int_t best_of = 1;
    if (!want_int(o, "best_of", 1, 1, &best_of, e)) {
        snprintf(e->message, sizeof e->message, "best_of is not supported by lathe serve; use n");
        return false;
    }
    return true;
}

/* ---------------------------------------------------------------- sampling */

static bool parse_stop(json_t *o, sv_oai_req *r, sv_error *e)
{
    json_t *v = field(o, "stop");
    if (!v) return true;
    size_t n = json_is_string(v) ? 1 : json_is_array(v) ? json_array_size(v) : 0;
    if (!json_is_string(v) && !json_is_array(v)) {
        sv_error_field(e, "stop", "stop must be a string or an array of strings, not %s",
                       json_kind(v));
        return false;
    }
    if (n > SV_MAX_STOP) {
        sv_error_field(e, "stop", "stop has %zu strings; at most %d are allowed", n, SV_MAX_STOP);
        return false;
    }
    r->stop = xcalloc(n ? n : 1, sizeof *r->stop);
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_is_string(v) ? v : json_array_get(v, i);
        if (!json_is_string(s)) {
            sv_error_field(e, "stop", "stop[%zu] must be a string, not %s", i, json_kind(s));
            return false;
        }
        size_t len = json_string_length(s);
        if (len == 0 || len > SV_MAX_STOP_LEN) {
            sv_error_field(e, "stop", "stop[%zu] is %zu bytes long; a stop string must have 1 to "
                           "%d bytes", i, len, SV_MAX_STOP_LEN);
            return false;
        }
        r->stop[r->n_stop++] = xstrdup(json_string_value(s));
    }
    return true;
}

static bool parse_sampling(json_t *o, sv_oai_req *r, sv_error *e)
{
    double t = 1, p = 1;
    json_int_t n = 1, seed = 0, mt = 0, mct = 0;
    if (!want_number(o, "temperature", 0, 2, false, &t, e)) return false;
    if (!want_number(o, "top_p", 0, 1, true, &p, e)) return false;
    if (!want_int(o, "n", 1, SV_MAX_N, &n, e)) return false;
    if (!want_int(o, "max_tokens", 1, 1 << 30, &mt, e)) return false;
    if (!want_int(o, "max_completion_tokens", 1, 1 << 30, &mct, e)) return false;
    json_t *sv = field(o, "seed");
    if (sv && !json_is_integer(sv)) {
        sv_error_field(e, "seed", "seed must be an integer, not %s", json_kind(sv));
        return false;
    }
    if (sv) seed = json_integer_value(sv);
    r->temperature = (float)t;
    r->top_p = (float)p;
    r->n = (int)n;
    r->has_seed = sv != NULL;
    r->seed = (uint64_t)seed;
    r->max_tokens = (int)(mct ? mct : mt);
    r->max_tokens_param = mct ? "max_completion_tokens" : "max_tokens";
    if (!want_bool(o, "stream", &r->stream, e)) return false;
    json_t *so = field(o, "stream_options");
    if (so) {
        if (!json_is_object(so)) {
            sv_error_field(e, "stream_options", "stream_options must be an object, not %s",
                           json_kind(so));
            return false;
        }
        if (!r->stream) {
            sv_error_field(e, "stream_options", "stream_options is only allowed when stream is "
                           "true");
            return false;
        }
        if (!want_bool(so, "include_usage", &r->include_usage, e)) {
            snprintf(e->param, sizeof e->param, "stream_options.include_usage");
            return false;
        }
    }
    return parse_stop(o, r, e);
}

/* ---------------------------------------------------------------- prompts */

/* An array of token ids into p; false when v holds anything else. */
static bool token_array(json_t *v, sv_prompt *p)
{
    size_t n = json_array_size(v);
    if (n == 0) return false;
    p->ids = xmalloc(n * sizeof *p->ids);
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(v, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 ||
            json_integer_value(x) > INT32_MAX)
            return false;
        p->ids[i] = (int32_t)json_integer_value(x);
    }
    p->n_ids = (int)n;
    return true;
}

static bool parse_prompts(json_t *o, sv_oai_req *r, sv_error *e)
{
    static const char shapes[] = "a string, an array of strings, an array of token ids or an "
                                 "array of arrays of token ids";
    json_t *v = field(o, "prompt");
    if (!v) {
        sv_error_field(e, "prompt", "prompt is required: %s", shapes);
        return false;
    }
    bool ids = json_is_array(v) && json_is_integer(json_array_get(v, 0));
    size_t n = json_is_string(v) || ids ? 1 : json_array_size(v);
    if (!json_is_string(v) && !json_is_array(v)) {
        sv_error_field(e, "prompt", "prompt must be %s, not %s", shapes, json_kind(v));
        return false;
    }
    if (n == 0 || n > SV_MAX_PROMPTS) {
        sv_error_field(e, "prompt", "prompt holds %zu prompts; give 1 to %d", n, SV_MAX_PROMPTS);
        return false;
    }
    r->prompts = xcalloc(n, sizeof *r->prompts);
    r->n_prompts = n;
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_is_string(v) || ids ? v : json_array_get(v, i);
        sv_prompt *p = &r->prompts[i];
        if (json_is_string(x)) {
            p->text = xstrdup(json_string_value(x));
        } else if (!json_is_array(x) || !token_array(x, p)) {
            sv_error_field(e, "prompt", "prompt[%zu] must be a string or a non-empty array of "
                           "token ids (integers from 0), not %s", i, json_kind(x));
            return false;
        }
    }
    return true;
}

/* A message's content: a string, or text parts [{"type": "text", "text"}]. */
static char *message_content(json_t *c, size_t i, sv_error *e)
{
    if (json_is_string(c)) return xstrdup(json_string_value(c));
    if (!c || json_is_null(c)) {
        sv_error_field(e, "messages", "messages[%zu].content is required: a string or an array "
                       "of text parts", i);
        return NULL;
    }
    if (!json_is_array(c)) {
        sv_error_field(e, "messages", "messages[%zu].content must be a string or an array of "
                       "text parts, not %s", i, json_kind(c));
        return NULL;
    }
    sb out;
    sb_init(&out);
    for (size_t j = 0; j < json_array_size(c); j++) {
        json_t *part = json_array_get(c, j);
        const char *type = json_string_value(json_object_get(part, "type"));
        json_t *text = json_object_get(part, "text");
        if (!type || strcmp(type, "text") != 0 || !json_is_string(text)) {
            sv_error_field(e, "messages", "messages[%zu].content[%zu] must be {\"type\": \"text\", "
                           "\"text\": \"...\"}: lathe serve takes text only", i, j);
            sb_free(&out);
            return NULL;
        }
        sb_putn(&out, json_string_value(text), json_string_length(text));
    }
    if (!out.len) sb_puts(&out, "");
    return sb_take(&out);
}

static bool parse_messages(json_t *o, sv_oai_req *r, sv_error *e)
{
    json_t *v = field(o, "messages");
    if (!json_is_array(v) || json_array_size(v) == 0) {
        sv_error_field(e, "messages", "messages must be a non-empty array of {\"role\", "
                       "\"content\"} objects%s%s", v ? ", not " : "", v ? json_kind(v) : "");
        return false;
    }
    size_t n = json_array_size(v);
    if (n > SV_MAX_MESSAGES) {
        sv_error_field(e, "messages", "messages holds %zu messages; at most %d are allowed", n,
                       SV_MAX_MESSAGES);
        return false;
    }
    r->msgs = xcalloc(n, sizeof *r->msgs);
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(v, i);
        const char *role = json_string_value(json_object_get(m, "role"));
        if (!json_is_object(m) || !role) {
            sv_error_field(e, "messages", "messages[%zu] must be an object with a string role "
                           "(system, user, assistant)", i);
            return false;
        }
        char *content = message_content(json_object_get(m, "content"), i, e);
        if (!content) return false;
        /* OpenAI's newer name for the system role */
        r->msgs[i].role = xstrdup(strcmp(role, "developer") == 0 ? "system" : role);
        r->msgs[i].content = content;
        r->n_msgs++;
    }
    json_t *kw = field(o, "chat_template_kwargs");
    if (kw && !json_is_object(kw)) {
        sv_error_field(e, "chat_template_kwargs", "chat_template_kwargs must be an object");
        return false;
    }
    json_t *think = kw ? field(kw, "enable_thinking") : NULL;
    if (think && !json_is_boolean(think)) {
        sv_error_field(e, "chat_template_kwargs.enable_thinking", "enable_thinking must be true "
                       "or false");
        return false;
    }
    r->enable_thinking = think ? json_is_true(think) : -1;
    return true;
}

/* ---------------------------------------------------------------- requests */

static json_t *load_object(const char *body, size_t len, sv_error *e)
{
    json_error_t je;
    json_t *o = json_loadb(body, len, 0, &je);
    if (!o) {
        sv_error_field(e, NULL, "the body is not valid JSON: %s (line %d, column %d)", je.text,
                       je.line, je.column);
        return NULL;
    }
    if (!json_is_object(o)) {
        sv_error_field(e, NULL, "the body must be a JSON object, not %s", json_kind(o));
        json_decref(o);
        return NULL;
    }
    return o;
}

static bool parse_request(sv_api api, json_t *o, sv_oai_req *r, sv_error *e)
{
    json_t *model = field(o, "model");
    if (model && !json_is_string(model)) {
        sv_error_field(e, "model", "model must be a string (an id from GET /v1/models), not %s",
                       json_kind(model));
        return false;
    }
    if (model) r->model = xstrdup(json_string_value(model));
    if (!refuse_unsupported(o, e) || !parse_sampling(o, r, e)) return false;
    if (!(api == SV_API_CHAT ? parse_messages(o, r, e) : parse_prompts(o, r, e))) return false;
    size_t choices = (api == SV_API_CHAT ? 1 : r->n_prompts) * (size_t)r->n;
    if (choices > SV_MAX_CHOICES) {
        sv_error_field(e, "n", "%zu prompts with n %d make %zu choices; at most %d are allowed",
                       r->n_prompts, r->n, choices, SV_MAX_CHOICES);
        return false;
    }
    return true;
}

bool sv_oai_parse(sv_api api, const char *body, size_t len, sv_oai_req *r, sv_error *e)
{
    memset(r, 0, sizeof *r);
    r->api = api;
    r->n = 1;
    r->enable_thinking = -1;
    json_t *o = load_object(body, len, e);
    if (!o) return false;
    bool ok = parse_request(api, o, r, e);
    json_decref(o);
    if (!ok) sv_oai_req_free(r);
    return ok;
}

void sv_oai_req_free(sv_oai_req *r)
{
    free(r->model);
    for (size_t i = 0; i < r->n_prompts; i++) {
        free(r->prompts[i].text);
        free(r->prompts[i].ids);
    }
    free(r->prompts);
    for (size_t i = 0; i < r->n_msgs; i++) {
        free(r->msgs[i].role);
        free(r->msgs[i].content);
    }
    free(r->msgs);
    for (size_t i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->stop);
    memset(r, 0, sizeof *r);
}

bool sv_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > SV_MAX_NAME) return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  strchr("._:@/+-", c);
        if (!ok) return false;
    }
    return true;
}

static bool adapter_string(json_t *o, const char *key, char **out, sv_error *e)
{
    json_t *v = field(o, key);
    if (!json_is_string(v) || json_string_length(v) == 0) {
        sv_error_field(e, key, "%s is required: a non-empty string%s%s", key, v ? ", not " : "",
                       v ? json_kind(v) : "");
        return false;
    }
    *out = xstrdup(json_string_value(v));
    return true;
}

bool sv_oai_parse_adapter(const char *body, size_t len, bool need_path, char **name, char **path,
                          sv_error *e)
{
    *name = NULL;
    if (path) *path = NULL;
    json_t *o = load_object(body, len, e);
    if (!o) return false;
    bool ok = adapter_string(o, "lora_name", name, e);
    if (ok && !sv_name_ok(*name)) {
        sv_error_field(e, "lora_name", "lora_name must be 1 to %d characters of letters, digits "
                       "and ._:@/+-", SV_MAX_NAME);
        ok = false;
    }
    if (ok && need_path) ok = adapter_string(o, "lora_path", path, e);
    json_decref(o);
    if (!ok) {
        free(*name);
        *name = NULL;
        if (path) {
            free(*path);
            *path = NULL;
        }
    }
    return ok;
}

/* ---------------------------------------------------------------- replies */

json_t *sv_oai_usage(int prompt_tokens, int completion_tokens)
{
    return json_pack("{s:i, s:i, s:i}", "prompt_tokens", prompt_tokens, "completion_tokens",
                     completion_tokens, "total_tokens", prompt_tokens + completion_tokens);
}

json_t *sv_oai_response(sv_api api, const char *id, int64_t created, const char *model)
{
    return json_pack("{s:s, s:s, s:I, s:s, s:[]}", "id", id, "object",
                     api == SV_API_CHAT ? "chat.completion" : "text_completion", "created",
                     (json_int_t)created, "model", model, "choices");
}

json_t *sv_oai_choice(sv_api api, int index, const char *text, const char *finish)
{
    if (api == SV_API_CHAT)
        return json_pack("{s:i, s:{s:s, s:s}, s:n, s:s}", "index", index, "message", "role",
                         "assistant", "content", text, "logprobs", "finish_reason", finish);
    return json_pack("{s:i, s:s, s:n, s:s}", "index", index, "text", text, "logprobs",
                     "finish_reason", finish);
}

json_t *sv_oai_chunk(sv_api api, const char *id, int64_t created, const char *model,
                     bool usage_null)
{
    json_t *c = json_pack("{s:s, s:s, s:I, s:s, s:[]}", "id", id, "object",
                          api == SV_API_CHAT ? "chat.completion.chunk" : "text_completion",
                          "created", (json_int_t)created, "model", model, "choices");
    if (usage_null) json_object_set_new(c, "usage", json_null());
    return c;
}

json_t *sv_oai_chunk_choice(sv_api api, int index, const char *text, bool role,
                            const char *finish)
{
    json_t *c = json_pack("{s:i, s:n, s:o}", "index", index, "logprobs", "finish_reason",
                          finish ? json_string(finish) : json_null());
    if (api == SV_API_CHAT) {
        json_t *delta = json_object();
        if (role) json_object_set_new(delta, "role", json_string("assistant"));
        if (text) json_object_set_new(delta, "content", json_string(text));
        json_object_set_new(c, "delta", delta);
    } else {
        json_object_set_new(c, "text", json_string(text ? text : ""));
    }
    return c;
}

json_t *sv_oai_model(const char *id, int64_t created, const char *root, const char *parent,
                     int max_model_len)
{
    return json_pack("{s:s, s:s, s:I, s:s, s:s, s:o, s:i}", "id", id, "object", "model",
                     "created", (json_int_t)created, "owned_by", "lathe", "root", root, "parent",
                     parent ? json_string(parent) : json_null(), "max_model_len", max_model_len);
}
