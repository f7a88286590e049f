/* checkpoint.c: checkpoint folders as the trainer contract defines them
 * (DESIGN.md): CHECKPOINT_DIR/checkpoint-<step>/ holding
 *   adapter_model.safetensors + adapter_config.json   the PEFT adapter
 *     (full fine-tuning: model.safetensors + config.json)
 *   optimizer.safetensors     AdamW moments, <param>.exp_avg / .exp_avg_sq
 *   trainer_state.json        step, data position, RNG, for an exact resume;
 *                             the latest and best eval loss with their steps
 *   training_metadata.json    the seed's fields: global_step, epoch, loss,
 *                             timestamp, lora_rank; eval_loss, best_eval_loss
 *                             and best_eval_step once evaluated
 * A folder is written under a hidden temporary name, every file fsync'd,
 * then renamed into place and the parent fsync'd: it is complete or absent.
 * The newest keep_last are kept, and the one of the best eval loss. */
#include "train.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Step of a folder named checkpoint-<digits>, else -1. */
static long ckpt_step(const char *name)
{
    if (strncmp(name, "checkpoint-", 11) != 0 || !name[11]) return -1;
    long v = 0;
    for (const char *p = name + 11; *p; p++) {
        if (*p < '0' || *p > '9' || v > 100000000000L) return -1;
        v = v * 10 + (*p - '0');
    }
    return v;
}

/* Removes a folder and the files in it (checkpoints are flat). */
static void remove_flat_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *p = path_join(dir, e->d_name);
        unlink(p);
        free(p);
    }
    closedir(d);
    rmdir(dir);
}

static int fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    int rc = fsync(fd) ? errno : 0;
    close(fd);
    return rc;
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* Steps of the complete checkpoints in dir, ascending; removes leftovers of
 * interrupted writes (.tmp-checkpoint-*). */
static long *list_checkpoints(const char *dir, size_t *n, bool clean)
{
    *n = 0;
    long *steps = NULL;
    size_t cap = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (clean && strncmp(e->d_name, ".tmp-checkpoint-", 16) == 0) {
            char *p = path_join(dir, e->d_name);
            remove_flat_dir(p);
            free(p);
            continue;
        }
        long s = ckpt_step(e->d_name);
        if (s < 0) continue;
        char *sub = path_join(dir, e->d_name);
        char *st = path_join(sub, "trainer_state.json");
        bool complete = file_exists(st);
        free(sub);
        free(st);
        if (!complete) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 8;
            steps = xrealloc(steps, cap * sizeof *steps);
        }
        steps[(*n)++] = s;
    }
    closedir(d);
    if (*n) qsort(steps, *n, sizeof *steps, cmp_long);
    return steps;
}

char *tr_checkpoint_latest(const char *dir)
{
    size_t n;
    long *steps = list_checkpoints(dir, &n, true);
    char *out = n ? xasprintf("%s/checkpoint-%ld", dir, steps[n - 1]) : NULL;
    free(steps);
    return out;
}

static bool write_text(const char *dir, const char *name, const char *text, char *err,
                       size_t errsz)
{
    char *p = path_join(dir, name);
    int rc = file_write_atomic(p, text, strlen(text));
    if (rc) snprintf(err, errsz, "cannot write %s: %s", p, strerror(rc));
    free(p);
    return rc == 0;
}

static bool write_params(const char *dir, const tr_model *m, char *err, size_t errsz)
{
    bool full = m->opts.mode == TR_MODE_FULL;
    char *p = path_join(dir, full ? "model.safetensors" : "adapter_model.safetensors");
    int rc = tr_model_save_params(m, p, TR_F32);
    if (rc) snprintf(err, errsz, "cannot write %s: %s", p, strerror(rc));
    free(p);
    return rc == 0;
}

bool tr_save_adapter_dir(const char *dir, const tr_model *m, const char *base_model_path,
                         char *err, size_t errsz)
{
    if (!tr_mkdir_p(dir, err, errsz) || !write_params(dir, m, err, errsz)) return false;
    char *json = m->opts.mode == TR_MODE_FULL ? tr_config_to_json(&m->cfg)
                                              : tr_adapter_config_json(m, base_model_path);
    bool ok = write_text(dir, m->opts.mode == TR_MODE_FULL ? "config.json" : "adapter_config.json",
                         json, err, errsz);
    free(json);
    return ok;
}

