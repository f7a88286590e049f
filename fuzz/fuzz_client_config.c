/* fuzz_client_config.c: libFuzzer target for the client's config file
 * (~/.config/lathe/config.yaml, lib/client/client_config.c) and the server
 * address it holds. Each input is written to one temporary file and read
 * with client_config_resolve, the environment cleared so only the file
 * speaks. The result must be either errors that name the file (or the
 * address), or a configuration with a normalised address
 * ("http[s]://HOST[:PORT]", no trailing '/') that normalises to itself again,
 * and a positive timeout. */
#include "base/base.h"
#include "client/client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The temporary file every input is written to: a fuzzer's process-wide
 * fixture, removed at exit. */
static char fz_path[] = "/tmp/lathe-fuzz-config-XXXXXX";

static void fz_remove(void)
{
    unlink(fz_path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    int fd = mkstemp(fz_path);
    if (fd < 0) abort();
    close(fd);
    atexit(fz_remove);
    unsetenv("LATHE_SERVER");
    unsetenv("LATHE_TOKEN");
    unsetenv("LATHE_TIMEOUT");
    return 0;
}

static void write_input(const uint8_t *data, size_t size)
{
    FILE *f = fopen(fz_path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) abort();
}

static void check_config(const client_config *cfg)
{
    if (!cfg->server || !(cfg->timeout > 0)) abort();
    if (strncmp(cfg->server, "http://", 7) != 0 && strncmp(cfg->server, "https://", 8) != 0) abort();
    size_t n = strlen(cfg->server);
    if (cfg->server[n - 1] == '/') abort();
    char why[128];
    char *again = client_normalise_server(cfg->server, why, sizeof why);
    if (!again || strcmp(again, cfg->server) != 0) abort();
    free(again);
    if (cfg->token && !cfg->token[0]) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    write_input(data, size);
    client_config cfg;
    diag_list d;
    diag_list_init(&d);
    bool ok = client_config_resolve(&cfg, NULL, NULL, fz_path, &d);
    if (ok) {
        if (d.errors) abort();
        check_config(&cfg);
    } else {
        if (d.errors == 0) abort();
        for (size_t i = 0; i < d.len; i++)
            if (d.items[i].level == DIAG_ERROR && !d.items[i].file) abort();
    }
    sb out;
    sb_init(&out);
    for (size_t i = 0; i < d.len; i++) diag_format(&d.items[i], &out);
    sb_free(&out);
    diag_list_free(&d);
    client_config_free(&cfg);
    return 0;
}
