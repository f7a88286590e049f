/* test_spec_job.c: LoRATrainingJob loading: the seed article's file with
 * every value asserted, lathe/v1, defaults and the defaults that follow
 * other fields (alpha, method, bits, team), positions kept for the planner,
 * every error of a file reported, enum names, clone and free; the eval
 * set's fields (evalDatasetPath and its older name evalPath, evalSplit,
 * evalSteps) and their errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "spec/spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEED LATHE_SOURCE_DIR "/examples/seed-lora-job.yaml"

/* Loads text that must hold exactly one valid job; the file keeps it. */
static spec_job *load_job(const char *text, spec_file *f, diag_list *d)
{
    diag_list_init(d);
    size_t errors = spec_load_string("t.yaml", text, strlen(text), f, d);
    if (errors) diag_print_all(d, stderr);
    assert_int_equal(errors, 0);
    assert_int_equal(f->n_docs, 1);
    spec_job *j = spec_file_job(f);
    assert_non_null(j);
    return j;
}

/* Loads text that must fail; returns the number of errors. */
static size_t load_errors(const char *text, diag_list *d)
{
    spec_file f;
    diag_list_init(d);
    size_t errors = spec_load_string("t.yaml", text, strlen(text), &f, d);
    assert_int_equal(f.n_docs, 0);
    spec_file_free(&f);
    return errors;
}

static bool has_diag(const diag_list *d, const char *path, const char *text)
{
    for (size_t i = 0; i < d->len; i++) {
        sb s;
        sb_init(&s);
        diag_format(&d->items[i], &s);
        bool ok = (!path || (d->items[i].path && !strcmp(d->items[i].path, path))) &&
                  strstr(sb_str(&s), text);
        sb_free(&s);
        if (ok) return true;
    }
    return false;
}

