/* cluster.c: the cluster snapshot: building one by hand (tests, the
 * simulator's --nodes shorthand) or from a Cluster spec, lookups, and the
 * small tables (policy names, configuration defaults). */
#include "sched_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- names and defaults ---- */

static const char *const policy_names[SCHED_N_POLICIES] = {"fifo", "greedy", "easy", "lathe"};

const char *sched_policy_name(sched_policy p)
{
    return (unsigned)p < SCHED_N_POLICIES ? policy_names[p] : "?";
}

bool sched_policy_parse(const char *s, sched_policy *out)
{
    for (int i = 0; i < SCHED_N_POLICIES; i++)
        if (strcmp(s, policy_names[i]) == 0) {
            *out = (sched_policy)i;
            return true;
        }
    return false;
}

static const char *const rule_names[SCHED_N_RULES] = {
    "end-pack", "idle-reserve", "oldest-head", "pool-head", "reclaim-borrowed", "reclaim-small",
    "reclaim-backoff", "overrun", "reclaim-cheap", "reclaim-tail",
    "learn-limit", "reserve-tail", "rent-reserve",
};

const char *sched_rule_name(unsigned rule)
{
    for (int i = 0; i < SCHED_N_RULES; i++)
        if (rule == 1u << i) return rule_names[i];
    return NULL;
}

bool sched_rule_parse(const char *s, unsigned *rule)
{
    for (int i = 0; i < SCHED_N_RULES; i++)
        if (strcmp(s, rule_names[i]) == 0) {
            *rule = 1u << i;
            return true;
        }
    return false;
}

void sched_config_default(sched_config *cfg, sched_policy policy)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->policy = policy;
    cfg->half_life = 7 * 86400.0; /* Slurm's PriorityDecayHalfLife default */
    cfg->min_run_time = 600;
    cfg->reclaim_min_run = 3600;
    cfg->reclaim_wait = 600;
    cfg->max_slack = 6 * 3600.0;
    cfg->head_after = 3600;
    cfg->starve_after = 48 * 3600.0;
    cfg->slack_factor = 0.5;
    cfg->long_after = 72 * 3600.0;
    cfg->long_max = 4 * 86400.0;
    cfg->long_gpus = 16;
    cfg->rules = SCHED_RULES_DEFAULT;
    cfg->fair_share = true;
    cfg->aging = 3600;
    cfg->default_estimate = 4 * 3600.0;
    cfg->gpu_share_limit = 4;
    cfg->max_preempt_attempts = 8;
    cfg->backfill_depth = 500; /* Slurm's bf_max_job_test default */
    cfg->reasons = true;
}

double sched_usage_advance(double usage, double alloc, double dt, double half_life)
{
    if (dt <= 0) return usage;
    if (half_life <= 0) return alloc * dt; /* no memory: only the last interval */
    double keep = exp2(-dt / half_life);
    return usage * keep + alloc * (half_life / M_LN2) * (1 - keep);
}

/* ---- builder ---- */

/* Grows an array so that index n fits; capacity doubles at powers of two. */
static void *grow(void *p, int n, size_t size)
{
    if (n == 0) return xrealloc(p, 4 * size);
    if (n >= 4 && (n & (n - 1)) == 0) return xrealloc(p, (size_t)n * 2 * size);
    return p;
}

static int fail(sched_cluster *c, const char *fmt, const char *name)
{
    snprintf(c->error, sizeof c->error, fmt, name ? name : "(null)");
    return -1;
}

sched_cluster *sched_cluster_new(void)
{
    sched_cluster *c = xcalloc(1, sizeof *c);
    c->default_prio = -1;
    return c;
}

void sched_cluster_free(sched_cluster *c)
{
    if (!c) return;
    for (int i = 0; i < c->n_types; i++) free(c->types[i].name);
    for (int i = 0; i < c->n_nodes; i++) free(c->nodes[i].name);
    for (int i = 0; i < c->n_racks; i++) free(c->racks[i]);
    for (int i = 0; i < c->n_teams; i++) {
        free(c->teams[i].name);
        free(c->teams[i].quota);
        free(c->teams[i].borrow_limit);
        free(c->teams[i].lend_limit);
    }
    for (int i = 0; i < c->n_prios; i++) free(c->prios[i].name);
    free(c->types);
    free(c->nodes);
    free(c->racks);
    free(c->gpu_node);
    free(c->gpu_group);
    free(c->group_node);
    free(c->group_size);
    free(c->teams);
    free(c->prios);
    free(c);
}

