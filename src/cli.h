/* cli.h: the `lathe` tool's subcommands. Each subcommand lives in its own
 * cmd_<name>.c, defines one cli_command and is listed in commands.c. main.c
 * handles --help, --version and `lathe help CMD` for all of them. */
#ifndef LATHE_CLI_H
#define LATHE_CLI_H

#include <stdbool.h>
#include <stddef.h>

typedef struct cli_command {
    const char *name;
    const char *summary; /* one line, for `lathe --help` */
    const char *help;    /* usage, options and examples, for `lathe help CMD` */
    /* argv[0] is the command name; returns an LT_EXIT_* code */
    int (*run)(int argc, char **argv);
} cli_command;

/* The table of commands, NULL-terminated (commands.c). */
extern const cli_command *const cli_commands[];

const cli_command *cli_find(const char *name);
/* Prints "lathe CMD: message" on stderr and returns LT_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A decimal integer (strtol's syntax) that is the whole of s, fits a long
 * and lies in [lo, hi]; false otherwise, *out untouched. */
bool cli_parse_long(const char *s, long lo, long hi, long *out);
/* Parses "-o FORMAT" values; returns false for an unknown format. */
typedef enum { CLI_OUT_TEXT, CLI_OUT_JSON, CLI_OUT_WIDE, CLI_OUT_YAML } cli_output;
bool cli_parse_output(const char *s, cli_output *out);

/* `lathe render grafana` / `lathe render alerts` (render_monitor.c): true
 * for those words; render_monitor runs them (argv[1] is the word). */
bool render_monitor_word(const char *word);
int render_monitor(int argc, char **argv);

#endif
