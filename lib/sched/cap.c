/* cap.c: the capacity index. It knows, for every GPU, how many jobs hold it
 * and how much of it they use, and keeps counts and bitsets of free GPUs by
 * node, NVLink group, rack and GPU type, bucketed by how many GPUs are free,
 * so that:
 *
 *   - "does a job of g GPUs x r replicas fit on type t" is a sum over at
 *     most K+1 buckets (K = most GPUs on one node), exact;
 *   - best fit ("the node with the fewest free GPUs that still holds g") is
 *     a scan of the buckets from g upwards, each a bitset search;
 *   - first fit ("the lowest node with at least g free") is one bitset search.
 *
 * Nodes are laid out by (GPU type, rack, index) so that a type and a rack
 * of one type are contiguous ranges of positions. Two views of "free": all
 * free GPUs, and free GPUs not reserved for the head job (EASY backfill).
 */
#include "sched_internal.h"

#include <stdlib.h>
#include <string.h>

#define SCAN_LIMIT 16 /* nodes of one bucket examined for an NVLink-group fit */
#define END_SCAN_LIMIT 256 /* nodes examined for a placement by end time */

/* ---- layout ---- */

typedef struct { int type, rack, node; } node_key;

static int cmp_node_key(const void *a, const void *b)
{
    const node_key *x = a, *y = b;
    if (x->type != y->type) return x->type < y->type ? -1 : 1;
    if (x->rack != y->rack) return x->rack < y->rack ? -1 : 1;
    return (x->node > y->node) - (x->node < y->node);
}

static void layout(cap *k)
{
    const sched_cluster *c = k->c;
    node_key *keys = xmalloc((size_t)(k->nnodes + 1) * sizeof *keys);
    for (int i = 0; i < k->nnodes; i++) keys[i] = (node_key){c->nodes[i].type, c->nodes[i].rack, i};
    qsort(keys, (size_t)k->nnodes, sizeof *keys, cmp_node_key);

    k->node_pos = xmalloc((size_t)(k->nnodes + 1) * sizeof(int));
    k->pos_node = xmalloc((size_t)(k->nnodes + 1) * sizeof(int));
    k->node_rs = xmalloc((size_t)(k->nnodes + 1) * sizeof(int));
    k->rs_lo = xmalloc((size_t)(k->nnodes + 1) * sizeof(int));
    k->rs_hi = xmalloc((size_t)(k->nnodes + 1) * sizeof(int));
    k->rs_type = xmalloc((size_t)(k->nnodes + 1) * sizeof(int));
    k->rs_rack = xmalloc((size_t)(k->nnodes + 1) * sizeof(int));
    k->tlo = xcalloc((size_t)k->ntypes + 1, sizeof(int));
    k->thi = xcalloc((size_t)k->ntypes + 1, sizeof(int));
    k->trs_lo = xcalloc((size_t)k->ntypes + 1, sizeof(int));
    k->trs_hi = xcalloc((size_t)k->ntypes + 1, sizeof(int));
    k->tglo = xcalloc((size_t)k->ntypes + 1, sizeof(int));
    k->tghi = xcalloc((size_t)k->ntypes + 1, sizeof(int));
    k->gpu_pos = xmalloc((size_t)(k->ngpus + 1) * sizeof(int));
    k->pos_gpu = xmalloc((size_t)(k->ngpus + 1) * sizeof(int));

    k->nrs = 0;
    int gp = 0;
    for (int p = 0; p < k->nnodes; p++) {
        int n = keys[p].node, t = keys[p].type;
        k->node_pos[n] = p;
        k->pos_node[p] = n;
        if (p == 0 || keys[p - 1].type != t || keys[p - 1].rack != keys[p].rack) {
            k->rs_lo[k->nrs] = p;
            k->rs_type[k->nrs] = t;
            k->rs_rack[k->nrs] = keys[p].rack;
            k->nrs++;
        }
        k->rs_hi[k->nrs - 1] = p + 1;
        k->node_rs[n] = k->nrs - 1;
        const sched_node *nd = &c->nodes[n];
        for (int i = 0; i < nd->n_gpus; i++) {
            k->gpu_pos[nd->first_gpu + i] = gp;
            k->pos_gpu[gp++] = nd->first_gpu + i;
        }
    }
    /* per-type ranges (types without nodes get empty ranges) */
    for (int t = 0; t < k->ntypes; t++) k->tlo[t] = k->thi[t] = k->trs_lo[t] = k->trs_hi[t] = 0;
    for (int t = 0, p = 0, rs = 0, g = 0; t < k->ntypes; t++) {
        k->tlo[t] = p;
        k->trs_lo[t] = rs;
        k->tglo[t] = g;
        while (p < k->nnodes && keys[p].type == t) g += c->nodes[keys[p++].node].n_gpus;
        while (rs < k->nrs && k->rs_type[rs] == t) rs++;
        k->thi[t] = p;
        k->trs_hi[t] = rs;
        k->tghi[t] = g;
    }
    free(keys);
}

