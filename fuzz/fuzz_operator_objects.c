/* fuzz_operator_objects.c: libFuzzer target for the operator's pure
 * functions (lib/server/op_objects.c, declared in lib/server/op.h). The
 * input is one JSON text, parsed as the watch parser parses an object
 * (JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL; anything else is skipped), and
 * taken as:
 *
 *   - a LoRATrainingJob / LoRAExperiment object: op_object_yaml, then that
 *     YAML through spec_load_string as srv_submit_text loads it, and
 *     op_diags_message of its diagnostics (op_invalid_status with it);
 *   - a user's batch/v1 Job: op_userjob_yaml against two small fixed
 *     clusters (GPU types with Kubernetes products, and CPU mode) with the
 *     spec_k8s defaults, its YAML through spec_load_string too;
 *   - store jobs, from the input's "store" member (an object, or an array of
 *     up to 32) or else the input itself, fields named as store_job's
 *     ("state" a number or a phase name, "placement_json" a string or any
 *     JSON, "progress" {step, loss, tokens_per_second}; absent strings are
 *     NULL): op_job_status of the first, op_experiment_status of all, each
 *     dumped with json_dumps.
 *
 * Beyond crashes, sanitizer reports and leaks, it stops when: a YAML the
 * functions made does not parse back in the YAML layer (for inputs nested
 * shallower than the layer's depth limit); op_userjob_yaml refuses without
 * a reason, or admits without a plan, or with a plan that is not JSON or
 * whose GPUs are not nodes x GPUs per node; an error's message is empty; a
 * status is not an object with a phase. See docs/fuzzing.md. */
#include "server/op.h"
#include "spec/spec_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX_STORE_JOBS 32
/* The YAML of an object nests the input's values this much deeper at most. */
#define FUZZ_WRAP_DEPTH 4

/* ---- the fixed clusters ---- */
static const char cluster_text[] = "apiVersion: lathe/v1\n"
                                   "kind: Cluster\n"
                                   "metadata: {name: fuzz}\n"
                                   "spec:\n"
                                   "  gpuTypes:\n"
                                   "    - {name: L4-24GB, memory: 24Gi, pricePerHour: 0.80}\n"
                                   "    - {name: A100-40GB, memory: 40Gi, pricePerHour: 1.10}\n"
                                   "    - {name: H100-80GB, memory: 80Gi, pricePerHour: 2.50}\n"
                                   "  nodes:\n"
                                   "    - {name: gpu-a1, gpuType: L4-24GB, gpus: 3}\n"
                                   "    - {name: gpu-b1, gpuType: A100-40GB, gpus: 4}\n"
                                   "    - {name: gpu-c1, gpuType: H100-80GB, gpus: 8}\n"
                                   "  teams:\n"
                                   "    - {name: team-a}\n"
                                   "    - {name: ai-training}\n";

static srv_cluster gpu_cluster, cpu_cluster;
static spec_k8s k8s;
static bool ready;

/* As srv_cluster_build makes them for executor k8s: the scheduler's view of
 * a Cluster spec and each type's product label value (NULL for one, as for
 * a type no node has a product for); CPU mode has teams only. Built once,
 * kept for the process. */
static void setup(void)
{
    if (ready) return;
    ready = true;
    diag_list d;
    diag_list_init(&d);
    if (spec_load_string("fuzz-cluster.yaml", cluster_text, strlen(cluster_text), &gpu_cluster.file,
                         &d) != 0 ||
        !(gpu_cluster.spec = spec_file_cluster(&gpu_cluster.file)) ||
        !(gpu_cluster.sched = sched_cluster_from_spec(gpu_cluster.spec, &d))) {
        diag_print_all(&d, stderr);
        abort();
    }
    diag_list_free(&d);
    gpu_cluster.cpu_mode = false;
    const sched_cluster *s = gpu_cluster.sched;
    gpu_cluster.type_product = xcalloc((size_t)s->n_types + 1, sizeof *gpu_cluster.type_product);
    int l4 = sched_cluster_find_type(s, "L4-24GB"), a100 = sched_cluster_find_type(s, "A100-40GB");
    if (l4 < 0 || a100 < 0) abort();
    gpu_cluster.type_product[l4] = xstrdup("NVIDIA-L4");
    gpu_cluster.type_product[a100] = xstrdup("NVIDIA-A100-SXM4-40GB");

    cpu_cluster.cpu_mode = true;
    cpu_cluster.sched = sched_cluster_new();
    sched_cluster_add_team(cpu_cluster.sched, "team-a");
    cpu_cluster.cpu_slots = 2;

    spec_k8s_defaults(&k8s);
}

