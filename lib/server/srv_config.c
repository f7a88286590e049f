/* srv_config.c: the server's resolved configuration. The ServerConfig file
 * (lib/spec/spec_server.c) with the command line's overrides, relative
 * paths made absolute (against the config file's folder; --data against
 * the working folder), the listen address split into host and port, the
 * scheduler's settings over the policy's defaults, the token hashes, the
 * compiled `policy:` (what teams' jobs may read and run: lib/policy) with
 * whether this machine can make the local sandbox, and the data folder
 * with its layout:
 *
 *     DATA/lathe.db        the store (SQLite, WAL)
 *     DATA/jobs/<id>/      one folder per job: attempts, checkpoints, specs
 *     DATA/server.lock     held (flock) by the running server
 *     DATA/server.addr     the address it listens on
 *     DATA/admin-token     made when the config lists no token
 */
#include "srv_internal.h"

#include "exec/exec.h"
#include "policy/policy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* An absolute version of path: itself, or joined to base (the working
 * folder when base is NULL). Caller frees. */
static char *absolute(const char *base, const char *path)
{
    if (path[0] == '/') return xstrdup(path);
    if (base) return path_join(base, path);
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd)) return xstrdup(path);
    return path_join(cwd, path);
}

/* The folder of a file path (absolute). Caller frees. */
static char *folder_of(const char *file)
{
    char *abs = absolute(NULL, file);
    char *slash = strrchr(abs, '/');
    if (slash == abs) slash[1] = '\0';
    else if (slash) *slash = '\0';
    return abs;
}

/* Splits "HOST:PORT" / "[V6]:PORT". The spec checked the form already. */
static bool split_listen(const char *s, char **host, int *port)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s) return false;
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (*end || p < 0 || p > 65535 || colon[1] == '\0') return false;
    if (s[0] == '[') {
        if (colon[-1] != ']') return false;
        *host = xstrndup(s + 1, (size_t)(colon - s - 2));
    } else {
        *host = xstrndup(s, (size_t)(colon - s));
    }
    *port = (int)p;
    return true;
}

static char *default_data_dir(void)
{
    const char *xdg = getenv("XDG_DATA_HOME");
    if (xdg && xdg[0] == '/') return xasprintf("%s/lathe/server", xdg);
    const char *home = getenv("HOME");
    if (home && *home) return xasprintf("%s/.local/share/lathe/server", home);
    return xstrdup("/tmp/lathe-server");
}

/* The lathe binary that runs `train`: the config's, or this process's own. */
static char *trainer_program(const srv_config *cfg)
{
    if (cfg->spec->trainer_program) return absolute(cfg->config_dir, cfg->spec->trainer_program);
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return xstrdup("lathe");
    buf[n] = '\0';
    return xstrdup(buf);
}

static void sched_settings(const spec_server *s, sched_config *out)
{
    sched_policy p = SCHED_LATHE;
    sched_policy_parse(s->scheduler.policy, &p);
    sched_config_default(out, p);
    if (s->scheduler.half_life > 0) out->half_life = s->scheduler.half_life;
    if (s->scheduler.min_run_time > 0) out->min_run_time = s->scheduler.min_run_time;
    if (s->scheduler.reclaim_min_run > 0) out->reclaim_min_run = s->scheduler.reclaim_min_run;
    if (s->scheduler.max_slack > 0) out->max_slack = s->scheduler.max_slack;
    if (s->scheduler.starve_after > 0) out->starve_after = s->scheduler.starve_after;
    if (s->scheduler.default_estimate > 0) out->default_estimate = s->scheduler.default_estimate;
    if (s->scheduler.gpu_share_limit > 0) out->gpu_share_limit = s->scheduler.gpu_share_limit;
    if (s->scheduler.due_preemption != TOGGLE_AUTO)
        out->due_preempt = s->scheduler.due_preemption == TOGGLE_ON;
    if (s->scheduler.aging > 0) out->aging = s->scheduler.aging;
    if (s->scheduler.fair_share != TOGGLE_AUTO) out->fair_share = s->scheduler.fair_share == TOGGLE_ON;
    out->reasons = true;
}

