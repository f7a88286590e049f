/* op_objects.c: the operator's pure functions (op.h): Kubernetes objects
 * as lathe reads them, and lathe's jobs as the objects' status. No I/O. */
#include "op.h"

#include "k8s/k8s.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *op_jstr(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

int op_quantity(const json_t *v, int max)
{
    if (json_is_integer(v)) {
        json_int_t n = json_integer_value(v);
        return n < 0 || n > max ? -1 : (int)n;
    }
    const char *s = json_string_value(v);
    if (!s || !*s) return -1;
    char *end;
    long n = strtol(s, &end, 10);
    return *end || n < 0 || n > max ? -1 : (int)n;
}

/* ---- objects -> the spec loader ---- */
char *op_object_yaml(const json_t *obj)
{
    const json_t *meta = json_object_get(obj, "metadata");
    json_t *m = json_object();
    const char *keys[] = {"name", "namespace"};
    for (size_t i = 0; i < 2; i++)
        if (json_object_get(meta, keys[i]))
            json_object_set(m, keys[i], json_object_get(meta, keys[i]));
    if (json_object_size(json_object_get(meta, "labels")))
        json_object_set(m, "labels", json_object_get(meta, "labels"));
    json_t *doc = json_object();
    json_object_set(doc, "apiVersion", json_object_get(obj, "apiVersion"));
    json_object_set(doc, "kind", json_object_get(obj, "kind"));
    json_object_set_new(doc, "metadata", m);
    if (json_object_get(obj, "spec")) json_object_set(doc, "spec", json_object_get(obj, "spec"));
    char *yaml = spec_json_to_yaml(doc, false);
    json_decref(doc);
    return yaml;
}

char *op_diags_message(const diag_list *d)
{
    sb out;
    sb_init(&out);
    for (size_t i = 0; i < d->len; i++) {
        if (d->items[i].level != DIAG_ERROR) continue;
        diag x = d->items[i];
        x.file = NULL; /* positions of lathe's YAML of the object, not of the user's file */
        x.line = x.col = 0;
        sb line;
        sb_init(&line);
        diag_format(&x, &line);
        if (out.len) sb_puts(&out, "\n");
        sb_puts(&out, sb_str(&line));
        sb_free(&line);
    }
    return sb_take(&out);
}

/* ---- a user's own Job -> a lathe job ---- */
/* The lathe GPU type a product label's value names: the type whose
 * product it is, else the type of that name; -1 when none. */
static int type_of_product(const srv_cluster *c, const char *product)
{
    const sched_cluster *sc = c->sched;
    for (int t = 0; sc && t < sc->n_types; t++) {
        const char *p = srv_cluster_product(c, t);
        if ((p && strcmp(p, product) == 0) || strcmp(sc->types[t].name, product) == 0) return t;
    }
    return -1;
}

