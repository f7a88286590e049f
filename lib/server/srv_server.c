/* srv_server.c: the server's life. Start: configuration, data folder and
 * its lock (one server per data folder: flock on DATA/server.lock, held
 * until the process ends, however it ends), the cluster, the store, the
 * controller (which re-attaches to running trainers), then the HTTP
 * listener; the bound address goes to DATA/server.addr (https://... when
 * it listens with TLS). SIGHUP re-reads the tokens (srv_reload_tokens).
 * Stop: the listener first (no new request), then the controller;
 * trainers keep running. */
#include "ctl.h"
#include "op.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void srv_log(const srv *s, const char *fmt, ...)
{
    if (s->quiet) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "lathe server: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* Takes the data folder's lock. When the server that wrote its pid is
 * gone (killed) but the lock is still held, a trainer's launcher it forked
 * has not reached its exec yet (the descriptor is O_CLOEXEC, so it closes
 * there, a moment later): wait for it, up to 3 seconds, instead of
 * refusing a restart that follows a kill at once. */
static bool lock_or_wait(int fd)
{
    for (int i = 0; i < 60; i++) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
        char text[32] = "";
        ssize_t n = pread(fd, text, sizeof text - 1, 0);
        long pid = n > 0 ? strtol(text, NULL, 10) : 0;
        if (pid <= 0 || (kill((pid_t)pid, 0) == 0 || errno != ESRCH)) return false; /* it runs */
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return false;
}

/* One server per data folder. The lock goes with the process: kill -9
 * releases it. O_CLOEXEC keeps it out of the trainers' supervisors. */
static int take_lock(srv *s, char *err, size_t errsz)
{
    char *path = path_join(s->cfg.data_dir, "server.lock");
    s->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (s->lock_fd < 0) {
        snprintf(err, errsz, "%s: %s", path, strerror(errno));
        free(path);
        return LT_EXIT_IO;
    }
    if (!lock_or_wait(s->lock_fd)) {
        char pid[32] = "";
        ssize_t n = pread(s->lock_fd, pid, sizeof pid - 1, 0);
        if (n > 0) pid[strcspn(pid, "\n")] = '\0';
        snprintf(err, errsz, "another lathe server (pid %s) uses the data folder %s",
                 n > 0 ? pid : "?", s->cfg.data_dir);
        free(path);
        return LT_EXIT_UNAVAILABLE;
    }
    char line[32];
    int len = snprintf(line, sizeof line, "%d\n", (int)getpid());
    if (ftruncate(s->lock_fd, 0) != 0 || pwrite(s->lock_fd, line, (size_t)len, 0) != len)
        srv_log(s, "%s: cannot write the pid: %s", path, strerror(errno));
    free(path);
    return LT_EXIT_OK;
}

static int open_store(srv *s, char *err, size_t errsz)
{
    srv_pool_init(&s->pool, s->cfg.db_path);
    store *st = srv_pool_get(&s->pool, err, errsz);
    if (!st) return LT_EXIT_IO;
    srv_pool_put(&s->pool, st);
    return LT_EXIT_OK;
}

static void write_address(srv *s)
{
    char *path = path_join(s->cfg.data_dir, "server.addr");
    char line[160];
    int n = snprintf(line, sizeof line, "%s%s\n", s->tls ? "https://" : "", s->address);
    int e = file_write_atomic(path, line, (size_t)n);
    if (e) srv_log(s, "%s: %s", path, strerror(e));
    free(path);
}

static void announce(srv *s)
{
    const srv_cluster *c = &s->cluster;
    if (c->cpu_mode)
        srv_log(s, "listening on %s://%s; data %s; CPU mode: %d CPU slots (%s)",
                s->tls ? "https" : "http", s->address, s->cfg.data_dir, c->cpu_slots,
                c->note[0] ? c->note : "no GPU");
    else
        srv_log(s, "listening on %s://%s; data %s; %d GPUs on %d nodes (%s), policy %s",
                s->tls ? "https" : "http", s->address, s->cfg.data_dir, c->sched->n_gpus, c->sched->n_nodes, c->source,
                sched_policy_name(s->cfg.sched.policy));
    if (s->cfg.admin_token_file)
        srv_log(s, "no token in the config: the admin token is in %s", s->cfg.admin_token_file);
}

/* The executor of the ServerConfig: local processes, Kubernetes (whose
 * first lists must come before the cluster is known), or Slurm. */
static int make_executor(srv *s, char *err, size_t errsz)
{
    spec_server *c = s->cfg.spec;
    if (c->executor == SPEC_EXECUTOR_K8S) {
        if (c->k8s.kubeconfig && c->k8s.kubeconfig[0] != '/' && s->cfg.config_dir) {
            char *abs = path_join(s->cfg.config_dir, c->k8s.kubeconfig);
            free(c->k8s.kubeconfig);
            c->k8s.kubeconfig = abs;
        }
        s->be = exec_k8s_new(&c->k8s, NULL, 30, err, errsz);
        return s->be ? LT_EXIT_OK : LT_EXIT_UNAVAILABLE;
    }
    if (c->executor == SPEC_EXECUTOR_SLURM) {
        s->be = exec_slurm_new(&c->slurm, err, errsz);
        return s->be ? LT_EXIT_OK : LT_EXIT_UNAVAILABLE;
    }
    exec_local_config ec = {.shim_program = s->cfg.trainer_program,
                            .log_max_bytes = (long long)c->logs.max_size,
                            .log_keep = c->logs.keep};
    s->be = exec_local_new(&ec);
    return LT_EXIT_OK;
}

bool srv_active(srv *s, char *why, size_t whysz)
{
    if (atomic_load(&s->active)) return true;
    if (!s->op || !op_active(s->op, why, whysz)) {
        if (!s->op) snprintf(why, whysz, "the server is starting");
        return false;
    }
    return atomic_load(&s->active);
}

int srv_open_cache(srv *s, char *err, size_t errsz)
{
    const char *suffix[] = {"", "-wal", "-shm", "-journal"};
    for (size_t i = 0; i < sizeof suffix / sizeof suffix[0]; i++) {
        char *p = xasprintf("%s%s", s->cfg.db_path, suffix[i]);
        if (unlink(p) != 0 && errno != ENOENT) {
            snprintf(err, errsz, "%s: %s (the cache of operator mode is rebuilt from the API)", p,
                     strerror(errno));
            free(p);
            return LT_EXIT_IO;
        }
        free(p);
    }
    char e2[256];
    if (dir_exists(s->cfg.jobs_dir) && file_remove_tree(s->cfg.jobs_dir, e2, sizeof e2) != 0) {
        snprintf(err, errsz, "%s: %s", s->cfg.jobs_dir, e2);
        return LT_EXIT_IO;
    }
    if (mkdir(s->cfg.jobs_dir, 0755) != 0 && errno != EEXIST) {
        snprintf(err, errsz, "%s: %s", s->cfg.jobs_dir, strerror(errno));
        return LT_EXIT_IO;
    }
    return open_store(s, err, errsz);
}

int srv_start_controller(srv *s, char *err, size_t errsz)
{
    s->ctl = ctl_new(s, err, errsz);
    if (!s->ctl) return LT_EXIT_IO;
    int rc = ctl_run(s->ctl, err, errsz);
    if (rc == LT_EXIT_OK) atomic_store(&s->active, true);
    return rc;
}

/* Each running attempt holds a few descriptors (its log, a follower's
 * connection): the soft limit (often 1024) is raised to the hard one. */
static void raise_nofile(srv *s)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max) return;
    rlim_t was = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        srv_log(s, "cannot raise the open-files limit from %llu: %s", (unsigned long long)was,
                strerror(errno));
}

