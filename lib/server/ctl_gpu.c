/* ctl_gpu.c: what the GPUs do, as the controller sees it.
 *
 *   - NVML samples of this machine's GPUs (the node the inventory found,
 *     srv_cluster.nvml_node) every monitoring.sampleInterval: the latest
 *     of each GPU goes into the view (/metrics exports it under DCGM
 *     exporter's names, /v1/nodes shows it), and each job on those GPUs
 *     gets a row of its history in the store (utilisation averaged over
 *     its GPUs, the most memory one of them used, power summed, the
 *     hottest), with its average utilisation and peak memory kept in
 *     memory for /metrics. A shared GPU's figures are the whole GPU's:
 *     NVML does not split them by process here.
 *   - Fragmentation by GPU: after a pass, the fewest GPUs per replica a
 *     waiting job of each type needs; a ready node whose free GPUs are
 *     fewer than that has them marked fragmented (the scheduler counts
 *     them the same way for lathe_gpus{state="fragmented"}, also leaving
 *     out GPUs reserved for the head job).
 */
#include "ctl_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ctl_gpu_open(ctl *c)
{
    const srv_cluster *sc = &c->s->cluster;
    if (sc->nvml_node < 0 || !sc->sched) return;
    char note[256] = "";
    c->nvml = exec_nvml_open(note, sizeof note);
    if (!c->nvml) {
        ctl_log(c, "GPU monitoring is off: %s", note);
        return;
    }
    c->samples = xcalloc((size_t)sc->sched->n_gpus + 1, sizeof *c->samples);
    c->next_sample = 0;
    ctl_log(c, "sampling %zu GPUs of %s through NVML every %gs (%s)", exec_nvml_count(c->nvml),
            sc->sched->nodes[sc->nvml_node].name, c->s->cfg.spec->monitoring.sample_interval, note);
}

void ctl_gpu_close(ctl *c)
{
    exec_nvml_close(c->nvml);
    c->nvml = NULL;
    free(c->samples);
    c->samples = NULL;
}

/* A job's summary over its whole history, read once from the store. */
static void load_history(ctl *c, ctl_job *j)
{
    if (j->gpu_loaded) return;
    j->gpu_loaded = true;
    store_gpu_summary s;
    if (store_gpu_summary_get(c->st, j->id, &s) != STORE_OK || s.samples == 0) return;
    j->gpu_n = s.samples;
    j->gpu_util_sum = isnan(s.util_avg) ? 0 : s.util_avg * (double)s.samples;
    j->gpu_util_n = isnan(s.util_avg) ? 0 : s.samples;
    j->gpu_mem_peak = isnan(s.mem_peak) ? 0 : s.mem_peak;
}

/* The sample of job j's GPUs on this machine; false when none of them is
 * sampled. */
static bool job_sample(const ctl *c, const ctl_job *j, double now, store_gpu_sample *out)
{
    *out = (store_gpu_sample){j->id, j->attempt, now, 0, NAN, NAN, NAN, NAN, NAN};
    double util = 0, power = 0;
    int n_util = 0, n_power = 0;
    for (int k = 0; k < j->n_gpus; k++) {
        const exec_gpu_sample *s = &c->samples[j->gpus[k]];
        if (!s->ok) continue;
        out->gpus++;
        if (!isnan(s->util)) util += s->util, n_util++;
        if (!isnan(s->power)) power += s->power, n_power++;
        if (!isnan(s->mem_used) && !(s->mem_used <= out->mem_used)) {
            out->mem_used = s->mem_used;
            out->mem_total = s->mem_total;
        }
        if (!isnan(s->temp) && !(s->temp <= out->temp)) out->temp = s->temp;
    }
    if (n_util) out->util = util / n_util;
    if (n_power) out->power = power;
    return out->gpus > 0;
}