char *op_userjob_yaml(const json_t *job, const srv_cluster *c, const spec_k8s *k,
                      char **plan_json, char *why, size_t whysz)
{
    *plan_json = NULL;
    const json_t *meta = json_object_get(job, "metadata");
    const json_t *spec = json_object_get(job, "spec");
    const json_t *pod = json_object_get(json_object_get(spec, "template"), "spec");
    const json_t *ctr = json_array_get(json_object_get(pod, "containers"), 0);
    if (!ctr) {
        snprintf(why, whysz, "the Job's pod template has no container");
        return NULL;
    }
    json_t *par = json_object_get(spec, "parallelism"), *comp = json_object_get(spec, "completions");
    json_int_t want = par ? json_integer_value(par) : 1;
    if (want > 4096) { /* resources.nodes' limit; GPUs x nodes stays an int */
        snprintf(why, whysz,
                 "spec.parallelism (%lld) is more nodes than a lathe job may span (at most 4096)",
                 (long long)want);
        return NULL;
    }
    int nodes = want < 1 ? 1 : (int)want;
    if (comp && json_integer_value(comp) != nodes) {
        snprintf(why, whysz,
                 "spec.parallelism (%d) and spec.completions (%lld) differ: lathe admits a Job "
                 "whose pods all run at once; set both to the number of nodes",
                 nodes, (long long)json_integer_value(comp));
        return NULL;
    }
    const json_t *res = json_object_get(ctr, "resources");
    int gpus = op_quantity(json_object_get(json_object_get(res, "limits"), k->gpu_resource), 4096);
    if (gpus < 0) gpus = op_quantity(json_object_get(json_object_get(res, "requests"), k->gpu_resource), 4096);
    if (gpus <= 0 && !c->cpu_mode) {
        snprintf(why, whysz,
                 "the Job's first container asks for no %s: a Job without GPUs needs no GPU "
                 "queue (remove the %s label, or set resources.limits[\"%s\"])",
                 k->gpu_resource, K8S_LABEL_QUEUE, k->gpu_resource);
        return NULL;
    }
    const char *product = op_jstr(json_object_get(pod, "nodeSelector"), k->gpu_product_label);
    int type = -1;
    if (!c->cpu_mode) {
        type = product ? type_of_product(c, product) : 0;
        if (type < 0 || !c->sched || c->sched->n_types == 0) {
            snprintf(why, whysz, "the Job's nodeSelector %s=%s names no GPU type of this cluster",
                     k->gpu_product_label, product ? product : "");
            return NULL;
        }
    }

    json_t *cmd = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(ctr, "command"), i, v) json_array_append(cmd, v);
    json_array_foreach(json_object_get(ctr, "args"), i, v) json_array_append(cmd, v);
    if (json_array_size(cmd) == 0) json_array_append_new(cmd, json_string("(the image's entrypoint)"));
    const json_t *annot = json_object_get(meta, "annotations");
    const char *model = op_jstr(annot, "lathe.dev/base-model"), *data = op_jstr(annot, "lathe.dev/dataset");
    json_t *body = json_pack("{s:{s:s}, s:{s:s}, s:{s:o}}", "baseModel", "name",
                             model ? model : op_jstr(meta, "name"), "trainingData", "datasetPath",
                             data ? data : "(inside the Job)", "trainer", "command", cmd);
    if (op_jstr(ctr, "image")) json_object_set(json_object_get(body, "trainer"), "image", json_object_get(ctr, "image"));
    if (op_jstr(pod, "priorityClassName"))
        json_object_set(body, "priorityClassName", json_object_get(pod, "priorityClassName"));
    json_t *r = json_object();
    if (gpus > 0) {
        json_t *g = json_pack("{s:i}", "count", gpus);
        if (type >= 0) json_object_set_new(g, "type", json_string(c->sched->types[type].name));
        json_object_set_new(r, "gpu", g);
    }
    if (nodes > 1) json_object_set_new(r, "nodes", json_integer(nodes));
    if (json_object_size(r)) json_object_set_new(body, "resources", r);
    else json_decref(r);
    json_t *dl = json_object_get(spec, "activeDeadlineSeconds");
    if (json_integer_value(dl) > 0)
        json_object_set_new(body, "timeout",
                            json_pack("{s:I}", "maxDuration", (json_int_t)json_integer_value(dl)));
    json_t *doc = json_pack("{s:s, s:s, s:{s:O, s:O}, s:o}", "apiVersion", "lathe/v1", "kind",
                            "LoRATrainingJob", "metadata", "name", json_object_get(meta, "name"),
                            "namespace", json_object_get(meta, "namespace"), "spec", body);
    char *yaml = spec_json_to_yaml(doc, false);
    json_decref(doc);

    json_t *plan = json_pack("{s:i, s:i, s:i, s:f, s:f, s:n, s:b}", "gpus", gpus * nodes, "nodes",
                             nodes, "gpus_per_node", gpus, "per_gpu_gib", 0.0, "seconds", 0.0,
                             "steps", "gpu_type_fixed", product != NULL);
    json_object_set_new(plan, "gpu_type",
                        type >= 0 ? json_string(c->sched->types[type].name) : json_null());
    *plan_json = json_dumps(plan, JSON_COMPACT);
    json_decref(plan);
    return yaml;
}

/* ---- the status ---- */
static const char *const phase_names[STORE_N_STATES] = {
    "Queued", "Starting", "Running", "Stopping", "Succeeded", "Failed", "Cancelled", "TimedOut",
};

