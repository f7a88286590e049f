/* exec_slurm.c: the Slurm backend (docs/slurm.md). Each attempt is one
 * Slurm batch job: submitted with sbatch from an argv (exec_slurm_render),
 * watched through one `squeue --json` per stateInterval for all of the
 * backend's jobs (and one `sacct --json` for those squeue no longer
 * shows), stopped with `scancel --batch --signal=TERM` then `scancel`.
 * The job's --output is the attempt's output.log in the job's folder
 * (shared storage: every node sees it), read by the same reader and tally
 * as a local attempt's.
 *
 * Never twice: before sbatch, the backend looks for a Slurm job of the
 * same name and comment (a server killed after its sbatch and before it
 * stored the handle) and takes that one. The handle (JSON) holds the Slurm
 * job id; JOB_DIR/current.json holds the newest handle for exec_find.
 *
 * Commands run with posix_spawn from argv arrays (never a shell), with
 * stdin /dev/null, stdout and stderr read up to a bound, and are killed
 * past commandTimeout. */
#define _GNU_SOURCE /* pipe2 */
#include "exec_internal.h"
#include "exec_slurm_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define SLURM_OUT_MAX (256u << 20)
#define POLL_READ_MAX (4u << 20)
/* seconds a job may be missing from squeue and sacct before it is lost */
#define SLURM_GONE_AFTER 120.0
/* JOB_DIR/slurm-array.json: which task of which job array an attempt is */
#define ARRAY_MARK_FILE "slurm-array.json"

typedef struct slurm_handle slurm_handle;

typedef struct slurm_be {
    exec_backend be;
    const spec_slurm *cfg;
    char *lathe;            /* what the batch script execs */
    /* the jobs squeue showed at its last call */
    slurm_job *jobs;
    size_t n_jobs;
    double cache_at;        /* monotonic seconds; 0 = never */
    double turn_now;        /* the poll time of the turn that refreshed last */
    bool cache_ok;
    char cache_err[256];
    slurm_handle *handles;  /* every live handle (for the sacct of vanished jobs) */
    exec_slurm_counts counts;
} slurm_be;

struct slurm_handle {
    exec_handle h;
    slurm_handle *next, *prev;
    uint64_t id;            /* the Slurm job id; of the array when task >= 0 */
    int task;               /* the task of a job array; -1 = a job of its own */
    char *name, *comment, *checkpoint_dir;
    int *no_retry;
    size_t n_no_retry;
    double submitted_at;
    double term_at, kill_at;
    bool term_sent, kill_sent;
    int restarts;           /* Slurm's restart count when the attempt started */
    double grace;           /* the --signal's lead on the time limit */
    double missing_since;   /* when squeue first did not show it (0 = it did) */
    exec_log_reader log;
    exec_tally tally;
    double poll_now;
    slurm_job gone;         /* sacct's record once squeue no longer shows it */
    bool have_gone;
    bool ended;
    exec_status final;
};

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- running a command ---- */
static char *tool_path(const slurm_be *b, const char *tool)
{
    return b->cfg->bin_dir ? xasprintf("%s/%s", b->cfg->bin_dir, tool) : xstrdup(tool);
}

/* Runs argv (argv[0] a tool name: sbatch, squeue, ...), its stdout into
 * out and stderr into errout (each bounded). Returns the exit code, or -1
 * with err set when it could not run, was killed, or timed out. */
