/* k8s_internal.h: what the client files of lib/k8s share and nobody else
 * sees (tests and fuzz targets may include it):
 *
 *   - the client's state (k8s_client.c) and one HTTP exchange with it
 *     (k8s_call_do: rate limit, credentials, retries, Status errors);
 *   - Status objects and the lathe sentence made of them (k8s_errors.c);
 *   - the token bucket and the backoff (k8s_ratelimit.c);
 *   - exec credential plugins (k8s_exec_plugin.c);
 *   - the newline splitter and the watch-event parser (k8s_lines.c),
 *     pure functions the fuzz targets drive;
 *   - RFC 3339 times (k8s_lines.c).
 */
#ifndef LATHE_K8S_INTERNAL_H
#define LATHE_K8S_INTERNAL_H

#include "k8s.h"

#include "base/base.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>
#include <time.h>

/* ---- times ---- */
double k8s_now_mono(void); /* seconds, CLOCK_MONOTONIC */
double k8s_now_real(void); /* seconds since the epoch */
/* RFC 3339 ("2026-12-01T19:00:00.123456789Z", "...+02:00") into seconds
 * since the epoch and nanoseconds. False when it is not one. */
bool k8s_time_parse(const char *s, size_t len, int64_t *sec, int32_t *nsec);
/* Sleeps `seconds`, in slices, returning early (false) once *stop is set. */
bool k8s_sleep(double seconds, const atomic_bool *stop);

/* ---- Status objects (k8s_errors.c) ---- */
typedef struct k8s_cause {
    char *field, *message, *reason;
} k8s_cause;

typedef struct k8s_status {
    long code;           /* 0 when absent */
    char reason[48];
    char *message;       /* NULL when absent */
    char *kind, *name;   /* details.kind / details.name; NULL when absent */
    k8s_cause *causes;
    size_t n_causes;
} k8s_status;

/* Reads a Status object (kind "Status") from JSON text; false when the text
 * is not one (out is then empty, still safe to free). Pure. */
bool k8s_status_parse(const char *body, size_t len, k8s_status *out);
bool k8s_status_from_json(const json_t *v, k8s_status *out);
void k8s_status_free(k8s_status *s);
/* The rc of an HTTP status and a Status reason. */
k8s_rc k8s_rc_of(long http, const char *reason);

/* What a call asked, for the sentence of an error. */
typedef struct k8s_ask {
    const char *verb;     /* "get", "list", "create", "patch", "apply", "update",
                             "delete", "watch", "log" */
    const k8s_ref *ref;
    const char *server;
    bool in_cluster;      /* "the service account" in RBAC hints */
} k8s_ask;

/* Fills e from an answer: http the status (0 = none), st the Status (may be
 * NULL), body the raw text when no Status (may be NULL), curl_msg the
 * transport's error when there was no answer. */
void k8s_error_fill(k8s_error *e, const k8s_ask *a, long http, const k8s_status *st,
                    const char *body, const char *curl_msg);
