/* fuzz_server_config.c: libFuzzer target for the ServerConfig loader
 * (spec_server_load_string: the YAML layer, the decoder, the checks across
 * fields, the kubernetes section). Every diagnostic is formatted; a config
 * that loads has a team's namespace made, and with executor k8s the Job of
 * a small attempt rendered from its settings and printed as YAML, which
 * must parse back (a finding otherwise). See docs/fuzzing.md. */
#include "exec/exec.h"
#include "k8s/k8s.h"
#include "spec/spec.h"
#include "spec/spec_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void render_with(const spec_server *s)
{
    spec_job *j = spec_job_new_default();
    free(j->name);
    j->name = xstrdup("fuzz");
    free(j->team);
    j->team = xstrdup("team-a");
    exec_job_desc d = {.spec = j, .job_id = 1, .team = "team-a", .name = "fuzz", .attempt = 1,
                       .nnodes = 2, .gpus_per_node = 1};
    exec_job_req r;
    exec_job_req_init(&r, &d);
    json_t *objs = exec_k8s_objects(&r.q, &s->k8s, true);
    char *y = spec_json_to_yaml(objs, true);
    diag_list dl;
    diag_list_init(&dl);
    /* the manifests are not lathe documents: only the YAML layer must take them */
    spec_ystream ys;
    if (!spec_yaml_parse("rendered", y, strlen(y), &ys, &dl)) __builtin_trap();
    spec_ystream_free(&ys);
    diag_list_free(&dl);
    free(y);
    json_decref(objs);
    exec_job_req_free(&r);
    spec_job_free(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    spec_server *s = NULL;
    diag_list d;
    diag_list_init(&d);
    spec_server_load_string("fuzz.yaml", (const char *)data, size, &s, &d);
    sb out;
    sb_init(&out);
    for (size_t i = 0; i < d.len; i++) diag_format(&d.items[i], &out);
    sb_free(&out);
    if (s) {
        char *ns = spec_k8s_namespace(&s->k8s, "team-a");
        free(ns);
        if (s->executor == SPEC_EXECUTOR_K8S) render_with(s);
        spec_server_free(s);
    }
    diag_list_free(&d);
    return 0;
}