static int run_tool(slurm_be *b, char **argv, sb *out, sb *errout, char *err, size_t errsz)
{
    char *prog = tool_path(b, argv[0]);
    int po[2] = {-1, -1}, pe[2] = {-1, -1};
    if (pipe2(po, O_CLOEXEC) != 0 || pipe2(pe, O_CLOEXEC) != 0) {
        snprintf(err, errsz, "pipe: %s", strerror(errno));
        if (po[0] >= 0) {
            close(po[0]);
            close(po[1]);
        }
        free(prog);
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, po[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
    char *saved0 = argv[0];
    argv[0] = prog;
    pid_t pid;
    int rc = posix_spawnp(&pid, prog, &fa, NULL, argv, environ);
    argv[0] = saved0;
    posix_spawn_file_actions_destroy(&fa);
    close(po[1]);
    close(pe[1]);
    if (rc != 0) {
        snprintf(err, errsz, "%s: %s", prog, strerror(rc));
        close(po[0]);
        close(pe[0]);
        free(prog);
        return -1;
    }
    double deadline = mono() + (b->cfg->command_timeout > 0 ? b->cfg->command_timeout : 30);
    struct pollfd fds[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
    sb *dst[2] = {out, errout};
    bool timed_out = false;
    int open_fds = 2;
    char buf[65536];
    while (open_fds > 0) {
        double left = deadline - mono();
        if (left <= 0) {
            timed_out = true;
            break;
        }
        int pr = poll(fds, 2, (int)(left * 1000) + 1);
        if (pr < 0 && errno == EINTR) continue;
        if (pr < 0) break;
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            ssize_t r = read(fds[i].fd, buf, sizeof buf);
            if (r > 0) {
                if (dst[i] && dst[i]->len + (size_t)r <= SLURM_OUT_MAX) sb_putn(dst[i], buf, (size_t)r);
            } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
                close(fds[i].fd);
                fds[i].fd = -1;
                open_fds--;
            }
        }
    }
    for (int i = 0; i < 2; i++)
        if (fds[i].fd >= 0) close(fds[i].fd);
    if (timed_out) kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (timed_out) {
        snprintf(err, errsz, "%s did not answer within %.0fs (slurm.commandTimeout)", prog,
                 b->cfg->command_timeout);
        free(prog);
        return -1;
    }
    free(prog);
    if (WIFSIGNALED(status)) {
        snprintf(err, errsz, "%s was killed by signal %d", argv[0], WTERMSIG(status));
        return -1;
    }
    return WEXITSTATUS(status);
}

/* The first line of a tool's stderr, for messages. */
static void first_line(const sb *s, char *out, size_t outsz)
{
    const char *t = sb_str(s);
    size_t n = strcspn(t, "\n");
    snprintf(out, outsz, "%.*s", (int)(n > 200 ? 200 : n), t);
}

/* ---- the state of every job ---- */
static slurm_job *cache_find(slurm_be *b, uint64_t id)
{
    for (size_t i = 0; i < b->n_jobs; i++)
        if (b->jobs[i].id == id) return &b->jobs[i];
    return NULL;
}

static slurm_job *cache_find_name(slurm_be *b, const char *name, const char *comment)
{
    slurm_job *best = NULL;
    for (size_t i = 0; i < b->n_jobs; i++) {
        slurm_job *j = &b->jobs[i];
        if (!j->name || strcmp(j->name, name) != 0) continue;
        if (comment && (!j->comment || strcmp(j->comment, comment) != 0)) continue;
        if (!best || j->id > best->id) best = j;
    }
    return best;
}

/* The record of a handle's job: its own, or its array task's. */
static slurm_job *find_job(slurm_be *b, const struct slurm_handle *h);

/* "ID" or, for an array's task, "ID_TASK" (what scancel and sacct take). */
static void job_ref(const struct slurm_handle *h, char *out, size_t outsz);

/* Jobs of live handles that squeue no longer shows: one sacct for all. */
static void sacct_missing(slurm_be *b)
{
    sb ids;
    sb_init(&ids);
    for (slurm_handle *h = b->handles; h; h = h->next)
        if (!h->ended && !h->have_gone && !find_job(b, h) && h->submitted_at < wall() - 5) {
            char ref[48];
            job_ref(h, ref, sizeof ref);
            if (ids.len) sb_putc(&ids, ',');
            sb_puts(&ids, ref);
        }
    if (!ids.len) {
        sb_free(&ids);
        return;
    }
    char *argv[] = {"sacct", "--json", "-j", (char *)sb_str(&ids), NULL};
    sb out, eo;
    sb_init(&out);
    sb_init(&eo);
    char err[256];
    b->counts.sacct++;
    int rc = run_tool(b, argv, &out, &eo, err, sizeof err);
    slurm_job *jobs = NULL;
    size_t n = 0;
    if (rc == 0 && slurm_parse_sacct_json(sb_str(&out), out.len, &jobs, &n, err, sizeof err)) {
        for (slurm_handle *h = b->handles; h; h = h->next) {
            if (h->ended || h->have_gone || find_job(b, h)) continue;
            for (size_t i = 0; i < n; i++) {
                bool mine = h->task < 0 ? jobs[i].id == h->id && !jobs[i].array_id
                                        : jobs[i].array_id == h->id && jobs[i].array_task == h->task;
                if (!mine || !slurm_state_final(jobs[i].state)) continue;
                h->gone = jobs[i];
                h->gone.name = jobs[i].name ? xstrdup(jobs[i].name) : NULL;
                h->gone.comment = NULL;
                h->gone.reason = jobs[i].reason ? xstrdup(jobs[i].reason) : NULL;
                h->gone.nodes = jobs[i].nodes ? xstrdup(jobs[i].nodes) : NULL;
                h->gone.array_tasks = NULL;
                h->have_gone = true;
            }
        }
    }
    slurm_jobs_free(jobs, n);
    sb_free(&out);
    sb_free(&eo);
    sb_free(&ids);
}

/* squeue --json now; the cache keeps the old view when it fails. */
static bool refresh(slurm_be *b, char *err, size_t errsz)
{
    char *argv[] = {"squeue", "--json", NULL};
    sb out, eo;
    sb_init(&out);
    sb_init(&eo);
    b->counts.squeue++;
    int rc = run_tool(b, argv, &out, &eo, err, errsz);
    bool ok = false;
    if (rc > 0) {
        char line[220];
        first_line(&eo, line, sizeof line);
        snprintf(err, errsz, "squeue exited with %d: %s", rc, line);
    } else if (rc == 0) {
        slurm_job *jobs;
        size_t n;
        if (slurm_parse_squeue_json(sb_str(&out), out.len, &jobs, &n, err, errsz)) {
            slurm_jobs_free(b->jobs, b->n_jobs);
            b->jobs = jobs;
            b->n_jobs = n;
            ok = true;
        }
    }
    sb_free(&out);
    sb_free(&eo);
    b->cache_at = mono();
    b->cache_ok = ok;
    if (!ok) snprintf(b->cache_err, sizeof b->cache_err, "%s", err);
    if (ok) sacct_missing(b);
    return ok;
}

/* One squeue per controller turn: not again for the same `now` (every
 * poll of a turn passes the turn's time; 0 = no turn, from start, find,
 * ready), and at most one per stateInterval. */
static void refresh_if_stale(slurm_be *b, double now)
{
    double iv = b->cfg->state_interval > 0 ? b->cfg->state_interval : 0;
    if (b->cache_at > 0 && ((now > 0 && now == b->turn_now) || mono() - b->cache_at < iv)) return;
    char err[256];
    refresh(b, err, sizeof err);
    if (now > 0) b->turn_now = now;
}

static bool sl_ready(exec_backend *be, char *why, size_t whysz)
{
    slurm_be *b = (slurm_be *)be;
    refresh_if_stale(b, 0);
    if (!b->cache_ok && why) snprintf(why, whysz, "Slurm cannot be reached: %s", b->cache_err);
    return b->cache_ok;
}

/* ---- handles ---- */
static slurm_job *find_job(slurm_be *b, const slurm_handle *h)
{
    return h->task < 0 ? cache_find(b, h->id) : slurm_find_task(b->jobs, b->n_jobs, h->id, h->task);
}

static void job_ref(const slurm_handle *h, char *out, size_t outsz)
{
    if (h->task < 0) snprintf(out, outsz, "%llu", (unsigned long long)h->id);
    else snprintf(out, outsz, "%llu_%d", (unsigned long long)h->id, h->task);
}

static void link_handle(slurm_be *b, slurm_handle *h)
{
    h->next = b->handles;
    h->prev = NULL;
    if (b->handles) b->handles->prev = h;
    b->handles = h;
}

static char *handle_text(const slurm_handle *h)
{
    json_t *nr = json_array();
    for (size_t i = 0; i < h->n_no_retry; i++) json_array_append_new(nr, json_integer(h->no_retry[i]));
    json_t *o = json_pack("{s:s, s:i, s:I, s:s, s:s, s:s, s:i, s:s, s:s, s:f, s:f, s:o, s:i, s:f, s:f, "
                          "s:b, s:b, s:f}",
                          "backend", "slurm", "version", 1, "slurm_job_id", (json_int_t)h->id,
                          "name", h->name, "comment", h->comment, "job_dir", h->h.job_dir, "attempt",
                          h->h.attempt, "work_dir", h->h.work_dir, "log_path", h->h.log_path,
                          "started_at", h->h.started_at, "submitted_at", h->submitted_at,
                          "no_retry", nr, "restarts", h->restarts, "term_at", h->term_at, "kill_at",
                          h->kill_at, "term_sent", h->term_sent, "kill_sent", h->kill_sent, "grace", h->grace);
    if (h->checkpoint_dir) json_object_set_new(o, "checkpoint_dir", json_string(h->checkpoint_dir));
    if (h->task >= 0) json_object_set_new(o, "array_task", json_integer(h->task));
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    return s;
}

static char *sl_handle_json(const exec_handle *eh)
{
    return handle_text((const slurm_handle *)eh);
}

static slurm_handle *new_handle(slurm_be *b, const char *job_dir, int attempt)
{
    slurm_handle *h = xcalloc(1, sizeof *h);
    h->h.backend = &b->be;
    h->h.job_dir = xstrdup(job_dir);
    h->h.attempt = attempt;
    h->task = -1;
    h->h.work_dir = xasprintf("%s/attempt-%d", job_dir, attempt);
    h->h.log_path = xasprintf("%s/%s", h->h.work_dir, EXEC_LOG_FILE);
    exec_tally_init(&h->tally);
    exec_log_reader_init(&h->log, h->h.log_path);
    return h;
}

/* Writes the handle into the attempt's folder and JOB_DIR/current.json. */
static void save_handle(const slurm_handle *h)
{
    char *text = handle_text(h);
    char *p1 = path_join(h->h.work_dir, EXEC_HANDLE_FILE);
    char *p2 = path_join(h->h.job_dir, EXEC_CURRENT_FILE);
    file_write_atomic(p1, text, strlen(text));
    file_write_atomic(p2, text, strlen(text));
    free(p1);
    free(p2);
    free(text);
}

static void sl_release(exec_handle *eh)
{
    if (!eh) return;
    slurm_handle *h = (slurm_handle *)eh;
    slurm_be *b = (slurm_be *)eh->backend;
    if (h->prev) h->prev->next = h->next;
    else if (b->handles == h) b->handles = h->next;
    if (h->next) h->next->prev = h->prev;
    exec_log_reader_free(&h->log);
    exec_tally_free(&h->tally);
    free(h->gone.name);
    free(h->gone.reason);
    free(h->gone.nodes);
    free(h->name);
    free(h->comment);
    free(h->checkpoint_dir);
    free(h->no_retry);
    free(h->h.job_dir);
    free(h->h.work_dir);
    free(h->h.log_path);
    free(h);
}

static exec_rc sl_attach(exec_backend *be, const char *text, exec_handle **out, char *err,
                         size_t errsz)
{
    slurm_be *b = (slurm_be *)be;
    *out = NULL;
    json_error_t je;
    json_t *o = json_loads(text ? text : "", 0, &je);
    const char *backend = o ? exec_json_str(o, "backend") : NULL;
    const char *dir = o ? exec_json_str(o, "job_dir") : NULL;
    const char *name = o ? exec_json_str(o, "name") : NULL;
    const char *comment = o ? exec_json_str(o, "comment") : NULL;
    json_t *id = o ? json_object_get(o, "slurm_job_id") : NULL;
    int attempt = o ? (int)exec_json_num(o, "attempt", 0) : 0;
    if (!o || !backend || strcmp(backend, "slurm") != 0 || exec_json_num(o, "version", 0) != 1 ||
        !dir || !name || !comment || !json_is_integer(id) || json_integer_value(id) <= 0 ||
        attempt <= 0) {
        snprintf(err, errsz, "not a handle of the Slurm backend (version 1)%s%s", o ? "" : ": ",
                 o ? "" : je.text);
        json_decref(o);
        return EXEC_E_INVALID;
    }
    slurm_handle *h = new_handle(b, dir, attempt);
    h->id = (uint64_t)json_integer_value(id);
    h->name = xstrdup(name);
    h->comment = xstrdup(comment);
    const char *ck = exec_json_str(o, "checkpoint_dir");
    h->checkpoint_dir = ck ? xstrdup(ck) : NULL;
    h->h.started_at = exec_json_num(o, "started_at", 0);
    h->submitted_at = exec_json_num(o, "submitted_at", 0);
    h->restarts = (int)exec_json_num(o, "restarts", 0);
    h->grace = exec_json_num(o, "grace", 0);
    h->term_at = exec_json_num(o, "term_at", 0);
    h->kill_at = exec_json_num(o, "kill_at", 0);
    h->term_sent = json_is_true(json_object_get(o, "term_sent"));
    h->kill_sent = json_is_true(json_object_get(o, "kill_sent"));
    json_t *at = json_object_get(o, "array_task");
    if (json_is_integer(at) && json_integer_value(at) >= 0 && json_integer_value(at) < INT32_MAX)
        h->task = (int)json_integer_value(at);
    json_t *nr = json_object_get(o, "no_retry");
    size_t n = json_array_size(nr);
    h->no_retry = xcalloc(n ? n : 1, sizeof *h->no_retry);
    for (size_t i = 0; i < n; i++)
        if (json_is_integer(json_array_get(nr, i)))
            h->no_retry[h->n_no_retry++] = (int)json_integer_value(json_array_get(nr, i));
    json_decref(o);
    link_handle(b, h);
    *out = &h->h;
    return EXEC_OK;
}

/* The newest attempt of the job in job_dir: its current.json, or a Slurm
 * job whose comment names this folder and a newer attempt (a server killed
 * after its sbatch and before it wrote the handle). */
static exec_rc sl_find(exec_backend *be, const char *job_dir, exec_handle **out, char *err,
                       size_t errsz)
{
    slurm_be *b = (slurm_be *)be;
    *out = NULL;
    char *p = path_join(job_dir, EXEC_CURRENT_FILE);
    char e2[256];
    size_t len;
    char *text = file_read_all(p, 1 << 20, &len, e2, sizeof e2);
    free(p);
    exec_rc rc = EXEC_E_GONE;
    if (text) rc = sl_attach(be, text, out, err, errsz);
    free(text);
    refresh_if_stale(b, 0);
    uint32_t key = slurm_dir_key(job_dir);
    slurm_job *best = NULL;
    int best_attempt = rc == EXEC_OK ? (*out)->attempt : 0;
    for (size_t i = 0; i < b->n_jobs; i++) {
        int a = slurm_comment_attempt(b->jobs[i].comment, key);
        if (a > best_attempt || (a == best_attempt && best && b->jobs[i].id > best->id)) {
            best = &b->jobs[i];
            best_attempt = a;
        }
    }
    /* a task of a job array (its marker is written before the sbatch) */
    char *mp = path_join(job_dir, ARRAY_MARK_FILE);
    char *mt = file_read_all(mp, 1 << 16, &len, e2, sizeof e2);
    free(mp);
    json_t *m = mt ? json_loads(mt, 0, NULL) : NULL;
    free(mt);
    int ma = m ? (int)exec_json_num(m, "attempt", 0) : 0, task = m ? (int)exec_json_num(m, "task", -1) : -1;
    const char *mname = m ? exec_json_str(m, "name") : NULL, *mcomment = m ? exec_json_str(m, "comment") : NULL;
    slurm_job *arr = mname && mcomment && task >= 0 && ma > best_attempt ? cache_find_name(b, mname, mcomment) : NULL;
    if (arr) {
        uint64_t aid = arr->array_id ? arr->array_id : arr->id;
        slurm_job *tj = slurm_find_task(b->jobs, b->n_jobs, aid, task);
        if (*out) sl_release(*out);
        *out = NULL;
        slurm_handle *h = new_handle(b, job_dir, ma);
        h->id = aid;
        h->task = task;
        h->name = xstrdup(mname);
        h->comment = xstrdup(mcomment);
        h->submitted_at = tj && tj->start > 0 ? tj->start : wall();
        h->h.started_at = h->submitted_at;
        h->restarts = tj ? tj->restarts : 0;
        h->checkpoint_dir = path_join(job_dir, "checkpoints");
        h->no_retry = xcalloc(1, sizeof *h->no_retry);
        link_handle(b, h);
        save_handle(h);
        json_decref(m);
        *out = &h->h;
        return EXEC_OK;
    }
    json_decref(m);
    if (!best) {
        if (rc != EXEC_OK) snprintf(err, errsz, "no attempt was started in %s", job_dir);
        return rc;
    }
    if (*out) sl_release(*out);
    *out = NULL;
    slurm_handle *h = new_handle(b, job_dir, best_attempt);
    h->id = best->id;
    h->name = xstrdup(best->name ? best->name : "");
    h->comment = xstrdup(best->comment);
    h->submitted_at = best->start > 0 ? best->start : wall();
    h->h.started_at = h->submitted_at;
    h->restarts = best->restarts;
    h->checkpoint_dir = path_join(job_dir, "checkpoints");
    /* the built-in trainer's "cannot succeed" code is all a lost start
     * request can tell; other trainers fail as retryable */
    h->no_retry = xcalloc(1, sizeof *h->no_retry);
    link_handle(b, h);
    save_handle(h);
    *out = &h->h;
    return EXEC_OK;
}

/* ---- start ---- */
/* Runs sbatch --parsable; the job id into *id. */
static exec_rc run_sbatch(slurm_be *b, char **argv, uint64_t *id, char *err, size_t errsz)
{
    char e3[256];
    sb o, eo;
    sb_init(&o);
    sb_init(&eo);
    b->counts.sbatch++;
    int x = run_tool(b, argv, &o, &eo, e3, sizeof e3);
    char *end = NULL;
    unsigned long long v = x == 0 ? strtoull(sb_str(&o), &end, 10) : 0;
    exec_rc rc = EXEC_OK;
    if (x < 0) {
        snprintf(err, errsz, "sbatch: %s", e3);
        rc = EXEC_E_UNAVAILABLE;
    } else if (x != 0 || v == 0 || !end || (*end && *end != ';' && *end != '\n')) {
        char line[220];
        first_line(eo.len ? &eo : &o, line, sizeof line);
        snprintf(err, errsz, "sbatch refused the job (exit %d): %s", x, line);
        rc = strstr(line, "Unable to contact") || strstr(line, "Socket timed out") ? EXEC_E_UNAVAILABLE
                                                                                   : EXEC_E_INVALID;
    } else {
        *id = v;
    }
    sb_free(&o);
    sb_free(&eo);
    return rc;
}
/* A started attempt's handle, linked and saved. */
static slurm_handle *handle_for(slurm_be *b, const exec_request *req, uint64_t id, int task,
                                const char *name, const char *comment, int restarts)
{
    slurm_handle *h = new_handle(b, req->job_dir, req->attempt);
    h->id = id;
    h->task = task;
    h->name = xstrdup(name);
    h->comment = xstrdup(comment);
    h->checkpoint_dir = req->contract.checkpoint_dir ? xstrdup(req->contract.checkpoint_dir) : NULL;
    h->submitted_at = wall();
    h->h.started_at = h->submitted_at;
    h->restarts = restarts;
    h->grace = req->cluster.grace;
    h->no_retry = xcalloc(req->n_no_retry_codes ? req->n_no_retry_codes : 1, sizeof *h->no_retry);
    for (size_t i = 0; i < req->n_no_retry_codes; i++) h->no_retry[i] = req->no_retry_codes[i];
    h->n_no_retry = req->n_no_retry_codes;
    link_handle(b, h);
    save_handle(h);
    return h;
}

/* A job just submitted, seen as pending until the next squeue (tasks: an
 * array's range; NULL = a job of its own). */
static void pending_record(slurm_be *b, uint64_t id, const char *name, const char *comment,
                           const char *tasks)
{
    b->jobs = xrealloc(b->jobs, (b->n_jobs + 1) * sizeof *b->jobs);
    slurm_job *j = &b->jobs[b->n_jobs++];
    memset(j, 0, sizeof *j);
    j->id = id;
    j->name = xstrdup(name);
    j->comment = xstrdup(comment);
    j->state = SLURM_ST_PENDING;
    snprintf(j->state_name, sizeof j->state_name, "PENDING");
    j->exit_code = -1;
    j->array_task = -1;
    if (tasks) {
        j->array_id = id;
        j->array_tasks = xstrdup(tasks);
    }
}

static exec_rc sl_start(exec_backend *be, const exec_request *req, exec_handle **out, char *err,
                        size_t errsz)
{
    slurm_be *b = (slurm_be *)be;
    *out = NULL;
    if (!req->job_dir || req->attempt <= 0) {
        snprintf(err, errsz, "a start needs the job's folder and an attempt number");
        return EXEC_E_INVALID;
    }
    /* the spec's paths again, right before the submission (a link swapped
     * since the job was accepted is caught) */
    if (req->sandbox && req->sandbox->n_checks &&
        !exec_sandbox_recheck(req->sandbox, req->job_dir, err, errsz))
        return EXEC_E_INVALID;
    exec_slurm_submit sub;
    if (!exec_slurm_render(req, b->cfg, b->lathe, &sub, err, errsz)) return EXEC_E_INVALID;
    char *work = xasprintf("%s/attempt-%d", req->job_dir, req->attempt);
    int e = exec_mkdirs(work, 0755);
    if (!e && req->contract.checkpoint_dir) e = exec_mkdirs(req->contract.checkpoint_dir, 0755);
    if (e) {
        snprintf(err, errsz, "%s: %s", work, strerror(e));
        free(work);
        exec_slurm_submit_free(&sub);
        return EXEC_E_SYSTEM;
    }
    /* never twice: a job of this name and comment that Slurm knows is this
     * attempt (a server killed after its sbatch) */
    refresh_if_stale(b, 0); /* this turn's squeue: it shows what an earlier server submitted */
    if (!b->cache_ok) {
        snprintf(err, errsz, "Slurm cannot be reached: %s", b->cache_err);
        free(work);
        exec_slurm_submit_free(&sub);
        return EXEC_E_UNAVAILABLE;
    }
    slurm_job *prior = cache_find_name(b, sub.name, sub.comment);
    uint64_t id = prior ? prior->id : 0;
    int restarts = prior ? prior->restarts : 0;
    exec_rc rc = EXEC_OK;
    if (!id) {
        if ((e = file_write_atomic(sub.script_path, sub.script, strlen(sub.script))) != 0 ||
            (e = file_write_atomic(sub.step_path, sub.step_json, strlen(sub.step_json))) != 0) {
            snprintf(err, errsz, "%s: %s", sub.step_path, strerror(e));
            rc = EXEC_E_SYSTEM;
        } else {
            chmod(sub.script_path, 0755);
            rc = run_sbatch(b, sub.argv, &id, err, errsz);
        }
    }
    if (rc != EXEC_OK) {
        free(work);
        exec_slurm_submit_free(&sub);
        return rc;
    }
    slurm_handle *h = handle_for(b, req, id, -1, sub.name, sub.comment, restarts);
    if (!prior) pending_record(b, id, sub.name, sub.comment, NULL);
    free(work);
    exec_slurm_submit_free(&sub);
    *out = &h->h;
    return EXEC_OK;
}

/* ---- job arrays ---- */

/* Submits subs (rendered, of reqs) as one job array; the handles into res. */
static void start_array(slurm_be *b, const exec_request *const *reqs, exec_slurm_submit *subs,
                        exec_start_result **res, size_t n)
{
    const exec_cluster_req *k = &reqs[0]->cluster;
    char err[512] = "";
    exec_rc rc = EXEC_OK;
    /* the array's folder: in its first attempt's; task-N links to attempt N's */
    char *dir = xasprintf("%s/attempt-%d/slurm-array", reqs[0]->job_dir, reqs[0]->attempt);
    exec_slurm_array a;
    exec_slurm_array_render(subs, n, k->array_max, k->team, k->experiment, dir, b->lathe, &a);
    int e = exec_mkdirs(dir, 0755);
    for (size_t i = 0; !e && i < n; i++) {
        char *work = xasprintf("%s/attempt-%d", reqs[i]->job_dir, reqs[i]->attempt);
        char *link = xasprintf("%s/task-%zu", dir, i);
        e = exec_mkdirs(work, 0755);
        if (!e && reqs[i]->contract.checkpoint_dir) e = exec_mkdirs(reqs[i]->contract.checkpoint_dir, 0755);
        if (!e) e = file_write_atomic(subs[i].step_path, subs[i].step_json, strlen(subs[i].step_json));
        if (!e) {
            unlink(link);
            if (symlink(work, link) != 0) e = errno;
        }
        /* which task this attempt is, for exec_find after a restart */
        json_t *m = json_pack("{s:i, s:i, s:s, s:s, s:i}", "version", 1, "attempt", reqs[i]->attempt,
                              "name", a.name, "comment", a.comment, "task", (int)i);
        char *mt = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);
        char *mp = path_join(reqs[i]->job_dir, ARRAY_MARK_FILE);
        if (!e) e = file_write_atomic(mp, mt, strlen(mt));
        free(mp);
        free(mt);
        json_decref(m);
        free(work);
        free(link);
    }
    const char *script_path = a.argv[a.argc - 2];
    if (!e) e = file_write_atomic(a.map_path, a.map_json, strlen(a.map_json));
    if (!e) e = file_write_atomic(script_path, a.script, strlen(a.script));
    if (e) {
        snprintf(err, sizeof err, "%s: %s", dir, strerror(e));
        rc = EXEC_E_SYSTEM;
    } else {
        chmod(script_path, 0755);
    }
    /* never twice: an array of this name and comment (the same attempts) */
    slurm_job *prior = rc == EXEC_OK ? cache_find_name(b, a.name, a.comment) : NULL;
    uint64_t id = prior ? (prior->array_id ? prior->array_id : prior->id) : 0;
    if (rc == EXEC_OK && !id) rc = run_sbatch(b, a.argv, &id, err, sizeof err);
    if (rc == EXEC_OK && !prior) {
        char range[48];
        snprintf(range, sizeof range, "0-%zu", n - 1);
        pending_record(b, id, a.name, a.comment, range);
    }
    for (size_t i = 0; i < n; i++) {
        res[i]->rc = rc;
        if (rc != EXEC_OK) {
            snprintf(res[i]->err, sizeof res[i]->err, "%s", err);
            continue;
        }
        slurm_job *pj = prior ? slurm_find_task(b->jobs, b->n_jobs, id, (int)i) : NULL;
        res[i]->h = &handle_for(b, reqs[i], id, (int)i, a.name, a.comment, pj ? pj->restarts : 0)->h;
    }
    exec_slurm_array_free(&a);
    free(dir);
}

