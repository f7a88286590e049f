/* cmd_server.c: `lathe server`, the controller and HTTP API (lib/server,
 * docs/server.md), and `lathe server hash-token`, which prints the SHA-256
 * a ServerConfig's tokens list holds. Owns the one piece of global state a
 * signal handler needs: the stop flag that SIGTERM and SIGINT raise, and
 * the reload flag of SIGHUP (the tokens are re-read). */
#include "cli.h"

#include "base/base.h"
#include "server/server.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile sig_atomic_t server_stop_flag, server_reload_flag;

static void server_on_signal(int sig)
{
    if (sig == SIGHUP) server_reload_flag = 1;
    else server_stop_flag = 1;
}

static const char server_help[] =
    "usage: lathe server [--config FILE] [--listen HOST:PORT] [--data DIR] [--quiet]\n"
    "       lathe server hash-token [TOKEN | -]\n"
    "       lathe server reload [--config FILE] [--data DIR]\n"
    "\n"
    "Runs the lathe server: the HTTP API of docs/api.md, the job store (SQLite\n"
    "in the data folder) and the controller that schedules, runs, retries,\n"
    "preempts and re-attaches to trainers. Trainers keep running when the\n"
    "server stops or is killed; a new server on the same data folder takes\n"
    "them over. SIGTERM or Ctrl-C stops it. SIGHUP re-reads the tokens (the\n"
    "config's tokens list and its tokensFile) without a restart; other settings\n"
    "need one.\n"
    "\n"
    "options:\n"
    "  --config FILE       a ServerConfig (docs/server.md); without one: this\n"
    "                      machine's GPUs (or CPU slots), policy lathe, and an\n"
    "                      admin token made in DATA/admin-token\n"
    "  --listen HOST:PORT  overrides spec.listen (default 127.0.0.1:8740; port 0\n"
    "                      lets the system choose, see DATA/server.addr)\n"
    "  --data DIR          overrides spec.dataDir\n"
    "  --quiet             no log lines on stderr\n"
    "\n"
    "hash-token TOKEN      prints the SHA-256 to put in the config's tokens list;\n"
    "                      `-` reads the token from standard input; without TOKEN\n"
    "                      a new random token is made and printed with its hash\n"
    "reload                sends SIGHUP to the server running on the data folder\n"
    "                      (of --config's dataDir, or --data): it re-reads the\n"
    "                      tokens; see its log for the result. The config and\n"
    "                      tokens file are checked first: an invalid one is\n"
    "                      reported (exit 2) and nothing is sent\n"
    "\n"
    "exit: 0 stopped, 1 usage, 2 invalid config, 4 data folder, 5 address in use\n"
    "      or another server on the data folder\n"
    "\n"
    "examples:\n"
    "  lathe server --config /etc/lathe/server.yaml\n"
    "  lathe server --data /tmp/lathe --listen 127.0.0.1:0\n"
    "  lathe server hash-token\n"
    "  lathe server reload --config /etc/lathe/server.yaml\n";

static int hash_token(int argc, char **argv)
{
    char hash[65], token[1024];
    if (argc > 3) return cli_usage_error("server", "hash-token takes one token");
    if (argc == 2) {
        unsigned char b[32];
        FILE *f = fopen("/dev/urandom", "rb");
        size_t got = f ? fread(b, 1, sizeof b, f) : 0;
        if (f) fclose(f);
        if (got != sizeof b) {
            fprintf(stderr, "lathe server: cannot read /dev/urandom\n");
            return LT_EXIT_IO;
        }
        for (size_t i = 0; i < sizeof b; i++) snprintf(token + 2 * i, 3, "%02x", b[i]);
        srv_hash_token(token, hash);
        printf("token:  %s\nsha256: %s\n", token, hash);
        return LT_EXIT_OK;
    }
    if (strcmp(argv[2], "-") == 0) {
        if (!fgets(token, sizeof token, stdin)) return cli_usage_error("server", "no token on standard input");
        token[strcspn(token, "\r\n")] = '\0';
    } else {
        snprintf(token, sizeof token, "%s", argv[2]);
    }
    if (!token[0]) return cli_usage_error("server", "the token is empty");
    srv_hash_token(token, hash);
    printf("%s\n", hash);
    return LT_EXIT_OK;
}

/* Takes the value of option argv[*i] ("--opt V"; main.c turns "--opt=V"
 * into that). */
static const char *option_value(int argc, char **argv, int *i, const char *name)
{
    if (strcmp(argv[*i], name) == 0 && *i + 1 < argc) return argv[++*i];
    return NULL;
}

static int server_run(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "hash-token") == 0) return hash_token(argc, argv);
    bool reload = argc >= 2 && strcmp(argv[1], "reload") == 0;
    srv_options o = {0};
    for (int i = reload ? 2 : 1; i < argc; i++) {
        const char *v;
        if ((v = option_value(argc, argv, &i, "--config"))) o.config_path = v;
        else if ((v = option_value(argc, argv, &i, "--listen"))) o.listen = v;
        else if ((v = option_value(argc, argv, &i, "--data"))) o.data_dir = v;
        else if (strcmp(argv[i], "--quiet") == 0 || strcmp(argv[i], "-q") == 0) o.quiet = true;
        else if (argv[i][0] == '-')
            return cli_usage_error("server", "unknown option '%s' (or it needs a value)", argv[i]);
        else return cli_usage_error("server", "unexpected argument '%s'", argv[i]);
    }
    if (reload) {
        char err[1024] = "";
        long pid = 0;
        int rc = srv_signal_running(&o, SIGHUP, &pid, err, sizeof err);
        if (rc) fprintf(stderr, "lathe server reload: %s\n", err);
        else printf("sent SIGHUP to the server (pid %ld): it re-reads its tokens (its log says "
                    "how it went)\n", pid);
        return rc;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = server_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    server_stop_flag = 0;
    server_reload_flag = 0;
    o.reload = &server_reload_flag;
    return srv_run(&o, &server_stop_flag);
}

const cli_command cli_cmd_server = {
    .name = "server",
    .summary = "run the API server and controller (jobs, scheduling, trainers)",
    .help = server_help,
    .run = server_run,
};
