/* exec_local.c: the local executor backend, the server's side. Starting an
 * attempt launches its supervisor (exec_shim.c) detached from the server
 * (fork, setsid, fork, exec of /proc/self/exe exec-shim), hands it its
 * config over a socket and waits for its answer: the handle, or why it
 * could not start (the job's lock is held, the command cannot be run).
 * Attach and find rebuild handles from JSON; signal and cancel go through
 * the supervisor, checked by pid and start time. Polling is in
 * exec_local_poll.c. docs/executors.md describes the design. */
#include "exec_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

typedef struct local_backend {
    exec_backend be; /* first: what callers see */
    char *shim_program;
    long long log_max;
    int log_keep;
    double start_timeout;
} local_backend;

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- handles ---- */

static exec_handle *handle_new(exec_backend *be, exec_local_desc *d)
{
    local_handle *lh = xcalloc(1, sizeof *lh);
    lh->d = *d; /* takes the strings */
    memset(d, 0, sizeof *d);
    lh->h.backend = be;
    lh->h.job_dir = lh->d.job_dir;
    lh->h.attempt = lh->d.attempt;
    lh->h.work_dir = lh->d.work_dir;
    lh->h.log_path = lh->d.log_path;
    lh->h.started_at = lh->d.started_at;
    exec_tally_init(&lh->tally);
    exec_log_reader_init(&lh->log, lh->d.log_path);
    return &lh->h;
}

static void local_release(exec_handle *h)
{
    local_handle *lh = (local_handle *)h;
    exec_log_reader_free(&lh->log);
    if (lh->swift_set) exec_jsonl_reader_free(&lh->swift);
    exec_tally_free(&lh->tally);
    exec_local_desc_free(&lh->d);
    free(lh);
}

static char *local_handle_json(const exec_handle *h)
{
    return exec_local_desc_json(&((const local_handle *)h)->d);
}

static exec_rc local_attach(exec_backend *be, const char *json, exec_handle **out, char *err,
                            size_t errsz)
{
    exec_local_desc d;
    if (!exec_local_desc_parse(json, &d, err, errsz)) return EXEC_E_INVALID;
    *out = handle_new(be, &d);
    return EXEC_OK;
}

static exec_rc local_find(exec_backend *be, const char *job_dir, exec_handle **out, char *err,
                          size_t errsz)
{
    char *path = path_join(job_dir, EXEC_CURRENT_FILE);
    size_t len;
    char *json = file_read_all(path, 1 << 20, &len, err, errsz);
    free(path);
    if (!json) return EXEC_E_GONE;
    exec_rc rc = local_attach(be, json, out, err, errsz);
    free(json);
    return rc;
}

/* ---- signals ---- */

static bool has_ended(const local_handle *lh)
{
    char *path = path_join(lh->d.work_dir, EXEC_EXIT_FILE);
    bool done = lh->ended || file_exists(path);
    free(path);
    return done;
}

static exec_rc to_shim(local_handle *lh, int sig, char *err, size_t errsz)
{
    const exec_local_ids *id = &lh->d.ids;
    if (has_ended(lh) || !exec_proc_alive(id->shim_pid, id->shim_start, id->boot_id)) {
        snprintf(err, errsz, "attempt %d has ended (its supervisor, pid %d, is gone)",
                 lh->d.attempt, id->shim_pid);
        return EXEC_E_GONE;
    }
    int e = exec_proc_signal(id->shim_pid, id->shim_start, sig);
    if (e == ESRCH) {
        snprintf(err, errsz, "attempt %d has ended", lh->d.attempt);
        return EXEC_E_GONE;
    }
    if (e) {
        snprintf(err, errsz, "signalling the supervisor (pid %d): %s", id->shim_pid, strerror(e));
        return EXEC_E_SYSTEM;
    }
    return EXEC_OK;
}

static exec_rc local_signal(exec_handle *h, int sig, char *err, size_t errsz)
{
    local_handle *lh = (local_handle *)h;
    if (sig == SIGKILL) {
        exec_rc rc = to_shim(lh, EXEC_SHIM_KILL_SIGNAL, err, errsz);
        if (rc == EXEC_OK) lh->d.kill_sent = true;
        return rc;
    }
    if (!exec_signal_forwardable(sig)) {
        snprintf(err, errsz, "signal %d cannot be sent to a trainer (SIGTERM, SIGINT, SIGHUP, "
                             "SIGQUIT, SIGUSR2 and SIGKILL can)",
                 sig);
        return EXEC_E_INVALID;
    }
    return to_shim(lh, sig, err, errsz);
}

