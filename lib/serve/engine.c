/* engine.c: the serving engine's thread, queue, admission and steps
 * (engine.h). One thread loops:
 *   1. under the lock: cancelled requests end; waiting requests are
 *      admitted in order while their KV blocks (ceil((prompt + max_new) /
 *      kv_block)) are free and a running slot is (max_batch), loading their
 *      adapter if it was evicted;
 *   2. without the lock: a step. Every decoding request gives one row (its
 *      last token), then every prefilling request up to prefill_chunk prompt
 *      tokens, at most step_tokens rows in all; tr_model_forward_batch runs
 *      them at once and returns logits for the decode rows and the last row
 *      of each finished prompt; each request samples with tr_sample and its
 *      own rng seeded from its seed, as tr_generate does;
 *   3. token events; finished requests (a stop id: STOP; max_new: LENGTH)
 *      give their blocks back, then their DONE event.
 * With nothing to do the thread sleeps on a condition variable. Events are
 * sent without the lock held, so a callback may call sv_engine_cancel.
 */
#include "serve/engine_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *sv_finish_name(sv_finish f)
{
    switch (f) {
    case SV_FINISH_STOP: return "stop";
    case SV_FINISH_LENGTH: return "length";
    case SV_FINISH_CANCELLED: return "cancelled";
    default: return "error";
    }
}

/* ---------------------------------------------------------------- options */

static void fill_defaults(sv_engine_opts *o, const tr_model *m)
{
    if (o->max_batch <= 0) o->max_batch = 32;
    if (o->max_waiting <= 0) o->max_waiting = 256;
    if (o->prefill_chunk <= 0) o->prefill_chunk = 256;
    if (o->step_tokens <= 0) o->step_tokens = 512;
    if (o->step_tokens < o->max_batch) o->step_tokens = o->max_batch; /* room for every decode */
    if (o->kv_block <= 0) o->kv_block = 16;
    if (o->max_adapters <= 0) o->max_adapters = 8;
    if (o->max_context <= 0) o->max_context = m->cfg.max_pos > 0 ? m->cfg.max_pos : 2048;
    if (o->kv_bytes == 0) {
        size_t ctx = sv_kv_block_bytes(m, o->kv_block) *
                     (size_t)((o->max_context + o->kv_block - 1) / o->kv_block);
        /* a full context for each sequence that may run at once (at least
         * eight), so a short max_context never admits fewer than max_batch */
        size_t n = (size_t)(o->max_batch > 8 ? o->max_batch : 8);
        o->kv_bytes = n * ctx < ((size_t)1 << 30) ? n * ctx : (size_t)1 << 30;
        if (o->kv_bytes < ctx) o->kv_bytes = ctx; /* one full context at least */
    }
}

/* ---------------------------------------------------------------- requests */

static void req_free(sv_req *r)
{
    free(r->prompt);
    free(r->stop_ids);
    free(r->blocks);
    free(r->message);
    free(r);
}

/* Ends r (already out of the queue or the running set): its blocks and its
 * adapter back, onto the done list for its DONE event. Under the lock. */
static void finish_locked(sv_engine *e, sv_req *r, sv_finish f, char *message)
{
    r->finish = f;
    r->message = message;
    if (r->n_blocks) sv_kv_give(&e->kv, r->blocks, r->n_blocks);
    r->n_blocks = 0;
    if (r->ad) {
        if (r->blocks) r->ad->active--; /* admitted */
        sv_adapter_unref(e, r->ad);
        r->ad = NULL;
    }
    r->next = NULL;
    if (e->done_tail) e->done_tail->next = r;
    else e->done_head = r;
    e->done_tail = r;
}

/* Sends the DONE events of the done list and frees its requests. Without
 * the lock. */
static void flush_done(sv_engine *e)
{
    pthread_mutex_lock(&e->mu);
    sv_req *r = e->done_head;
    e->done_head = e->done_tail = NULL;
    pthread_mutex_unlock(&e->mu);
    int n = 0;
    while (r) {
        sv_req *next = r->next;
        sv_event ev = {.kind = SV_EVENT_DONE, .id = r->id, .finish = r->finish,
                       .prompt_tokens = r->n_prompt, .generated_tokens = r->generated,
                       .message = r->message};
        if (r->on_event) r->on_event(&ev, r->ud);
        req_free(r);
        r = next;
        n++;
    }
    if (!n) return;
    pthread_mutex_lock(&e->mu);
    e->n_live -= n;
    pthread_cond_broadcast(&e->idle);
    pthread_mutex_unlock(&e->mu);
}