/* ---- helpers ---- */
static size_t depth_of(const json_t *v)
{
    size_t most = 0, i;
    const char *key;
    json_t *x;
    if (json_is_object(v)) {
        json_object_foreach((json_t *)v, key, x) {
            size_t dx = depth_of(x);
            if (dx > most) most = dx;
        }
        return most + 1;
    }
    if (json_is_array(v)) {
        json_array_foreach(v, i, x) {
            size_t dx = depth_of(x);
            if (dx > most) most = dx;
        }
        return most + 1;
    }
    return 0;
}

/* What srv_submit_text does with the operator's YAML first: the spec
 * loader, then the resolved spec of each job it loaded; the diagnostics as
 * the Invalid condition's message. The YAML layer must take the text. */
static void load_yaml(const char *name, const char *yaml, bool must_parse, int64_t generation)
{
    if (!yaml) __builtin_trap();
    size_t len = strlen(yaml);
    if (must_parse) {
        diag_list yd;
        diag_list_init(&yd);
        spec_ystream ys;
        if (!spec_yaml_parse(name, yaml, len, &ys, &yd)) {
            fprintf(stderr, "--- the YAML that does not parse back:\n%s---\n", yaml);
            diag_print_all(&yd, stderr);
            __builtin_trap();
        }
        spec_ystream_free(&ys);
        diag_list_free(&yd);
    }
    spec_file f;
    diag_list d;
    diag_list_init(&d);
    size_t errors = spec_load_string(name, yaml, len, &f, &d);
    for (size_t i = 0; i < f.n_docs && i < 4; i++) {
        const spec_doc *doc = &f.docs[i];
        const spec_job *j = doc->kind == SPEC_KIND_JOB ? doc->job
                            : doc->kind == SPEC_KIND_EXPERIMENT && doc->experiment->n_jobs
                                ? doc->experiment->jobs[0]
                                : NULL;
        if (j) free(spec_job_to_json(j));
    }
    char *msg = op_diags_message(&d);
    if (!msg || (errors && !msg[0])) __builtin_trap();
    if (errors) {
        json_t *st = op_invalid_status("Invalid", msg, generation, 1764622800.0);
        if (!json_is_string(json_object_get(st, "phase"))) __builtin_trap();
        free(json_dumps(st, JSON_COMPACT));
        json_decref(st);
    }
    free(msg);
    spec_file_free(&f);
    diag_list_free(&d);
}

static void user_job(const json_t *obj, const srv_cluster *c, bool must_parse, int64_t generation)
{
    char *plan = (char *)"unset", why[512] = "";
    char *yaml = op_userjob_yaml(obj, c, &k8s, &plan, why, sizeof why);
    if (!yaml) {
        if (plan || !why[0]) __builtin_trap();
        json_t *st = op_invalid_status("Invalid", why, generation, 0);
        free(json_dumps(st, JSON_COMPACT));
        json_decref(st);
        return;
    }
    if (!plan) __builtin_trap();
    json_t *p = json_loads(plan, 0, NULL);
    if (!p) __builtin_trap();
    json_int_t gpus = json_integer_value(json_object_get(p, "gpus")),
               nodes = json_integer_value(json_object_get(p, "nodes")),
               per = json_integer_value(json_object_get(p, "gpus_per_node"));
    if (nodes < 1 || gpus != nodes * per) {
        fprintf(stderr, "plan: %s\n", plan);
        __builtin_trap();
    }
    json_decref(p);
    free(plan);
    load_yaml("user-job.yaml", yaml, must_parse, generation);
    free(yaml);
}

/* ---- store jobs from the input ---- */
static char *str_of(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    if (json_is_string(v)) return xstrdup(json_string_value(v));
    return NULL;
}

/* Any finite number; a string through strtod (so "nan" and "inf" too). */
static double num_of(const json_t *o, const char *key, double def)
{
    const json_t *v = json_object_get(o, key);
    if (json_is_number(v)) return json_number_value(v);
    if (json_is_string(v)) return strtod(json_string_value(v), NULL);
    return def;
}

/* A time as the store holds them: the clock's, or parse_time's (timegm of
 * the API's RFC 3339 text): finite, and within what gmtime takes. */
static double time_of(const json_t *o, const char *key)
{
    double t = num_of(o, key, 0);
    return isfinite(t) && fabs(t) < 1e16 ? t : 0;
}