/* The attempts of one experiment that start in one turn: one job array
 * for those of the same resources, each other one its own sbatch. */
static void sl_start_many(exec_backend *be, const exec_request *const *reqs, size_t n,
                          exec_start_result *res)
{
    slurm_be *b = (slurm_be *)be;
    exec_slurm_submit *subs = xcalloc(n, sizeof *subs);
    bool *ok = xcalloc(n, sizeof *ok), *done = xcalloc(n, sizeof *done);
    bool slurm_decides = b->cfg->decide && strcmp(b->cfg->decide, "slurm") == 0;
    refresh_if_stale(b, 0);
    for (size_t i = 0; i < n; i++) {
        const exec_request *q = reqs[i];
        ok[i] = slurm_decides && b->cache_ok && q->cluster.array_max > 0 && q->job_dir &&
                q->attempt > 0 && q->cluster.experiment &&
                (!q->sandbox || !q->sandbox->n_checks ||
                 exec_sandbox_recheck(q->sandbox, q->job_dir, res[i].err, sizeof res[i].err)) &&
                exec_slurm_render(q, b->cfg, b->lathe, &subs[i], res[i].err, sizeof res[i].err);
        res[i].err[0] = '\0';
    }
    const exec_request **gq = xcalloc(n, sizeof *gq);
    exec_slurm_submit *gs = xcalloc(n, sizeof *gs);
    exec_start_result **gr = xcalloc(n, sizeof *gr);
    for (size_t i = 0; i < n; i++) {
        if (done[i]) continue;
        size_t m = 0;
        for (size_t k = i; ok[i] && k < n; k++) {
            if (done[k] || !ok[k] || strcmp(reqs[k]->cluster.experiment, reqs[i]->cluster.experiment) != 0 ||
                strcmp(reqs[k]->cluster.team ? reqs[k]->cluster.team : "",
                       reqs[i]->cluster.team ? reqs[i]->cluster.team : "") != 0 ||
                reqs[k]->cluster.array_max != reqs[i]->cluster.array_max ||
                !exec_slurm_array_compatible(&subs[i], &subs[k]))
                continue;
            gq[m] = reqs[k];
            gs[m] = subs[k];
            gr[m++] = &res[k];
            done[k] = true;
        }
        if (m >= 2) {
            start_array(b, gq, gs, gr, m);
            continue;
        }
        /* alone: its own sbatch (start renders it again and reports errors) */
        done[i] = true;
        res[i].rc = sl_start(be, reqs[i], &res[i].h, res[i].err, sizeof res[i].err);
    }
    for (size_t i = 0; i < n; i++) exec_slurm_submit_free(&subs[i]);
    free(subs);
    free(ok);
    free(done);
    free(gq);
    free(gs);
    free(gr);
}

