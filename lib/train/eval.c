/* eval.c: the trainer's eval set and its loss. An eval set is a fixed list
 * of sequences (copied out of a data source when it is opened, cut at
 * TR_EVAL_MAX_SEQUENCES sequences and TR_EVAL_MAX_TOKENS tokens so one
 * evaluation takes bounded time); its loss is the mean cross-entropy per
 * target token, computed one sequence at a time with tr_model_loss, which
 * takes no gradients, applies no dropout and draws no random numbers: an
 * evaluation changes nothing a resumed run depends on. */
#include "train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void tr_eval_set_init(tr_eval_set *e, const char *source)
{
    memset(e, 0, sizeof *e);
    e->source = source ? xstrdup(source) : NULL;
}

void tr_eval_set_add(tr_eval_set *e, const int32_t *ids, const uint8_t *mask, int len)
{
    long targets = 0;
    for (int t = 1; t < len; t++) targets += mask[t] != 0;
    if (targets == 0) return;
    e->available++;
    if (e->n >= TR_EVAL_MAX_SEQUENCES || e->tokens + len > TR_EVAL_MAX_TOKENS ||
        e->n < e->available - 1) /* once one is left out, every later one is too */
        return;
    e->ids = xrealloc(e->ids, (e->n + 1) * sizeof *e->ids);
    e->mask = xrealloc(e->mask, (e->n + 1) * sizeof *e->mask);
    e->len = xrealloc(e->len, (e->n + 1) * sizeof *e->len);
    e->ids[e->n] = xmalloc((size_t)len * sizeof(int32_t));
    e->mask[e->n] = xmalloc((size_t)len);
    memcpy(e->ids[e->n], ids, (size_t)len * sizeof(int32_t));
    memcpy(e->mask[e->n], mask, (size_t)len);
    e->len[e->n] = len;
    e->n++;
    e->tokens += len;
    e->targets += targets;
}

void tr_eval_set_free(tr_eval_set *e)
{
    for (size_t i = 0; i < e->n; i++) {
        free(e->ids[i]);
        free(e->mask[i]);
    }
    free(e->ids);
    free(e->mask);
    free(e->len);
    free(e->source);
    memset(e, 0, sizeof *e);
}

double tr_eval_loss(tr_model *m, const tr_eval_set *e)
{
    double sum = 0;
    long targets = 0;
    for (size_t i = 0; i < e->n; i++) {
        int nt = 0;
        sum += tr_model_loss(m, e->ids[i], e->mask[i], e->len[i], &nt);
        targets += nt;
    }
    return targets > 0 ? sum / (double)targets : NAN;
}

long tr_eval_interval(long every, long total)
{
    if (every > 0) return every;
    long n = (total + 9) / 10;
    return n > 0 ? n : 1;
}