static int64_t int_of(const json_t *o, const char *key, int64_t def)
{
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : def;
}

static void store_job_of(const json_t *o, store_job *j, int64_t fallback_id)
{
    memset(j, 0, sizeof *j);
    j->id = int_of(o, "id", fallback_id);
    j->team = str_of(o, "team");
    j->name = str_of(o, "name");
    j->experiment = str_of(o, "experiment");
    j->priority_class = str_of(o, "priority_class");
    j->priority = int_of(o, "priority", 0);
    const json_t *state = json_object_get(o, "state");
    store_state s = STORE_QUEUED;
    if (json_is_integer(state)) {
        json_int_t v = json_integer_value(state) % STORE_N_STATES;
        s = (store_state)(v < 0 ? v + STORE_N_STATES : v);
    } else if (json_is_string(state) && op_phase_parse(json_string_value(state), &s)) {
        if (strcmp(op_phase_name(s), json_string_value(state)) != 0) __builtin_trap();
    }
    j->state = s;
    j->created_at = time_of(o, "created_at");
    j->updated_at = time_of(o, "updated_at");
    j->started_at = time_of(o, "started_at");
    j->finished_at = time_of(o, "finished_at");
    j->attempts = (int)int_of(o, "attempts", 0);
    j->max_retries = (int)int_of(o, "max_retries", 0);
    j->wait_reason = str_of(o, "wait_reason");
    const json_t *pl = json_object_get(o, "placement_json");
    if (json_is_string(pl)) j->placement_json = xstrdup(json_string_value(pl));
    else if (pl && !json_is_null(pl)) j->placement_json = json_dumps(pl, JSON_COMPACT | JSON_ENCODE_ANY);
    const json_t *pr = json_object_get(o, "progress");
    j->progress.step = int_of(pr, "step", -1);
    j->progress.total_steps = int_of(pr, "total_steps", 0);
    j->progress.loss = num_of(pr, "loss", NAN);
    j->progress.tokens_per_second = num_of(pr, "tokens_per_second", 0);
    j->exit_code = (int)int_of(o, "exit_code", -1);
    j->exit_reason = str_of(o, "exit_reason");
    j->gpu_seconds = num_of(o, "gpu_seconds", 0);
    j->cost = num_of(o, "cost", 0);
    j->checkpoint_step = int_of(o, "checkpoint_step", -1);
    j->checkpoint_path = str_of(o, "checkpoint_path");
    j->checkpoint_at = time_of(o, "checkpoint_at");
}

static void check_status(json_t *st)
{
    if (!json_is_object(st) || !json_is_string(json_object_get(st, "phase"))) __builtin_trap();
    char *text = json_dumps(st, JSON_COMPACT);
    if (!text) __builtin_trap();
    free(text);
    json_decref(st);
}

static void statuses(const json_t *root, int64_t generation)
{
    const json_t *src = json_object_get(root, "store");
    if (!src) src = root;
    size_t n = json_is_array(src) ? json_array_size(src) : 1;
    if (n > FUZZ_MAX_STORE_JOBS) n = FUZZ_MAX_STORE_JOBS;
    if (n == 0) return;
    store_job *jobs = xcalloc(n, sizeof *jobs);
    for (size_t i = 0; i < n; i++)
        store_job_of(json_is_array(src) ? json_array_get(src, i) : src, &jobs[i], (int64_t)i + 1);
    check_status(op_job_status(&jobs[0], generation));
    check_status(op_experiment_status(jobs, n, generation));
    for (size_t i = 0; i < n; i++) store_job_clear(&jobs[i]);
    free(jobs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    json_t *root = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL);
    if (!root) return 0;
    bool shallow = depth_of(root) + FUZZ_WRAP_DEPTH <= SPEC_MAX_DEPTH;
    int64_t generation = int_of(json_object_get(root, "metadata"), "generation", 1);

    char *yaml = op_object_yaml(root);
    load_yaml("object.yaml", yaml, shallow, generation);
    free(yaml);

    user_job(root, &gpu_cluster, shallow, generation);
    user_job(root, &cpu_cluster, shallow, generation);

    statuses(root, generation);
    json_t *inv = op_invalid_status(json_is_string(json_object_get(root, "reason"))
                                        ? json_string_value(json_object_get(root, "reason"))
                                        : "Invalid",
                                    json_string_value(json_object_get(root, "message")), generation,
                                    time_of(root, "at"));
    check_status(inv);
    json_decref(root);
    return 0;
}
