/* reason.c: decisions as data (the result buffer) and as sentences a person
 * understands ("team-a uses 32/32 A100-80GB GPUs of its quota and may not
 * borrow more; this job needs 4"). */
#include "sched_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void sched_result_init(sched_result *r)
{
    memset(r, 0, sizeof *r);
}

void sched_result_free(sched_result *r)
{
    free(r->d);
    free(r->gpus);
    memset(r, 0, sizeof *r);
}

const int *sched_decision_gpus(const sched_result *r, const sched_decision *d)
{
    return r->gpus + d->gpu_off;
}

sched_decision *res_add(sched_result *r, sched_action a, uint64_t job, const char *name)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 64;
        r->d = xrealloc(r->d, r->cap * sizeof *r->d);
    }
    sched_decision *d = &r->d[r->n++];
    memset(d, 0, sizeof *d);
    d->action = a;
    d->job = job;
    d->name = name;
    d->type = -1;
    d->why.team = d->why.type = d->why.node = -1;
    return d;
}

size_t res_add_gpus(sched_result *r, const int *gpus, int n)
{
    if (r->n_gpus + (size_t)n > r->cap_gpus) {
        while (r->n_gpus + (size_t)n > r->cap_gpus) r->cap_gpus = r->cap_gpus ? r->cap_gpus * 2 : 256;
        r->gpus = xrealloc(r->gpus, r->cap_gpus * sizeof *r->gpus);
    }
    size_t off = r->n_gpus;
    if (n > 0) memcpy(r->gpus + off, gpus, (size_t)n * sizeof *gpus);
    r->n_gpus += (size_t)n;
    return off;
}

const char *sched_action_name(sched_action a)
{
    static const char *const names[] = {"start", "preempt", "wait", "reject"};
    return (unsigned)a < 4 ? names[a] : "?";
}

/* ---- sentences ---- */

static const char *team_name(const sched_cluster *c, int t)
{
    return t >= 0 && t < c->n_teams ? c->teams[t].name : "its team";
}

/* "A100-80GB GPUs", or "GPUs" when the type is not known. */
static void gpus_of(const sched_cluster *c, int type, sb *out)
{
    if (type >= 0 && type < c->n_types)
        sb_printf(out, "%s GPUs", c->types[type].name);
    else
        sb_puts(out, "GPUs");
}

static void other_job(const sched_reason *r, sb *out)
{
    if (r->other_name)
        sb_printf(out, "%s", r->other_name);
    else
        sb_printf(out, "job %llu", (unsigned long long)r->other);
}

static void in_time(double when, double now, sb *out)
{
    char d[32];
    if (!isfinite(when)) {
        sb_puts(out, "no known time");
        return;
    }
    if (when - now < 1) {
        sb_puts(out, "now");
        return;
    }
    units_format_duration(d, sizeof d, when - now);
    sb_printf(out, "in %s", d);
}

static void fmt_quota(const sched_cluster *c, const sched_reason *r, sb *out)
{
    sb_printf(out, "%s uses %d/%d ", team_name(c, r->team), r->used, r->limit);
    gpus_of(c, r->type, out);
    if (r->type < 0) sb_puts(out, " (any type)");
    if (r->free > 0)
        sb_printf(out, " of its quota and may borrow at most %d more; this job needs %d", r->free, r->need);
    else
        sb_printf(out, " of its quota and may not borrow; this job needs %d", r->need);
}

static void fmt_pool(const sched_cluster *c, const sched_reason *r, sb *out)
{
    sb_printf(out, "%s uses %d ", team_name(c, r->team), r->used);
    gpus_of(c, r->type, out);
    sb_printf(out, " (quota %d); this job needs %d, beyond its quota, but other teams have ",
              r->limit, r->need);
    if (r->free > 0)
        sb_printf(out, "only %d idle GPU%s of quota to lend", r->free, r->free == 1 ? "" : "s");
    else
        sb_puts(out, "no idle quota to lend");
}

static void fmt_no_fit(const sched_cluster *c, const sched_reason *r, sb *out)
{
    const char *tn = r->type >= 0 ? c->types[r->type].name : "";
    if (r->share > 0 && r->share < SCHED_SHARE_WHOLE) {
        sb_printf(out, "needs %d%% of one %s GPU; no shared GPU has that much room and no %s GPU is free",
                  r->share, tn, tn);
        return;
    }
    if (r->need > 1) {
        sb_printf(out, "needs %d replicas x %d %s GPUs (each replica on one node); ", r->need, r->per, tn);
        sb_printf(out, "only %d such slot%s free, %d %s GPUs free in all", r->nodes,
                  r->nodes == 1 ? " is" : "s are", r->free, tn);
        return;
    }
    sb_printf(out, "needs %d %s GPU%s on one node; ", r->per, tn, r->per == 1 ? "" : "s");
    if (r->free == 0) {
        sb_printf(out, "all %s GPUs are busy", tn);
        return;
    }
    sb_printf(out, "%d %s free", r->free, r->free == 1 ? "is" : "are");
    if (r->node >= 0) {
        sb_printf(out, " but at most %d on one node (%s", r->best, c->nodes[r->node].name);
        if (r->groups > 1) sb_printf(out, ", split across %d NVLink groups", r->groups);
        sb_puts(out, ")");
    }
}

