/* policy_rules.c: the compiled policy (policy.h) and the checks of a job.
 *
 * policy_new turns the ServerConfig's `policy:` section into one set of
 * rules per team: everyone's roots (the engine's volumes first, then
 * `paths:` made absolute against the config file's folder and, on the
 * local executor, resolved through the file system so that a root that is
 * itself a link is compared by what it points to), the team's own added,
 * `commands` (off at either level wins), `images`, and the Unix user and
 * group its local trainers run as (looked up once, here: a typo in a user
 * name is a config error at start, not a failed job hours later).
 *
 * The checks are pure functions of the compiled rules and the file system:
 * the server calls policy_check_job at submission, the supervisor checks
 * the same paths again right before the trainer starts. Each refusal
 * names the field, the path as written, what it resolved to, and the rule
 * it broke, with a way out.
 */
#include "policy.h"

#include <errno.h>
#include <fnmatch.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A trainer.command found by name is looked up in these folders only (not
 * the server's $PATH, which a service manager or a shell may have set to
 * anything), and a program given by its path may live under them. */
static const char *const path_dirs[] = {"/usr/local/sbin", "/usr/local/bin", "/usr/sbin",
                                        "/usr/bin", "/sbin", "/bin"};
static const char *const system_dirs[] = {"/usr", "/bin", "/sbin", "/lib", "/lib32",
                                          "/lib64", "/libx32"};
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

struct policy {
    policy_ctx ctx;       /* its strings point into owned[] */
    char *owned[6 + SPEC_ROOT_KINDS * 4];
    size_t n_owned;
    const spec_policy *sp; /* borrowed; &dflt when none was given */
    spec_policy dflt;
    policy_rules all;
    policy_rules *teams;
    size_t n_teams;
};

static void set_err(char *err, size_t errsz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errsz, const char *fmt, ...)
{
    if (!err || !errsz) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errsz, fmt, ap);
    va_end(ap);
}

static const char *keep(policy *p, char *s)
{
    if (!s) return NULL;
    p->owned[p->n_owned++] = s;
    return s;
}

/* A folder of the context as the checks compare it: resolved when local
 * (the data folder may be reached through a link), else normalised. */
static char *ctx_path(const char *path, bool local)
{
    if (!path || !*path) return NULL;
    if (local) {
        char *out = NULL, why[256];
        if (policy_resolve("/", path, &out, why, sizeof why) == POLICY_OK) return out;
    }
    return policy_normalize("/", path);
}

static void rules_add_root(policy_rules *r, spec_root_kind k, const char *root)
{
    for (size_t i = 0; i < r->n_roots[k]; i++)
        if (strcmp(r->roots[k][i], root) == 0) return;
    r->roots[k] = xrealloc(r->roots[k], (r->n_roots[k] + 1) * sizeof *r->roots[k]);
    r->roots[k][r->n_roots[k]++] = xstrdup(root);
}

static void rules_add_image(policy_rules *r, const char *pattern)
{
    r->images = xrealloc(r->images, (r->n_images + 1) * sizeof *r->images);
    r->images[r->n_images++] = xstrdup(pattern);
}

static void rules_free(policy_rules *r)
{
    for (int k = 0; k < SPEC_ROOT_KINDS; k++) str_list_free(r->roots[k], r->n_roots[k]);
    str_list_free(r->images, r->n_images);
    free(r->team);
    free(r->user);
    memset(r, 0, sizeof *r);
}

/* The configured roots of sr added to r: absolute against the config
 * file's folder; resolved when local. `where` names the section. */