bool srv_tokens_load(const srv_config *cfg, const spec_server *spec, srv_token **out, size_t *n,
                     bool *io_error, char *err, size_t errsz)
{
    *out = NULL;
    *n = 0;
    if (io_error) *io_error = false;
    srv_tokens_add_spec(out, n, spec->tokens, spec->n_tokens);
    if (spec->tokens_file) {
        char *path = absolute(cfg->config_dir, spec->tokens_file);
        spec_server_token *ft = NULL;
        size_t nft = 0;
        bool io = false;
        diag_list d;
        diag_list_init(&d);
        size_t bad = spec_server_tokens_load_file(path, &ft, &nft, &d, &io);
        if (bad || io) {
            sb msg;
            sb_init(&msg);
            if (io || d.len == 0) sb_printf(&msg, "%s: cannot read the tokens file", path);
            for (size_t i = 0; i < d.len; i++) {
                if (msg.len) sb_puts(&msg, "; ");
                diag_format(&d.items[i], &msg);
            }
            snprintf(err, errsz, "%s", sb_str(&msg));
            sb_free(&msg);
        } else {
            srv_tokens_add_spec(out, n, ft, nft);
        }
        spec_server_tokens_free(ft, nft);
        diag_list_free(&d);
        free(path);
        if (bad || io) {
            if (io_error) *io_error = io;
            srv_token_list_free(*out, *n);
            *out = NULL;
            *n = 0;
            return false;
        }
    }
    /* the admin-token file's token (made when no token was configured)
     * stays valid across reloads: it is the last of the start's list */
    if (cfg->admin_token_file && cfg->n_tokens > 0) {
        const srv_token *a = &cfg->tokens[cfg->n_tokens - 1];
        *out = xrealloc(*out, (*n + 1) * sizeof **out);
        srv_token *o = &(*out)[(*n)++];
        *o = *a;
        o->team = NULL;
        o->name = a->name ? xstrdup(a->name) : NULL;
    }
    return true;
}

/* The config's tokens and those of its tokens file; an unreadable or
 * invalid tokens file stops the start (exit 2 or 4). */
static int load_tokens(srv_config *cfg, char *err, size_t errsz)
{
    srv_config none = {.config_dir = cfg->config_dir}; /* no admin-token file yet */
    bool io = false;
    if (!srv_tokens_load(&none, cfg->spec, &cfg->tokens, &cfg->n_tokens, &io, err, errsz))
        return io ? LT_EXIT_IO : LT_EXIT_INVALID;
    if (!cfg->tokens) cfg->tokens = xcalloc(1, sizeof *cfg->tokens);
    return LT_EXIT_OK;
}

/* The policy compiled for this server: relative roots from the config's
 * folder, the data and jobs folders denied, the spec's relative paths from
 * the working folder (where the local executor resolves them). On a
 * cluster engine the paths are the pods' own: the engine's volumes are
 * roots and nothing is resolved here (Kubernetes); Slurm's nodes share the
 * server's folders, so its paths are resolved as the local executor's. Then, for the local executor unless
 * the sandbox is off, whether the sandbox can be made on this machine:
 * mode required refuses to start without it; auto says so once. */