int sched_cluster_add_type(sched_cluster *c, const char *name, double memory, double price)
{
    if (!name || !*name) return fail(c, "a GPU type needs a name%s", "");
    if (sched_cluster_find_type(c, name) >= 0) return fail(c, "GPU type '%s' is defined twice", name);
    if (c->n_types >= SCHED_MAX_TYPES) return fail(c, "too many GPU types (at '%s'); at most 64", name);
    if (c->n_teams > 0) return fail(c, "GPU type '%s' added after teams; add types first", name);
    if (!(memory > 0) || !(price >= 0) || !isfinite(memory) || !isfinite(price))
        return fail(c, "GPU type '%s' needs a memory size > 0 and a price >= 0", name);
    c->types = grow(c->types, c->n_types, sizeof *c->types);
    c->types[c->n_types] = (sched_gpu_type){xstrdup(name), memory, price};
    return c->n_types++;
}

static int rack_index(sched_cluster *c, const char *rack)
{
    for (int i = 0; i < c->n_racks; i++)
        if (strcmp(c->racks[i], rack) == 0) return i;
    c->racks = grow(c->racks, c->n_racks, sizeof *c->racks);
    c->racks[c->n_racks] = xstrdup(rack);
    return c->n_racks++;
}

/* Numbers a node's NVLink groups 0.. in order of first appearance; returns
 * the count and writes each GPU's local group to local[]. */
static int local_groups(const int *nvlink, int n, int *local)
{
    int ids[SCHED_MAX_NODE_GPUS], nid = 0;
    for (int i = 0; i < n; i++) {
        int id = nvlink ? nvlink[i] : 0, g = -1;
        for (int k = 0; k < nid; k++)
            if (ids[k] == id) g = k;
        if (g < 0) {
            ids[nid] = id;
            g = nid++;
        }
        local[i] = g;
    }
    return nid;
}

int sched_cluster_add_node(sched_cluster *c, const char *name, const char *rack, int type,
                           int n_gpus, const int *nvlink, sched_node_state state)
{
    if (!name || !*name) return fail(c, "a node needs a name%s", "");
    if (type < 0 || type >= c->n_types) return fail(c, "node '%s' has an unknown GPU type", name);
    if (n_gpus < 1 || n_gpus > SCHED_MAX_NODE_GPUS)
        return fail(c, "node '%s' must have 1 to 64 GPUs", name);
    if (sched_cluster_find_node(c, name) >= 0) return fail(c, "node '%s' is defined twice", name);
    int local[SCHED_MAX_NODE_GPUS];
    int ng = local_groups(nvlink, n_gpus, local);

    c->nodes = grow(c->nodes, c->n_nodes, sizeof *c->nodes);
    sched_node *nd = &c->nodes[c->n_nodes];
    nd->name = xstrdup(name);
    nd->type = type;
    nd->rack = rack_index(c, rack ? rack : name);
    nd->n_gpus = n_gpus;
    nd->first_gpu = c->n_gpus;
    nd->first_group = c->n_groups;
    nd->n_groups = ng;
    nd->state = state;

    c->gpu_node = xrealloc(c->gpu_node, (size_t)(c->n_gpus + n_gpus) * sizeof *c->gpu_node);
    c->gpu_group = xrealloc(c->gpu_group, (size_t)(c->n_gpus + n_gpus) * sizeof *c->gpu_group);
    c->group_node = xrealloc(c->group_node, (size_t)(c->n_groups + ng) * sizeof *c->group_node);
    c->group_size = xrealloc(c->group_size, (size_t)(c->n_groups + ng) * sizeof *c->group_size);
    for (int g = 0; g < ng; g++) {
        c->group_node[c->n_groups + g] = c->n_nodes;
        c->group_size[c->n_groups + g] = 0;
    }
    for (int i = 0; i < n_gpus; i++) {
        c->gpu_node[c->n_gpus + i] = c->n_nodes;
        c->gpu_group[c->n_gpus + i] = c->n_groups + local[i];
        c->group_size[c->n_groups + local[i]]++;
    }
    c->n_gpus += n_gpus;
    c->n_groups += ng;
    c->type_gpus[type] += n_gpus;
    if (n_gpus > c->type_max_node[type]) c->type_max_node[type] = n_gpus;
    if (n_gpus > c->max_node_gpus) c->max_node_gpus = n_gpus;
    return c->n_nodes++;
}