static exec_rc local_cancel(exec_handle *h, double now, double grace, char *err, size_t errsz)
{
    local_handle *lh = (local_handle *)h;
    if (lh->d.term_at > 0) return EXEC_OK; /* the first deadline stands */
    exec_rc rc = to_shim(lh, SIGTERM, err, errsz);
    if (rc != EXEC_OK) return rc;
    lh->d.term_at = now;
    lh->d.kill_at = now + (grace > 0 ? grace : 0);
    return EXEC_OK;
}

/* ---- starting ---- */

/* True for the variables lathe sets itself: the server's own LATHE_*
 * settings and the contract's names never leak from its environment. */
static bool reserved_name(const char *entry)
{
    static const char *const names[] = {
        "BASE_MODEL_PATH=", "DATASET_PATH=",  "EVAL_DATASET_PATH=", "LORA_RANK=", "CHECKPOINT_DIR=",
        "CHECKPOINT_INTERVAL=", "CUDA_VISIBLE_DEVICES=", "NNODES=", "NODE_RANK=",
        "NPROC_PER_NODE=", "MASTER_ADDR=", "MASTER_PORT=", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=",
        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=",
    };
    if (str_starts_with(entry, "LATHE_")) return true;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (str_starts_with(entry, names[i])) return true;
    return false;
}

/* Drops earlier entries with the same name as `entry`. */
static void env_override(char **env, size_t *n, const char *entry)
{
    size_t name = strcspn(entry, "=");
    size_t w = 0;
    for (size_t i = 0; i < *n; i++) {
        if (strncmp(env[i], entry, name) == 0 && env[i][name] == '=') free(env[i]);
        else env[w++] = env[i];
    }
    *n = w;
}

/* The user name of uid for USER and LOGNAME; NULL when it has none. */
static char *user_name(uid_t uid)
{
    struct passwd pw, *res = NULL;
    char buf[4096];
    if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) != 0 || !res) return NULL;
    return xstrdup(res->pw_name);
}

/* The trainer's environment: the server's, then the request's extras, then
 * the contract's variables, later ones winning. Of the server's: without a
 * sandbox everything but lathe's own names and names that carry secrets
 * (TOKEN, KEY, ...); in the sandbox only the allow-list (exec_env_allowed),
 * with HOME and TMPDIR the trainer's work folder and USER / LOGNAME its
 * user's. */
static json_t *build_env(const exec_request *req, const char *trainer_dir)
{
    char **env = NULL;
    size_t n = 0;
    for (char **e = environ; e && *e; e++)
        if (!reserved_name(*e) && strchr(*e, '=') && !exec_env_secret_name(*e) &&
            (!req->sandbox || exec_env_allowed(*e))) {
            env = xrealloc(env, (n + 1) * sizeof *env);
            env[n++] = xstrdup(*e);
        }
    if (req->sandbox) {
        long long uid = req->sandbox->uid;
        char *user = user_name(uid >= 0 ? (uid_t)uid : geteuid());
        char *own[] = {xasprintf("HOME=%s", trainer_dir), xasprintf("TMPDIR=%s", trainer_dir),
                       user ? xasprintf("USER=%s", user) : NULL,
                       user ? xasprintf("LOGNAME=%s", user) : NULL};
        free(user);
        for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
            if (own[i]) {
                env = xrealloc(env, (n + 1) * sizeof *env);
                env[n++] = own[i];
            }
    }
    char **extra = NULL;
    size_t n_extra = 0;
    for (size_t i = 0; i < req->n_env; i++)
        if (req->env[i] && strchr(req->env[i], '=')) {
            extra = xrealloc(extra, (n_extra + 1) * sizeof *extra);
            extra[n_extra++] = xstrdup(req->env[i]);
        }
    exec_contract_env(&req->contract, &extra, &n_extra);
    for (size_t i = 0; i < n_extra; i++) {
        env_override(env, &n, extra[i]);
        env = xrealloc(env, (n + 1) * sizeof *env);
        env[n++] = extra[i];
    }
    free(extra);
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, json_string(env[i]));
    str_list_free(env, n);
    return a;
}

/* The trainer's cwd: in the sandbox the attempt's work folder (the only
 * one it writes besides its checkpoints: the supervisor's files beside it
 * stay read-only); else the attempt's folder, as always. */
static char *trainer_dir(const exec_request *req, const char *work_dir)
{
    return req->sandbox ? path_join(work_dir, "work") : xstrdup(work_dir);
}

