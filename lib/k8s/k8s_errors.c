/* k8s_errors.c: Kubernetes Status objects, the rc they map to, and the
 * lathe sentence of a failed call: what was asked, what the server said
 * (its message and each cause), and how to fix it. */
#include "k8s_internal.h"

#include <stdio.h>
#include <string.h>

const char *k8s_rc_name(k8s_rc rc)
{
    switch (rc) {
    case K8S_OK: return "ok";
    case K8S_E_NOT_FOUND: return "not found";
    case K8S_E_EXISTS: return "already exists";
    case K8S_E_CONFLICT: return "conflict";
    case K8S_E_GONE: return "gone";
    case K8S_E_INVALID: return "invalid";
    case K8S_E_UNAUTHORIZED: return "unauthorized";
    case K8S_E_FORBIDDEN: return "forbidden";
    case K8S_E_UNREACHABLE: return "unreachable";
    case K8S_E_SERVER: return "server error";
    case K8S_E_OTHER: return "error";
    }
    return "error";
}

k8s_rc k8s_rc_of(long http, const char *reason)
{
    if (http >= 200 && http < 300) return K8S_OK;
    switch (http) {
    case 400: return K8S_E_INVALID;
    case 401: return K8S_E_UNAUTHORIZED;
    case 403: return K8S_E_FORBIDDEN;
    case 404: return K8S_E_NOT_FOUND;
    case 409:
        return reason && strcmp(reason, "AlreadyExists") == 0 ? K8S_E_EXISTS : K8S_E_CONFLICT;
    case 410: return K8S_E_GONE;
    case 422: return K8S_E_INVALID;
    case 0: return K8S_E_UNREACHABLE;
    default: break;
    }
    if (http == 429 || http >= 500) return K8S_E_SERVER;
    if (reason && strcmp(reason, "Expired") == 0) return K8S_E_GONE;
    return K8S_E_OTHER;
}

/* ---- Status ---- */
static char *str_of(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_string(v) ? xstrdup(json_string_value(v)) : NULL;
}

bool k8s_status_from_json(const json_t *v, k8s_status *out)
{
    memset(out, 0, sizeof *out);
    const json_t *kind = json_object_get(v, "kind");
    if (!json_is_object(v) || !json_is_string(kind) ||
        strcmp(json_string_value(kind), "Status") != 0)
        return false;
    const json_t *code = json_object_get(v, "code");
    if (json_is_integer(code)) {
        json_int_t c = json_integer_value(code);
        out->code = c >= 0 && c < 1000 ? (long)c : 0;
    }
    const json_t *reason = json_object_get(v, "reason");
    if (json_is_string(reason)) snprintf(out->reason, sizeof out->reason, "%s",
                                         json_string_value(reason));
    out->message = str_of(v, "message");
    const json_t *det = json_object_get(v, "details");
    if (json_is_object(det)) {
        out->kind = str_of(det, "kind");
        out->name = str_of(det, "name");
        const json_t *causes = json_object_get(det, "causes");
        size_t n = json_is_array(causes) ? json_array_size(causes) : 0;
        if (n > 0) out->causes = xcalloc(n, sizeof *out->causes);
        for (size_t i = 0; i < n; i++) {
            const json_t *c = json_array_get(causes, i);
            if (!json_is_object(c)) continue;
            k8s_cause *k = &out->causes[out->n_causes++];
            k->field = str_of(c, "field");
            k->message = str_of(c, "message");
            k->reason = str_of(c, "reason");
        }
    }
    return true;
}

bool k8s_status_parse(const char *body, size_t len, k8s_status *out)
{
    memset(out, 0, sizeof *out);
    if (!body || len == 0) return false;
    json_t *v = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
    if (!v) return false;
    bool ok = k8s_status_from_json(v, out);
    json_decref(v);
    return ok;
}

void k8s_status_free(k8s_status *s)
{
    free(s->message);
    free(s->kind);
    free(s->name);
    for (size_t i = 0; i < s->n_causes; i++) {
        free(s->causes[i].field);
        free(s->causes[i].message);
        free(s->causes[i].reason);
    }
    free(s->causes);
    memset(s, 0, sizeof *s);
}

/* ---- sentences ---- */
static void resource_name(const k8s_ref *ref, sb *out)
{
    sb_puts(out, ref->resource ? ref->resource : "objects");
    const char *slash = ref->api ? strchr(ref->api, '/') : NULL;
    if (slash) {
        sb_putc(out, '.');
        sb_putn(out, ref->api, (size_t)(slash - ref->api));
    }
    if (ref->sub) sb_printf(out, "/%s", ref->sub);
}

void k8s_ref_describe(const k8s_ref *ref, sb *out)
{
    resource_name(ref, out);
    if (ref->name) sb_printf(out, " %s", ref->name);
    if (ref->ns) sb_printf(out, " in %s", ref->ns);
    else if (!ref->name) sb_puts(out, " in all namespaces");
}

