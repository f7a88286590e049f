/* k8s_calls.c: the calls of the client (get, list with selectors and
 * pagination, create, server-side apply, merge patch, replace, delete,
 * pod logs) as exchanges of k8s_client.c, and the URL paths of refs. */
#include "k8s_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *k8s_path(const k8s_ref *ref)
{
    sb s;
    sb_init(&s);
    const char *api = ref->api ? ref->api : "v1";
    sb_printf(&s, strchr(api, '/') ? "/apis/%s" : "/api/%s", api);
    if (ref->ns) sb_printf(&s, "/namespaces/%s", ref->ns);
    sb_printf(&s, "/%s", ref->resource);
    if (ref->name) sb_printf(&s, "/%s", ref->name);
    if (ref->name && ref->sub) sb_printf(&s, "/%s", ref->sub);
    return sb_take(&s);
}

void k8s_query_escape(sb *out, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned char c = *p;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~') {
            sb_putc(out, (char)c);
        } else {
            sb_putc(out, '%');
            sb_putc(out, hex[c >> 4]);
            sb_putc(out, hex[c & 15]);
        }
    }
}

/* An exchange whose 2xx answer is JSON for *out (NULL = not wanted). */
static k8s_rc json_call(k8s_client *cl, k8s_call *c, json_t **out, k8s_error *e)
{
    if (out) *out = NULL;
    sb body;
    sb_init(&body);
    long http;
    k8s_rc rc = k8s_call_do(cl, c, &http, &body, e);
    if (rc == K8S_OK && out) {
        json_error_t je;
        *out = json_loadb(body.buf ? body.buf : "", body.len, 0, &je);
        if (!*out) {
            sb what;
            sb_init(&what);
            if (c->ask.ref) k8s_ref_describe(c->ask.ref, &what);
            k8s_error_set(e, K8S_E_OTHER, http, "%s %s: the API server's answer is not JSON "
                                                "(%s); fix: is %s a Kubernetes API server?",
                          c->ask.verb, sb_str(&what), je.text, c->ask.server);
            sb_free(&what);
            rc = K8S_E_OTHER;
        }
    }
    sb_free(&body);
    return rc;
}

static char *dump(const json_t *obj, size_t *len)
{
    char *s = json_dumps(obj, JSON_COMPACT);
    if (!s) s = xstrdup("null");
    *len = strlen(s);
    return s;
}

k8s_rc k8s_get(k8s_client *cl, const k8s_ref *ref, json_t **out, k8s_error *e)
{
    char *path = k8s_path(ref);
    k8s_call c = {.method = "GET", .kind = ref->name ? K8S_K_GET : K8S_K_LIST,
                  .ask = {.verb = ref->name ? "get" : "list", .ref = ref}, .path = path};
    k8s_rc rc = json_call(cl, &c, out, e);
    free(path);
    return rc;
}

static void add_query(sb *q, const char *key, const char *value)
{
    sb_putc(q, strchr(sb_str(q), '?') ? '&' : '?');
    sb_printf(q, "%s=", key);
    k8s_query_escape(q, value);
}

k8s_rc k8s_list_stop(k8s_client *cl, const k8s_ref *ref, const char *label, const char *field,
                     int limit, json_t **items, char **rv, k8s_error *e, const atomic_bool *stop)
{
    *items = NULL;
    if (rv) *rv = NULL;
    k8s_ref coll = *ref;
    coll.name = NULL;
    coll.sub = NULL;
    char *base = k8s_path(&coll);
    char lim[24];
    snprintf(lim, sizeof lim, "%d", limit > 0 ? limit : 500);
    json_t *all = json_array();
    char *cont = NULL, *last_rv = NULL;
    bool restarted = false;
    k8s_rc rc = K8S_OK;
    for (;;) {
        sb q;
        sb_init(&q);
        sb_puts(&q, base);
        add_query(&q, "limit", lim);
        if (label) add_query(&q, "labelSelector", label);
        if (field) add_query(&q, "fieldSelector", field);
        if (cont) add_query(&q, "continue", cont);
        k8s_call c = {.method = "GET", .kind = K8S_K_LIST, .ask = {.verb = "list", .ref = &coll},
                      .path = sb_str(&q), .stop = stop};
        json_t *page;
        rc = json_call(cl, &c, &page, e);
        sb_free(&q);
        if (rc == K8S_E_GONE && cont && !restarted) {
            /* the continue token expired (410): the whole list once more */
            restarted = true;
            free(cont);
            cont = NULL;
            json_array_clear(all);
            continue;
        }
        if (rc != K8S_OK) break;
        const json_t *its = json_object_get(page, "items");
        const json_t *meta = json_object_get(page, "metadata");
        if (!json_is_array(its) && !json_is_null(its) && its) {
            k8s_error_set(e, K8S_E_OTHER, 200, "listing %s: the answer has no items list",
                          base);
            json_decref(page);
            rc = K8S_E_OTHER;
            break;
        }
        size_t i;
        json_t *it;
        json_array_foreach(its, i, it) json_array_append(all, it);
        const json_t *r = json_object_get(meta, "resourceVersion");
        if (json_is_string(r)) {
            free(last_rv);
            last_rv = xstrdup(json_string_value(r));
        }
        const json_t *ct = json_object_get(meta, "continue");
        free(cont);
        cont = json_is_string(ct) && json_string_length(ct) ? xstrdup(json_string_value(ct))
                                                            : NULL;
        json_decref(page);
        if (!cont) break;
    }
    free(cont);
    free(base);
    if (rc != K8S_OK) {
        json_decref(all);
        free(last_rv);
        return rc;
    }
    *items = all;
    if (rv) *rv = last_rv ? last_rv : xstrdup("");
    else free(last_rv);
    return K8S_OK;
}