static int *limit_array(int n)
{
    int *a = xmalloc((size_t)(n + 1) * sizeof *a);
    for (int i = 0; i <= n; i++) a[i] = SCHED_UNLIMITED;
    return a;
}

int sched_cluster_add_team(sched_cluster *c, const char *name)
{
    if (!name || !*name) return fail(c, "a team needs a name%s", "");
    if (sched_cluster_find_team(c, name) >= 0) return fail(c, "team '%s' is defined twice", name);
    c->teams = grow(c->teams, c->n_teams, sizeof *c->teams);
    sched_team *t = &c->teams[c->n_teams];
    memset(t, 0, sizeof *t);
    t->name = xstrdup(name);
    t->quota = limit_array(c->n_types);
    t->borrow_limit = limit_array(c->n_types);
    t->lend_limit = limit_array(c->n_types);
    t->weight = 1;
    return c->n_teams++;
}

void sched_team_set_quota(sched_cluster *c, int team, int type, int quota, int borrow, int lend)
{
    if (team < 0 || team >= c->n_teams || type < -1 || type >= c->n_types) return;
    int i = type < 0 ? c->n_types : type;
    sched_team *t = &c->teams[team];
    t->limited = true;
    t->quota[i] = quota < 0 ? 0 : quota;
    t->borrow_limit[i] = borrow < 0 ? SCHED_UNLIMITED : borrow;
    t->lend_limit[i] = lend < 0 ? SCHED_UNLIMITED : lend;
}

int sched_cluster_add_priority(sched_cluster *c, const char *name, int64_t value,
                               bool preempt_lower, bool is_default)
{
    if (!name || !*name) return fail(c, "a priority class needs a name%s", "");
    if (sched_cluster_find_priority(c, name) >= 0)
        return fail(c, "priority class '%s' is defined twice", name);
    c->prios = grow(c->prios, c->n_prios, sizeof *c->prios);
    c->prios[c->n_prios] = (sched_priority_class){xstrdup(name), value, preempt_lower};
    if (is_default) c->default_prio = c->n_prios;
    return c->n_prios++;
}

int sched_cluster_find_type(const sched_cluster *c, const char *name)
{
    for (int i = 0; i < c->n_types; i++)
        if (strcmp(c->types[i].name, name) == 0) return i;
    return -1;
}

int sched_cluster_find_team(const sched_cluster *c, const char *name)
{
    for (int i = 0; i < c->n_teams; i++)
        if (strcmp(c->teams[i].name, name) == 0) return i;
    return -1;
}

int sched_cluster_find_node(const sched_cluster *c, const char *name)
{
    for (int i = 0; i < c->n_nodes; i++)
        if (strcmp(c->nodes[i].name, name) == 0) return i;
    return -1;
}

int sched_cluster_find_priority(const sched_cluster *c, const char *name)
{
    for (int i = 0; i < c->n_prios; i++)
        if (strcmp(c->prios[i].name, name) == 0) return i;
    return -1;
}

const char *sched_cluster_error(const sched_cluster *c)
{
    return c->error;
}

int sched_cluster_ready_gpus(const sched_cluster *c)
{
    int n = 0;
    for (int i = 0; i < c->n_nodes; i++)
        if (c->nodes[i].state == SCHED_NODE_READY) n += c->nodes[i].n_gpus;
    return n;
}

/* ---- from a Cluster spec ---- */

static void spec_error(diag_list *d, const spec_cluster *s, const char *path, const char *msg,
                       const char *hint)
{
    diag *x = diag_add(d, DIAG_ERROR, s->file, 0, 0, path, msg);
    if (hint) diag_set_suggestion(x, "%s", hint);
}

/* Copies one quota list (quota, borrowingLimit or lendingLimit) into a team. */
static void quota_list(sched_cluster *c, const spec_cluster *s, int team, const spec_quota *q,
                       size_t n, int which, size_t ti, diag_list *d)
{
    static const char *const field[3] = {"quota", "borrowingLimit", "lendingLimit"};
    for (size_t i = 0; i < n; i++) {
        int type = -1;
        if (strcmp(q[i].gpu_type, "*") != 0 && strcmp(q[i].gpu_type, "nvidia.com/gpu") != 0) {
            type = sched_cluster_find_type(c, q[i].gpu_type);
            if (type < 0) {
                char path[160], msg[200];
                snprintf(path, sizeof path, "spec.teams[%zu].%s.%s", ti, field[which], q[i].gpu_type);
                snprintf(msg, sizeof msg, "unknown GPU type '%s'", q[i].gpu_type);
                spec_error(d, s, path, msg, "use a name from spec.gpuTypes, or \"*\" for any type");
                continue;
            }
        }
        sched_team *t = &c->teams[team];
        int at = type < 0 ? c->n_types : type;
        if (which == 0) {
            t->limited = true;
            t->quota[at] = q[i].count;
        } else if (which == 1) {
            t->borrow_limit[at] = q[i].count;
        } else {
            t->lend_limit[at] = q[i].count;
        }
    }
}

