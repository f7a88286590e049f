/* serve_server.c: sv_server_run, the life of `lathe serve`. It listens
 * first, so /health answers 503 while the model loads; then loads the
 * tokenizer, the base model (without LoRA, as the engine wants it), the
 * chat template of the tokenizer's family, the engine and the --adapter
 * folders, and serves. The stop ids the engine ends a request at are the
 * tokenizer's eos and the families' end-of-turn tokens. On SIGTERM or
 * SIGINT it drains: new requests get 503, the engine finishes what it
 * admitted, the HTTP side sends the last bytes, then everything is freed
 * and it returns 0. */
#include "serve_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int64_t sv_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

bool sv_model_known(sv_server *s, const char *id, bool *is_base)
{
    *is_base = strcmp(id, s->base_id) == 0;
    if (*is_base) return true;
    size_t n = 0;
    sv_adapter_info *a = sv_engine_adapters(s->engine, &n);
    bool found = false;
    for (size_t i = 0; i < n && !found; i++) found = strcmp(a[i].name, id) == 0;
    sv_adapter_info_free(a, n);
    return found;
}

char *sv_model_list(sv_server *s)
{
    sb out;
    sb_init(&out);
    sb_puts(&out, s->base_id);
    size_t n = 0;
    sv_adapter_info *a = sv_engine_adapters(s->engine, &n);
    for (size_t i = 0; i < n; i++) sb_printf(&out, ", %s", a[i].name);
    sv_adapter_info_free(a, n);
    return sb_take(&out);
}

/* ---------------------------------------------------------------- loading */

static void diags_to(const diag_list *d, char *err, size_t errsz)
{
    sb out;
    sb_init(&out);
    for (size_t i = 0; i < d->len; i++)
        if (d->items[i].level == DIAG_ERROR) diag_format(&d->items[i], &out);
    snprintf(err, errsz, "%s", out.len ? sb_str(&out) : "unknown error");
    size_t l = strlen(err);
    while (l && err[l - 1] == '\n') err[--l] = '\0';
    sb_free(&out);
}

static bool load_tokenizer(sv_server *s, char *err, size_t errsz)
{
    const sv_serve_opts *o = s->o;
    char *path = o->tokenizer ? xstrdup(o->tokenizer) : path_join(o->model_dir, "tokenizer.json");
    bool ok = access(path, F_OK) == 0; /* a file, a folder, or a pipe that feeds one */
    if (!ok) {
        snprintf(err, errsz, "no tokenizer: %s does not exist; copy the model's tokenizer.json "
                 "there or give --tokenizer PATH", path);
    } else {
        diag_list d;
        diag_list_init(&d);
        s->tok = tok_load(path, &d);
        if (!s->tok) diags_to(&d, err, errsz);
        diag_list_free(&d);
        ok = s->tok != NULL;
    }
    free(path);
    return ok;
}

static void add_stop_id(sv_server *s, int32_t id)
{
    if (id < 0 || id >= s->vocab || s->n_stop_ids == (int)(sizeof s->stop_ids / sizeof s->stop_ids[0]))
        return;
    for (int i = 0; i < s->n_stop_ids; i++)
        if (s->stop_ids[i] == id) return;
    s->stop_ids[s->n_stop_ids++] = id;
}

/* eos, and the end-of-turn tokens of the chat families (the ids the
 * models' generation_config.json lists as eos_token_id). */
static void stop_ids(sv_server *s)
{
    add_stop_id(s, tok_eos_id(s->tok) >= 0 ? tok_eos_id(s->tok) : s->model.cfg.eos_id);
    static const char *const ends[] = {"<|im_end|>", "<|endoftext|>", "<|eot_id|>",
                                       "<|eom_id|>", "<|end_of_text|>"};
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++)
        add_stop_id(s, tok_token_id(s->tok, ends[i]));
}

static bool load_template(sv_server *s, char *err, size_t errsz)
{
    diag_list d;
    diag_list_init(&d);
    s->has_tmpl = chat_template_for_tokenizer(s->tok, s->o->chat_template, &s->tmpl, &d);
    if (!s->has_tmpl) diags_to(&d, s->tmpl_err, sizeof s->tmpl_err);
    diag_list_free(&d);
    if (!s->has_tmpl && s->o->chat_template) {
        snprintf(err, errsz, "--chat-template %s: %s", s->o->chat_template, s->tmpl_err);
        return false;
    }
    if (s->o->quiet) return true;
    if (!s->has_tmpl) {
        fprintf(stderr, "lathe serve: warning: no chat template, /v1/chat/completions will "
                "refuse requests: %s\n", s->tmpl_err);
    } else {
        sb line;
        sb_init(&line);
        chat_template_describe(&s->tmpl, &line);
        fprintf(stderr, "lathe serve: chat template %s\n", sb_str(&line));
        sb_free(&line);
    }
    return true;
}

