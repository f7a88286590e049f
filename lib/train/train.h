/* train.h: the built-in trainer, what the `train` part offers.
 *
 *   - optimizer:    AdamW, learning-rate schedule, clipping (optim.c)
 *   - data:         the trainer's view of a dataset (tr_data): a built-in
 *                   plain-text byte source (text_source.c) and JSONL
 *                   (jsonl_source.c) through the JSONL records, loss masks
 *                   and batch iterator of data.h (data.c, data_iter.c),
 *                   which use the tokenizer and chat templates of lib/tok
 *   - evaluation:   the eval set (a file or a held-out share of the data)
 *                   and its mean loss (eval.c)
 *   - checkpoints:  PEFT adapter folders, trainer state, resume (checkpoint.c)
 *   - trainer:      the training loop and its progress line (trainer.c)
 *
 * The part sits on top of the model's stack and nothing below it depends on
 * it: it uses lib/nn (the model, its backends, rng, init-model's
 * tr_mkdir_p), lib/hf (safetensors and config.json in checkpoints) and
 * lib/tok (through data.h). This header includes nn/nn.h (and so hf/hf.h)
 * and train/data.h (and so tok/tok.h), so a user of the trainer includes
 * "train/train.h" alone. Until the split (issue 11) lib/train also held the
 * file formats (now lib/hf), the tokenizer and chat templates (lib/tok) and
 * the model (lib/nn); the names did not change.
 *
 * Errors: functions that can fail return false (or NULL) and write a message
 * naming the file, the field and the fix into err[errsz].
 * Nothing here keeps global mutable state; every buffer belongs to a struct
 * its caller owns and frees with the matching *_free.
 */
#ifndef LATHE_TRAIN_H
#define LATHE_TRAIN_H

#include "base/base.h"
#include "hf/hf.h"
#include "nn/nn.h"
#include "train/data.h"

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ======================================================================
 * optimizer
 * ====================================================================== */
typedef enum { TR_SCHED_COSINE, TR_SCHED_LINEAR, TR_SCHED_CONSTANT } tr_schedule;

typedef struct tr_optim_opts {
    double lr, weight_decay, beta1, beta2, eps, max_grad_norm;
    int warmup_steps;
    tr_schedule schedule;
} tr_optim_opts;

/* Hugging Face's defaults: lr 2e-4, betas 0.9/0.999, eps 1e-8, no decay,
 * clipping at 1.0, cosine, no warmup. */
void tr_optim_defaults(tr_optim_opts *o);
/* Parses "cosine" / "linear" / "constant". */
bool tr_schedule_parse(const char *s, tr_schedule *out);
const char *tr_schedule_name(tr_schedule s);
/* The learning rate of optimizer step `step` (0-based) of `total`. */
double tr_lr_at(const tr_optim_opts *o, long step, long total);
/* Global L2 norm of g[0..n) (double accumulation, fixed order). */
double tr_grad_norm(const float *g, size_t n);
/* One AdamW step over the parameters (torch semantics, decoupled decay),
 * t = 1-based step count for bias correction. */
void tr_adamw_step(const tr_optim_opts *o, const tr_param *params, size_t n_params,
                   float *p, const float *g, float *m, float *v, double lr, long t);

/* ======================================================================
 * data: what the trainer needs from a dataset
 * ====================================================================== */
typedef struct tr_example {
    const int32_t *ids;
    const uint8_t *mask; /* 1 = predict this token */
    const int32_t *pos;  /* packed records: each token's position in its
                            record (0 where one begins); NULL = one record */
    int len;
} tr_example;

/* A dataset seen as an endless, epoch-wise shuffled stream of examples whose
 * position can be saved and restored exactly. */
typedef struct tr_data {
    void *ctx;
    size_t (*epoch_size)(void *ctx);
    /* The next example (valid until the next call); wraps into the next epoch. */
    bool (*next)(void *ctx, tr_example *ex, char *err, size_t errsz);
    /* Where the stream stands, as a JSON object (caller frees); fractional
     * epoch for reports. */
    char *(*save_position)(void *ctx, double *epoch);
    /* Moves to a saved position; false when it belongs to other data. */
    bool (*restore_position)(void *ctx, const char *json, char *err, size_t errsz);
    void (*destroy)(void *ctx);
} tr_data;

/* ======================================================================
 * evaluation: a fixed set of sequences and their mean loss
 * ====================================================================== */
/* The eval set is cut to bound the time an evaluation takes: sequences are
 * taken in the eval data's own order (file order) while at most
 * TR_EVAL_MAX_SEQUENCES sequences and TR_EVAL_MAX_TOKENS tokens are kept;
 * the rest are counted (available) and left out. */
#define TR_EVAL_MAX_SEQUENCES 256
#define TR_EVAL_MAX_TOKENS 65536

typedef struct tr_eval_set {
    size_t n;          /* sequences kept */
    size_t available;  /* sequences the eval data had, before the cap */
    int32_t **ids;
    uint8_t **mask;    /* 1 = a target (as tr_example) */
    int *len;
    long tokens, targets; /* of the kept sequences (targets: mask at j >= 1) */
    char *source;      /* what it is, no spaces: "FILE" or "heldout:0.05" */
} tr_eval_set;

/* Where the eval set of a data source comes from: a file in the training
 * data's form, or a share of the training data held out (deterministic by
 * the source's seed; those records or windows are not trained on). */
typedef struct tr_eval_opts {
    const char *path;  /* NULL = none */
    double split;      /* in (0, 0.5); 0 = none; not with path */
} tr_eval_opts;

void tr_eval_set_init(tr_eval_set *e, const char *source);
/* Adds a copy of one sequence, or only counts it when a cap is reached (or
 * it holds no target). */
