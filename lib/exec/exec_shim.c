/* exec_shim.c: the supervisor of one attempt (`lathe exec-shim FD`). The
 * local backend starts it detached from the server (double fork, setsid),
 * so it and its trainer outlive the server. It
 *
 *   1. reads its config (JSON) from descriptor FD until end of file;
 *   2. takes the job's lock (flock on JOB_DIR/lock, never waiting): a held
 *      lock means another attempt of the job runs, and it stops there;
 *   3. starts the trainer in its own process group, never through a shell,
 *      with the lock descriptor inherited (the lock is held while the
 *      trainer or anything it started with the descriptor lives) and
 *      PR_SET_PDEATHSIG (the trainer dies if the supervisor is killed);
 *   4. writes the handle to JOB_DIR/current.json and answers on FD
 *      "ok HANDLE-JSON" (or "busy ...", "invalid ...", "system ...");
 *   5. copies the trainer's stdout and stderr, line by line, into
 *      output.log (rotated by size), watching for out-of-memory messages;
 *      forwards SIGTERM / SIGINT / SIGHUP / SIGQUIT / SIGUSR2 to the group
 *      and turns SIGUSR1 into SIGKILL of the group;
 *   6. when the trainer has ended, kills what is left of its group, and
 *      writes exit.json atomically (file_write_atomic).
 *
 * With a sandbox in its config (exec_sandbox.c), before step 3 it resolves
 * the spec's paths again (a link swapped after submission refuses the
 * start), makes the attempt's cgroup, gives the checkpoint and work
 * folders to the trainer's user, and its child enters the namespaces and
 * the new root before the trainer runs (exec_sandbox_child); the cgroup
 * is removed at the end. Where the system cannot make a sandbox, a
 * required one fails the start and an optional one (the built-in trainer
 * in auto mode) is skipped, said in shim.log and the handle.
 */
#include "exec_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SHIM_LINE_MAX (64 * 1024) /* longer lines are broken */
#define SHIM_DRAIN_MS 5000        /* after the trainer ends, wait this long for its output */

typedef struct shim_cfg {
    char **argv, **env;
    size_t argc, n_env;
    char *job_dir, *work_dir, *checkpoint_dir;
    char *trainer_dir; /* the trainer's cwd (the work folder); default work_dir */
    bool has_sandbox;
    exec_sandbox_cfg sandbox;
    int attempt;
    long long log_max;
    int log_keep;
    int *no_retry;
    size_t n_no_retry;
} shim_cfg;

/* The rotating output log. */
typedef struct shim_log {
    char *path;
    int fd;
    long long size, max;
    int keep;
    bool failed; /* a write failed (reported once in shim.log) */
} shim_log;

/* One output pipe, assembled into lines. */
typedef struct shim_stream {
    int fd; /* -1 at end of file */
    char *buf;
    size_t len;
} shim_stream;

typedef struct shim {
    shim_cfg cfg;
    shim_log log;
    shim_stream out, err;
    int sock, lock_fd, sig_fd;
    pid_t child;
    bool child_done;
    long line_no;
    int oom_kills_start;
    exec_exit_record rec;
    /* the sandbox, when the config has one */
    bool sandboxed;       /* it is applied */
    char sandbox_note[1280]; /* what was applied, or why not */
    char *root_dir;       /* the new root's mount point (removed at the end) */
    exec_cgroup cg;
} shim;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- config ---- */

static char **str_array(json_t *a, size_t *n)
{
    *n = json_is_array(a) ? json_array_size(a) : 0;
    char **out = xcalloc(*n + 1, sizeof *out);
    for (size_t i = 0; i < *n; i++) {
        const char *s = json_string_value(json_array_get(a, i));
        out[i] = xstrdup(s ? s : "");
    }
    return out;
}