const char *op_phase_name(store_state s)
{
    return (unsigned)s < STORE_N_STATES ? phase_names[s] : "Pending";
}

bool op_phase_parse(const char *phase, store_state *out)
{
    for (int i = 0; phase && i < STORE_N_STATES; i++)
        if (strcmp(phase, phase_names[i]) == 0) {
            *out = (store_state)i;
            return true;
        }
    return false;
}

/* RFC 3339 in UTC, seconds (what metav1.Time holds): srv_json_time's. */
static void set_time(json_t *o, const char *key, double t)
{
    if (t > 0) json_object_set_new(o, key, srv_json_time(t));
}

static void set_num(json_t *o, const char *key, double v)
{
    if (isfinite(v)) json_object_set_new(o, key, json_real(round(v * 1e4) / 1e4));
}

static json_t *condition(const char *type, bool on, const char *reason, const char *message,
                         double at, int64_t generation)
{
    json_t *c = json_pack("{s:s, s:s, s:s, s:s, s:I}", "type", type, "status",
                          on ? "True" : "False", "reason", reason, "message",
                          message ? message : "", "observedGeneration", (json_int_t)generation);
    json_object_set_new(c, "lastTransitionTime", srv_json_time(at > 0 ? at : 1));
    return c;
}

/* The store's placement ({"node", "gpu_type", "gpus", "nodes"?}) as the
 * status shows it: node, nodes, GPUs in all, GPU type. */
static json_t *placement_status(const char *placement_json)
{
    json_t *p = placement_json ? json_loads(placement_json, 0, NULL) : NULL;
    if (!p) return NULL;
    json_t *out = json_object();
    json_t *nodes = json_array();
    int gpus = 0;
    json_t *list = json_object_get(p, "nodes");
    if (json_is_array(list)) {
        size_t i;
        json_t *n;
        json_array_foreach(list, i, n) {
            json_array_append(nodes, json_object_get(n, "node"));
            gpus += (int)json_array_size(json_object_get(n, "gpus"));
        }
    } else {
        if (op_jstr(p, "node")) json_array_append(nodes, json_object_get(p, "node"));
        gpus = (int)json_array_size(json_object_get(p, "gpus"));
    }
    if (op_jstr(p, "node")) json_object_set(out, "node", json_object_get(p, "node"));
    json_object_set_new(out, "nodes", nodes);
    json_object_set_new(out, "gpus", json_integer(gpus));
    if (op_jstr(p, "gpu_type")) json_object_set(out, "gpuType", json_object_get(p, "gpu_type"));
    json_decref(p);
    return out;
}

json_t *op_job_status(const store_job *j, int64_t generation)
{
    json_t *st = json_object();
    json_object_set_new(st, "phase", json_string(op_phase_name(j->state)));
    json_object_set_new(st, "attempts", json_integer(j->attempts));
    json_object_set_new(st, "observedGeneration", json_integer(generation));
    json_t *pl = j->state == STORE_STARTING || j->state == STORE_RUNNING || j->state == STORE_STOPPING
                     ? placement_status(j->placement_json)
                     : NULL;
    if (pl) json_object_set_new(st, "placement", pl);
    if (j->checkpoint_step >= 0) {
        json_t *ck = json_pack("{s:I}", "step", (json_int_t)j->checkpoint_step);
        if (j->checkpoint_path) json_object_set_new(ck, "path", json_string(j->checkpoint_path));
        set_time(ck, "time", j->checkpoint_at);
        json_object_set_new(st, "checkpoint", ck);
    }
    if (j->progress.step >= 0) {
        set_num(st, "loss", j->progress.loss);
        set_num(st, "tokensPerSecond", j->progress.tokens_per_second);
    }
    set_num(st, "cost", j->cost);
    set_num(st, "gpuHours", j->gpu_seconds / 3600.0);
    if (j->state == STORE_QUEUED && j->wait_reason)
        json_object_set_new(st, "waitReason", json_string(j->wait_reason));
    if (j->exit_reason) json_object_set_new(st, "exitReason", json_string(j->exit_reason));
    set_time(st, "startTime", j->started_at);
    set_time(st, "completionTime", j->finished_at);

    json_t *conds = json_array();
    bool final = store_state_final(j->state);
    json_array_append_new(conds, condition("Queued", j->state == STORE_QUEUED,
                                           j->state == STORE_QUEUED ? "Waiting" : "Admitted",
                                           j->state == STORE_QUEUED ? j->wait_reason : NULL,
                                           j->state == STORE_QUEUED ? j->updated_at : j->started_at,
                                           generation));
    bool running = j->state == STORE_STARTING || j->state == STORE_RUNNING || j->state == STORE_STOPPING;
    json_array_append_new(conds, condition("Running", running, running ? op_phase_name(j->state) : "NotRunning",
                                           NULL, running ? j->started_at : j->updated_at, generation));
    if (final) {
        const char *ph = op_phase_name(j->state);
        char msg[256];
        bool why = j->exit_reason && j->state != STORE_SUCCEEDED;
        snprintf(msg, sizeof msg, "%s after %d attempt%s%s%s", ph, j->attempts,
                 j->attempts == 1 ? "" : "s", why ? ": " : "", why ? j->exit_reason : "");
        json_array_append_new(conds, condition(j->state == STORE_SUCCEEDED ? "Succeeded" : "Failed", true,
                                               ph, msg, j->finished_at, generation));
    }
    json_object_set_new(st, "conditions", conds);
    return st;
}