static int compile_policy(srv_config *cfg, const srv_options *o, char *err, size_t errsz)
{
    const spec_server *s = cfg->spec;
    bool local = s->executor == SPEC_EXECUTOR_LOCAL;
    /* Slurm's nodes see the server's folders (shared storage): paths and
     * trainer.command's program are resolved here, as for local trainers */
    bool paths_here = local || s->executor == SPEC_EXECUTOR_SLURM;
    char cwd[4096];
    bool have_cwd = getcwd(cwd, sizeof cwd) != NULL;
    policy_ctx ctx = {.config_dir = cfg->config_dir, .data_dir = cfg->data_dir,
                      .jobs_dir = cfg->jobs_dir, .cwd = paths_here && have_cwd ? cwd : NULL,
                      .local = paths_here, .as_root = geteuid() == 0};
    if (s->executor == SPEC_EXECUTOR_K8S) {
        const spec_k8s *k = &s->k8s;
        bool models = k->model_pvc && *k->model_pvc, data = k->data_pvc && *k->data_pvc;
        ctx.engine_roots[SPEC_ROOT_MODELS][0] = models ? k->model_mount : NULL;
        ctx.engine_roots[SPEC_ROOT_MODELS][1] = k->checkpoint_mount;
        ctx.engine_roots[SPEC_ROOT_ADAPTERS][0] = models ? k->model_mount : NULL;
        ctx.engine_roots[SPEC_ROOT_ADAPTERS][1] = k->checkpoint_mount;
        ctx.engine_roots[SPEC_ROOT_DATA][0] = data ? k->data_mount : NULL;
        ctx.engine_image = k->image;
    }
    char why[768];
    cfg->policy = policy_new(&s->policy, &ctx, why, sizeof why);
    if (!cfg->policy) {
        snprintf(err, errsz, "%s: %s", s->file ? s->file : "the server's policy", why);
        return LT_EXIT_INVALID;
    }
    cfg->sandbox_ok = false;
    cfg->sandbox_why[0] = '\0';
    if (s->executor == SPEC_EXECUTOR_SLURM) {
        snprintf(cfg->sandbox_why, sizeof cfg->sandbox_why,
                 "on Slurm trainers run as the team's slurmUser under Slurm's limits; the local "
                 "sandbox does not apply");
        return LT_EXIT_OK;
    }
    if (!local) {
        snprintf(cfg->sandbox_why, sizeof cfg->sandbox_why,
                 "the cluster engine isolates trainers in its own containers");
        return LT_EXIT_OK;
    }
    if (s->policy.sandbox.mode == SPEC_SANDBOX_OFF) {
        snprintf(cfg->sandbox_why, sizeof cfg->sandbox_why,
                 "the server's policy turns the sandbox off (policy.sandbox.mode: off)");
        return LT_EXIT_OK;
    }
    cfg->sandbox_ok = exec_sandbox_probe(cfg->sandbox_why, sizeof cfg->sandbox_why);
    if (cfg->sandbox_ok) return LT_EXIT_OK;
    if (s->policy.sandbox.mode == SPEC_SANDBOX_REQUIRED) {
        snprintf(err, errsz,
                 "policy.sandbox.mode is required, but this machine cannot make the trainers' "
                 "sandbox: %s; run the server as root, allow user namespaces "
                 "(sysctl kernel.unprivileged_userns_clone=1), or set the mode to auto",
                 cfg->sandbox_why);
        return LT_EXIT_UNAVAILABLE;
    }
    if (!o->quiet)
        fprintf(stderr,
                "lathe server: warning: trainers run without the sandbox on this machine (%s); "
                "jobs with their own trainer.command are refused (docs/security.md)\n",
                cfg->sandbox_why);
    return LT_EXIT_OK;
}

int srv_config_load(const srv_options *o, srv_config *cfg, diag_list *d, char *err, size_t errsz)
{
    memset(cfg, 0, sizeof *cfg);
    if (o->config_path) {
        bool io = false;
        if (spec_server_load_file(o->config_path, &cfg->spec, d, &io)) {
            snprintf(err, errsz, "%s: %s", o->config_path,
                     io ? "cannot read the config file" : "the config file is invalid");
            return io ? LT_EXIT_IO : LT_EXIT_INVALID;
        }
        cfg->config_dir = folder_of(o->config_path);
    } else {
        cfg->spec = spec_server_new_default();
        cfg->config_dir = absolute(NULL, ".");
    }
    const char *listen = o->listen ? o->listen : cfg->spec->listen;
    if (!split_listen(listen, &cfg->listen_host, &cfg->listen_port)) {
        snprintf(err, errsz, "--listen %s: expected HOST:PORT such as 127.0.0.1:8740", listen);
        return LT_EXIT_USAGE;
    }
    if (o->data_dir) cfg->data_dir = absolute(NULL, o->data_dir);
    else if (cfg->spec->data_dir) cfg->data_dir = absolute(cfg->config_dir, cfg->spec->data_dir);
    else cfg->data_dir = default_data_dir();
    cfg->db_path = path_join(cfg->data_dir, "lathe.db");
    cfg->jobs_dir = path_join(cfg->data_dir, "jobs");
    if (cfg->spec->cluster.file) cfg->cluster_file = absolute(cfg->config_dir, cfg->spec->cluster.file);
    cfg->trainer_program = trainer_program(cfg);
    sched_settings(cfg->spec, &cfg->sched);
    int rc = load_tokens(cfg, err, errsz);
    if (rc == LT_EXIT_OK) rc = compile_policy(cfg, o, err, errsz);
    return rc;
}