static void remove_running_locked(sv_engine *e, int i)
{
    memmove(e->run + i, e->run + i + 1, (size_t)(e->n_run - i - 1) * sizeof *e->run);
    e->n_run--;
}

/* Cancelled requests, waiting or running, end. Under the lock. */
static void reap_cancelled_locked(sv_engine *e)
{
    sv_req **pp = &e->wait_head, *prev = NULL;
    while (*pp) {
        sv_req *r = *pp;
        if (!r->cancelled) {
            prev = r;
            pp = &r->next;
            continue;
        }
        *pp = r->next;
        if (e->wait_tail == r) e->wait_tail = prev;
        e->n_waiting--;
        finish_locked(e, r, SV_FINISH_CANCELLED, NULL);
    }
    for (int i = 0; i < e->n_run;) {
        sv_req *r = e->run[i];
        if (!r->cancelled) {
            i++;
            continue;
        }
        remove_running_locked(e, i);
        finish_locked(e, r, SV_FINISH_CANCELLED, NULL);
    }
}

static sv_req *pop_waiting_locked(sv_engine *e)
{
    sv_req *r = e->wait_head;
    e->wait_head = r->next;
    if (!e->wait_head) e->wait_tail = NULL;
    e->n_waiting--;
    r->next = NULL;
    return r;
}

/* Admits waiting requests in order while their blocks, a running slot and
 * their adapter fit. Under the lock (released while an adapter loads). */
static void admit_locked(sv_engine *e)
{
    while (e->wait_head && e->n_run < e->o.max_batch && !e->stop) {
        sv_req *r = e->wait_head;
        if (r->cancelled) {
            reap_cancelled_locked(e);
            continue;
        }
        int need = sv_kv_blocks_for(&e->kv, r->n_prompt + r->max_new);
        if (e->kv.n_free < need) return; /* in order: the head waits for blocks */
        sv_adapter_ent *a = r->ad;
        if (a && !a->loaded) {
            if (a->loading || !sv_adapter_make_room(e)) return; /* every loaded one in use */
            char *msg = NULL;
            bool ok = sv_adapter_load_locked(e, a, &msg);
            if (e->wait_head != r || r->cancelled) { /* cancelled meanwhile */
                free(msg);
                continue;
            }
            if (!ok) {
                finish_locked(e, pop_waiting_locked(e), SV_FINISH_ERROR, msg);
                continue;
            }
            if (e->kv.n_free < need || e->n_run >= e->o.max_batch) return;
        }
        pop_waiting_locked(e);
        r->blocks = xmalloc((size_t)need * sizeof *r->blocks);
        sv_kv_take(&e->kv, need, r->blocks);
        r->n_blocks = need;
        if (a) {
            a->active++;
            a->last_used = sv_now_ms();
            a->use_seq = ++e->use_seq;
        }
        tr_rng_seed(&r->rng, r->sample.seed);
        e->run[e->n_run++] = r;
    }
}

/* ---------------------------------------------------------------- a step */

/* The step's sequences: decodes first, then prompt chunks. Returns their
 * count; *n_logits the rows of logits. Engine thread. */
static int build_step(sv_engine *e, int *n_logits, int *prompt_rows)
{
    int nb = 0, rows = 0, nl = 0;
    *prompt_rows = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < e->n_run && rows < e->o.step_tokens; i++) {
            sv_req *r = e->run[i];
            bool decoding = r->done_prompt == r->n_prompt;
            if (decoding != (pass == 0)) continue;
            tr_batch_seq *s = &e->bseq[nb];
            s->blocks = r->blocks;
            s->adapter = r->ad ? &r->ad->ad : NULL;
            if (decoding) {
                s->ids = &r->last;
                s->n = 1;
                s->start = r->n_prompt + r->generated - 1;
                s->logits = true;
            } else {
                int c = r->n_prompt - r->done_prompt;
                if (c > e->o.prefill_chunk) c = e->o.prefill_chunk;
                if (c > e->o.step_tokens - rows) c = e->o.step_tokens - rows;
                s->ids = r->prompt + r->done_prompt;
                s->n = c;
                s->start = r->done_prompt;
                s->logits = r->done_prompt + c == r->n_prompt;
                *prompt_rows += c;
            }
            rows += s->n;
            e->lrow[nb] = s->logits ? nl++ : -1;
            e->breq[nb++] = r;
        }
    *n_logits = nl;
    return nb;
}