void tr_eval_set_add(tr_eval_set *e, const int32_t *ids, const uint8_t *mask, int len);
void tr_eval_set_free(tr_eval_set *e);
/* The mean loss per target token of the model over the set: the sum of
 * tr_model_loss over its sequences (no gradients, no dropout, no random
 * draws) over their target count; NAN for a set without targets. */
double tr_eval_loss(tr_model *m, const tr_eval_set *e);
/* The evaluation interval in steps: every, or when 0 about ten per run
 * (ceil(total / 10)). */
long tr_eval_interval(long every, long total);

/* The built-in plain-text source: the bytes of a file as token ids
 * (byte + id_offset), cut into windows of seq_len + 1 tokens, all predicted,
 * shuffled per epoch with seed. */
bool tr_text_source_open(tr_data *d, const char *path, int seq_len, int id_offset,
                         uint64_t seed, char *err, size_t errsz);
/* The same with an eval set (ev may be NULL): the windows of ev->path in
 * file order, or the windows that a hash of (seed, window) holds out for
 * ev->split, which the training stream then skips. *eval is initialised
 * (empty when none is asked); the caller frees it. */
bool tr_text_source_open_eval(tr_data *d, const char *path, int seq_len, int id_offset,
                              uint64_t seed, const tr_eval_opts *ev, tr_eval_set *eval,
                              char *err, size_t errsz);

/* JSONL data (alpaca, messages or text records), read by data.h with the
 * tokenizer and chat template of lib/tok. */
typedef struct tr_jsonl_opts {
    const char *path;
    const char *tokenizer;     /* tokenizer.json or a folder holding one */
    const char *chat_template; /* a family name to force, or NULL to detect */
    int seq_len;
    bool pack, skip_bad;
    uint64_t seed;
    tr_eval_opts eval;         /* the eval set: a file or a held-out share */
    tr_eval_set *eval_out;     /* receives it (initialised; may be NULL when
                                  no eval set is asked) */
} tr_jsonl_opts;

/* Opens a JSONL dataset; *summary (may be NULL) gets a one-line description
 * (records, sequences, tokens, template; the eval set) the caller frees.
 * An eval file is read with the same tokenizer, template and truncation,
 * one unpacked sequence per record; a held-out share takes the records
 * data_line_held_out picks for (split, seed) out of the training set. */
bool tr_jsonl_source_open(tr_data *d, const tr_jsonl_opts *o, char **summary, char *err,
                          size_t errsz);

/* ======================================================================
 * trainer
 * ====================================================================== */
typedef struct tr_train_opts {
    const char *model_dir;
    const char *checkpoint_dir;  /* required */
    const char *output_dir;      /* the final adapter; NULL = CHECKPOINT_DIR/final */
    tr_model_opts model;
    tr_optim_opts optim;
    int batch_size, grad_accum;
    int epochs;
    long max_steps;              /* 0 = from epochs */
    int checkpoint_interval;     /* steps; 0 = only at the end and on SIGTERM */
    const tr_eval_set *eval;     /* evaluated every eval_steps and at the last
                                    step; NULL or empty = no evaluation */
    long eval_steps;             /* 0 = about ten evaluations per run */
    int keep_last;               /* checkpoints kept (default 3) */
    uint64_t seed;
    bool resume;                 /* continue from the newest checkpoint */
    int threads;
    /* fault injection for tests, at step fault_step: phase 1 SIGKILL after
     * the update, 2 SIGKILL halfway through the checkpoint write, 3 SIGTERM
     * after the step's first sequence */
    long fault_step;
    int fault_phase;
} tr_train_opts;

void tr_train_defaults(tr_train_opts *o);

/* Trains; prints one progress line per step to `log` (FILE*, stderr when
 * NULL; format in docs/trainer.md). When *stop becomes non-zero (stop may be
 * NULL) it abandons the step in progress, writes a checkpoint of the last
 * completed step and returns -1. Otherwise returns an LT_EXIT_* code. The
 * data source is used, not owned. */
int tr_train(const tr_train_opts *o, tr_data *data, volatile sig_atomic_t *stop, void *log);

/* Checkpoint folders (checkpoint.c). */
typedef struct tr_train_state {
    long step;          /* optimizer steps done */
    long total_steps;
    char *data_pos;     /* the data source's position (JSON object), owned */
    double epoch;       /* fractional epoch, for reports */
    tr_rng rng;
    double last_loss;   /* mean loss of the last step */
    double tokens_seen;
    /* evaluations: the latest and the lowest (step -1 and NAN: none yet) */
    long eval_step, best_eval_step;
    double eval_loss, best_eval_loss;
} tr_train_state;

/* Writes CHECKPOINT_DIR/checkpoint-<step>/ atomically (aside, fsync, rename)
 * and keeps the newest keep_last, and the one at s->best_eval_step when it
 * was saved (the adapter of the best eval loss). m1/m2 are the AdamW
 * moments. */
bool tr_checkpoint_save(const char *dir, const tr_model *m, const float *m1, const float *m2,
                        const tr_train_state *s, const tr_train_opts *o, int keep_last,
                        char *err, size_t errsz);
/* The newest complete checkpoint folder in dir (caller frees), or NULL. */
char *tr_checkpoint_latest(const char *dir);
/* Restores parameters, moments and state (s->data_pos allocated) from a
 * checkpoint folder. */
bool tr_checkpoint_load(const char *ckpt, tr_model *m, float *m1, float *m2,
                        tr_train_state *s, char *err, size_t errsz);
/* Writes the adapter folder (adapter_model.safetensors + adapter_config.json,
 * or model.safetensors + config.json in full mode), created if needed. */
bool tr_save_adapter_dir(const char *dir, const tr_model *m, const char *base_model_path,
                         char *err, size_t errsz);

#endif
