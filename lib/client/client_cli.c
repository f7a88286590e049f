/* client_cli.c: the options every client command takes (--server, --token,
 * --team, --cacert) and opening a handle from them, with the configuration's problems
 * printed the way every lathe command prints them.
 */
#include "client.h"

#include <stdio.h>
#include <string.h>

/* The slot of a shared option "--NAME", or NULL. */
static const char **flag_slot(client_flags *f, const char *arg)
{
    static const char *const names[] = {"--server", "--token", "--team", "--cacert"};
    const char **slots[] = {&f->server, &f->token, &f->team, &f->cacert};
    for (size_t k = 0; k < 4; k++)
        if (strcmp(arg, names[k]) == 0) return slots[k];
    return NULL;
}

int client_flags_take(client_flags *f, const char *cmd, int argc, char **argv, int *i)
{
    const char **slot = flag_slot(f, argv[*i]);
    if (!slot) return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "lathe %s: %s needs a value\n(see `lathe help %s`)\n", cmd, argv[*i], cmd);
        return -1;
    }
    *slot = argv[++*i];
    ++*i;
    return 1;
}

int client_open(const client_flags *f, const char *cmd, client **out)
{
    *out = NULL;
    client_config cfg;
    diag_list d;
    diag_list_init(&d);
    bool ok = client_config_resolve(&cfg, f->server, f->token, NULL, &d);
    if (f->cacert) { /* the flag outranks LATHE_CACERT and the file */
        free(cfg.cacert);
        free(cfg.cacert_from);
        cfg.cacert = xstrdup(f->cacert);
        cfg.cacert_from = xstrdup("--cacert");
        ok = ok && client_config_check_cacert(&cfg, &d);
    }
    if (!ok) {
        fprintf(stderr, "lathe %s: the client configuration is not usable:\n", cmd);
        diag_print_all(&d, stderr);
    }
    diag_list_free(&d);
    if (ok) *out = client_new(&cfg);
    client_config_free(&cfg);
    return ok ? LT_EXIT_OK : LT_EXIT_INVALID;
}
