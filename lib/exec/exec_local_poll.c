/* exec_local_poll.c: polling a local attempt. Each poll reads what the
 * trainer wrote since the last one (the rotated output log, kept open and
 * followed across rotations; ms-swift's logging.jsonl by offset), looks
 * into the checkpoint folder every few seconds (new checkpoint-N folders,
 * Hugging Face trainer_state.json), sends SIGKILL once a cancel's grace
 * period is over, and says whether the trainer runs, ended (the
 * supervisor's exit.json, classified) or is lost. */
#include "exec_internal.h"
#include "policy/policy.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define POLL_READ_MAX (4u << 20) /* log bytes read per poll while the trainer runs */
#define SCAN_INTERVAL 5.0        /* seconds between looks into the checkpoint folder */

/* ---- the log reader ---- */

void exec_log_reader_init(exec_log_reader *r, const char *path)
{
    memset(r, 0, sizeof *r);
    r->path = xstrdup(path);
    r->fd = -1;
    sb_init(&r->partial);
}

void exec_log_reader_free(exec_log_reader *r)
{
    if (r->fd >= 0) close(r->fd);
    free(r->path);
    sb_free(&r->partial);
    memset(r, 0, sizeof *r);
}

static void feed(exec_log_reader *r, const char *buf, size_t n, exec_line_fn fn, void *ctx)
{
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        if (buf[i] != '\n') continue;
        r->line_no++;
        if (r->partial.len) {
            sb_putn(&r->partial, buf + start, i - start);
            fn(r->partial.buf, r->partial.len, ctx);
            sb_clear(&r->partial);
        } else {
            fn(buf + start, i - start, ctx);
        }
        start = i + 1;
    }
    if (start < n) sb_putn(&r->partial, buf + start, n - start);
}

static bool open_at(exec_log_reader *r, const char *path)
{
    /* never through a link, nor into a FIFO, that a trainer left there */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    struct stat st;
    if (fd < 0) return false;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return false;
    }
    if (r->fd >= 0) close(r->fd);
    r->fd = fd;
    r->ino = (uint64_t)st.st_ino;
    return true;
}