static void add_spec_teams(sched_cluster *c, const spec_cluster *s, diag_list *d)
{
    for (size_t i = 0; i < s->n_teams; i++) {
        const spec_team *st = &s->teams[i];
        int t = sched_cluster_add_team(c, st->name);
        if (t < 0) {
            char path[64];
            snprintf(path, sizeof path, "spec.teams[%zu]", i);
            spec_error(d, s, path, c->error, "give each team one entry");
            continue;
        }
        c->teams[t].weight = st->weight > 0 ? st->weight : 1;
        c->teams[t].budget = st->budget_per_month;
        c->teams[t].max_jobs = st->max_concurrent_jobs;
        quota_list(c, s, t, st->quota, st->n_quota, 0, i, d);
        quota_list(c, s, t, st->borrowing_limit, st->n_borrowing_limit, 1, i, d);
        quota_list(c, s, t, st->lending_limit, st->n_lending_limit, 2, i, d);
        /* A team with a quota for some types only gets 0 for the others
         * (it may still borrow them), unless it has an "any type" quota. */
        sched_team *tm = &c->teams[t];
        if (tm->limited && tm->quota[c->n_types] == SCHED_UNLIMITED)
            for (int k = 0; k < c->n_types; k++)
                if (tm->quota[k] == SCHED_UNLIMITED) tm->quota[k] = 0;
    }
}

static sched_node_state node_state(spec_node_state s)
{
    return s == NODE_READY ? SCHED_NODE_READY
         : s == NODE_DRAINING ? SCHED_NODE_DRAINING
                              : SCHED_NODE_DOWN;
}

static void add_spec_nodes(sched_cluster *c, const spec_cluster *s, diag_list *d)
{
    for (size_t i = 0; i < s->n_nodes; i++) {
        const spec_node *n = &s->nodes[i];
        if (!n->gpu_type || n->gpus <= 0) continue; /* CPU-only: nothing to schedule */
        char path[96];
        snprintf(path, sizeof path, "spec.nodes[%zu] (%s)", i, n->name ? n->name : "?");
        int type = sched_cluster_find_type(c, n->gpu_type);
        if (type < 0) {
            char msg[200];
            snprintf(msg, sizeof msg, "unknown GPU type '%s'", n->gpu_type);
            spec_error(d, s, path, msg, "use a name from spec.gpuTypes");
            continue;
        }
        if (sched_cluster_add_node(c, n->name, n->rack, type, n->gpus, n->nvlink_group,
                                   node_state(n->state)) < 0)
            spec_error(d, s, path, c->error, NULL);
    }
}

sched_cluster *sched_cluster_from_spec(const spec_cluster *s, diag_list *d)
{
    size_t errors = d->errors;
    sched_cluster *c = sched_cluster_new();
    for (size_t i = 0; i < s->n_gpu_types; i++) {
        const spec_gpu_type *g = &s->gpu_types[i];
        if (sched_cluster_add_type(c, g->name, g->memory, g->price_per_hour) < 0) {
            char path[64];
            snprintf(path, sizeof path, "spec.gpuTypes[%zu]", i);
            spec_error(d, s, path, c->error, NULL);
        }
    }
    add_spec_nodes(c, s, d);
    add_spec_teams(c, s, d);
    for (size_t i = 0; i < s->n_priority_classes; i++) {
        const spec_priority_class *p = &s->priority_classes[i];
        if (sched_cluster_add_priority(c, p->name, p->value, p->preempt_lower, p->global_default) < 0) {
            char path[64];
            snprintf(path, sizeof path, "spec.priorityClasses[%zu]", i);
            spec_error(d, s, path, c->error, NULL);
        }
    }
    if (c->n_gpus == 0 && d->errors == errors)
        spec_error(d, s, "spec.nodes", "the cluster has no GPU nodes",
                   "add nodes or nodeGroups with a gpuType and a GPU count");
    if (d->errors != errors) {
        sched_cluster_free(c);
        return NULL;
    }
    return c;
}
