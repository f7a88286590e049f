/* test_spec_emit.c: spec_job_to_yaml and spec_job_to_json: every job the
 * tests and examples hold is written out both ways and loaded back to an
 * equal job; units are written exactly (32Gi, 28GB, 7B, 1h30m), strings a
 * YAML reader would take for numbers or booleans are quoted, JSON carries
 * bytes and seconds as numbers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "spec/spec.h"

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool kv_eq(const spec_kv *a, size_t na, const spec_kv *b, size_t nb)
{
    if (na != nb) return false;
    for (size_t i = 0; i < na; i++)
        if (!str_eq(a[i].key, b[i].key) || !str_eq(a[i].value, b[i].value)) return false;
    return true;
}

static bool strv_eq(char **a, size_t na, char **b, size_t nb)
{
    if (na != nb) return false;
    for (size_t i = 0; i < na; i++)
        if (!str_eq(a[i], b[i])) return false;
    return true;
}

#define SAME(field)                                                                            \
    do {                                                                                       \
        if (a->field != b->field) {                                                            \
            fprintf(stderr, "%s differs\n", #field);                                           \
            return false;                                                                      \
        }                                                                                      \
    } while (0)
#define SAME_STR(field)                                                                        \
    do {                                                                                       \
        if (!str_eq(a->field, b->field)) {                                                     \
            fprintf(stderr, "%s differs: %s / %s\n", #field, a->field ? a->field : "NULL",     \
                    b->field ? b->field : "NULL");                                             \
            return false;                                                                      \
        }                                                                                      \
    } while (0)

/* Every resolved field (not the file, positions or apiVersion). For
 * method full the lora settings are not written, so not compared. */
static bool job_equal(const spec_job *a, const spec_job *b)
{
    SAME_STR(name);
    SAME_STR(namespace_);
    if (!kv_eq(a->labels, a->n_labels, b->labels, b->n_labels)) return false;
    SAME_STR(team);
    SAME_STR(priority_class);
    SAME_STR(experiment);
    SAME(method);
    SAME_STR(base_model.name);
    SAME_STR(base_model.path);
    SAME(base_model.parameters);
    if (a->method != METHOD_FULL) {
        SAME(lora.rank);
        SAME(lora.alpha);
        if (!strv_eq(a->lora.target_modules, a->lora.n_target_modules, b->lora.target_modules,
                     b->lora.n_target_modules))
            return false;
        SAME(lora.dropout);
        SAME(lora.use_rslora);
    }
    SAME(quantization.bits);
    SAME(quantization.quant);
    SAME_STR(training_data.dataset_path);
    SAME_STR(training_data.eval_path);
    SAME(training_data.format);
    SAME(training_data.samples);
    SAME(training_data.batch_size);
    SAME(training_data.gradient_accumulation);
    SAME(training_data.packing);
    SAME(hyperparams.epochs);
    SAME(hyperparams.max_steps);
    SAME(hyperparams.learning_rate);
    SAME(hyperparams.warmup_steps);
    SAME(hyperparams.max_seq_length);
    SAME(hyperparams.weight_decay);
    SAME_STR(hyperparams.lr_scheduler);
    SAME(hyperparams.max_grad_norm);
    SAME(hyperparams.seed);
    SAME(hyperparams.precision);
    SAME(hyperparams.optimizer);
    SAME(hyperparams.gradient_checkpointing);
    SAME(hyperparams.flash_attention);
    SAME(resources.given);
    SAME(resources.gpu_count);
    SAME_STR(resources.gpu_type);
    SAME(resources.gpu_memory_estimate);
    SAME(resources.gpu_shared);
    SAME(resources.cpu);
    SAME(resources.memory);
    SAME(resources.nodes);
    SAME(resources.strategy);
    SAME(checkpoint.enabled);
    SAME(checkpoint.interval_steps);
    SAME(checkpoint.keep_last);
    SAME_STR(checkpoint.storage_type);
    SAME_STR(checkpoint.pvc_name);
    SAME_STR(checkpoint.path);
    SAME(checkpoint.size);
    SAME(retry_policy.max_retries);
    SAME(retry_policy.retry_on_failure);
    SAME(retry_policy.backoff_seconds);
    SAME(retry_policy.max_backoff_seconds);
    SAME(timeout.max_duration);
    SAME(timeout.grace_period);
    SAME(trainer.kind);
    if (!strv_eq(a->trainer.command, a->trainer.n_command, b->trainer.command,
                 b->trainer.n_command))
        return false;
    SAME_STR(trainer.image);
    return kv_eq(a->trainer.env, a->trainer.n_env, b->trainer.env, b->trainer.n_env);
}