/* e with a message of its own (printf-like). */
void k8s_error_set(k8s_error *e, k8s_rc rc, long http, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* "jobs.batch lathe-x-1 in team-a" into out. */
void k8s_ref_describe(const k8s_ref *ref, sb *out);

/* ---- the token bucket (k8s_ratelimit.c) ---- */
typedef struct k8s_bucket {
    pthread_mutex_t mu;
    double qps, burst;
    double tokens, last; /* last refill, k8s_now_mono */
} k8s_bucket;
void k8s_bucket_init(k8s_bucket *b, double qps, int burst);
void k8s_bucket_destroy(k8s_bucket *b);
/* Takes a token, waiting for it when none is left; returns whether it had
 * to wait. Returns early when *stop is set (stop may be NULL). */
bool k8s_bucket_take(k8s_bucket *b, const atomic_bool *stop);
/* Backoff before retry `attempt` (0-based): base * 2^attempt capped, then
 * "equal jitter" (half fixed, half random) from rnd in [0, 1). */
double k8s_backoff(int attempt, double base, double cap, double rnd);

/* ---- exec credential plugins (k8s_exec_plugin.c) ---- */
typedef struct k8s_cred {
    char *token;           /* status.token */
    char *cert, *key;      /* status.clientCertificateData / clientKeyData (PEM) */
    double expiry;         /* status.expirationTimestamp, epoch seconds; 0 = none */
} k8s_cred;
void k8s_cred_free(k8s_cred *c);
/* Reads an ExecCredential's JSON (what a plugin printed). Pure. */
bool k8s_cred_parse(const char *text, size_t len, const char *api_version, k8s_cred *out,
                    char *err, size_t errsz);
/* Runs cfg's plugin (argv, never a shell; stdout read up to 1 MiB, stderr
 * passed through, killed after timeout seconds) and reads its answer. */
bool k8s_exec_run(const k8s_config *cfg, double timeout, k8s_cred *out, char *err,
                  size_t errsz);

/* ---- configuration (k8s_config.c) ---- */
void k8s_config_copy(k8s_config *dst, const k8s_config *src);

/* ---- lines (k8s_lines.c) ---- */
/* Splits a byte stream into lines. A line longer than max is an error
 * (pieces false) or handed over in pieces of max bytes (pieces true: each
 * piece but the last has more set). */
typedef int (*k8s_line_cb)(void *ud, const char *line, size_t len, bool first, bool more);
typedef struct k8s_lines {
    sb buf;
    size_t max;
    bool pieces;
    bool in_line; /* a piece of the current line was handed over already */
    bool overflow;
} k8s_lines;
void k8s_lines_init(k8s_lines *l, size_t max, bool pieces);
void k8s_lines_free(k8s_lines *l);
/* Feeds bytes; calls cb for each complete line (without '\n' or '\r\n').
 * Returns 0, or cb's non-zero answer, or -1 on an overlong line when
 * pieces is false (l->overflow set). */
int k8s_lines_feed(k8s_lines *l, const char *data, size_t n, k8s_line_cb cb, void *ud);
/* Hands over what is left without a final newline. */
int k8s_lines_finish(k8s_lines *l, k8s_line_cb cb, void *ud);

#define K8S_WATCH_LINE_MAX (16u << 20) /* one watch event: 16 MiB */
#define K8S_LOG_LINE_MAX (1u << 20)    /* one log line before it is cut into pieces */

typedef enum { K8S_W_ADDED, K8S_W_MODIFIED, K8S_W_DELETED, K8S_W_BOOKMARK, K8S_W_ERROR } k8s_wtype;
typedef struct k8s_wevent {
    k8s_wtype type;
    json_t *object;   /* owned; for ERROR a Status */
    const char *rv;   /* object's metadata.resourceVersion (inside object); NULL when none */
    const char *ns, *name; /* object's metadata; ns NULL when cluster-scoped */
} k8s_wevent;
/* One line of a watch stream: {"type": ..., "object": {...}}. False with a
 * message on anything else. Pure. */
bool k8s_watch_parse_line(const char *line, size_t len, k8s_wevent *ev, char *err,
                          size_t errsz);
void k8s_wevent_free(k8s_wevent *ev);
/* Compares two resourceVersions: as integers when both parse, else only
 * equality: returns <0, 0, >0, or 2 when they differ but cannot be ordered. */
int k8s_rv_cmp(const char *a, const char *b);

/* ---- the client (k8s_client.c) ---- */
typedef enum { K8S_K_GET, K8S_K_LIST, K8S_K_CREATE, K8S_K_PATCH, K8S_K_UPDATE, K8S_K_DELETE,
               K8S_K_WATCH, K8S_K_LOG } k8s_kind;

/* One exchange. */
typedef struct k8s_call {
    const char *method;   /* "GET", "POST", ... */
    k8s_kind kind;        /* which counter */
    k8s_ask ask;          /* for messages (server / in_cluster filled by k8s_call_do) */
    const char *path;     /* path and query */
    const char *ctype;    /* body's Content-Type; NULL = none */
    const char *body;
    size_t body_len;
    bool stream;          /* no overall timeout; a 200's body goes to on_data */
    double stream_timeout;/* stream: overall limit in seconds; 0 = none */
    bool no_retry;        /* one attempt (the caller retries) */
    /* stream: called with the body of a 200 answer; a return other than n
     * aborts the transfer */
    size_t (*on_data)(void *ud, const char *p, size_t n);
    void (*on_open)(void *ud); /* stream: a 200's headers arrived */
    void *ud;
    const atomic_bool *stop; /* aborts waits and transfers once set; may be NULL */
} k8s_call;

/* Performs c. *http the answer's status (0 = none); body the answer's
 * text (not for a 200 stream). On an error fills e. Returns K8S_OK for
 * 2xx. A stream aborted by on_data or stop returns K8S_E_OTHER with
 * e->http 0 and reason "Aborted". */
k8s_rc k8s_call_do(k8s_client *cl, k8s_call *c, long *http, sb *body, k8s_error *e);
/* k8s_list that stops waiting once *stop is set. */
k8s_rc k8s_list_stop(k8s_client *cl, const k8s_ref *ref, const char *label, const char *field,
                     int limit, json_t **items, char **rv, k8s_error *e, const atomic_bool *stop);
/* Appends s percent-encoded for a query value. */
void k8s_query_escape(sb *out, const char *s);
/* A random number in [0, 1) from the client's generator. */
double k8s_client_random(k8s_client *cl);

/* ---- the log follower (k8s_logs.c) ---- */
/* Lines a follower skipped after a reconnection (given before). */
uint64_t k8s_log_follower_skipped(k8s_log_follower *f);

#endif