static bool load_model(sv_server *s, char *err, size_t errsz)
{
    tr_model_opts mo = {.mode = TR_MODE_LORA};
    s->be = tr_backend_cpu_create(s->o->threads);
    if (!tr_model_load(&s->model, s->o->model_dir, &mo, s->be, err, errsz)) return false;
    s->model_loaded = true;
    s->vocab = s->model.cfg.vocab;
    if ((size_t)s->vocab < tok_vocab_size(s->tok)) {
        snprintf(err, errsz, "the tokenizer has %zu ids but the model's vocabulary only %d: give "
                 "the model's own tokenizer (--tokenizer)", tok_vocab_size(s->tok), s->vocab);
        return false;
    }
    return true;
}

static bool load_all(sv_server *s, char *err, size_t errsz)
{
    const sv_serve_opts *o = s->o;
    if (!load_tokenizer(s, err, errsz) || !load_model(s, err, errsz) ||
        !load_template(s, err, errsz))
        return false;
    stop_ids(s);
    s->engine = sv_engine_create(&s->model, &o->engine, err, errsz);
    if (!s->engine) return false;
    s->max_context = sv_engine_options(s->engine)->max_context;
    for (size_t i = 0; i < o->n_adapters; i++) {
        char why[1024];
        if (!sv_engine_add_adapter(s->engine, o->adapters[i].name, o->adapters[i].dir, why,
                                   sizeof why)) {
            snprintf(err, errsz, "--adapter %s=%s: %s", o->adapters[i].name, o->adapters[i].dir,
                     why);
            return false;
        }
    }
    return true;
}

static void unload_all(sv_server *s)
{
    if (s->engine) sv_engine_free(s->engine);
    s->engine = NULL;
    if (s->has_tmpl) chat_template_free(&s->tmpl);
    if (s->model_loaded) tr_model_free(&s->model);
    if (s->tok) tok_free(s->tok);
    if (s->be) s->be->destroy(s->be);
}

/* ---------------------------------------------------------------- running */

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits until no HTTP request is in flight, or the deadline (monotonic ns). */
static bool wait_inflight(sv_server *s, int64_t deadline)
{
    pthread_mutex_lock(&s->mu);
    while (s->inflight > 0 && sv_now_ns() < deadline) {
        pthread_mutex_unlock(&s->mu);
        sleep_ms(20);
        pthread_mutex_lock(&s->mu);
    }
    bool idle = s->inflight == 0;
    pthread_mutex_unlock(&s->mu);
    return idle;
}

static void drain(sv_server *s)
{
    atomic_store(&s->state, SV_DRAINING);
    if (!s->o->quiet)
        fprintf(stderr, "lathe serve: draining: new requests get 503, running ones finish (at "
                "most %.0f s)\n", s->o->drain_timeout);
    int64_t deadline = sv_now_ns() + (int64_t)(s->o->drain_timeout * 1e9);
    bool idle = sv_engine_drain(s->engine, (int)(s->o->drain_timeout * 1000));
    idle = wait_inflight(s, deadline) && idle;
    if (idle) return;
    fprintf(stderr, "lathe serve: the drain timed out after %g s; cancelling what still runs\n",
            s->o->drain_timeout);
    sv_gen_cancel_all(s);
    /* the cancelled replies end with an error; give them a moment to be sent */
    wait_inflight(s, sv_now_ns() + 10 * (int64_t)1000000000);
}

int sv_server_run(const sv_serve_opts *o, volatile sig_atomic_t *stop)
{
    sv_server s;
    memset(&s, 0, sizeof s);
    s.o = o;
    s.base_id = o->served_name ? o->served_name : o->model_dir;
    s.created = (int64_t)time(NULL);
    atomic_init(&s.state, SV_LOADING);
    pthread_mutex_init(&s.tok_mu, NULL);
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    sv_metrics_init(&s.metrics);
    char err[2048];
    int rc = sv_http_start(&s, err, sizeof err);
    if (rc == LT_EXIT_OK) {
        fprintf(stderr, "lathe serve: listening on http://%s (loading %s)\n", s.address,
                o->model_dir);
        if (!load_all(&s, err, sizeof err)) {
            fprintf(stderr, "lathe serve: %s\n", err);
            rc = LT_EXIT_INVALID;
        }
    } else {
        fprintf(stderr, "lathe serve: %s\n", err);
    }
    if (rc == LT_EXIT_OK) {
        atomic_store(&s.state, SV_READY);
        fprintf(stderr, "lathe serve: ready: model %s (context %d tokens), %zu adapter%s, on "
                "http://%s\n", s.base_id, s.max_context, o->n_adapters,
                o->n_adapters == 1 ? "" : "s", s.address);
        while (!*stop) sleep_ms(50);
        drain(&s);
        fprintf(stderr, "lathe serve: stopped\n");
    }
    sv_http_stop(&s);
    unload_all(&s);
    sv_metrics_free(&s.metrics);
    pthread_cond_destroy(&s.cv);
    pthread_mutex_destroy(&s.mu);
    pthread_mutex_destroy(&s.tok_mu);
    return rc;
}