static bool add_roots(const policy *p, policy_rules *r, const spec_policy_rules *sr,
                      const char *where, char *err, size_t errsz)
{
    const char *base = p->ctx.config_dir ? p->ctx.config_dir : "/";
    for (int k = 0; k < SPEC_ROOT_KINDS; k++) {
        for (size_t i = 0; i < sr->n_roots[k]; i++) {
            const char *raw = sr->roots[k][i];
            char *root = NULL, why[512];
            if (p->ctx.local) {
                if (policy_resolve(base, raw, &root, why, sizeof why) != POLICY_OK) {
                    set_err(err, errsz, "%s.paths.%s[%zu]: the root \"%s\" is not usable: %s",
                            where, spec_root_kind_name((spec_root_kind)k), i, raw, why);
                    return false;
                }
            } else {
                root = policy_normalize(base, raw);
                if (!root) {
                    set_err(err, errsz,
                            "%s.paths.%s[%zu]: the root \"%s\" is not a usable path "
                            "(empty or holding a control character)",
                            where, spec_root_kind_name((spec_root_kind)k), i, raw);
                    return false;
                }
            }
            rules_add_root(r, (spec_root_kind)k, root);
            free(root);
        }
    }
    for (size_t i = 0; i < sr->n_images; i++) rules_add_image(r, sr->images[i]);
    return true;
}

/* ---- Unix users and groups ---- */
static bool all_digits(const char *s)
{
    if (!*s) return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return false;
    return true;
}

/* A user by name or number: its uid and primary group (-1 when a number
 * has no passwd entry). False when a name is unknown. */
static bool lookup_user(const char *name, long long *uid, long long *gid)
{
    long sz = sysconf(_SC_GETPW_R_SIZE_MAX);
    size_t bufsz = sz > 0 ? (size_t)sz : 16384;
    struct passwd pw, *res = NULL;
    bool number = all_digits(name);
    long long n = number ? strtoll(name, NULL, 10) : -1;
    if (number && (n < 0 || n > 4294967294LL)) return false;
    for (;;) {
        char *buf = xmalloc(bufsz);
        int rc = number ? getpwuid_r((uid_t)n, &pw, buf, bufsz, &res)
                        : getpwnam_r(name, &pw, buf, bufsz, &res);
        if (rc == ERANGE && bufsz < (1u << 20)) {
            free(buf);
            bufsz *= 2;
            continue;
        }
        if (res) {
            *uid = res->pw_uid;
            *gid = res->pw_gid;
        }
        free(buf);
        break;
    }
    if (res) return true;
    if (!number) return false;
    *uid = n;
    *gid = -1;
    return true;
}

static bool lookup_group(const char *name, long long *gid)
{
    if (all_digits(name)) {
        long long n = strtoll(name, NULL, 10);
        if (n < 0 || n > 4294967294LL) return false;
        *gid = n;
        return true;
    }
    long sz = sysconf(_SC_GETGR_R_SIZE_MAX);
    size_t bufsz = sz > 0 ? (size_t)sz : 16384;
    struct group gr, *res = NULL;
    for (;;) {
        char *buf = xmalloc(bufsz);
        int rc = getgrnam_r(name, &gr, buf, bufsz, &res);
        if (rc == ERANGE && bufsz < (1u << 20)) {
            free(buf);
            bufsz *= 2;
            continue;
        }
        if (res) *gid = res->gr_gid;
        free(buf);
        break;
    }
    return res != NULL;
}

/* The user and group of one set of rules. where names the entry in
 * messages ("policy.teams[0] (team-a)", "policy.sandbox"). */