static bool write_moments(const char *dir, const tr_model *m, const float *m1, const float *m2,
                          char *err, size_t errsz)
{
    st_writer w;
    st_writer_init(&w);
    for (size_t i = 0; i < m->n_params; i++) {
        const tr_param *p = &m->params[i];
        char *a = xasprintf("%s.exp_avg", p->name), *b = xasprintf("%s.exp_avg_sq", p->name);
        st_writer_add(&w, a, TR_F32, p->ndim, p->shape, m1 + p->offset);
        st_writer_add(&w, b, TR_F32, p->ndim, p->shape, m2 + p->offset);
        free(a);
        free(b);
    }
    char *path = path_join(dir, "optimizer.safetensors");
    int rc = st_writer_save(&w, path);
    if (rc) snprintf(err, errsz, "cannot write %s: %s", path, strerror(rc));
    free(path);
    st_writer_free(&w);
    return rc == 0;
}

static char *hex64(uint64_t v)
{
    return xasprintf("0x%016llx", (unsigned long long)v);
}

/* The eval fields (written once an evaluation ran): eval_loss and
 * eval_step, best_eval_loss and best_eval_step. */
static void add_eval(json_t *j, const tr_train_state *s)
{
    if (s->eval_step < 0) return;
    json_object_set_new(j, "eval_loss", isfinite(s->eval_loss) ? json_real(s->eval_loss) : json_null());
    json_object_set_new(j, "eval_step", json_integer((json_int_t)s->eval_step));
    json_object_set_new(j, "best_eval_loss",
                        isfinite(s->best_eval_loss) ? json_real(s->best_eval_loss) : json_null());
    json_object_set_new(j, "best_eval_step", json_integer((json_int_t)s->best_eval_step));
}

static char *state_json(const tr_train_state *s, const tr_model *m, const tr_train_opts *o)
{
    json_t *rng = json_array();
    for (int i = 0; i < 4; i++) {
        char *h = hex64(s->rng.s[i]);
        json_array_append_new(rng, json_string(h));
        free(h);
    }
    json_t *pos = s->data_pos ? json_loads(s->data_pos, 0, NULL) : NULL;
    char *seed = hex64(o->seed);
    json_t *j = json_pack("{s:s,s:I,s:I,s:f,s:o,s:o,s:f,s:f,s:s,s:s,s:i,s:I}", "format",
                          "lathe-trainer-state-1", "global_step", (json_int_t)s->step,
                          "total_steps", (json_int_t)s->total_steps, "epoch", s->epoch,
                          "data_position", pos ? pos : json_null(), "rng", rng, "loss",
                          s->last_loss, "tokens_seen", s->tokens_seen, "seed", seed, "mode",
                          m->opts.mode == TR_MODE_FULL ? "full" : "lora", "lora_rank",
                          m->opts.lora.rank, "trainable_floats", (json_int_t)m->n_floats);
    free(seed);
    add_eval(j, s);
    char *out = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(j);
    return out;
}

