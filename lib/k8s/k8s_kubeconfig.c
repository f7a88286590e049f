/* k8s_kubeconfig.c: the kubeconfig reader: a file's text, through
 * lib/spec's YAML layer, into a k8s_config: the context (current or
 * named), its cluster (server, CA data or file, insecure-skip-tls-verify)
 * and its user (token, tokenFile, client certificates as data or files,
 * an exec credential plugin). Every error names the file, the line, the
 * field path (users[0].user.exec.command) and the fix. */
#include "k8s_internal.h"

#include "spec/spec_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int b64_value(int c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
}

/* Standard base64 (whitespace skipped, padding optional); NULL when not. */
static char *b64_decode(const char *s, size_t *outlen)
{
    size_t n = strlen(s);
    char *out = xmalloc(n / 4 * 3 + 4);
    size_t o = 0;
    unsigned acc = 0;
    int bits = 0;
    bool pad = false;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
        if (c == '=') {
            pad = true;
            continue;
        }
        int v = b64_value(c);
        if (v < 0 || pad) {
            free(out);
            return NULL;
        }
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (char)((acc >> bits) & 0xFF);
        }
    }
    if (bits >= 6) { /* a single leftover character is not base64 */
        free(out);
        return NULL;
    }
    out[o] = '\0';
    *outlen = o;
    return out;
}

/* ---- kubeconfig ---- */
typedef struct kc {
    const char *name, *dir;
    char *err;
    size_t errsz;
} kc;