static void test_seed_every_value(void **state)
{
    (void)state;
    spec_file f;
    diag_list d;
    diag_list_init(&d);
    assert_int_equal(spec_load_file(SEED, &f, &d), 0);
    assert_int_equal(d.len, 0); /* not even a warning */
    assert_int_equal(f.n_docs, 1);
    assert_int_equal(f.docs[0].kind, SPEC_KIND_JOB);
    const spec_job *j = f.docs[0].job;

    assert_string_equal(j->file, SEED);
    assert_string_equal(j->api_version, "training.example.com/v1");
    assert_int_equal(j->pos.line, 4);
    assert_string_equal(j->name, "lora-qwen2-7b-r16");
    assert_string_equal(j->namespace_, "ai-training");
    assert_int_equal(j->n_labels, 0);
    assert_string_equal(j->team, "ai-training"); /* from the namespace */
    assert_null(j->priority_class);
    assert_null(j->experiment);
    assert_int_equal(j->method, METHOD_LORA);

    assert_string_equal(j->base_model.name, "Qwen2-7B-Instruct");
    assert_string_equal(j->base_model.path, "/models/qwen2-7b-instruct");
    assert_true(j->base_model.parameters == 7e9);
    assert_int_equal(j->base_model.pos_name.line, 12);
    assert_int_equal(j->base_model.pos_name.col, 11);
    assert_int_equal(j->base_model.pos_path.line, 13);
    assert_int_equal(j->base_model.pos_parameters.line, 14);

    assert_int_equal(j->lora.rank, 16);
    assert_int_equal(j->lora.pos_rank.line, 18);
    assert_int_equal(j->lora.pos_rank.col, 11);
    assert_true(j->lora.alpha == 32);
    assert_int_equal(j->lora.n_target_modules, 4);
    const char *mods[] = {"q_proj", "k_proj", "v_proj", "o_proj"};
    for (int i = 0; i < 4; i++) {
        assert_string_equal(j->lora.target_modules[i], mods[i]);
        assert_int_equal(j->lora.pos_target_modules[i].line, 21 + i);
        assert_int_equal(j->lora.pos_target_modules[i].col, 9);
    }
    assert_true(j->lora.dropout == 0.05);
    assert_false(j->lora.use_rslora);
    assert_int_equal(j->quantization.bits, 16);
    assert_int_equal(j->quantization.quant, QUANT_AUTO);

    assert_string_equal(j->training_data.dataset_path, "/data/training/qwen2-finetune");
    assert_int_equal(j->training_data.pos_dataset_path.line, 29);
    assert_null(j->training_data.eval_path);
    assert_int_equal(j->training_data.format, SPEC_DATA_AUTO);
    assert_int_equal(j->training_data.samples, 50000);
    assert_int_equal(j->training_data.batch_size, 4);
    assert_int_equal(j->training_data.gradient_accumulation, 8);
    assert_false(j->training_data.packing);

    assert_int_equal(j->hyperparams.epochs, 3);
    assert_int_equal(j->hyperparams.max_steps, 0);
    assert_true(j->hyperparams.learning_rate == 0.0002);
    assert_int_equal(j->hyperparams.warmup_steps, 100);
    assert_int_equal(j->hyperparams.max_seq_length, 2048);
    assert_true(j->hyperparams.weight_decay == 0);
    assert_string_equal(j->hyperparams.lr_scheduler, "cosine");
    assert_true(j->hyperparams.max_grad_norm == 1.0);
    assert_int_equal(j->hyperparams.seed, 42);
    assert_int_equal(j->hyperparams.precision, PREC_AUTO);
    assert_int_equal(j->hyperparams.optimizer, OPT_AUTO);
    assert_int_equal(j->hyperparams.gradient_checkpointing, TOGGLE_AUTO);
    assert_int_equal(j->hyperparams.flash_attention, TOGGLE_AUTO);

    assert_true(j->resources.given);
    assert_int_equal(j->resources.gpu_count, 1);
    assert_int_equal(j->resources.pos_gpu_count.line, 44);
    assert_string_equal(j->resources.gpu_type, "A100-40GB");
    assert_int_equal(j->resources.pos_gpu_type.line, 45);
    assert_true(j->resources.gpu_memory_estimate == 28e9);
    assert_int_equal(j->resources.pos_gpu_memory_estimate.line, 46);
    assert_true(j->resources.cpu == 4);
    assert_true(j->resources.memory == 32 * GIB);
    assert_int_equal(j->resources.nodes, 0);
    assert_int_equal(j->resources.strategy, STRAT_AUTO);

    assert_true(j->checkpoint.enabled);
    assert_int_equal(j->checkpoint.interval_steps, 500);
    assert_int_equal(j->checkpoint.keep_last, 3);
    assert_string_equal(j->checkpoint.storage_type, "PVC");
    assert_string_equal(j->checkpoint.pvc_name, "lora-checkpoint-pvc");
    assert_null(j->checkpoint.path);
    assert_true(j->checkpoint.size == 50 * GIB);

    assert_int_equal(j->retry_policy.max_retries, 3);
    assert_true(j->retry_policy.retry_on_failure);
    assert_true(j->retry_policy.backoff_seconds == 60);
    assert_true(j->retry_policy.max_backoff_seconds == 3600);
    assert_true(j->timeout.max_duration == 8 * 3600);
    assert_true(j->timeout.grace_period == 120);
    assert_int_equal(j->trainer.kind, TRAINER_BUILTIN);
    assert_int_equal(j->trainer.n_command, 0);
    assert_null(j->trainer.image);
    assert_int_equal(j->trainer.n_env, 0);
    spec_file_free(&f);
    diag_list_free(&d);
}

/* The seed with lathe's apiVersion loads the same; others are refused. */
static void test_api_versions(void **state)
{
    (void)state;
    char err[256];
    size_t len;
    char *text = file_read_all(SEED, 1 << 20, &len, err, sizeof err);
    assert_non_null(text);
    char *at = strstr(text, "training.example.com/v1");
    assert_non_null(at);
    char *lathe = xasprintf("%.*slathe/v1%s", (int)(at - text), text, at + 23);
    spec_file f;
    diag_list d;
    spec_job *j = load_job(lathe, &f, &d);
    assert_string_equal(j->api_version, "lathe/v1");
    assert_string_equal(j->name, "lora-qwen2-7b-r16");
    spec_file_free(&f);
    diag_list_free(&d);

    char *v2 = xasprintf("%.*straining.example.com/v2%s", (int)(at - text), text, at + 23);
    assert_int_equal(load_errors(v2, &d), 1);
    assert_true(has_diag(&d, "apiVersion", "expected lathe/v1, lathe.dev/v1 or training.example.com/v1"));
    diag_list_free(&d);
    free(v2);
    free(lathe);
    free(text);
}