json_t *op_experiment_status(const store_job *jobs, size_t n, int64_t generation)
{
    int counts[STORE_N_STATES] = {0};
    double cost = 0, gpu_s = 0, best = NAN;
    int gpus = 0;
    json_t *items = json_array();
    for (size_t i = 0; i < n; i++) {
        const store_job *j = &jobs[i];
        counts[j->state]++;
        cost += j->cost;
        gpu_s += j->gpu_seconds;
        if (j->progress.step >= 0 && isfinite(j->progress.loss) && !(best <= j->progress.loss))
            best = j->progress.loss;
        json_t *pl = j->state == STORE_RUNNING ? placement_status(j->placement_json) : NULL;
        if (pl) gpus += (int)json_integer_value(json_object_get(pl, "gpus"));
        json_decref(pl);
        json_t *it = json_pack("{s:s, s:s, s:i}", "name", j->name, "phase",
                               op_phase_name(j->state), "attempts", j->attempts);
        if (j->progress.step >= 0) set_num(it, "loss", j->progress.loss);
        if (j->checkpoint_step >= 0)
            json_object_set_new(it, "checkpointStep", json_integer(j->checkpoint_step));
        set_num(it, "gpuHours", j->gpu_seconds / 3600.0);
        set_num(it, "cost", j->cost);
        json_array_append_new(items, it);
    }
    int active = counts[STORE_QUEUED] + counts[STORE_STARTING] + counts[STORE_RUNNING] +
                 counts[STORE_STOPPING];
    int running = counts[STORE_STARTING] + counts[STORE_RUNNING] + counts[STORE_STOPPING];
    const char *phase = active == 0 ? (counts[STORE_SUCCEEDED] == (int)n ? "Succeeded" : "Failed")
                        : running   ? "Running"
                                    : "Queued";
    json_t *st = json_pack("{s:s, s:I, s:{s:i, s:i, s:i, s:i, s:i}, s:o, s:{s:i}}", "phase", phase,
                           "observedGeneration", (json_int_t)generation, "jobs", "total", (int)n,
                           "queued", counts[STORE_QUEUED], "running", running, "succeeded",
                           counts[STORE_SUCCEEDED], "failed",
                           counts[STORE_FAILED] + counts[STORE_CANCELLED] + counts[STORE_TIMED_OUT],
                           "items", items, "placement", "gpus", gpus);
    set_num(st, "loss", best);
    set_num(st, "cost", cost);
    set_num(st, "gpuHours", gpu_s / 3600.0);
    return st;
}

json_t *op_invalid_status(const char *reason, const char *message, int64_t generation,
                          double at)
{
    json_t *st = json_pack("{s:s, s:I, s:i}", "phase", "Invalid", "observedGeneration",
                           (json_int_t)generation, "attempts", 0);
    json_t *conds = json_array();
    json_array_append_new(conds, condition("Invalid", true, reason, message, at, generation));
    json_object_set_new(st, "conditions", conds);
    return st;
}