static bool is_stop(const sv_req *r, int32_t tok)
{
    for (int i = 0; i < r->n_stop; i++)
        if (r->stop_ids[i] == tok) return true;
    return false;
}

/* Runs one step over the running requests. Engine thread, lock not held. */
static void run_step(sv_engine *e)
{
    int nl, prompt_rows;
    int nb = build_step(e, &nl, &prompt_rows);
    if (nb == 0) return;
    tr_model_forward_batch(e->m, &e->kv.pool, e->bseq, nb, e->logits);
    int V = e->m->cfg.vocab;
#pragma omp parallel for schedule(dynamic, 1) if (nl > 1)
    for (int i = 0; i < nb; i++) {
        if (e->lrow[i] < 0) continue;
        sv_req *r = e->breq[i];
        e->picked[e->lrow[i]] = tr_sample(e->logits + (size_t)e->lrow[i] * V, V, &r->sample, &r->rng);
    }
    int generated = 0;
    for (int i = 0; i < nb; i++) {
        sv_req *r = e->breq[i];
        if (r->done_prompt < r->n_prompt) r->done_prompt += e->bseq[i].n;
        if (e->lrow[i] < 0) continue;
        int32_t tok = e->picked[e->lrow[i]];
        r->last = tok;
        sv_event ev = {.kind = SV_EVENT_TOKEN, .id = r->id, .token = tok, .index = r->generated};
        r->generated++;
        generated++;
        if (r->on_event) r->on_event(&ev, r->ud);
        if (is_stop(r, tok)) r->hit_stop = true;
    }
    pthread_mutex_lock(&e->mu);
    e->st.steps++;
    e->st.prompt_tokens += (uint64_t)prompt_rows;
    e->st.generated_tokens += (uint64_t)generated;
    for (int i = 0; i < e->n_run;) {
        sv_req *r = e->run[i];
        if (!r->hit_stop && r->generated < r->max_new) {
            i++;
            continue;
        }
        remove_running_locked(e, i);
        finish_locked(e, r, r->hit_stop ? SV_FINISH_STOP : SV_FINISH_LENGTH, NULL);
    }
    pthread_mutex_unlock(&e->mu);
}

/* ---------------------------------------------------------------- the thread */

static void *engine_main(void *arg)
{
    sv_engine *e = arg;
    thread_set_name("lathe-engine");
    tr_set_threads(e->m->be->threads); /* OpenMP's thread count is per thread: the backend's */
    pthread_mutex_lock(&e->mu);
    for (;;) {
        while (!e->stop && !e->wait_head && e->n_run == 0 && !e->done_head)
            pthread_cond_wait(&e->wake, &e->mu);
        if (e->stop) break;
        reap_cancelled_locked(e);
        admit_locked(e);
        if (e->n_run == 0 && !e->done_head) { /* nothing admissible: sleep, never spin */
            if (!e->stop) pthread_cond_wait(&e->wake, &e->mu);
            continue;
        }
        pthread_mutex_unlock(&e->mu);
        flush_done(e);
        run_step(e);
        flush_done(e);
        pthread_mutex_lock(&e->mu);
    }
    /* stopping: everything left ends cancelled */
    while (e->wait_head) finish_locked(e, pop_waiting_locked(e), SV_FINISH_CANCELLED, NULL);
    while (e->n_run) {
        sv_req *r = e->run[e->n_run - 1];
        e->n_run--;
        finish_locked(e, r, SV_FINISH_CANCELLED, NULL);
    }
    pthread_mutex_unlock(&e->mu);
    flush_done(e);
    return NULL;
}