#define MINIMAL                                                                                \
    "apiVersion: lathe/v1\nkind: LoRATrainingJob\nmetadata: {name: m}\n"                       \
    "spec:\n  baseModel: {name: Qwen2-7B}\n  trainingData: {datasetPath: /d}\n"

static void test_defaults(void **state)
{
    (void)state;
    spec_file f;
    diag_list d;
    spec_job *j = load_job(MINIMAL, &f, &d);
    spec_job *def = spec_job_new_default();
    assert_string_equal(j->team, "default");
    assert_int_equal(j->method, METHOD_LORA);
    assert_int_equal(j->lora.rank, def->lora.rank);
    assert_int_equal(j->lora.rank, 16);
    assert_true(j->lora.alpha == 32);
    assert_int_equal(j->lora.n_target_modules, 4);
    assert_string_equal(j->lora.target_modules[3], "o_proj");
    assert_int_equal(j->lora.pos_target_modules[0].line, 0); /* not written */
    assert_true(j->lora.dropout == 0.05);
    assert_int_equal(j->quantization.bits, 16);
    assert_int_equal(j->training_data.batch_size, 1);
    assert_int_equal(j->training_data.gradient_accumulation, 1);
    assert_int_equal(j->hyperparams.epochs, 1);
    assert_true(j->hyperparams.learning_rate == 2e-4);
    assert_int_equal(j->hyperparams.max_seq_length, 2048);
    assert_string_equal(j->hyperparams.lr_scheduler, "cosine");
    assert_int_equal(j->hyperparams.seed, 42);
    assert_false(j->resources.given);
    assert_int_equal(j->resources.gpu_count, 0);
    assert_true(j->checkpoint.enabled);
    assert_int_equal(j->checkpoint.interval_steps, 500);
    assert_int_equal(j->checkpoint.keep_last, 3);
    assert_int_equal(j->retry_policy.max_retries, 3);
    assert_true(j->retry_policy.max_backoff_seconds == 3600);
    assert_true(j->timeout.max_duration == 0);
    assert_true(j->timeout.grace_period == 120);
    spec_job_free(def);
    spec_file_free(&f);
    diag_list_free(&d);
}

/* A body appended to MINIMAL's metadata, with its own spec. */
static spec_job *load_body(const char *body, spec_file *f, diag_list *d)
{
    char *text = xasprintf("apiVersion: lathe/v1\nkind: LoRATrainingJob\n"
                           "metadata: {name: m, namespace: ns}\nspec:\n"
                           "  baseModel: {name: Qwen2-7B}\n  trainingData: {datasetPath: /d}\n%s",
                           body);
    spec_job *j = load_job(text, f, d);
    free(text);
    return j;
}

static void test_dependent_defaults(void **state)
{
    (void)state;
    spec_file f;
    diag_list d;
    spec_job *j = load_body("  lora: {rank: 8}\n", &f, &d);
    assert_true(j->lora.alpha == 16); /* 2 x rank */
    assert_string_equal(j->team, "ns");
    spec_file_free(&f);
    diag_list_free(&d);

    j = load_body("  quantization: {bits: 4}\n", &f, &d);
    assert_int_equal(j->method, METHOD_QLORA);
    assert_int_equal(j->quantization.quant, QUANT_AUTO);
    spec_file_free(&f);
    diag_list_free(&d);

    j = load_body("  method: qlora\n", &f, &d);
    assert_int_equal(j->quantization.bits, 4);
    spec_file_free(&f);
    diag_list_free(&d);

    j = load_body("  quantization: {type: int8}\n", &f, &d);
    assert_int_equal(j->quantization.bits, 8);
    assert_int_equal(j->method, METHOD_QLORA);
    spec_file_free(&f);
    diag_list_free(&d);

    j = load_body("  method: auto\n  team: research\n", &f, &d);
    assert_int_equal(j->method, METHOD_AUTO);
    assert_string_equal(j->team, "research");
    spec_file_free(&f);
    diag_list_free(&d);

    j = load_body("  retryPolicy: {backoffSeconds: 7200}\n", &f, &d);
    assert_true(j->retry_policy.max_backoff_seconds == 7200); /* follows the first backoff */
    spec_file_free(&f);
    diag_list_free(&d);
}