static bool set_users(const policy *p, policy_rules *r, const char *user, const char *group,
                      const char *where, char *err, size_t errsz)
{
    const spec_policy *sp = p->sp;
    long long uid = -1, gid = -1, pgid = -1;
    if (user && !lookup_user(user, &uid, &pgid)) {
        set_err(err, errsz,
                "%s.user: no user \"%s\" on this machine; create it (useradd --system %s) or "
                "write its number",
                where, user, user);
        return false;
    }
    if (group && !lookup_group(group, &gid)) {
        set_err(err, errsz,
                "%s.group: no group \"%s\" on this machine; create it (groupadd --system %s) "
                "or write its number",
                where, group, group);
        return false;
    }
    free(r->user);
    r->user = user ? xstrdup(user) : NULL;
    if (!p->ctx.as_root) {
        /* a server that is not root cannot switch users: a configured one
         * must be its own, and trainers run as the server's user */
        if (user && uid != (long long)geteuid()) {
            set_err(err, errsz,
                    "%s.user: \"%s\" is not the server's own user (uid %lld): the server must "
                    "run as root to switch trainers to another user; remove `user:` or start "
                    "the server as root",
                    where, user, (long long)geteuid());
            return false;
        }
        if (group && gid != (long long)getegid()) {
            set_err(err, errsz,
                    "%s.group: \"%s\" is not the server's own group (gid %lld): the server "
                    "must run as root to switch trainers to another group; remove `group:` or "
                    "start the server as root",
                    where, group, (long long)getegid());
            return false;
        }
        r->uid = r->gid = -1;
        return true;
    }
    if (!user) {
        /* the sandbox's default user: as configured, else nobody (65534) */
        r->uid = p->all.uid;
        r->gid = group ? gid : p->all.gid;
        free(r->user);
        r->user = p->all.user ? xstrdup(p->all.user) : NULL;
    } else {
        r->uid = uid;
        r->gid = group ? gid : pgid >= 0 ? pgid : p->all.gid;
    }
    if ((r->uid == 0 || r->gid == 0) && !sp->sandbox.allow_root) {
        set_err(err, errsz,
                "%s: trainers would run as %s 0 (root), which can read and change everything "
                "on the machine; name another %s, or set policy.sandbox.allowRoot: true if "
                "this machine is yours alone",
                where, r->uid == 0 ? "uid" : "gid", r->uid == 0 ? "user" : "group");
        return false;
    }
    return true;
}

/* Everyone's user: policy.sandbox.user / group, else nobody / nogroup, and
 * 65534 where those names are unknown. */
static bool default_users(policy *p, char *err, size_t errsz)
{
    const spec_policy *sp = p->sp;
    p->all.uid = p->all.gid = -1;
    if (!p->ctx.as_root) /* only checked: a configured user must be the server's own */
        return set_users(p, &p->all, sp->sandbox.user, sp->sandbox.group, "policy.sandbox", err,
                         errsz);
    long long uid = 65534, gid = 65534, pgid = -1;
    if (sp->sandbox.user) {
        if (!lookup_user(sp->sandbox.user, &uid, &pgid)) {
            set_err(err, errsz,
                    "policy.sandbox.user: no user \"%s\" on this machine; create it (useradd "
                    "--system %s) or write its number",
                    sp->sandbox.user, sp->sandbox.user);
            return false;
        }
    } else if (!lookup_user("nobody", &uid, &pgid)) {
        uid = 65534;
    }
    if (sp->sandbox.group) {
        if (!lookup_group(sp->sandbox.group, &gid)) {
            set_err(err, errsz,
                    "policy.sandbox.group: no group \"%s\" on this machine; create it "
                    "(groupadd --system %s) or write its number",
                    sp->sandbox.group, sp->sandbox.group);
            return false;
        }
    } else if (!lookup_group("nogroup", &gid)) {
        gid = sp->sandbox.user && pgid >= 0 ? pgid : 65534;
    }
    p->all.uid = uid;
    p->all.gid = gid;
    p->all.user = xstrdup(sp->sandbox.user ? sp->sandbox.user : "nobody");
    if ((uid == 0 || gid == 0) && !sp->sandbox.allow_root) {
        set_err(err, errsz,
                "policy.sandbox: trainers would run as %s 0 (root), which can read and change "
                "everything on the machine; name another %s, or set policy.sandbox.allowRoot: "
                "true if this machine is yours alone",
                uid == 0 ? "uid" : "gid", uid == 0 ? "user" : "group");
        return false;
    }
    return true;
}