static bool cfg_parse(const char *text, shim_cfg *c, char *err, size_t errsz)
{
    json_error_t je;
    json_t *o = json_loads(text, 0, &je);
    if (!json_is_object(o)) {
        snprintf(err, errsz, "config is not a JSON object: %s", je.text);
        json_decref(o);
        return false;
    }
    c->argv = str_array(json_object_get(o, "argv"), &c->argc);
    c->env = str_array(json_object_get(o, "env"), &c->n_env);
    const char *jd = exec_json_str(o, "job_dir"), *wd = exec_json_str(o, "work_dir");
    const char *ck = exec_json_str(o, "checkpoint_dir");
    c->job_dir = jd ? xstrdup(jd) : NULL;
    c->work_dir = wd ? xstrdup(wd) : NULL;
    c->checkpoint_dir = ck ? xstrdup(ck) : NULL;
    const char *td = exec_json_str(o, "trainer_dir");
    c->trainer_dir = td ? xstrdup(td) : wd ? xstrdup(wd) : NULL;
    json_t *sbx = json_object_get(o, "sandbox");
    if (sbx && !json_is_null(sbx)) {
        if (!exec_sandbox_parse(sbx, &c->sandbox, err, errsz)) {
            json_decref(o);
            return false;
        }
        c->has_sandbox = true;
    }
    c->attempt = (int)exec_json_num(o, "attempt", 0);
    c->log_max = (long long)exec_json_num(o, "log_max_bytes", 64 << 20);
    c->log_keep = (int)exec_json_num(o, "log_keep", 3);
    json_t *codes = json_object_get(o, "no_retry_codes");
    size_t n = json_is_array(codes) ? json_array_size(codes) : 0;
    c->no_retry = xcalloc(n + 1, sizeof *c->no_retry);
    for (size_t i = 0; i < n; i++)
        c->no_retry[c->n_no_retry++] = (int)json_integer_value(json_array_get(codes, i));
    json_decref(o);
    if (!c->argc || !c->job_dir || !c->work_dir || c->log_max <= 0 || c->log_keep < 1) {
        snprintf(err, errsz, "config lacks argv, job_dir or work_dir, or has bad log limits");
        return false;
    }
    return true;
}

static void cfg_free(shim_cfg *c)
{
    if (c->argv) str_list_free(c->argv, c->argc + 1);
    if (c->env) str_list_free(c->env, c->n_env + 1);
    free(c->job_dir);
    free(c->work_dir);
    free(c->checkpoint_dir);
    free(c->trainer_dir);
    if (c->has_sandbox) exec_sandbox_cfg_free(&c->sandbox);
    free(c->no_retry);
}

/* Reads the config from the socket until the server shuts its side. */
static char *read_config(int fd)
{
    sb s;
    sb_init(&s);
    char buf[65536];
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        sb_putn(&s, buf, (size_t)r);
        if (s.len > EXEC_CONFIG_MAX) break;
    }
    if (s.len == 0 || s.len > EXEC_CONFIG_MAX) {
        sb_free(&s);
        return NULL;
    }
    return sb_take(&s);
}

/* ---- answering the server ---- */