/* ---- views ---- */

static void view_init(cap *k, cap_view *v)
{
    int K1 = k->K + 1;
    v->nfree = xcalloc((size_t)k->nnodes + 1, sizeof(int));
    v->gfree = xcalloc((size_t)k->ngroups + 1, sizeof(int));
    v->cnt = xcalloc((size_t)(k->ntypes * K1) + 1, sizeof(int));
    v->rcnt = xcalloc((size_t)(k->nrs * K1) + 1, sizeof(int));
    v->tfree = xcalloc((size_t)k->ntypes + 1, sizeof(int));
    v->neq = xmalloc((size_t)K1 * sizeof(bset));
    v->nge = xmalloc((size_t)K1 * sizeof(bset));
    for (int i = 0; i < K1; i++) {
        bset_init(&v->neq[i], k->nnodes);
        bset_init(&v->nge[i], k->nnodes);
    }
    /* every node starts with 0 free; GPUs are freed below */
    for (int n = 0; n < k->nnodes; n++) {
        v->cnt[k->c->nodes[n].type * K1]++;
        v->rcnt[k->node_rs[n] * K1]++;
    }
}

static void view_free(cap *k, cap_view *v)
{
    for (int i = 0; i <= k->K; i++) {
        bset_free(&v->neq[i]);
        bset_free(&v->nge[i]);
    }
    free(v->neq);
    free(v->nge);
    free(v->nfree);
    free(v->gfree);
    free(v->cnt);
    free(v->rcnt);
    free(v->tfree);
}

/* A node's free count in view v changes by d (+1 or -1) through GPU `gpu`. */
static void node_delta(cap *k, cap_view *v, int gpu, int d)
{
    const sched_cluster *c = k->c;
    int n = c->gpu_node[gpu], t = c->nodes[n].type, K1 = k->K + 1, pos = k->node_pos[n];
    int old = v->nfree[n], now = old + d;
    v->nfree[n] = now;
    v->gfree[c->gpu_group[gpu]] += d;
    v->tfree[t] += d;
    v->total += d;
    v->cnt[t * K1 + old]--;
    v->cnt[t * K1 + now]++;
    v->rcnt[k->node_rs[n] * K1 + old]--;
    v->rcnt[k->node_rs[n] * K1 + now]++;
    if (old > 0) bset_clear(&v->neq[old], pos);
    if (now > 0) bset_set(&v->neq[now], pos);
    if (d > 0)
        bset_set(&v->nge[now], pos);
    else
        bset_clear(&v->nge[old], pos);
}

/* ---- per-GPU state ---- */

static bool whole_free(const cap *k, int view, int gpu)
{
    uint8_t f = k->flags[gpu];
    return !(f & CAP_F_DOWN) && k->jobs[gpu] == 0 && !(view == CAP_UNRESERVED && (f & CAP_F_RESV));
}

bool cap_gpu_free(const cap *k, int view, int gpu)
{
    return whole_free(k, view, gpu);
}

