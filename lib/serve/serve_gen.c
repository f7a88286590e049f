/* serve_gen.c: POST /v1/completions and /v1/chat/completions. A request
 * becomes a generation: its prompts encoded (the chat family's template
 * with the generation prompt for chat), checked against the context, and
 * one engine request per choice (n per prompt, seeds seed + i). The
 * engine's event callback only appends a token to its choice's buffer
 * under the generation's mutex and signals; the HTTP thread takes the
 * tokens, decodes them (serve_text.c), cuts stop strings (cancelling the
 * engine request) and replies whole (here) or streamed (serve_stream.c).
 * A generation is freed by whoever drops the last reference: the HTTP side
 * holds one, every submitted choice one until its DONE event. */
#include "serve_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------- lifetime */

static sv_gen *gen_new(sv_server *s, sv_conn *c)
{
    sv_gen *g = xcalloc(1, sizeof *g);
    g->s = s;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->refs = 1;
    g->t0_ns = c->t0_ns;
    g->created = (int64_t)time(NULL);
    sb_init(&g->out);
    return g;
}

static void gen_free(sv_gen *g)
{
    for (size_t i = 0; i < g->n_ch; i++) {
        sv_choice *ch = &g->ch[i];
        free(ch->in);
        free(ch->take);
        free(ch->message);
        sv_detok_free(&ch->dt);
    }
    free(g->ch);
    for (size_t i = 0; i < g->n_pids; i++) free(g->pids[i]);
    free(g->pids);
    free(g->npids);
    sv_oai_req_free(&g->req);
    free(g->model);
    sb_free(&g->out);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

/* Drops one reference; the last frees. */
static void gen_unref(sv_gen *g)
{
    pthread_mutex_lock(&g->mu);
    bool last = --g->refs == 0;
    pthread_mutex_unlock(&g->mu);
    if (last) gen_free(g);
}

/* The server's list of generations whose engine requests may still run. */
static void live_add(sv_gen *g)
{
    sv_server *s = g->s;
    pthread_mutex_lock(&s->mu);
    g->live_next = s->live;
    if (s->live) s->live->live_prev = g;
    s->live = g;
    g->live = true;
    pthread_mutex_unlock(&s->mu);
}

static void live_remove(sv_gen *g)
{
    sv_server *s = g->s;
    pthread_mutex_lock(&s->mu);
    if (g->live) {
        if (g->live_prev) g->live_prev->live_next = g->live_next;
        else s->live = g->live_next;
        if (g->live_next) g->live_next->live_prev = g->live_prev;
        g->live = false;
    }
    pthread_mutex_unlock(&s->mu);
}

void sv_gen_cancel_all(sv_server *s)
{
    pthread_mutex_lock(&s->mu);
    for (sv_gen *g = s->live; g; g = g->live_next)
        for (size_t i = 0; i < g->n_ch; i++)
            if (g->ch[i].submitted) sv_engine_cancel(s->engine, g->ch[i].id);
    pthread_mutex_unlock(&s->mu);
}

void sv_gen_release(sv_gen *g)
{
    live_remove(g);
    for (size_t i = 0; i < g->n_ch; i++)
        if (g->ch[i].submitted && !g->ch[i].ended) sv_engine_cancel(g->s->engine, g->ch[i].id);
    pthread_mutex_lock(&g->mu);
    for (size_t i = 0; i < g->n_ch; i++) g->ch[i].closed = true;
    pthread_mutex_unlock(&g->mu);
    gen_unref(g);
}

/* ---------------------------------------------------------------- events */

/* The engine thread: record, append, signal; never blocks for long. */
static void on_event(const sv_event *ev, void *ud)
{
    sv_choice *ch = ud;
    sv_gen *g = ch->g;
    sv_metrics *m = &g->s->metrics;
    if (ev->kind == SV_EVENT_TOKEN) {
        int64_t now = sv_now_ns();
        sv_hist_observe(ev->index == 0 ? &m->ttft : &m->itl,
                        now - (ev->index == 0 ? g->t0_ns : ch->last_ns));
        ch->last_ns = now;
        atomic_fetch_add(&m->generation_tokens, 1);
        pthread_mutex_lock(&g->mu);
        if (!ch->closed) {
            if (ch->n_in == ch->cap_in) {
                ch->cap_in = ch->cap_in ? 2 * ch->cap_in : 16;
                ch->in = xrealloc(ch->in, ch->cap_in * sizeof *ch->in);
            }
            ch->in[ch->n_in++] = ev->token;
            pthread_cond_signal(&g->cv);
        }
        pthread_mutex_unlock(&g->mu);
        return;
    }
    pthread_mutex_lock(&g->mu);
    ch->done = true;
    ch->finish = ev->finish;
    ch->gen_tokens = ev->generated_tokens;
    if (ev->message) ch->message = xstrdup(ev->message);
    bool last = --g->refs == 0;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
    if (last) gen_free(g);
}

/* ---------------------------------------------------------------- text */

static bool is_stop_id(const sv_server *s, int32_t id)
{
    for (int i = 0; i < s->n_stop_ids; i++)
        if (s->stop_ids[i] == id) return true;
    return false;
}

/* Searches the stop strings in what was decoded since the last search. */
static bool check_stop(sv_gen *g, sv_choice *ch)
{
    if (!g->req.n_stop) return false;
    size_t back = sv_stop_maxlen(g->req.stop, g->req.n_stop) - 1;
    size_t from = ch->searched > back ? ch->searched - back : 0;
    bool hit = sv_stop_cut(&ch->dt.text, from, g->req.stop, g->req.n_stop);
    ch->searched = ch->dt.text.len;
    return hit;
}

static void choice_fail(sv_gen *g, sv_choice *ch)
{
    ch->ended = true;
    ch->finish_reason = NULL;
    if (g->failed) return;
    g->failed = true;
    if (ch->finish == SV_FINISH_ERROR)
        sv_error_set(&g->err, 500, "server_error", NULL, NULL, "generation failed: %s",
                     ch->message ? ch->message : "the engine gave no reason");
    else
        sv_error_set(&g->err, 503, "server_error", "unavailable", NULL,
                     "the request was cancelled: the server is stopping");
}

/* Decodes tokens taken from the engine; ends the choice at a stop string
 * or when the engine said DONE. */
static void choice_take(sv_gen *g, sv_choice *ch, size_t n, bool done)
{
    sv_server *s = g->s;
    for (size_t i = 0; i < n && !ch->stopped; i++) {
        int32_t t = ch->take[i];
        ch->used++;
        if (is_stop_id(s, t) || tok_is_special(s->tok, t)) continue;
        size_t len;
        const char *b = tok_token_bytes(s->tok, t, &len);
        if (!b) continue;
        sv_detok_push(&ch->dt, b, len);
        ch->stopped = check_stop(g, ch);
    }
    if (!ch->stopped && done) {
        sv_detok_flush(&ch->dt);
        ch->stopped = check_stop(g, ch);
    }
    if (ch->stopped) {
        ch->ended = true;
        ch->finish_reason = "stop";
        if (!done) sv_engine_cancel(s->engine, ch->id);
        pthread_mutex_lock(&g->mu);
        ch->closed = true;
        pthread_mutex_unlock(&g->mu);
    } else if (done) {
        if (ch->finish == SV_FINISH_STOP || ch->finish == SV_FINISH_LENGTH) {
            ch->ended = true;
            ch->finish_reason = ch->finish == SV_FINISH_STOP ? "stop" : "length";
        } else {
            choice_fail(g, ch);
        }
    }
}

static bool has_news(const sv_gen *g)
{
    for (size_t i = 0; i < g->n_ch; i++) {
        const sv_choice *ch = &g->ch[i];
        if (!ch->ended && (ch->n_in || ch->done)) return true;
    }
    return false;
}

bool sv_gen_all_ended(const sv_gen *g)
{
    for (size_t i = 0; i < g->n_ch; i++)
        if (!g->ch[i].ended) return false;
    return true;
}

bool sv_gen_step(sv_gen *g, bool wait)
{
    if (sv_gen_all_ended(g)) return false;
    size_t *taken = xcalloc(g->n_ch, sizeof *taken);
    bool *done = xcalloc(g->n_ch, sizeof *done);
    pthread_mutex_lock(&g->mu);
    while (wait && !has_news(g)) pthread_cond_wait(&g->cv, &g->mu);
    for (size_t i = 0; i < g->n_ch; i++) {
        sv_choice *ch = &g->ch[i];
        if (ch->ended) continue;
        int32_t *t = ch->take;
        size_t cap = ch->cap_take;
        ch->take = ch->in;
        ch->cap_take = ch->cap_in;
        taken[i] = ch->n_in;
        ch->in = t;
        ch->cap_in = cap;
        ch->n_in = 0;
        done[i] = ch->done;
    }
    pthread_mutex_unlock(&g->mu);
    for (size_t i = 0; i < g->n_ch; i++)
        if (!g->ch[i].ended) choice_take(g, &g->ch[i], taken[i], done[i]);
    free(taken);
    free(done);
    return !sv_gen_all_ended(g);
}

/* ---------------------------------------------------------------- prompts */

static bool encode_chat(sv_gen *g, tok_ids *ids, sv_error *e)
{
    sv_server *s = g->s;
    if (!s->has_tmpl) {
        sv_error_field(e, "messages", "this model has no chat template (%s): start lathe serve "
                       "with --chat-template FAMILY, or use /v1/completions", s->tmpl_err);
        return false;
    }
    chat_message *msgs = xcalloc(g->req.n_msgs, sizeof *msgs);
    for (size_t i = 0; i < g->req.n_msgs; i++)
        msgs[i] = (chat_message){g->req.msgs[i].role, g->req.msgs[i].content};
    chat_options co = {.add_generation_prompt = true, .enable_thinking = g->req.enable_thinking};
    char err[512];
    pthread_mutex_lock(&s->tok_mu);
    bool ok = chat_encode(s->tok, &s->tmpl, msgs, g->req.n_msgs, &co, ids, NULL, err, sizeof err);
    pthread_mutex_unlock(&s->tok_mu);
    free(msgs);
    if (!ok) sv_error_field(e, "messages", "%s", err);
    return ok;
}

static bool encode_text(sv_gen *g, const char *text, tok_ids *ids, sv_error *e)
{
    char err[512];
    pthread_mutex_lock(&g->s->tok_mu);
    bool ok = tok_encode(g->s->tok, text, strlen(text), TOK_ADD_SPECIAL, ids, err, sizeof err);
    pthread_mutex_unlock(&g->s->tok_mu);
    if (!ok) sv_error_field(e, "prompt", "the prompt cannot be encoded: %s", err);
    return ok;
}

/* One prompt's ids into g->pids[i]. */
static bool encode_prompt(sv_gen *g, size_t i, sv_error *e)
{
    const char *what = g->req.api == SV_API_CHAT ? "messages" : "prompt";
    sv_prompt *p = g->req.api == SV_API_CHAT ? NULL : &g->req.prompts[i];
    if (p && p->ids) {
        for (int k = 0; k < p->n_ids; k++) {
            if (p->ids[k] >= g->s->vocab) {
                sv_error_field(e, "prompt", "prompt token %d is %d; this model's ids are 0 to %d",
                               k, (int)p->ids[k], g->s->vocab - 1);
                return false;
            }
        }
        g->pids[i] = xmalloc((size_t)p->n_ids * sizeof *g->pids[i]);
        memcpy(g->pids[i], p->ids, (size_t)p->n_ids * sizeof *g->pids[i]);
        g->npids[i] = p->n_ids;
        return true;
    }
    tok_ids ids;
    tok_ids_init(&ids);
    bool ok = p ? encode_text(g, p->text, &ids, e) : encode_chat(g, &ids, e);
    if (ok && ids.len == 0) {
        sv_error_field(e, what, "the %s encodes to no tokens; give some text", what);
        ok = false;
    }
    if (ok) {
        g->pids[i] = xmalloc(ids.len * sizeof *g->pids[i]);
        memcpy(g->pids[i], ids.ids, ids.len * sizeof *g->pids[i]);
        g->npids[i] = (int)ids.len;
    }
    tok_ids_free(&ids);
    return ok;
}

/* The completion's length of prompt i: max_tokens, or what is left of the
 * context (16 for /v1/completions, as OpenAI's default); false with a 400
 * naming the numbers when it does not fit. */
static bool completion_length(sv_gen *g, size_t i, int *max_new, sv_error *e)
{
    int ctx = g->s->max_context, n = g->npids[i];
    const char *what = g->req.api == SV_API_CHAT ? "messages" : "prompt";
    if (n >= ctx) {
        sv_error_set(e, 400, "invalid_request_error", "context_length_exceeded", what,
                     "This model's maximum context length is %d tokens, but the %s has %d tokens; "
                     "shorten it to at most %d tokens to leave room for the completion",
                     ctx, what, n, ctx - 1);
        return false;
    }
    int want = g->req.max_tokens;
    if (want && n + want > ctx) {
        sv_error_set(e, 400, "invalid_request_error", "context_length_exceeded",
                     g->req.max_tokens_param,
                     "This model's maximum context length is %d tokens; you asked for %d tokens "
                     "(%d in the %s, %d for the completion): lower %s to at most %d or shorten "
                     "the %s", ctx, n + want, n, what, want, g->req.max_tokens_param, ctx - n,
                     what);
        return false;
    }
    if (!want) want = g->req.api == SV_API_CHAT ? ctx - n : (ctx - n < 16 ? ctx - n : 16);
    *max_new = want;
    return true;
}

/* ---------------------------------------------------------------- submit */

static void submit_error(sv_gen *g, sv_submit_status st, const char *msg, sv_error *e)
{
    sv_server *s = g->s;
    char *list = NULL;
    switch (st) {
    case SV_SUBMIT_FULL:
        sv_error_set(e, 429, "rate_limit_error", "rate_limit_exceeded", NULL,
                     "the server is busy: %d requests wait already; retry after a second",
                     sv_engine_options(s->engine)->max_waiting);
        break;
    case SV_SUBMIT_NO_ADAPTER:
        list = sv_model_list(s);
        sv_error_set(e, 404, "invalid_request_error", "model_not_found", "model",
                     "The model `%s` does not exist (it was just unloaded); available models: %s",
                     g->model, list);
        break;
    case SV_SUBMIT_STOPPING:
        sv_error_set(e, 503, "server_error", "unavailable", NULL,
                     "the server is shutting down; retry on another replica");
        break;
    default:
        sv_error_field(e, g->req.api == SV_API_CHAT ? "messages" : "prompt", "%s", msg);
        break;
    }
    free(list);
}

static bool submit_choice(sv_gen *g, sv_choice *ch, const char *adapter, int max_new,
                          uint64_t seed, sv_error *e)
{
    sv_server *s = g->s;
    sv_request r = {
        .prompt = g->pids[ch->prompt],
        .n_prompt = g->npids[ch->prompt],
        .adapter = adapter,
        .sample = {.temperature = g->req.temperature, .top_p = g->req.top_p,
                   .max_new = max_new, .seed = seed, .eos_id = -1},
        .stop_ids = s->stop_ids,
        .n_stop = s->n_stop_ids,
        .on_event = on_event,
        .ud = ch,
    };
    char err[512] = "";
    pthread_mutex_lock(&g->mu);
    g->refs++;
    pthread_mutex_unlock(&g->mu);
    sv_submit_status st = sv_engine_submit(s->engine, &r, &ch->id, err, sizeof err);
    if (st == SV_SUBMIT_OK) {
        ch->submitted = true;
        return true;
    }
    gen_unref(g); /* no event comes for it */
    submit_error(g, st, err, e);
    return false;
}

/* Every prompt encoded and checked, then every choice submitted. */
static bool start(sv_gen *g, const char *adapter, sv_error *e)
{
    size_t np = g->req.api == SV_API_CHAT ? 1 : g->req.n_prompts;
    g->pids = xcalloc(np, sizeof *g->pids);
    g->npids = xcalloc(np, sizeof *g->npids);
    g->n_pids = np;
    int *max_new = xcalloc(np, sizeof *max_new);
    bool ok = true;
    for (size_t i = 0; ok && i < np; i++)
        ok = encode_prompt(g, i, e) && completion_length(g, i, &max_new[i], e);
    uint64_t seed = g->req.seed;
    if (!g->req.has_seed) {
        uint64_t x = (uint64_t)sv_now_ns() ^ atomic_fetch_add(&g->s->seq, 1) << 32;
        seed = rng_splitmix64(&x);
    }
    g->n_ch = np * (size_t)g->req.n;
    g->ch = xcalloc(g->n_ch, sizeof *g->ch);
    for (size_t i = 0; i < g->n_ch; i++) {
        sv_choice *ch = &g->ch[i];
        ch->g = g;
        ch->index = (int)i;
        ch->prompt = (int)(i / (size_t)g->req.n);
        sv_detok_init(&ch->dt);
        if (!ok) ch->ended = true; /* never submitted */
    }
    for (size_t i = 0; ok && i < g->n_ch; i++) {
        sv_choice *ch = &g->ch[i];
        uint64_t j = i % (size_t)g->req.n;
        ok = submit_choice(g, ch, adapter, max_new[ch->prompt], seed + j, e);
        if (ok && j == 0)
            atomic_fetch_add(&g->s->metrics.prompt_tokens, (uint64_t)g->npids[ch->prompt]);
    }
    for (size_t i = 0; i < np; i++) g->prompt_tokens += g->npids[i];
    free(max_new);
    return ok;
}

/* ---------------------------------------------------------------- replies */

static int choice_tokens(const sv_choice *ch)
{
    return ch->stopped ? ch->used : ch->gen_tokens;
}

static void reply_whole(sv_conn *c, sv_gen *g)
{
    while (!g->failed && sv_gen_step(g, true)) continue;
    if (g->failed) {
        sv_reply_error(c, &g->err);
        return;
    }
    json_t *r = sv_oai_response(g->req.api, g->id, g->created, g->model);
    json_t *choices = json_object_get(r, "choices");
    int completion = 0;
    for (size_t i = 0; i < g->n_ch; i++) {
        sv_choice *ch = &g->ch[i];
        json_array_append_new(choices, sv_oai_choice(g->req.api, ch->index, sb_str(&ch->dt.text),
                                                     ch->finish_reason));
        completion += choice_tokens(ch);
    }
    json_object_set_new(r, "usage", sv_oai_usage(g->prompt_tokens, completion));
    sv_reply_json(c, 200, r);
}

int sv_gen_completion_tokens(const sv_gen *g)
{
    int n = 0;
    for (size_t i = 0; i < g->n_ch; i++) n += choice_tokens(&g->ch[i]);
    return n;
}

void sv_route_generate(sv_conn *c, sv_api api)
{
    sv_server *s = c->s;
    sv_gen *g = gen_new(s, c);
    size_t len = c->body.len;
    sv_error e;
    if (!sv_oai_parse(api, sb_str(&c->body), len, &g->req, &e)) {
        sv_reply_error(c, &e);
        gen_unref(g);
        return;
    }
    const char *model = g->req.model && *g->req.model ? g->req.model : s->base_id;
    bool is_base = false;
    if (!sv_model_known(s, model, &is_base)) {
        char *list = sv_model_list(s);
        sv_error_set(&e, 404, "invalid_request_error", "model_not_found", "model",
                     "The model `%s` does not exist; available models: %s", model, list);
        free(list);
        sv_reply_error(c, &e);
        gen_unref(g);
        return;
    }
    g->model = xstrdup(model);
    sv_conn_set_model(c, model);
    snprintf(g->id, sizeof g->id, "%s-%016llx", api == SV_API_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)(atomic_fetch_add(&s->seq, 1) ^ (uint64_t)s->created << 24));
    if (!start(g, is_base ? NULL : model, &e)) {
        sv_reply_error(c, &e);
        if (e.status == 429) sv_reply_header(c, "Retry-After", "1");
        sv_gen_release(g);
        return;
    }
    c->generation = true;
    live_add(g);
    if (g->req.stream) {
        sv_stream_reply(c, g); /* the stream releases g */
        return;
    }
    reply_whole(c, g);
    sv_gen_release(g);
}
