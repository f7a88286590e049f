/* test_trainer.c: the training loop and its outputs: the loss goes down on
 * learnable data, checkpoint folders hold exactly what PEFT and the seed
 * expect (file set, adapter_config.json keys of PEFT 0.18, tensor names and
 * shapes, training_metadata.json fields), only the newest N are kept, the
 * PEFT initialisation, the learning-rate schedule and AdamW; evaluation:
 * a held-out share of a text is disjoint from what is trained on and the
 * same for a seed, the eval set's cap, and the eval loss the trainer
 * reports (progress line, trainer_state.json) equals tr_model_loss over
 * the eval set averaged by hand with the final adapter. */
#include "test_util.h"

#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#define GOLD LATHE_SOURCE_DIR "/tests/ref/models/llama2c-260K-plctlab/hf"

static char *write_text_file(const char *dir, const char *text, int repeats)
{
    sb s;
    sb_init(&s);
    for (int i = 0; i < repeats; i++) sb_puts(&s, text);
    char *p = path_join(dir, "data.txt");
    assert_int_equal(file_write_atomic(p, s.buf, s.len), 0);
    sb_free(&s);
    return p;
}

static json_t *load_json(const char *dir, const char *name)
{
    char *p = path_join(dir, name);
    json_error_t e;
    json_t *j = json_load_file(p, 0, &e);
    if (!j) fprintf(stderr, "%s: %s\n", p, e.text);
    assert_non_null(j);
    free(p);
    return j;
}

/* Runs the trainer on the golden model with a repeated phrase. */
static int run_train(const char *ckdir, const char *text, long steps, int interval, FILE *log)
{
    tr_train_opts o;
    tr_train_defaults(&o);
    o.model_dir = GOLD;
    o.checkpoint_dir = ckdir;
    o.max_steps = steps;
    o.checkpoint_interval = interval;
    o.keep_last = 2;
    o.model.lora = (tr_lora_opts){.rank = 4, .alpha = 8, .dropout = 0.05f,
                                  .targets = (1u << TR_Q) | (1u << TR_V) | (1u << TR_DOWN)};
    o.optim.lr = 1e-2;
    o.optim.warmup_steps = 2;
    o.batch_size = 2;
    o.threads = 2;
    tr_data d;
    char err[256];
    assert_true(tr_text_source_open(&d, text, 32, 300, 1, err, sizeof err)); /* ids 300.. are trained tokens */
    int rc = tr_train(&o, &d, NULL, log);
    d.destroy(d.ctx);
    return rc;
}

static double loss_on_line(const char *line)
{
    const char *p = strstr(line, "loss=");
    return p ? atof(p + 5) : NAN;
}

