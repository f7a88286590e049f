/* srv_logs.c: GET /v1/jobs/NAME/logs, the trainer's output of one attempt
 * as text/plain, streamed from its files (never read whole into memory):
 *
 *   - the rotated files first (output.log.N .. output.log.1), then the live
 *     one, so the text reads in order;
 *   - tail=N starts at the N-th line from the end (found by reading the
 *     files backwards in blocks);
 *   - follow=1 keeps the connection open and sends lines as the trainer
 *     writes them, until the attempt has ended and everything was sent.
 *     A rotation while following is noticed by the inode of the live
 *     path: the old file (still open) is drained first.
 *
 * A connection has its own thread (srv_http.c), so waiting here holds up
 * no other client.
 */
#include "ctl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct log_reader {
    srv *s;
    char **files; /* oldest first; the last is the live path */
    size_t n, cur;
    int fd;       /* the open file (files[cur], or the live file) */
    ino_t ino;
    bool follow;
    int64_t job_id;
    int attempt;
    store *st;    /* follow: to see the attempt end */
    double next_check;
    bool ended;   /* the attempt ended: send what is left, then stop */
} log_reader;

static double now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The files of a log, oldest first: path.K .. path.1 (those present), path. */
static void list_files(const char *path, int keep, char ***out, size_t *n)
{
    char **files = xcalloc((size_t)keep + 2, sizeof *files);
    size_t k = 0;
    for (int i = keep; i >= 1; i--) {
        char *p = xasprintf("%s.%d", path, i);
        if (file_exists(p)) files[k++] = p;
        else free(p);
    }
    files[k++] = xstrdup(path);
    *out = files;
    *n = k;
}