/* ---- compiling ---- */
policy *policy_new(const spec_policy *sp, const policy_ctx *ctx, char *err, size_t errsz)
{
    if (err && errsz) err[0] = '\0';
    policy *p = xcalloc(1, sizeof *p);
    p->dflt.sandbox.processes = 4096; /* every other default is zero (auto) */
    p->dflt.sandbox.open_files = 65536;
    p->sp = sp ? sp : &p->dflt;
    sp = p->sp;
    p->ctx.local = ctx->local;
    p->ctx.as_root = ctx->as_root;
    p->ctx.config_dir = keep(p, ctx->config_dir ? policy_normalize("/", ctx->config_dir) : NULL);
    p->ctx.cwd = keep(p, ctx->cwd ? policy_normalize("/", ctx->cwd) : NULL);
    p->ctx.data_dir = keep(p, ctx_path(ctx->data_dir, ctx->local));
    p->ctx.jobs_dir = keep(p, ctx_path(ctx->jobs_dir, ctx->local));
    p->ctx.engine_image = keep(p, ctx->engine_image ? xstrdup(ctx->engine_image) : NULL);
    for (int k = 0; k < SPEC_ROOT_KINDS; k++) {
        size_t m = 0;
        for (size_t i = 0; i < 4; i++) {
            const char *e = ctx->engine_roots[k][i];
            if (!e || !*e) continue;
            char *n = policy_normalize("/", e);
            if (!n) continue;
            p->ctx.engine_roots[k][m++] = keep(p, n);
            rules_add_root(&p->all, (spec_root_kind)k, n);
        }
    }
    p->all.commands = sp->all.commands != TOGGLE_OFF;
    if (!add_roots(p, &p->all, &sp->all, "policy", err, errsz) ||
        !default_users(p, err, errsz))
        goto fail;
    p->teams = xcalloc(sp->n_teams ? sp->n_teams : 1, sizeof *p->teams);
    for (size_t i = 0; i < sp->n_teams; i++) {
        const spec_policy_team *t = &sp->teams[i];
        policy_rules *r = &p->teams[p->n_teams++];
        r->team = xstrdup(t->team ? t->team : "");
        r->uid = p->all.uid;
        r->gid = p->all.gid;
        for (int k = 0; k < SPEC_ROOT_KINDS; k++)
            for (size_t n = 0; n < p->all.n_roots[k]; n++)
                rules_add_root(r, (spec_root_kind)k, p->all.roots[k][n]);
        for (size_t n = 0; n < p->all.n_images; n++) rules_add_image(r, p->all.images[n]);
        r->commands = p->all.commands && t->rules.commands != TOGGLE_OFF;
        r->service_account = t->service_account;
        r->slurm_account = t->slurm_account;
        r->slurm_user = t->slurm_user;
        char where[128];
        snprintf(where, sizeof where, "policy.teams[%zu] (team %s)", i, r->team);
        if (!add_roots(p, r, &t->rules, where, err, errsz)) goto fail;
        if ((t->user || t->group || p->ctx.as_root) &&
            !set_users(p, r, t->user, t->group, where, err, errsz))
            goto fail;
        if (!p->ctx.as_root) r->uid = r->gid = -1;
    }
    return p;
fail:
    policy_free(p);
    return NULL;
}

void policy_free(policy *p)
{
    if (!p) return;
    rules_free(&p->all);
    for (size_t i = 0; i < p->n_teams; i++) rules_free(&p->teams[i]);
    free(p->teams);
    for (size_t i = 0; i < p->n_owned; i++) free(p->owned[i]);
    free(p);
}

const policy_rules *policy_team(const policy *p, const char *team)
{
    if (team)
        for (size_t i = 0; i < p->n_teams; i++)
            if (strcmp(p->teams[i].team, team) == 0) return &p->teams[i];
    return &p->all;
}

const spec_policy *policy_spec(const policy *p)
{
    return p->sp;
}

const policy_ctx *policy_context(const policy *p)
{
    return &p->ctx;
}

void policy_verdict_free(policy_verdict *v)
{
    if (!v) return;
    free(v->resolved);
    v->resolved = NULL;
}

bool policy_image_allowed(const policy_rules *r, const char *image)
{
    if (!image) return false;
    for (size_t i = 0; i < r->n_images; i++)
        if (fnmatch(r->images[i], image, 0) == 0) return true;
    return false;
}