static char *build_config(const local_backend *lb, const exec_request *req, const char *work_dir)
{
    char *tdir = trainer_dir(req, work_dir);
    json_t *o = json_object();
    json_t *argv = json_array();
    for (size_t i = 0; i < req->argc; i++) json_array_append_new(argv, json_string(req->argv[i]));
    json_object_set_new(o, "argv", argv);
    json_object_set_new(o, "env", build_env(req, tdir));
    json_object_set_new(o, "job_dir", json_string(req->job_dir));
    json_object_set_new(o, "work_dir", json_string(work_dir));
    json_object_set_new(o, "trainer_dir", json_string(tdir));
    if (req->sandbox) {
        const char *g = req->contract.gpus;
        json_t *box = exec_sandbox_json(req->sandbox, g && *g);
        /* where the trainer writes is this backend's layout: its work
         * folder and CHECKPOINT_DIR, read-write (unless the caller listed them) */
        const char *rw[] = {tdir, req->contract.checkpoint_dir};
        json_t *binds = json_object_get(box, "binds");
        for (size_t i = 0; i < sizeof rw / sizeof rw[0]; i++) {
            bool listed = !rw[i];
            for (size_t k = 0; !listed && k < json_array_size(binds); k++)
                listed = strcmp(json_string_value(json_object_get(json_array_get(binds, k), "path")),
                                rw[i]) == 0;
            if (!listed)
                json_array_append_new(binds,
                                      json_pack("{s:s, s:b}", "path", rw[i], "writable", 1));
        }
        json_object_set_new(o, "sandbox", box);
    }
    free(tdir);
    if (req->contract.checkpoint_dir)
        json_object_set_new(o, "checkpoint_dir", json_string(req->contract.checkpoint_dir));
    json_object_set_new(o, "attempt", json_integer(req->attempt));
    json_object_set_new(o, "log_max_bytes", json_integer(lb->log_max));
    json_object_set_new(o, "log_keep", json_integer(lb->log_keep));
    json_t *codes = json_array();
    for (size_t i = 0; i < req->n_no_retry_codes; i++)
        json_array_append_new(codes, json_integer(req->no_retry_codes[i]));
    json_object_set_new(o, "no_retry_codes", codes);
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!text) abort(); /* jansson fails only on allocation */
    return text;
}

/* Checks the request and prepares the folders; the attempt's folder must not
 * hold an earlier run of the same attempt. */
static exec_rc prepare(const exec_request *req, char **work_dir, char *err, size_t errsz)
{
    if (!req->argv || req->argc == 0 || !req->argv[0] || !*req->argv[0]) {
        snprintf(err, errsz, "no command to run");
        return EXEC_E_INVALID;
    }
    if (!req->job_dir || !*req->job_dir || req->attempt <= 0) {
        snprintf(err, errsz, "a start needs a job folder and an attempt number >= 1");
        return EXEC_E_INVALID;
    }
    char name[32];
    snprintf(name, sizeof name, "attempt-%d", req->attempt);
    *work_dir = path_join(req->job_dir, name);
    int e = exec_mkdirs(*work_dir, 0755);
    if (e) {
        snprintf(err, errsz, "cannot create %s: %s", *work_dir, strerror(e));
        return EXEC_E_SYSTEM;
    }
    char *done = path_join(*work_dir, EXEC_EXIT_FILE);
    bool ran = file_exists(done);
    free(done);
    if (ran) {
        snprintf(err, errsz, "attempt %d of this job already ran (%s has %s); start attempt %d",
                 req->attempt, *work_dir, EXEC_EXIT_FILE, req->attempt + 1);
        return EXEC_E_INVALID;
    }
    return EXEC_OK;
}

/* A quick look at the job's lock before anything is started. The
 * supervisor takes it for real; this only answers early. */
static bool lock_held(const char *job_dir)
{
    char *path = path_join(job_dir, EXEC_LOCK_FILE);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    free(path);
    if (fd < 0) return false;
    bool held = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd); /* releases it when we got it */
    return held;
}

/* In the grandchild (after fork in a possibly threaded server): only
 * async-signal-safe calls until exec. The socket becomes descriptor 3;
 * every other descriptor above 2 is closed; 0-2 read and write /dev/null. */
static void exec_shim_child(int sock, const char *prog, char *const *argv, int max_fd)
{
    int s = fcntl(sock, F_DUPFD, 10);
    if (s < 0 || dup2(s, 3) != 3) _exit(127);
#ifdef SYS_close_range
    if (syscall(SYS_close_range, 4u, ~0u, 0u) != 0)
#endif
        for (int fd = 4; fd < max_fd; fd++) close(fd);
    int null = open("/dev/null", O_RDWR);
    if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0) _exit(127);
    if (null > 3) close(null);
    execv(prog, argv);
    _exit(127);
}

