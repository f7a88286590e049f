/* client.h: the client of lathe's HTTP API v1 (docs/api.md), on libcurl,
 * and what the `lathe` client commands (submit, get, describe, logs,
 * cancel, wait, top, demo) share.
 *
 *   - configuration: where the server is and which token to send, from
 *     flags, the environment (LATHE_SERVER, LATHE_TOKEN) or a config file
 *     (~/.config/lathe/config.yaml), in that order (docs/cli.md)
 *   - errors: every failed call fills a client_error with the LT_EXIT_*
 *     code to exit with, a message a person can act on (the address tried,
 *     where the token came from) and, for a 422, the server's diagnostics
 *   - calls: one function per API call; JSON answers come back as jansson
 *     values the caller owns (json_decref)
 *   - output: tables, YAML from JSON, times, progress bars
 *
 * Threads: a client handle is used by one thread at a time; open one per
 * thread (bench/api does). Call client_global_init once in main before any
 * thread starts.
 */
#ifndef LATHE_CLIENT_H
#define LATHE_CLIENT_H

#include "base/base.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The server's default address (docs/api.md). */
#define CLIENT_DEFAULT_SERVER "http://127.0.0.1:8740"
/* Seconds a request may take when the configuration says nothing. */
#define CLIENT_DEFAULT_TIMEOUT 30.0

/* ---- errors ---- */
typedef struct client_error {
    int exit_code;   /* LT_EXIT_*; LT_EXIT_OK when nothing failed */
    long status;     /* the HTTP status; 0 when no answer came */
    char code[32];   /* the API's error code ("not_found", "invalid", ...),
                        or "unreachable" / "protocol" / "usage" / "io" */
    char *message;   /* what went wrong and what to do; NULL when nothing failed */
    diag_list diags; /* the diagnostics of a 422 answer */
} client_error;