/* ---- checking one path ---- */

/* "a, b, c" into out, cut with "..." where it would not fit. */
static void list_roots(const char *const *roots, size_t n, const char *const *more,
                       size_t n_more, char *out, size_t outsz)
{
    sb s;
    sb_init(&s);
    for (size_t i = 0; i < n; i++) sb_printf(&s, "%s%s", s.len ? ", " : "", roots[i]);
    for (size_t i = 0; i < n_more; i++) sb_printf(&s, "%s%s", s.len ? ", " : "", more[i]);
    const char *t = sb_str(&s);
    if (strlen(t) < outsz) {
        snprintf(out, outsz, "%s", t);
    } else if (outsz > 4) {
        snprintf(out, outsz - 3, "%s", t);
        strcat(out, "...");
    }
    sb_free(&s);
}

/* The check of policy_check_path, with extra roots that also allow (the
 * system folders, for programs). */
static policy_rc check_path(const policy *p, const policy_rules *r, spec_root_kind kind,
                            const char *field, const char *path, const char *own_dir,
                            const char *const *extra, size_t n_extra, policy_verdict *v)
{
    memset(v, 0, sizeof *v);
    const char *base = p->ctx.cwd ? p->ctx.cwd : "/";
    const char *kname = spec_root_kind_name(kind);
    char why[512] = "";
    char *res = NULL;
    policy_rc rc;
    if (p->ctx.local) {
        rc = policy_resolve(base, path, &res, why, sizeof why);
    } else {
        res = policy_normalize(base, path);
        rc = res ? POLICY_OK : POLICY_E_INVALID;
        if (!res) snprintf(why, sizeof why, "empty, or holding a control character");
    }
    if (rc != POLICY_OK) {
        v->rc = rc;
        set_err(v->message, sizeof v->message, "%s: \"%s\" cannot be checked: %s", field,
                 path ? path : "", why);
        set_err(v->fix, sizeof v->fix, "%s",
                 rc == POLICY_E_IO
                     ? "make the folders on the way readable by the server's user, or name "
                       "another path"
                     : "name an existing file or folder by a plain path, without a loop of "
                       "links");
        return rc;
    }
    v->resolved = res;
    /* "F: P is" or "F: P resolves to R, which is" */
    char subject[600];
    if (strcmp(res, path) == 0)
        set_err(subject, sizeof subject, "%s: %s is", field, path);
    else
        set_err(subject, sizeof subject, "%s: %s resolves to %s, which is", field, path, res);

    char *own = own_dir ? ctx_path(own_dir, p->ctx.local) : NULL;
    bool in_own = own && policy_path_under(res, own);
    free(own);
    if (in_own) return v->rc = POLICY_OK;
    if (p->ctx.jobs_dir && policy_path_under(res, p->ctx.jobs_dir)) {
        set_err(v->message, sizeof v->message,
                 "%s inside another job's folder (under %s); a job reads only its own",
                 subject, p->ctx.jobs_dir);
        set_err(v->fix, sizeof v->fix,
                 "copy what you need under a %s root of team %s, or start from the other "
                 "job's exported adapter",
                 kname, r->team ? r->team : "default");
        return v->rc = POLICY_E_DENIED;
    }
    if (p->ctx.data_dir && policy_path_under(res, p->ctx.data_dir)) {
        set_err(v->message, sizeof v->message,
                 "%s inside the server's data folder (%s): it holds the server's database, "
                 "tokens and every job's files, and no job reads it",
                 subject, p->ctx.data_dir);
        set_err(v->fix, sizeof v->fix, "name a file under a %s root instead", kname);
        return v->rc = POLICY_E_DENIED;
    }
    for (size_t i = 0; i < r->n_roots[kind]; i++)
        if (policy_path_under(res, r->roots[kind][i])) return v->rc = POLICY_OK;
    for (size_t i = 0; i < n_extra; i++)
        if (policy_path_under(res, extra[i])) return v->rc = POLICY_OK;

    char roots[400];
    list_roots((const char *const *)r->roots[kind], r->n_roots[kind], extra, n_extra, roots, sizeof roots);
    const char *who = r->team ? r->team : NULL;
    if (r->n_roots[kind] + n_extra == 0) {
        set_err(v->message, sizeof v->message,
                 "%s outside every %s root: the server's policy allows none "
                 "(policy.paths.%s is empty)",
                 subject, kname, kname);
        set_err(v->fix, sizeof v->fix,
                 "ask the operator to add the folder to the server config's policy: "
                 "`policy: {paths: {%s: [FOLDER]}}` (docs/server.md)",
                 kname);
    } else {
        set_err(v->message, sizeof v->message, "%s outside every %s root allowed%s%s (%s)",
                 subject, kname, who ? " for team " : "", who ? who : "", roots);
        set_err(v->fix, sizeof v->fix,
                 "put it under one of them, or ask the operator to add its folder to "
                 "policy.paths.%s%s",
                 kname, who ? " or to the team's entry in policy.teams" : "");
    }
    return v->rc = POLICY_E_OUTSIDE;
}