/* Every step of the start; on failure the caller frees what was made. In
 * operator mode the store and the controller wait for the Lease (op.c). */
static int start_steps(srv *s, const srv_options *o, diag_list *d, char *err, size_t errsz)
{
    raise_nofile(s);
    int rc = srv_config_load(o, &s->cfg, d, err, errsz);
    if (rc == LT_EXIT_OK) rc = srv_config_prepare_data(&s->cfg, err, errsz);
    if (rc == LT_EXIT_OK) {
        srv_token_table_init(&s->tokens, s->cfg.tokens, s->cfg.n_tokens);
        const spec_server *sp = s->cfg.spec;
        srv_ratelimit_init(&s->ratelimit, sp->rate_limit.per_second, sp->rate_limit.burst, 65536);
        if (o->config_path) {
            s->config_path = realpath(o->config_path, NULL);
            if (!s->config_path) s->config_path = xstrdup(o->config_path);
        }
    }
    if (rc == LT_EXIT_OK) rc = take_lock(s, err, errsz);
    if (rc == LT_EXIT_OK) rc = make_executor(s, err, errsz);
    if (rc == LT_EXIT_OK) rc = srv_cluster_build(&s->cfg, s->be, &s->cluster, d, err, errsz);
    if (rc != LT_EXIT_OK) return rc;
    bool operator = s->cfg.spec->executor == SPEC_EXECUTOR_K8S && s->cfg.spec->k8s.op.enabled;
    if (operator) {
        rc = srv_http_start(s, err, errsz);
        if (rc != LT_EXIT_OK) return rc;
        s->op = op_start(s, err, errsz);
        if (!s->op) return LT_EXIT_UNAVAILABLE;
    } else {
        rc = open_store(s, err, errsz);
        if (rc != LT_EXIT_OK) return rc;
        s->ctl = ctl_new(s, err, errsz);
        if (!s->ctl) return LT_EXIT_IO;
        rc = srv_http_start(s, err, errsz);
        if (rc == LT_EXIT_OK) rc = ctl_run(s->ctl, err, errsz);
        if (rc == LT_EXIT_OK) atomic_store(&s->active, true);
    }
    if (rc == LT_EXIT_OK) {
        write_address(s);
        announce(s);
    }
    return rc;
}