static bool open_current(log_reader *lr, uint64_t offset)
{
    if (lr->fd >= 0) close(lr->fd);
    /* never through a link or into a FIFO a trainer left in its folder */
    lr->fd = open(lr->files[lr->cur], O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (lr->fd < 0) return false;
    struct stat st;
    if (fstat(lr->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(lr->fd);
        lr->fd = -1;
        return false;
    }
    lr->ino = st.st_ino;
    lseek(lr->fd, (off_t)offset, SEEK_SET);
    return true;
}

/* Follow: has the live path been rotated away from the open file? */
static bool rotated(const log_reader *lr)
{
    struct stat st;
    return lr->cur + 1 == lr->n && stat(lr->files[lr->n - 1], &st) == 0 && st.st_ino != lr->ino;
}

/* Follow: whether the attempt has ended (checked twice a second). */
static void check_end(log_reader *lr)
{
    double now = now_mono();
    if (now < lr->next_check) return;
    lr->next_check = now + 0.5;
    store_attempt a;
    if (store_attempt_get(lr->st, lr->job_id, lr->attempt, &a) != STORE_OK) {
        lr->ended = true; /* the job was deleted */
        return;
    }
    lr->ended = a.ended_at > 0;
    store_attempt_clear(&a);
}

static long log_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    log_reader *lr = cls;
    (void)pos;
    if (lr->n == 0) return -1;
    for (;;) {
        if (lr->fd < 0 && !open_current(lr, 0)) {
            if (!lr->follow && lr->cur + 1 >= lr->n) return -1;
            if (lr->cur + 1 < lr->n) {
                lr->cur++;
                continue;
            }
        }
        ssize_t got = lr->fd >= 0 ? read(lr->fd, buf, max) : 0;
        if (got > 0) return (long)got;
        if (got < 0 && errno == EINTR) continue;
        if (lr->cur + 1 < lr->n) { /* the next file of the rotation */
            lr->cur++;
            open_current(lr, 0);
            continue;
        }
        if (lr->follow && rotated(lr)) {
            open_current(lr, 0);
            continue;
        }
        if (!lr->follow || lr->ended || atomic_load(&lr->s->stopping)) return -1;
        check_end(lr);
        if (lr->ended) continue; /* one more read for what came before the end */
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        return 0;
    }
}

static void log_done(void *cls)
{
    log_reader *lr = cls;
    if (lr->fd >= 0) close(lr->fd);
    str_list_free(lr->files, lr->n);
    srv_pool_put(&lr->s->pool, lr->st);
    free(lr);
}

/* Where the last `lines` lines start: file index and offset. */
static void tail_start(char **files, size_t n, long lines, size_t *file, uint64_t *off)
{
    *file = 0;
    *off = 0;
    char buf[65536];
    long need = lines;
    bool skip_last_newline = true;
    for (size_t f = n; f-- > 0;) {
        int fd = open(files[f], O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        struct stat fst;
        if (fd >= 0 && (fstat(fd, &fst) != 0 || !S_ISREG(fst.st_mode))) {
            close(fd);
            fd = -1;
        }
        if (fd < 0) continue;
        struct stat st;
        uint64_t end = fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
        while (end > 0) {
            size_t chunk = end < sizeof buf ? (size_t)end : sizeof buf;
            ssize_t got = pread(fd, buf, chunk, (off_t)(end - chunk));
            if (got != (ssize_t)chunk) break;
            for (size_t i = chunk; i-- > 0;) {
                if (buf[i] != '\n') {
                    skip_last_newline = false;
                    continue;
                }
                if (skip_last_newline) { /* the newline that ends the text */
                    skip_last_newline = false;
                    continue;
                }
                if (--need == 0) {
                    *file = f;
                    *off = end - chunk + i + 1;
                    close(fd);
                    return;
                }
            }
            end -= chunk;
        }
        close(fd);
    }
}

static int query_int(srv_req *r, const char *key, long def, long *out)
{
    const char *v = srv_req_query(r, key);
    *out = def;
    if (!v) return 0;
    char *end;
    long n = strtol(v, &end, 10);
    if (end == v || *end || n < 0) return -1;
    *out = n;
    return 0;
}

void srv_api_job_logs(srv_req *r, const char *name)
{
    long attempt, tail;
    const char *follow = srv_req_query(r, "follow");
    if (query_int(r, "attempt", 0, &attempt) || query_int(r, "tail", 0, &tail)) {
        srv_reply_error(r, 400, "bad_request", "attempt and tail take a number of 0 or more");
        return;
    }
    store_job j;
    if (!srv_find_job(r, name, &j)) return;
    if (attempt == 0) attempt = j.attempts;
    store_attempt a;
    memset(&a, 0, sizeof a);
    store *st = srv_req_store(r);
    if (attempt == 0 || store_attempt_get(st, j.id, (int)attempt, &a) != STORE_OK) {
        srv_reply_error(r, 404, "not_found",
                        attempt == 0 ? "job %s has not started yet: no log" : "job %s has no attempt %ld",
                        name, attempt);
        store_job_clear(&j);
        return;
    }
    srv *s = srv_req_server(r);
    char err[256];
    log_reader *lr = xcalloc(1, sizeof *lr);
    lr->s = s;
    lr->fd = -1;
    lr->follow = follow && strcmp(follow, "0") != 0 && strcmp(follow, "false") != 0;
    lr->job_id = j.id;
    lr->attempt = (int)attempt;
    lr->ended = a.ended_at > 0;
    lr->st = lr->follow ? srv_pool_get(&s->pool, err, sizeof err) : NULL;
    if (lr->follow && !lr->st) lr->follow = false;
    if (a.log_path) {
        list_files(a.log_path, s->cfg.spec->logs.keep, &lr->files, &lr->n);
        if (tail > 0) {
            uint64_t off;
            tail_start(lr->files, lr->n, tail, &lr->cur, &off);
            open_current(lr, off);
        }
    } else {
        lr->follow = false; /* the executor has not started it: nothing to read */
    }
    if (lr->follow) srv_req_no_timeout(r); /* a quiet trainer is not an idle client */
    srv_reply_stream(r, 200, "text/plain; charset=utf-8", log_read, lr, log_done);
    store_attempt_clear(&a);
    store_job_clear(&j);
}