policy_rc policy_check_path(const policy *p, const policy_rules *r, spec_root_kind kind,
                            const char *field, const char *path, const char *own_dir,
                            policy_verdict *v)
{
    return check_path(p, r, kind, field, path, own_dir, NULL, 0, v);
}

/* ---- checking a job ---- */
static diag *job_error(diag_list *d, const char *file, const spec_job *j, spec_pos pos,
                       const char *field, const char *message)
{
    if (!pos.line) pos = j->pos;
    /* the verdict's message starts with the field; the diagnostic names it apart */
    size_t n = strlen(field);
    if (strncmp(message, field, n) == 0 && message[n] == ':' && message[n + 1] == ' ')
        message += n + 2;
    /* as the spec's own diagnostics name a field of the document */
    char path[128];
    snprintf(path, sizeof path, "spec.%s", field);
    return diag_add(d, DIAG_ERROR, file, pos.line, pos.col, path, message);
}

static size_t path_error(diag_list *d, const char *file, const spec_job *j, spec_pos pos,
                         const char *field, spec_root_kind kind, const policy_rules *r,
                         const policy_verdict *v)
{
    diag *x = job_error(d, file, j, pos, field, v->message);
    if (v->rc == POLICY_E_OUTSIDE && r->n_roots[kind]) {
        char roots[400];
        list_roots((const char *const *)r->roots[kind], r->n_roots[kind], NULL, 0, roots, sizeof roots);
        diag_set_expected(x, "a path under a %s root: %s", spec_root_kind_name(kind), roots);
    } else if (v->rc == POLICY_E_DENIED) {
        diag_set_expected(x, "a path outside the server's data folder and other jobs' folders");
    }
    if (v->resolved) diag_set_found(x, "%s", v->resolved);
    if (v->fix[0]) diag_set_suggestion(x, "%s", v->fix);
    return 1;
}

/* trainer.command's program: a path under a programs root or a system
 * folder, or a name found in the system folders. */
static size_t check_program(const policy *p, const policy_rules *r, const spec_job *j,
                            const char *file, const char *own_dir, diag_list *d)
{
    const char *prog = j->trainer.command[0];
    spec_pos none = {0, 0};
    if (!prog || !*prog) {
        diag *x = job_error(d, file, j, none, "trainer.command", "the program is empty");
        diag_set_suggestion(x, "write the program's path first, then its arguments");
        return 1;
    }
    char *found = NULL;
    if (!strchr(prog, '/')) {
        for (size_t i = 0; i < N_OF(path_dirs) && !found; i++) {
            char *c = path_join(path_dirs[i], prog);
            struct stat st;
            if (stat(c, &st) == 0 && S_ISREG(st.st_mode) && access(c, X_OK) == 0) found = c;
            else free(c);
        }
        if (!found) {
            char dirs[200];
            list_roots(path_dirs, N_OF(path_dirs), NULL, 0, dirs, sizeof dirs);
            char msg[512];
            set_err(msg, sizeof msg,
                     "the program \"%s\" is in none of the system folders (%s); a name is "
                     "looked up there only, never in the server's PATH",
                     prog, dirs);
            diag *x = job_error(d, file, j, none, "trainer.command", msg);
            diag_set_suggestion(x, "write the program's full path under a programs root "
                                   "(policy.paths.programs)");
            return 1;
        }
    }
    policy_verdict v;
    check_path(p, r, SPEC_ROOT_PROGRAMS, "trainer.command", found ? found : prog, own_dir,
               system_dirs, N_OF(system_dirs), &v);
    size_t errors = 0;
    if (v.rc != POLICY_OK) errors = path_error(d, file, j, none, "trainer.command",
                                               SPEC_ROOT_PROGRAMS, r, &v);
    policy_verdict_free(&v);
    free(found);
    return errors;
}

