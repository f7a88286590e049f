/* exec_progress.c: progress formats, all into one record (exec_progress):
 *
 *   - the built-in trainer's `[lathe-train]` lines (docs/trainer.md):
 *     space-separated key=value fields after the prefix;
 *   - Hugging Face Trainer's trainer_state.json in a checkpoint folder: its
 *     log_history entries that hold a training loss, max_steps as the total,
 *     and the evaluation entries ({"eval_loss": X, "step": N, ...}) joined
 *     to the point of their step;
 *   - ms-swift's logging.jsonl: one JSON object per logging step, with
 *     "global_step/max_steps": "N/M" (older versions: "global_step": N),
 *     "loss", "learning_rate", "epoch", "elapsed_time" / "remaining_time"
 *     as "1h 2m 3s" (swift/trainers/callback.py, add_train_message), and its
 *     evaluation lines ("eval_loss" at a "global_step/max_steps");
 *     read incrementally by offset.
 */
#include "exec_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TRAIN_PREFIX "[lathe-train] "

static void progress_unknown(exec_progress *p)
{
    p->step = p->total_steps = -1;
    p->epoch = p->loss = p->learning_rate = p->tokens_per_second = NAN;
    p->eta_seconds = p->elapsed_seconds = p->eval_loss = NAN;
    p->at = 0;
}

/* ---- [lathe-train] lines ---- */

static bool parse_double(const char *s, size_t n, double *out)
{
    char buf[64];
    if (n == 0 || n >= sizeof buf) return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (*end || errno == ERANGE) return false;
    *out = v;
    return true;
}

/* A step count: a whole number from 0 to 2^53 (what a double holds
 * exactly); anything else (a fraction, "inf", 1e300) leaves *out alone. */
static void parse_count(const char *s, size_t n, int64_t *out)
{
    double d;
    if (parse_double(s, n, &d) && d >= 0 && d <= 9007199254740992.0 && d == floor(d))
        *out = (int64_t)d;
}

/* "N" or "N/TOTAL". */
static void parse_step(const char *v, size_t n, exec_progress *p)
{
    const char *slash = memchr(v, '/', n);
    parse_count(v, slash ? (size_t)(slash - v) : n, &p->step);
    if (slash) parse_count(slash + 1, n - (size_t)(slash - v) - 1, &p->total_steps);
}

static void copy_value(const char *v, size_t n, char *out, size_t outsz)
{
    if (!out || !outsz) return;
    size_t k = n < outsz - 1 ? n : outsz - 1;
    memcpy(out, v, k);
    out[k] = '\0';
}

/* One key=value field of a [lathe-train] line. */
static void train_field(const char *key, size_t kn, const char *v, size_t vn, exec_progress *p,
                        char *path, size_t pathsz)
{
#define KEY(s) (kn == sizeof(s) - 1 && memcmp(key, s, kn) == 0)
    double d;
    if (KEY("step")) parse_step(v, vn, p);
    else if (KEY("path") || KEY("adapter")) copy_value(v, vn, path, pathsz);
    else if (!parse_double(v, vn, &d)) return;
    else if (KEY("epoch")) p->epoch = d;
    else if (KEY("loss")) p->loss = d;
    else if (KEY("lr")) p->learning_rate = d;
    else if (KEY("tokens_per_s")) p->tokens_per_second = d;
    else if (KEY("eta_s")) p->eta_seconds = d;
    else if (KEY("elapsed_s")) p->elapsed_seconds = d;
    else if (KEY("eval_loss")) p->eval_loss = d;
#undef KEY
}

static exec_line_kind line_kind(const char *word, size_t n)
{
    static const struct { const char *w; exec_line_kind k; } kinds[] = {
        {"start", EXEC_LINE_START},     {"checkpoint", EXEC_LINE_CHECKPOINT},
        {"resume", EXEC_LINE_RESUME},   {"stopped", EXEC_LINE_STOPPED},
        {"done", EXEC_LINE_DONE},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strlen(kinds[i].w) == n && memcmp(kinds[i].w, word, n) == 0) return kinds[i].k;
    return EXEC_LINE_OTHER;
}