/* ---------------------------------------------------------------- create / free */

sv_engine *sv_engine_create(tr_model *m, const sv_engine_opts *o, char *err, size_t errsz)
{
    sv_engine *e = xcalloc(1, sizeof *e);
    e->m = m;
    if (o) e->o = *o;
    fill_defaults(&e->o, m);
    if (!sv_kv_init(&e->kv, m, e->o.kv_block, e->o.kv_bytes, err, errsz)) {
        free(e);
        return NULL;
    }
    int B = e->o.max_batch;
    e->run = xcalloc((size_t)B, sizeof *e->run);
    e->bseq = xcalloc((size_t)B, sizeof *e->bseq);
    e->breq = xcalloc((size_t)B, sizeof *e->breq);
    e->lrow = xcalloc((size_t)B, sizeof *e->lrow);
    e->picked = xcalloc((size_t)B, sizeof *e->picked);
    e->logits = xmalloc((size_t)B * m->cfg.vocab * sizeof(float));
    tr_model_batch_reserve(m, e->o.step_tokens, B, e->o.max_context);
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->wake, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->idle, &ca);
    pthread_condattr_destroy(&ca);
    int rc = pthread_create(&e->thread, NULL, engine_main, e);
    e->started = rc == 0;
    if (rc != 0) {
        snprintf(err, errsz, "cannot start the engine thread: %s", strerror(rc));
        sv_engine_free(e);
        return NULL;
    }
    return e;
}

void sv_engine_free(sv_engine *e)
{
    if (!e) return;
    if (e->started) {
        pthread_mutex_lock(&e->mu);
        e->stop = e->draining = true;
        pthread_cond_broadcast(&e->wake);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->thread, NULL);
    }
    sv_adapters_free_all(e);
    sv_kv_free(&e->kv);
    free(e->run);
    free(e->bseq);
    free(e->breq);
    free(e->lrow);
    free(e->picked);
    free(e->logits);
    pthread_cond_destroy(&e->wake);
    pthread_cond_destroy(&e->idle);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

const sv_engine_opts *sv_engine_options(const sv_engine *e)
{
    return &e->o;
}

/* ---------------------------------------------------------------- submit */

static sv_submit_status check_request(sv_engine *e, const sv_request *r, int *max_new, char *err,
                                      size_t errsz)
{
    const sv_engine_opts *o = &e->o;
    if (!r->prompt || r->n_prompt <= 0) {
        snprintf(err, errsz, "the prompt is empty: give at least one token");
        return SV_SUBMIT_INVALID;
    }
    for (int i = 0; i < r->n_prompt; i++)
        if (r->prompt[i] < 0 || r->prompt[i] >= e->m->cfg.vocab) {
            snprintf(err, errsz, "prompt token %d is %d, outside the vocabulary (0..%d)", i,
                     (int)r->prompt[i], e->m->cfg.vocab - 1);
            return SV_SUBMIT_INVALID;
        }
    if (r->n_prompt >= o->max_context) {
        snprintf(err, errsz, "the prompt has %d tokens; the context holds %d (prompt and "
                 "generated tokens): shorten the prompt", r->n_prompt, o->max_context);
        return SV_SUBMIT_INVALID;
    }
    *max_new = r->sample.max_new > 0 ? r->sample.max_new : o->max_context - r->n_prompt;
    if (r->n_prompt + *max_new > o->max_context) {
        snprintf(err, errsz, "the prompt has %d tokens and max_tokens is %d: %d in all, over the "
                 "context of %d tokens (max_tokens at most %d)", r->n_prompt, *max_new,
                 r->n_prompt + *max_new, o->max_context, o->max_context - r->n_prompt);
        return SV_SUBMIT_INVALID;
    }
    int need = sv_kv_blocks_for(&e->kv, r->n_prompt + *max_new);
    if (need > e->kv.n_blocks) {
        snprintf(err, errsz, "the prompt (%d tokens) and max_tokens (%d) need %d KV blocks of %d "
                 "tokens; the whole cache has %d (kv_bytes %zu): ask for fewer tokens",
                 r->n_prompt, *max_new, need, o->kv_block, e->kv.n_blocks, o->kv_bytes);
        return SV_SUBMIT_INVALID;
    }
    return SV_SUBMIT_OK;
}