static bool share_open(const cap *k, int gpu)
{
    uint8_t f = k->flags[gpu];
    return !(f & (CAP_F_DOWN | CAP_F_EXCL)) && k->jobs[gpu] > 0 && k->jobs[gpu] < k->share_limit &&
           k->used[gpu] < SCHED_SHARE_WHOLE;
}

static void share_index(cap *k, int gpu, int d)
{
    int lvl = SCHED_SHARE_WHOLE - k->used[gpu];
    int t = k->c->nodes[k->c->gpu_node[gpu]].type;
    k->scnt[t * (SCHED_SHARE_WHOLE + 1) + lvl] += d;
    k->nopen += d;
    if (d > 0)
        bset_set(&k->seq[lvl], k->gpu_pos[gpu]);
    else
        bset_clear(&k->seq[lvl], k->gpu_pos[gpu]);
}

/* Sets a GPU's state and keeps every index in step. */
static void gpu_update(cap *k, int gpu, int jobs, int used, uint8_t flags)
{
    bool f0 = whole_free(k, 0, gpu), f1 = whole_free(k, 1, gpu), so = share_open(k, gpu);
    if (so) share_index(k, gpu, -1);
    k->jobs[gpu] = (uint8_t)jobs;
    k->used[gpu] = (uint8_t)used;
    k->flags[gpu] = flags;
    bool n0 = whole_free(k, 0, gpu), n1 = whole_free(k, 1, gpu);
    if (f0 != n0) node_delta(k, &k->v[0], gpu, n0 ? 1 : -1);
    if (f1 != n1) node_delta(k, &k->v[1], gpu, n1 ? 1 : -1);
    if (share_open(k, gpu)) share_index(k, gpu, +1);
}

void cap_init(cap *k, const sched_cluster *c, int share_limit)
{
    memset(k, 0, sizeof *k);
    k->c = c;
    k->K = c->max_node_gpus > 0 ? c->max_node_gpus : 1;
    k->ntypes = c->n_types;
    k->nnodes = c->n_nodes;
    k->ngroups = c->n_groups;
    k->ngpus = c->n_gpus;
    k->share_limit = share_limit < 1 ? 1 : share_limit > 255 ? 255 : share_limit;
    layout(k);
    k->jobs = xcalloc((size_t)k->ngpus + 1, 1);
    k->used = xcalloc((size_t)k->ngpus + 1, 1);
    k->flags = xcalloc((size_t)k->ngpus + 1, 1);
    k->gend = xcalloc((size_t)k->ngpus + 1, sizeof *k->gend);
    k->scnt = xcalloc((size_t)(k->ntypes * (SCHED_SHARE_WHOLE + 1)) + 1, sizeof(int));
    k->seq = xmalloc((SCHED_SHARE_WHOLE + 1) * sizeof(bset));
    for (int i = 0; i <= SCHED_SHARE_WHOLE; i++) bset_init(&k->seq[i], k->ngpus);
    view_init(k, &k->v[0]);
    view_init(k, &k->v[1]);
    /* GPUs start "held" (jobs = 0 but DOWN), then ready ones are released */
    for (int g = 0; g < k->ngpus; g++) k->flags[g] = CAP_F_DOWN;
    for (int g = 0; g < k->ngpus; g++)
        if (c->nodes[c->gpu_node[g]].state == SCHED_NODE_READY) gpu_update(k, g, 0, 0, 0);
}

void cap_free(cap *k)
{
    view_free(k, &k->v[0]);
    view_free(k, &k->v[1]);
    for (int i = 0; i <= SCHED_SHARE_WHOLE; i++) bset_free(&k->seq[i]);
    free(k->seq);
    free(k->scnt);
    free(k->jobs);
    free(k->used);
    free(k->flags);
    free(k->gend);
    free(k->node_pos);
    free(k->pos_node);
    free(k->node_rs);
    free(k->rs_lo);
    free(k->rs_hi);
    free(k->rs_type);
    free(k->rs_rack);
    free(k->tlo);
    free(k->thi);
    free(k->trs_lo);
    free(k->trs_hi);
    free(k->tglo);
    free(k->tghi);
    free(k->gpu_pos);
    free(k->pos_gpu);
    memset(k, 0, sizeof *k);
}

