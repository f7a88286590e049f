/* k8s_client.c: the client's state and one HTTP exchange with the API
 * server over libcurl (an easy handle per exchange): the rate limit, the
 * credentials (bearer token, a token file read again when it changes, an
 * exec plugin's cached credential, client certificates), TLS settings,
 * retries with backoff, and Status errors. The calls themselves are in
 * k8s_calls.c. */
#include "k8s_internal.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define BODY_MAX ((size_t)256 << 20) /* one answer that is not a stream */
#define ERR_BODY_MAX ((size_t)1 << 20)
#define BACKOFF_BASE 0.2
#define BACKOFF_CAP 5.0
#define RETRY_AFTER_MAX 60.0
#define POOL_MAX 16

struct k8s_client {
    k8s_config cfg;
    bool in_cluster;
    double timeout;
    int max_retries;
    k8s_bucket bucket;
    pthread_mutex_t mu; /* stats, rng, the token file's cache */
    k8s_stats stats;
    rng_state rng;
    char *file_token;
    struct stat tok_st;
    bool tok_read;
    pthread_mutex_t exec_mu; /* one plugin run at a time; the cached credential */
    k8s_cred cred;
    bool cred_valid;
    /* idle easy handles of finished calls (under mu): a handle keeps its
     * connections and TLS sessions, so calls reuse them */
    CURL *pool[POOL_MAX];
    size_t n_pool;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static bool curl_ok; /* written once, under pthread_once */

static void curl_init_once(void)
{
    curl_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

k8s_client *k8s_client_new(const k8s_config *cfg, char *err, size_t errsz)
{
    pthread_once(&curl_once, curl_init_once);
    if (!curl_ok) {
        snprintf(err, errsz, "libcurl cannot be set up");
        return NULL;
    }
    if (!cfg->server || !cfg->server[0]) {
        snprintf(err, errsz, "no API server address in the configuration (%s)",
                 cfg->source ? cfg->source : "none given");
        return NULL;
    }
    if (cfg->ca_file && access(cfg->ca_file, R_OK) != 0) {
        snprintf(err, errsz, "the CA file %s cannot be read (%s); fix: check the path in %s",
                 cfg->ca_file, strerror(errno), cfg->source ? cfg->source : "the configuration");
        return NULL;
    }
    k8s_client *cl = xcalloc(1, sizeof *cl);
    k8s_config_copy(&cl->cfg, cfg);
    cl->in_cluster = cfg->source && strcmp(cfg->source, "in-cluster service account") == 0;
    cl->timeout = cfg->timeout > 0 ? cfg->timeout : 30;
    cl->max_retries = cfg->max_retries == 0 ? 5 : cfg->max_retries < 0 ? 0 : cfg->max_retries;
    if (!cl->cfg.qps) cl->cfg.qps = 50;
    if (!cl->cfg.burst) cl->cfg.burst = 100;
    k8s_bucket_init(&cl->bucket, cl->cfg.qps, cl->cfg.burst);
    pthread_mutex_init(&cl->mu, NULL);
    pthread_mutex_init(&cl->exec_mu, NULL);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    rng_seed(&cl->rng, (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)(uintptr_t)cl);
    if (cfg->insecure)
        fprintf(stderr, "lathe: warning: TLS verification of %s is off "
                        "(insecure-skip-tls-verify in %s); anyone on the path can read and "
                        "change what lathe sends\n",
                cfg->server, cfg->source ? cfg->source : "the configuration");
    return cl;
}

void k8s_client_free(k8s_client *cl)
{
    if (!cl) return;
    for (size_t i = 0; i < cl->n_pool; i++) curl_easy_cleanup(cl->pool[i]);
    k8s_config_free(&cl->cfg);
    k8s_bucket_destroy(&cl->bucket);
    pthread_mutex_destroy(&cl->mu);
    pthread_mutex_destroy(&cl->exec_mu);
    free(cl->file_token);
    k8s_cred_free(&cl->cred);
    free(cl);
}

const k8s_config *k8s_client_config(const k8s_client *cl)
{
    return &cl->cfg;
}

void k8s_client_stats(const k8s_client *cl, k8s_stats *out)
{
    k8s_client *m = (k8s_client *)cl; /* the mutex is not part of the value */
    pthread_mutex_lock(&m->mu);
    *out = m->stats;
    pthread_mutex_unlock(&m->mu);
}

double k8s_client_random(k8s_client *cl)
{
    pthread_mutex_lock(&cl->mu);
    uint64_t r = rng_next(&cl->rng);
    pthread_mutex_unlock(&cl->mu);
    return (double)(r >> 11) / 9007199254740992.0;
}

static void count(k8s_client *cl, k8s_kind kind, bool retry, bool throttled)
{
    pthread_mutex_lock(&cl->mu);
    k8s_stats *s = &cl->stats;
    s->requests++;
    uint64_t *per[] = {&s->gets, &s->lists, &s->creates, &s->patches, &s->updates,
                       &s->deletes, &s->watches, &s->logs};
    (*per[kind])++;
    if (retry) s->retries++;
    if (throttled) s->throttled++;
    pthread_mutex_unlock(&cl->mu);
}

/* ---- credentials ---- */
typedef struct auth {
    char *token, *cert, *key; /* cert / key: PEM text from an exec plugin */
} auth;

static void auth_free(auth *a)
{
    free(a->token);
    free(a->cert);
    free(a->key);
}

/* The token file's content, read again when its inode, size or mtime
 * changed (kubelet rotates the projected token by a symlink swap). */
static char *file_token(k8s_client *cl, bool force)
{
    struct stat st;
    pthread_mutex_lock(&cl->mu);
    bool changed = stat(cl->cfg.token_file, &st) == 0 &&
                   (force || !cl->tok_read || st.st_ino != cl->tok_st.st_ino ||
                    st.st_size != cl->tok_st.st_size ||
                    st.st_mtim.tv_sec != cl->tok_st.st_mtim.tv_sec ||
                    st.st_mtim.tv_nsec != cl->tok_st.st_mtim.tv_nsec);
    if (changed) {
        char ferr[128];
        size_t len;
        char *t = file_read_all(cl->cfg.token_file, 1u << 20, &len, ferr, sizeof ferr);
        if (t) {
            while (len && (t[len - 1] == '\n' || t[len - 1] == '\r' || t[len - 1] == ' '))
                t[--len] = '\0';
            free(cl->file_token);
            cl->file_token = t;
            cl->tok_st = st;
            cl->tok_read = true;
        }
    }
    char *out = cl->file_token ? xstrdup(cl->file_token) : NULL;
    pthread_mutex_unlock(&cl->mu);
    return out;
}

static bool auth_get(k8s_client *cl, bool refresh, auth *a, k8s_error *e)
{
    memset(a, 0, sizeof *a);
    if (cl->cfg.exec_argc) {
        pthread_mutex_lock(&cl->exec_mu);
        bool expired = cl->cred_valid && cl->cred.expiry > 0 &&
                       k8s_now_real() >= cl->cred.expiry - 10;
        if (!cl->cred_valid || expired || refresh) {
            k8s_cred_free(&cl->cred);
            cl->cred_valid = false;
            char err[700];
            if (!k8s_exec_run(&cl->cfg, cl->timeout, &cl->cred, err, sizeof err)) {
                pthread_mutex_unlock(&cl->exec_mu);
                k8s_error_set(e, K8S_E_UNAUTHORIZED, 0, "%s", err);
                return false;
            }
            cl->cred_valid = true;
        }
        a->token = cl->cred.token ? xstrdup(cl->cred.token) : NULL;
        a->cert = cl->cred.cert ? xstrdup(cl->cred.cert) : NULL;
        a->key = cl->cred.key ? xstrdup(cl->cred.key) : NULL;
        pthread_mutex_unlock(&cl->exec_mu);
        return true;
    }
    if (cl->cfg.token_file) a->token = file_token(cl, refresh);
    if (!a->token && cl->cfg.token) a->token = xstrdup(cl->cfg.token);
    if (cl->cfg.token_file && !a->token) {
        k8s_error_set(e, K8S_E_UNAUTHORIZED, 0,
                      "the token file %s cannot be read; fix: check the file (%s)",
                      cl->cfg.token_file, cl->cfg.source ? cl->cfg.source : "configuration");
        return false;
    }
    return true;
}

/* ---- handles ---- */
static CURL *handle_get(k8s_client *cl, bool stream)
{
    CURL *h = NULL;
    if (!stream) {
        pthread_mutex_lock(&cl->mu);
        if (cl->n_pool) h = cl->pool[--cl->n_pool];
        pthread_mutex_unlock(&cl->mu);
    }
    return h ? h : curl_easy_init();
}

/* Back into the pool after a call that went well, else closed. */
static void handle_put(k8s_client *cl, CURL *h, bool reuse)
{
    if (reuse) {
        curl_easy_reset(h);
        pthread_mutex_lock(&cl->mu);
        if (cl->n_pool < POOL_MAX) {
            cl->pool[cl->n_pool++] = h;
            h = NULL;
        }
        pthread_mutex_unlock(&cl->mu);
    }
    if (h) curl_easy_cleanup(h);
}

/* ---- one exchange ---- */
typedef struct xfer {
    k8s_client *cl;
    k8s_call *c;
    CURL *h;
    sb *body;
    bool too_big, aborted, opened;
    double retry_after;
} xfer;

static long response_code(CURL *h)
{
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    return code;
}

static size_t on_write(char *p, size_t size, size_t nmemb, void *ud)
{
    xfer *x = ud;
    size_t n = size * nmemb;
    if (x->c->stream && x->c->on_data && response_code(x->h) == 200) {
        size_t r = x->c->on_data(x->c->ud, p, n);
        if (r != n) x->aborted = true;
        return r;
    }
    size_t max = x->c->stream ? ERR_BODY_MAX : BODY_MAX;
    if (x->body->len + n > max) {
        x->too_big = true;
        return 0;
    }
    sb_putn(x->body, p, n);
    return n;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *ud)
{
    xfer *x = ud;
    size_t n = size * nmemb;
    if (n >= 12 && strncasecmp(p, "retry-after:", 12) == 0) {
        char tmp[32];
        size_t k = n - 12 < sizeof tmp - 1 ? n - 12 : sizeof tmp - 1;
        memcpy(tmp, p + 12, k);
        tmp[k] = '\0';
        char *end;
        double v = strtod(tmp, &end);
        if (end != tmp && v >= 0) x->retry_after = v > RETRY_AFTER_MAX ? RETRY_AFTER_MAX : v;
    } else if ((n == 2 && p[0] == '\r') || (n == 1 && p[0] == '\n')) {
        long code = response_code(x->h);
        if (code == 200 && x->c->stream && x->c->on_open && !x->opened) {
            x->opened = true;
            x->c->on_open(x->c->ud);
        }
    }
    return n;
}

static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    xfer *x = ud;
    return x->c->stop && atomic_load(x->c->stop) ? 1 : 0;
}

static void set_tls(k8s_client *cl, CURL *h, const auth *a)
{
    const k8s_config *c = &cl->cfg;
    if (c->insecure) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    } else {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    }
    if (c->ca_file) curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
    if (c->ca_data) {
        struct curl_blob blob = {.data = c->ca_data, .len = strlen(c->ca_data),
                                 .flags = CURL_BLOB_COPY};
        curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
    }
    const char *cert = a->cert ? a->cert : c->cert_data;
    const char *key = a->cert ? a->key : c->key_data;
    if (cert && key) {
        struct curl_blob cb = {.data = (void *)cert, .len = strlen(cert), .flags = CURL_BLOB_COPY};
        struct curl_blob kb = {.data = (void *)key, .len = strlen(key), .flags = CURL_BLOB_COPY};
        curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &cb);
        curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
        curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &kb);
        curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
    } else if (c->cert_file && c->key_file) {
        curl_easy_setopt(h, CURLOPT_SSLCERT, c->cert_file);
        curl_easy_setopt(h, CURLOPT_SSLKEY, c->key_file);
    }
}

