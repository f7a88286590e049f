/* main.c: the `lathe` tool's entry point: global options, help, version and
 * dispatch to one subcommand (see cli.h). */
#include "cli.h"

#include "base/base.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_overview(FILE *f)
{
    fprintf(f,
            "lathe %s: plans, schedules, runs and serves LoRA / QLoRA fine-tuning jobs\n\n"
            "usage: lathe [--version] [--help] COMMAND [ARGS]\n\n"
            "commands:\n",
            LATHE_VERSION);
    for (size_t i = 0; cli_commands[i]; i++)
        fprintf(f, "  %-12s %s\n", cli_commands[i]->name, cli_commands[i]->summary);
    fprintf(f,
            "  %-12s %s\n\n"
            "`lathe help COMMAND` or `lathe COMMAND --help` shows a command's options.\n"
            "exit codes: 0 ok, 1 usage, 2 invalid input, 3 does not fit, 4 file error,\n"
            "            5 server or engine unreachable, 70 internal error\n",
            "help", "show help for a command");
}

const cli_command *cli_find(const char *name)
{
    for (size_t i = 0; cli_commands[i]; i++)
        if (strcmp(cli_commands[i]->name, name) == 0) return cli_commands[i];
    return NULL;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "lathe %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(see `lathe help %s`)\n", cmd);
    va_end(ap);
    return LT_EXIT_USAGE;
}

bool cli_parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool cli_parse_output(const char *s, cli_output *out)
{
    static const struct { const char *name; cli_output v; } tab[] = {
        {"text", CLI_OUT_TEXT}, {"json", CLI_OUT_JSON}, {"wide", CLI_OUT_WIDE}, {"yaml", CLI_OUT_YAML}};
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (strcmp(s, tab[i].name) == 0) {
            *out = tab[i].v;
            return true;
        }
    return false;
}

static int unknown_command(const char *name)
{
    const char *names[64];
    size_t n = 0;
    for (size_t i = 0; cli_commands[i] && n < 64; i++) names[n++] = cli_commands[i]->name;
    const char *s = str_suggest(name, names, n);
    fprintf(stderr, "lathe: '%s' is not a command.", name);
    if (s) fprintf(stderr, " Did you mean '%s'?", s);
    fprintf(stderr, "\nSee `lathe --help` for the list.\n");
    return LT_EXIT_USAGE;
}

static int help_for(const char *name)
{
    const cli_command *c = cli_find(name);
    if (!c) return unknown_command(name);
    printf("%s", c->help);
    return LT_EXIT_OK;
}

/* Every command reads "--name VALUE"; "--name=VALUE" and "-o=VALUE" (as
 * kubectl and GNU tools take them) become those two arguments here, before
 * the command sees them, so all commands accept both. Arguments after a
 * bare "--" are left alone. Returns the new vector (argc in *out_argc);
 * *owned lists the strings made here, for split_free. */
static char **split_inline_values(int argc, char **argv, int *out_argc, char ***owned,
                                  size_t *n_owned)
{
    char **v = xcalloc((size_t)argc * 2 + 1, sizeof *v);
    *owned = xcalloc((size_t)argc * 2 + 1, sizeof **owned);
    *n_owned = 0;
    int n = 0;
    bool rest = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *eq = strchr(a, '=');
        bool option = i > 0 && !rest && a[0] == '-' && eq &&
                      ((a[1] == '-' && eq > a + 2) || (a[1] != '-' && eq == a + 2));
        if (i > 0 && strcmp(a, "--") == 0) rest = true;
        if (!option) {
            v[n++] = argv[i];
            continue;
        }
        char *name = xstrndup(a, (size_t)(eq - a)), *value = xstrdup(eq + 1);
        (*owned)[(*n_owned)++] = name;
        (*owned)[(*n_owned)++] = value;
        v[n++] = name;
        v[n++] = value;
    }
    *out_argc = n;
    return v;
}

/* True when ARGS hold --help / -h before any "--". */
static bool wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) return false;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return true;
    }
    return false;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        print_overview(stderr);
        return LT_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        print_overview(stdout);
        return LT_EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("lathe %s\n", LATHE_VERSION);
        return LT_EXIT_OK;
    }
    if (strcmp(cmd, "help") == 0) {
        if (argc < 3) {
            print_overview(stdout);
            return LT_EXIT_OK;
        }
        return help_for(argv[2]);
    }
    if (cmd[0] == '-') {
        fprintf(stderr, "lathe: unknown option '%s' (see `lathe --help`)\n", cmd);
        return LT_EXIT_USAGE;
    }
    const cli_command *c = cli_find(cmd);
    if (!c) return unknown_command(cmd);
    if (wants_help(argc - 1, argv + 1)) return help_for(cmd);
    if (strcmp(cmd, "exec-shim") == 0) return c->run(argc - 1, argv + 1); /* internal */
    int n;
    char **owned;
    size_t n_owned;
    char **args = split_inline_values(argc - 1, argv + 1, &n, &owned, &n_owned);
    int rc = c->run(n, args);
    for (size_t i = 0; i < n_owned; i++) free(owned[i]);
    free(owned);
    free(args);
    return rc;
}