size_t policy_check_job(const policy *p, const char *team, const spec_job *j, const char *file,
                        const char *own_dir, diag_list *d)
{
    const policy_rules *r = policy_team(p, team);
    size_t errors = 0;
    struct {
        const char *field, *path;
        spec_pos pos;
        spec_root_kind kind;
    } paths[] = {
        {"baseModel.path", j->base_model.path, j->base_model.pos_path, SPEC_ROOT_MODELS},
        {"trainingData.datasetPath", j->training_data.dataset_path,
         j->training_data.pos_dataset_path, SPEC_ROOT_DATA},
        {"trainingData.evalDatasetPath", j->training_data.eval_path, {0, 0}, SPEC_ROOT_DATA},
        {"trainingData.evalPath", j->training_data.eval_path_alias, {0, 0}, SPEC_ROOT_DATA},
    };
    for (size_t i = 0; i < N_OF(paths); i++) {
        if (!paths[i].path) continue;
        policy_verdict v;
        if (policy_check_path(p, r, paths[i].kind, paths[i].field, paths[i].path, own_dir, &v) !=
            POLICY_OK)
            errors += path_error(d, file, j, paths[i].pos, paths[i].field, paths[i].kind, r, &v);
        policy_verdict_free(&v);
    }
    if (j->trainer.n_command) {
        if (!r->commands) {
            char msg[300];
            set_err(msg, sizeof msg,
                     "team %s may not run its own programs (the server's policy says "
                     "commands: false)",
                     r->team ? r->team : team ? team : "default");
            diag *x = job_error(d, file, j, (spec_pos){0, 0}, "trainer.command", msg);
            diag_set_expected(x, "no trainer.command: the built-in trainer");
            diag_set_suggestion(x, "remove trainer.command to train with the built-in trainer, "
                                   "or ask the operator to allow commands for the team");
            errors++;
        } else if (p->ctx.local) {
            errors += check_program(p, r, j, file, own_dir, d);
        }
    }
    bool own_image = p->ctx.engine_image && j->trainer.image &&
                     strcmp(p->ctx.engine_image, j->trainer.image) == 0;
    if (!p->ctx.local && j->trainer.image && !own_image &&
        !policy_image_allowed(r, j->trainer.image)) {
        char pats[300], msg[600];
        list_roots((const char *const *)r->images, r->n_images, NULL, 0, pats, sizeof pats);
        if (r->n_images)
            set_err(msg, sizeof msg, "the image %s matches none of the images allowed%s%s (%s)",
                     j->trainer.image, r->team ? " for team " : "", r->team ? r->team : "",
                     pats);
        else
            set_err(msg, sizeof msg,
                     "the image %s is not allowed: the server's policy lists no images, so "
                     "only the engine's own trainer image runs",
                     j->trainer.image);
        diag *x = job_error(d, file, j, (spec_pos){0, 0}, "trainer.image", msg);
        if (r->n_images) diag_set_expected(x, "an image matching %s", pats);
        diag_set_suggestion(x, "remove trainer.image to use the engine's image, or ask the "
                               "operator to add a pattern to policy.images");
        errors++;
    }
    return errors;
}