void ctl_gpu_sample(ctl *c, double now)
{
    if (!c->nvml || now < c->next_sample) return;
    c->next_sample = now + c->s->cfg.spec->monitoring.sample_interval;
    const sched_cluster *sc = c->s->cluster.sched;
    const sched_node *node = &sc->nodes[c->s->cluster.nvml_node];
    exec_gpu_sample *got = xcalloc((size_t)node->n_gpus + 1, sizeof *got);
    size_t n = exec_nvml_sample(c->nvml, got, (size_t)node->n_gpus);
    for (int k = 0; k < node->n_gpus; k++) c->samples[node->first_gpu + k].ok = false;
    for (size_t i = 0; i < n; i++)
        if (got[i].index >= 0 && got[i].index < node->n_gpus)
            c->samples[node->first_gpu + got[i].index] = got[i];
    free(got);
    c->sample_at = now;
    size_t np;
    ctl_job **placed = ctl_placed(c, &np);
    store_gpu_sample *rows = xcalloc(np + 1, sizeof *rows);
    size_t nr = 0;
    for (size_t i = 0; i < np; i++) {
        ctl_job *j = placed[i];
        if (!ctl_job_holds(j) || !j->n_gpus || !job_sample(c, j, now, &rows[nr])) continue;
        load_history(c, j);
        j->gpu_n++;
        if (!isnan(rows[nr].util)) j->gpu_util_sum += rows[nr].util, j->gpu_util_n++;
        if (rows[nr].mem_used > j->gpu_mem_peak) j->gpu_mem_peak = rows[nr].mem_used;
        nr++;
    }
    if (nr && store_gpu_samples_add(c->st, rows, nr) != STORE_OK)
        ctl_log(c, "cannot store GPU samples: %s", store_error(c->st));
    free(rows);
}

/* ---- fragmentation ---- */

void ctl_gpu_frag_need(ctl *c, const sched_result *res)
{
    const sched_cluster *sc = c->s->cluster.sched;
    if (!c->frag_need) c->frag_need = xcalloc((size_t)sc->n_types + 1, sizeof *c->frag_need);
    memset(c->frag_need, 0, (size_t)sc->n_types * sizeof *c->frag_need);
    for (size_t i = 0; i < res->n; i++) {
        const sched_decision *d = &res->d[i];
        if (d->action != SCHED_WAIT) continue;
        const ctl_job *j = ctl_find(c, (int64_t)d->job);
        if (!j || !j->loaded) continue;
        int g = j->shape.shared ? 1 : j->shape.per_replica;
        if (g < 1) continue;
        for (int t = 0; t < sc->n_types; t++)
            if ((j->shape.types >> t & 1) && (!c->frag_need[t] || g < c->frag_need[t]))
                c->frag_need[t] = g;
    }
}

/* ---- the view ---- */

static void view_frag(const ctl *c, ctl_view *v)
{
    const sched_cluster *sc = c->s->cluster.sched;
    v->frag_gpu = xcalloc((size_t)sc->n_gpus + 1, sizeof *v->frag_gpu);
    if (!c->frag_need) return;
    for (int n = 0; n < sc->n_nodes; n++) {
        const sched_node *node = &sc->nodes[n];
        int need = c->frag_need[node->type], free_ = 0;
        if (node->state != SCHED_NODE_READY || need <= 1) continue;
        for (int k = 0; k < node->n_gpus; k++) free_ += v->gpus[node->first_gpu + k].n == 0;
        if (free_ == 0 || free_ >= need) continue;
        for (int k = 0; k < node->n_gpus; k++)
            if (v->gpus[node->first_gpu + k].n == 0) v->frag_gpu[node->first_gpu + k] = true;
    }
}

void ctl_gpu_view(ctl *c, ctl_view *v)
{
    const sched_cluster *sc = c->s->cluster.sched;
    view_frag(c, v);
    if (!c->samples) return;
    v->samples = xcalloc((size_t)sc->n_gpus + 1, sizeof *v->samples);
    memcpy(v->samples, c->samples, (size_t)sc->n_gpus * sizeof *v->samples);
    v->sample_at = c->sample_at;
    size_t np;
    ctl_job **placed = ctl_placed(c, &np);
    v->job_gpu = xcalloc(np + 1, sizeof *v->job_gpu);
    for (size_t i = 0; i < np; i++) {
        const ctl_job *j = placed[i];
        if (!ctl_job_holds(j) || !j->gpu_n) continue;
        v->job_gpu[v->n_job_gpu++] = (ctl_view_job_gpu){
            xstrdup(j->name), xstrdup(j->team),
            j->gpu_util_n ? j->gpu_util_sum / (double)j->gpu_util_n : NAN, j->gpu_mem_peak,
            j->shape.gpu_memory > 0 ? j->shape.gpu_memory : NAN};
    }
}