static bool transport_retryable(CURLcode rc)
{
    switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
        return true;
    default:
        return false;
    }
}

/* One attempt: returns the curl code; *http the status. */
static CURLcode attempt(k8s_client *cl, k8s_call *c, const auth *a, xfer *x, char *cerr)
{
    CURL *h = handle_get(cl, c->stream);
    if (!h) {
        snprintf(cerr, CURL_ERROR_SIZE, "curl_easy_init failed");
        return CURLE_FAILED_INIT;
    }
    x->h = h;
    char *url = xasprintf("%s%s", cl->cfg.server, c->path);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, c->method);
    if (strcmp(c->method, "GET") != 0 || c->body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, c->body ? c->body : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(c->body ? c->body_len : 0));
    }
    struct curl_slist *hd = NULL;
    hd = curl_slist_append(hd, c->kind == K8S_K_LOG ? "Accept: application/json, */*"
                                                    : "Accept: application/json");
    hd = curl_slist_append(hd, "Expect:");
    char *ct = c->ctype ? xasprintf("Content-Type: %s", c->ctype) : NULL;
    if (ct) hd = curl_slist_append(hd, ct);
    char *bearer = a->token ? xasprintf("Authorization: Bearer %s", a->token) : NULL;
    if (bearer) hd = curl_slist_append(hd, bearer);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "lathe/" LATHE_VERSION);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    long ct_ms = (long)(cl->timeout * 1000);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, ct_ms < 10000 ? ct_ms : 10000L);
    if (!c->stream) curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, ct_ms);
    else if (c->stream_timeout > 0)
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(c->stream_timeout * 1000));
    set_tls(cl, h, a);
    cerr[0] = '\0';
    CURLcode rc = curl_easy_perform(h);
    curl_slist_free_all(hd);
    free(ct);
    free(bearer);
    free(url);
    return rc;
}