exec_line_kind exec_parse_train_line(const char *line, size_t len, exec_progress *p, char *path,
                                     size_t pathsz)
{
    progress_unknown(p);
    if (path && pathsz) path[0] = '\0';
    size_t pl = strlen(TRAIN_PREFIX);
    if (len < pl || memcmp(line, TRAIN_PREFIX, pl) != 0) return EXEC_LINE_NONE;
    const char *s = line + pl, *end = line + len;
    exec_line_kind kind = EXEC_LINE_NONE;
    while (s < end) {
        const char *tok = s;
        while (s < end && *s != ' ') s++;
        size_t n = (size_t)(s - tok);
        while (s < end && *s == ' ') s++;
        if (n == 0) continue;
        const char *eq = memchr(tok, '=', n);
        if (kind == EXEC_LINE_NONE) kind = eq ? EXEC_LINE_STEP : line_kind(tok, n);
        if (kind == EXEC_LINE_OTHER) return kind;
        if (eq) train_field(tok, (size_t)(eq - tok), eq + 1, n - (size_t)(eq - tok) - 1, p, path, pathsz);
    }
    if (kind == EXEC_LINE_STEP && p->step < 0) return EXEC_LINE_OTHER;
    return kind;
}

/* ---- Hugging Face trainer_state.json ---- */

bool exec_parse_hf_state(const char *text, size_t len, const char *name, int64_t after_step,
                         exec_progress **pts, size_t *n, char *err, size_t errsz)
{
    *pts = NULL;
    *n = 0;
    json_error_t je;
    json_t *o = json_loadb(text, len, 0, &je);
    json_t *hist = json_object_get(o, "log_history");
    if (!json_is_object(o) || !json_is_array(hist)) {
        snprintf(err, errsz, "%s: not a trainer_state.json (%s)", name,
                 o ? "no log_history list" : je.text);
        json_decref(o);
        return false;
    }
    json_t *max = json_object_get(o, "max_steps");
    int64_t total = json_is_integer(max) && json_integer_value(max) >= 0
                        ? (int64_t)json_integer_value(max)
                        : -1;
    *pts = xcalloc(json_array_size(hist) + 1, sizeof **pts);
    for (size_t i = 0; i < json_array_size(hist); i++) {
        json_t *e = json_array_get(hist, i);
        json_t *step = json_object_get(e, "step"), *loss = json_object_get(e, "loss");
        json_t *eval = json_object_get(e, "eval_loss");
        if (!json_is_integer(step) || (!json_is_number(loss) && !json_is_number(eval)))
            continue; /* a summary, or another metric */
        if (json_integer_value(step) < 0 || json_integer_value(step) <= after_step) continue;
        int64_t s = (int64_t)json_integer_value(step);
        exec_progress *p = *n && (*pts)[*n - 1].step == s ? &(*pts)[*n - 1] : NULL;
        if (!p) { /* a new step; an evaluation joins the point of its step */
            p = &(*pts)[(*n)++];
            progress_unknown(p);
            p->step = s;
            p->total_steps = total;
        }
        if (json_is_number(eval)) p->eval_loss = json_number_value(eval);
        if (json_is_number(loss)) {
            p->loss = json_number_value(loss);
            p->learning_rate = exec_json_num(e, "learning_rate", NAN);
        }
        if (isnan(p->epoch)) p->epoch = exec_json_num(e, "epoch", NAN);
    }
    json_decref(o);
    return true;
}

bool exec_read_hf_state(const char *path, int64_t after_step, exec_progress **pts, size_t *n,
                        char *err, size_t errsz)
{
    *pts = NULL;
    *n = 0;
    size_t len;
    char *text = file_read_all(path, 256u << 20, &len, err, errsz);
    if (!text) return false;
    bool ok = exec_parse_hf_state(text, len, path, after_step, pts, n, err, errsz);
    free(text);
    return ok;
}

/* ---- ms-swift logging.jsonl ---- */

