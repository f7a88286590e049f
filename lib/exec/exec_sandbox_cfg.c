/* exec_sandbox_cfg.c: what the server and the supervisor know of a local
 * trainer's sandbox before any namespace is made (exec_sandbox.c makes
 * it):
 *
 *   exec_env_*           the trainer's environment allow-list, and the
 *                        names a secret would carry
 *   exec_sandbox_json /  the sandbox in the supervisor's config, and read
 *   exec_sandbox_parse   back by the supervisor
 *   exec_sandbox_recheck the spec's paths resolved again right before the
 *                        start (a link swapped after submission) */
#include "exec_internal.h"
#include "policy/policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- the environment ---- */

/* Names a secret would carry: never passed on from the server. */
bool exec_env_secret_name(const char *entry)
{
    static const char *const words[] = {"TOKEN", "SECRET", "PASSWORD", "KEY", "CREDENTIAL"};
    size_t len = strcspn(entry, "=");
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
        size_t wl = strlen(words[w]);
        for (size_t i = 0; i + wl <= len; i++)
            if (strncasecmp(entry + i, words[w], wl) == 0) return true;
    }
    return false;
}

bool exec_env_allowed(const char *entry)
{
    static const char *const exact[] = {
        "PATH",          "LANG",          "TZ",           "TERM",         "HF_HOME",
        "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "ASAN_OPTIONS", "UBSAN_OPTIONS",
        "LSAN_OPTIONS",  "LLVM_PROFILE_FILE",
    };
    static const char *const prefix[] = {"LC_", "CUDA_", "NVIDIA_", "NCCL_", "OMP_",
                                         "OPENBLAS_", "MKL_", "PYTHON"};
    size_t len = strcspn(entry, "=");
    if (entry[len] != '=' || exec_env_secret_name(entry)) return false;
    if (len == strlen("PYTHONSTARTUP") && strncmp(entry, "PYTHONSTARTUP", len) == 0) return false;
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (strlen(exact[i]) == len && strncmp(entry, exact[i], len) == 0) return true;
    for (size_t i = 0; i < sizeof prefix / sizeof prefix[0]; i++)
        if (str_starts_with(entry, prefix[i])) return true;
    return false;
}

/* ---- the sandbox in the supervisor's config ---- */

static const char *toggle_word(spec_toggle t)
{
    return t == TOGGLE_ON ? "on" : t == TOGGLE_OFF ? "off" : "auto";
}

json_t *exec_sandbox_json(const exec_sandbox *box, bool gpus)
{
    json_t *o = json_object();
    json_object_set_new(o, "required", json_boolean(box->required));
    json_object_set_new(o, "uid", json_integer(box->uid));
    json_object_set_new(o, "gid", json_integer(box->gid));
    json_t *binds = json_array();
    for (size_t i = 0; i < box->n_binds; i++) {
        if (!box->binds[i].path) continue;
        json_t *b = json_object();
        json_object_set_new(b, "path", json_string(box->binds[i].path));
        json_object_set_new(b, "writable", json_boolean(box->binds[i].writable));
        json_array_append_new(binds, b);
    }
    json_object_set_new(o, "binds", binds);
    json_t *hide = json_array();
    for (size_t i = 0; i < box->n_hide; i++)
        if (box->hide[i]) json_array_append_new(hide, json_string(box->hide[i]));
    json_object_set_new(o, "hide", hide);
    json_t *checks = json_array();
    for (size_t i = 0; i < box->n_checks; i++) {
        const exec_path_check *c = &box->checks[i];
        if (!c->path || !c->field) continue;
        json_t *k = json_object(), *roots = json_array();
        json_object_set_new(k, "field", json_string(c->field));
        json_object_set_new(k, "path", json_string(c->path));
        for (size_t r = 0; r < c->n_roots; r++)
            if (c->roots[r]) json_array_append_new(roots, json_string(c->roots[r]));
        json_object_set_new(k, "roots", roots);
        json_array_append_new(checks, k);
    }
    json_object_set_new(o, "checks", checks);
    json_object_set_new(o, "memory", json_real(box->memory));
    json_object_set_new(o, "processes", json_integer(box->processes));
    json_object_set_new(o, "open_files", json_integer(box->open_files));
    json_object_set_new(o, "cgroup", json_string(toggle_word(box->cgroup)));
    json_object_set_new(o, "gpus", json_boolean(gpus));
    return o;
}

static bool abs_path(const char *p)
{
    return p && p[0] == '/';
}