static void test_extensions(void **state)
{
    (void)state;
    spec_file f;
    diag_list d;
    spec_job *j = load_body("  priorityClassName: high\n"
                            "  resources: {cpu: 500m, nodes: 2, strategy: ZeRO-3}\n"
                            "  hyperparams: {precision: bfloat16, optimizer: paged_adamw_8bit,\n"
                            "                gradientCheckpointing: false, flashAttention: true,\n"
                            "                seed: 9223372036854775807, lrScheduler: LINEAR}\n"
                            "  trainer:\n"
                            "    command: [torchrun, --nproc_per_node, 8, train.py]\n"
                            "    image: ghcr.io/x/y:1\n"
                            "    env: [{name: A, value: 1}, {name: B}]\n",
                            &f, &d);
    assert_string_equal(j->priority_class, "high");
    assert_true(j->resources.cpu == 0.5);
    assert_int_equal(j->resources.nodes, 2);
    assert_int_equal(j->resources.strategy, STRAT_ZERO3);
    assert_int_equal(j->hyperparams.precision, PREC_BF16);
    assert_int_equal(j->hyperparams.optimizer, OPT_PAGED_ADAMW8BIT);
    assert_int_equal(j->hyperparams.gradient_checkpointing, TOGGLE_OFF);
    assert_int_equal(j->hyperparams.flash_attention, TOGGLE_ON);
    assert_true(j->hyperparams.seed == 9223372036854775807ULL);
    assert_string_equal(j->hyperparams.lr_scheduler, "linear");
    assert_int_equal(j->trainer.kind, TRAINER_COMMAND);
    assert_int_equal(j->trainer.n_command, 4);
    assert_string_equal(j->trainer.command[2], "8");
    assert_string_equal(j->trainer.image, "ghcr.io/x/y:1");
    assert_int_equal(j->trainer.n_env, 2);
    assert_string_equal(j->trainer.env[0].key, "A");
    assert_string_equal(j->trainer.env[0].value, "1");
    assert_string_equal(j->trainer.env[1].value, "");
    spec_file_free(&f);
    diag_list_free(&d);
}

/* A job's text with a trainingData mapping of its own. */
static char *eval_job(const char *data, const char *hyper)
{
    return xasprintf("apiVersion: lathe/v1\nkind: LoRATrainingJob\nmetadata: {name: m}\nspec:\n"
                     "  baseModel: {name: Qwen2-7B}\n  trainingData: {datasetPath: /d%s}\n%s",
                     data, hyper);
}

static void test_eval_fields(void **state)
{
    (void)state;
    spec_file f;
    diag_list d;
    char *t = eval_job(", evalDatasetPath: /e.jsonl", "  hyperparams: {evalSteps: 25}\n");
    spec_job *j = load_job(t, &f, &d);
    free(t);
    assert_string_equal(j->training_data.eval_path, "/e.jsonl");
    assert_null(j->training_data.eval_path_alias);
    assert_int_equal(j->hyperparams.eval_steps, 25);
    spec_job *c = spec_job_clone(j);
    assert_string_equal(c->training_data.eval_path, "/e.jsonl");
    spec_job_free(c);
    char *json = spec_job_to_json(j);
    assert_non_null(strstr(json, "\"evalDatasetPath\": \"/e.jsonl\""));
    assert_non_null(strstr(json, "\"evalSteps\": 25"));
    assert_null(strstr(json, "\"evalPath\""));
    free(json);
    spec_file_free(&f);
    diag_list_free(&d);

    /* the older name is an alias; the same file under both names is fine */
    t = eval_job(", evalPath: /old.jsonl", "");
    j = load_job(t, &f, &d);
    free(t);
    assert_string_equal(j->training_data.eval_path, "/old.jsonl");
    assert_int_equal(j->hyperparams.eval_steps, 0);
    spec_file_free(&f);
    diag_list_free(&d);
    t = eval_job(", evalPath: /e, evalDatasetPath: /e", "");
    j = load_job(t, &f, &d);
    free(t);
    assert_string_equal(j->training_data.eval_path, "/e");
    spec_file_free(&f);
    diag_list_free(&d);

    t = eval_job(", evalSplit: 0.05", "");
    j = load_job(t, &f, &d);
    free(t);
    assert_true(j->training_data.eval_split == 0.05);
    assert_null(j->training_data.eval_path);
    json = spec_job_to_json(j);
    assert_non_null(strstr(json, "\"evalSplit\": 0.05"));
    free(json);
    spec_file_free(&f);
    diag_list_free(&d);
}