bool cap_take(cap *k, int gpu, int units, bool excl)
{
    int jobs = k->jobs[gpu], used = k->used[gpu];
    uint8_t f = k->flags[gpu];
    if (excl) {
        if (jobs) return false;
        gpu_update(k, gpu, 1, SCHED_SHARE_WHOLE, f | CAP_F_EXCL);
        return true;
    }
    if ((f & CAP_F_EXCL) || jobs >= k->share_limit || used + units > SCHED_SHARE_WHOLE) return false;
    gpu_update(k, gpu, jobs + 1, used + units, f);
    return true;
}

void cap_give(cap *k, int gpu, int units, bool excl)
{
    uint8_t f = k->flags[gpu];
    k->gend[gpu] = 0;
    if (excl)
        gpu_update(k, gpu, 0, 0, f & (uint8_t)~CAP_F_EXCL);
    else
        gpu_update(k, gpu, k->jobs[gpu] - 1, k->used[gpu] - units, f);
}

void cap_set_down(cap *k, int gpu, bool on)
{
    uint8_t f = k->flags[gpu];
    uint8_t nf = on ? (uint8_t)(f | CAP_F_DOWN) : (uint8_t)(f & ~CAP_F_DOWN);
    if (nf != f) gpu_update(k, gpu, k->jobs[gpu], k->used[gpu], nf);
}

void cap_set_reserved(cap *k, int gpu, bool on)
{
    uint8_t f = k->flags[gpu];
    uint8_t nf = on ? (uint8_t)(f | CAP_F_RESV) : (uint8_t)(f & ~CAP_F_RESV);
    if (nf != f) gpu_update(k, gpu, k->jobs[gpu], k->used[gpu], nf);
}

/* ---- fit checks ---- */

int cap_slots(const cap *k, int view, int type, int g)
{
    if (g < 1 || g > k->K) return 0;
    const int *cnt = &k->v[view].cnt[type * (k->K + 1)];
    int s = 0;
    for (int f = g; f <= k->K; f++) s += cnt[f] * (f / g);
    return s;
}

bool cap_fits_whole(const cap *k, int view, int type, int g, int r)
{
    if (g < 1 || g > k->K) return false;
    if (r == 1) {
        const int *cnt = &k->v[view].cnt[type * (k->K + 1)];
        for (int f = g; f <= k->K; f++)
            if (cnt[f]) return true;
        return false;
    }
    return k->v[view].tfree[type] >= g * r && cap_slots(k, view, type, g) >= r;
}

bool cap_fits_share(const cap *k, int view, int type, int units)
{
    const int *s = &k->scnt[type * (SCHED_SHARE_WHOLE + 1)];
    for (int l = units; l < SCHED_SHARE_WHOLE; l++)
        if (s[l]) return true;
    return k->v[view].tfree[type] > 0;
}

int cap_largest(const cap *k, int view, int type, int *node)
{
    const cap_view *v = &k->v[view];
    const int *cnt = &v->cnt[type * (k->K + 1)];
    for (int f = k->K; f > 0; f--)
        if (cnt[f]) {
            int p = bset_next(&v->neq[f], k->tlo[type], k->thi[type]);
            if (node) *node = p >= 0 ? k->pos_node[p] : -1;
            return f;
        }
    if (node) *node = -1;
    return 0;
}

/* ---- placement ---- */

/* True when one of the node's NVLink groups has g free GPUs in the view. */
static bool group_fits(const cap *k, const cap_view *v, int node, int g)
{
    const sched_node *nd = &k->c->nodes[node];
    for (int i = 0; i < nd->n_groups; i++)
        if (v->gfree[nd->first_group + i] >= g) return true;
    return false;
}

/* Best fit in node positions [lo, hi): a node whose NVLink group holds g,
 * with the fewest free GPUs; else the node with the fewest free GPUs. */