/* mkdir -p. Returns 0 or an errno value. */
static int make_dirs(const char *path)
{
    char *p = xstrdup(path);
    int rc = 0;
    for (char *s = p + 1; !rc; s++) {
        if (*s != '/' && *s != '\0') continue;
        char c = *s;
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) rc = errno;
        *s = c;
        if (c == '\0') break;
    }
    free(p);
    return rc ? rc : (dir_exists(path) ? 0 : ENOTDIR);
}

/* The admin token file: read the one made earlier, or make one. */
static int admin_token(srv_config *cfg, char *err, size_t errsz)
{
    cfg->admin_token_file = path_join(cfg->data_dir, "admin-token");
    char msg[256], token[80];
    size_t len = 0;
    char *text = file_read_all(cfg->admin_token_file, 1024, &len, msg, sizeof msg);
    if (text) {
        snprintf(token, sizeof token, "%.*s", (int)strcspn(text, "\r\n"), text);
        free(text);
    } else {
        if (!srv_random_token(token)) {
            snprintf(err, errsz, "cannot make a random admin token");
            return LT_EXIT_INTERNAL;
        }
        char line[80];
        int n = snprintf(line, sizeof line, "%s\n", token);
        int e = file_write_atomic(cfg->admin_token_file, line, (size_t)n);
        if (e) {
            snprintf(err, errsz, "%s: %s", cfg->admin_token_file, strerror(e));
            return LT_EXIT_IO;
        }
    }
    chmod(cfg->admin_token_file, 0600);
    cfg->tokens = xrealloc(cfg->tokens, (cfg->n_tokens + 1) * sizeof *cfg->tokens);
    srv_token *t = &cfg->tokens[cfg->n_tokens++];
    memset(t, 0, sizeof *t);
    srv_sha256(token, strlen(token), t->hash);
    t->admin = true;
    t->scope = SRV_SCOPE_ADMIN;
    t->name = xstrdup("admin-token file");
    return LT_EXIT_OK;
}

int srv_config_prepare_data(srv_config *cfg, char *err, size_t errsz)
{
    int e = make_dirs(cfg->jobs_dir);
    if (e) {
        snprintf(err, errsz, "data folder %s: %s", cfg->jobs_dir, strerror(e));
        return LT_EXIT_IO;
    }
    if (cfg->n_tokens == 0) return admin_token(cfg, err, errsz);
    return LT_EXIT_OK;
}

void srv_config_free(srv_config *cfg)
{
    spec_server_free(cfg->spec);
    free(cfg->config_dir);
    free(cfg->listen_host);
    free(cfg->data_dir);
    free(cfg->db_path);
    free(cfg->jobs_dir);
    free(cfg->cluster_file);
    free(cfg->trainer_program);
    srv_token_list_free(cfg->tokens, cfg->n_tokens);
    free(cfg->admin_token_file);
    policy_free(cfg->policy);
    memset(cfg, 0, sizeof *cfg);
}

char *srv_job_dir(const srv_config *cfg, int64_t id)
{
    return xasprintf("%s/%lld", cfg->jobs_dir, (long long)id);
}