sv_submit_status sv_engine_submit(sv_engine *e, const sv_request *r, uint64_t *id, char *err,
                                  size_t errsz)
{
    int max_new = 0;
    pthread_mutex_lock(&e->mu);
    sv_submit_status st = SV_SUBMIT_OK;
    sv_adapter_ent *a = NULL;
    if (e->draining || e->stop) {
        snprintf(err, errsz, "the engine is draining: no new requests");
        st = SV_SUBMIT_STOPPING;
    }
    if (st == SV_SUBMIT_OK) st = check_request(e, r, &max_new, err, errsz);
    if (st == SV_SUBMIT_OK && r->adapter && !(a = sv_adapter_find(e, r->adapter))) {
        snprintf(err, errsz, "no adapter named %s is registered", r->adapter);
        st = SV_SUBMIT_NO_ADAPTER;
    }
    if (st == SV_SUBMIT_OK && e->n_waiting >= e->o.max_waiting) {
        snprintf(err, errsz, "%d requests wait already (max_waiting): retry later", e->n_waiting);
        st = SV_SUBMIT_FULL;
    }
    if (st != SV_SUBMIT_OK) {
        pthread_mutex_unlock(&e->mu);
        return st;
    }
    sv_req *q = xcalloc(1, sizeof *q);
    q->id = ++e->next_id;
    q->prompt = xmalloc((size_t)r->n_prompt * sizeof *q->prompt);
    memcpy(q->prompt, r->prompt, (size_t)r->n_prompt * sizeof *q->prompt);
    q->n_prompt = r->n_prompt;
    q->n_stop = r->stop_ids && r->n_stop > 0 ? r->n_stop : 0;
    q->stop_ids = xmalloc((size_t)(q->n_stop + 1) * sizeof *q->stop_ids);
    if (q->n_stop) memcpy(q->stop_ids, r->stop_ids, (size_t)q->n_stop * sizeof *q->stop_ids);
    q->sample = r->sample;
    q->sample.eos_id = -1;
    q->sample.max_new = max_new;
    q->max_new = max_new;
    q->on_event = r->on_event;
    q->ud = r->ud;
    q->ad = a;
    if (a) a->refs++;
    if (e->wait_tail) e->wait_tail->next = q;
    else e->wait_head = q;
    e->wait_tail = q;
    e->n_waiting++;
    e->n_live++;
    if (id) *id = q->id;
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->mu);
    return SV_SUBMIT_OK;
}

bool sv_engine_cancel(sv_engine *e, uint64_t id)
{
    pthread_mutex_lock(&e->mu);
    sv_req *found = NULL;
    for (sv_req *r = e->wait_head; r && !found; r = r->next)
        if (r->id == id) found = r;
    for (int i = 0; i < e->n_run && !found; i++)
        if (e->run[i]->id == id) found = e->run[i];
    if (found) {
        found->cancelled = true;
        pthread_cond_signal(&e->wake);
    }
    pthread_mutex_unlock(&e->mu);
    return found != NULL;
}

bool sv_engine_drain(sv_engine *e, int timeout_ms)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    if (timeout_ms >= 0) {
        until.tv_sec += timeout_ms / 1000;
        until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&e->mu);
    e->draining = true;
    int rc = 0;
    while (e->n_live > 0 && rc != ETIMEDOUT) {
        if (timeout_ms < 0) pthread_cond_wait(&e->idle, &e->mu);
        else rc = pthread_cond_timedwait(&e->idle, &e->mu, &until);
    }
    bool idle = e->n_live == 0;
    pthread_mutex_unlock(&e->mu);
    return idle;
}

void sv_engine_get_stats(sv_engine *e, sv_engine_stats *s)
{
    pthread_mutex_lock(&e->mu);
    *s = e->st;
    s->running = e->n_run;
    s->waiting = e->n_waiting;
    s->kv_blocks_total = e->kv.n_blocks;
    s->kv_blocks_used = e->kv.n_blocks - e->kv.n_free;
    s->adapters_loaded = e->n_loaded;
    pthread_mutex_unlock(&e->mu);
}
