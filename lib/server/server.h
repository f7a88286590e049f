/* server.h: `lathe server`, the controller and HTTP server (docs/server.md,
 * docs/api.md).
 *
 * One process holds:
 *   - the store (lib/store, SQLite in the data folder): every job, attempt,
 *     event and progress point; the only state that survives a restart;
 *   - the HTTP API v1 on libmicrohttpd (one thread per connection, each
 *     with its own store handle from a small pool): submissions are
 *     validated, planned and checked against the cluster before they are
 *     stored and acknowledged;
 *   - the controller, a thread of its own that owns the executor and its
 *     handles: it polls running trainers (progress, checkpoints, exits),
 *     applies retries, timeouts, cancels and preemptions, re-plans jobs
 *     that ran out of memory, and runs the scheduler's policy (lib/sched,
 *     the code `lathe simulate` runs) whenever something changed and
 *     periodically.
 *
 * Trainers run under the local executor (lib/exec) and outlive the server:
 * a new server on the same data folder re-attaches to them.
 */
#ifndef LATHE_SERVER_H
#define LATHE_SERVER_H

#include "base/base.h"

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

/* What the command line gives; NULL fields take the config file's value. */
typedef struct srv_options {
    const char *config_path; /* a ServerConfig file; NULL = every default */
    const char *listen;      /* "HOST:PORT", overrides spec.listen */
    const char *data_dir;    /* overrides spec.dataDir */
    bool quiet;              /* no log lines on stderr */
    /* srv_run: a flag a SIGHUP handler raises; srv_run then re-reads the
     * tokens (the config's list and its tokens file) and clears it. NULL =
     * no reloads. */
    volatile sig_atomic_t *reload;
} srv_options;

typedef struct srv srv;

/* Loads the config, takes the data folder's lock, opens the store,
 * re-attaches to running trainers and starts the controller and the HTTP
 * listener. Returns NULL with a message in err (errsz bytes) and the
 * config's diagnostics in d (may be NULL); *exit_code (may be NULL) is the
 * LT_EXIT_* code to end with: 2 invalid config, 4 data folder, 5 the
 * address cannot be bound. */
srv *srv_start(const srv_options *o, diag_list *d, int *exit_code, char *err, size_t errsz);
/* The address the listener is bound to, "127.0.0.1:8740" (the chosen port
 * when the config asked for port 0). Also written to DATA/server.addr. */
const char *srv_address(const srv *s);
/* The data folder in use. */
const char *srv_data_dir(const srv *s);
/* Stops accepting requests, stops the controller (trainers keep running),
 * closes the store and frees everything. NULL is fine. */
void srv_stop(srv *s);

/* Runs a server until *stop becomes non-zero (a signal handler sets it),
 * then stops it. Returns an LT_EXIT_* code. */
int srv_run(const srv_options *o, volatile sig_atomic_t *stop);

/* `lathe server reload`: sends sig (SIGHUP) to the server running on the
 * data folder that o names (the config's dataDir, or --data), whose pid is
 * in DATA/server.lock. The config and its tokens file are loaded first,
 * so an invalid one fails here (exit 2, diagnostics on stderr) and nothing
 * is sent. Fails with a message in err when no server holds the lock. *pid (may be NULL) is the pid signalled. Returns an LT_EXIT_*
 * code. */
int srv_signal_running(const srv_options *o, int sig, long *pid, char *err, size_t errsz);

/* The SHA-256 of a token's text as 64 lowercase hex digits (out: 65 bytes),
 * what a ServerConfig's tokens list holds. */
void srv_hash_token(const char *token, char out[65]);

#endif