/* ---- signals ---- */
static int scancel(slurm_be *b, const slurm_handle *h, const char *signame, char *err, size_t errsz)
{
    char ids[48], sig[48];
    job_ref(h, ids, sizeof ids);
    char *argv[6];
    int n = 0;
    argv[n++] = "scancel";
    if (signame) {
        snprintf(sig, sizeof sig, "--signal=%s", signame);
        argv[n++] = "--batch";
        argv[n++] = sig;
    }
    argv[n++] = ids;
    argv[n] = NULL;
    sb o, eo;
    sb_init(&o);
    sb_init(&eo);
    b->counts.scancel++;
    int x = run_tool(b, argv, &o, &eo, err, errsz);
    if (x > 0) {
        char line[220];
        first_line(&eo, line, sizeof line);
        snprintf(err, errsz, "scancel exited with %d: %s", x, line);
    }
    sb_free(&o);
    sb_free(&eo);
    return x;
}

static const char *sig_name(int sig)
{
    switch (sig) {
    case SIGTERM: return "TERM";
    case SIGINT: return "INT";
    case SIGHUP: return "HUP";
    case SIGQUIT: return "QUIT";
    case SIGUSR1: return "USR1";
    case SIGUSR2: return "USR2";
    case SIGKILL: return "KILL";
    default: return NULL;
    }
}