/* Loads text that holds one job, with no error (warnings allowed). */
static spec_job *reload(const char *text, spec_file *f)
{
    diag_list d;
    diag_list_init(&d);
    size_t e = spec_load_string("out", text, strlen(text), f, &d);
    if (e) {
        fprintf(stderr, "%s\n", text);
        diag_print_all(&d, stderr);
    }
    assert_int_equal(e, 0);
    diag_list_free(&d);
    assert_int_equal(f->n_docs, 1);
    return spec_file_job(f);
}

static void round_trip(const spec_job *j)
{
    char *y = spec_job_to_yaml(j), *js = spec_job_to_json(j);
    assert_non_null(y);
    assert_non_null(js);
    spec_file fy, fj;
    spec_job *a = reload(y, &fy), *b = reload(js, &fj);
    if (!job_equal(j, a)) fail_msg("YAML round trip of %s:\n%s", j->name, y);
    if (!job_equal(j, b)) fail_msg("JSON round trip of %s:\n%s", j->name, js);
    assert_string_equal(a->api_version, "lathe/v1");
    /* writing the reloaded job gives the same text: a fixed point */
    char *y2 = spec_job_to_yaml(a);
    assert_string_equal(y, y2);
    free(y2);
    spec_file_free(&fy);
    spec_file_free(&fj);
    free(y);
    free(js);
}

/* Every job of every YAML file in a folder; returns how many. */
static size_t round_trip_folder(const char *dir)
{
    DIR *dp = opendir(dir);
    assert_non_null(dp);
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(dp))) {
        if (!str_ends_with(de->d_name, ".yaml")) continue;
        char *path = path_join(dir, de->d_name);
        spec_file f;
        diag_list d;
        diag_list_init(&d);
        if (spec_load_file(path, &f, &d) == 0) {
            for (size_t i = 0; i < f.n_docs; i++) {
                if (f.docs[i].kind == SPEC_KIND_JOB) round_trip(f.docs[i].job), n++;
                if (f.docs[i].kind == SPEC_KIND_EXPERIMENT)
                    for (size_t k = 0; k < f.docs[i].experiment->n_jobs; k++)
                        round_trip(f.docs[i].experiment->jobs[k]), n++;
            }
        }
        spec_file_free(&f);
        diag_list_free(&d);
        free(path);
    }
    closedir(dp);
    return n;
}

static void test_round_trips(void **state)
{
    (void)state;
    size_t n = round_trip_folder(LATHE_SOURCE_DIR "/examples");
    assert_int_equal(n, 1);
    n = round_trip_folder(LATHE_SOURCE_DIR "/examples/jobs");
    assert_true(n >= 9);
    n = round_trip_folder(LATHE_TEST_DATA "/valid");
    assert_true(n >= 10);
}

static spec_job *seed(spec_file *f)
{
    diag_list d;
    diag_list_init(&d);
    assert_int_equal(spec_load_file(LATHE_SOURCE_DIR "/examples/seed-lora-job.yaml", f, &d), 0);
    diag_list_free(&d);
    return spec_file_job(f);
}