static void test_eval_errors(void **state)
{
    (void)state;
    diag_list d;
    char *t = eval_job(", evalPath: /a, evalDatasetPath: /b", "");
    assert_int_equal(load_errors(t, &d), 1);
    free(t);
    assert_true(has_diag(&d, "spec.trainingData.evalPath",
                         "trainingData.evalPath and trainingData.evalDatasetPath name different"));
    assert_true(has_diag(&d, "spec.trainingData.evalPath", "evalPath \"/a\", evalDatasetPath \"/b\""));
    assert_true(has_diag(&d, NULL, "t.yaml:6:"));
    diag_list_free(&d);

    t = eval_job(", evalDatasetPath: /e, evalSplit: 0.1", "");
    assert_int_equal(load_errors(t, &d), 1);
    free(t);
    assert_true(has_diag(&d, "spec.trainingData.evalSplit", "not both"));
    diag_list_free(&d);

    const char *bad[] = {"0", "0.5", "0.7", "-0.1", "x"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *data = xasprintf(", evalSplit: %s", bad[i]);
        t = eval_job(data, "");
        assert_int_equal(load_errors(t, &d), 1);
        assert_true(has_diag(&d, "spec.trainingData.evalSplit", "evalSplit"));
        free(data);
        free(t);
        diag_list_free(&d);
    }

    t = eval_job("", "  hyperparams: {evalSteps: -1}\n");
    assert_int_equal(load_errors(t, &d), 1);
    free(t);
    assert_true(has_diag(&d, "spec.hyperparams.evalSteps", "found -1"));
    diag_list_free(&d);

    /* evalSteps without an eval set: a warning, the job still loads */
    spec_file f;
    t = eval_job("", "  hyperparams: {evalSteps: 10}\n");
    load_job(t, &f, &d);
    free(t);
    assert_true(d.warnings == 1);
    assert_true(has_diag(&d, "spec.hyperparams.evalSteps", "no eval set"));
    spec_file_free(&f);
    diag_list_free(&d);
}

/* Every error in a file is reported, not just the first. */
static void test_every_error(void **state)
{
    (void)state;
    diag_list d;
    size_t n = load_errors("apiVersion: lathe/v1\nkind: LoRATrainingJob\nmetadata: {name: X}\n"
                           "spec:\n"
                           "  baseModel: {name: q}\n"
                           "  lora: {rank: 0, alpha: 0, dropout: 2, targetModule: [q_proj]}\n"
                           "  trainingData: {batchSize: 0, gradientAccumulation: 0}\n"
                           "  timeout: {maxDuration: soon}\n",
                           &d);
    assert_int_equal(n, 9);
    assert_true(has_diag(&d, "metadata.name", "use \"x\""));
    assert_true(has_diag(&d, "spec.lora.rank", "out of range"));
    assert_true(has_diag(&d, "spec.lora.alpha", "expected a number > 0"));
    assert_true(has_diag(&d, "spec.lora.dropout", "in [0, 1)"));
    assert_true(has_diag(&d, "spec.lora.targetModule", "did you mean targetModules?"));
    assert_true(has_diag(&d, "spec.trainingData.batchSize", "found 0"));
    assert_true(has_diag(&d, "spec.trainingData.gradientAccumulation", "found 0"));
    assert_true(has_diag(&d, "spec.trainingData.datasetPath", "missing required field"));
    assert_true(has_diag(&d, "spec.timeout.maxDuration", "not a duration"));
    diag_list_free(&d);
}

