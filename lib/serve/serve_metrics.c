/* serve_metrics.c: GET /metrics, Prometheus' text exposition format
 * (version 0.0.4), every name prefixed lathe_serve_: requests by model and
 * status code, prompt and generated tokens, time to first token,
 * inter-token latency and request duration histograms (seconds), and the
 * engine's state (running and waiting requests, KV-cache blocks, adapters).
 * Histograms are lock-free atomics, so the engine thread's event callback
 * observes them without waiting; the request counters take a mutex on the
 * HTTP threads only. */
#include "serve_internal.h"

#include <stdlib.h>
#include <string.h>

/* vLLM's buckets, so dashboards written for it read these the same way */
static const double ttft_bounds[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25,
                                     0.5,   0.75,  1.0,  2.5,  5.0,  7.5,  10.0, 20.0, 40.0,
                                     80.0};
static const double itl_bounds[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,
                                    0.3,  0.4,   0.5,  0.75,  1.0, 2.5};
static const double e2e_bounds[] = {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0,
                                    20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0};

#define NB(a) ((int)(sizeof a / sizeof a[0]))

static void hist_init(sv_hist *h, const double *bounds, int n)
{
    memset(h, 0, sizeof *h);
    h->bounds = bounds;
    h->n = n;
}

void sv_metrics_init(sv_metrics *m)
{
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    hist_init(&m->ttft, ttft_bounds, NB(ttft_bounds));
    hist_init(&m->itl, itl_bounds, NB(itl_bounds));
    hist_init(&m->e2e, e2e_bounds, NB(e2e_bounds));
}

void sv_metrics_free(sv_metrics *m)
{
    for (size_t i = 0; i < m->n_reqs; i++) free(m->reqs[i].model);
    free(m->reqs);
    pthread_mutex_destroy(&m->mu);
}

void sv_hist_observe(sv_hist *h, int64_t ns)
{
    if (ns < 0) ns = 0;
    double s = (double)ns / 1e9;
    int b = 0;
    while (b < h->n && s > h->bounds[b]) b++;
    atomic_fetch_add(&h->counts[b], 1);
    atomic_fetch_add(&h->total, 1);
    atomic_fetch_add(&h->sum_ns, (uint64_t)ns);
}

void sv_metrics_request(sv_metrics *m, const char *model, int code)
{
    const char *name = model ? model : "";
    pthread_mutex_lock(&m->mu);
    size_t i = 0;
    while (i < m->n_reqs && !(m->reqs[i].code == code && strcmp(m->reqs[i].model, name) == 0))
        i++;
    if (i == m->n_reqs) {
        if (m->n_reqs == m->cap_reqs) {
            m->cap_reqs = m->cap_reqs ? 2 * m->cap_reqs : 16;
            m->reqs = xrealloc(m->reqs, m->cap_reqs * sizeof *m->reqs);
        }
        m->reqs[m->n_reqs++] = (sv_req_count){xstrdup(name), code, 0};
    }
    m->reqs[i].n++;
    pthread_mutex_unlock(&m->mu);
}

void sv_prom_label(sb *out, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\') sb_puts(out, "\\\\");
        else if (*v == '"') sb_puts(out, "\\\"");
        else if (*v == '\n') sb_puts(out, "\\n");
        else sb_putc(out, *v);
    }
}

static void head(sb *out, const char *name, const char *type, const char *help)
{
    sb_printf(out, "# HELP lathe_serve_%s %s\n# TYPE lathe_serve_%s %s\n", name, help, name, type);
}

static void scalar(sb *out, const char *name, const char *type, const char *help, double v)
{
    head(out, name, type, help);
    sb_printf(out, "lathe_serve_%s %.17g\n", name, v);
}

