/* spec_policy.c: the ServerConfig's `policy:` section (spec.h, spec_policy):
 * what a team's jobs may read, run and write where they run. Its schema
 * tables (everyone's `paths`, `commands`, `images`, the `sandbox` settings
 * and the `teams` list), defaults, memory, and the checks across fields
 * that a table cannot say (a team listed once). The decoder already
 * refuses empty roots, unknown keys and bad names; lib/policy compiles the
 * result (roots resolved, users looked up), since those checks need the
 * machine the server runs on.
 *
 * The tables of the top level use offsets into spec_server, because the
 * decoder's SF_OBJ decodes a nested mapping into the same base; the team
 * entries use offsets into spec_policy_team (SF_LIST elements).
 */
#include "spec_internal.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCHEMA(tab, type, init, after) {tab, sizeof tab / sizeof tab[0], sizeof(type), init, after}
#define SCHEMA0(tab) {tab, sizeof tab / sizeof tab[0], 0, NULL, NULL}

const char *spec_root_kind_name(spec_root_kind k)
{
    switch (k) {
    case SPEC_ROOT_MODELS: return "models";
    case SPEC_ROOT_DATA: return "data";
    case SPEC_ROOT_ADAPTERS: return "adapters";
    case SPEC_ROOT_PROGRAMS: return "programs";
    case SPEC_ROOT_KINDS: break;
    }
    return "?";
}

/* ---- defaults and memory ---- */
void spec_policy_defaults(spec_policy *p)
{
    memset(p, 0, sizeof *p);
    p->all.commands = TOGGLE_AUTO;
    p->sandbox.mode = SPEC_SANDBOX_AUTO;
    p->sandbox.processes = 4096;
    p->sandbox.open_files = 65536;
    p->sandbox.cgroup = TOGGLE_AUTO;
}

static void rules_free(spec_policy_rules *r)
{
    for (int k = 0; k < SPEC_ROOT_KINDS; k++) {
        str_list_free(r->roots[k], r->n_roots[k]);
        r->roots[k] = NULL;
        r->n_roots[k] = 0;
    }
    str_list_free(r->images, r->n_images);
    r->images = NULL;
    r->n_images = 0;
}

void spec_policy_free(spec_policy *p)
{
    rules_free(&p->all);
    for (size_t i = 0; i < p->n_teams; i++) {
        spec_policy_team *t = &p->teams[i];
        rules_free(&t->rules);
        free(t->team);
        free(t->user);
        free(t->group);
        free(t->service_account);
        free(t->slurm_account);
        free(t->slurm_user);
    }
    free(p->teams);
    p->teams = NULL;
    p->n_teams = 0;
    free(p->sandbox.user);
    free(p->sandbox.group);
    p->sandbox.user = p->sandbox.group = NULL;
}

/* ---- enums ---- */
static const spec_enum_entry mode_tab[] = {
    {"auto", SPEC_SANDBOX_AUTO, false},
    {"required", SPEC_SANDBOX_REQUIRED, false},
    {"off", SPEC_SANDBOX_OFF, false},
};
static const spec_enum_def enum_mode = {mode_tab, sizeof mode_tab / sizeof mode_tab[0]};

/* ---- schemas ---- */

/* `paths:` of a rules struct at offset `at` of the base. */
#define ROOTS(base, at, k)                                                                      \
    .off = offsetof(base, at.roots) + (k) * sizeof(char **),                                    \
    .off_n = offsetof(base, at.n_roots) + (k) * sizeof(size_t)
#define PATH_FIELDS(base, at)                                                                   \
    {.key = "models", .type = SF_STRLIST, ROOTS(base, at, SPEC_ROOT_MODELS)},                   \
        {.key = "data", .type = SF_STRLIST, ROOTS(base, at, SPEC_ROOT_DATA)},                   \
        {.key = "adapters", .type = SF_STRLIST, ROOTS(base, at, SPEC_ROOT_ADAPTERS)},           \
        {.key = "programs", .type = SF_STRLIST, ROOTS(base, at, SPEC_ROOT_PROGRAMS)},

static const spec_field all_path_fields[] = {PATH_FIELDS(spec_server, policy.all)};
static const spec_schema all_path_schema = SCHEMA0(all_path_fields);
static const spec_field team_path_fields[] = {PATH_FIELDS(spec_policy_team, rules)};
static const spec_schema team_path_schema = SCHEMA0(team_path_fields);

