/* k8s_render_crd.c: the CustomResourceDefinitions of lathe's operator mode
 * (k8s_render_crds, k8s.h): LoRATrainingJob and LoRAExperiment, each in the
 * seed article's group training.example.com and in lathe's own lathe.dev,
 * version v1, namespaced. A pure function.
 *
 *   names      loratrainingjobs (short: lorajob, lorajobs) and
 *              loraexperiments (short: loraexp, loraexps), category lathe;
 *              the same in both groups, so `kubectl get lorajobs` works
 *              whichever group is installed (with both, kubectl takes the
 *              first in discovery order; `lorajobs.lathe.dev` picks one)
 *   schema     spec: spec_openapi_schema (the spec decoder's own tables);
 *              status: below, written by lathe through the status
 *              subresource only
 *   columns    STATE (.status.phase), GPUS (.status.placement.gpus), LOSS
 *              (.status.loss), AGE; wide output adds the wait reason, the
 *              newest checkpoint's step and the attempt
 */
#include "k8s.h"

#include "base/base.h"

#include <stdio.h>
#include <string.h>

#define GROUP_SEED "training.example.com"
#define GROUP_LATHE "lathe.dev"

typedef struct crd_kind {
    const char *kind, *plural, *singular, *short1, *short2;
} crd_kind;

static const crd_kind crd_kinds[] = {
    {"LoRATrainingJob", "loratrainingjobs", "loratrainingjob", "lorajob", "lorajobs"},
    {"LoRAExperiment", "loraexperiments", "loraexperiment", "loraexp", "loraexps"},
};

static json_t *typed(const char *type, const char *description)
{
    return json_pack("{s:s, s:s}", "type", type, "description", description);
}

static json_t *timestamp(const char *description)
{
    return json_pack("{s:s, s:s, s:s}", "type", "string", "format", "date-time", "description",
                     description);
}

/* metav1.Condition's shape: a list keyed by type. */
static json_t *conditions_schema(void)
{
    json_t *props = json_object();
    json_object_set_new(props, "type",
                        typed("string", "Invalid, Planned, Admitted, Running, Succeeded, "
                                        "Failed, Preempted, ..."));
    json_object_set_new(props, "status", json_pack("{s:s, s:[s,s,s]}", "type", "string", "enum",
                                                   "True", "False", "Unknown"));
    json_object_set_new(props, "reason", typed("string", "a CamelCase reason"));
    json_object_set_new(props, "message",
                        typed("string", "what happened, in lathe's words (for Invalid: the "
                                        "messages of `lathe validate`)"));
    json_object_set_new(props, "lastTransitionTime",
                        timestamp("when the status last changed"));
    json_object_set_new(props, "observedGeneration",
                        json_pack("{s:s, s:s}", "type", "integer", "format", "int64"));
    json_t *item = json_pack("{s:s, s:o, s:[s,s]}", "type", "object", "properties", props,
                             "required", "type", "status");
    return json_pack("{s:s, s:o, s:s, s:[s]}", "type", "array", "items", item,
                     "x-kubernetes-list-type", "map", "x-kubernetes-list-map-keys", "type");
}

/* What lathe reports of a job (and, summed, of an experiment). */
static json_t *status_schema(bool experiment)
{
    json_t *p = json_object();
    json_object_set_new(p, "phase",
                        typed("string", "Invalid, Queued, Starting, Running, Stopping, "
                                        "Succeeded, Failed, Cancelled or TimedOut"));
    json_object_set_new(p, "exitReason",
                        typed("string", "how the last attempt ended (oom, invalid, lost, ...)"));
    json_object_set_new(p, "conditions", conditions_schema());
    json_object_set_new(p, "attempts",
                        json_pack("{s:s, s:s, s:i}", "type", "integer", "description",
                                  "attempts started so far", "minimum", 0));
    json_object_set_new(
        p, "placement",
        json_pack("{s:s, s:s, s:{s:o, s:{s:s, s:{s:s}}, s:o, s:o}}", "type", "object",
                  "description", "where the current attempt runs", "properties", "node",
                  typed("string", "the node (the first, for a multi-node job)"), "nodes", "type",
                  "array", "items", "type", "string", "gpus",
                  typed("integer", "GPUs in all"), "gpuType",
                  typed("string", "the GPU type, as the Cluster file names it")));
    json_object_set_new(
        p, "checkpoint",
        json_pack("{s:s, s:s, s:{s:o, s:o, s:o}}", "type", "object", "description",
                  "the newest checkpoint", "properties", "step",
                  typed("integer", "the training step it holds"), "path",
                  typed("string", "where it lies, inside the checkpoint volume"), "time",
                  timestamp("when it was written")));
    json_object_set_new(p, "loss", typed("number", "the newest training loss"));
    json_object_set_new(p, "tokensPerSecond", typed("number", "training throughput"));
    json_object_set_new(p, "cost", typed("number", "money spent so far (GPU-hours x price)"));
    json_object_set_new(p, "gpuHours", typed("number", "GPU-hours used so far"));
    json_object_set_new(p, "waitReason",
                        typed("string", "why a queued job is not running yet"));
    json_object_set_new(p, "job", typed("string", "the batch/v1 Job of the current attempt"));
    json_object_set_new(p, "startTime", timestamp("when the first attempt started"));
    json_object_set_new(p, "completionTime", timestamp("when the job ended"));
    json_object_set_new(p, "observedGeneration",
                        json_pack("{s:s, s:s, s:s}", "type", "integer", "format", "int64",
                                  "description", "the metadata.generation this status is of"));
    if (experiment) {
        json_t *jobs = json_object();
        const char *counts[] = {"total", "queued", "running", "succeeded", "failed"};
        for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
            json_object_set_new(jobs, counts[i], json_pack("{s:s, s:i}", "type", "integer",
                                                           "minimum", 0));
        json_object_set_new(p, "jobs",
                            json_pack("{s:s, s:s, s:o}", "type", "object", "description",
                                      "the experiment's jobs, by state", "properties", jobs));
        json_t *item = json_pack(
            "{s:s, s:[s], s:{s:o, s:o, s:{s:s, s:s}, s:o, s:{s:s, s:s}, s:o, s:o}}", "type",
            "object", "required", "name", "properties", "name", typed("string", "the job's name"),
            "phase", typed("string", "its phase"), "attempts", "type", "integer", "format", "int32",
            "loss", typed("number", "its newest loss"), "checkpointStep", "type", "integer",
            "format", "int64", "gpuHours", typed("number", "GPU-hours used"), "cost",
            typed("number", "money spent"));
        json_object_set_new(p, "items",
                            json_pack("{s:s, s:s, s:o}", "type", "array", "description",
                                      "each job of the matrix", "items", item));
    }
    return json_pack("{s:s, s:s, s:o}", "type", "object", "description",
                     "written by lathe (the status subresource)", "properties", p);
}