static void fmt_reject(const sched_cluster *c, const sched_reason *r, sb *out)
{
    const char *tn = r->type >= 0 ? c->types[r->type].name : "";
    char mem[32];
    switch (r->code) {
    case SCHED_WHY_TOO_BIG:
        sb_printf(out, "asks for %d GPUs but the cluster has only %d %s GPUs", r->need, r->free, tn);
        break;
    case SCHED_WHY_NODE_TOO_SMALL:
        sb_printf(out, "asks for %d GPUs per replica (on one node) but the largest %s node has %d",
                  r->per, tn, r->best);
        break;
    case SCHED_WHY_NO_TYPE:
        units_format_bytes(mem, sizeof mem, r->amount);
        sb_printf(out, "no allowed GPU type has the %s of memory it needs per GPU", mem);
        break;
    case SCHED_WHY_OVER_QUOTA:
        sb_printf(out, "asks for %d ", r->need);
        gpus_of(c, r->type, out);
        sb_printf(out, " but %s may never hold more than %d (quota %d plus its borrowing limit)",
                  team_name(c, r->team), r->limit, r->used);
        break;
    default:
        sb_puts(out, "invalid job: its team, replicas, GPUs per replica or GPU share is out of range");
        break;
    }
}

static void fmt_preempt(const sched_cluster *c, const sched_reason *r, sb *out)
{
    char lost[32];
    units_format_duration(lost, sizeof lost, r->amount > 1 ? r->amount : 1);
    if (r->code == SCHED_WHY_PREEMPT_PRIORITY) {
        sb_puts(out, "preempted for ");
        other_job(r, out);
        sb_printf(out, " (priority %lld)", (long long)r->priority);
    } else if (r->code == SCHED_WHY_PREEMPT_DUE) {
        sb_puts(out, "preempted for ");
        other_job(r, out);
        sb_puts(out, ", which has waited longest; this loses less work than emptying GPUs for it");
    } else {
        sb_printf(out, "preempted: %s reclaims the ", team_name(c, r->team));
        gpus_of(c, r->type, out);
        sb_puts(out, " it lent, for ");
        other_job(r, out);
    }
    if (r->amount > 0)
        sb_printf(out, "; loses %s GPU-time of work since its last checkpoint", lost);
    else
        sb_puts(out, "; loses no work (it just checkpointed)");
}

/* "<before><the head><after><when it is reserved to start>)" */
static void head_start(const sched_reason *r, double now, const char *before, const char *after, sb *out)
{
    sb_puts(out, before);
    other_job(r, out);
    sb_puts(out, after);
    in_time(r->when, now, out);
    sb_puts(out, ")");
}

void sched_reason_format(const sched_cluster *c, const sched_reason *r, double now, sb *out)
{
    switch (r->code) {
    case SCHED_WHY_NONE: sb_puts(out, "no reason recorded"); break;
    case SCHED_WHY_FITS: sb_puts(out, "fits now"); break;
    case SCHED_WHY_BACKFILL:
        head_start(r, now, "starts ahead of ", " without delaying its reserved start (", out);
        break;
    case SCHED_WHY_TAIL:
        head_start(r, now, "would end after every other job, so it starts now on GPUs reserved for ",
                   ", which still fits beside it (reserved start now ", out);
        break;
    case SCHED_WHY_AFTER_PREEMPT: sb_puts(out, "starts on GPUs freed by preemption"); break;
    case SCHED_WHY_QUOTA: fmt_quota(c, r, out); break;
    case SCHED_WHY_POOL: fmt_pool(c, r, out); break;
    case SCHED_WHY_BUDGET: { /* cents when the budget is small */
        int d = r->limit_amount < 100 ? 2 : 0;
        sb_printf(out, "%s has spent %.*f of its budget of %.*f this month", team_name(c, r->team),
                  d, r->amount, d, r->limit_amount);
        break;
    }
    case SCHED_WHY_MAX_JOBS:
        sb_printf(out, "%s already runs %d job%s, its limit", team_name(c, r->team), r->used,
                  r->used == 1 ? "" : "s");
        break;
    case SCHED_WHY_NO_FIT:
        fmt_no_fit(c, r, out);
        if (r->when > 0) { /* rent-reserve: the reservation is not bought yet */
            sb_puts(out, "; it takes a reservation ");
            in_time(r->when, now, out);
            sb_printf(out, ", once its wait has paid for the %.*f GPU-hours that draining GPUs for it "
                           "would leave idle",
                      r->amount >= 360000 ? 0 : 1, r->amount / 3600);
        }
        break;
    case SCHED_WHY_RESERVED:
        sb_puts(out, "first in line: GPUs are reserved for it from ");
        in_time(r->when, now, out);
        sb_puts(out, ", when running jobs are expected to end");
        break;
    case SCHED_WHY_BEHIND_HEAD:
        sb_puts(out, "the free GPUs it could use are held for ");
        other_job(r, out);
        sb_puts(out, ", due to start ");
        in_time(r->when, now, out);
        sb_puts(out, ", and this job would still be running then");
        break;
    case SCHED_WHY_FIFO_BLOCKED:
        sb_puts(out, "waits behind ");
        other_job(r, out);
        sb_printf(out, ", the head of %s's queue (strict FIFO)", team_name(c, r->team));
        break;
    case SCHED_WHY_TEAM_HELD:
        sb_printf(out, "%s's quota is held for ", team_name(c, r->team));
        other_job(r, out);
        sb_puts(out, ", which has waited longest and needs it");
        break;
    case SCHED_WHY_NODES_DOWN:
        sb_puts(out, "the ");
        gpus_of(c, r->type, out);
        sb_puts(out, " it needs are on nodes that are not ready (draining or down)");
        break;
    case SCHED_WHY_TOO_BIG:
    case SCHED_WHY_NODE_TOO_SMALL:
    case SCHED_WHY_NO_TYPE:
    case SCHED_WHY_OVER_QUOTA:
    case SCHED_WHY_BAD_JOB: fmt_reject(c, r, out); break;
    case SCHED_WHY_PREEMPT_PRIORITY:
    case SCHED_WHY_PREEMPT_RECLAIM:
    case SCHED_WHY_PREEMPT_DUE: fmt_preempt(c, r, out); break;
    }
}
