/* fuzz_spec.c: libFuzzer target for the spec part. Any bytes go through
 * spec_load_string (YAML layer, decoders, experiment expansion, cluster
 * checks); every diagnostic is formatted. A job that loads is written out
 * as YAML and JSON, and both must load back without an error: a failure
 * there is a finding too (the serialisers and the decoder disagree).
 * See docs/fuzzing.md. */
#include "spec/spec.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Jobs of one experiment that are round-tripped (all are decoded). */
#define FUZZ_ROUND_TRIPS 3

static void reload(const char *text)
{
    if (!text) __builtin_trap();
    spec_file f;
    diag_list d;
    diag_list_init(&d);
    if (spec_load_string("roundtrip", text, strlen(text), &f, &d) != 0) {
        diag_print_all(&d, stderr);
        __builtin_trap();
    }
    spec_file_free(&f);
    diag_list_free(&d);
}

static void round_trip(const spec_job *j)
{
    char *y = spec_job_to_yaml(j), *js = spec_job_to_json(j);
    reload(y);
    reload(js);
    free(y);
    free(js);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    spec_file f;
    diag_list d;
    diag_list_init(&d);
    spec_load_string("fuzz.yaml", (const char *)data, size, &f, &d);
    sb s;
    sb_init(&s);
    for (size_t i = 0; i < d.len; i++) diag_format(&d.items[i], &s);
    sb_free(&s);
    for (size_t i = 0; i < f.n_docs; i++) {
        if (f.docs[i].kind == SPEC_KIND_JOB) round_trip(f.docs[i].job);
        if (f.docs[i].kind == SPEC_KIND_EXPERIMENT)
            for (size_t k = 0; k < f.docs[i].experiment->n_jobs && k < FUZZ_ROUND_TRIPS; k++)
                round_trip(f.docs[i].experiment->jobs[k]);
    }
    spec_file_free(&f);
    diag_list_free(&d);
    return 0;
}