static exec_rc sl_signal(exec_handle *eh, int sig, char *err, size_t errsz)
{
    slurm_handle *h = (slurm_handle *)eh;
    slurm_be *b = (slurm_be *)eh->backend;
    if (h->ended) {
        snprintf(err, errsz, "Slurm job %llu has ended", (unsigned long long)h->id);
        return EXEC_E_GONE;
    }
    const char *name = sig_name(sig);
    if (!name) {
        snprintf(err, errsz, "signal %d is not one lathe sends", sig);
        return EXEC_E_INVALID;
    }
    int x = scancel(b, h, sig == SIGKILL ? NULL : name, err, errsz);
    return x == 0 ? EXEC_OK : x < 0 ? EXEC_E_UNAVAILABLE : EXEC_E_GONE;
}

static exec_rc sl_cancel(exec_handle *eh, double now, double grace, char *err, size_t errsz)
{
    slurm_handle *h = (slurm_handle *)eh;
    slurm_be *b = (slurm_be *)eh->backend;
    if (h->ended) return EXEC_OK;
    if (h->term_at > 0) return EXEC_OK; /* the first deadline stays */
    slurm_job *j = find_job(b, h);
    bool pending = j && j->state == SLURM_ST_PENDING;
    h->term_at = now;
    h->kill_at = now + (grace > 0 ? grace : 0);
    h->term_sent = true;
    int x;
    if (pending) { /* nothing runs yet: no checkpoint to wait for */
        x = scancel(b, h, NULL, err, errsz);
        h->kill_sent = true;
    } else {
        x = scancel(b, h, "TERM", err, errsz);
        if (x > 0) { /* "Job is pending execution" between two squeues */
            x = scancel(b, h, NULL, err, errsz);
            h->kill_sent = true;
        }
    }
    save_handle(h);
    return x < 0 ? EXEC_E_UNAVAILABLE : EXEC_OK;
}