static void test_enum_names(void **state)
{
    (void)state;
    spec_method m;
    assert_true(spec_method_parse("QLoRA", &m));
    assert_int_equal(m, METHOD_QLORA);
    assert_false(spec_method_parse("qlroa", &m));
    for (int i = METHOD_AUTO; i <= METHOD_FULL; i++) {
        assert_true(spec_method_parse(spec_method_name((spec_method)i), &m));
        assert_int_equal(m, i);
    }
    spec_quant q;
    assert_true(spec_quant_parse("NF4-DQ", &q));
    assert_int_equal(q, QUANT_NF4_DQ);
    assert_string_equal(spec_quant_name(QUANT_NF4_DQ), "nf4-dq");
    for (int i = QUANT_AUTO; i <= QUANT_AWQ4; i++) {
        assert_true(spec_quant_parse(spec_quant_name((spec_quant)i), &q));
        assert_int_equal(q, i);
    }
    spec_precision p;
    for (int i = PREC_AUTO; i <= PREC_FP32; i++) {
        assert_true(spec_precision_parse(spec_precision_name((spec_precision)i), &p));
        assert_int_equal(p, i);
    }
    spec_optimizer o;
    assert_true(spec_optimizer_parse("adamw_bnb_8bit", &o));
    assert_int_equal(o, OPT_ADAMW8BIT);
    for (int i = OPT_AUTO; i <= OPT_SGD; i++) {
        assert_true(spec_optimizer_parse(spec_optimizer_name((spec_optimizer)i), &o));
        assert_int_equal(o, i);
    }
    spec_strategy s;
    for (int i = STRAT_AUTO; i <= STRAT_ZERO3; i++) {
        assert_true(spec_strategy_parse(spec_strategy_name((spec_strategy)i), &s));
        assert_int_equal(s, i);
    }
    assert_false(spec_strategy_parse(NULL, &s));
    assert_string_equal(spec_kind_name(SPEC_KIND_EXPERIMENT), "LoRAExperiment");
}

static void test_clone(void **state)
{
    (void)state;
    spec_file f;
    diag_list d;
    diag_list_init(&d);
    assert_int_equal(spec_load_file(SEED, &f, &d), 0);
    spec_job *c = spec_job_clone(spec_file_job(&f));
    spec_file_free(&f); /* the clone owns its memory */
    assert_string_equal(c->name, "lora-qwen2-7b-r16");
    assert_string_equal(c->lora.target_modules[2], "v_proj");
    assert_int_equal(c->lora.pos_target_modules[2].line, 23);
    assert_string_equal(c->checkpoint.pvc_name, "lora-checkpoint-pvc");
    assert_string_equal(c->hyperparams.lr_scheduler, "cosine");
    spec_job *c2 = spec_job_clone(c);
    spec_job_free(c);
    assert_string_equal(c2->training_data.dataset_path, "/data/training/qwen2-finetune");
    spec_job_free(c2);
    spec_job_free(NULL);
    diag_list_free(&d);
}

/* A NULL diag_list is allowed; the count still comes back. */
static void test_no_diag_list(void **state)
{
    (void)state;
    spec_file f;
    assert_int_equal(spec_load_string("x", "kind: Nope\n", 11, &f, NULL), 1);
    spec_file_free(&f);
    assert_int_equal(spec_load_file("/nonexistent/lathe.yaml", &f, NULL), 1);
    assert_true(f.io_error);
    spec_file_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_every_value), cmocka_unit_test(test_api_versions),
        cmocka_unit_test(test_defaults),         cmocka_unit_test(test_dependent_defaults),
        cmocka_unit_test(test_extensions),       cmocka_unit_test(test_every_error),
        cmocka_unit_test(test_enum_names),       cmocka_unit_test(test_clone),
        cmocka_unit_test(test_no_diag_list),     cmocka_unit_test(test_eval_fields),
        cmocka_unit_test(test_eval_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