static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

srv *srv_start(const srv_options *o, diag_list *d, int *exit_code, char *err, size_t errsz)
{
    srv *s = xcalloc(1, sizeof *s);
    s->lock_fd = -1;
    s->quiet = o->quiet;
    s->started_at = wall_now();
    atomic_init(&s->stopping, false);
    atomic_init(&s->active, false);
    srv_counters_init(&s->counters);
    s->writes = store_batcher_new(0);
    diag_list local;
    diag_list_init(&local);
    int rc = start_steps(s, o, d ? d : &local, err, errsz);
    diag_list_free(&local);
    if (exit_code) *exit_code = rc;
    if (rc != LT_EXIT_OK) {
        srv_stop(s);
        return NULL;
    }
    return s;
}

const char *srv_address(const srv *s)
{
    return s->address;
}

const char *srv_data_dir(const srv *s)
{
    return s->cfg.data_dir;
}

void srv_stop(srv *s)
{
    if (!s) return;
    atomic_store(&s->stopping, true);
    srv_http_stop(s);
    op_stop(s->op); /* before the controller: it may be starting one */
    ctl_free(s->ctl);
    exec_backend_free(s->be);
    if (s->pool.path) srv_pool_free(&s->pool);
    srv_counters_free(&s->counters);
    store_batcher_free(s->writes);
    srv_token_table_free(&s->tokens);
    if (s->ratelimit.burst > 0) srv_ratelimit_free(&s->ratelimit);
    free(s->config_path);
    free(s->tls_cert);
    if (s->tls_key) memset(s->tls_key, 0, strlen(s->tls_key)); /* a private key */
    free(s->tls_key);
    if (s->cluster.spec || s->cluster.sched) srv_cluster_free(&s->cluster);
    srv_config_free(&s->cfg);
    if (s->lock_fd >= 0) close(s->lock_fd);
    free(s);
}

int srv_signal_running(const srv_options *o, int sig, long *pid, char *err, size_t errsz)
{
    srv_config cfg;
    diag_list d;
    diag_list_init(&d);
    int rc = srv_config_load(o, &cfg, &d, err, errsz);
    if (rc != LT_EXIT_OK) {
        diag_print_all(&d, stderr);
        diag_list_free(&d);
        srv_config_free(&cfg);
        return rc;
    }
    diag_list_free(&d);
    char *path = path_join(cfg.data_dir, "server.lock");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errsz, "no server has run on the data folder %s (%s: %s)", cfg.data_dir,
                 path, strerror(errno));
        rc = LT_EXIT_UNAVAILABLE;
    } else if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
        /* we could take it: nobody holds it */
        flock(fd, LOCK_UN);
        snprintf(err, errsz, "no server runs on the data folder %s", cfg.data_dir);
        rc = LT_EXIT_UNAVAILABLE;
    } else {
        char text[32] = "";
        ssize_t n = pread(fd, text, sizeof text - 1, 0);
        long p = n > 0 ? strtol(text, NULL, 10) : 0;
        if (p <= 1) {
            snprintf(err, errsz, "%s holds no pid", path);
            rc = LT_EXIT_UNAVAILABLE;
        } else if (kill((pid_t)p, sig) != 0) {
            snprintf(err, errsz, "cannot signal the server (pid %ld): %s", p, strerror(errno));
            rc = LT_EXIT_UNAVAILABLE;
        } else if (pid) {
            *pid = p;
        }
    }
    if (fd >= 0) close(fd);
    free(path);
    srv_config_free(&cfg);
    return rc;
}

