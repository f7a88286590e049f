/* jsonl_source.c: the trainer's view (tr_data) of a tokenised JSONL
 * dataset (data.h: alpaca, messages or text records, chat template, loss
 * mask on the assistant's tokens, truncation or packing). Sequences come
 * one at a time from a batch-size-1 iterator with seeded per-epoch
 * shuffling; its position (data_pos) is what checkpoints save. */
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

bool tr_jsonl_source_open(tr_data *d, const tr_jsonl_opts *o, char **summary, char *err,
                          size_t errsz)
{
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
        diag_list_init(&dl);
        s->set = data_load(o->path, s->tok, s->have_tmpl ? &s->tmpl : NULL, &opt, &dl);
        if (!s->set) first_diag(&dl, err, errsz);
        if (s->set && dl.warnings && summary) diag_print_all(&dl, stderr);
        diag_list_free(&dl);
        ok = s->set != NULL;
    }
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
        *summary = sb_take(&t);
    }
    *d = (tr_data){s, jsonl_epoch_size, jsonl_next, jsonl_save, jsonl_restore, jsonl_destroy};
    return true;
}