static void test_loss_decreases_and_outputs(void **state)
{
    (void)state;
    char *dir = tu_tempdir();
    char *text = write_text_file(dir, "the cat sat on the mat. ", 64);
    char *ck = path_join(dir, "ck");
    char *logp = path_join(dir, "log");
    FILE *log = fopen(logp, "w+");
    assert_int_equal(run_train(ck, text, 30, 4, log), 0);
    rewind(log);
    char line[512];
    double first = NAN, last = NAN;
    int steps = 0;
    while (fgets(line, sizeof line, log)) {
        if (!strstr(line, "] step=")) continue;
        steps++;
        /* every progress line carries the documented fields */
        assert_non_null(strstr(line, "lr="));
        assert_non_null(strstr(line, "tokens_per_s="));
        assert_non_null(strstr(line, "eta_s="));
        if (isnan(first)) first = loss_on_line(line);
        last = loss_on_line(line);
    }
    fclose(log);
    printf("# loss %.3f -> %.3f over %d steps\n", first, last, steps);
    assert_int_equal(steps, 30);
    assert_true(last < 0.5 * first);

    /* the newest 2 checkpoints (28 and the final step 30) and the final adapter */
    char *c28 = path_join(ck, "checkpoint-28"), *c30 = path_join(ck, "checkpoint-30");
    char *c24 = path_join(ck, "checkpoint-24"), *fin = path_join(ck, "final");
    assert_true(dir_exists(c28) && dir_exists(c30) && dir_exists(fin));
    assert_false(dir_exists(c24));
    const char *files[] = {"adapter_model.safetensors", "adapter_config.json", "optimizer.safetensors",
                           "trainer_state.json", "training_metadata.json"};
    for (size_t i = 0; i < 5; i++) {
        char *p = path_join(c30, files[i]);
        assert_true(file_exists(p));
        free(p);
    }

    /* adapter_config.json: exactly PEFT 0.18's keys */
    json_t *ref = load_json(LATHE_SOURCE_DIR "/tests/ref/models/peft-reference-phi15-r4", "adapter_config.json");
    json_t *cfg = load_json(fin, "adapter_config.json");
    assert_int_equal(json_object_size(cfg), json_object_size(ref));
    const char *key;
    json_t *val;
    json_object_foreach(ref, key, val) {
        if (!json_object_get(cfg, key)) fprintf(stderr, "missing key %s\n", key);
        assert_non_null(json_object_get(cfg, key));
    }
    assert_int_equal(json_integer_value(json_object_get(cfg, "r")), 4);
    assert_int_equal(json_integer_value(json_object_get(cfg, "lora_alpha")), 8);
    json_t *tm = json_object_get(cfg, "target_modules");
    assert_int_equal(json_array_size(tm), 3);
    assert_string_equal(json_string_value(json_array_get(tm, 2)), "down_proj");
    json_decref(ref);
    json_decref(cfg);

    /* tensor names and shapes: [r, in] and [out, r] */
    st_archive a;
    char err[256];
    char *ap = path_join(fin, "adapter_model.safetensors");
    assert_true(st_open(&a, ap, err, sizeof err));
    assert_int_equal(a.n, 5 * 3 * 2);
    const st_tensor *t = st_find(&a, "base_model.model.model.layers.4.self_attn.v_proj.lora_A.weight");
    assert_non_null(t);
    assert_true(t->ndim == 2 && t->shape[0] == 4 && t->shape[1] == 64);
    t = st_find(&a, "base_model.model.model.layers.0.mlp.down_proj.lora_B.weight");
    assert_true(t && t->shape[0] == 64 && t->shape[1] == 4 && t->dtype == TR_F32);
    assert_string_equal(a.metadata_json, "{\"format\":\"pt\"}");
    st_close(&a);
    free(ap);

    /* the seed's training_metadata.json */
    json_t *md = load_json(c30, "training_metadata.json");
    assert_int_equal(json_integer_value(json_object_get(md, "global_step")), 30);
    assert_int_equal(json_integer_value(json_object_get(md, "lora_rank")), 4);
    assert_true(json_is_number(json_object_get(md, "epoch")));
    assert_true(fabs(json_number_value(json_object_get(md, "loss")) - last) < 1e-5);
    assert_true(json_is_string(json_object_get(md, "timestamp")));
    json_decref(md);

    /* the adapter loads back into a model and changes its output */
    tr_backend *be = tr_backend_cpu_create(2);
    tr_model m;
    tr_model_opts mo = {.mode = TR_MODE_LORA};
    assert_true(tr_model_load(&m, GOLD, &mo, be, err, sizeof err));
    int32_t ids[8] = {1, 300 + 't', 300 + 'h', 300 + 'e', 300 + ' ', 300 + 'c', 300 + 'a', 300 + 't'};
    uint8_t mask[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    int nt;
    double before = tr_model_loss(&m, ids, mask, 8, &nt);
    assert_true(tr_model_load_adapter(&m, fin, err, sizeof err));
    assert_int_equal(m.opts.lora.rank, 4);
    double after = tr_model_loss(&m, ids, mask, 8, &nt);
    printf("# loss of \"the cat\": base %.3f, with adapter %.3f\n", before / nt, after / nt);
    assert_true(after < before);
    tr_model_free(&m);
    be->destroy(be);

    free(c24); free(c28); free(c30); free(fin);
    free(text); free(ck); free(logp);
    tu_rmdir(dir);
}

/* batch 2 x accumulation 1 and batch 1 x accumulation 2 see the same
 * sequences in the same order with the same normalisation: same adapter. */
static void test_accumulation_equals_batch(void **state)
{
    (void)state;
    char *dir = tu_tempdir();
    char *text = write_text_file(dir, "abcdefghij klmnopqrst uvwxyz. ", 40);
    char *out[2];
    for (int k = 0; k < 2; k++) {
        char *ck = xasprintf("%s/ck%d", dir, k);
        tr_train_opts o;
        tr_train_defaults(&o);
        o.model_dir = GOLD;
        o.checkpoint_dir = ck;
        o.max_steps = 4;
        o.checkpoint_interval = 0;
        o.model.lora = (tr_lora_opts){.rank = 2, .alpha = 4, .dropout = 0.1f, .targets = 0x7f};
        o.batch_size = k ? 1 : 2;
        o.grad_accum = k ? 2 : 1;
        o.threads = 2;
        tr_data d;
        char err[256];
        assert_true(tr_text_source_open(&d, text, 24, 300, 5, err, sizeof err));
        FILE *devnull = fopen("/dev/null", "w");
        assert_int_equal(tr_train(&o, &d, NULL, devnull), 0);
        fclose(devnull);
        d.destroy(d.ctx);
        out[k] = xasprintf("%s/final/adapter_model.safetensors", ck);
        free(ck);
    }
    size_t l0, l1;
    char err[256];
    char *a = file_read_all(out[0], 1 << 24, &l0, err, sizeof err);
    char *b = file_read_all(out[1], 1 << 24, &l1, err, sizeof err);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(l0, l1);
    assert_memory_equal(a, b, l0);
    free(a); free(b); free(out[0]); free(out[1]); free(text);
    tu_rmdir(dir);
}

/* PEFT's initialisation: A uniform within 1/sqrt(in), B zero; same seed,
 * same A. */
static void test_lora_init(void **state)
{
    (void)state;
    tr_backend *be = tr_backend_cpu_create(0);
    tr_model m, m2;
    tr_model_opts o = {.mode = TR_MODE_LORA, .seed = 3,
                       .lora = {.rank = 8, .alpha = 16, .targets = 0x7f}};
    char err[256];
    assert_true(tr_model_load(&m, GOLD, &o, be, err, sizeof err));
    assert_true(tr_model_load(&m2, GOLD, &o, be, err, sizeof err));
    assert_memory_equal(m.param_data, m2.param_data, m.n_floats * sizeof(float));
    const tr_linear *down = &m.layers[2].proj[TR_DOWN];
    float bound = 1.0f / sqrtf(172.0f), mx = 0;
    for (int i = 0; i < 8 * 172; i++) mx = fmaxf(mx, fabsf(down->lora_a[i]));
    assert_true(mx <= bound && mx > 0.9f * bound);
    for (int i = 0; i < 64 * 8; i++) assert_true(down->lora_b[i] == 0.0f);
    assert_true(fabsf(down->scale - 2.0f) < 1e-6f);
    tr_model_free(&m2);
    o.lora.rslora = true;
    tr_model_free(&m);
    assert_true(tr_model_load(&m, GOLD, &o, be, err, sizeof err));
    assert_true(fabsf(m.layers[0].proj[TR_Q].scale - 16.0f / sqrtf(8.0f)) < 1e-5f);
    /* B = 0: the adapted model's logits are the base model's */
    tr_model_free(&m);
    be->destroy(be);
    unsigned mask;
    assert_false(tr_targets_parse("q_proj,qproj", &mask, err, sizeof err));
    assert_non_null(strstr(err, "did you mean \"q_proj\""));
    assert_true(tr_targets_parse("q,v,down_proj", &mask, err, sizeof err));
    assert_int_equal(mask, (1u << TR_Q) | (1u << TR_V) | (1u << TR_DOWN));
}

/* Schedules as transformers computes them; AdamW against a hand-worked step. */
static void test_schedule_and_adamw(void **state)
{
    (void)state;
    tr_optim_opts o;
    tr_optim_defaults(&o);
    o.lr = 1.0;
    o.warmup_steps = 10;
    assert_true(fabs(tr_lr_at(&o, 0, 110)) < 1e-12);
    assert_true(fabs(tr_lr_at(&o, 5, 110) - 0.5) < 1e-12);
    assert_true(fabs(tr_lr_at(&o, 10, 110) - 1.0) < 1e-12);
    assert_true(fabs(tr_lr_at(&o, 60, 110) - 0.5) < 1e-12); /* cosine half-way */
    o.schedule = TR_SCHED_LINEAR;
    assert_true(fabs(tr_lr_at(&o, 85, 110) - 0.25) < 1e-12);
    o.schedule = TR_SCHED_CONSTANT;
    assert_true(fabs(tr_lr_at(&o, 100, 110) - 1.0) < 1e-12);

    /* first AdamW step moves each weight by lr * sign(g) (bias-corrected),
     * after decoupled decay p *= 1 - lr * wd */
    tr_optim_defaults(&o);
    o.weight_decay = 0.1;
    tr_param pr = {.name = "w", .ndim = 1, .shape = {2, 0}, .offset = 0, .numel = 2, .decay = true};
    float p[2] = {1.0f, -1.0f}, g[2] = {0.5f, -2.0f}, m1[2] = {0}, m2[2] = {0};
    tr_adamw_step(&o, &pr, 1, p, g, m1, m2, 0.01, 1);
    assert_true(fabsf(p[0] - (1.0f * (1 - 0.001f) - 0.01f)) < 1e-6f);
    assert_true(fabsf(p[1] - (-1.0f * (1 - 0.001f) + 0.01f)) < 1e-6f);
    assert_true(fabsf(m1[0] - 0.05f) < 1e-7f && fabsf(m2[1] - 0.004f) < 1e-7f);
    float gg[3] = {3, 4, 0};
    assert_true(fabs(tr_grad_norm(gg, 3) - 5.0) < 1e-12);
}

/* Text with no repeated 24-byte window: a windows' content names it. */
static char *write_varied_text(const char *dir, size_t n)
{
    char *buf = xmalloc(n);
    uint64_t x = 12345;
    for (size_t i = 0; i < n; i++) buf[i] = (char)('a' + rng_splitmix64(&x) % 26);
    char *p = path_join(dir, "varied.txt");
    assert_int_equal(file_write_atomic(p, buf, n), 0);
    free(buf);
    return p;
}

static bool same_seq(const int32_t *a, const int32_t *b, int n)
{
    return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

/* A held-out share of a text: the same windows for a seed, none of them in
 * the training stream, every window in one of the two; an eval file;
 * errors when nothing is left on either side. */
static void test_eval_split_text(void **state)
{
    (void)state;
    char *dir = tu_tempdir();
    char *text = write_varied_text(dir, 24 * 400);
    tr_eval_opts ev = {.split = 0.1};
    tr_data d, d2;
    tr_eval_set e, e2;
    char err[256];
    assert_true(tr_text_source_open_eval(&d, text, 24, 300, 9, &ev, &e, err, sizeof err));
    assert_true(tr_text_source_open_eval(&d2, text, 24, 300, 9, &ev, &e2, err, sizeof err));
    assert_string_equal(e.source, "heldout:0.1");
    assert_true(e.n > 20 && e.n < 70); /* about 40 of 400 */
    assert_int_equal(e.n, e.available);
    assert_int_equal(d.epoch_size(d.ctx) + e.n, 400);
    assert_int_equal(e.n, e2.n); /* deterministic by seed */
    for (size_t i = 0; i < e.n; i++) assert_true(same_seq(e.ids[i], e2.ids[i], 24));
    size_t n_train = d.epoch_size(d.ctx);
    for (size_t k = 0; k < n_train; k++) { /* one epoch: no held-out window */
        tr_example ex;
        assert_true(d.next(d.ctx, &ex, err, sizeof err));
        for (size_t i = 0; i < e.n; i++) assert_false(same_seq(ex.ids, e.ids[i], 24));
    }
    d.destroy(d.ctx);
    d2.destroy(d2.ctx);
    tr_eval_set_free(&e2);
    /* another seed holds out other windows */
    assert_true(tr_text_source_open_eval(&d2, text, 24, 300, 10, &ev, &e2, err, sizeof err));
    bool differ = e2.n != e.n;
    for (size_t i = 0; !differ && i < e.n; i++) differ = !same_seq(e.ids[i], e2.ids[i], 24);
    assert_true(differ);
    d2.destroy(d2.ctx);
    tr_eval_set_free(&e2);
    tr_eval_set_free(&e);

    /* an eval file: its windows in file order, cut at the cap */
    char *big = write_text_file(dir, "0123456789abcdefghijklmn", TR_EVAL_MAX_SEQUENCES + 10);
    tr_eval_opts evf = {.path = big};
    assert_true(tr_text_source_open_eval(&d, text, 24, 300, 9, &evf, &e, err, sizeof err));
    assert_int_equal(d.epoch_size(d.ctx), 400);
    assert_int_equal(e.available, TR_EVAL_MAX_SEQUENCES + 10);
    assert_int_equal(e.n, TR_EVAL_MAX_SEQUENCES);
    assert_int_equal(e.tokens, 24 * TR_EVAL_MAX_SEQUENCES);
    assert_int_equal(e.ids[0][0], '0' + 300);
    d.destroy(d.ctx);
    tr_eval_set_free(&e);

    /* a share that holds out nothing (2 windows) */
    char *tiny = write_text_file(dir, "0123456789abcdefghijklmn", 2);
    tr_eval_opts small = {.split = 0.01};
    assert_false(tr_text_source_open_eval(&d, tiny, 24, 300, 9, &small, &e, err, sizeof err));
    assert_non_null(strstr(err, "no window for evaluation"));
    assert_non_null(strstr(err, "--eval-split"));
    tr_eval_set_free(&e);
    free(big);
    free(tiny);
    free(text);
    tu_rmdir(dir);
}

/* The trainer's eval loss: every eval_steps steps and at the last, on the
 * progress line and in trainer_state.json, equal to tr_model_loss over the
 * eval set averaged by hand with the final adapter; evaluation changes
 * nothing in the training itself. */
static void test_eval_loss_by_hand(void **state)
{
    (void)state;
    char *dir = tu_tempdir();
    char *text = write_varied_text(dir, 24 * 200);
    char *logp = path_join(dir, "log");
    char *ck[2];
    for (int k = 0; k < 2; k++) { /* with and without evaluation */
        ck[k] = xasprintf("%s/ck%d", dir, k);
        tr_train_opts o;
        tr_train_defaults(&o);
        o.model_dir = GOLD;
        o.checkpoint_dir = ck[k];
        o.max_steps = 5;
        o.checkpoint_interval = 0;
        o.model.lora = (tr_lora_opts){.rank = 2, .alpha = 4, .dropout = 0.1f, .targets = 0x7f};
        o.optim.lr = 1e-2;
        o.threads = 2;
        o.eval_steps = 2;
        tr_eval_opts ev = {.split = 0.05};
        tr_eval_set e;
        tr_data d;
        char err[256];
        assert_true(tr_text_source_open_eval(&d, text, 24, 300, 5, &ev, &e, err, sizeof err));
        o.eval = k == 0 ? &e : NULL;
        FILE *log = fopen(k == 0 ? logp : "/dev/null", "w");
        assert_int_equal(tr_train(&o, &d, NULL, log), 0);
        fclose(log);
        d.destroy(d.ctx);
        if (k == 1) {
            tr_eval_set_free(&e);
            break;
        }
        /* the progress lines: evaluated at steps 2, 4 and the last, 5 */
        size_t len;
        char *out = file_read_all(logp, 1 << 20, &len, err, sizeof err);
        assert_non_null(out);
        assert_non_null(strstr(out, "eval_every=2 eval_seqs="));
        int evals = 0;
        double reported = NAN;
        for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
            char *p = strstr(line, " eval_loss=");
            if (!strstr(line, "] step=") || !p) continue;
            evals++;
            reported = atof(p + 11);
            assert_true(strstr(line, "step=2/5") || strstr(line, "step=4/5") || strstr(line, "step=5/5"));
            assert_non_null(strstr(line, "eval_seqs="));
            assert_non_null(strstr(line, "best_eval_step="));
        }
        free(out);
        assert_int_equal(evals, 3);

        /* by hand: the final adapter, tr_model_loss over every eval sequence */
        tr_backend *be = tr_backend_cpu_create(2);
        tr_model m;
        tr_model_opts mo = {.mode = TR_MODE_LORA, .seed = 42, .lora = o.model.lora};
        assert_true(tr_model_load(&m, GOLD, &mo, be, err, sizeof err));
        char *fin = path_join(ck[0], "final");
        assert_true(tr_model_load_adapter(&m, fin, err, sizeof err));
        double sum = 0;
        long targets = 0;
        for (size_t i = 0; i < e.n; i++) {
            int nt;
            sum += tr_model_loss(&m, e.ids[i], e.mask[i], e.len[i], &nt);
            targets += nt;
        }
        assert_int_equal(targets, e.n * 23);
        double by_hand = sum / (double)targets;
        assert_true(fabs(tr_eval_loss(&m, &e) - by_hand) <= 1e-12 * by_hand);
        assert_true(fabs(reported - by_hand) < 1e-6);
        char *c5 = path_join(ck[0], "checkpoint-5");
        json_t *st = load_json(c5, "trainer_state.json");
        assert_true(fabs(json_real_value(json_object_get(st, "eval_loss")) - by_hand) <= 1e-9 * by_hand);
        assert_int_equal(json_integer_value(json_object_get(st, "eval_step")), 5);
        json_int_t best = json_integer_value(json_object_get(st, "best_eval_step"));
        assert_true(best == 2 || best == 4 || best == 5);
        json_decref(st);
        json_t *md = load_json(c5, "training_metadata.json");
        assert_non_null(json_object_get(md, "best_eval_loss"));
        json_decref(md);
        free(c5);
        free(fin);
        tr_model_free(&m);
        be->destroy(be);
        tr_eval_set_free(&e);
    }
    /* the same adapter with and without evaluation */
    char *a0 = xasprintf("%s/final/adapter_model.safetensors", ck[0]);
    char *a1 = xasprintf("%s/final/adapter_model.safetensors", ck[1]);
    size_t l0, l1;
    char err[256];
    char *x = file_read_all(a0, 1 << 24, &l0, err, sizeof err), *y = file_read_all(a1, 1 << 24, &l1, err, sizeof err);
    assert_non_null(x);
    assert_non_null(y);
    assert_int_equal(l0, l1);
    assert_memory_equal(x, y, l0);
    free(x); free(y); free(a0); free(a1); free(ck[0]); free(ck[1]); free(logp); free(text);
    tu_rmdir(dir);
}

/* Pruning keeps the newest keep_last checkpoints and the one of the best
 * eval loss, until a better one comes. */
static void test_prune_keeps_best(void **state)
{
    (void)state;
    char *dir = tu_tempdir();
    tr_backend *be = tr_backend_cpu_create(1);
    tr_model m;
    tr_model_opts mo = {.mode = TR_MODE_LORA, .seed = 1, .lora = {.rank = 2, .alpha = 4, .targets = 1}};
    char err[256];
    assert_true(tr_model_load(&m, GOLD, &mo, be, err, sizeof err));
    float *m1 = xcalloc(m.n_floats + 1, sizeof(float)), *m2 = xcalloc(m.n_floats + 1, sizeof(float));
    tr_train_opts o;
    tr_train_defaults(&o);
    o.model_dir = GOLD;
    o.checkpoint_dir = dir;
    tr_train_state s = {.total_steps = 5, .eval_step = -1, .best_eval_step = -1};
    tr_rng_seed(&s.rng, 1);
    const long best_at[] = {-1, 1, 2, 2, 2, 5}; /* the best step after each step */
    for (long step = 1; step <= 5; step++) {
        s.step = step;
        s.best_eval_step = best_at[step];
        assert_true(tr_checkpoint_save(dir, &m, m1, m2, &s, &o, 1, err, sizeof err));
    }
    for (long step = 1; step <= 5; step++) {
        char *p = xasprintf("%s/checkpoint-%ld", dir, step);
        if (step == 5) assert_true(dir_exists(p));
        else assert_false(dir_exists(p)); /* 2 was kept while it was the best */
        free(p);
    }
    s.step = 6;
    s.best_eval_step = 5;
    assert_true(tr_checkpoint_save(dir, &m, m1, m2, &s, &o, 1, err, sizeof err));
    s.step = 7;
    assert_true(tr_checkpoint_save(dir, &m, m1, m2, &s, &o, 1, err, sizeof err));
    char *c5 = xasprintf("%s/checkpoint-5", dir), *c6 = xasprintf("%s/checkpoint-6", dir);
    assert_true(dir_exists(c5)); /* the best, older than the newest */
    assert_false(dir_exists(c6));
    free(c5);
    free(c6);
    free(m1);
    free(m2);
    tr_model_free(&m);
    be->destroy(be);
    tu_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loss_decreases_and_outputs),
        cmocka_unit_test(test_accumulation_equals_batch),
        cmocka_unit_test(test_lora_init),
        cmocka_unit_test(test_schedule_and_adamw),
        cmocka_unit_test(test_eval_split_text),
        cmocka_unit_test(test_eval_loss_by_hand),
        cmocka_unit_test(test_prune_keeps_best),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
