/* test_engine.c: the serving engine (lib/serve/engine.h) on random tiny
 * models and random LoRA adapters: every request's output equals
 * tr_generate's for the same prompt and adapter (greedy and sampled), alone
 * and in a batch of 32 mixed requests (three adapters and the base model,
 * prompts longer than prefill_chunk, different max_tokens); admission waits
 * for KV blocks; SV_SUBMIT_FULL and SV_SUBMIT_INVALID; LRU eviction and
 * reload of adapters; adapters of the wrong rank, base or target refused;
 * cancel; drain. Also the adapter loader and batched forward of lib/nn. */
#include "serve/engine.h"

#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "../common/tiny_models.h"

/* ---------------------------------------------------------------- fixtures */

typedef struct fixture {
    char *root;           /* temporary folder */
    char *model_dir;      /* the base model (tiny, qwen2: qkv bias) */
    char *ad_dir[3];      /* three adapters */
    tr_backend *be;
    tr_model base;        /* what the engine serves */
    tr_model ref[4];      /* references for tr_generate: ref[0] base, ref[1+i] with adapter i */
} fixture;

static fixture F;

static const char *const ad_names[3] = {"alpha", "beta", "gamma"};

/* A random adapter of rank r on targets of the model in model_dir, written
 * into dir as a PEFT folder. */
static void write_adapter(const char *model_dir, const char *dir, int rank, const char *targets,
                          float alpha, uint64_t seed)
{
    char err[512];
    tr_model_opts o = {.mode = TR_MODE_LORA, .lora = {.rank = rank, .alpha = alpha}, .seed = seed};
    assert_true(tr_targets_parse(targets, &o.lora.targets, err, sizeof err));
    tm_write_adapter(F.be, model_dir, dir, &o, seed, 0.2f);
}

static void load_plain(tr_model *m, const char *dir)
{
    char err[512];
    tr_model_opts o = {.mode = TR_MODE_LORA};
    bool ok = tr_model_load(m, dir, &o, F.be, err, sizeof err);
    if (!ok) fprintf(stderr, "%s\n", err);
    assert_true(ok);
}