k8s_rc k8s_list(k8s_client *cl, const k8s_ref *ref, const char *label, const char *field,
                int limit, json_t **items, char **rv, k8s_error *e)
{
    return k8s_list_stop(cl, ref, label, field, limit, items, rv, e, NULL);
}

/* A call with a JSON body. */
static k8s_rc body_call(k8s_client *cl, const k8s_ref *ref, const char *method, k8s_kind kind,
                        const char *verb, const char *query, const char *ctype,
                        const json_t *obj, json_t **out, k8s_error *e)
{
    char *p = k8s_path(ref);
    char *path = query ? xasprintf("%s%s", p, query) : xstrdup(p);
    free(p);
    size_t len;
    char *body = dump(obj, &len);
    k8s_call c = {.method = method, .kind = kind, .ask = {.verb = verb, .ref = ref},
                  .path = path, .ctype = ctype, .body = body, .body_len = len};
    k8s_rc rc = json_call(cl, &c, out, e);
    free(body);
    free(path);
    return rc;
}

k8s_rc k8s_create(k8s_client *cl, const k8s_ref *ref, const json_t *obj, json_t **out,
                  k8s_error *e)
{
    k8s_ref coll = *ref;
    if (!coll.sub) coll.name = NULL; /* POST goes to the collection */
    /* the name stays in the messages */
    char *p = k8s_path(&coll);
    size_t len;
    char *body = dump(obj, &len);
    k8s_call c = {.method = "POST", .kind = K8S_K_CREATE, .ask = {.verb = "create", .ref = ref},
                  .path = p, .ctype = "application/json", .body = body, .body_len = len};
    k8s_rc rc = json_call(cl, &c, out, e);
    free(body);
    free(p);
    return rc;
}

k8s_rc k8s_apply(k8s_client *cl, const k8s_ref *ref, const json_t *obj, bool force, json_t **out,
                 k8s_error *e)
{
    /* JSON is YAML: the body is the object as JSON */
    return body_call(cl, ref, "PATCH", K8S_K_PATCH, "apply",
                     force ? "?fieldManager=lathe&force=true" : "?fieldManager=lathe",
                     "application/apply-patch+yaml", obj, out, e);
}

k8s_rc k8s_merge_patch(k8s_client *cl, const k8s_ref *ref, const json_t *patch, json_t **out,
                       k8s_error *e)
{
    return body_call(cl, ref, "PATCH", K8S_K_PATCH, "patch", NULL,
                     "application/merge-patch+json", patch, out, e);
}

k8s_rc k8s_replace(k8s_client *cl, const k8s_ref *ref, const json_t *obj, json_t **out,
                   k8s_error *e)
{
    return body_call(cl, ref, "PUT", K8S_K_UPDATE, "update", NULL, "application/json", obj,
                     out, e);
}

k8s_rc k8s_delete(k8s_client *cl, const k8s_ref *ref, const char *propagation, int grace,
                  k8s_error *e)
{
    json_t *opts = json_pack("{s:s, s:s}", "kind", "DeleteOptions", "apiVersion", "v1");
    if (propagation) json_object_set_new(opts, "propagationPolicy", json_string(propagation));
    if (grace >= 0) json_object_set_new(opts, "gracePeriodSeconds", json_integer(grace));
    k8s_rc rc = body_call(cl, ref, "DELETE", K8S_K_DELETE, "delete", NULL, "application/json",
                          opts, NULL, e);
    json_decref(opts);
    return rc;
}

k8s_rc k8s_pod_log(k8s_client *cl, const char *ns, const char *pod, const char *container,
                   const char *since_time, bool timestamps, char **text, size_t *len,
                   k8s_error *e)
{
    *text = NULL;
    if (len) *len = 0;
    k8s_ref ref = {.api = "v1", .resource = "pods", .ns = ns, .name = pod, .sub = "log"};
    char *p = k8s_path(&ref);
    sb q;
    sb_init(&q);
    sb_puts(&q, p);
    free(p);
    if (container) add_query(&q, "container", container);
    if (since_time) add_query(&q, "sinceTime", since_time);
    if (timestamps) add_query(&q, "timestamps", "true");
    k8s_call c = {.method = "GET", .kind = K8S_K_LOG, .ask = {.verb = "log", .ref = &ref},
                  .path = sb_str(&q)};
    sb body;
    sb_init(&body);
    long http;
    k8s_rc rc = k8s_call_do(cl, &c, &http, &body, e);
    sb_free(&q);
    if (rc != K8S_OK) {
        sb_free(&body);
        return rc;
    }
    if (len) *len = body.len;
    *text = body.buf ? sb_take(&body) : xstrdup("");
    sb_free(&body);
    return K8S_OK;
}