#define SB(m) offsetof(spec_server, policy.sandbox.m)
static const spec_field sandbox_fields[] = {
    {.key = "mode", .type = SF_ENUM, .off = SB(mode), .enm = &enum_mode},
    {.key = "user", .type = SF_STR, .off = SB(user)},
    {.key = "group", .type = SF_STR, .off = SB(group)},
    {.key = "allowRoot", .type = SF_BOOL, .off = SB(allow_root)},
    {.key = "memory", .type = SF_BYTES, .off = SB(memory), .flags = SF_MIN, .min = 0,
     .hint = "bytes per attempt such as 64Gi; 0 sets no limit"},
    {.key = "processes", .type = SF_LONG, .off = SB(processes), .flags = SF_MIN | SF_MAX,
     .min = 16, .max = 4194304,
     .hint = "processes and threads per attempt; 4096 is the default, a data loader "
             "with many workers needs a few hundred"},
    {.key = "openFiles", .type = SF_LONG, .off = SB(open_files), .flags = SF_MIN | SF_MAX,
     .min = 64, .max = 1073741816,
     .hint = "65536 is the default; the kernel's fs.nr_open caps it (1048576 unless raised)"},
    {.key = "cgroup", .type = SF_TOGGLE, .off = SB(cgroup)},
};
#undef SB
static const spec_schema sandbox_schema = SCHEMA0(sandbox_fields);

#define TM(m) offsetof(spec_policy_team, m)
static const spec_field team_fields[] = {
    {.key = "team", .type = SF_STR, .off = TM(team), .flags = SF_REQUIRED | SF_DNS},
    {.key = "user", .type = SF_STR, .off = TM(user)},
    {.key = "group", .type = SF_STR, .off = TM(group)},
    {.key = "paths", .type = SF_OBJ, .sub = &team_path_schema},
    {.key = "commands", .type = SF_TOGGLE, .off = TM(rules.commands)},
    {.key = "images", .type = SF_STRLIST, .off = TM(rules.images), .off_n = TM(rules.n_images)},
    {.key = "serviceAccount", .type = SF_STR, .off = TM(service_account)},
    {.key = "slurmAccount", .type = SF_STR, .off = TM(slurm_account)},
    {.key = "slurmUser", .type = SF_STR, .off = TM(slurm_user)},
};
#undef TM

static void team_init(void *elem)
{
    spec_policy_team *t = elem;
    t->rules.commands = TOGGLE_AUTO;
}

static void team_after(spec_dctx *c, const spec_ynode *m, void *elem)
{
    (void)c;
    spec_policy_team *t = elem;
    t->pos = (spec_pos){m->line, m->col};
}
static const spec_schema team_schema =
    SCHEMA(team_fields, spec_policy_team, team_init, team_after);

#define P(m) offsetof(spec_server, policy.m)
static const spec_field policy_fields[] = {
    {.key = "paths", .type = SF_OBJ, .sub = &all_path_schema},
    {.key = "commands", .type = SF_TOGGLE, .off = P(all.commands)},
    {.key = "images", .type = SF_STRLIST, .off = P(all.images), .off_n = P(all.n_images)},
    {.key = "sandbox", .type = SF_OBJ, .sub = &sandbox_schema},
    {.key = "teams", .type = SF_LIST, .off = P(teams), .off_n = P(n_teams), .sub = &team_schema},
};
#undef P
const spec_schema spec_server_policy_schema = SCHEMA0(policy_fields);

/* ---- checks across fields ---- */
void spec_policy_check(spec_dctx *c, const spec_ynode *pn, const spec_policy *p)
{
    const spec_ynode *list = pn && pn->kind == SPEC_YMAP ? spec_ymap_get(pn, "teams") : NULL;
    for (size_t i = 0; i < p->n_teams; i++) {
        const char *ti = p->teams[i].team;
        if (!ti) continue;
        for (size_t k = 0; k < i; k++) {
            if (!p->teams[k].team || strcmp(p->teams[k].team, ti) != 0) continue;
            char path[64];
            snprintf(path, sizeof path, "teams[%zu].team", i);
            size_t old = spec_path_push(c, path);
            const spec_ynode *at = spec_yitem_get(list, i, "team");
            diag *x = spec_report(c, DIAG_ERROR, at ? at : pn,
                                  "team %s is listed twice (also teams[%zu])", ti, k);
            diag_set_suggestion(x, "merge the two entries into one; a team has one set of rules");
            spec_path_pop(c, old);
            break;
        }
    }
}
