/* fuzz_kubeconfig.c: libFuzzer target for the kubeconfig reader
 * (k8s_config_parse_kubeconfig, lib/k8s/k8s_config.c). Any bytes are read
 * as a kubeconfig, once with its current-context and once with a context
 * named "lab"; relative file names resolve under a folder that does not
 * exist, so no file outside is read. The result must be either a message
 * that names the kubeconfig, or a configuration with an http(s) server
 * without a trailing '/', a namespace, a source, and an exec plugin with a
 * command and a supported apiVersion when it has one. */
#include "base/base.h"
#include "k8s/k8s.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const k8s_config *c)
{
    if (!c->server) abort();
    if (strncmp(c->server, "https://", 8) != 0 && strncmp(c->server, "http://", 7) != 0) abort();
    size_t n = strlen(c->server);
    if (n > 8 && c->server[n - 1] == '/') abort();
    if (!c->namespace_ || !c->namespace_[0] || !c->source) abort();
    if (c->exec_argc) {
        if (!c->exec_argv[0] || !c->exec_argv[0][0] || !c->exec_api_version) abort();
        if (strcmp(c->exec_api_version, "client.authentication.k8s.io/v1") != 0 &&
            strcmp(c->exec_api_version, "client.authentication.k8s.io/v1beta1") != 0)
            abort();
        for (size_t i = 0; i < c->n_exec_env; i++)
            if (!strchr(c->exec_env[i], '=')) abort();
    }
    if ((c->cert_data != NULL) != (c->key_data != NULL) && !c->cert_file && !c->key_file) abort();
    k8s_config copy = *c;
    (void)copy;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const contexts[] = {NULL, "lab"};
    for (size_t i = 0; i < 2; i++) {
        k8s_config c;
        char err[1024];
        err[0] = '\0';
        if (k8s_config_parse_kubeconfig(&c, "fuzz.yaml", (const char *)data, size,
                                        "/nonexistent-lathe-fuzz", contexts[i], err,
                                        sizeof err)) {
            check(&c);
            k8s_config_free(&c);
        } else if (!strstr(err, "fuzz.yaml")) {
            abort();
        }
    }
    return 0;
}