static int best_node(const cap *k, const cap_view *v, int type, int lo, int hi, int g)
{
    const int *cnt = &v->cnt[type * (k->K + 1)];
    bool whole_range = lo == k->tlo[type] && hi == k->thi[type];
    int fallback = -1;
    for (int f = g; f <= k->K; f++) {
        if (whole_range && !cnt[f]) continue;
        int seen = 0;
        for (int p = bset_next(&v->neq[f], lo, hi); p >= 0 && seen < SCAN_LIMIT;
             p = bset_next(&v->neq[f], p + 1, hi), seen++) {
            int n = k->pos_node[p];
            if (group_fits(k, v, n, g)) return n;
            if (fallback < 0) fallback = n;
        }
    }
    return fallback;
}

/* The NVLink group of a node to take GPUs from: the one with the fewest
 * free GPUs that still holds `need`, else the one with the most free. */
static int pick_group(const cap_view *v, const sched_node *nd, int need)
{
    int fit = -1, most = -1;
    for (int i = 0; i < nd->n_groups; i++) {
        int gi = nd->first_group + i, f = v->gfree[gi];
        if (f <= 0) continue;
        if (f >= need && (fit < 0 || f < v->gfree[fit])) fit = gi;
        if (most < 0 || f > v->gfree[most]) most = gi;
    }
    return fit >= 0 ? fit : most;
}

/* Takes g free GPUs of a node. best: group by group as pick_group says;
 * not best: the lowest-numbered free GPUs. */
static void take_on_node(cap *k, int view, int node, int g, bool best, int *out)
{
    const sched_node *nd = &k->c->nodes[node];
    const cap_view *v = &k->v[view];
    int got = 0;
    while (got < g) {
        int grp = best ? pick_group(v, nd, g - got) : -1;
        for (int i = 0; i < nd->n_gpus && got < g; i++) {
            int gpu = nd->first_gpu + i;
            if ((grp < 0 || k->c->gpu_group[gpu] == grp) && whole_free(k, view, gpu)) {
                cap_take(k, gpu, SCHED_SHARE_WHOLE, true);
                out[got++] = gpu;
            }
        }
    }
}

/* Lathe's gang placement over several nodes: inside the rack whose free
 * replica slots fit best, else across the racks with the most slots first. */
static void place_racks(cap *k, int view, int type, int g, int r, int *out)
{
    const cap_view *v = &k->v[view];
    int K1 = k->K + 1, lo = k->trs_lo[type], hi = k->trs_hi[type], n = hi - lo;
    int *slots = xmalloc((size_t)(n + 1) * sizeof(int));
    int *order = xmalloc((size_t)(n + 1) * sizeof(int));
    int best = -1;
    for (int i = 0; i < n; i++) {
        const int *rc = &v->rcnt[(lo + i) * K1];
        slots[i] = 0;
        for (int f = g; f <= k->K; f++) slots[i] += rc[f] * (f / g);
        order[i] = i;
        if (slots[i] >= r && (best < 0 || slots[i] < slots[best])) best = i;
    }
    if (best >= 0) {
        order[0] = best;
        n = 1;
    } else {
        /* most slots first (stable by index: insertion sort, n is small) */
        for (int i = 1; i < n; i++)
            for (int j = i; j > 0 && slots[order[j]] > slots[order[j - 1]]; j--) {
                int t = order[j];
                order[j] = order[j - 1];
                order[j - 1] = t;
            }
    }
    for (int rep = 0, at = 0; rep < r; rep++) {
        while (slots[order[at]] == 0) at++;
        int rs = lo + order[at];
        int node = best_node(k, v, type, k->rs_lo[rs], k->rs_hi[rs], g);
        take_on_node(k, view, node, g, true, out + rep * g);
        slots[order[at]]--;
    }
    free(slots);
    free(order);
}