static void answer(shim *sh, const char *word, const char *text)
{
    if (sh->sock < 0) return;
    char *msg = xasprintf("%s %s\n", word, text);
    size_t len = strlen(msg), off = 0;
    while (off < len) {
        ssize_t w = send(sh->sock, msg + off, len - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        off += (size_t)w;
    }
    free(msg);
    close(sh->sock);
    sh->sock = -1;
}

/* ---- the output log ---- */

static void log_rotate(shim_log *l)
{
    close(l->fd);
    for (int i = l->keep - 1; i >= 1; i--) {
        char *from = xasprintf("%s.%d", l->path, i), *to = xasprintf("%s.%d", l->path, i + 1);
        rename(from, to); /* a missing older file is fine */
        free(from);
        free(to);
    }
    char *first = xasprintf("%s.1", l->path);
    rename(l->path, first);
    free(first);
    l->fd = open(l->path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    l->size = 0;
}

static void log_write(shim_log *l, const char *p, size_t n)
{
    if (l->size > 0 && l->size + (long long)n > l->max) log_rotate(l);
    while (n && l->fd >= 0) {
        ssize_t w = write(l->fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
            if (!l->failed) fprintf(stderr, "exec-shim: writing %s: %s\n", l->path, strerror(errno));
            l->failed = true;
            return;
        }
        p += w;
        n -= (size_t)w;
        l->size += w;
    }
}

/* ---- lines ---- */

static void emit_line(shim *sh, const char *line, size_t len)
{
    sh->line_no++;
    if (!sh->rec.oom_line && exec_line_is_oom(line, len)) {
        sh->rec.oom_line = true;
        sh->rec.oom_line_no = sh->line_no;
        size_t n = len < sizeof sh->rec.oom_text - 1 ? len : sizeof sh->rec.oom_text - 1;
        memcpy(sh->rec.oom_text, line, n);
        sh->rec.oom_text[n] = '\0';
    }
    char *copy = xmalloc(len + 1);
    memcpy(copy, line, len);
    copy[len] = '\n';
    log_write(&sh->log, copy, len + 1);
    free(copy);
}

/* Emits the complete lines of a stream's buffer (all of it at the end). */
static void stream_lines(shim *sh, shim_stream *s, bool final)
{
    size_t start = 0;
    for (size_t i = 0; i < s->len; i++)
        if (s->buf[i] == '\n' || i - start >= SHIM_LINE_MAX) {
            emit_line(sh, s->buf + start, i - start);
            start = s->buf[i] == '\n' ? i + 1 : i;
        }
    if (final && start < s->len) {
        emit_line(sh, s->buf + start, s->len - start);
        start = s->len;
    }
    memmove(s->buf, s->buf + start, s->len - start);
    s->len -= start;
}

static void stream_read(shim *sh, shim_stream *s)
{
    s->buf = xrealloc(s->buf, s->len + 65536 + 1);
    ssize_t r = read(s->fd, s->buf + s->len, 65536);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (r <= 0) {
        close(s->fd);
        s->fd = -1;
        stream_lines(sh, s, true);
        return;
    }
    s->len += (size_t)r;
    stream_lines(sh, s, false);
}

/* ---- the trainer ---- */

/* In the child between fork and exec (the supervisor has one thread, so
 * the sandbox's setup may allocate). */
static void child_exec(const shim *sh, const char *prog, int out_w, int err_w, int errpipe)
{
    pid_t parent = getppid();
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127); /* the supervisor died already */
    int e = 0;
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(out_w, 1) < 0 || dup2(err_w, 2) < 0 ||
        fcntl(sh->lock_fd, F_SETFD, 0) != 0)
        exec_spawn_fail(errpipe, errno, "preparing the trainer's descriptors", NULL);
    if (devnull > 2) close(devnull);
    if (sh->sandboxed) {
        exec_sandbox_run r = {
            .sb = &sh->cfg.sandbox.sb, .root_dir = sh->root_dir,
            .trainer_dir = sh->cfg.trainer_dir, .prog = prog, .argv = sh->cfg.argv,
            .env = sh->cfg.env, .out_w = 1, .err_w = 2, .errpipe = errpipe,
            .lock_fd = sh->lock_fd, .cgroup = sh->cg.n ? &sh->cg : NULL,
            .gpus = sh->cfg.sandbox.gpus, .memory_in_cgroup = sh->cg.memory_limited};
        exec_sandbox_child(&r);
    }
    if (chdir(sh->cfg.trainer_dir) != 0) e = errno;
    if (!e) {
        sigset_t none;
        sigemptyset(&none);
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        for (int sig = 1; sig < 65; sig++) sigaction(sig, &dfl, NULL);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execve(prog, sh->cfg.argv, sh->cfg.env);
        exec_spawn_fail(errpipe, errno, "running the trainer", NULL);
    }
    exec_spawn_fail(errpipe, e, "chdir", sh->cfg.trainer_dir);
}

/* A pipe whose ends close on exec (the supervisor has one thread, so
 * setting the flag after pipe() races with nothing). */
static int pipe_cloexec(int p[2])
{
    if (pipe(p) != 0) return -1;
    fcntl(p[0], F_SETFD, FD_CLOEXEC);
    fcntl(p[1], F_SETFD, FD_CLOEXEC);
    return 0;
}

