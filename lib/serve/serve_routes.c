/* serve_routes.c: the routes other than completions. GET /v1/models (the
 * base model and every adapter as a model id, in vLLM's shape) and
 * /v1/models/ID; POST /v1/load_lora_adapter and /v1/unload_lora_adapter
 * (adapters at run time, as vLLM: the engine checks rank, targets and
 * shapes against the base model and keeps at most --max-adapters in
 * memory); GET /health and /ready (200 when serving, 503 while loading or
 * draining); GET /metrics. */
#include "serve_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *base_card(sv_server *s)
{
    return sv_oai_model(s->base_id, s->created, s->o->model_dir, NULL, s->max_context);
}

static json_t *adapter_card(sv_server *s, const sv_adapter_info *a)
{
    return sv_oai_model(a->name, s->created, a->dir, s->base_id, s->max_context);
}

void sv_route_models(sv_conn *c, const char *id)
{
    sv_server *s = c->s;
    size_t n = 0;
    sv_adapter_info *a = sv_engine_adapters(s->engine, &n);
    json_t *found = NULL;
    json_t *data = json_array();
    json_array_append_new(data, base_card(s));
    for (size_t i = 0; i < n; i++) json_array_append_new(data, adapter_card(s, &a[i]));
    sv_adapter_info_free(a, n);
    for (size_t i = 0; id && i < json_array_size(data); i++) {
        json_t *m = json_array_get(data, i);
        if (strcmp(json_string_value(json_object_get(m, "id")), id) == 0) found = json_incref(m);
    }
    if (!id) {
        sv_reply_json(c, 200, json_pack("{s:s, s:o}", "object", "list", "data", data));
        return;
    }
    json_decref(data);
    if (found) {
        sv_conn_set_model(c, id);
        sv_reply_json(c, 200, found);
        return;
    }
    char *list = sv_model_list(s);
    sv_error e;
    sv_error_set(&e, 404, "invalid_request_error", "model_not_found", "model",
                 "The model `%s` does not exist; available models: %s", id, list);
    free(list);
    sv_reply_error(c, &e);
}

static json_t *adapter_reply(const char *name, const char *dir, const char *what)
{
    char msg[256];
    snprintf(msg, sizeof msg, "Success: LoRA adapter '%s' %s successfully.", name, what);
    json_t *r = json_pack("{s:s, s:s, s:s}", "object", "lora_adapter", "id", name, "message", msg);
    if (dir) json_object_set_new(r, "root", json_string(dir));
    return r;
}

void sv_route_load_adapter(sv_conn *c)
{
    sv_server *s = c->s;
    char *name, *path, err[1024];
    sv_error e;
    bool is_base = false;
    if (!sv_oai_parse_adapter(sb_str(&c->body), c->body.len, true, &name, &path, &e)) {
        sv_reply_error(c, &e);
        return;
    }
    if (sv_model_known(s, name, &is_base)) {
        sv_error_field(&e, "lora_name", is_base ? "`%s` is the base model's id; choose another "
                                                  "lora_name"
                                                : "The lora adapter `%s` has already been "
                                                  "loaded; unload it first to replace it",
                       name);
        sv_reply_error(c, &e);
    } else if (!sv_engine_add_adapter(s->engine, name, path, err, sizeof err)) {
        sv_error_field(&e, "lora_path", "the adapter `%s` cannot be served: %s", name, err);
        sv_reply_error(c, &e);
    } else {
        sv_conn_set_model(c, name);
        if (!s->o->quiet) fprintf(stderr, "lathe serve: adapter %s loaded from %s\n", name, path);
        sv_reply_json(c, 200, adapter_reply(name, path, "added"));
    }
    free(name);
    free(path);
}

void sv_route_unload_adapter(sv_conn *c)
{
    sv_server *s = c->s;
    char *name;
    sv_error e;
    if (!sv_oai_parse_adapter(sb_str(&c->body), c->body.len, false, &name, NULL, &e)) {
        sv_reply_error(c, &e);
        return;
    }
    if (sv_engine_remove_adapter(s->engine, name)) {
        if (!s->o->quiet) fprintf(stderr, "lathe serve: adapter %s unloaded\n", name);
        sv_reply_json(c, 200, adapter_reply(name, NULL, "removed"));
    } else {
        char *list = sv_model_list(s);
        sv_error_set(&e, 404, "invalid_request_error", "model_not_found", "lora_name",
                     "The lora adapter `%s` cannot be found; served models: %s", name, list);
        free(list);
        sv_reply_error(c, &e);
    }
    free(name);
}

void sv_route_health(sv_conn *c, bool ready_body)
{
    static const char *const names[] = {"loading", "ready", "draining"};
    int st = atomic_load(&c->s->state);
    json_t *body = json_pack("{s:s}", "status", names[st]);
    if (ready_body) json_object_set_new(body, "model", json_string(c->s->base_id));
    sv_reply_json(c, st == SV_READY ? 200 : 503, body);
}

void sv_route_metrics(sv_conn *c)
{
    sb out;
    sb_init(&out);
    sv_metrics_render(c->s, &out);
    sv_reply_text(c, 200, "text/plain; version=0.0.4; charset=utf-8", sb_str(&out));
    sb_free(&out);
}