/* ---- poll ---- */
static void tally_line(const char *line, size_t len, void *ctx)
{
    slurm_handle *h = ctx;
    exec_tally_line(&h->tally, line, len, h->poll_now);
}

static void sl_poll(exec_handle *eh, double now, exec_status *st, exec_update *up)
{
    slurm_handle *h = (slurm_handle *)eh;
    slurm_be *b = (slurm_be *)eh->backend;
    memset(up, 0, sizeof *up);
    exec_tally_clear(&h->tally);
    h->poll_now = now;
    if (h->ended) {
        *st = h->final;
        exec_tally_update(&h->tally, up);
        return;
    }
    refresh_if_stale(b, now);
    if (h->kill_at > 0 && now >= h->kill_at && !h->kill_sent) {
        char err[256];
        scancel(b, h, NULL, err, sizeof err);
        h->kill_sent = true;
        save_handle(h);
    }
    slurm_job *j = find_job(b, h);
    if (!j && h->have_gone) j = &h->gone;
    exec_log_read(&h->log, POLL_READ_MAX, tally_line, h);
    if (j) h->missing_since = 0;
    if (!j && b->cache_ok && h->missing_since == 0 && now > h->submitted_at + 5) h->missing_since = now;
    slurm_job cancelled;
    if (!j && h->task >= 0 && h->kill_sent && h->missing_since > 0 && now - h->missing_since >= 5) {
        /* a pending array task that lathe cancelled leaves no record in
         * squeue or sacct: it ended as cancelled */
        memset(&cancelled, 0, sizeof cancelled);
        cancelled.id = h->id;
        cancelled.state = SLURM_ST_CANCELLED;
        snprintf(cancelled.state_name, sizeof cancelled.state_name, "CANCELLED");
        cancelled.exit_code = -1;
        cancelled.restarts = h->restarts;
        j = &cancelled;
    }
    if (!j && h->missing_since > 0 && now - h->missing_since >= SLURM_GONE_AFTER) {
        /* neither squeue nor sacct (accounting off, or the job purged)
         * knows it: how it ended cannot be known */
        memset(st, 0, sizeof *st);
        st->phase = EXEC_LOST;
        st->end = EXEC_END_LOST;
        st->retryable = true;
        st->exit_code = -1;
        st->started_at = h->h.started_at;
        st->ended_at = now;
        snprintf(st->reason, sizeof st->reason,
                 "Slurm no longer knows job %llu (not in squeue for %.0fs, not in sacct): how it "
                 "ended is unknown",
                 (unsigned long long)h->id, now - h->missing_since);
        exec_log_read(&h->log, SIZE_MAX, tally_line, h);
        h->ended = true;
        h->final = *st;
        exec_tally_update(&h->tally, up);
        return;
    }
    if (!j) {
        memset(st, 0, sizeof *st);
        st->phase = EXEC_RUNNING;
        st->exit_code = -1;
        st->started_at = h->h.started_at;
        snprintf(st->reason, sizeof st->reason, "Slurm job %llu: no news yet%s%.150s",
                 (unsigned long long)h->id, b->cache_ok ? "" : ": ", b->cache_ok ? "" : b->cache_err);
        exec_tally_update(&h->tally, up);
        return;
    }
    bool requeued = j->restarts > h->restarts;
    slurm_map_status(j, h->term_sent, h->kill_sent, h->tally.oom_line, requeued, h->no_retry,
                     h->n_no_retry, st);
    if (!h->term_sent && st->phase != EXEC_RUNNING && slurm_signalled_by_limit(j, h->grace)) {
        st->end = EXEC_END_TIMED_OUT;
        st->retryable = false;
        snprintf(st->reason, sizeof st->reason,
                 "Slurm job %llu stopped on the SIGTERM its --signal sends %.0fs before its time "
                 "limit (--time): timed out, its checkpoint saved",
                 (unsigned long long)j->id, h->grace);
    }
    if (st->phase == EXEC_RUNNING && st->started_at <= 0) st->started_at = h->h.started_at;
    if (st->phase != EXEC_RUNNING) {
        if (requeued && !slurm_state_final(j->state)) {
            /* Slurm would run it again where lathe did not place it: lathe
             * retries it as a new attempt instead */
            char err[256];
            scancel(b, h, NULL, err, sizeof err);
        }
        exec_log_read(&h->log, SIZE_MAX, tally_line, h);
        if (st->end == EXEC_END_FAILED && h->tally.oom_line) /* the log's words came late */
            slurm_map_status(j, h->term_sent, h->kill_sent, true, requeued, h->no_retry,
                             h->n_no_retry, st);
        if (st->ended_at <= 0) st->ended_at = now;
        h->ended = true;
        h->final = *st;
    }
    exec_tally_update(&h->tally, up);
}