/* Starts the trainer; 0, or an errno value (the exec's) with *what set
 * (into sh's buffer). */
static int spawn(shim *sh, const char *prog, const char **what)
{
    static exec_spawn_msg msg;
    int outp[2], errp[2], xp[2];
    *what = "creating pipes";
    if (pipe_cloexec(outp) != 0) return errno;
    if (pipe_cloexec(errp) != 0 || pipe_cloexec(xp) != 0) return errno;
    *what = "fork";
    pid_t pid = fork();
    if (pid < 0) return errno;
    if (pid == 0) child_exec(sh, prog, outp[1], errp[1], xp[1]);
    setpgid(pid, pid); /* both sides, so the group exists before any signal */
    close(outp[1]);
    close(errp[1]);
    close(xp[1]);
    memset(&msg, 0, sizeof msg);
    ssize_t r;
    while ((r = read(xp[0], &msg, sizeof msg)) < 0 && errno == EINTR) {
    }
    close(xp[0]);
    sh->out.fd = outp[0];
    sh->err.fd = errp[0];
    if (r == (ssize_t)sizeof msg) { /* the exec failed: collect the child */
        waitpid(pid, NULL, 0);
        msg.what[sizeof msg.what - 1] = '\0';
        *what = msg.what;
        return msg.err ? msg.err : EIO;
    }
    sh->child = pid;
    return 0;
}

/* ---- signals ---- */

