/* k8s_exec_plugin.c: exec credential plugins (a kubeconfig's
 * users[].user.exec): the program is started from an argv with
 * posix_spawnp (never a shell), with KUBERNETES_EXEC_INFO and the
 * configured variables added to lathe's environment; its stdout is read
 * up to a bound, its stderr passes through, and it is killed when it
 * takes too long. What it prints is an ExecCredential (JSON). */
#include "k8s_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define PLUGIN_OUT_MAX (1u << 20)

void k8s_cred_free(k8s_cred *c)
{
    free(c->token);
    free(c->cert);
    free(c->key);
    memset(c, 0, sizeof *c);
}

bool k8s_cred_parse(const char *text, size_t len, const char *api_version, k8s_cred *out,
                    char *err, size_t errsz)
{
    memset(out, 0, sizeof *out);
    json_error_t je;
    json_t *v = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!v || !json_is_object(v)) {
        snprintf(err, errsz, "printed something that is not an ExecCredential JSON object (%s)",
                 v ? "not an object" : je.text);
        json_decref(v);
        return false;
    }
    bool ok = false;
    const json_t *kind = json_object_get(v, "kind"), *api = json_object_get(v, "apiVersion");
    const json_t *st = json_object_get(v, "status");
    if (!json_is_string(kind) || strcmp(json_string_value(kind), "ExecCredential") != 0) {
        snprintf(err, errsz, "printed JSON whose kind is not \"ExecCredential\"");
    } else if (api_version && (!json_is_string(api) ||
                               strcmp(json_string_value(api), api_version) != 0)) {
        snprintf(err, errsz, "answered with apiVersion %s%s%s, not %s as the kubeconfig's "
                             "exec.apiVersion says",
                 json_is_string(api) ? "\"" : "", json_is_string(api) ? json_string_value(api) : "(none)",
                 json_is_string(api) ? "\"" : "", api_version);
    } else if (!json_is_object(st)) {
        snprintf(err, errsz, "printed an ExecCredential without a status object");
    } else {
        const json_t *tok = json_object_get(st, "token");
        const json_t *cert = json_object_get(st, "clientCertificateData");
        const json_t *key = json_object_get(st, "clientKeyData");
        const json_t *exp = json_object_get(st, "expirationTimestamp");
        if (json_is_string(tok) && json_string_length(tok) > 0)
            out->token = xstrdup(json_string_value(tok));
        if (json_is_string(cert) && json_is_string(key)) {
            out->cert = xstrdup(json_string_value(cert));
            out->key = xstrdup(json_string_value(key));
        }
        int64_t sec;
        int32_t ns;
        if (!out->token && !out->cert) {
            snprintf(err, errsz, "printed an ExecCredential with neither status.token nor "
                                 "status.clientCertificateData and clientKeyData");
        } else if (json_is_string(exp) &&
                   !k8s_time_parse(json_string_value(exp), json_string_length(exp), &sec, &ns)) {
            snprintf(err, errsz, "printed status.expirationTimestamp \"%.60s\", not an RFC 3339 "
                                 "time",
                     json_string_value(exp));
        } else {
            if (json_is_string(exp)) out->expiry = (double)sec + ns / 1e9;
            ok = true;
        }
    }
    if (!ok) k8s_cred_free(out);
    json_decref(v);
    return ok;
}

/* lathe's environment with the plugin's variables (replacing the same
 * names) and KUBERNETES_EXEC_INFO. */
static char **plugin_env(const k8s_config *cfg, char **info)
{
    size_t n = 0;
    while (environ && environ[n]) n++;
    char **env = xcalloc(n + cfg->n_exec_env + 2, sizeof *env);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(environ[i], '=');
        size_t kl = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
        bool replaced = kl == 20 && strncmp(environ[i], "KUBERNETES_EXEC_INFO", 20) == 0;
        for (size_t j = 0; j < cfg->n_exec_env && !replaced; j++)
            if (strncmp(cfg->exec_env[j], environ[i], kl) == 0 && cfg->exec_env[j][kl] == '=')
                replaced = true;
        if (!replaced) env[o++] = environ[i];
    }
    for (size_t j = 0; j < cfg->n_exec_env; j++) env[o++] = cfg->exec_env[j];
    *info = xasprintf("KUBERNETES_EXEC_INFO={\"apiVersion\":\"%s\",\"kind\":\"ExecCredential\","
                      "\"spec\":{\"interactive\":false}}",
                      cfg->exec_api_version ? cfg->exec_api_version
                                            : "client.authentication.k8s.io/v1");
    env[o++] = *info;
    env[o] = NULL;
    return env;
}