static void test_yaml_text(void **state)
{
    (void)state;
    spec_file f;
    spec_job *j = seed(&f);
    char *y = spec_job_to_yaml(j);
    assert_true(str_starts_with(y, "apiVersion: lathe/v1\nkind: LoRATrainingJob\nmetadata:\n"));
    assert_non_null(strstr(y, "\n  name: lora-qwen2-7b-r16\n"));
    assert_non_null(strstr(y, "    parameters: 7B\n"));
    assert_non_null(strstr(y, "    targetModules: [q_proj, k_proj, v_proj, o_proj]\n"));
    assert_non_null(strstr(y, "      memoryEstimate: 28GB\n"));
    assert_non_null(strstr(y, "    memory: 32Gi\n"));
    assert_non_null(strstr(y, "      size: 50Gi\n"));
    assert_non_null(strstr(y, "    maxDuration: 8h\n"));
    assert_non_null(strstr(y, "    gracePeriod: 2m\n"));
    assert_non_null(strstr(y, "    learningRate: 0.0002\n"));
    assert_non_null(strstr(y, "    cpu: 4\n"));
    free(y);

    /* odd values: strings that look like other types, tiny numbers,
     * durations with every unit, sizes that are not a whole unit */
    free(j->team);
    j->team = xstrdup("true");
    free(j->training_data.dataset_path);
    j->training_data.dataset_path = xstrdup("123");
    free(j->base_model.name);
    j->base_model.name = xstrdup("null");
    j->hyperparams.learning_rate = 1e-5;
    j->hyperparams.seed = 9223372036854775807ULL;
    j->timeout.max_duration = 90061;
    j->timeout.grace_period = 1.5;
    j->resources.memory = 1536 * 1048576.0 + 1;
    j->base_model.parameters = 1.5e9;
    j->lora.alpha = 0.1 + 0.2;
    y = spec_job_to_yaml(j);
    assert_non_null(strstr(y, "  team: \"true\"\n"));
    assert_non_null(strstr(y, "    datasetPath: \"123\"\n"));
    assert_non_null(strstr(y, "    name: \"null\"\n"));
    assert_non_null(strstr(y, "    learningRate: 1.0e-05\n"));
    assert_non_null(strstr(y, "    maxDuration: 1d1h1m1s\n"));
    assert_non_null(strstr(y, "    gracePeriod: 1.5\n"));
    assert_non_null(strstr(y, "    memory: 1610612737\n"));
    assert_non_null(strstr(y, "    parameters: 1.5B\n"));
    assert_non_null(strstr(y, "    seed: 9223372036854775807\n"));
    free(y);
    round_trip(j);
    spec_file_free(&f);
}

static void test_json_types(void **state)
{
    (void)state;
    spec_file f;
    spec_job *j = seed(&f);
    char *js = spec_job_to_json(j);
    json_error_t err;
    json_t *root = json_loads(js, 0, &err);
    assert_non_null(root);
    assert_string_equal(json_string_value(json_object_get(root, "apiVersion")), "lathe/v1");
    json_t *spec = json_object_get(root, "spec");
    json_t *gpu = json_object_get(json_object_get(spec, "resources"), "gpu");
    assert_int_equal(json_integer_value(json_object_get(gpu, "memoryEstimate")), 28000000000LL);
    assert_int_equal(json_integer_value(json_object_get(gpu, "count")), 1);
    json_t *hp = json_object_get(spec, "hyperparams");
    assert_true(json_real_value(json_object_get(hp, "learningRate")) == 0.0002);
    assert_non_null(strstr(js, "\"learningRate\": 0.0002,")); /* shortest exact text */
    assert_true(json_is_integer(json_object_get(hp, "seed")));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(spec, "timeout"),
                                                        "maxDuration")),
                     28800);
    json_t *tm = json_object_get(json_object_get(spec, "lora"), "targetModules");
    assert_int_equal(json_array_size(tm), 4);
    assert_string_equal(json_string_value(json_array_get(tm, 0)), "q_proj");
    assert_true(json_is_string(json_object_get(hp, "gradientCheckpointing"))); /* "auto" */
    json_decref(root);
    free(js);
    spec_file_free(&f);
}

/* A job built in code (the planner's defaults) writes out too. */
static void test_default_job(void **state)
{
    (void)state;
    spec_job *j = spec_job_new_default();
    j->training_data.dataset_path = xstrdup("/d");
    j->base_model.name = xstrdup("Qwen2-7B");
    j->hyperparams.flash_attention = TOGGLE_ON;
    j->trainer.kind = TRAINER_COMMAND;
    char *argv[] = {"python", "-c", "print(1)"};
    j->trainer.command = xcalloc(3, sizeof(char *));
    for (int i = 0; i < 3; i++) j->trainer.command[i] = xstrdup(argv[i]);
    j->trainer.n_command = 3;
    round_trip(j);
    j->method = METHOD_FULL;
    round_trip(j);
    spec_job_free(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_yaml_text),
        cmocka_unit_test(test_json_types),
        cmocka_unit_test(test_default_job),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