static json_t *column(const char *name, const char *type, const char *path, const char *desc,
                      int priority)
{
    json_t *c = json_pack("{s:s, s:s, s:s, s:s}", "name", name, "type", type, "jsonPath", path,
                          "description", desc);
    if (priority) json_object_set_new(c, "priority", json_integer(priority));
    return c;
}

static json_t *columns(bool experiment)
{
    json_t *a = json_array();
    json_array_append_new(a, column("State", "string", ".status.phase", "the job's phase", 0));
    if (experiment)
        json_array_append_new(a, column("Jobs", "integer", ".status.jobs.total",
                                        "jobs of the matrix", 0));
    json_array_append_new(a, column("GPUs", "integer", ".status.placement.gpus",
                                    "GPUs held by the current attempt", 0));
    json_array_append_new(a, column("Loss", "number", ".status.loss", "the newest loss", 0));
    json_array_append_new(a, column("Age", "date", ".metadata.creationTimestamp",
                                    "since the object was made", 0));
    json_array_append_new(a, column("Wait", "string", ".status.waitReason",
                                    "why it is not running yet", 1));
    json_array_append_new(a, column("Step", "integer", ".status.checkpoint.step",
                                    "the newest checkpoint's step", 1));
    json_array_append_new(a, column("Attempts", "integer", ".status.attempts",
                                    "attempts started", 1));
    return a;
}

/* One CRD: <plural>.<group>. */
static json_t *crd(const crd_kind *k, const char *group)
{
    bool experiment = strcmp(k->kind, "LoRAExperiment") == 0;
    json_t *schema = spec_openapi_schema(k->kind);
    json_object_set_new(json_object_get(schema, "properties"), "status",
                        status_schema(experiment));
    char name[128], list_kind[64];
    snprintf(name, sizeof name, "%s.%s", k->plural, group);
    snprintf(list_kind, sizeof list_kind, "%sList", k->kind);
    json_t *names = json_pack("{s:s, s:s, s:s, s:s, s:[s,s], s:[s]}", "kind", k->kind, "listKind",
                              list_kind, "plural", k->plural, "singular", k->singular,
                              "shortNames", k->short1, k->short2, "categories", "lathe");
    json_t *version = json_pack("{s:s, s:b, s:b, s:{s:o}, s:{s:{}}, s:o}", "name", "v1", "served",
                                1, "storage", 1, "schema", "openAPIV3Schema", schema,
                                "subresources", "status", "additionalPrinterColumns",
                                columns(experiment));
    return json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:s, s:s, s:o, s:[o]}}", "apiVersion",
                     "apiextensions.k8s.io/v1", "kind", "CustomResourceDefinition", "metadata",
                     "name", name, "labels", K8S_LABEL_MANAGED, "lathe", "spec", "group", group,
                     "scope", "Namespaced", "names", names, "versions", version);
}

json_t *k8s_render_crds(void)
{
    json_t *out = json_array();
    const char *groups[] = {GROUP_SEED, GROUP_LATHE};
    for (size_t g = 0; g < 2; g++)
        for (size_t i = 0; i < sizeof crd_kinds / sizeof crd_kinds[0]; i++)
            json_array_append_new(out, crd(&crd_kinds[i], groups[g]));
    return out;
}
