/* jsonl_source.c: the trainer's view (tr_data) of a tokenised JSONL
 * dataset (data.h: alpaca, messages or text records, chat template, loss
 * mask on the assistant's tokens, truncation or packing). Sequences come
 * one at a time from a batch-size-1 iterator with seeded per-epoch
 * shuffling; its position (data_pos) is what checkpoints save. The eval set
 * (an eval file read the same way, unpacked, or the records held out of the
 * training file) is copied into a tr_eval_set. */
#include "train.h"

#include "tok/tok.h"
#include "train/data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct jsonl_src {
    tok_tokenizer *tok;
    chat_template tmpl;
    bool have_tmpl;
    data_set *set;
    data_iter *it;
    data_batch batch;
    int32_t *pos; /* [max_seq_len]: positions of the current packed sequence */
} jsonl_src;

static size_t jsonl_epoch_size(void *ctx)
{
    return data_count(((jsonl_src *)ctx)->set);
}

static bool jsonl_next(void *ctx, tr_example *ex, char *err, size_t errsz)
{
    jsonl_src *s = ctx;
    (void)err;
    (void)errsz;
    data_iter_next(s->it, &s->batch);
    ex->ids = s->batch.ids;
    ex->mask = s->batch.mask;
    ex->len = (int)s->batch.lens[0];
    ex->pos = data_positions(s->set, s->batch.seq[0], s->pos) ? s->pos : NULL;
    return true;
}

static char *jsonl_save(void *ctx, double *epoch)
{
    jsonl_src *s = ctx;
    data_pos p = data_iter_tell(s->it);
    if (epoch) *epoch = (double)p.epoch + (p.count ? (double)p.index / (double)p.count : 0);
    return data_pos_format(&p);
}

static bool jsonl_restore(void *ctx, const char *json, char *err, size_t errsz)
{
    jsonl_src *s = ctx;
    data_pos p;
    return data_pos_parse(json, &p, err, errsz) && data_iter_seek(s->it, &p, err, errsz);
}

static void jsonl_destroy(void *ctx)
{
    jsonl_src *s = ctx;
    data_batch_free(&s->batch);
    free(s->pos);
    if (s->it) data_iter_free(s->it);
    if (s->set) data_free(s->set);
    if (s->have_tmpl) chat_template_free(&s->tmpl);
    if (s->tok) tok_free(s->tok);
    free(s);
}

/* The first error of a diag list as one line in err. */
static void first_diag(const diag_list *d, char *err, size_t errsz)
{
    sb s;
    sb_init(&s);
    for (size_t i = 0; i < d->len; i++)
        if (d->items[i].level == DIAG_ERROR) {
            diag_format(&d->items[i], &s);
            break;
        }
    snprintf(err, errsz, "%s", s.len ? sb_str(&s) : "unknown error");
    sb_free(&s);
}

/* Every sequence of a set into the eval set, in file order. */
static void add_all(tr_eval_set *e, const data_set *set)
{
    for (size_t i = 0; i < data_count(set); i++) {
        const int32_t *ids;
        const uint8_t *mask;
        size_t len;
        data_get(set, i, &ids, &mask, &len, NULL);
        tr_eval_set_add(e, ids, mask, (int)len);
    }
}

/* The eval set: the held-out records of the training file, or an eval file
 * read with the same tokenizer and template, one record per sequence. */