static bool kc_fail(kc *k, const spec_ynode *at, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static bool kc_fail(kc *k, const spec_ynode *at, const char *field, const char *fmt, ...)
{
    sb s;
    sb_init(&s);
    sb_printf(&s, "kubeconfig %s", k->name);
    if (at && at->line) sb_printf(&s, ":%d:%d", at->line, at->col);
    sb_puts(&s, ": ");
    if (field) sb_printf(&s, "%s: ", field);
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(&s, fmt, ap);
    va_end(ap);
    snprintf(k->err, k->errsz, "%s", sb_str(&s));
    sb_free(&s);
    return false;
}

/* A string field: *out NULL when absent; false (with the error) when it is
 * not a scalar. */
static bool kc_str(kc *k, const spec_ynode *m, const char *key, const char *path, char **out)
{
    *out = NULL;
    const spec_ynode *v = spec_ymap_get(m, key);
    if (spec_yabsent(v)) return true;
    if (v->kind != SPEC_YSCALAR) {
        char found[64];
        spec_ydescribe(v, found, sizeof found);
        return kc_fail(k, v, path, "expected a string, found %s; fix: write it as one value",
                       found);
    }
    *out = xstrdup(v->text);
    return true;
}

static bool kc_bool(kc *k, const spec_ynode *m, const char *key, const char *path, bool *out)
{
    *out = false;
    const spec_ynode *v = spec_ymap_get(m, key);
    if (spec_yabsent(v)) return true;
    if (v->kind == SPEC_YSCALAR && (str_ieq(v->text, "true") || str_ieq(v->text, "false"))) {
        *out = str_ieq(v->text, "true");
        return true;
    }
    char found[64];
    spec_ydescribe(v, found, sizeof found);
    return kc_fail(k, v, path, "expected true or false, found %s", found);
}

/* A file name in the kubeconfig, relative to its folder. */
static char *kc_path(const kc *k, const char *p)
{
    if (p[0] == '/' || !k->dir || !k->dir[0]) return xstrdup(p);
    if (p[0] == '~' && p[1] == '/' && getenv("HOME")) return path_join(getenv("HOME"), p + 2);
    return path_join(k->dir, p);
}

/* The entry of list `list` (clusters, contexts, users) named `want`, with
 * its index; an error naming the names there are when none is. */
static const spec_ynode *kc_find(kc *k, const spec_ynode *root, const char *list,
                                 const char *want, const char *asked_by, size_t *index)
{
    const spec_ynode *l = spec_ymap_get(root, list);
    if (!spec_yabsent(l) && l->kind != SPEC_YSEQ) {
        kc_fail(k, l, list, "expected a list of {name, ...} entries");
        return NULL;
    }
    size_t n = spec_yabsent(l) ? 0 : l->n_items;
    const char **names = xcalloc(n + 1, sizeof *names);
    size_t nn = 0;
    for (size_t i = 0; i < n; i++) {
        const spec_ynode *nm = spec_ymap_get(l->items[i], "name");
        if (nm && nm->kind == SPEC_YSCALAR) {
            if (strcmp(nm->text, want) == 0) {
                free(names);
                *index = i;
                return l->items[i];
            }
            names[nn++] = nm->text;
        }
    }
    sb have;
    sb_init(&have);
    for (size_t i = 0; i < nn; i++) sb_printf(&have, "%s%s", i ? ", " : "", names[i]);
    const char *close = str_suggest(want, names, nn);
    char hint[200] = "";
    if (close) snprintf(hint, sizeof hint, " (did you mean \"%s\"?)", close);
    kc_fail(k, spec_yabsent(l) ? NULL : l, list,
            "no entry named \"%s\" (asked for by %s)%s; the file has %s; fix: add it, or "
            "name an existing one (kubectl config get-%s)",
            want, asked_by, hint, nn ? sb_str(&have) : "none", list);
    sb_free(&have);
    free(names);
    return NULL;
}

static bool kc_pem(kc *k, const spec_ynode *m, const char *key, const char *field, char **out)
{
    char *b64;
    *out = NULL;
    if (!kc_str(k, m, key, field, &b64)) return false;
    if (!b64) return true;
    size_t len;
    char *pem = b64_decode(b64, &len);
    free(b64);
    if (!pem || memchr(pem, '\0', len) || !strstr(pem, "-----BEGIN")) {
        free(pem);
        return kc_fail(k, spec_ymap_get(m, key), field,
                       "is not base64 of PEM text; fix: base64-encode the PEM file "
                       "(base64 -w0 FILE)");
    }
    *out = pem;
    return true;
}

static bool kc_cluster(kc *k, const spec_ynode *root, const char *name, k8s_config *c,
                       const char *ctx_field)
{
    size_t i;
    const spec_ynode *e = kc_find(k, root, "clusters", name, ctx_field, &i);
    if (!e) return false;
    char f[96];
    const spec_ynode *cl = spec_ymap_get(e, "cluster");
    snprintf(f, sizeof f, "clusters[%zu].cluster", i);
    if (spec_yabsent(cl) || cl->kind != SPEC_YMAP)
        return kc_fail(k, e, f, "is missing; fix: give the cluster's server and CA");
    snprintf(f, sizeof f, "clusters[%zu].cluster.server", i);
    char *server;
    if (!kc_str(k, cl, "server", f, &server)) return false;
    if (!server)
        return kc_fail(k, cl, f, "is missing; fix: the API server's URL, e.g. "
                                 "https://10.0.0.1:6443");
    if (!str_starts_with(server, "https://") && !str_starts_with(server, "http://")) {
        kc_fail(k, spec_ymap_get(cl, "server"), f,
                "\"%s\" is not an http(s) URL; fix: write https://HOST:PORT", server);
        free(server);
        return false;
    }
    size_t n = strlen(server);
    while (n > 8 && server[n - 1] == '/') server[--n] = '\0';
    c->server = server;
    snprintf(f, sizeof f, "clusters[%zu].cluster.certificate-authority-data", i);
    if (!kc_pem(k, cl, "certificate-authority-data", f, &c->ca_data)) return false;
    snprintf(f, sizeof f, "clusters[%zu].cluster.certificate-authority", i);
    char *ca;
    if (!kc_str(k, cl, "certificate-authority", f, &ca)) return false;
    if (ca) {
        c->ca_file = kc_path(k, ca);
        free(ca);
        if (!file_exists(c->ca_file))
            return kc_fail(k, spec_ymap_get(cl, "certificate-authority"), f,
                           "the file %s does not exist; fix: the path of the CA's PEM file "
                           "(relative to the kubeconfig's folder), or "
                           "certificate-authority-data",
                           c->ca_file);
    }
    snprintf(f, sizeof f, "clusters[%zu].cluster.insecure-skip-tls-verify", i);
    return kc_bool(k, cl, "insecure-skip-tls-verify", f, &c->insecure);
}

static bool kc_exec(kc *k, const spec_ynode *ex, const char *uf, k8s_config *c)
{
    char f[128];
    snprintf(f, sizeof f, "%s.exec", uf);
    if (ex->kind != SPEC_YMAP) return kc_fail(k, ex, f, "expected a mapping (command, args, env, apiVersion)");
    snprintf(f, sizeof f, "%s.exec.apiVersion", uf);
    char *api;
    if (!kc_str(k, ex, "apiVersion", f, &api)) return false;
    if (!api || (strcmp(api, "client.authentication.k8s.io/v1") != 0 &&
                 strcmp(api, "client.authentication.k8s.io/v1beta1") != 0)) {
        kc_fail(k, api ? spec_ymap_get(ex, "apiVersion") : ex, f,
                "%s%s%s; fix: client.authentication.k8s.io/v1 (or v1beta1, as the plugin's "
                "documentation says)",
                api ? "\"" : "is missing", api ? api : "", api ? "\" is not supported" : "");
        free(api);
        return false;
    }
    c->exec_api_version = api;
    snprintf(f, sizeof f, "%s.exec.command", uf);
    char *cmd;
    if (!kc_str(k, ex, "command", f, &cmd)) return false;
    if (!cmd || !cmd[0]) {
        free(cmd);
        return kc_fail(k, ex, f, "is missing; fix: the plugin program (a name on PATH or a "
                                 "path), e.g. command: aws");
    }
    const spec_ynode *args = spec_ymap_get(ex, "args");
    snprintf(f, sizeof f, "%s.exec.args", uf);
    if (!spec_yabsent(args) && args->kind != SPEC_YSEQ) {
        free(cmd);
        return kc_fail(k, args, f, "expected a list of strings");
    }
    size_t na = spec_yabsent(args) ? 0 : args->n_items;
    c->exec_argv = xcalloc(na + 1, sizeof *c->exec_argv);
    c->exec_argv[0] = strchr(cmd, '/') ? kc_path(k, cmd) : xstrdup(cmd);
    free(cmd);
    c->exec_argc = 1;
    for (size_t i = 0; i < na; i++) {
        const spec_ynode *a = args->items[i];
        if (a->kind != SPEC_YSCALAR) {
            snprintf(f, sizeof f, "%s.exec.args[%zu]", uf, i);
            return kc_fail(k, a, f, "expected a string");
        }
        c->exec_argv[c->exec_argc++] = xstrdup(a->text);
    }
    const spec_ynode *env = spec_ymap_get(ex, "env");
    snprintf(f, sizeof f, "%s.exec.env", uf);
    if (!spec_yabsent(env) && env->kind != SPEC_YSEQ)
        return kc_fail(k, env, f, "expected a list of {name, value}");
    size_t ne = spec_yabsent(env) ? 0 : env->n_items;
    if (ne) c->exec_env = xcalloc(ne, sizeof *c->exec_env);
    for (size_t i = 0; i < ne; i++) {
        snprintf(f, sizeof f, "%s.exec.env[%zu]", uf, i);
        const spec_ynode *nm = spec_ymap_get(env->items[i], "name");
        const spec_ynode *val = spec_ymap_get(env->items[i], "value");
        if (!nm || nm->kind != SPEC_YSCALAR || !nm->text[0] || strchr(nm->text, '=') ||
            (val && val->kind != SPEC_YSCALAR))
            return kc_fail(k, env->items[i], f,
                           "expected {name: NAME, value: TEXT} (a name without '=')");
        c->exec_env[c->n_exec_env++] =
            xasprintf("%s=%s", nm->text, val && !val->null ? val->text : "");
    }
    return true;
}

static bool kc_user(kc *k, const spec_ynode *root, const char *name, k8s_config *c,
                    const char *ctx_field)
{
    size_t i;
    const spec_ynode *e = kc_find(k, root, "users", name, ctx_field, &i);
    if (!e) return false;
    char uf[64], f[128];
    snprintf(uf, sizeof uf, "users[%zu].user", i);
    const spec_ynode *u = spec_ymap_get(e, "user");
    if (spec_yabsent(u)) return true; /* no credentials */
    if (u->kind != SPEC_YMAP) return kc_fail(k, u, uf, "expected a mapping");
    static const char *const unsupported[] = {"auth-provider", "username", "password"};
    for (size_t j = 0; j < 3; j++)
        if (!spec_yabsent(spec_ymap_get(u, unsupported[j]))) {
            snprintf(f, sizeof f, "%s.%s", uf, unsupported[j]);
            return kc_fail(k, spec_ymap_get(u, unsupported[j]), f,
                           "is not supported by lathe; fix: use a token, a client "
                           "certificate or an exec credential plugin");
        }
    snprintf(f, sizeof f, "%s.token", uf);
    if (!kc_str(k, u, "token", f, &c->token)) return false;
    snprintf(f, sizeof f, "%s.tokenFile", uf);
    char *tf;
    if (!kc_str(k, u, "tokenFile", f, &tf)) return false;
    if (tf) {
        c->token_file = kc_path(k, tf);
        free(tf);
        if (!file_exists(c->token_file))
            return kc_fail(k, spec_ymap_get(u, "tokenFile"), f,
                           "the file %s does not exist; fix: the path of a file holding the "
                           "bearer token",
                           c->token_file);
    }
    static const char *const files[][2] = {{"client-certificate", "client-key"}};
    char *cf, *kf;
    snprintf(f, sizeof f, "%s.%s", uf, files[0][0]);
    if (!kc_str(k, u, files[0][0], f, &cf)) return false;
    if (cf) {
        c->cert_file = kc_path(k, cf);
        free(cf);
        if (!file_exists(c->cert_file))
            return kc_fail(k, spec_ymap_get(u, files[0][0]), f,
                           "the file %s does not exist; fix: the client certificate's PEM file",
                           c->cert_file);
    }
    snprintf(f, sizeof f, "%s.%s", uf, files[0][1]);
    if (!kc_str(k, u, files[0][1], f, &kf)) return false;
    if (kf) {
        c->key_file = kc_path(k, kf);
        free(kf);
        if (!file_exists(c->key_file))
            return kc_fail(k, spec_ymap_get(u, files[0][1]), f,
                           "the file %s does not exist; fix: the client key's PEM file",
                           c->key_file);
    }
    snprintf(f, sizeof f, "%s.client-certificate-data", uf);
    if (!kc_pem(k, u, "client-certificate-data", f, &c->cert_data)) return false;
    snprintf(f, sizeof f, "%s.client-key-data", uf);
    if (!kc_pem(k, u, "client-key-data", f, &c->key_data)) return false;
    bool has_cert = c->cert_file || c->cert_data, has_key = c->key_file || c->key_data;
    if (has_cert != has_key) {
        snprintf(f, sizeof f, "%s.%s", uf, has_cert ? "client-key" : "client-certificate");
        return kc_fail(k, u, f, "is missing; fix: a client certificate needs its key and the "
                                "key its certificate (the -data forms or files)");
    }
    const spec_ynode *ex = spec_ymap_get(u, "exec");
    if (!spec_yabsent(ex)) return kc_exec(k, ex, uf, c);
    return true;
}

static bool kc_parse(kc *k, const spec_ynode *root, const char *context, k8s_config *c)
{
    if (!root || root->kind != SPEC_YMAP)
        return kc_fail(k, root, NULL, "expected a mapping (apiVersion: v1, kind: Config, "
                                      "clusters, contexts, users); fix: is this a kubeconfig?");
    char *cur = NULL;
    if (!context) {
        if (!kc_str(k, root, "current-context", "current-context", &cur)) return false;
        if (!cur || !cur[0]) {
            free(cur);
            return kc_fail(k, NULL, "current-context",
                           "is not set; fix: kubectl config use-context NAME, or name a "
                           "context (--context)");
        }
        context = cur;
    }
    bool ok = false;
    size_t i;
    char f[96];
    char *cluster = NULL, *user = NULL;
    const spec_ynode *e = kc_find(k, root, "contexts", context,
                                  cur ? "current-context" : "the context asked for", &i);
    if (!e) goto done;
    const spec_ynode *cx = spec_ymap_get(e, "context");
    snprintf(f, sizeof f, "contexts[%zu].context", i);
    if (spec_yabsent(cx) || cx->kind != SPEC_YMAP) {
        kc_fail(k, e, f, "is missing; fix: give the context's cluster and user");
        goto done;
    }
    snprintf(f, sizeof f, "contexts[%zu].context.cluster", i);
    if (!kc_str(k, cx, "cluster", f, &cluster)) goto done;
    if (!cluster) {
        kc_fail(k, cx, f, "is missing; fix: name one of clusters[].name");
        goto done;
    }
    if (!kc_cluster(k, root, cluster, c, f)) goto done;
    snprintf(f, sizeof f, "contexts[%zu].context.namespace", i);
    if (!kc_str(k, cx, "namespace", f, &c->namespace_)) goto done;
    snprintf(f, sizeof f, "contexts[%zu].context.user", i);
    if (!kc_str(k, cx, "user", f, &user)) goto done;
    if (user && !kc_user(k, root, user, c, f)) goto done;
    if (!c->namespace_ || !c->namespace_[0]) {
        free(c->namespace_);
        c->namespace_ = xstrdup("default");
    }
    c->source = user ? xasprintf("kubeconfig %s, context %s, user %s", k->name, context, user)
                     : xasprintf("kubeconfig %s, context %s", k->name, context);
    ok = true;
done:
    free(cluster);
    free(user);
    free(cur);
    return ok;
}

bool k8s_config_parse_kubeconfig(k8s_config *c, const char *name, const char *text, size_t len,
                                 const char *dir, const char *context, char *err, size_t errsz)
{
    memset(c, 0, sizeof *c);
    kc k = {.name = name ? name : "(text)", .dir = dir, .err = err, .errsz = errsz};
    diag_list d;
    diag_list_init(&d);
    spec_ystream ys;
    bool read = spec_yaml_parse(k.name, text, len, &ys, &d);
    bool ok = false;
    if (!read || d.errors) {
        sb s;
        sb_init(&s);
        for (size_t i = 0; i < d.len; i++)
            if (d.items[i].level == DIAG_ERROR) {
                diag_format(&d.items[i], &s);
                break;
            }
        snprintf(err, errsz, "kubeconfig %s: not readable YAML: %s", k.name,
                 s.len ? sb_str(&s) : "a syntax error");
        size_t n = strlen(err);
        while (n && err[n - 1] == '\n') err[--n] = '\0';
        sb_free(&s);
    } else if (ys.n_docs == 0) {
        kc_fail(&k, NULL, NULL, "is empty; fix: point KUBECONFIG at a kubeconfig file "
                                "(kubectl config view --raw)");
    } else {
        ok = kc_parse(&k, ys.docs[0].root, context, c);
    }
    spec_ystream_free(&ys);
    diag_list_free(&d);
    if (!ok) k8s_config_free(c);
    return ok;
}

