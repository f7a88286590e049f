/* exec_tally.c: what the polls of one attempt found, whatever the backend:
 * progress points and checkpoints in step order, each reported once across
 * sources (log lines, trainer_state.json, logging.jsonl) and polls, the
 * trainer's `done` line and the first out-of-memory line. */
#include "exec_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void exec_tally_init(exec_tally *t)
{
    memset(t, 0, sizeof *t);
    t->last_step = t->last_ckpt = t->total_steps = -1;
}

void exec_tally_clear(exec_tally *t)
{
    for (size_t i = 0; i < t->n_cks; i++) free(t->cks[i].path);
    t->n_cks = 0;
    t->n_pts = 0;
}

void exec_tally_free(exec_tally *t)
{
    exec_tally_clear(t);
    free(t->cks);
    free(t->pts);
    free(t->adapter);
    memset(t, 0, sizeof *t);
}

void exec_tally_point(exec_tally *t, exec_progress p, double now)
{
    /* an evaluation of the last step, reported after it (ms-swift's eval
     * line): joins its point when that is still here, else is a point of
     * its own at that step (the store merges the two) */
    if (p.step == t->last_step && !isnan(p.eval_loss) && isnan(p.loss)) {
        if (t->n_pts && t->pts[t->n_pts - 1].step == p.step) {
            t->pts[t->n_pts - 1].eval_loss = p.eval_loss;
            return;
        }
        t->last_step = p.step - 1; /* let it in below */
    }
    if (p.step <= t->last_step) return;
    if (p.total_steps < 0) p.total_steps = t->total_steps;
    p.at = now;
    if (t->n_pts == t->cap_pts) {
        t->cap_pts = t->cap_pts ? t->cap_pts * 2 : 32;
        t->pts = xrealloc(t->pts, t->cap_pts * sizeof *t->pts);
    }
    t->pts[t->n_pts++] = p;
    t->last_step = p.step;
}

void exec_tally_checkpoint(exec_tally *t, int64_t step, const char *path)
{
    if (step <= t->last_ckpt) return;
    if (t->n_cks == t->cap_cks) {
        t->cap_cks = t->cap_cks ? t->cap_cks * 2 : 4;
        t->cks = xrealloc(t->cks, t->cap_cks * sizeof *t->cks);
    }
    t->cks[t->n_cks].step = step;
    t->cks[t->n_cks].path = xstrdup(path);
    t->n_cks++;
    t->last_ckpt = step;
}

void exec_tally_line(exec_tally *t, const char *line, size_t len, double now)
{
    t->lines++;
    if (!t->oom_line && exec_line_is_oom(line, len)) {
        t->oom_line = true;
        t->oom_line_no = t->lines;
        snprintf(t->oom_text, sizeof t->oom_text, "%.*s", (int)(len < 159 ? len : 159), line);
    }
    exec_progress p;
    char path[4096];
    switch (exec_parse_train_line(line, len, &p, path, sizeof path)) {
    case EXEC_LINE_START:
        if (p.total_steps >= 0) t->total_steps = p.total_steps;
        break;
    case EXEC_LINE_STEP: exec_tally_point(t, p, now); break;
    case EXEC_LINE_CHECKPOINT: exec_tally_checkpoint(t, p.step, path); break;
    case EXEC_LINE_RESUME:
        if (p.step > t->last_ckpt) t->last_ckpt = p.step; /* reported by its own attempt */
        break;
    case EXEC_LINE_DONE:
        t->done = true;
        free(t->adapter);
        t->adapter = xstrdup(path);
        if (!isnan(p.loss)) exec_tally_point(t, p, now);
        break;
    default: break;
    }
}

void exec_tally_update(const exec_tally *t, exec_update *up)
{
    memset(up, 0, sizeof *up);
    up->points = t->pts;
    up->n_points = t->n_pts;
    up->checkpoints = t->cks;
    up->n_checkpoints = t->n_cks;
    up->done = t->done;
    up->adapter = t->adapter;
}