/* "1h 2m 3s" -> seconds, NAN when unreadable. */
static double swift_duration(const char *s)
{
    if (!s) return NAN;
    char buf[64];
    size_t k = 0;
    for (; *s && k < sizeof buf - 1; s++)
        if (*s != ' ') buf[k++] = *s;
    buf[k] = '\0';
    double v;
    if (strcmp(buf, "0s") == 0) return 0;
    return units_parse_duration(buf, &v) ? v : NAN;
}

bool exec_parse_swift_line(const char *line, size_t len, exec_progress *p)
{
    progress_unknown(p);
    json_t *o = json_loadb(line, len, 0, NULL);
    json_t *loss = json_object_get(o, "loss"), *eval = json_object_get(o, "eval_loss");
    bool ok = json_is_object(o) && (json_is_number(loss) || json_is_number(eval));
    if (ok) {
        const char *gs = exec_json_str(o, "global_step/max_steps");
        json_t *g = json_object_get(o, "global_step");
        if (gs) parse_step(gs, strlen(gs), p);
        else if (json_is_integer(g) && json_integer_value(g) >= 0)
            p->step = (int64_t)json_integer_value(g);
        ok = p->step >= 0;
        p->loss = json_is_number(loss) ? json_number_value(loss) : NAN;
        p->eval_loss = json_is_number(eval) ? json_number_value(eval) : NAN;
        p->learning_rate = exec_json_num(o, "learning_rate", NAN);
        p->epoch = exec_json_num(o, "epoch", NAN);
        p->elapsed_seconds = swift_duration(exec_json_str(o, "elapsed_time"));
        p->eta_seconds = swift_duration(exec_json_str(o, "remaining_time"));
    }
    json_decref(o);
    return ok;
}

void exec_jsonl_reader_init(exec_jsonl_reader *r, const char *path)
{
    memset(r, 0, sizeof *r);
    r->path = xstrdup(path);
}

void exec_jsonl_reader_free(exec_jsonl_reader *r)
{
    free(r->path);
    memset(r, 0, sizeof *r);
}

static void push_point(exec_progress **pts, size_t *n, size_t *cap, const exec_progress *p)
{
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        *pts = xrealloc(*pts, *cap * sizeof **pts);
    }
    (*pts)[(*n)++] = *p;
}

bool exec_read_swift_log(exec_jsonl_reader *r, exec_progress **pts, size_t *n, size_t *cap,
                         char *err, size_t errsz)
{
    /* the trainer writes this file: never through a link, nor into a FIFO */
    int fd = open(r->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT) return true; /* not written yet */
        snprintf(err, errsz, "%s: %s", r->path, strerror(errno));
        return false;
    }
    struct stat st;
    bool stat_ok = fstat(fd, &st) == 0;
    int e = stat_ok ? 0 : errno;
    if (!stat_ok || !S_ISREG(st.st_mode)) {
        close(fd);
        snprintf(err, errsz, "%s: %s", r->path, e ? strerror(e) : "not a regular file");
        return false;
    }
    /* A new file (or a shorter one) starts again from its beginning. */
    if ((uint64_t)st.st_ino != r->inode || (uint64_t)st.st_size < r->offset) {
        r->inode = (uint64_t)st.st_ino;
        r->offset = 0;
    }
    char buf[65536];
    sb line;
    sb_init(&line);
    uint64_t pos = r->offset;
    ssize_t got;
    while ((got = pread(fd, buf, sizeof buf, (off_t)pos)) > 0) {
        for (ssize_t i = 0; i < got; i++) {
            if (buf[i] != '\n') {
                sb_putc(&line, buf[i]);
                continue;
            }
            exec_progress p;
            if (line.len && exec_parse_swift_line(line.buf, line.len, &p)) {
                if (*n && (*pts)[*n - 1].step == p.step && isnan(p.loss)) /* its evaluation */
                    (*pts)[*n - 1].eval_loss = p.eval_loss;
                else
                    push_point(pts, n, cap, &p);
            }
            sb_clear(&line);
            r->offset = pos + (uint64_t)i + 1; /* only whole lines count as read */
        }
        pos += (uint64_t)got;
    }
    sb_free(&line);
    close(fd);
    if (got < 0) {
        snprintf(err, errsz, "%s: %s", r->path, strerror(errno));
        return false;
    }
    return true;
}