static char *metadata_json(const tr_train_state *s, const tr_model *m)
{
    char ts[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_t *j = json_pack("{s:I,s:f,s:f,s:s,s:i}", "global_step", (json_int_t)s->step, "epoch",
                          s->epoch, "loss", s->last_loss, "timestamp", ts, "lora_rank",
                          m->opts.mode == TR_MODE_LORA ? m->opts.lora.rank : 0);
    add_eval(j, s);
    char *out = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(j);
    return out;
}

/* Keeps the newest keep_last checkpoints, and the one at step `best` (the
 * best eval loss; -1: none). */
static void prune(const char *dir, int keep_last, long best)
{
    size_t n;
    long *steps = list_checkpoints(dir, &n, false);
    for (size_t i = 0; keep_last > 0 && i + (size_t)keep_last < n; i++) {
        if (steps[i] == best) continue;
        char *p = xasprintf("%s/checkpoint-%ld", dir, steps[i]);
        remove_flat_dir(p);
        free(p);
    }
    free(steps);
}

bool tr_checkpoint_save(const char *dir, const tr_model *m, const float *m1, const float *m2,
                        const tr_train_state *s, const tr_train_opts *o, int keep_last,
                        char *err, size_t errsz)
{
    char *final = xasprintf("%s/checkpoint-%ld", dir, s->step);
    if (dir_exists(final)) { /* this step was saved before a resume: same state */
        free(final);
        return true;
    }
    char *tmp = xasprintf("%s/.tmp-checkpoint-%ld-%ld", dir, s->step, (long)getpid());
    remove_flat_dir(tmp);
    bool ok = mkdir(tmp, 0755) == 0;
    if (!ok) snprintf(err, errsz, "cannot create %s: %s", tmp, strerror(errno));
    if (ok) ok = tr_save_adapter_dir(tmp, m, o->model_dir, err, errsz);
    if (ok && o->fault_phase == 2 && o->fault_step == s->step) raise(SIGKILL); /* tests */
    if (ok) ok = write_moments(tmp, m, m1, m2, err, errsz);
    char *js = ok ? metadata_json(s, m) : NULL;
    if (ok) ok = write_text(tmp, "training_metadata.json", js, err, errsz);
    free(js);
    js = ok ? state_json(s, m, o) : NULL;
    if (ok) ok = write_text(tmp, "trainer_state.json", js, err, errsz);
    free(js);
    if (ok && (fsync_path(tmp) || rename(tmp, final) != 0 || fsync_path(dir))) {
        snprintf(err, errsz, "cannot move %s into place: %s", final, strerror(errno));
        ok = false;
    }
    if (!ok) remove_flat_dir(tmp);
    else prune(dir, keep_last, s->best_eval_step);
    free(tmp);
    free(final);
    return ok;
}

static bool read_moments(const char *ckpt, const tr_model *m, float *m1, float *m2, char *err,
                         size_t errsz)
{
    char *path = path_join(ckpt, "optimizer.safetensors");
    st_archive a;
    bool opened = st_open(&a, path, err, errsz), ok = opened;
    for (size_t i = 0; ok && i < m->n_params; i++) {
        const tr_param *p = &m->params[i];
        for (int k = 0; k < 2 && ok; k++) {
            char *n = xasprintf("%s.%s", p->name, k ? "exp_avg_sq" : "exp_avg");
            const st_tensor *t = st_find(&a, n);
            if (!t || t->dtype != TR_F32 || (size_t)t->numel != p->numel) {
                snprintf(err, errsz, "%s: %s is missing or has another shape", path, n);
                ok = false;
            } else {
                memcpy((k ? m2 : m1) + p->offset, t->data, p->numel * sizeof(float));
            }
            free(n);
        }
    }
    if (opened) st_close(&a);
    free(path);
    return ok;
}

static bool parse_hex64(const char *s, uint64_t *v)
{
    if (!s || strncmp(s, "0x", 2) != 0 || strlen(s) != 18) return false;
    char *end;
    *v = strtoull(s + 2, &end, 16);
    return *end == 0;
}

static bool read_state(const char *ckpt, tr_train_state *s, char *err, size_t errsz)
{
    char *path = path_join(ckpt, "trainer_state.json");
    size_t len;
    char *text = file_read_all(path, 16u << 20, &len, err, errsz);
    json_t *j = text ? json_loadb(text, len, 0, NULL) : NULL;
    json_int_t step = -1, total = -1;
    json_t *rng = NULL, *pos = NULL;
    double epoch = 0, loss = 0, tokens = 0;
    bool ok = j && json_unpack(j, "{s:I,s:I,s:F,s:o,s:o,s:F,s:F}", "global_step", &step,
                               "total_steps", &total, "epoch", &epoch, "data_position", &pos,
                               "rng", &rng, "loss", &loss, "tokens_seen", &tokens) == 0 &&
              step >= 0 && json_array_size(rng) == 4;
    for (int i = 0; ok && i < 4; i++)
        ok = parse_hex64(json_string_value(json_array_get(rng, (size_t)i)), &s->rng.s[i]);
    if (ok) {
        s->step = (long)step;
        s->total_steps = (long)total;
        s->epoch = epoch;
        s->last_loss = loss;
        s->tokens_seen = tokens;
        s->data_pos = json_is_object(pos) ? json_dumps(pos, JSON_COMPACT) : NULL;
        /* written since evaluations exist, and only once one ran */
        json_t *es = json_object_get(j, "eval_step"), *bs = json_object_get(j, "best_eval_step");
        bool have = json_is_integer(es) && json_is_integer(bs);
        s->eval_step = have ? (long)json_integer_value(es) : -1;
        s->best_eval_step = have ? (long)json_integer_value(bs) : -1;
        json_t *el = json_object_get(j, "eval_loss"), *bl = json_object_get(j, "best_eval_loss");
        s->eval_loss = have && json_is_number(el) ? json_number_value(el) : NAN;
        s->best_eval_loss = have && json_is_number(bl) ? json_number_value(bl) : NAN;
    } else if (text) {
        snprintf(err, errsz, "%s: not a lathe trainer state (expected global_step, total_steps, "
                 "epoch, data_position, rng[4], loss, tokens_seen)", path);
    }
    json_decref(j);
    free(text);
    free(path);
    return ok;
}

bool tr_checkpoint_load(const char *ckpt, tr_model *m, float *m1, float *m2,
                        tr_train_state *s, char *err, size_t errsz)
{
    char *params = path_join(ckpt, m->opts.mode == TR_MODE_FULL ? "model.safetensors"
                                                                 : "adapter_model.safetensors");
    bool ok = tr_model_load_params(m, params, err, errsz) &&
              read_moments(ckpt, m, m1, m2, err, errsz) && read_state(ckpt, s, err, errsz);
    free(params);
    return ok;
}