static bool stopped(const k8s_call *c)
{
    return c->stop && atomic_load(c->stop);
}

k8s_rc k8s_call_do(k8s_client *cl, k8s_call *c, long *http, sb *body, k8s_error *e)
{
    c->ask.server = cl->cfg.server;
    c->ask.in_cluster = cl->in_cluster;
    *http = 0;
    bool refreshed = false, retry = false;
    int tries = c->no_retry ? 0 : cl->max_retries;
    for (int n = 0;; n++) {
        if (stopped(c)) goto aborted;
        bool throttled = k8s_bucket_take(&cl->bucket, c->stop);
        if (stopped(c)) goto aborted;
        auth a;
        if (!auth_get(cl, false, &a, e)) return e ? e->rc : K8S_E_UNAUTHORIZED;
        sb_clear(body);
        xfer x = {.cl = cl, .c = c, .body = body};
        char cerr[CURL_ERROR_SIZE];
        count(cl, c->kind, retry, throttled);
        CURLcode rc = attempt(cl, c, &a, &x, cerr);
        auth_free(&a);
        *http = x.h ? response_code(x.h) : 0;
        if (x.h) handle_put(cl, x.h, rc == CURLE_OK && !c->stream);
        retry = false;
        double wait = -1;
        if (rc == CURLE_ABORTED_BY_CALLBACK || x.aborted) goto aborted;
        if (rc == CURLE_WRITE_ERROR && x.too_big) {
            k8s_error_set(e, K8S_E_OTHER, *http, "%s: the answer is larger than %zu MiB",
                          c->path, (c->stream ? ERR_BODY_MAX : BODY_MAX) >> 20);
            return K8S_E_OTHER;
        }
        if (rc != CURLE_OK) {
            const char *msg = cerr[0] ? cerr : curl_easy_strerror(rc);
            if (transport_retryable(rc) && n < tries && !(c->stream && *http == 200)) {
                wait = k8s_backoff(n, BACKOFF_BASE, BACKOFF_CAP, k8s_client_random(cl));
            } else {
                k8s_error_fill(e, &c->ask, 0, NULL, NULL, msg);
                return K8S_E_UNREACHABLE;
            }
        } else if (*http >= 200 && *http < 300) {
            return K8S_OK;
        } else if (*http == 401 && cl->cfg.exec_argc && !refreshed) {
            refreshed = true;
            pthread_mutex_lock(&cl->exec_mu);
            cl->cred_valid = false;
            pthread_mutex_unlock(&cl->exec_mu);
            wait = 0;
        } else if (*http == 401 && cl->cfg.token_file && !refreshed) {
            refreshed = true;
            free(file_token(cl, true));
            wait = 0;
        } else if ((*http == 429 || *http == 500 || *http == 502 || *http == 503 ||
                    *http == 504) && n < tries) {
            wait = x.retry_after > 0 ? x.retry_after
                                     : k8s_backoff(n, BACKOFF_BASE, BACKOFF_CAP,
                                                   k8s_client_random(cl));
        } else {
            k8s_status st;
            bool has = k8s_status_parse(sb_str(body), body->len, &st);
            k8s_error_fill(e, &c->ask, *http, has ? &st : NULL, sb_str(body), NULL);
            k8s_rc out = k8s_rc_of(*http, has ? st.reason : NULL);
            k8s_status_free(&st);
            return out;
        }
        retry = true;
        if (wait > 0 && !k8s_sleep(wait, c->stop)) goto aborted;
    }
aborted:
    k8s_error_set(e, K8S_E_OTHER, 0, "%s: stopped", c->path);
    if (e) snprintf(e->reason, sizeof e->reason, "Aborted");
    return K8S_E_OTHER;
}