/* ---- nodes ---- */
bool exec_slurm_nodes(exec_backend *be, exec_slurm_node **out, size_t *n, char *err, size_t errsz)
{
    slurm_be *b = (slurm_be *)be;
    *out = NULL;
    *n = 0;
    char *argv[] = {"scontrol", "-o", "show", "nodes", NULL};
    sb o, eo;
    sb_init(&o);
    sb_init(&eo);
    b->counts.scontrol++;
    int x = run_tool(b, argv, &o, &eo, err, errsz);
    bool ok = false;
    if (x > 0) {
        char line[220];
        first_line(&eo, line, sizeof line);
        snprintf(err, errsz, "scontrol show nodes exited with %d: %s", x, line);
    } else if (x == 0) {
        ok = slurm_parse_nodes(sb_str(&o), o.len, out, n, err, errsz);
    }
    /* GPUs of running jobs lathe did not submit, per node (the last squeue) */
    for (size_t i = 0; ok && i < b->n_jobs; i++) {
        const slurm_job *j = &b->jobs[i];
        if (j->state != SLURM_ST_RUNNING || j->gpus_per_node <= 0 || !j->nodes) continue;
        if (j->comment && (strncmp(j->comment, "lathe job=", 10) == 0 ||
                           strncmp(j->comment, "lathe array=", 12) == 0))
            continue;
        char **hosts;
        size_t nh;
        if (!slurm_hosts(j->nodes, 4096, &hosts, &nh)) continue;
        for (size_t k = 0; k < nh; k++)
            for (size_t m = 0; m < *n; m++)
                if (strcmp((*out)[m].name, hosts[k]) == 0) (*out)[m].foreign += j->gpus_per_node;
        str_list_free(hosts, nh);
    }
    sb_free(&o);
    sb_free(&eo);
    return ok;
}

