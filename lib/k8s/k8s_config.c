/* k8s_config.c: where the cluster is and who lathe is there: the order
 * of sources (an explicit kubeconfig, the in-cluster service account,
 * $KUBECONFIG's first file, ~/.kube/config), the in-cluster service
 * account itself, kubeconfig files read from disk (their text is read by
 * k8s_kubeconfig.c), and copying and freeing configurations. */
#include "k8s_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KUBECONFIG_MAX (4u << 20)
#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/* ---- free / copy ---- */
static void strv_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++) free(v[i]);
    free(v);
}

void k8s_config_free(k8s_config *c)
{
    if (!c) return;
    free(c->server);
    free(c->ca_file);
    free(c->ca_data);
    free(c->token);
    free(c->token_file);
    free(c->cert_file);
    free(c->key_file);
    free(c->cert_data);
    free(c->key_data);
    strv_free(c->exec_argv, c->exec_argc);
    strv_free(c->exec_env, c->n_exec_env);
    free(c->exec_api_version);
    free(c->namespace_);
    free(c->source);
    memset(c, 0, sizeof *c);
}

static char *dup_or_null(const char *s)
{
    return s ? xstrdup(s) : NULL;
}

static char **strv_copy(char *const *v, size_t n)
{
    if (!n) return NULL;
    char **out = xcalloc(n, sizeof *out);
    for (size_t i = 0; i < n; i++) out[i] = xstrdup(v[i]);
    return out;
}

void k8s_config_copy(k8s_config *dst, const k8s_config *src)
{
    *dst = *src;
    dst->server = dup_or_null(src->server);
    dst->ca_file = dup_or_null(src->ca_file);
    dst->ca_data = dup_or_null(src->ca_data);
    dst->token = dup_or_null(src->token);
    dst->token_file = dup_or_null(src->token_file);
    dst->cert_file = dup_or_null(src->cert_file);
    dst->key_file = dup_or_null(src->key_file);
    dst->cert_data = dup_or_null(src->cert_data);
    dst->key_data = dup_or_null(src->key_data);
    dst->exec_argv = strv_copy(src->exec_argv, src->exec_argc);
    dst->exec_env = strv_copy(src->exec_env, src->n_exec_env);
    dst->exec_api_version = dup_or_null(src->exec_api_version);
    dst->namespace_ = dup_or_null(src->namespace_);
    dst->source = dup_or_null(src->source);
}

/* ---- small helpers ---- */
static char *trim_dup(const char *s, size_t n)
{
    while (n && (s[0] == ' ' || s[0] == '\t' || s[0] == '\n' || s[0] == '\r')) s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
        n--;
    return xstrndup(s, n);
}

/* Reads a small text file trimmed; NULL with err on failure. */
static char *read_trimmed(const char *path, char *err, size_t errsz)
{
    size_t len;
    char *t = file_read_all(path, 1u << 20, &len, err, errsz);
    if (!t) return NULL;
    char *out = trim_dup(t, len);
    free(t);
    return out;
}

/* The kubeconfig file lathe reads when none is named: $KUBECONFIG's first
 * existing file, else ~/.kube/config. NULL with err when there is none. */
static char *default_kubeconfig(char *err, size_t errsz)
{
    const char *env = getenv("KUBECONFIG");
    if (env && env[0]) {
        char **parts;
        size_t n = str_split(env, ':', &parts);
        char *found = NULL;
        for (size_t i = 0; i < n && !found; i++)
            if (file_exists(parts[i])) found = xstrdup(parts[i]);
        str_list_free(parts, n);
        if (!found)
            snprintf(err, errsz, "KUBECONFIG=%s: none of its files exists; fix: point it at a "
                                 "kubeconfig file, or unset it to use ~/.kube/config",
                     env);
        return found;
    }
    const char *home = getenv("HOME");
    if (!home || !home[0]) {
        snprintf(err, errsz, "no kubeconfig: KUBECONFIG and HOME are not set; fix: set "
                             "KUBECONFIG to a kubeconfig file");
        return NULL;
    }
    char *p = path_join(home, ".kube/config");
    if (!file_exists(p)) {
        snprintf(err, errsz, "no kubeconfig: %s does not exist and KUBECONFIG is not set; fix: "
                             "set KUBECONFIG, or write the cluster's kubeconfig there",
                 p);
        free(p);
        return NULL;
    }
    return p;
}