static const char *gerund(const char *verb)
{
    static const char *const map[][2] = {
        {"get", "getting"},   {"list", "listing"},     {"create", "creating"},
        {"patch", "patching"},{"apply", "applying"},   {"update", "updating"},
        {"delete", "deleting"}, {"watch", "watching"}, {"log", "reading the log of"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(map[i][0], verb) == 0) return map[i][1];
    return verb;
}

static const char *rbac_verb(const char *verb)
{
    if (strcmp(verb, "apply") == 0) return "patch";
    if (strcmp(verb, "log") == 0) return "get";
    return verb;
}

static bool namespace_missing(const k8s_ask *a, const k8s_status *st)
{
    if (st && st->kind && strcmp(st->kind, "namespaces") == 0) return true;
    if (st && st->message && strstr(st->message, "namespaces \"") &&
        strstr(st->message, "not found"))
        return true;
    return false;
}

static void fix_hint(const k8s_ask *a, long http, const k8s_status *st, const char *curl_msg,
                     sb *out)
{
    const char *reason = st ? st->reason : "";
    switch (http) {
    case 0:
        sb_printf(out, "is the API server at %s up? (%s)", a->server ? a->server : "?",
                  curl_msg ? curl_msg : "no answer");
        return;
    case 401: sb_puts(out, "check the token / kubeconfig user"); return;
    case 403:
        sb_printf(out, "%s needs RBAC permission to %s ",
                  a->in_cluster ? "the service account" : "the kubeconfig user",
                  rbac_verb(a->verb));
        if (a->ref) {
            resource_name(a->ref, out);
            if (a->ref->ns) sb_printf(out, " in %s", a->ref->ns);
            else sb_puts(out, " cluster-wide");
        }
        return;
    case 404:
        if (namespace_missing(a, st))
            sb_puts(out, "create the namespace (lathe render CLUSTER.yaml --target k8s | "
                         "kubectl apply -f -)");
        else
            sb_puts(out, "check the name and namespace");
        return;
    case 409:
        if (strcmp(reason, "AlreadyExists") == 0)
            sb_puts(out, "an object of that name exists already (a retried create may "
                         "have made it: compare it with what was asked)");
        else
            sb_puts(out, "read the object again and retry with its current resourceVersion");
        return;
    case 410: sb_puts(out, "the resourceVersion is too old: list again"); return;
    case 400:
    case 422: sb_puts(out, "fix the fields named above"); return;
    default: break;
    }
    if (http == 429 || http >= 500)
        sb_printf(out, "the API server at %s is overloaded or failing; try again later",
                  a->server ? a->server : "?");
}

void k8s_error_set(k8s_error *e, k8s_rc rc, long http, const char *fmt, ...)
{
    if (!e) return;
    memset(e, 0, sizeof *e);
    e->rc = rc;
    e->http = http;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
}

/* Copies head and tail into dst (size n), cutting head so tail fits. */
static void fit(char *dst, size_t n, const char *head, const char *tail)
{
    size_t hl = strlen(head), tl = strlen(tail);
    if (hl + tl < n) {
        memcpy(dst, head, hl);
        memcpy(dst + hl, tail, tl + 1);
        return;
    }
    if (tl + 8 >= n) tl = n / 2;
    size_t keep = n - tl - 5;
    /* do not cut a UTF-8 sequence */
    while (keep > 0 && ((unsigned char)head[keep] & 0xC0) == 0x80) keep--;
    snprintf(dst, n, "%.*s ...%.*s", (int)keep, head, (int)tl, tail);
}

void k8s_error_fill(k8s_error *e, const k8s_ask *a, long http, const k8s_status *st,
                    const char *body, const char *curl_msg)
{
    if (!e) return;
    memset(e, 0, sizeof *e);
    e->http = http;
    e->rc = k8s_rc_of(http, st ? st->reason : NULL);
    if (st && st->reason[0]) snprintf(e->reason, sizeof e->reason, "%s", st->reason);
    sb head, tail;
    sb_init(&head);
    sb_init(&tail);
    sb_printf(&head, "%s ", gerund(a->verb));
    if (a->ref) k8s_ref_describe(a->ref, &head);
    if (http == 0) {
        sb_printf(&head, ": no answer from %s", a->server ? a->server : "the API server");
    } else if (st && st->message) {
        sb_printf(&head, ": %s", st->message);
        if (st->reason[0]) sb_printf(&head, " (%ld %s)", http, st->reason);
        else sb_printf(&head, " (HTTP %ld)", http);
    } else {
        sb_printf(&head, ": HTTP %ld", http);
        if (body && *body) {
            size_t n = strlen(body);
            sb_printf(&head, ": %.*s", (int)(n > 200 ? 200 : n), body);
        }
    }
    for (size_t i = 0; st && i < st->n_causes; i++) {
        const k8s_cause *c = &st->causes[i];
        sb_puts(&head, i == 0 ? "; causes: " : "; ");
        sb_printf(&head, "%s: %s", c->field ? c->field : "(no field)",
                  c->message ? c->message : c->reason ? c->reason : "?");
    }
    fix_hint(a, http, st, curl_msg, &tail);
    if (tail.len) {
        sb tmp;
        sb_init(&tmp);
        sb_printf(&tmp, "; fix: %s", sb_str(&tail));
        sb_free(&tail);
        tail = tmp;
    }
    fit(e->message, sizeof e->message, sb_str(&head), sb_str(&tail));
    sb_free(&head);
    sb_free(&tail);
}