void exec_slurm_counts_get(exec_backend *be, exec_slurm_counts *c)
{
    *c = ((slurm_be *)be)->counts;
}

static void sl_destroy(exec_backend *be)
{
    slurm_be *b = (slurm_be *)be;
    slurm_jobs_free(b->jobs, b->n_jobs);
    free(b->lathe);
    free(b);
}

exec_backend *exec_slurm_new(const spec_slurm *settings, char *err, size_t errsz)
{
    slurm_be *b = xcalloc(1, sizeof *b);
    b->be.name = "slurm";
    b->be.ready = sl_ready;
    b->be.start = sl_start;
    b->be.start_many = sl_start_many;
    b->be.attach = sl_attach;
    b->be.find = sl_find;
    b->be.poll = sl_poll;
    b->be.signal = sl_signal;
    b->be.cancel = sl_cancel;
    b->be.handle_json = sl_handle_json;
    b->be.release = sl_release;
    b->be.destroy = sl_destroy;
    b->cfg = settings;
    if (settings->lathe_path) {
        b->lathe = xstrdup(settings->lathe_path);
    } else {
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0) {
            snprintf(err, errsz, "/proc/self/exe: %s; set slurm.lathePath", strerror(errno));
            free(b);
            return NULL;
        }
        self[n] = '\0';
        b->lathe = xstrdup(self);
    }
    if (!refresh(b, err, errsz)) {
        char e2[300];
        snprintf(e2, sizeof e2, "%s", err);
        snprintf(err, errsz, "Slurm cannot be reached: %s", e2);
        sl_destroy(&b->be);
        return NULL;
    }
    return &b->be;
}