static bool load_eval(jsonl_src *s, const tr_jsonl_opts *o, char *err, size_t errsz)
{
    tr_eval_set *e = o->eval_out;
    if (o->eval.split > 0) {
        data_set *held = data_take_holdout(s->set);
        char src[64];
        snprintf(src, sizeof src, "heldout:%g", o->eval.split);
        tr_eval_set_free(e);
        tr_eval_set_init(e, src);
        if (held) add_all(e, held);
        data_free(held);
        if (e->available == 0 || data_count(s->set) == 0) {
            snprintf(err, errsz, "%s: holding out %g of its %zu records leaves %s: %s "
                     "(--eval-split, trainingData.evalSplit)", o->path, o->eval.split,
                     data_get_stats(s->set)->records + e->available,
                     e->available ? "nothing to train on" : "no record for evaluation",
                     e->available ? "lower the share" : "raise the share or give an eval file");
            return false;
        }
        return true;
    }
    if (!o->eval.path) return true;
    data_options opt;
    data_options_init(&opt);
    opt.max_seq_len = (size_t)o->seq_len;
    opt.format = data_get_stats(s->set)->format;
    opt.skip_bad = o->skip_bad;
    diag_list dl;
    diag_list_init(&dl);
    data_set *set = data_load(o->eval.path, s->tok, s->have_tmpl ? &s->tmpl : NULL, &opt, &dl);
    if (!set) first_diag(&dl, err, errsz);
    else if (dl.warnings) diag_print_all(&dl, stderr);
    diag_list_free(&dl);
    if (!set) return false;
    tr_eval_set_free(e);
    tr_eval_set_init(e, o->eval.path);
    add_all(e, set);
    data_free(set);
    if (e->available == 0) {
        snprintf(err, errsz, "%s: the eval file holds no record with a target token (an "
                 "assistant reply, or text)", o->eval.path);
        return false;
    }
    return true;
}

bool tr_jsonl_source_open(tr_data *d, const tr_jsonl_opts *o, char **summary, char *err,
                          size_t errsz)
{
    if (o->eval_out) tr_eval_set_init(o->eval_out, NULL);
    jsonl_src *s = xcalloc(1, sizeof *s);
    diag_list dl;
    diag_list_init(&dl);
    bool ok = (s->tok = tok_load(o->tokenizer, &dl)) != NULL;
    if (!ok) first_diag(&dl, err, errsz);
    diag_list_free(&dl);
    if (ok) { /* the template is needed by alpaca and messages records only */
        diag_list_init(&dl);
        s->have_tmpl = chat_template_for_tokenizer(s->tok, o->chat_template, &s->tmpl, &dl);
        if (!s->have_tmpl && o->chat_template) {
            first_diag(&dl, err, errsz);
            ok = false;
        }
        diag_list_free(&dl);
    }
    if (ok) {
        data_options opt;
        data_options_init(&opt);
        opt.max_seq_len = (size_t)o->seq_len;
        opt.pack = o->pack;
        opt.skip_bad = o->skip_bad;
        opt.holdout = o->eval.split;
        opt.holdout_seed = o->seed;
        diag_list_init(&dl);
        s->set = data_load(o->path, s->tok, s->have_tmpl ? &s->tmpl : NULL, &opt, &dl);
        if (!s->set) first_diag(&dl, err, errsz);
        if (s->set && dl.warnings && summary) diag_print_all(&dl, stderr);
        diag_list_free(&dl);
        ok = s->set != NULL;
    }
    if (ok && o->eval_out) ok = load_eval(s, o, err, errsz);
    if (ok) {
        s->pos = xcalloc(data_max_seq_len(s->set) + 1, sizeof *s->pos);
        data_iter_options io = {.batch_size = 1, .shuffle = true, .seed = o->seed};
        s->it = data_iter_new(s->set, &io, err, errsz);
        ok = s->it != NULL;
    }
    if (!ok) {
        jsonl_destroy(s);
        return false;
    }
    if (summary) {
        const data_stats *st = data_get_stats(s->set);
        sb t;
        sb_init(&t);
        sb_printf(&t, "data %s: %s records, %zu sequences, %llu tokens (%llu targets), %zu truncated, "
                  "%zu skipped", o->path, data_format_name(st->format), st->sequences,
                  (unsigned long long)st->tokens, (unsigned long long)st->targets, st->truncated,
                  st->skipped);
        if (s->have_tmpl) {
            sb_puts(&t, "; chat template ");
            chat_template_describe(&s->tmpl, &t);
        }
        if (o->eval_out && o->eval_out->available)
            sb_printf(&t, "; eval set %s: %zu sequences (%zu kept, %ld tokens; at most %d "
                      "sequences and %d tokens are evaluated)", o->eval_out->source,
                      o->eval_out->available, o->eval_out->n, o->eval_out->tokens,
                      TR_EVAL_MAX_SEQUENCES, TR_EVAL_MAX_TOKENS);
        *summary = sb_take(&t);
    }
    *d = (tr_data){s, jsonl_epoch_size, jsonl_next, jsonl_save, jsonl_restore, jsonl_destroy};
    return true;
}