/* Forks the detached supervisor; returns false with errno set. */
static bool spawn_shim(const local_backend *lb, int sock)
{
    char fdarg[] = "3";
    char *argv[] = {(char *)"lathe", (char *)"exec-shim", fdarg, NULL};
    struct rlimit rl;
    int max_fd = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 65536 ? (int)rl.rlim_cur
                                                                             : 65536;
    pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
        if (setsid() < 0) _exit(127);
        pid_t grand = fork();
        if (grand != 0) _exit(grand < 0 ? 127 : 0);
        exec_shim_child(sock, lb->shim_program, argv, max_fd);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return true;
}

static bool send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* Reads the supervisor's one-line answer, waiting at most `timeout` s. */
static char *read_answer(int fd, double timeout)
{
    sb s;
    sb_init(&s);
    double until = wall_now() + timeout;
    for (;;) {
        double left = until - wall_now();
        struct pollfd p = {fd, POLLIN, 0};
        if (left <= 0 || poll(&p, 1, (int)(left * 1000) + 1) == 0) break;
        char buf[4096];
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        sb_putn(&s, buf, (size_t)r);
        if (memchr(buf, '\n', (size_t)r) || s.len > EXEC_CONFIG_MAX) break;
    }
    return sb_take(&s);
}

/* Turns the answer into a result (and the handle). */
static exec_rc take_answer(exec_backend *be, char *answer, const char *work_dir,
                           exec_handle **out, char *err, size_t errsz)
{
    answer[strcspn(answer, "\n")] = '\0';
    const char *sp = strchr(answer, ' ');
    const char *text = sp ? sp + 1 : "";
    if (str_starts_with(answer, "ok ")) return local_attach(be, text, out, err, errsz);
    if (!*answer) {
        snprintf(err, errsz, "the supervisor did not answer (see %s/%s)", work_dir, EXEC_SHIM_LOG);
        return EXEC_E_SYSTEM;
    }
    snprintf(err, errsz, "%s", text);
    if (str_starts_with(answer, "busy ")) return EXEC_E_BUSY;
    if (str_starts_with(answer, "invalid ")) return EXEC_E_INVALID;
    return EXEC_E_SYSTEM;
}

static exec_rc local_start(exec_backend *be, const exec_request *req, exec_handle **out,
                           char *err, size_t errsz)
{
    local_backend *lb = (local_backend *)be;
    char *work_dir = NULL;
    exec_rc rc = prepare(req, &work_dir, err, errsz);
    if (rc == EXEC_OK && lock_held(req->job_dir)) {
        snprintf(err, errsz, "another attempt of this job runs (%s/%s is locked)", req->job_dir,
                 EXEC_LOCK_FILE);
        rc = EXEC_E_BUSY;
    }
    int sv[2] = {-1, -1};
    if (rc == EXEC_OK && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        snprintf(err, errsz, "socketpair: %s", strerror(errno));
        rc = EXEC_E_SYSTEM;
    }
    if (rc == EXEC_OK) {
        char *config = build_config(lb, req, work_dir);
        bool spawned = spawn_shim(lb, sv[1]);
        int e = errno;
        close(sv[1]);
        if (!spawned) {
            snprintf(err, errsz, "cannot start the supervisor: %s", strerror(e));
            rc = EXEC_E_SYSTEM;
        } else {
            send_all(sv[0], config, strlen(config)); /* a failure shows in the answer */
            shutdown(sv[0], SHUT_WR);
            char *answer = read_answer(sv[0], lb->start_timeout);
            rc = take_answer(be, answer, work_dir, out, err, errsz);
            free(answer);
        }
        free(config);
        close(sv[0]);
    }
    free(work_dir);
    return rc;
}

/* ---- the backend ---- */

static void local_destroy(exec_backend *be)
{
    local_backend *lb = (local_backend *)be;
    free(lb->shim_program);
    free(lb);
}

exec_backend *exec_local_new(const exec_local_config *cfg)
{
    local_backend *lb = xcalloc(1, sizeof *lb);
    lb->be.name = "local";
    lb->be.start = local_start;
    lb->be.attach = local_attach;
    lb->be.find = local_find;
    lb->be.poll = exec_local_poll;
    lb->be.signal = local_signal;
    lb->be.cancel = local_cancel;
    lb->be.handle_json = local_handle_json;
    lb->be.release = local_release;
    lb->be.destroy = local_destroy;
    lb->shim_program = xstrdup(cfg && cfg->shim_program ? cfg->shim_program : "/proc/self/exe");
    lb->log_max = cfg && cfg->log_max_bytes > 0 ? cfg->log_max_bytes : 64ll << 20;
    lb->log_keep = cfg && cfg->log_keep > 0 ? cfg->log_keep : 3;
    lb->start_timeout = cfg && cfg->start_timeout > 0 ? cfg->start_timeout : 10;
    return &lb->be;
}