static int setup(void **state)
{
    (void)state;
    char err[512];
    F.root = xstrdup("/tmp/lathe-test-engine-XXXXXX");
    assert_non_null(mkdtemp(F.root));
    F.be = tr_backend_cpu_create(0);
    F.model_dir = path_join(F.root, "model");
    tr_config c;
    assert_true(tr_preset_config("tiny", TR_ARCH_QWEN2, &c));
    c.max_pos = 256;
    assert_true(tr_init_model(F.model_dir, &c, TR_F32, 7, err, sizeof err));
    static const char *const targets[3] = {"q_proj,v_proj", "all-linear", "gate_proj,down_proj,o_proj"};
    static const int ranks[3] = {4, 8, 2};
    for (int i = 0; i < 3; i++) {
        F.ad_dir[i] = path_join(F.root, ad_names[i]);
        write_adapter(F.model_dir, F.ad_dir[i], ranks[i], targets[i], 2.0f * ranks[i], 100 + i);
    }
    load_plain(&F.base, F.model_dir);
    for (int i = 0; i < 4; i++) {
        load_plain(&F.ref[i], F.model_dir);
        if (i > 0) assert_true(tr_model_load_adapter(&F.ref[i], F.ad_dir[i - 1], err, sizeof err));
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char err[512];
    for (int i = 0; i < 4; i++) tr_model_free(&F.ref[i]);
    tr_model_free(&F.base);
    F.be->destroy(F.be);
    assert_int_equal(file_remove_tree(F.root, err, sizeof err), 0);
    for (int i = 0; i < 3; i++) free(F.ad_dir[i]);
    free(F.model_dir);
    free(F.root);
    return 0;
}

/* ---------------------------------------------------------------- collecting events */

#define MAXTOK 256

typedef struct result {
    int32_t tokens[MAXTOK];
    int n;
    bool done;
    sv_finish finish;
    int prompt_tokens, generated_tokens;
    char message[512];
} result;

typedef struct collector {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    bool order_ok; /* tokens arrive with index 0, 1, ... and DONE last */
    /* a gate: the callback of gate_id's token gate_index waits until opened */
    uint64_t gate_id;
    int gate_index;
    bool gate_open, gate_reached;
    sv_engine *cancel_engine; /* cancel cancel_id at its token cancel_index */
    uint64_t cancel_id;
    int cancel_index;
} collector;

typedef struct slot {
    collector *c;
    result r;
    uint64_t id;
} slot;

static void collector_init(collector *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    c->order_ok = true;
    c->gate_open = true;
}

static void collector_destroy(collector *c)
{
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
}

static void on_event(const sv_event *ev, void *ud)
{
    slot *s = ud;
    collector *c = s->c;
    pthread_mutex_lock(&c->mu);
    if (ev->kind == SV_EVENT_TOKEN) {
        if (s->r.done || ev->index != s->r.n || s->r.n >= MAXTOK || ev->id != s->id) c->order_ok = false;
        else s->r.tokens[s->r.n++] = ev->token;
        if (ev->id == c->gate_id && ev->index == c->gate_index) {
            c->gate_reached = true;
            pthread_cond_broadcast(&c->cv);
            while (!c->gate_open && c->gate_id == ev->id && c->gate_index == ev->index)
                pthread_cond_wait(&c->cv, &c->mu);
        }
        if (c->cancel_engine && ev->id == c->cancel_id && ev->index == c->cancel_index) {
            pthread_mutex_unlock(&c->mu);
            assert_true(sv_engine_cancel(c->cancel_engine, ev->id));
            pthread_mutex_lock(&c->mu);
        }
    } else {
        if (s->r.done || ev->generated_tokens != s->r.n) c->order_ok = false;
        s->r.done = true;
        s->r.finish = ev->finish;
        s->r.prompt_tokens = ev->prompt_tokens;
        s->r.generated_tokens = ev->generated_tokens;
        if (ev->message) snprintf(s->r.message, sizeof s->r.message, "%s", ev->message);
        c->done++;
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
}

static void wait_done(collector *c, int n)
{
    pthread_mutex_lock(&c->mu);
    while (c->done < n) pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

static void wait_gate(collector *c)
{
    pthread_mutex_lock(&c->mu);
    while (!c->gate_reached) pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

/* Moves the closed gate to another request's token, releasing the held one. */
/* Before the requests that reach it are submitted: the gate shut at
 * request id's index-th token. */
static void shut_gate(collector *c, uint64_t id, int index)
{
    c->gate_id = id;
    c->gate_index = index;
    c->gate_open = false;
}

static void move_gate(collector *c, uint64_t id, int index)
{
    pthread_mutex_lock(&c->mu);
    c->gate_id = id;
    c->gate_index = index;
    c->gate_reached = false;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void open_gate(collector *c)
{
    pthread_mutex_lock(&c->mu);
    c->gate_open = true;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* ---------------------------------------------------------------- requests */

typedef struct job {
    int32_t prompt[200];
    int n_prompt;
    int adapter;      /* -1 base, else 0..2 */
    tr_sample_opts so;
    int32_t stop;     /* -1: none */
} job;

static job make_job(int i, int n_prompt, int adapter, int max_new, float temp, uint64_t seed)
{
    job j;
    memset(&j, 0, sizeof j);
    j.n_prompt = n_prompt;
    for (int t = 0; t < n_prompt; t++) j.prompt[t] = (int32_t)((i * 131 + t * 37 + 11) % 512);
    j.adapter = adapter;
    j.so = (tr_sample_opts){.temperature = temp, .top_p = temp > 0 ? 0.9f : 1.0f,
                            .max_new = max_new, .seed = seed, .eos_id = -1};
    j.stop = -1;
    return j;
}

/* tr_generate's output for the job, on the reference model of its adapter. */
static int reference(const job *j, int32_t *out)
{
    tr_sample_opts so = j->so;
    so.eos_id = j->stop;
    return tr_generate(&F.ref[j->adapter + 1], j->prompt, j->n_prompt, &so, out, NULL, NULL);
}

static sv_submit_status submit(sv_engine *e, const job *j, slot *s, collector *c, char *err,
                               size_t errsz)
{
    memset(&s->r, 0, sizeof s->r);
    s->c = c;
    sv_request r = {.prompt = j->prompt, .n_prompt = j->n_prompt,
                    .adapter = j->adapter >= 0 ? ad_names[j->adapter] : NULL, .sample = j->so,
                    .stop_ids = j->stop >= 0 ? &j->stop : NULL, .n_stop = j->stop >= 0,
                    .on_event = on_event, .ud = s};
    pthread_mutex_lock(&c->mu); /* s->id is set before its first event is checked */
    sv_submit_status st = sv_engine_submit(e, &r, &s->id, err, errsz);
    pthread_mutex_unlock(&c->mu);
    return st;
}

static void submit_ok(sv_engine *e, const job *j, slot *s, collector *c)
{
    char err[512] = "";
    sv_submit_status st = submit(e, j, s, c, err, sizeof err);
    if (st != SV_SUBMIT_OK) fprintf(stderr, "submit: %d %s\n", st, err);
    assert_int_equal(st, SV_SUBMIT_OK);
}

static void check_equal(const job *j, const result *r, int which)
{
    int32_t want[MAXTOK];
    int n = reference(j, want);
    bool same = n == r->n && memcmp(want, r->tokens, (size_t)n * sizeof *want) == 0;
    if (!same) {
        fprintf(stderr, "# job %d (adapter %d, prompt %d, max %d, temp %.1f): engine gave %d tokens,"
                " tr_generate %d\n#   engine:", which, j->adapter, j->n_prompt, j->so.max_new,
                j->so.temperature, r->n, n);
        for (int i = 0; i < r->n; i++) fprintf(stderr, " %d", r->tokens[i]);
        fprintf(stderr, "\n#   ref:   ");
        for (int i = 0; i < n; i++) fprintf(stderr, " %d", want[i]);
        fprintf(stderr, "\n");
    }
    assert_true(same);
    assert_true(r->done);
    assert_int_equal(r->finish, j->stop >= 0 && n > 0 && want[n - 1] == j->stop && n <= j->so.max_new
                                    ? SV_FINISH_STOP : SV_FINISH_LENGTH);
}

static sv_engine *engine(const sv_engine_opts *o, bool adapters)
{
    char err[512];
    sv_engine *e = sv_engine_create(&F.base, o, err, sizeof err);
    if (!e) fprintf(stderr, "%s\n", err);
    assert_non_null(e);
    for (int i = 0; adapters && i < 3; i++) {
        bool ok = sv_engine_add_adapter(e, ad_names[i], F.ad_dir[i], err, sizeof err);
        if (!ok) fprintf(stderr, "%s\n", err);
        assert_true(ok);
    }
    return e;
}

/* The end of a test: every KV block is back; frees the engine and c. */
static void free_all_back(sv_engine *e, collector *c)
{
    sv_engine_stats st;
    sv_engine_get_stats(e, &st);
    assert_int_equal(st.kv_blocks_used, 0);
    sv_engine_free(e);
    collector_destroy(c);
}

/* 32 mixed jobs: base and three adapters, prompts of 1..45 tokens (chunk 8),
 * max_tokens 1..16; sampled with temperature temp when > 0. */
static void mixed_jobs(job *jobs, int n, float temp)
{
    for (int i = 0; i < n; i++) {
        int np = 1 + (i * 7) % 45, mx = 1 + (i * 5) % 16;
        jobs[i] = make_job(i, np, i % 4 - 1, mx, temp, 1000 + (uint64_t)i);
    }
}

static void run_mixed(float temp)
{
    enum { N = 32 };
    static job jobs[N];
    static slot slots[N];
    mixed_jobs(jobs, N, temp);
    sv_engine_opts o = {.max_batch = 32, .prefill_chunk = 8, .step_tokens = 64, .kv_block = 4};
    sv_engine *e = engine(&o, true);
    collector c;
    collector_init(&c);
    /* alone: one at a time */
    for (int i = 0; i < N; i++) {
        submit_ok(e, &jobs[i], &slots[i], &c);
        wait_done(&c, i + 1);
        check_equal(&jobs[i], &slots[i].r, i);
    }
    /* together */
    c.done = 0;
    for (int i = 0; i < N; i++) submit_ok(e, &jobs[i], &slots[i], &c);
    wait_done(&c, N);
    for (int i = 0; i < N; i++) check_equal(&jobs[i], &slots[i].r, i);
    assert_true(c.order_ok);
    sv_engine_stats st;
    sv_engine_get_stats(e, &st);
    assert_int_equal(st.running, 0);
    assert_int_equal(st.waiting, 0);
    assert_int_equal(st.kv_blocks_used, 0);
    printf("# %d steps for %llu prompt and %llu generated tokens\n", (int)st.steps,
           (unsigned long long)st.prompt_tokens, (unsigned long long)st.generated_tokens);
    sv_engine_free(e);
    collector_destroy(&c);
}

/* ---------------------------------------------------------------- tests */

static void test_greedy_equals_generate(void **state)
{
    (void)state;
    run_mixed(0.0f);
}

static void test_sampled_equals_generate(void **state)
{
    (void)state;
    run_mixed(0.8f);
}

/* The adapters change the output (or the equality tests prove little). */
static void test_adapters_matter(void **state)
{
    (void)state;
    job j = make_job(3, 12, -1, 12, 0.0f, 1);
    int32_t out[4][MAXTOK];
    int n[4];
    for (int a = -1; a < 3; a++) {
        j.adapter = a;
        n[a + 1] = reference(&j, out[a + 1]);
    }
    for (int a = 1; a < 4; a++)
        assert_true(n[a] != n[0] || memcmp(out[a], out[0], (size_t)n[0] * sizeof(int32_t)) != 0);
}

/* lib/nn's batched forward gives logits equal bit for bit to tr_model_decode
 * of each sequence alone: twelve sequences of three adapters and the base,
 * prompts of 1..40 tokens prefilled in chunks of 5 mixed with decodes, KV in
 * scattered blocks of 4. */
static void test_forward_batch_bitwise(void **state)
{
    (void)state;
    enum { S = 12, DEC = 3, CHUNK = 5, BL = 4 };
    char err[512];
    tr_model *m = &F.base;
    int V = m->cfg.vocab;
    tr_adapter ad[3];
    for (int i = 0; i < 3; i++) assert_true(tr_adapter_load(&ad[i], m, F.ad_dir[i], err, sizeof err));
    job jobs[S];
    float *want = xmalloc((size_t)S * (DEC + 1) * V * sizeof(float));
    int32_t dec[S][DEC];
    int nblk = 0, blocks[S][16];
    for (int i = 0; i < S; i++) {
        jobs[i] = make_job(i, 1 + (i * 11) % 40, i % 4 - 1, DEC, 0.0f, 1);
        for (int k = 0; k < DEC; k++) dec[i][k] = (int32_t)((i * 17 + k * 5 + 3) % V);
        tr_kv_cache c;
        tr_model *r = &F.ref[jobs[i].adapter + 1];
        tr_kv_cache_init(&c, r, jobs[i].n_prompt + DEC);
        assert_true(tr_model_decode(r, &c, jobs[i].prompt, jobs[i].n_prompt, want + (size_t)i * (DEC + 1) * V));
        for (int k = 0; k < DEC; k++)
            assert_true(tr_model_decode(r, &c, &dec[i][k], 1, want + ((size_t)i * (DEC + 1) + k + 1) * V));
        tr_kv_cache_free(&c);
    }
    for (int b = 0; b < 16; b++) /* scattered: sequence i's b-th block */
        for (int i = 0; i < S; i++) blocks[i][b] = nblk++;
    size_t kvd = (size_t)m->cfg.n_kv_heads * m->cfg.head_dim;
    size_t floats = (size_t)nblk * m->cfg.n_layers * BL * kvd;
    tr_kv_pool pool = {xcalloc(floats, sizeof(float)), xcalloc(floats, sizeof(float)), BL};
    int done[S] = {0}, ndec[S] = {0};
    tr_batch_seq seqs[S];
    int who[S];
    float *logits = xmalloc((size_t)S * V * sizeof(float));
    int checked = 0;
    for (int step = 0; step < 100; step++) {
        int ns = 0;
        for (int i = 0; i < S; i++) {
            if (ndec[i] == DEC + 1) continue;
            tr_batch_seq *q = &seqs[ns];
            q->blocks = blocks[i];
            q->adapter = jobs[i].adapter >= 0 ? &ad[jobs[i].adapter] : NULL;
            if (done[i] < jobs[i].n_prompt) {
                int n = jobs[i].n_prompt - done[i] < CHUNK ? jobs[i].n_prompt - done[i] : CHUNK;
                *q = (tr_batch_seq){jobs[i].prompt + done[i], n, done[i], blocks[i], q->adapter,
                                    done[i] + n == jobs[i].n_prompt};
                done[i] += n;
            } else {
                *q = (tr_batch_seq){&dec[i][ndec[i] - 1], 1, jobs[i].n_prompt + ndec[i] - 1,
                                    blocks[i], q->adapter, true};
            }
            who[ns++] = i;
        }
        if (!ns) break;
        tr_model_forward_batch(m, &pool, seqs, ns, logits);
        int row = 0;
        for (int k = 0; k < ns; k++) {
            if (!seqs[k].logits) continue;
            int i = who[k];
            const float *w = want + ((size_t)i * (DEC + 1) + ndec[i]) * V;
            if (memcmp(w, logits + (size_t)row * V, (size_t)V * sizeof(float)) != 0) {
                double md = 0;
                for (int j = 0; j < V; j++) {
                    double d = fabs((double)w[j] - logits[(size_t)row * V + j]);
                    md = d > md ? d : md;
                }
                fprintf(stderr, "# sequence %d, logits %d: max difference %.3g\n", i, ndec[i], md);
                fail();
            }
            ndec[i]++;
            row++;
            checked++;
        }
    }
    assert_int_equal(checked, S * (DEC + 1));
    free(logits);
    free(pool.k);
    free(pool.v);
    free(want);
    for (int i = 0; i < 3; i++) tr_adapter_free(&ad[i]);
}

/* tr_sample's nucleus as first written: every token sorted. The oracle
 * for the thresholded sort tr_sample does now. */
typedef struct pidx {
    float p;
    int i;
} pidx;

static int pidx_desc(const void *a, const void *b)
{
    const pidx *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return x->i - y->i;
}

static int sample_sorting_all(float *logits, int V, float temp, float top_p, tr_rng *rng)
{
    int best = 0;
    for (int i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    float mx = logits[best];
    double sum = 0;
    for (int i = 0; i < V; i++) {
        logits[i] = expf((logits[i] - mx) / temp);
        sum += logits[i];
    }
    double u = (double)(tr_rng_next(rng) >> 11) * (1.0 / 9007199254740992.0);
    pidx *pi = xmalloc((size_t)V * sizeof *pi);
    for (int i = 0; i < V; i++) pi[i] = (pidx){(float)(logits[i] / sum), i};
    qsort(pi, (size_t)V, sizeof *pi, pidx_desc);
    double mass = 0;
    int n = 0;
    while (n < V && mass < top_p) mass += pi[n++].p;
    double acc = 0, target = u * mass;
    int pick = pi[n - 1].i;
    for (int i = 0; i < n; i++) {
        acc += pi[i].p;
        if (acc > target) {
            pick = pi[i].i;
            break;
        }
    }
    free(pi);
    return pick;
}

/* Nucleus sampling picks what sorting every token picked, on peaked and
 * flat distributions, ties included. */
static void test_top_p_same_as_full_sort(void **state)
{
    (void)state;
    enum { V = 3000 };
    float *a = xmalloc(V * sizeof(float)), *b = xmalloc(V * sizeof(float));
    tr_rng gen;
    tr_rng_seed(&gen, 42);
    static const float spreads[] = {0.01f, 1.0f, 5.0f, 30.0f};
    static const float top_ps[] = {0.1f, 0.5f, 0.9f, 0.99f, 0.999999f};
    for (int trial = 0; trial < 200; trial++) {
        float spread = spreads[trial % 4], top_p = top_ps[trial % 5];
        for (int i = 0; i < V; i++) a[i] = spread * tr_rng_normal(&gen);
        if (trial % 7 == 0)
            for (int i = 0; i < V; i += 3) a[i] = a[0]; /* ties */
        memcpy(b, a, V * sizeof(float));
        tr_sample_opts so = {.temperature = 0.8f, .top_p = top_p, .max_new = 1, .eos_id = -1};
        tr_rng r1, r2;
        tr_rng_seed(&r1, (uint64_t)trial);
        tr_rng_seed(&r2, (uint64_t)trial);
        int x = tr_sample(a, V, &so, &r1), y = sample_sorting_all(b, V, 0.8f, top_p, &r2);
        if (x != y) fprintf(stderr, "# trial %d: %d, full sort %d\n", trial, x, y);
        assert_int_equal(x, y);
    }
    free(a);
    free(b);
}

/* The batched pass (through tr_model_decode, a prompt then one token at a
 * time) against the training forward (tr_model_logits) on Llama, Qwen3
 * (q/k norm) and Mistral with a sliding window of 8. */
static void test_decode_matches_full_forward(void **state)
{
    (void)state;
    static const tr_arch archs[] = {TR_ARCH_LLAMA, TR_ARCH_QWEN3, TR_ARCH_MISTRAL};
    char err[512];
    enum { T = 40, P = 13 };
    for (int a = 0; a < 3; a++) {
        tr_config c;
        assert_true(tr_preset_config("tiny", archs[a], &c));
        c.max_pos = 64;
        if (archs[a] == TR_ARCH_MISTRAL) c.sliding_window = 8;
        char *dir = path_join(F.root, a == 0 ? "llama" : a == 1 ? "qwen3" : "mistral");
        assert_true(tr_init_model(dir, &c, TR_F32, 3, err, sizeof err));
        tr_model m;
        load_plain(&m, dir);
        assert_int_equal(m.cfg.sliding_window, c.sliding_window);
        assert_int_equal(m.cfg.qk_norm, c.qk_norm);
        int V = m.cfg.vocab;
        int32_t ids[T];
        for (int t = 0; t < T; t++) ids[t] = (int32_t)((t * 29 + 7) % V);
        float *full = xmalloc((size_t)T * V * sizeof(float)), *one = xmalloc((size_t)V * sizeof(float));
        tr_model_logits(&m, ids, T, full);
        tr_kv_cache kc;
        tr_kv_cache_init(&kc, &m, T);
        double md = 0;
        assert_true(tr_model_decode(&m, &kc, ids, P, one));
        for (int j = 0; j < V; j++) md = fmax(md, fabs(one[j] - full[(size_t)(P - 1) * V + j]));
        for (int t = P; t < T; t++) {
            assert_true(tr_model_decode(&m, &kc, ids + t, 1, one));
            for (int j = 0; j < V; j++) md = fmax(md, fabs(one[j] - full[(size_t)t * V + j]));
        }
        printf("# %s: max |decode - full forward| = %.3g\n", c.model_type, md);
        assert_true(md < 1e-4);
        tr_kv_cache_free(&kc);
        free(full);
        free(one);
        tr_model_free(&m);
        free(dir);
    }
}

/* A stop id ends the request with SV_FINISH_STOP, as eos ends tr_generate. */
static void test_stop_id(void **state)
{
    (void)state;
    job j = make_job(5, 10, 1, 20, 0.0f, 1);
    int32_t out[MAXTOK];
    int n = reference(&j, out);
    assert_true(n >= 4);
    j.stop = out[3];
    int k = 0;
    while (out[k] != j.stop) k++; /* its first occurrence */
    sv_engine *e = engine(&(sv_engine_opts){0}, true);
    collector c;
    collector_init(&c);
    slot s;
    submit_ok(e, &j, &s, &c);
    wait_done(&c, 1);
    assert_int_equal(s.r.n, k + 1);
    assert_int_equal(s.r.finish, SV_FINISH_STOP);
    check_equal(&j, &s.r, 0);
    sv_engine_free(e);
    collector_destroy(&c);
}

/* With blocks for two requests and a small one, six wait in order and run
 * as blocks free. */
static void test_admission_waits_for_blocks(void **state)
{
    (void)state;
    enum { N = 6 };
    job jobs[N];
    slot slots[N + 1];
    for (int i = 0; i < N; i++) jobs[i] = make_job(i, 10, i % 4 - 1, 10, 0.0f, 1);
    job small = make_job(9, 2, -1, 2, 0.0f, 1); /* 4 tokens: one block */
    size_t per_block = 2 * (size_t)F.base.cfg.n_layers * 4 *
                       (size_t)(F.base.cfg.n_kv_heads * F.base.cfg.head_dim) * sizeof(float);
    /* a job: 20 tokens = 5 blocks of 4; 12 blocks: the small one and two jobs */
    sv_engine_opts o = {.kv_block = 4, .kv_bytes = 12 * per_block};
    sv_engine *e = engine(&o, true);
    collector c;
    collector_init(&c);
    shut_gate(&c, 1, 0);
    submit_ok(e, &small, &slots[N], &c);
    wait_gate(&c); /* the engine thread is held in the small one's first token */
    for (int i = 0; i < N; i++) submit_ok(e, &jobs[i], &slots[i], &c);
    move_gate(&c, slots[0].id, 0);
    wait_gate(&c); /* held again in the first job's first token */
    sv_engine_stats st;
    sv_engine_get_stats(e, &st);
    assert_int_equal(st.kv_blocks_total, 12);
    assert_int_equal(st.running, 3);
    assert_int_equal(st.waiting, 4);
    assert_int_equal(st.kv_blocks_used, 11);
    open_gate(&c);
    wait_done(&c, N + 1);
    for (int i = 0; i < N; i++) check_equal(&jobs[i], &slots[i].r, i);
    check_equal(&small, &slots[N].r, N);
    free_all_back(e, &c);
}

/* max_waiting requests wait already: SV_SUBMIT_FULL; too long: INVALID. */
static void test_submit_full_and_invalid(void **state)
{
    (void)state;
    sv_engine_opts o = {.max_batch = 1, .max_waiting = 2, .max_context = 32};
    sv_engine *e = engine(&o, false);
    collector c;
    collector_init(&c);
    shut_gate(&c, 1, 0);
    job j = make_job(1, 5, -1, 5, 0.0f, 1);
    slot s[4];
    char err[512];
    submit_ok(e, &j, &s[0], &c);
    wait_gate(&c); /* request 1 runs; the engine thread is held */
    submit_ok(e, &j, &s[1], &c);
    submit_ok(e, &j, &s[2], &c);
    assert_int_equal(submit(e, &j, &s[3], &c, err, sizeof err), SV_SUBMIT_FULL);
    printf("# full: %s\n", err);
    job big = make_job(2, 30, -1, 10, 0.0f, 1);
    assert_int_equal(submit(e, &big, &s[3], &c, err, sizeof err), SV_SUBMIT_INVALID);
    printf("# invalid: %s\n", err);
    assert_non_null(strstr(err, "30 tokens"));
    assert_non_null(strstr(err, "max_tokens is 10"));
    assert_non_null(strstr(err, "40 in all"));
    assert_non_null(strstr(err, "32 tokens"));
    job huge = make_job(2, 33, -1, 1, 0.0f, 1);
    assert_int_equal(submit(e, &huge, &s[3], &c, err, sizeof err), SV_SUBMIT_INVALID);
    printf("# invalid: %s\n", err);
    assert_non_null(strstr(err, "33 tokens"));
    assert_non_null(strstr(err, "holds 32"));
    job empty = make_job(2, 0, -1, 10, 0.0f, 1);
    assert_int_equal(submit(e, &empty, &s[3], &c, err, sizeof err), SV_SUBMIT_INVALID);
    job noad = make_job(2, 4, 0, 4, 0.0f, 1); /* no adapter registered */
    assert_int_equal(submit(e, &noad, &s[3], &c, err, sizeof err), SV_SUBMIT_NO_ADAPTER);
    open_gate(&c);
    wait_done(&c, 3);
    for (int i = 0; i < 3; i++) check_equal(&j, &s[i].r, i);
    sv_engine_free(e);
    collector_destroy(&c);
}

static bool loaded(sv_engine *e, const char *name)
{
    size_t n;
    sv_adapter_info *a = sv_engine_adapters(e, &n);
    bool l = false;
    for (size_t i = 0; i < n; i++)
        if (strcmp(a[i].name, name) == 0) l = a[i].loaded;
    sv_adapter_info_free(a, n);
    return l;
}

/* max_adapters 2 and three adapters used in turn: the least recently used
 * one is evicted and loaded again, with the same output. */
static void test_lru_eviction(void **state)
{
    (void)state;
    sv_engine_opts o = {.max_adapters = 2};
    sv_engine *e = engine(&o, true);
    sv_engine_stats st;
    sv_engine_get_stats(e, &st);
    assert_int_equal(st.adapters_loaded, 2);
    assert_int_equal(st.adapter_evictions, 1); /* alpha made room for gamma */
    assert_false(loaded(e, "alpha"));
    collector c;
    collector_init(&c);
    slot s;
    int order[] = {0, 1, 2, 0, 2, 1};
    for (int k = 0; k < 6; k++) {
        job j = make_job(k, 9, order[k], 6, 0.0f, 1);
        submit_ok(e, &j, &s, &c);
        wait_done(&c, k + 1);
        check_equal(&j, &s.r, k);
        assert_true(loaded(e, ad_names[order[k]]));
        sv_engine_get_stats(e, &st);
        assert_true(st.adapters_loaded <= 2);
    }
    sv_engine_get_stats(e, &st);
    printf("# %llu loads, %llu evictions\n", (unsigned long long)st.adapter_loads,
           (unsigned long long)st.adapter_evictions);
    /* loads: 3 at registration, then alpha, beta (evicted by alpha), gamma? */
    assert_true(st.adapter_loads >= 6);
    assert_int_equal(st.adapter_loads - st.adapter_evictions, 2);
    size_t n;
    sv_adapter_info *a = sv_engine_adapters(e, &n);
    assert_int_equal(n, 3);
    assert_string_equal(a[0].name, "alpha");
    assert_int_equal(a[1].rank, 8);
    assert_true(a[0].last_used > 0);
    sv_adapter_info_free(a, n);
    assert_true(sv_engine_remove_adapter(e, "beta"));
    assert_false(sv_engine_remove_adapter(e, "beta"));
    job j = make_job(1, 4, 1, 4, 0.0f, 1);
    char err[256];
    assert_int_equal(submit(e, &j, &s, &c, err, sizeof err), SV_SUBMIT_NO_ADAPTER);
    sv_engine_free(e);
    collector_destroy(&c);
}

/* Writes text into dir/name and frees it. */
static void write_text(const char *dir, const char *name, char *text)
{
    char *p = path_join(dir, name);
    assert_int_equal(file_write_atomic(p, text, strlen(text)), 0);
    free(p);
    free(text);
}

static char *read_text(const char *dir, const char *name)
{
    char *p = path_join(dir, name), err[256];
    size_t len;
    char *t = file_read_all(p, 1 << 20, &len, err, sizeof err);
    assert_non_null(t);
    free(p);
    return t;
}

static void copy_file(const char *from_dir, const char *to_dir, const char *name)
{
    char *p = path_join(from_dir, name), err[256];
    size_t len;
    char *t = file_read_all(p, 1 << 24, &len, err, sizeof err);
    assert_non_null(t);
    free(p);
    p = path_join(to_dir, name);
    assert_int_equal(file_write_atomic(p, t, len), 0);
    free(p);
    free(t);
}

/* Replaces the first `from` in s by `to` (s is freed). */
static char *replace(char *s, const char *from, const char *to)
{
    char *at = strstr(s, from);
    assert_non_null(at);
    char *out = xasprintf("%.*s%s%s", (int)(at - s), s, to, at + strlen(from));
    free(s);
    return out;
}

static void expect_refused(sv_engine *e, const char *dir, const char *const *words)
{
    char err[1024] = "";
    assert_false(sv_engine_add_adapter(e, "bad", dir, err, sizeof err));
    printf("# refused: %s\n", err);
    for (int i = 0; words[i]; i++) {
        if (!strstr(err, words[i])) fprintf(stderr, "missing \"%s\" in: %s\n", words[i], err);
        assert_non_null(strstr(err, words[i]));
    }
}

static void test_bad_adapters(void **state)
{
    (void)state;
    char err[512];
    sv_engine *e = engine(&(sv_engine_opts){0}, false);
    /* wrong rank: alpha's tensors (r = 4) under a config that says 8 */
    char *d = path_join(F.root, "bad-rank");
    assert_true(tr_mkdir_p(d, err, sizeof err));
    copy_file(F.ad_dir[0], d, "adapter_model.safetensors");
    write_text(d, "adapter_config.json", replace(read_text(F.ad_dir[0], "adapter_config.json"),
                                                 "\"r\": 4", "\"r\": 8"));
    expect_refused(e, d, (const char *const[]){"adapter_model.safetensors", "lora_A", "rank 4",
                                               "r = 8", NULL});
    free(d);
    /* wrong base: an adapter of a model with another hidden size */
    tr_config c;
    assert_true(tr_preset_config("tiny", TR_ARCH_QWEN2, &c));
    c.dim = 96;
    c.head_dim = 24;
    char *other = path_join(F.root, "other-model");
    assert_true(tr_init_model(other, &c, TR_F32, 9, err, sizeof err));
    d = path_join(F.root, "bad-base");
    write_adapter(other, d, 4, "q_proj,v_proj", 8, 5);
    expect_refused(e, d, (const char *const[]){"adapter_model.safetensors", "q_proj",
                                               "another base model", NULL});
    free(d);
    free(other);
    /* wrong base: more layers than the model */
    assert_true(tr_preset_config("tiny", TR_ARCH_QWEN2, &c));
    c.n_layers = 3;
    other = path_join(F.root, "deep-model");
    assert_true(tr_init_model(other, &c, TR_F32, 9, err, sizeof err));
    d = path_join(F.root, "bad-layers");
    write_adapter(other, d, 4, "q_proj", 8, 5);
    expect_refused(e, d, (const char *const[]){"layers.2.", "layer 2", "has 2 layers", NULL});
    free(d);
    free(other);
    /* wrong base: fewer layers than the model */
    c.n_layers = 1;
    other = path_join(F.root, "shallow-model");
    assert_true(tr_init_model(other, &c, TR_F32, 9, err, sizeof err));
    d = path_join(F.root, "bad-shallow");
    write_adapter(other, d, 4, "q_proj", 8, 5);
    expect_refused(e, d, (const char *const[]){"layers.1.", "is missing", "layers 0..0",
                                               "another base model", NULL});
    free(d);
    free(other);
    /* unknown target in the config */
    d = path_join(F.root, "bad-target");
    assert_true(tr_mkdir_p(d, err, sizeof err));
    copy_file(F.ad_dir[0], d, "adapter_model.safetensors");
    write_text(d, "adapter_config.json", replace(read_text(F.ad_dir[0], "adapter_config.json"),
                                                 "\"q_proj\"", "\"qq_proj\""));
    expect_refused(e, d, (const char *const[]){"adapter_config.json", "target_modules", "qq_proj",
                                               NULL});
    /* a tensor of a projection the config does not list */
    write_text(d, "adapter_config.json", replace(read_text(F.ad_dir[0], "adapter_config.json"),
                                                 "\"q_proj\",", ""));
    expect_refused(e, d, (const char *const[]){"q_proj.lora_A", "does not list", NULL});
    free(d);
    /* the name is free after the refusals; a second registration is refused */
    assert_true(sv_engine_add_adapter(e, "bad", F.ad_dir[0], err, sizeof err));
    assert_false(sv_engine_add_adapter(e, "bad", F.ad_dir[1], err, sizeof err));
    assert_non_null(strstr(err, "registered already"));
    sv_engine_free(e);
}

/* PEFT's in-memory naming (".lora_A.default.weight") loads as lathe's does,
 * to the same numbers. */
static void test_adapter_peft_names(void **state)
{
    (void)state;
    char err[512];
    char *src = path_join(F.ad_dir[1], "adapter_model.safetensors");
    st_archive a;
    assert_true(st_open(&a, src, err, sizeof err));
    char *d = path_join(F.root, "peft-names");
    assert_true(tr_mkdir_p(d, err, sizeof err));
    copy_file(F.ad_dir[1], d, "adapter_config.json");
    st_writer w;
    st_writer_init(&w);
    float *tmp[256];
    assert_true(a.n < 256);
    for (size_t i = 0; i < a.n; i++) {
        const st_tensor *t = &a.tensors[i];
        char *name = replace(xstrdup(t->name), ".weight", ".default.weight");
        tmp[i] = xmalloc((size_t)t->numel * sizeof(float));
        tr_to_f32(tmp[i], t->data, t->dtype, (size_t)t->numel);
        st_writer_add_f32(&w, name, TR_F32, t->ndim, t->shape, tmp[i]);
        free(name);
    }
    char *dst = path_join(d, "adapter_model.safetensors");
    assert_int_equal(st_writer_save(&w, dst), 0);
    st_writer_free(&w);
    for (size_t i = 0; i < a.n; i++) free(tmp[i]);
    st_close(&a);
    tr_adapter x, y;
    assert_true(tr_adapter_load(&x, &F.base, F.ad_dir[1], err, sizeof err));
    bool ok = tr_adapter_load(&y, &F.base, d, err, sizeof err);
    if (!ok) fprintf(stderr, "%s\n", err);
    assert_true(ok);
    assert_int_equal(x.n_floats, y.n_floats);
    assert_int_equal(x.lora.rank, 8);
    assert_true(x.lora.targets == (1u << TR_NPROJ) - 1);
    assert_memory_equal(x.data, y.data, x.n_floats * sizeof(float));
    assert_true(tr_adapter_bytes(&y) == x.n_floats * sizeof(float));
    tr_adapter_free(&x);
    tr_adapter_free(&y);
    free(dst);
    free(src);
    free(d);
}

/* An evicted adapter whose folder lost its weights ends its request with
 * SV_FINISH_ERROR; an adapter removed while a request uses it serves that
 * request to its end and is freed after. */
static void test_adapter_error_and_remove(void **state)
{
    (void)state;
    char err[512];
    char *d = path_join(F.root, "fragile");
    assert_true(tr_mkdir_p(d, err, sizeof err));
    copy_file(F.ad_dir[0], d, "adapter_config.json");
    copy_file(F.ad_dir[0], d, "adapter_model.safetensors");
    sv_engine *e = engine(&(sv_engine_opts){.max_adapters = 1}, false);
    assert_true(sv_engine_add_adapter(e, "fragile", d, err, sizeof err));
    assert_true(sv_engine_add_adapter(e, "gamma", F.ad_dir[2], err, sizeof err)); /* evicts it */
    assert_false(loaded(e, "fragile"));
    char *w = path_join(d, "adapter_model.safetensors");
    assert_int_equal(unlink(w), 0);
    free(w);
    collector c;
    collector_init(&c);
    job j = make_job(4, 6, -1, 5, 0.0f, 1);
    sv_request r = {.prompt = j.prompt, .n_prompt = j.n_prompt, .adapter = "fragile",
                    .sample = j.so, .on_event = on_event};
    slot s[2];
    memset(s, 0, sizeof s);
    s[0].c = &c;
    r.ud = &s[0];
    pthread_mutex_lock(&c.mu);
    assert_int_equal(sv_engine_submit(e, &r, &s[0].id, err, sizeof err), SV_SUBMIT_OK);
    pthread_mutex_unlock(&c.mu);
    wait_done(&c, 1);
    assert_int_equal(s[0].r.finish, SV_FINISH_ERROR);
    assert_int_equal(s[0].r.n, 0);
    printf("# error: %s\n", s[0].r.message);
    assert_non_null(strstr(s[0].r.message, "fragile"));
    assert_non_null(strstr(s[0].r.message, "adapter_model.safetensors"));
    /* gamma removed while its request runs (held in its first token) */
    shut_gate(&c, 2, 0);
    job g = make_job(5, 7, 2, 6, 0.0f, 1);
    submit_ok(e, &g, &s[1], &c);
    wait_gate(&c);
    assert_true(sv_engine_remove_adapter(e, "gamma"));
    size_t n;
    sv_adapter_info *a = sv_engine_adapters(e, &n);
    assert_int_equal(n, 1);
    assert_string_equal(a[0].name, "fragile");
    sv_adapter_info_free(a, n);
    assert_int_equal(submit(e, &g, &s[0], &c, err, sizeof err), SV_SUBMIT_NO_ADAPTER);
    open_gate(&c);
    wait_done(&c, 2);
    check_equal(&g, &s[1].r, 1);
    sv_engine_stats st;
    sv_engine_get_stats(e, &st);
    assert_int_equal(st.adapters_loaded, 0);
    sv_engine_free(e);
    collector_destroy(&c);
    free(d);
}

/* Cancel a running request from its own event, and a waiting one. */
static void test_cancel(void **state)
{
    (void)state;
    sv_engine_opts o = {.max_batch = 1};
    sv_engine *e = engine(&o, true);
    collector c;
    collector_init(&c);
    c.cancel_engine = e;
    c.cancel_id = 1;
    c.cancel_index = 3;
    shut_gate(&c, 1, 1);
    job run = make_job(1, 6, 2, 200, 0.0f, 1), wait = make_job(2, 6, -1, 5, 0.0f, 1);
    slot s[3];
    submit_ok(e, &run, &s[0], &c);
    wait_gate(&c);
    submit_ok(e, &wait, &s[1], &c);
    submit_ok(e, &wait, &s[2], &c);
    assert_true(sv_engine_cancel(e, s[1].id)); /* waiting */
    open_gate(&c);
    wait_done(&c, 3);
    assert_int_equal(s[0].r.finish, SV_FINISH_CANCELLED);
    assert_true(s[0].r.n >= 4 && s[0].r.n < 10);
    assert_int_equal(s[1].r.finish, SV_FINISH_CANCELLED);
    assert_int_equal(s[1].r.n, 0);
    check_equal(&wait, &s[2].r, 2);
    assert_false(sv_engine_cancel(e, s[0].id)); /* ended already */
    assert_true(c.order_ok);
    free_all_back(e, &c);
}

/* Drain waits for everything, then refuses; freeing a busy engine cancels. */
static void test_drain_and_free(void **state)
{
    (void)state;
    sv_engine *e = engine(&(sv_engine_opts){.max_batch = 2}, true);
    collector c;
    collector_init(&c);
    enum { N = 6 };
    job jobs[N];
    slot s[N];
    for (int i = 0; i < N; i++) {
        jobs[i] = make_job(i, 5 + i, i % 4 - 1, 8, 0.0f, 1);
        submit_ok(e, &jobs[i], &s[i], &c);
    }
    assert_true(sv_engine_drain(e, -1));
    assert_int_equal(c.done, N);
    for (int i = 0; i < N; i++) check_equal(&jobs[i], &s[i].r, i);
    char err[256];
    assert_int_equal(submit(e, &jobs[0], &s[0], &c, err, sizeof err), SV_SUBMIT_STOPPING);
    sv_engine_free(e);
    /* free with requests running and waiting: all end cancelled */
    e = engine(&(sv_engine_opts){.max_batch = 1}, false);
    c.done = 0;
    shut_gate(&c, 1, 0);
    job big = make_job(1, 5, -1, 200, 0.0f, 1);
    submit_ok(e, &big, &s[0], &c);
    wait_gate(&c);
    submit_ok(e, &big, &s[1], &c);
    assert_false(sv_engine_drain(e, 20)); /* held: not idle in 20 ms */
    open_gate(&c);
    sv_engine_free(e);
    assert_int_equal(c.done, 2);
    assert_int_equal(s[1].r.finish, SV_FINISH_CANCELLED);
    collector_destroy(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adapters_matter),
        cmocka_unit_test(test_forward_batch_bitwise),
        cmocka_unit_test(test_decode_matches_full_forward),
        cmocka_unit_test(test_top_p_same_as_full_sort),
        cmocka_unit_test(test_greedy_equals_generate),
        cmocka_unit_test(test_sampled_equals_generate),
        cmocka_unit_test(test_stop_id),
        cmocka_unit_test(test_admission_waits_for_blocks),
        cmocka_unit_test(test_submit_full_and_invalid),
        cmocka_unit_test(test_lru_eviction),
        cmocka_unit_test(test_bad_adapters),
        cmocka_unit_test(test_adapter_peft_names),
        cmocka_unit_test(test_adapter_error_and_remove),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_drain_and_free),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