void client_error_init(client_error *e);
void client_error_free(client_error *e);
/* Sets exit code, code and message (printf-style); replaces earlier ones. */
void client_error_set(client_error *e, int exit_code, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Prints "lathe CMD: message" and every diagnostic on stream. */
void client_error_print(const client_error *e, const char *cmd, FILE *stream);

/* ---- configuration ---- */
typedef struct client_config {
    char *server;       /* "http://host:port", normalised (scheme added, no
                           trailing '/') */
    char *token;        /* NULL when none was given */
    double timeout;     /* seconds per request (not for `logs -f`) */
    char *server_from;  /* where server came from: "--server", "LATHE_SERVER",
                           the config file's path, or "the default" */
    char *token_from;   /* where token came from: "--token", "LATHE_TOKEN",
                           the config file's path; NULL when none */
    char *cacert;       /* a PEM file of the CA that signed an https server's
                           certificate (--cacert, LATHE_CACERT, the config
                           file's cacert:); NULL = the system's CAs */
    char *cacert_from;
} client_config;

/* The config file's path: $LATHE_CONFIG, else $XDG_CONFIG_HOME/lathe/
 * config.yaml, else $HOME/.config/lathe/config.yaml (NULL when HOME is not
 * set either). Caller frees. */
char *client_config_path(void);

/* Fills cfg from, in order of precedence, the flags (flag_server,
 * flag_token: NULL when not given), the environment (LATHE_SERVER,
 * LATHE_TOKEN, LATHE_TIMEOUT, LATHE_CACERT) and the config file at
 * config_path (NULL = client_config_path(); a missing file is fine). The
 * config file is YAML:
 *
 *     server: https://gpu-box:8740
 *     token: s3cret
 *     timeout: 30s
 *     cacert: ca.pem        # relative to the config file's folder
 *
 * (--cacert is applied by client_open over what this resolves.) A CA file
 * that does not exist is an error naming it and where it came from.
 *
 * Problems in the file or in a value (unknown key, bad address, bad
 * duration) go to d with file:line:col, and the function returns false;
 * cfg is then still safe to free. */
bool client_config_resolve(client_config *cfg, const char *flag_server, const char *flag_token,
                           const char *config_path, diag_list *d);
void client_config_free(client_config *cfg);
/* False (with a diagnostic naming it and its source) when cfg->cacert is
 * not a readable file. */
bool client_config_check_cacert(const client_config *cfg, diag_list *d);

/* "gpu-box:8740" -> "http://gpu-box:8740"; a trailing '/' is dropped.
 * Returns NULL (and a reason in why) for an address that is not
 * [http[s]://]HOST[:PORT]. Caller frees. */
char *client_normalise_server(const char *addr, char *why, size_t whysz);

/* ---- the client handle ---- */
typedef struct client client;

/* Once per process, before any thread uses a client (libcurl's global
 * init). Returns false when libcurl cannot initialise. */
bool client_global_init(void);
void client_global_cleanup(void);

/* A handle on the server cfg names (copied). Connections are kept open
 * between calls. */
client *client_new(const client_config *cfg);
void client_free(client *c);
/* The server's address as the handle uses it. */
const char *client_server(const client *c);

/* One HTTP request. method "GET", "POST" or "DELETE"; path starts with '/'
 * and holds the query; body (len bytes, may be NULL) is sent with
 * content_type. The answer's status and body land in *status and out.
 * Fails (returning an exit code and filling err) only when no answer came:
 * connection refused, timeout, a name that does not resolve. */
int client_request(client *c, const char *method, const char *path, const char *content_type,
                   const char *body, size_t len, long *status, sb *out, client_error *err);

/* A request whose answer is JSON: a 2xx answer is parsed into *out (NULL
 * for an empty body); any other status becomes an error from the API's
 * error object (message, diagnostics) and the exit code of docs/cli.md.
 * what names the object for messages ("job lora-r8"); may be NULL. */
int client_call_json(client *c, const char *method, const char *path, const char *content_type,
                     const char *body, size_t len, const char *what, long *status, json_t **out,
                     client_error *err);

/* ---- API calls (docs/api.md). team: act for this team (an admin token;
 * NULL = the token's own team). Each returns LT_EXIT_OK or the exit code
 * it filled err with. ---- */

/* POST /v1/jobs. text is a LoRATrainingJob or LoRAExperiment, YAML unless
 * is_json. *created says whether it is new (201) or was already there with
 * the same spec (200). A 422's diagnostics name file (the local file the
 * text came from) instead of whatever the server called the body. */
int client_submit(client *c, const char *text, size_t len, bool is_json, const char *file,
                  const char *team, json_t **out, bool *created, client_error *err);

/* GET /v1/jobs/NAME. */
int client_job_get(client *c, const char *name, const char *team, json_t **out,
                   client_error *err);

typedef struct client_job_filter {
    const char *team;       /* NULL = the token's jobs (admin: every team) */
    const char *states;     /* "queued,running"; NULL = all */
    const char *experiment; /* NULL = all */
    int limit;              /* per page, 1..1000; 0 = the server's default */
    const char *page_token; /* NULL = the first page */
} client_job_filter;

/* GET /v1/jobs: one page, {"items": [...], "next_page_token": ...}. */
int client_jobs_list(client *c, const client_job_filter *f, json_t **out, client_error *err);
/* Every page (at most max jobs; 0 = all) as one array, newest first. */
int client_jobs_list_all(client *c, const client_job_filter *f, size_t max, json_t **items,
                         client_error *err);

/* POST /v1/jobs/NAME/cancel: the job as it now is (stopping or cancelled). */
int client_job_cancel(client *c, const char *name, const char *team, json_t **out,
                      client_error *err);
/* DELETE /v1/jobs/NAME (a final job); purge: its folder on the server too
 * (logs, checkpoints, adapters). */
int client_job_delete(client *c, const char *name, const char *team, bool purge,
                      client_error *err);
/* GET /v1/jobs/NAME/events: {"items": [...]}. */
int client_job_events(client *c, const char *name, const char *team, json_t **out,
                      client_error *err);
/* GET /v1/jobs/NAME/progress: {"items": [...]}; limit 0 = the server's. */
int client_job_progress(client *c, const char *name, const char *team, int limit, json_t **out,
                        client_error *err);

typedef struct client_logs_opts {
    int attempt; /* 0 = the latest */
    long tail;   /* last N lines; < 0 = all */
    bool follow; /* keep streaming until the attempt ends */
} client_logs_opts;

/* Called with each piece of log text as it arrives; returns false to stop. */
typedef bool (*client_write_fn)(void *ctx, const char *data, size_t len);

/* GET /v1/jobs/NAME/logs, streamed to fn. With follow, no request timeout
 * applies: the call returns when the server ends the stream. */
int client_job_logs(client *c, const char *name, const char *team, const client_logs_opts *o,
                    client_write_fn fn, void *ctx, client_error *err);

/* GET /v1/experiments, /v1/experiments/NAME, /v1/nodes, /v1/teams,
 * /v1/priorityclasses. */
int client_experiments_list(client *c, const char *team, json_t **out, client_error *err);
int client_experiment_get(client *c, const char *name, const char *team, json_t **out,
                          client_error *err);
int client_nodes_list(client *c, json_t **out, client_error *err);
int client_teams_list(client *c, json_t **out, client_error *err);
/* GET /v1/audit (admin tokens): since (RFC 3339 or NULL), at most limit
 * rows (0 = the server's default), team (NULL = all); newest first. */
int client_audit_list(client *c, const char *since, int limit, const char *team, json_t **out,
                      client_error *err);
int client_priority_classes_list(client *c, json_t **out, client_error *err);
/* GET /v1/cost: by "team", "experiment" or "job" (NULL = team); since,
 * until: RFC 3339 times or NULL; step: a duration for a series ("1d") or
 * NULL; team: only that team's (admin; NULL = the token's, or all). */
int client_cost(client *c, const char *by, const char *since, const char *until,
                const char *step, const char *team, json_t **out, client_error *err);
/* GET /healthz (no token): LT_EXIT_OK when the server answers 200. */
int client_healthz(client *c, client_error *err);
/* GET /metrics (no token): the Prometheus text. */
int client_metrics(client *c, sb *out, client_error *err);

/* ---- what the commands share (client_cli.c) ---- */

/* The options every client command takes. */
typedef struct client_flags {
    const char *server; /* --server ADDR */
    const char *token;  /* --token TOKEN */
    const char *team;   /* --team TEAM */
    const char *cacert; /* --cacert FILE */
} client_flags;

/* If argv[*i] is --server / --token / --team / --cacert, takes it and its value (the
 * next argument; the tool's main.c splits --opt=VALUE into the two),
 * advances *i past them and returns 1; returns 0 for another argument; -1
 * (with a usage message printed) when its value is missing. */
int client_flags_take(client_flags *f, const char *cmd, int argc, char **argv, int *i);
/* Resolves the configuration for the flags and opens a handle; prints any
 * problem on stderr as "lathe CMD: ..." and returns its exit code. */
int client_open(const client_flags *f, const char *cmd, client **out);
/* The help text lines of the shared options, for each command's help. */
#define CLIENT_FLAGS_HELP                                                                      \
    "  --server ADDR            the server (default: LATHE_SERVER, the config file,\n"        \
    "                           then " CLIENT_DEFAULT_SERVER ")\n"                              \
    "  --token TOKEN            bearer token (default: LATHE_TOKEN, the config file)\n"        \
    "  --team TEAM              act for this team (an admin token)\n"                        \
    "  --cacert FILE            the CA of an https server's certificate (default:\n"        \
    "                           LATHE_CACERT, the config file's cacert, the system's)\n"

/* ---- output (client_out.c) ---- */

/* A JSON value as a YAML document (libyaml's emitter). Caller frees. */
char *client_json_to_yaml(const json_t *v);
/* Prints a value as indented JSON or YAML, with a final newline. */
void client_print_json(const json_t *v, FILE *f);
void client_print_yaml(const json_t *v, FILE *f);

/* Small accessors that tolerate a missing key or a wrong type: the string
 * (or NULL), the number (or fallback), the integer (or fallback). */
const char *client_str(const json_t *o, const char *key);
double client_num(const json_t *o, const char *key, double fallback);
long long client_int(const json_t *o, const char *key, long long fallback);

/* "2026-11-29T21:54:00Z" (RFC 3339, UTC or with an offset, fractions of a
 * second allowed) -> seconds since the epoch. False for anything else. */
bool client_parse_time(const char *s, double *out);
/* How long ago t was, briefly: "5s", "3m", "2h4m", "3d"; "-" when t <= 0. */
void client_format_age(char *out, size_t outsz, double t, double now);
/* The current time (seconds since the epoch, real-time clock). */
double client_now(void);

/* Money: two decimals, four below 1 (a short CPU run costs fractions of a
 * cent): "12.50", "0.0046". */
void client_format_money(char *out, size_t outsz, double v);

/* A text table printed with aligned columns (kubectl style: upper-case
 * headers, three spaces between columns). */
typedef struct client_table {
    size_t ncols;
    char **cells; /* rows x ncols, row 0 the header */
    size_t nrows, cap;
} client_table;

/* Starts a table with ncols headers (const char *). */
void client_table_init(client_table *t, size_t ncols, ...);
/* Appends a row of ncols cells (printf'd by the caller; NULL prints "-"). */
void client_table_row(client_table *t, ...);
void client_table_print(const client_table *t, FILE *f);
void client_table_free(client_table *t);

/* A bar of width cells for frac in [0, 1]: "#########-----------" (ASCII
 * so that every terminal and log shows it). */
void client_progress_bar(char *out, size_t outsz, double frac, int width);
/* One line about a job's progress: "step 40/120  loss 2.3456  812 tok/s
 * eta 12s" from its "progress" object; "" when there is none. */
void client_progress_text(char *out, size_t outsz, const json_t *job);


/* ---- live progress (client_live.c): bars on a terminal, plain lines when
 * piped ---- */

/* One line about a job: name (padded to name_width), state, and then a
 * progress bar with percent, step, loss, tokens/s and ETA (bar: a
 * terminal) or the same without the bar; for a waiting job, why it waits. */
void client_job_line(sb *out, const json_t *job, int name_width, bool bar);

typedef struct client_live_seen {
    char *name;
    char *state;
    int tenth; /* the last tenth of the steps printed */
} client_live_seen;

typedef struct client_live {
    FILE *f;
    bool tty;   /* redraw in place; else print plain lines on changes */
    int lines;  /* lines of the frame drawn last (tty) */
    client_live_seen *seen;
    size_t n_seen, cap_seen;
} client_live;

/* tty = f is a terminal that understands cursor movement (TERM is set and
 * not "dumb"), unless plain is asked for. */
void client_live_init(client_live *l, FILE *f, bool plain);
void client_live_free(client_live *l);
/* A terminal: replaces the previous frame by text (lines ending in '\n').
 * Not a terminal: does nothing. */
void client_live_frame(client_live *l, const char *text);
/* Forgets the frame on screen so that later output goes below it. */
void client_live_end(client_live *l);
/* Plain mode: true (and the job's line in out) when the job is new, its
 * state changed, or its progress passed another tenth of its steps since
 * it was last reported. */
bool client_live_changed(client_live *l, const json_t *job, sb *out);

#endif