static void hist(sb *out, const char *name, const char *help, sv_hist *h)
{
    head(out, name, "histogram", help);
    uint64_t acc = 0;
    for (int b = 0; b <= h->n; b++) {
        acc += atomic_load(&h->counts[b]);
        if (b < h->n) sb_printf(out, "lathe_serve_%s_bucket{le=\"%g\"} %llu\n", name,
                                h->bounds[b], (unsigned long long)acc);
        else sb_printf(out, "lathe_serve_%s_bucket{le=\"+Inf\"} %llu\n", name,
                       (unsigned long long)acc);
    }
    sb_printf(out, "lathe_serve_%s_sum %.9f\n", name, (double)atomic_load(&h->sum_ns) / 1e9);
    sb_printf(out, "lathe_serve_%s_count %llu\n", name, (unsigned long long)acc);
}

static void requests(sb *out, sv_metrics *m)
{
    head(out, "requests_total", "counter",
         "HTTP requests under /v1 by model (\"\" when none was named or known) and status code.");
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->n_reqs; i++) {
        sb_puts(out, "lathe_serve_requests_total{model=\"");
        sv_prom_label(out, m->reqs[i].model);
        sb_printf(out, "\",code=\"%d\"} %llu\n", m->reqs[i].code,
                  (unsigned long long)m->reqs[i].n);
    }
    pthread_mutex_unlock(&m->mu);
}

static void engine_state(sb *out, sv_server *s)
{
    sv_engine_stats st;
    memset(&st, 0, sizeof st);
    size_t n_adapters = 0;
    sv_engine *e = atomic_load(&s->state) == SV_LOADING ? NULL : s->engine;
    if (e) {
        sv_engine_get_stats(e, &st);
        sv_adapter_info *a = sv_engine_adapters(e, &n_adapters);
        sv_adapter_info_free(a, n_adapters);
    }
    scalar(out, "requests_running", "gauge", "Engine requests generating now.", st.running);
    scalar(out, "requests_waiting", "gauge", "Engine requests waiting for KV-cache blocks.",
           st.waiting);
    scalar(out, "kv_cache_blocks_used", "gauge", "KV-cache blocks in use.", st.kv_blocks_used);
    scalar(out, "kv_cache_blocks_capacity", "gauge", "KV-cache blocks in all.", st.kv_blocks_total);
    scalar(out, "kv_cache_usage_ratio", "gauge", "Fraction of the KV-cache blocks in use.",
           st.kv_blocks_total ? (double)st.kv_blocks_used / st.kv_blocks_total : 0);
    scalar(out, "adapters_loaded", "gauge", "LoRA adapters in memory now.", st.adapters_loaded);
    scalar(out, "adapters_registered", "gauge", "LoRA adapters served (in memory or not).",
           (double)n_adapters);
    scalar(out, "adapter_loads_total", "counter", "LoRA adapters loaded into memory.",
           (double)st.adapter_loads);
    scalar(out, "adapter_evictions_total", "counter",
           "LoRA adapters evicted from memory (least recently used).",
           (double)st.adapter_evictions);
    scalar(out, "engine_steps_total", "counter", "Batched steps the engine ran.",
           (double)st.steps);
}

void sv_metrics_render(sv_server *s, sb *out)
{
    sv_metrics *m = &s->metrics;
    int state = atomic_load(&s->state);
    scalar(out, "ready", "gauge", "1 when serving, 0 while loading or draining.",
           state == SV_READY);
    requests(out, m);
    scalar(out, "prompt_tokens_total", "counter", "Prompt tokens of admitted requests.",
           (double)atomic_load(&m->prompt_tokens));
    scalar(out, "generation_tokens_total", "counter", "Tokens generated.",
           (double)atomic_load(&m->generation_tokens));
    hist(out, "time_to_first_token_seconds",
         "Seconds from a request's arrival to its first generated token.", &m->ttft);
    hist(out, "inter_token_latency_seconds", "Seconds between two tokens of one request.",
         &m->itl);
    hist(out, "request_duration_seconds",
         "Seconds from a completion request's arrival to its last byte sent.", &m->e2e);
    engine_state(out, s);
}