static int signal_fd(void)
{
    sigset_t set;
    sigemptyset(&set);
    int sigs[] = {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    /* An ignored signal never reaches a signalfd, and the server's
     * dispositions came through exec: take them back to the default. */
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        signal(sigs[i], SIG_DFL);
        sigaddset(&set, sigs[i]);
    }
    sigprocmask(SIG_SETMASK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

/* The trainer ended (it is a zombie, so its group id cannot be reused):
 * kill what is left of its group, then collect it. */
static void child_ended(shim *sh)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(P_PID, (id_t)sh->child, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == 0)
        return;
    kill(-sh->child, SIGKILL);
    int status;
    if (waitpid(sh->child, &status, 0) != sh->child) return;
    sh->child_done = true;
    sh->rec.ended_at = now_s();
    sh->rec.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    sh->rec.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

static void on_signal(shim *sh)
{
    struct signalfd_siginfo si;
    while (read(sh->sig_fd, &si, sizeof si) == sizeof si) {
        int sig = (int)si.ssi_signo;
        if (sig == SIGCHLD) {
            if (!sh->child_done) child_ended(sh);
            continue;
        }
        if (sh->child_done) continue;
        if (sig == EXEC_SHIM_KILL_SIGNAL) {
            sh->rec.kill_sent = true;
            kill(-sh->child, SIGKILL);
        } else {
            if (sig == SIGTERM || sig == SIGINT) sh->rec.term_sent = true;
            kill(-sh->child, sig);
        }
    }
}

/* Copies output and handles signals until the trainer has ended and its
 * output is drained (or SHIM_DRAIN_MS after its end, when something it left
 * behind still holds the pipes). */
static void run_loop(shim *sh)
{
    double drain_until = 0;
    while (!sh->child_done || sh->out.fd >= 0 || sh->err.fd >= 0) {
        struct pollfd p[3] = {{sh->out.fd, POLLIN, 0}, {sh->err.fd, POLLIN, 0},
                              {sh->sig_fd, POLLIN, 0}};
        int timeout = -1;
        if (sh->child_done) {
            if (drain_until == 0) drain_until = now_s() + SHIM_DRAIN_MS / 1000.0;
            double left = drain_until - now_s();
            if (left <= 0) break;
            timeout = (int)(left * 1000) + 1;
        }
        int n = poll(p, 3, timeout);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        if (p[0].revents) stream_read(sh, &sh->out);
        if (p[1].revents) stream_read(sh, &sh->err);
        if (p[2].revents) on_signal(sh);
        /* A child that ended before the signal mask was set sends nothing. */
        if (!sh->child_done && sh->out.fd < 0 && sh->err.fd < 0) child_ended(sh);
    }
    if (sh->out.len) stream_lines(sh, &sh->out, true);
    if (sh->err.len) stream_lines(sh, &sh->err, true);
}

/* ---- setup ---- */

static void redirect_own_output(const char *work_dir)
{
    char *path = path_join(work_dir, EXEC_SHIM_LOG);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    free(path);
    if (fd < 0) return;
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
}

static bool take_lock(shim *sh)
{
    char *path = path_join(sh->cfg.job_dir, EXEC_LOCK_FILE);
    sh->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    free(path);
    if (sh->lock_fd < 0) return false;
    return flock(sh->lock_fd, LOCK_EX | LOCK_NB) == 0;
}

/* Writes the handle beside the attempt and as the job's current one. */
static char *publish_handle(shim *sh)
{
    exec_local_desc d;
    memset(&d, 0, sizeof d);
    d.job_dir = sh->cfg.job_dir;
    d.work_dir = sh->cfg.work_dir;
    d.log_path = sh->log.path;
    d.checkpoint_dir = sh->cfg.checkpoint_dir;
    d.attempt = sh->cfg.attempt;
    d.started_at = sh->rec.started_at;
    exec_boot_id(d.ids.boot_id, sizeof d.ids.boot_id);
    d.ids.shim_pid = (int)getpid();
    d.ids.shim_start = exec_proc_start_time(d.ids.shim_pid);
    d.ids.trainer_pid = (int)sh->child;
    d.ids.trainer_start = exec_proc_start_time((int)sh->child);
    d.no_retry = sh->cfg.no_retry;
    d.n_no_retry = sh->cfg.n_no_retry;
    if (sh->cfg.has_sandbox) {
        d.sandbox_set = true;
        d.sandboxed = sh->sandboxed;
        d.sandbox_uid = sh->sandboxed ? sh->cfg.sandbox.sb.uid : -1;
        d.sandbox_gid = sh->sandboxed ? sh->cfg.sandbox.sb.gid : -1;
        d.sandbox_note = sh->sandbox_note;
    }
    char *json = exec_local_desc_json(&d);
    char *beside = path_join(sh->cfg.work_dir, EXEC_HANDLE_FILE);
    char *current = path_join(sh->cfg.job_dir, EXEC_CURRENT_FILE);
    int e1 = file_write_atomic(beside, json, strlen(json));
    int e2 = file_write_atomic(current, json, strlen(json));
    if (e1 || e2) fprintf(stderr, "exec-shim: writing the handle: %s\n", strerror(e1 ? e1 : e2));
    free(beside);
    free(current);
    return json;
}

static void write_exit(shim *sh)
{
    int end = exec_cgroup_oom_kills();
    sh->rec.oom_kills = end >= 0 && sh->oom_kills_start >= 0 ? end - sh->oom_kills_start : -1;
    if (sh->cg.memory_dir) sh->rec.oom_kills = exec_cgroup_oom_count(&sh->cg); /* new: from 0 */
    char *json = exec_exit_record_json(&sh->rec);
    char *path = path_join(sh->cfg.work_dir, EXEC_EXIT_FILE);
    int e = file_write_atomic(path, json, strlen(json));
    if (e) fprintf(stderr, "exec-shim: writing %s: %s\n", path, strerror(e));
    free(path);
    free(json);
}

/* The sandbox's preparations in the supervisor: the re-check of the
 * spec's paths, whether the system can make one, the folders the trainer
 * writes given to its user, the cgroup. False after answering the server. */
static bool prepare_sandbox(shim *sh, char *err, size_t errsz)
{
    const exec_sandbox *box = &sh->cfg.sandbox.sb;
    if (!exec_sandbox_recheck(box, sh->cfg.job_dir, err, errsz)) {
        answer(sh, "invalid", err);
        return false;
    }
    char why[256];
    bool can = exec_sandbox_probe(why, sizeof why);
    if (!can && box->required) {
        snprintf(err, errsz, "the trainer must run in the sandbox, and this machine cannot "
                             "make one (%s)", why);
        answer(sh, "system", err);
        return false;
    }
    /* the folders it writes: real folders (a link there is refused), its user's */
    const char *mkd[] = {sh->cfg.trainer_dir, sh->cfg.checkpoint_dir};
    for (size_t i = 0; i < 2; i++) {
        struct stat st;
        int e = mkd[i] ? exec_mkdirs(mkd[i], 0755) : 0;
        if (!e && mkd[i] && (lstat(mkd[i], &st) != 0 || !S_ISDIR(st.st_mode))) e = ENOTDIR;
        if (!e && can && mkd[i] && (box->uid >= 0 || box->gid >= 0))
            e = exec_chown_tree(mkd[i], box->uid, box->gid);
        if (e) {
            snprintf(err, errsz, "preparing %s for the trainer: %s", mkd[i], strerror(e));
            answer(sh, "system", err);
            return false;
        }
    }
    if (!can) {
        snprintf(sh->sandbox_note, sizeof sh->sandbox_note,
                 "not sandboxed: this machine cannot make a sandbox (%s)", why);
        fprintf(stderr, "exec-shim: %s\n", sh->sandbox_note);
        return true;
    }
    sh->root_dir = path_join(sh->cfg.work_dir, ".root");
    if (mkdir(sh->root_dir, 0755) != 0 && errno != EEXIST) {
        snprintf(err, errsz, "cannot create %s: %s", sh->root_dir, strerror(errno));
        answer(sh, "system", err);
        return false;
    }
    if (box->cgroup != TOGGLE_OFF) {
        char name[64];
        snprintf(name, sizeof name, "lathe-%d-%d", (int)getpid(), sh->cfg.attempt);
        exec_cgroup_make(&sh->cg, name, box->memory, box->processes);
        bool enough = sh->cg.n > 0 && (box->memory <= 0 || sh->cg.memory_limited) &&
                      (box->processes <= 0 || sh->cg.pids_limited);
        if (box->cgroup == TOGGLE_ON && !enough) {
            snprintf(err, errsz, "the sandbox's cgroup is required (cgroup: true) and %s%s",
                     sh->cg.n ? "its limits could not be written: " : "", sh->cg.note);
            exec_cgroup_remove(&sh->cg);
            answer(sh, "system", err);
            return false;
        }
    }
    sh->sandboxed = true;
    char uid[32] = "the supervisor's", gid[32] = "the supervisor's";
    if (box->uid >= 0) snprintf(uid, sizeof uid, "%lld", box->uid);
    if (box->gid >= 0) snprintf(gid, sizeof gid, "%lld", box->gid);
    snprintf(sh->sandbox_note, sizeof sh->sandbox_note,
             "sandboxed: uid %s, gid %s; %s; memory %s, processes %s%s", uid, gid,
             box->cgroup == TOGGLE_OFF ? "no cgroup (cgroup: false)" : sh->cg.note,
             box->memory <= 0 ? "unlimited"
             : sh->cg.memory_limited ? "limited by the cgroup"
             : sh->cfg.sandbox.gpus ? "unlimited (a GPU job gets no RLIMIT_AS)"
                                    : "limited by RLIMIT_AS",
             box->processes <= 0 ? "unlimited"
             : sh->cg.pids_limited ? "limited by the cgroup and RLIMIT_NPROC"
                                   : "limited by RLIMIT_NPROC",
             "");
    fprintf(stderr, "exec-shim: %s\n", sh->sandbox_note);
    return true;
}

/* Everything up to the running trainer; false after answering the server. */
static bool start(shim *sh)
{
    char err[1536];
    if (!take_lock(sh)) {
        snprintf(err, sizeof err, "another attempt of this job runs (%s/%s is locked)",
                 sh->cfg.job_dir, EXEC_LOCK_FILE);
        answer(sh, "busy", err);
        return false;
    }
    if (sh->cfg.has_sandbox && !prepare_sandbox(sh, err, sizeof err)) return false;
    char *prog = exec_find_program(sh->cfg.argv[0], sh->cfg.env);
    if (!prog) {
        snprintf(err, sizeof err, "cannot run '%s': %s", sh->cfg.argv[0], strerror(errno));
        answer(sh, "invalid", err);
        return false;
    }
    sh->log.path = path_join(sh->cfg.work_dir, EXEC_LOG_FILE);
    sh->log.max = sh->cfg.log_max;
    sh->log.keep = sh->cfg.log_keep;
    sh->log.fd = open(sh->log.path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    struct stat st;
    if (sh->log.fd >= 0 && fstat(sh->log.fd, &st) == 0) sh->log.size = st.st_size;
    sh->sig_fd = signal_fd();
    sh->oom_kills_start = exec_cgroup_oom_kills();
    sh->rec.started_at = now_s();
    const char *what = "";
    int e = sh->log.fd < 0 ? errno : sh->sig_fd < 0 ? errno : spawn(sh, prog, &what);
    if (e) {
        snprintf(err, sizeof err, "cannot run '%s': %s%s%s", prog, what, *what ? ": " : "",
                 strerror(e));
        answer(sh, e == ENOENT || e == EACCES || e == ENOEXEC ? "invalid" : "system", err);
        free(prog);
        return false;
    }
    free(prog);
    char *json = publish_handle(sh);
    answer(sh, "ok", json);
    free(json);
    return true;
}

static void shim_free(shim *sh)
{
    if (sh->lock_fd >= 0) close(sh->lock_fd);
    if (sh->sig_fd >= 0) close(sh->sig_fd);
    if (sh->log.fd >= 0) close(sh->log.fd);
    if (sh->out.fd >= 0) close(sh->out.fd);
    if (sh->err.fd >= 0) close(sh->err.fd);
    free(sh->out.buf);
    free(sh->err.buf);
    free(sh->log.path);
    if (sh->cg.n) exec_cgroup_remove(&sh->cg);
    if (sh->root_dir) rmdir(sh->root_dir);
    free(sh->root_dir);
    cfg_free(&sh->cfg);
}

/* The descriptor argument: digits naming an open socket (a person typing
 * `lathe exec-shim 0` must not leave it waiting on the terminal). */
static int socket_arg(const char *s)
{
    char *end;
    long fd = strtol(s, &end, 10);
    struct stat st;
    if (*s < '0' || *s > '9' || *end || fd < 0 || fd > 1 << 20 || fstat((int)fd, &st) != 0 ||
        !S_ISSOCK(st.st_mode))
        return -1;
    return (int)fd;
}

int exec_shim_main(int argc, char **argv)
{
    int fd = argc == 2 ? socket_arg(argv[1]) : -1;
    if (fd < 0) {
        fprintf(stderr, "usage: lathe exec-shim FD\n"
                        "FD must be the socket the local executor passes; this command is not "
                        "run by hand (see docs/executors.md)\n");
        return LT_EXIT_USAGE;
    }
    /* never the trainer's: it could answer the server in our place */
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    shim sh;
    memset(&sh, 0, sizeof sh);
    sh.sock = fd;
    sh.lock_fd = sh.sig_fd = sh.log.fd = sh.out.fd = sh.err.fd = -1;
    char *text = read_config(sh.sock);
    char err[512];
    if (!text || !cfg_parse(text, &sh.cfg, err, sizeof err)) {
        if (!text) snprintf(err, sizeof err, "no config on descriptor %s", argv[1]);
        answer(&sh, "system", err);
        free(text);
        cfg_free(&sh.cfg);
        return LT_EXIT_INVALID;
    }
    free(text);
    redirect_own_output(sh.cfg.work_dir);
    if (start(&sh)) {
        run_loop(&sh);
        /* The lock goes first: once exit.json says the attempt ended, the
         * next one can start (the trainer's group is dead by now). */
        close(sh.lock_fd);
        sh.lock_fd = -1;
        write_exit(&sh);
    }
    shim_free(&sh);
    return LT_EXIT_OK;
}
