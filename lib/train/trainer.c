/* trainer.c: the training loop of `lathe train`.
 *
 * One optimizer step takes batch_size * grad_accum sequences from the data
 * source, runs forward + backward on each (one sequence at a time, the loss
 * normalised by the step's total number of target tokens, so accumulation
 * equals one big batch), clips the gradients by their global norm, and
 * applies AdamW at the scheduled learning rate. Randomness (dropout) comes
 * from one tr_rng whose state is checkpointed; with the data position, the
 * parameters and the moments that makes a resumed run bit-identical to an
 * uninterrupted one. Each step prints one progress line (docs/trainer.md).
 * With an eval set, every eval_steps steps and at the last step the line
 * also carries the mean loss over the eval set (eval.c), computed after the
 * update; it uses neither the RNG nor the data stream, so evaluating does
 * not change the run, and the latest and best eval losses are checkpointed.
 */
#include "train.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <errno.h>
#include <time.h>
#include <unistd.h>

void tr_train_defaults(tr_train_opts *o)
{
    memset(o, 0, sizeof *o);
    o->model.mode = TR_MODE_LORA;
    o->model.lora = (tr_lora_opts){.rank = 16, .alpha = 32, .dropout = 0.05f,
                                   .targets = (1u << TR_Q) | (1u << TR_V)};
    tr_optim_defaults(&o->optim);
    o->batch_size = 1;
    o->grad_accum = 1;
    o->epochs = 1;
    o->checkpoint_interval = 500;
    o->keep_last = 3;
    o->seed = 42;
    o->resume = true;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The sequences of one step, copied out of the source. */
typedef struct step_batch {
    int n;
    int32_t **ids;
    int32_t **pos; /* NULL entries: one record */
    uint8_t **mask;
    int *len;
    long targets;
    long tokens;
} step_batch;

static void batch_free(step_batch *b)
{
    for (int i = 0; i < b->n; i++) {
        free(b->ids[i]);
        free(b->pos[i]);
        free(b->mask[i]);
    }
    free(b->ids);
    free(b->pos);
    free(b->mask);
    free(b->len);
    memset(b, 0, sizeof *b);
}

static bool batch_fill(step_batch *b, int n, tr_data *d, int vocab, char *err, size_t errsz)
{
    b->n = 0;
    b->ids = xcalloc((size_t)n, sizeof *b->ids);
    b->pos = xcalloc((size_t)n, sizeof *b->pos);
    b->mask = xcalloc((size_t)n, sizeof *b->mask);
    b->len = xcalloc((size_t)n, sizeof *b->len);
    b->targets = b->tokens = 0;
    for (int i = 0; i < n; i++) {
        tr_example ex;
        if (!d->next(d->ctx, &ex, err, errsz)) return false;
        for (int t = 0; t < ex.len; t++)
            if (ex.ids[t] < 0 || ex.ids[t] >= vocab) {
                snprintf(err, errsz, "token id %d at position %d is outside the model's "
                         "vocabulary (0..%d): tokenizer and model do not match", ex.ids[t], t,
                         vocab - 1);
                return false;
            }
        b->ids[i] = xmalloc((size_t)(ex.len + 1) * sizeof(int32_t));
        b->mask[i] = xmalloc((size_t)ex.len + 1);
        memcpy(b->ids[i], ex.ids, (size_t)ex.len * sizeof(int32_t));
        memcpy(b->mask[i], ex.mask, (size_t)ex.len);
        if (ex.pos) {
            b->pos[i] = xmalloc((size_t)(ex.len + 1) * sizeof(int32_t));
            memcpy(b->pos[i], ex.pos, (size_t)ex.len * sizeof(int32_t));
        }
        b->len[i] = ex.len;
        b->n++;
        b->tokens += ex.len;
        for (int t = 1; t < ex.len; t++) b->targets += ex.mask[t] != 0;
    }
    return true;
}

/* "1h02m" style duration */
static void fmt_eta(char *out, size_t n, double s)
{
    if (!isfinite(s) || s < 0) s = 0;
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(out, n, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
    else if (t >= 60) snprintf(out, n, "%ldm%02lds", t / 60, t % 60);
    else snprintf(out, n, "%lds", t);
}

typedef struct run {
    const tr_train_opts *o;
    volatile sig_atomic_t *stop;
    tr_model m;
    tr_backend *be;
    float *m1, *m2;
    tr_train_state st;
    tr_data *data;
    FILE *log;
    double t0, tokens_run;
    long step0;
    char err[1024];
} run;

typedef enum { STEP_OK, STEP_ERROR, STEP_INTERRUPTED } step_result;

/* A stop request in the middle of a step: the step is abandoned and the RNG
 * and data position go back to where the step began (st.data_pos still holds
 * that position), so the checkpoint written next is the state after the last
 * completed step and a resume redoes this one exactly. */
static step_result abandon_step(run *r, const tr_rng *rng_before)
{
    r->st.rng = *rng_before;
    if (r->st.data_pos &&
        !r->data->restore_position(r->data->ctx, r->st.data_pos, r->err, sizeof r->err))
        return STEP_ERROR;
    return STEP_INTERRUPTED;
}

/* Whether the step just done is evaluated: every eval interval, and the
 * last step. */
static bool eval_due(const run *r)
{
    const tr_eval_set *e = r->o->eval;
    if (!e || e->n == 0) return false;
    long every = tr_eval_interval(r->o->eval_steps, r->st.total_steps);
    return r->st.step % every == 0 || r->st.step == r->st.total_steps;
}

/* Evaluates the model as it is after this step; the progress line's eval
 * fields go into out (" eval_loss=... ..."). */
static void evaluate(run *r, char *out, size_t outsz)
{
    const tr_eval_set *e = r->o->eval;
    double t0 = now_s(), v = tr_eval_loss(&r->m, e);
    r->st.eval_loss = v;
    r->st.eval_step = r->st.step;
    if (r->st.best_eval_step < 0 || v < r->st.best_eval_loss) {
        r->st.best_eval_loss = v;
        r->st.best_eval_step = r->st.step;
    }
    snprintf(out, outsz, " eval_loss=%.6f best_eval_loss=%.6f best_eval_step=%ld eval_seqs=%zu/%zu "
             "eval_tokens=%ld eval_s=%.3f", v, r->st.best_eval_loss, r->st.best_eval_step, e->n,
             e->available, e->tokens, now_s() - t0);
}

/* The eval set's token ids fit the model (checked once, before training). */
static bool eval_fits(run *r)
{
    const tr_eval_set *e = r->o->eval;
    for (size_t i = 0; e && i < e->n; i++)
        for (int t = 0; t < e->len[i]; t++)
            if (e->ids[i][t] < 0 || e->ids[i][t] >= r->m.cfg.vocab) {
                snprintf(r->err, sizeof r->err, "eval set %s: token id %d of sequence %zu is "
                         "outside the model's vocabulary (0..%d): tokenizer and model do not "
                         "match", e->source ? e->source : "", e->ids[i][t], i + 1,
                         r->m.cfg.vocab - 1);
                return false;
            }
    return true;
}

/* One optimizer step. */
static step_result train_step(run *r)
{
    const tr_train_opts *o = r->o;
    tr_model *m = &r->m;
    double t_start = now_s();
    tr_rng rng_before = r->st.rng;
    step_batch b;
    if (!batch_fill(&b, o->batch_size * o->grad_accum, r->data, m->cfg.vocab, r->err, sizeof r->err)) {
        batch_free(&b);
        return STEP_ERROR;
    }
    memset(m->grad_data, 0, m->n_floats * sizeof(float));
    double loss = 0;
    float scale = b.targets > 0 ? 1.0f / (float)b.targets : 0.0f;
    for (int i = 0; i < b.n; i++) {
        if (o->fault_phase == 3 && o->fault_step == r->st.step + 1 && i == 1)
            raise(SIGTERM); /* tests: a stop request in the middle of a step */
        if (r->stop && *r->stop) {
            batch_free(&b);
            return abandon_step(r, &rng_before);
        }
        int nt;
        uint64_t dseed = tr_rng_next(&r->st.rng);
        loss += tr_model_loss_backward_packed(m, b.ids[i], b.pos[i], b.mask[i], b.len[i], scale,
                                              dseed, &nt);
    }
    double norm = tr_grad_norm(m->grad_data, m->n_floats);
    if (!isfinite(norm) || !isfinite(loss)) {
        snprintf(r->err, sizeof r->err, "step %ld: the loss (%g) or the gradient norm (%g) is not "
                 "finite: training diverged. Lower --lr (now %g) or keep --max-grad-norm on; the "
                 "checkpoints written so far are intact", r->st.step + 1, loss, norm, o->optim.lr);
        batch_free(&b);
        return STEP_ERROR;
    }
    if (o->optim.max_grad_norm > 0 && norm > o->optim.max_grad_norm) {
        float c = (float)(o->optim.max_grad_norm / (norm + 1e-6));
        for (size_t i = 0; i < m->n_floats; i++) m->grad_data[i] *= c;
    }
    double lr = tr_lr_at(&o->optim, r->st.step, r->st.total_steps);
    tr_adamw_step(&o->optim, m->params, m->n_params, m->param_data, m->grad_data, r->m1, r->m2, lr,
                  r->st.step + 1);
    r->st.step++;
    r->st.last_loss = b.targets ? loss / (double)b.targets : 0;
    r->st.tokens_seen += (double)b.tokens;
    r->tokens_run += (double)b.tokens;
    free(r->st.data_pos);
    r->st.data_pos = r->data->save_position(r->data->ctx, &r->st.epoch);
    double t = now_s();
    char evals[256] = "";
    if (eval_due(r)) evaluate(r, evals, sizeof evals);
    double el = now_s() - r->t0, per_step = el / (double)(r->st.step - r->step0);
    char eta[32];
    fmt_eta(eta, sizeof eta, per_step * (double)(r->st.total_steps - r->st.step));
    fprintf(r->log, "[lathe-train] step=%ld/%ld epoch=%.4f loss=%.6f lr=%.6e grad_norm=%.6f "
            "tokens_per_s=%.1f step_s=%.3f elapsed_s=%.1f eta_s=%.0f eta=%s%s\n",
            r->st.step, r->st.total_steps, r->st.epoch, r->st.last_loss, lr, norm,
            r->tokens_run / el, t - t_start, el,
            per_step * (double)(r->st.total_steps - r->st.step), eta, evals);
    fflush(r->log);
    batch_free(&b);
    return STEP_OK;
}

static bool save_checkpoint(run *r)
{
    const tr_train_opts *o = r->o;
    if (!tr_checkpoint_save(o->checkpoint_dir, &r->m, r->m1, r->m2, &r->st, o, o->keep_last,
                            r->err, sizeof r->err))
        return false;
    fprintf(r->log, "[lathe-train] checkpoint step=%ld path=%s/checkpoint-%ld\n", r->st.step,
            o->checkpoint_dir, r->st.step);
    fflush(r->log);
    return true;
}

/* Picks up the newest checkpoint, if any and if asked. */
static bool maybe_resume(run *r)
{
    char *ck = r->o->resume ? tr_checkpoint_latest(r->o->checkpoint_dir) : NULL;
    if (!ck) {
        r->st.data_pos = r->data->save_position(r->data->ctx, &r->st.epoch);
        return true;
    }
    long total = r->st.total_steps;
    free(r->st.data_pos);
    r->st.data_pos = NULL;
    bool ok = tr_checkpoint_load(ck, &r->m, r->m1, r->m2, &r->st, r->err, sizeof r->err);
    if (ok && r->st.data_pos)
        ok = r->data->restore_position(r->data->ctx, r->st.data_pos, r->err, sizeof r->err);
    if (ok) {
        fprintf(r->log, "[lathe-train] resume step=%ld path=%s\n", r->st.step, ck);
        r->st.total_steps = total;
    }
    free(ck);
    return ok;
}

static long total_steps(const tr_train_opts *o, tr_data *d)
{
    if (o->max_steps > 0) return o->max_steps;
    long per = o->batch_size * o->grad_accum;
    long n = (long)d->epoch_size(d->ctx);
    long steps = (n + per - 1) / per;
    return (steps > 0 ? steps : 1) * (o->epochs > 0 ? o->epochs : 1);
}

/* Removes a folder of plain files (an adapter folder). */
static void remove_files_dir(const char *dir)
{
    const char *names[] = {"adapter_model.safetensors", "adapter_config.json", "model.safetensors",
                           "config.json"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char *p = path_join(dir, names[i]);
        unlink(p);
        free(p);
    }
    rmdir(dir);
}

/* The final adapter, as a whole: written into a sibling folder, then
 * renamed into place (a previous one moved aside first and removed after). */
static int finish(run *r)
{
    char *out = r->o->output_dir ? xstrdup(r->o->output_dir) : path_join(r->o->checkpoint_dir, "final");
    char *tmp = xasprintf("%s.tmp-%ld", out, (long)getpid()), *old = xasprintf("%s.old-%ld", out, (long)getpid());
    remove_files_dir(tmp);
    bool ok = tr_save_adapter_dir(tmp, &r->m, r->o->model_dir, r->err, sizeof r->err);
    bool had_old = ok && dir_exists(out);
    if (ok && ((had_old && rename(out, old) != 0) || rename(tmp, out) != 0)) {
        snprintf(r->err, sizeof r->err, "cannot move the final adapter into %s: %s", out, strerror(errno));
        ok = false;
    }
    if (had_old && ok) remove_files_dir(old);
    if (!ok) remove_files_dir(tmp);
    free(tmp);
    free(old);
    if (ok && r->st.eval_step >= 0)
        fprintf(r->log, "[lathe-train] done step=%ld loss=%.6f eval_loss=%.6f best_eval_loss=%.6f "
                "best_eval_step=%ld adapter=%s\n", r->st.step, r->st.last_loss, r->st.eval_loss,
                r->st.best_eval_loss, r->st.best_eval_step, out);
    else if (ok)
        fprintf(r->log, "[lathe-train] done step=%ld loss=%.6f adapter=%s\n", r->st.step,
                r->st.last_loss, out);
    free(out);
    return ok ? LT_EXIT_OK : LT_EXIT_IO;
}

static int train_loop(run *r, volatile sig_atomic_t *stop)
{
    const tr_train_opts *o = r->o;
    while (r->st.step < r->st.total_steps) {
        step_result sr = train_step(r);
        if (sr == STEP_ERROR) return LT_EXIT_INVALID;
        if (sr == STEP_INTERRUPTED) {
            if (!save_checkpoint(r)) return LT_EXIT_IO;
            fprintf(r->log, "[lathe-train] stopped step=%ld (SIGTERM during step %ld: that step is "
                    "redone on resume): checkpoint saved\n", r->st.step, r->st.step + 1);
            return -1;
        }
        if (o->fault_phase == 1 && o->fault_step == r->st.step) raise(SIGKILL); /* tests */
        bool last = r->st.step == r->st.total_steps;
        bool due = o->checkpoint_interval > 0 && r->st.step % o->checkpoint_interval == 0;
        if ((due || last || (stop && *stop)) && !save_checkpoint(r)) return LT_EXIT_IO;
        if (stop && *stop && !last) {
            fprintf(r->log, "[lathe-train] stopped step=%ld (SIGTERM): checkpoint saved\n",
                    r->st.step);
            return -1;
        }
    }
    return finish(r);
}

int tr_train(const tr_train_opts *o, tr_data *data, volatile sig_atomic_t *stop, void *logp)
{
    run r = {.o = o, .stop = stop, .data = data, .log = logp ? logp : stderr};
    char err[512];
    if (!tr_mkdir_p(o->checkpoint_dir, err, sizeof err)) {
        fprintf(stderr, "lathe train: %s\n", err);
        return LT_EXIT_IO;
    }
    r.be = tr_backend_cpu_create(o->threads);
    tr_model_opts mo = o->model;
    mo.seed = o->seed;
    if (!tr_model_load(&r.m, o->model_dir, &mo, r.be, r.err, sizeof r.err)) {
        fprintf(stderr, "lathe train: %s\n", r.err);
        r.be->destroy(r.be);
        return LT_EXIT_INVALID;
    }
    r.m1 = xcalloc(r.m.n_floats + 1, sizeof(float));
    r.m2 = xcalloc(r.m.n_floats + 1, sizeof(float));
    tr_rng_seed(&r.st.rng, tr_hash64(o->seed, 0x7472616eull));
    r.st.total_steps = total_steps(o, data);
    r.st.eval_step = r.st.best_eval_step = -1;
    r.st.eval_loss = r.st.best_eval_loss = NAN;
    int rc = LT_EXIT_INVALID;
    if (eval_fits(&r) && maybe_resume(&r)) {
        char evals[160] = "";
        if (o->eval && o->eval->n)
            snprintf(evals, sizeof evals, " eval_every=%ld eval_seqs=%zu/%zu eval_tokens=%ld",
                     tr_eval_interval(o->eval_steps, r.st.total_steps), o->eval->n,
                     o->eval->available, o->eval->tokens);
        fprintf(r.log, "[lathe-train] start step=%ld/%ld model=%s mode=%s trainable=%zu "
                "threads=%d%s\n", r.st.step, r.st.total_steps, o->model_dir,
                o->model.mode == TR_MODE_FULL ? "full" : "lora", r.m.n_floats, r.be->threads, evals);
        fflush(r.log);
        r.t0 = now_s();
        r.step0 = r.st.step;
        rc = train_loop(&r, stop);
    }
    if (rc != LT_EXIT_OK && rc != -1 && r.err[0]) fprintf(stderr, "lathe train: %s\n", r.err);
    free(r.st.data_pos);
    free(r.m1);
    free(r.m2);
    tr_model_free(&r.m);
    r.be->destroy(r.be);
    return rc;
}
