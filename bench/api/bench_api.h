/* bench_api.h: what the files of bench_api share: the server under test (a
 * `lathe server` child process in a temporary folder, bench_server.c), the
 * job the clients submit, and the controller's measurement (bench_queue.c).
 */
#ifndef LATHE_BENCH_API_H
#define LATHE_BENCH_API_H

#include "base/base.h"

#include <stdbool.h>
#include <sys/types.h>

typedef struct bench_opts {
    long jobs, clients, reads;
    const char *lathe;
    const char *queued; /* "10000,50000": measure the controller instead */
    long probes;
    bool keep;
} bench_opts;

typedef struct server_proc {
    char *dir;
    pid_t pid;
    char *addr, *token;
} server_proc;

/* Monotonic seconds. */
double bench_now(void);
/* The job of index k as a user writes it (name bench-<k>). Caller frees. */
char *bench_job(long k);
/* A fresh folder with the bench's cluster (one draining node of 8 GPUs:
 * every job is accepted and waits) and server config, then the server. */
bool server_start(const bench_opts *o, server_proc *s);
/* Starts the server again on s->dir (after server_halt). */
bool server_launch(const bench_opts *o, server_proc *s);
/* SIGTERM, then SIGKILL after 10 s; the folder stays. */
void server_halt(server_proc *s);
/* server_halt, then removes the folder (unless keep) and frees s. */
void server_stop(server_proc *s, bool keep);
/* CPU seconds (user + system) the server process used so far; -1 when
 * unknown. */
double server_cpu_seconds(const server_proc *s);

/* The controller's pass time with o->queued jobs waiting (bench_queue.c).
 * Returns an LT_EXIT_* code. */
int bench_queue(const bench_opts *o);

#endif