bool k8s_config_kubeconfig(k8s_config *c, const char *path, const char *context, char *err,
                           size_t errsz)
{
    memset(c, 0, sizeof *c);
    char *p = path ? xstrdup(path) : default_kubeconfig(err, errsz);
    if (!p) return false;
    size_t len;
    char ferr[256];
    char *text = file_read_all(p, KUBECONFIG_MAX, &len, ferr, sizeof ferr);
    if (!text) {
        snprintf(err, errsz, "kubeconfig %s: %s; fix: check the path (KUBECONFIG or the "
                             "option naming it)",
                 p, ferr);
        free(p);
        return false;
    }
    char *dir = xstrdup(p);
    char *slash = strrchr(dir, '/');
    if (slash) *(slash == dir ? slash + 1 : slash) = '\0';
    else strcpy(dir, ".");
    bool ok = k8s_config_parse_kubeconfig(c, p, text, len, dir, context, err, errsz);
    free(dir);
    free(text);
    free(p);
    return ok;
}

/* ---- in-cluster ---- */
bool k8s_config_in_cluster(k8s_config *c, const char *sa_dir, char *err, size_t errsz)
{
    memset(c, 0, sizeof *c);
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !host[0] || !port || !port[0]) {
        snprintf(err, errsz, "not in a cluster: KUBERNETES_SERVICE_HOST and "
                             "KUBERNETES_SERVICE_PORT are not set (they are in a pod); fix: "
                             "run lathe in a pod, or give a kubeconfig");
        return false;
    }
    if (!sa_dir) sa_dir = SA_DIR;
    char *tok = path_join(sa_dir, "token"), *ca = path_join(sa_dir, "ca.crt");
    char *nsf = path_join(sa_dir, "namespace");
    char ferr[256];
    char *token = read_trimmed(tok, ferr, sizeof ferr);
    bool ok = false;
    if (!token) {
        snprintf(err, errsz, "in-cluster service account: cannot read the token %s (%s); fix: "
                             "mount the service account's token (automountServiceAccountToken)",
                 tok, ferr);
    } else if (!file_exists(ca)) {
        snprintf(err, errsz, "in-cluster service account: the CA file %s does not exist; fix: "
                             "mount the service account's token volume",
                 ca);
    } else {
        bool v6 = strchr(host, ':') != NULL && host[0] != '[';
        c->server = xasprintf("https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "", port);
        c->token = token;
        token = NULL;
        c->token_file = tok;
        tok = NULL;
        c->ca_file = ca;
        ca = NULL;
        char *ns = file_exists(nsf) ? read_trimmed(nsf, ferr, sizeof ferr) : NULL;
        c->namespace_ = ns && ns[0] ? ns : xstrdup("default");
        if (ns && !ns[0]) free(ns);
        c->source = xstrdup("in-cluster service account");
        ok = true;
    }
    free(token);
    free(tok);
    free(ca);
    free(nsf);
    return ok;
}

bool k8s_config_load(k8s_config *c, const char *path, const char *context, char *err,
                     size_t errsz)
{
    if (path) return k8s_config_kubeconfig(c, path, context, err, errsz);
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    if (host && host[0] && !context) {
        char ierr[512];
        if (k8s_config_in_cluster(c, NULL, ierr, sizeof ierr)) return true;
        /* in a pod without a token: a kubeconfig may still say where to go */
        if (k8s_config_kubeconfig(c, NULL, NULL, err, errsz)) return true;
        snprintf(err, errsz, "%s", ierr);
        return false;
    }
    return k8s_config_kubeconfig(c, NULL, context, err, errsz);
}