/* Reads the child's stdout until EOF, the bound or the deadline. 0, or
 * 1 = too much, 2 = too slow, 3 = a read error. */
static int read_output(int fd, double timeout, sb *out)
{
    double end = k8s_now_mono() + timeout;
    char buf[8192];
    for (;;) {
        double left = end - k8s_now_mono();
        if (left <= 0) return 2;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, (int)(left * 1000) + 1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return 3;
        if (r == 0) continue;
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return 3;
        if (n == 0) return 0;
        if (out->len + (size_t)n > PLUGIN_OUT_MAX) return 1;
        sb_putn(out, buf, (size_t)n);
    }
}

/* Waits for the child until the deadline; false when it still runs. */
static bool wait_until(pid_t pid, double deadline, int *status)
{
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid) return true;
        if (r < 0 && errno != EINTR) return true; /* not ours any more */
        if (k8s_now_mono() >= deadline) return false;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

bool k8s_exec_run(const k8s_config *cfg, double timeout, k8s_cred *out, char *err,
                  size_t errsz)
{
    memset(out, 0, sizeof *out);
    if (!cfg->exec_argc) {
        snprintf(err, errsz, "no exec credential plugin is configured");
        return false;
    }
    if (timeout <= 0) timeout = 30;
    const char *prog = cfg->exec_argv[0];
    char who[400];
    snprintf(who, sizeof who, "the exec credential plugin %s (users[].user.exec.command of %s)",
             prog, cfg->source ? cfg->source : "the kubeconfig");
    int pfd[2];
    if (pipe(pfd) != 0 || fcntl(pfd[0], F_SETFD, FD_CLOEXEC) != 0 ||
        fcntl(pfd[1], F_SETFD, FD_CLOEXEC) != 0) {
        snprintf(err, errsz, "%s: cannot make a pipe: %s", who, strerror(errno));
        return false;
    }
    char *info;
    char **env = plugin_env(cfg, &info);
    char **argv = xcalloc(cfg->exec_argc + 1, sizeof *argv);
    for (size_t i = 0; i < cfg->exec_argc; i++) argv[i] = cfg->exec_argv[i];
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
    pid_t pid;
    int rc = posix_spawnp(&pid, prog, &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    close(pfd[1]);
    free(argv);
    free(env);
    free(info);
    if (rc != 0) {
        close(pfd[0]);
        snprintf(err, errsz, "%s cannot be started: %s; fix: install it, put it on PATH, or "
                             "correct users[].user.exec.command",
                 who, strerror(rc));
        return false;
    }
    sb text;
    sb_init(&text);
    double deadline = k8s_now_mono() + timeout;
    int rr = read_output(pfd[0], timeout, &text);
    close(pfd[0]);
    int status = 0;
    if (rr == 0 && !wait_until(pid, deadline, &status)) rr = 2; /* closed its stdout, runs on */
    if (rr != 0) {
        kill(pid, SIGKILL);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
    }
    bool ok = false;
    if (rr == 1) {
        snprintf(err, errsz, "%s printed more than %u bytes; fix: check the plugin", who,
                 PLUGIN_OUT_MAX);
    } else if (rr == 2) {
        snprintf(err, errsz, "%s did not finish within %.0f s and was stopped; fix: check the "
                             "plugin (does it wait for input?)",
                 who, timeout);
    } else if (rr == 3) {
        snprintf(err, errsz, "%s: reading its output failed", who);
    } else if (WIFSIGNALED(status)) {
        snprintf(err, errsz, "%s was killed by signal %d", who, WTERMSIG(status));
    } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        snprintf(err, errsz, "%s exited with status %d (its messages are above, on stderr); "
                             "fix: run it by hand to see why",
                 who, WEXITSTATUS(status));
    } else {
        char perr[300];
        ok = k8s_cred_parse(sb_str(&text), text.len, cfg->exec_api_version, out, perr,
                            sizeof perr);
        if (!ok)
            snprintf(err, errsz, "%s %s; fix: check the plugin and exec.apiVersion", who, perr);
    }
    sb_free(&text);
    return ok;
}
