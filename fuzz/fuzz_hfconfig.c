/* fuzz_hfconfig.c: libFuzzer target for config.json parsing: any input is
 * rejected with a message or gives a config that passes its own checks and
 * survives a round trip through the writer. */
#include "hf/hf.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tr_config c, c2;
    char err[512];
    if (!tr_config_parse(&c, (const char *)data, size, "fuzz", err, sizeof err)) {
        if (!err[0]) abort();
        return 0;
    }
    if (c.n_heads % c.n_kv_heads || c.head_dim % 2) abort();
    (void)tr_config_param_count(&c);
    char *js = tr_config_to_json(&c);
    if (!tr_config_parse(&c2, js, strlen(js), "round-trip", err, sizeof err)) abort();
    if (c2.dim != c.dim || c2.n_layers != c.n_layers || c2.arch != c.arch) abort();
    free(js);
    return 0;
}