bool srv_reload_tokens(srv *s)
{
    double t0 = wall_now();
    char err[2048] = "";
    srv_token *items = NULL;
    size_t n = 0;
    spec_server *spec = NULL;
    bool ok = true;
    const char *file = s->config_path; /* the audit row's path */
    if (s->config_path) {
        diag_list d;
        diag_list_init(&d);
        bool io = false;
        if (spec_server_load_file(s->config_path, &spec, &d, &io)) {
            sb msg;
            sb_init(&msg);
            if (io) sb_printf(&msg, "%s: cannot read the config file", s->config_path);
            for (size_t i = 0; i < d.len; i++) {
                if (msg.len) sb_puts(&msg, "; ");
                diag_format(&d.items[i], &msg);
            }
            snprintf(err, sizeof err, "%s", msg.len ? sb_str(&msg) : "the config file is invalid");
            sb_free(&msg);
            ok = false;
        }
        diag_list_free(&d);
    } else {
        spec = spec_server_new_default();
    }
    if (ok && !srv_tokens_load(&s->cfg, spec, &items, &n, NULL, err, sizeof err)) ok = false;
    if (ok) {
        /* a team the cluster did not know at the start is not scheduled
         * until a restart: said, not refused */
        for (size_t i = 0; i < n; i++)
            if (items[i].team && !srv_cluster_has_team(&s->cluster, items[i].team))
                srv_log(s, "reload: the token %s names team %s, which this server did not know "
                        "when it started: its jobs are refused until a restart",
                        items[i].name ? items[i].name : "(unnamed)", items[i].team);
        if (n == 0)
            srv_log(s, "reload: no token is configured now: every /v1/ request is refused "
                    "until one is added");
        srv_token_table_swap(&s->tokens, items, n);
    }
    char *detail = ok ? xasprintf("%zu tokens loaded%s%s", n,
                                  spec->tokens_file ? " with the tokens file " : "",
                                  spec->tokens_file ? spec->tokens_file : "")
                      : xasprintf("kept the old tokens: %.400s", err);
    store_audit a = {.at = t0, .actor = (char *)"sighup", .method = (char *)"SIGHUP",
                     .path = (char *)(file ? file : ""), .status = ok ? 200 : 422,
                     .detail = detail};
    /* on record before the log line says the reload is over */
    srv_audit_server(s, &a);
    free(detail);
    if (ok)
        srv_log(s, "SIGHUP: %zu tokens loaded from %s%s%s; other settings of the config need a "
                "restart", n, s->config_path ? s->config_path : "the defaults",
                spec->tokens_file ? " and " : "", spec->tokens_file ? spec->tokens_file : "");
    else
        srv_log(s, "SIGHUP: the tokens were not reloaded, the old ones stay in use: %s", err);
    spec_server_free(spec);
    return ok;
}

int srv_run(const srv_options *o, volatile sig_atomic_t *stop)
{
    char err[1024] = "";
    diag_list d;
    diag_list_init(&d);
    int rc;
    srv *s = srv_start(o, &d, &rc, err, sizeof err);
    diag_print_all(&d, stderr);
    diag_list_free(&d);
    if (!s) {
        fprintf(stderr, "lathe server: %s\n", err[0] ? err : "cannot start");
        return rc;
    }
    while (!*stop) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        if (o->reload && *o->reload) {
            *o->reload = 0;
            srv_reload_tokens(s);
        }
    }
    srv_log(s, "stopping (trainers keep running; a new server re-attaches to them)");
    srv_stop(s);
    return LT_EXIT_OK;
}