bool exec_sandbox_parse(json_t *o, exec_sandbox_cfg *c, char *err, size_t errsz)
{
    memset(c, 0, sizeof *c);
    if (!json_is_object(o)) {
        snprintf(err, errsz, "the config's \"sandbox\" is not an object");
        return false;
    }
    c->json = json_incref(o);
    exec_sandbox *box = &c->sb;
    box->required = json_is_true(json_object_get(o, "required"));
    box->uid = (long long)exec_json_num(o, "uid", -1);
    box->gid = (long long)exec_json_num(o, "gid", -1);
    box->memory = exec_json_num(o, "memory", 0);
    box->processes = (long)exec_json_num(o, "processes", 0);
    box->open_files = (long)exec_json_num(o, "open_files", 0);
    const char *cg = exec_json_str(o, "cgroup");
    box->cgroup = cg && !strcmp(cg, "on") ? TOGGLE_ON : cg && !strcmp(cg, "off") ? TOGGLE_OFF
                                                                                 : TOGGLE_AUTO;
    c->gpus = json_is_true(json_object_get(o, "gpus"));
    json_t *binds = json_object_get(o, "binds"), *hide = json_object_get(o, "hide");
    json_t *checks = json_object_get(o, "checks");
    size_t nb = json_array_size(binds), nh = json_array_size(hide), nc = json_array_size(checks);
    c->binds = xcalloc(nb + 1, sizeof *c->binds);
    c->hide = xcalloc(nh + 1, sizeof *c->hide);
    c->checks = xcalloc(nc + 1, sizeof *c->checks);
    c->roots = xcalloc(nc + 1, sizeof *c->roots);
    for (size_t i = 0; i < nb; i++) {
        json_t *b = json_array_get(binds, i);
        const char *p = exec_json_str(b, "path");
        if (!abs_path(p)) goto bad;
        c->binds[box->n_binds].path = p;
        c->binds[box->n_binds++].writable = json_is_true(json_object_get(b, "writable"));
    }
    for (size_t i = 0; i < nh; i++) {
        const char *p = json_string_value(json_array_get(hide, i));
        if (!abs_path(p)) goto bad;
        c->hide[box->n_hide++] = p;
    }
    for (size_t i = 0; i < nc; i++) {
        json_t *k = json_array_get(checks, i), *roots = json_object_get(k, "roots");
        exec_path_check *pc = &c->checks[box->n_checks];
        pc->field = exec_json_str(k, "field");
        pc->path = exec_json_str(k, "path");
        if (!pc->field || !pc->path) goto bad;
        size_t nr = json_array_size(roots);
        c->roots[box->n_checks] = xcalloc(nr + 1, sizeof(char *));
        for (size_t r = 0; r < nr; r++) {
            const char *root = json_string_value(json_array_get(roots, r));
            if (root) c->roots[box->n_checks][pc->n_roots++] = root;
        }
        pc->roots = c->roots[box->n_checks];
        box->n_checks++;
    }
    box->binds = c->binds;
    box->hide = c->hide;
    box->checks = c->checks;
    return true;
bad:
    snprintf(err, errsz, "the config's \"sandbox\" has a bind, hidden folder or check without "
                         "an absolute path");
    exec_sandbox_cfg_free(c);
    return false;
}

void exec_sandbox_cfg_free(exec_sandbox_cfg *c)
{
    if (c->roots)
        for (size_t i = 0; i < c->sb.n_checks; i++) free((void *)c->roots[i]);
    free(c->roots);
    free(c->binds);
    free(c->hide);
    free(c->checks);
    json_decref(c->json);
    memset(c, 0, sizeof *c);
}

/* ---- the re-check right before the start ---- */

bool exec_sandbox_recheck(const exec_sandbox *box, const char *job_dir, char *err, size_t errsz)
{
    char why[512];
    char *own = NULL;
    if (job_dir && policy_resolve(NULL, job_dir, &own, why, sizeof why) != POLICY_OK) own = NULL;
    bool ok = true;
    for (size_t i = 0; ok && i < box->n_checks; i++) {
        const exec_path_check *c = &box->checks[i];
        char *res = NULL;
        policy_rc rc = policy_resolve(NULL, c->path, &res, why, sizeof why);
        if (rc != POLICY_OK) {
            snprintf(err, errsz, "%s: %s cannot be resolved now: %s; it changed after submission",
                     c->field, c->path, why);
            ok = false;
            break;
        }
        bool own_file = own && policy_path_under(res, own);
        bool inside = own_file;
        for (size_t r = 0; !inside && r < c->n_roots; r++)
            inside = policy_path_under(res, c->roots[r]);
        /* a hidden folder (the server's data folder) stays refused even
         * where a root holds it */
        for (size_t h = 0; inside && !own_file && h < box->n_hide; h++)
            if (policy_path_under(res, box->hide[h])) {
                snprintf(err, errsz,
                         "%s: %s now resolves to %s, inside the server's data folder %s; it "
                         "changed after submission",
                         c->field, c->path, res, box->hide[h]);
                ok = false;
            }
        if (!ok) {
            free(res);
            break;
        }
        if (!inside) {
            sb list;
            sb_init(&list);
            for (size_t r = 0; r < c->n_roots; r++)
                sb_printf(&list, "%s%s", r ? ", " : "", c->roots[r]);
            snprintf(err, errsz,
                     "%s: %s now resolves to %s, outside its roots (%s) and the job's folder; it "
                     "changed after submission",
                     c->field, c->path, res, c->n_roots ? sb_str(&list) : "none configured");
            sb_free(&list);
            ok = false;
        }
        free(res);
    }
    free(own);
    return ok;
}