static uint64_t inode_of(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* The rotated files' inodes: ino[k] of output.log.k (0 where none), k = 1
 * .. LOG_SCAN. The whole range is looked at, not up to the first gap: the
 * supervisor renames .2 -> .3, then .1 -> .2, then the log -> .1, so a
 * reader looking in the middle of that sees a gap below files that exist. */
#define LOG_SCAN 64
static void scan_rotated(const exec_log_reader *r, uint64_t ino[LOG_SCAN + 1])
{
    ino[0] = 0;
    for (int k = 1; k <= LOG_SCAN; k++) {
        char *p = xasprintf("%s.%d", r->path, k);
        ino[k] = inode_of(p);
        free(p);
    }
}

/* Opens output.log.k (the log itself for k 0) when it still is the file
 * `want` (0: any); false when it is not (renamed meanwhile: scan again). */
static bool open_index(exec_log_reader *r, int k, uint64_t want)
{
    char *p = k ? xasprintf("%s.%d", r->path, k) : xstrdup(r->path);
    exec_log_reader probe = {.fd = -1};
    bool ok = open_at(&probe, p);
    free(p);
    if (ok && want && probe.ino != want) {
        close(probe.fd);
        return false;
    }
    if (!ok) return false;
    if (r->fd >= 0) close(r->fd);
    r->fd = probe.fd;
    r->ino = probe.ino;
    return true;
}

/* Reads the open file to its end; returns the bytes read. */
static size_t drain(exec_log_reader *r, size_t limit, exec_line_fn fn, void *ctx)
{
    char buf[65536];
    size_t total = 0;
    while (total < limit) {
        size_t want = limit - total < sizeof buf ? limit - total : sizeof buf;
        ssize_t n = read(r->fd, buf, want);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        feed(r, buf, (size_t)n, fn, ctx);
        total += (size_t)n;
    }
    return total;
}

/* At the end of the file being read: when the log was rotated since, moves
 * to the file written after it: the nearest existing output.log.k below
 * ours (then the log itself), or, when ours was rotated away entirely, the
 * oldest one left (everything left is newer). */
static bool next_file(exec_log_reader *r)
{
    for (int attempt = 0; attempt < 8; attempt++) {
        uint64_t cur = inode_of(r->path);
        if (cur == 0 || cur == r->ino) return false;
        uint64_t ino[LOG_SCAN + 1];
        scan_rotated(r, ino);
        int ours = 0, oldest = 0;
        for (int k = 1; k <= LOG_SCAN; k++) {
            if (ino[k] == r->ino) ours = k;
            if (ino[k]) oldest = k;
        }
        int next = 0;
        if (ours) {
            for (int k = ours - 1; k >= 1 && !next; k--)
                if (ino[k]) next = k;
        } else {
            next = oldest;
        }
        if (open_index(r, next, next ? ino[next] : cur)) return true;
    }
    return false;
}

/* The first open starts at the oldest file of the rotation. */
static bool open_first(exec_log_reader *r)
{
    for (int attempt = 0; attempt < 8; attempt++) {
        uint64_t ino[LOG_SCAN + 1];
        scan_rotated(r, ino);
        int oldest = 0;
        for (int k = 1; k <= LOG_SCAN; k++)
            if (ino[k]) oldest = k;
        if (open_index(r, oldest, ino[oldest])) return true;
        if (!oldest && !file_exists(r->path)) return false;
    }
    return false;
}

/* Reads at most limit bytes of new output, following rotations (exec_internal.h). */
void exec_log_read(exec_log_reader *r, size_t limit, exec_line_fn fn, void *ctx)
{
    if (r->fd < 0 && !open_first(r)) return;
    size_t total = 0;
    while (total < limit) {
        size_t got = drain(r, limit - total, fn, ctx);
        total += got;
        if (total >= limit) break;
        if (got == 0) {
            if (!next_file(r)) break;
            /* A rotated file ends at a line's end; a rest is a line. */
            if (r->partial.len) feed(r, "\n", 1, fn, ctx);
        }
    }
}

/* ---- what the poll found ---- */

typedef struct poll_ctx {
    local_handle *lh;
    double now;
} poll_ctx;

/* A path a trainer reported (checkpoint path=, resume path=, done
 * adapter=) counts only inside the job's folder or its checkpoint folder,
 * resolved (a link out of them, "..", another team's folder are not its
 * own); else the line is ignored and a warning goes to the attempt's
 * shim.log. */
static bool reported_path_ok(local_handle *lh, const char *line, size_t len)
{
    exec_progress p;
    char path[4096];
    path[0] = '\0';
    exec_line_kind k = exec_parse_train_line(line, len, &p, path, sizeof path);
    if ((k != EXEC_LINE_CHECKPOINT && k != EXEC_LINE_RESUME && k != EXEC_LINE_DONE) || !*path)
        return true;
    char why[256], *res = NULL, *own = NULL, *ck = NULL;
    bool ok = policy_resolve(lh->d.work_dir, path, &res, why, sizeof why) == POLICY_OK &&
              policy_resolve(NULL, lh->d.job_dir, &own, why, sizeof why) == POLICY_OK &&
              policy_path_under(res, own);
    /* the checkpoint folder the server chose counts as the job's own */
    if (!ok && res && lh->d.checkpoint_dir &&
        policy_resolve(NULL, lh->d.checkpoint_dir, &ck, why, sizeof why) == POLICY_OK)
        ok = policy_path_under(res, ck);
    free(ck);
    if (!ok) {
        char *log = path_join(lh->d.work_dir, EXEC_SHIM_LOG);
        int fd = open(log, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
        if (fd >= 0) {
            char *msg = xasprintf("lathe: ignored the trainer's line %ld: its path %s%s%s is "
                                  "outside the job's folder %s\n",
                                  lh->log.line_no, path, res ? " resolves to " : "", res ? res : "",
                                  lh->d.job_dir);
            ssize_t w = write(fd, msg, strlen(msg));
            (void)w;
            free(msg);
            close(fd);
        }
        free(log);
    }
    free(res);
    free(own);
    return ok;
}

static void on_line(const char *line, size_t len, void *ctx)
{
    poll_ctx *pc = ctx;
    if (!reported_path_ok(pc->lh, line, len)) return;
    exec_tally_line(&pc->lh->tally, line, len, pc->now);
}

/* ---- the checkpoint folder ---- */

/* step of a "checkpoint-N" name, or -1. */
static int64_t checkpoint_step(const char *name)
{
    if (!str_starts_with(name, "checkpoint-")) return -1;
    const char *d = name + strlen("checkpoint-");
    if (!*d) return -1;
    int64_t v = 0;
    for (; *d; d++) {
        if (*d < '0' || *d > '9' || v > INT64_MAX / 10 - 10) return -1;
        v = v * 10 + (*d - '0');
    }
    return v;
}

typedef struct found_ckpt {
    int64_t step;
    char *path;
} found_ckpt;

static int cmp_ckpt(const void *a, const void *b)
{
    int64_t x = ((const found_ckpt *)a)->step, y = ((const found_ckpt *)b)->step;
    return x < y ? -1 : x > y;
}

/* A checkpoint folder counts once its trainer_state.json is there: lathe
 * renames whole folders into place, Hugging Face writes that file last. */
static bool complete_checkpoint(const char *folder)
{
    char *state = path_join(folder, "trainer_state.json");
    bool ok = file_exists(state);
    free(state);
    return ok;
}

/* True for a folder that is one, not a link (the trainer writes these). */
static bool real_dir(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Lists the complete checkpoint-N folders of dir (and of its sub-folders when
 * deep: ms-swift writes into a versioned sub-folder). Links are not
 * followed: the folder is the trainer's. */
static void list_checkpoints(const char *dir, bool deep, found_ckpt **out, size_t *n)
{
    if (!real_dir(dir)) return;
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *path = path_join(dir, e->d_name);
        if (!real_dir(path)) {
            free(path);
            continue;
        }
        int64_t step = checkpoint_step(e->d_name);
        if (step >= 0 && complete_checkpoint(path)) {
            *out = xrealloc(*out, (*n + 1) * sizeof **out);
            (*out)[(*n)++] = (found_ckpt){step, path};
            continue;
        }
        if (deep) list_checkpoints(path, false, out, n);
        free(path);
    }
    closedir(d);
}

/* The logging.jsonl in the folder or, failing that, the newest one in a
 * sub-folder. */
static char *find_swift_log(const char *dir)
{
    if (!real_dir(dir)) return NULL;
    char *direct = path_join(dir, "logging.jsonl");
    struct stat dst;
    if (lstat(direct, &dst) == 0 && S_ISREG(dst.st_mode)) return direct;
    free(direct);
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char *best = NULL;
    double best_t = -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *sub = path_join(dir, e->d_name);
        char *p = path_join(sub, "logging.jsonl");
        bool real = real_dir(sub);
        free(sub);
        struct stat st;
        if (real && lstat(p, &st) == 0 && S_ISREG(st.st_mode) && (double)st.st_mtime > best_t) {
            free(best);
            best = p;
            best_t = (double)st.st_mtime;
        } else {
            free(p);
        }
    }
    closedir(d);
    return best;
}

/* Points from the newest checkpoint's trainer_state.json, when it changed
 * since the last look (lathe's own state file has no log_history: none). */
static void read_hf_state(local_handle *lh, const char *ckpt, double now)
{
    char *path = path_join(ckpt, "trainer_state.json");
    /* a regular file, never through a link or into a FIFO the trainer made */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    struct stat st;
    bool reg = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
               st.st_size <= (off_t)(256u << 20);
    double mtime = reg ? (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9 : 0;
    if (mtime > 0 && mtime != lh->hf_mtime) {
        lh->hf_mtime = mtime;
        sb text;
        sb_init(&text);
        char buf[65536];
        ssize_t r;
        while ((r = read(fd, buf, sizeof buf)) > 0 || (r < 0 && errno == EINTR))
            if (r > 0) sb_putn(&text, buf, (size_t)r);
        exec_progress *pts;
        size_t n;
        char err[256];
        if (r == 0 && exec_parse_hf_state(sb_str(&text), text.len, path, lh->tally.last_step, &pts,
                                          &n, err, sizeof err)) {
            for (size_t i = 0; i < n; i++) exec_tally_point(&lh->tally, pts[i], now);
            free(pts);
        }
        sb_free(&text);
    }
    if (fd >= 0) close(fd);
    free(path);
}

static void scan_folder(local_handle *lh, double now)
{
    const char *dir = lh->d.checkpoint_dir;
    if (!dir) return;
    found_ckpt *f = NULL;
    size_t n = 0;
    list_checkpoints(dir, true, &f, &n);
    if (n) qsort(f, n, sizeof *f, cmp_ckpt);
    for (size_t i = 0; i < n; i++) exec_tally_checkpoint(&lh->tally, f[i].step, f[i].path);
    if (n) read_hf_state(lh, f[n - 1].path, now);
    for (size_t i = 0; i < n; i++) free(f[i].path);
    free(f);
    if (!lh->swift_set) {
        char *p = find_swift_log(dir);
        if (p) {
            exec_jsonl_reader_init(&lh->swift, p);
            lh->swift_set = true;
            free(p);
        }
    }
}

static void read_swift(local_handle *lh, double now)
{
    if (!lh->swift_set) return;
    exec_progress *pts = NULL;
    size_t n = 0, cap = 0;
    char err[256];
    exec_read_swift_log(&lh->swift, &pts, &n, &cap, err, sizeof err);
    for (size_t i = 0; i < n; i++) exec_tally_point(&lh->tally, pts[i], now);
    free(pts);
}

/* ---- the end ---- */

static bool read_exit(const local_handle *lh, exec_exit_record *rec)
{
    char *path = path_join(lh->d.work_dir, EXEC_EXIT_FILE);
    char err[256];
    size_t len;
    char *text = file_read_all(path, 1 << 20, &len, err, sizeof err);
    free(path);
    bool ok = text && exec_exit_record_parse(text, rec);
    free(text);
    return ok;
}

static void finish(local_handle *lh, const exec_exit_record *rec, exec_phase phase, double now)
{
    exec_status *st = &lh->final;
    memset(st, 0, sizeof *st);
    st->phase = phase;
    st->exit_code = phase == EXEC_EXITED ? rec->exit_code : -1;
    st->signal = phase == EXEC_EXITED ? rec->signal : 0;
    st->term_sent = rec->term_sent || lh->d.term_at > 0;
    st->kill_sent = rec->kill_sent || lh->d.kill_sent;
    st->started_at = lh->d.started_at;
    st->ended_at = phase == EXEC_EXITED && rec->ended_at > 0 ? rec->ended_at : now;
    bool oom_killed = rec->signal == SIGKILL && !rec->kill_sent && rec->oom_kills != 0;
    exec_classify(st, rec->oom_line || lh->tally.oom_line, oom_killed, lh->d.no_retry,
                  lh->d.n_no_retry);
    if (st->end == EXEC_END_OOM && rec->oom_line)
        snprintf(st->reason, sizeof st->reason, "out of memory: '%.120s' on line %ld of the log",
                 rec->oom_text, rec->oom_line_no);
    lh->ended = true;
}

/* The supervisor is gone without an exit record: what is left of the
 * trainer's process group (the trainer dies with its supervisor, what it
 * started may not) is killed, since nothing supervises it. */
static void lost(local_handle *lh, double now)
{
    const exec_local_ids *id = &lh->d.ids;
    char boot[40];
    exec_boot_id(boot, sizeof boot);
    if (!*id->boot_id || strcmp(boot, id->boot_id) == 0)
        exec_proc_kill_group(id->trainer_pid, id->trainer_start);
    exec_exit_record none;
    memset(&none, 0, sizeof none);
    none.oom_kills = -1;
    finish(lh, &none, EXEC_LOST, now);
}

static void running(local_handle *lh, double now, exec_status *st)
{
    const exec_local_ids *id = &lh->d.ids;
    if (lh->d.kill_at > 0 && now >= lh->d.kill_at && !lh->d.kill_sent &&
        exec_proc_signal(id->shim_pid, id->shim_start, EXEC_SHIM_KILL_SIGNAL) == 0)
        lh->d.kill_sent = true;
    memset(st, 0, sizeof *st);
    st->phase = EXEC_RUNNING;
    st->exit_code = -1;
    st->term_sent = lh->d.term_at > 0;
    st->kill_sent = lh->d.kill_sent;
    st->started_at = lh->d.started_at;
    exec_classify(st, false, false, NULL, 0);
}

/* ---- poll ---- */

void exec_local_poll(exec_handle *h, double now, exec_status *st, exec_update *up)
{
    local_handle *lh = (local_handle *)h;
    exec_tally_clear(&lh->tally);
    poll_ctx pc = {lh, now};
    if (!lh->ended) {
        exec_exit_record rec;
        const exec_local_ids *id = &lh->d.ids;
        if (read_exit(lh, &rec)) finish(lh, &rec, EXEC_EXITED, now);
        else if (!exec_proc_alive(id->shim_pid, id->shim_start, id->boot_id)) {
            if (read_exit(lh, &rec)) finish(lh, &rec, EXEC_EXITED, now); /* just written */
            else lost(lh, now);
        }
    }
    /* Once it has ended, everything left is read in this poll. */
    exec_log_read(&lh->log, lh->ended ? SIZE_MAX : POLL_READ_MAX, on_line, &pc);
    if (lh->ended || now >= lh->next_scan) {
        scan_folder(lh, now);
        lh->next_scan = now + SCAN_INTERVAL;
    }
    read_swift(lh, now);
    if (lh->ended) *st = lh->final;
    else running(lh, now, st);
    exec_tally_update(&lh->tally, up);
}
