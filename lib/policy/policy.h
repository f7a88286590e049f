/* policy.h: what a team's job may read, run and write where it runs
 * (docs/security.md). The ServerConfig's `policy:` section (spec_policy,
 * lib/spec) compiled for one server: every root made absolute and resolved,
 * each team's rules merged over everyone's, Unix users looked up. Then pure
 * checks of a job's spec against its team's rules, the same at submission
 * (the server) and right before the trainer starts (the supervisor).
 *
 *   policy_resolve     a path as the kernel would open it: symbolic links,
 *                      "." and ".." followed; the part that does not exist
 *                      yet is normalised lexically
 *   policy_path_under  component-wise prefix ("/data" holds "/data/x",
 *                      never "/database")
 *   policy_check_path  one field of a spec: resolved, outside every denied
 *                      folder (the server's data folder) unless inside the
 *                      job's own, and under a root of its kind
 *   policy_check_job   every path, trainer.command and trainer.image of a
 *                      resolved job, as diagnostics naming the field
 *
 * Files: policy_path.c (resolution, normalisation, prefix), policy_rules.c
 * (compiling the config, team lookup, job checks, images).
 * Depends on spec and base only. Threads: a compiled policy is read-only.
 */
#ifndef LATHE_POLICY_H
#define LATHE_POLICY_H

#include "base/base.h"
#include "spec/spec.h"

#include <stdbool.h>
#include <stddef.h>

typedef enum {
    POLICY_OK = 0,
    POLICY_E_OUTSIDE, /* under none of the roots of its kind */
    POLICY_E_DENIED,  /* inside a denied folder (the server's data folder,
                         another job's folder) */
    POLICY_E_INVALID, /* not a usable path: empty, a NUL, too long, a loop of links */
    POLICY_E_IO       /* the file system refused (EACCES on a folder) */
} policy_rc;

/* "ok", "outside", "denied", "invalid", "io". */
const char *policy_rc_name(policy_rc rc);

/* ---- paths (policy_path.c) ---- */

/* The lexical normal form of path: absolute (joined to base when relative;
 * base must then be absolute), "//" and "." removed, ".." taking away the
 * part before it (never above "/"), no trailing "/". NULL for an empty
 * path or one holding a control character. Caller frees. */
char *policy_normalize(const char *base, const char *path);

/* The path the kernel would reach: policy_normalize, then every symbolic
 * link followed (at most 40, as Linux), each ".." applied to what the
 * part before it resolved to. A path whose tail does not exist resolves
 * to its existing head plus that tail (normalised): a dataset written
 * later is checked now and again at start. POLICY_OK with *out (caller
 * frees), else a sentence in why. */
policy_rc policy_resolve(const char *base, const char *path, char **out, char *why, size_t whysz);

/* True when path is root or inside it, component-wise; both normalised. */
bool policy_path_under(const char *path, const char *root);

/* ---- the compiled policy (policy_rules.c) ---- */

/* One team's rules: everyone's plus its own entry. */
typedef struct policy_rules {
    char *team;                        /* NULL for everyone's */
    char **roots[SPEC_ROOT_KINDS];     /* absolute, resolved (local) or normalised */
    size_t n_roots[SPEC_ROOT_KINDS];
    bool commands;                     /* may run its own trainer.command */
    char **images;                     /* fnmatch patterns; none = the engine's image only */
    size_t n_images;
    long long uid, gid;                /* its trainers' user and group; -1 = the
                                          server's own (a server not run as root) */
    char *user;                        /* the user as configured (messages); may be NULL */
    const char *service_account, *slurm_account, *slurm_user; /* borrowed from the spec */
} policy_rules;

typedef struct policy_ctx {
    const char *config_dir; /* relative roots start here (absolute) */
    const char *data_dir;   /* the server's data folder: always denied (absolute);
                               NULL = none */
    const char *jobs_dir;   /* its jobs' folders: a job reads only its own; NULL = none */
    const char *cwd;        /* relative paths of a spec start here (the server's
                               working folder, as the local executor runs them);
                               NULL = "/" */
    bool local;             /* resolve through this machine's file system (the
                               local executor); false = cluster engine paths,
                               normalised lexically only */
    /* a cluster engine's volumes, added to every team's roots of that kind
     * (Kubernetes: the model, data and checkpoint mounts); up to 4 per
     * kind, the unused ones NULL */
    const char *engine_roots[SPEC_ROOT_KINDS][4];
    const char *engine_image; /* a cluster engine's own trainer image: always allowed
                                 (the same as no trainer.image); NULL = none */
    bool as_root;           /* the server runs as root: trainers get the team's
                               user, or the sandbox's default user */
} policy_ctx;

typedef struct policy policy;

/* Compiles sp (NULL = every default: no roots, commands allowed only inside
 * the sandbox, the sandbox in auto mode). Unknown users or groups and a
 * root user without allowRoot are errors: NULL with a sentence in err. */
policy *policy_new(const spec_policy *sp, const policy_ctx *ctx, char *err, size_t errsz);
void policy_free(policy *p);
/* The rules of a team (everyone's for a team without an entry); never NULL. */
const policy_rules *policy_team(const policy *p, const char *team);
/* The sandbox settings as configured (mode, limits, cgroup). */
const spec_policy *policy_spec(const policy *p);
const policy_ctx *policy_context(const policy *p);

/* What a check found. */
typedef struct policy_verdict {
    policy_rc rc;
    char *resolved;     /* the resolved path (caller frees with policy_verdict_free) */
    char message[768];  /* "trainingData.datasetPath: /srv/data/x resolves to
                           /srv/lathe/lathe.db, inside the server's data folder" */
    char fix[256];      /* the suggestion */
} policy_verdict;
void policy_verdict_free(policy_verdict *v);

/* Checks one path of a job: field names it in messages ("baseModel.path");
 * own_dir is the job's own folder (may be NULL before it has one). In
 * order: the path resolved (relative to ctx->cwd); inside own_dir: OK;
 * inside ctx->jobs_dir: DENIED (another job's folder); inside
 * ctx->data_dir: DENIED (the server's data folder); under a root of its
 * kind: OK; else OUTSIDE. */
policy_rc policy_check_path(const policy *p, const policy_rules *r, spec_root_kind kind,
                            const char *field, const char *path, const char *own_dir,
                            policy_verdict *v);

/* True when image matches one of the rules' patterns: fnmatch(3) without
 * FNM_PATHNAME, so a star also matches '/' (the pattern
 * "registry.example.com/team-a/" followed by a star allows
 * "registry.example.com/team-a/sub/x:1"), and without FNM_PERIOD. */
bool policy_image_allowed(const policy_rules *r, const char *image);

/* Every check of a resolved job of team `team` at submission: its paths
 * (baseModel.path against models, the datasets against data, the program
 * of trainer.command against programs, or PATH's system folders), whether
 * it may run trainer.command at all (the team's `commands`, and a sandbox
 * that is not off unless commands run unsandboxed by the operator's word),
 * trainer.image on cluster engines. Each refusal is an error in d at the
 * field's position in file (the document's where the spec keeps none),
 * named as a field of the document ("spec.baseModel.path"), with the rule,
 * what the path resolved to and a suggestion. On a cluster engine the
 * program of trainer.command is the image's and is not looked up here.
 * Returns the number of errors added. */
size_t policy_check_job(const policy *p, const char *team, const spec_job *j, const char *file,
                        const char *own_dir, diag_list *d);

#endif