bool cap_place_whole(cap *k, int view, int type, int g, int r, bool best, int *out)
{
    if (!cap_fits_whole(k, view, type, g, r)) return false;
    const cap_view *v = &k->v[view];
    if (!best) {
        for (int rep = 0; rep < r; rep++) {
            int p = bset_next(&v->nge[g], k->tlo[type], k->thi[type]);
            take_on_node(k, view, k->pos_node[p], g, false, out + rep * g);
        }
        return true;
    }
    if (r == 1 || (g * r <= k->K && cap_fits_whole(k, view, type, g * r, 1))) {
        int node = best_node(k, v, type, k->tlo[type], k->thi[type], g * r);
        for (int rep = 0; rep < r; rep++) take_on_node(k, view, node, g, true, out + rep * g);
        return true;
    }
    place_racks(k, view, type, g, r, out);
    return true;
}

void cap_set_end(cap *k, int gpu, double end)
{
    if (k->flags[gpu] & CAP_F_EXCL) k->gend[gpu] = end;
}

/* When a node's whole-GPU jobs end, by their estimates (0: none runs). */
static double node_release(const cap *k, int node)
{
    const sched_node *nd = &k->c->nodes[node];
    double r = 0;
    for (int i = 0; i < nd->n_gpus; i++)
        if (k->gend[nd->first_gpu + i] > r) r = k->gend[nd->first_gpu + i];
    return r;
}

/* A candidate node for cap_place_end and how good it is. */
typedef struct end_fit {
    int node;
    bool group; /* one NVLink group holds the job */
    double ext; /* how much later the node would be busy until */
    int free;
} end_fit;

static bool end_fit_better(const end_fit *a, const end_fit *b)
{
    if (b->node < 0) return true;
    if (a->group != b->group) return a->group;
    if (a->ext != b->ext) return a->ext < b->ext;
    return a->free < b->free;
}

bool cap_place_end(cap *k, int view, int type, int g, int r, double now, double end, int *out)
{
    int need = g * r;
    if (need > k->K || !cap_fits_whole(k, view, type, need, 1)) return false;
    const cap_view *v = &k->v[view];
    const int *cnt = &v->cnt[type * (k->K + 1)];
    end_fit best = {-1, false, 0, 0};
    int seen = 0;
    /* nodes that already run something, fewest free first; an empty node
     * only when none holds the job (taking one costs a whole free node) */
    for (int f = need; f <= k->K && seen < END_SCAN_LIMIT; f++) {
        if (!cnt[f] || (f == k->K && best.node >= 0)) continue;
        for (int p = bset_next(&v->neq[f], k->tlo[type], k->thi[type]); p >= 0 && seen < END_SCAN_LIMIT;
             p = bset_next(&v->neq[f], p + 1, k->thi[type]), seen++) {
            int n = k->pos_node[p];
            double busy = node_release(k, n);
            if (busy < now) busy = now;
            end_fit c = {n, group_fits(k, v, n, g), end > busy ? end - busy : 0, f};
            if (end_fit_better(&c, &best)) best = c;
            if (f == k->K) break; /* empty nodes are all alike */
        }
    }
    for (int rep = 0; rep < r; rep++) take_on_node(k, view, best.node, g, true, out + rep * g);
    return true;
}

bool cap_place_share(cap *k, int view, int type, int units, int *out)
{
    const int *s = &k->scnt[type * (SCHED_SHARE_WHOLE + 1)];
    for (int l = units; l < SCHED_SHARE_WHOLE; l++) {
        if (!s[l]) continue;
        int p = bset_next(&k->seq[l], k->tglo[type], k->tghi[type]);
        int gpu = k->pos_gpu[p];
        cap_take(k, gpu, units, false);
        *out = gpu;
        return true;
    }
    const cap_view *v = &k->v[view];
    if (!v->tfree[type]) return false;
    int node = best_node(k, v, type, k->tlo[type], k->thi[type], 1);
    /* the free GPU in the NVLink group with the fewest free GPUs */
    const sched_node *nd = &k->c->nodes[node];
    int pick = -1;
    for (int i = 0; i < nd->n_gpus; i++) {
        int gpu = nd->first_gpu + i;
        if (!whole_free(k, view, gpu)) continue;
        if (pick < 0 || v->gfree[k->c->gpu_group[gpu]] < v->gfree[k->c->gpu_group[pick]]) pick = gpu;
    }
    cap_take(k, pick, units, false);
    *out = pick;
    return true;
}
