/* test_exec_progress_eval.c: eval losses through the progress formats: the
 * built-in trainer's step and done lines (eval_loss, best_eval_*), Hugging
 * Face log_history evaluation entries (joined to the training entry of
 * their step, before or after it, or a point of their own), ms-swift's
 * evaluation lines, and the tally that joins an evaluation reported after
 * its step to that step's point, within a poll or across polls. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "exec/exec.h"
#include "exec/exec_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static exec_line_kind parse(const char *line, exec_progress *p)
{
    char path[256];
    return exec_parse_train_line(line, strlen(line), p, path, sizeof path);
}

static void test_lathe_lines(void **state)
{
    (void)state;
    exec_progress p;
    assert_int_equal(parse("[lathe-train] step=120/1200 epoch=0.1000 loss=1.912000 lr=1.48e-04 "
                           "grad_norm=0.7 tokens_per_s=1230.1 step_s=0.420 elapsed_s=51.0 eta_s=459 "
                           "eta=7m39s eval_loss=1.987654 best_eval_loss=1.987654 best_eval_step=120 "
                           "eval_seqs=256/400 eval_tokens=61234 eval_s=6.210",
                           &p),
                     EXEC_LINE_STEP);
    assert_int_equal(p.step, 120);
    assert_true(fabs(p.loss - 1.912) < 1e-12);
    assert_true(fabs(p.eval_loss - 1.987654) < 1e-12);
    assert_int_equal(parse("[lathe-train] step=121/1200 loss=1.9", &p), EXEC_LINE_STEP);
    assert_true(isnan(p.eval_loss));
    assert_int_equal(parse("[lathe-train] done step=1200 loss=1.2345 eval_loss=1.402 "
                           "best_eval_loss=1.398 best_eval_step=1080 adapter=/ckpt/final",
                           &p),
                     EXEC_LINE_DONE);
    assert_true(fabs(p.eval_loss - 1.402) < 1e-12);
    assert_int_equal(parse("[lathe-train] step=3/9 loss=1 eval_loss=nan?", &p), EXEC_LINE_STEP);
    assert_true(isnan(p.eval_loss));
}

static void test_hf_eval_entries(void **state)
{
    (void)state;
    /* eval at 20 after its training entry, at 30 before it, at 35 alone */
    const char *text =
        "{\"max_steps\": 40, \"log_history\": ["
        "{\"loss\": 2.0, \"learning_rate\": 1e-4, \"epoch\": 0.1, \"step\": 10},"
        "{\"loss\": 1.8, \"learning_rate\": 9e-5, \"epoch\": 0.2, \"step\": 20},"
        "{\"eval_loss\": 1.9, \"eval_runtime\": 3.2, \"epoch\": 0.2, \"step\": 20},"
        "{\"eval_loss\": 1.7, \"epoch\": 0.3, \"step\": 30},"
        "{\"loss\": 1.6, \"learning_rate\": 8e-5, \"epoch\": 0.3, \"step\": 30},"
        "{\"eval_loss\": 1.65, \"epoch\": 0.35, \"step\": 35},"
        "{\"train_runtime\": 70.0, \"train_loss\": 1.8, \"epoch\": 0.4, \"step\": 40}]}";
    exec_progress *pts;
    size_t n;
    char err[256];
    assert_true(exec_parse_hf_state(text, strlen(text), "s.json", -1, &pts, &n, err, sizeof err));
    assert_int_equal(n, 4);
    assert_int_equal(pts[0].step, 10);
    assert_true(isnan(pts[0].eval_loss));
    assert_int_equal(pts[1].step, 20);
    assert_true(fabs(pts[1].loss - 1.8) < 1e-12 && fabs(pts[1].eval_loss - 1.9) < 1e-12);
    assert_true(fabs(pts[1].learning_rate - 9e-5) < 1e-15);
    assert_int_equal(pts[2].step, 30);
    assert_true(fabs(pts[2].loss - 1.6) < 1e-12 && fabs(pts[2].eval_loss - 1.7) < 1e-12);
    assert_true(fabs(pts[2].learning_rate - 8e-5) < 1e-15);
    assert_int_equal(pts[3].step, 35); /* an evaluation alone */
    assert_true(isnan(pts[3].loss) && fabs(pts[3].eval_loss - 1.65) < 1e-12);
    assert_int_equal(pts[3].total_steps, 40);
    free(pts);
    assert_true(exec_parse_hf_state(text, strlen(text), "s.json", 30, &pts, &n, err, sizeof err));
    assert_int_equal(n, 1);
    assert_int_equal(pts[0].step, 35);
    free(pts);
}

/* An evaluation reported after its step: joined within a poll, a point of
 * that step across polls (the store merges it), never twice the step. */
static void test_tally_joins_evaluations(void **state)
{
    (void)state;
    exec_tally t;
    exec_tally_init(&t);
    const char *l = "[lathe-train] step=4/8 loss=1.5 eval_loss=1.6";
    exec_tally_line(&t, l, strlen(l), 100);
    assert_int_equal(t.n_pts, 1);
    assert_true(fabs(t.pts[0].eval_loss - 1.6) < 1e-12);
    exec_progress p;
    const char *train = "{\"loss\": 1.4, \"global_step/max_steps\": \"5/8\"}";
    const char *eval = "{\"eval_loss\": 1.55, \"global_step/max_steps\": \"5/8\"}";
    assert_true(exec_parse_swift_line(train, strlen(train), &p));
    exec_tally_point(&t, p, 101);
    assert_true(exec_parse_swift_line(eval, strlen(eval), &p));
    exec_tally_point(&t, p, 102);
    assert_int_equal(t.n_pts, 2); /* joined */
    assert_true(fabs(t.pts[1].loss - 1.4) < 1e-12 && fabs(t.pts[1].eval_loss - 1.55) < 1e-12);
    exec_tally_point(&t, p, 103); /* the same again: nothing new */
    assert_int_equal(t.n_pts, 2);
    exec_tally_clear(&t); /* the poll is over */
    train = "{\"loss\": 1.3, \"global_step/max_steps\": \"6/8\"}";
    eval = "{\"eval_loss\": 1.5, \"global_step/max_steps\": \"6/8\"}";
    assert_true(exec_parse_swift_line(train, strlen(train), &p));
    exec_tally_point(&t, p, 104);
    exec_tally_clear(&t);
    assert_true(exec_parse_swift_line(eval, strlen(eval), &p));
    exec_tally_point(&t, p, 105); /* its step went out with the last poll */
    assert_int_equal(t.n_pts, 1);
    assert_int_equal(t.pts[0].step, 6);
    assert_int_equal(t.pts[0].total_steps, 8);
    assert_true(isnan(t.pts[0].loss) && fabs(t.pts[0].eval_loss - 1.5) < 1e-12);
    assert_int_equal(t.last_step, 6);
    /* an older step's evaluation is not taken */
    const char *old = "{\"eval_loss\": 1.0, \"global_step/max_steps\": \"5/8\"}";
    assert_true(exec_parse_swift_line(old, strlen(old), &p));
    exec_tally_point(&t, p, 106);
    assert_int_equal(t.n_pts, 1);
    exec_tally_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lathe_lines),
        cmocka_unit_test(test_hf_eval_entries),
        cmocka_unit_test(test_tally_joins_evaluations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
