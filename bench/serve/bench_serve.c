/* bench_serve.c: generation throughput and time to first token of lathe's
 * serving engine (lib/serve/engine.h: continuous batching across adapters)
 * on a Qwen2.5-0.5B-shaped model with random weights, with 1 and 4 LoRA
 * adapters, at 1, 8 and 32 concurrent streams, against, in the same run and
 * with the same threads:
 *   (a) lathe's one-request-at-a-time path (tr_generate, as `lathe generate`),
 *   (b) PyTorch eager generation of the same model and adapters
 *       (bench/serve/torch_gen.py, Debian's python3-torch),
 *   (c) llama.cpp (npm's node-llama-cpp 3.21.1, its prebuilt CPU build) on the
 *       GGUF that `lathe export` writes with the adapter merged
 *       (bench/serve/llama_cpp_bench.mjs; 1 adapter only).
 * Every request has the same prompt length and generates greedily (no
 * end-of-sequence stop) a number of tokens drawn from [new/4, 2 new - new/4]
 * (mean --new), the same for every side, so the sides do the same useful
 * work; --uniform makes it exactly --new for all (static batching's best
 * case). tok/s counts the tokens requests asked for.
 * Streams are closed-loop clients: each sends its next request when the last
 * one finished; the time to first token runs from a request's submission.
 * Greedy tokens are compared: the engine's must equal (a)'s exactly; (b) and
 * (c) compute in other orders, so their agreement is reported, not required.
 *
 * usage: bench_serve [--threads N] [--prompt T] [--new N] [--per-stream R]
 *                    [--streams 1,8,32] [--adapters 1,4] [--rank R]
 *                    [--no-torch] [--no-llama-cpp] [--small] [--uniform] [--dir DIR]
 * The model and adapters are written once under DIR (default
 * /tmp/lathe-bench-serve[-small]) and reused.
 * PyTorch runs under $PYTHON (default /usr/bin/python3, Debian's, which
 * python3-torch installs into). node-llama-cpp is looked for in
 * $NODE_LLAMA_CPP_DIR (a folder holding node_modules/node-llama-cpp; default
 * DIR/nlc); install it with: npm i --prefix DIR/nlc -E node-llama-cpp@3.21.1
 */
#include "serve/engine.h"

#include "../common/bench_model.h"
#include "../common/bench_clock.h"

#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_LIST 8

typedef struct bench_opts {
    int threads, prompt, new_tokens, per_stream, rank;
    int streams[MAX_LIST], n_streams;
    int adapters[MAX_LIST], n_adapters;
    bool torch, llama, small, mixed;
    const char *dir;
} bench_opts;

/* ---------------------------------------------------------------- requests */

typedef struct breq {
    int32_t *prompt;
    int adapter; /* -1 = base */
    int max_new;
    int32_t *out;
    int n_out;
    double t_submit, t_first, t_done;
} breq;

typedef struct bset {
    breq *r;
    int n, n_prompt, n_new; /* n_new: the most tokens a request generates */
} bset;

/* n requests with random prompts; adapter k of n_adapters round-robin.
 * Each generates mean_new tokens, or, when mixed, a number drawn uniformly
 * from [mean_new/4, 2 mean_new - mean_new/4] (mean mean_new), as a server's
 * requests differ: static batches then wait for their longest request. */
static bset bset_make(int n, int n_prompt, int mean_new, bool mixed, int n_adapters, int vocab,
                      uint64_t seed)
{
    int lo = mean_new / 4 > 0 ? mean_new / 4 : 1, hi = mixed ? 2 * mean_new - lo : mean_new;
    bset s = {xcalloc((size_t)n, sizeof(breq)), n, n_prompt, hi};
    tr_rng rng;
    tr_rng_seed(&rng, seed);
    for (int i = 0; i < n; i++) {
        s.r[i].prompt = xmalloc((size_t)n_prompt * sizeof(int32_t));
        for (int t = 0; t < n_prompt; t++) s.r[i].prompt[t] = (int32_t)(tr_rng_next(&rng) % (uint64_t)vocab);
        s.r[i].adapter = n_adapters > 0 ? i % n_adapters : -1;
        s.r[i].max_new = mixed ? lo + (int)(tr_rng_next(&rng) % (uint64_t)(hi - lo + 1)) : mean_new;
        s.r[i].out = xcalloc((size_t)hi, sizeof(int32_t));
    }
    return s;
}

static void bset_reset(bset *s)
{
    for (int i = 0; i < s->n; i++) {
        s->r[i].n_out = 0;
        s->r[i].t_submit = s->r[i].t_first = s->r[i].t_done = 0;
    }
}

static void bset_free(bset *s)
{
    for (int i = 0; i < s->n; i++) {
        free(s->r[i].prompt);
        free(s->r[i].out);
    }
    free(s->r);
}

/* The first n requests as JSON for the PyTorch and llama.cpp scripts. */
static bool bset_write_json(const bset *s, int n, const char *path)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        json_t *p = json_array();
        for (int t = 0; t < s->n_prompt; t++) json_array_append_new(p, json_integer(s->r[i].prompt[t]));
        json_array_append_new(a, json_pack("{s:o, s:i, s:i}", "prompt", p, "adapter", s->r[i].adapter,
                                           "max_new", s->r[i].max_new));
    }
    bool ok = json_dump_file(a, path, JSON_COMPACT) == 0;
    json_decref(a);
    return ok;
}

/* ---------------------------------------------------------------- results */

typedef struct bresult {
    bool ran;
    double tok_s, ttft_p50, ttft_p99; /* ms */
    int equal, compared;             /* greedy tokens equal to the one-at-a-time path */
    char note[160];
} bresult;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double percentile(double *v, int n, double p)
{
    if (n == 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int i = (int)ceil(p * n) - 1;
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

static void summarise(const bset *s, int n, double secs, bresult *res)
{
    double *ttft = xmalloc((size_t)n * sizeof *ttft);
    long tokens = 0;
    for (int i = 0; i < n; i++) {
        ttft[i] = (s->r[i].t_first - s->r[i].t_submit) * 1000.0;
        tokens += s->r[i].n_out;
    }
    res->ran = true;
    res->tok_s = tokens / secs;
    res->ttft_p50 = percentile(ttft, n, 0.50);
    res->ttft_p99 = percentile(ttft, n, 0.99);
    free(ttft);
}

/* Compares the first n requests' tokens with ref's. */
static void compare(const bset *s, const bset *ref, int n, bresult *res)
{
    res->equal = res->compared = 0;
    for (int i = 0; i < n && i < ref->n; i++) {
        if (ref->r[i].n_out == 0) continue;
        res->compared++;
        res->equal += s->r[i].n_out == ref->r[i].n_out &&
                      memcmp(s->r[i].out, ref->r[i].out, (size_t)s->r[i].n_out * sizeof(int32_t)) == 0;
    }
}

/* ---------------------------------------------------------------- (a) */

typedef struct single_ud {
    breq *r;
} single_ud;

static void single_token(int32_t id, void *ud)
{
    breq *r = ((single_ud *)ud)->r;
    if (r->n_out == 0) r->t_first = now_s();
    r->n_out++;
    (void)id;
}

/* One request at a time with tr_generate; the adapter is loaded into the
 * model before each (models[k] holds adapter k, models[n] the base). */
static void run_single(tr_model *models, int n_adapters, bset *s, int n, bresult *res)
{
    bset_reset(s);
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        breq *r = &s->r[i];
        tr_model *m = r->adapter >= 0 ? &models[r->adapter] : &models[n_adapters];
        tr_sample_opts so = {.temperature = 0, .top_p = 1, .max_new = r->max_new, .eos_id = -1};
        single_ud ud = {r};
        r->t_submit = now_s();
        int got = tr_generate(m, r->prompt, s->n_prompt, &so, r->out, single_token, &ud);
        r->n_out = got;
        r->t_done = now_s();
    }
    summarise(s, n, now_s() - t0, res);
}

/* ---------------------------------------------------------------- engine */

typedef struct eng_run {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bset *s;
    uint64_t *ids;
    int done;
} eng_run;

typedef struct eng_ud {
    eng_run *run;
    int i;
} eng_ud;

static void eng_event(const sv_event *ev, void *ud)
{
    eng_ud *u = ud;
    eng_run *run = u->run;
    breq *r = &run->s->r[u->i];
    pthread_mutex_lock(&run->mu);
    if (ev->kind == SV_EVENT_TOKEN) {
        if (r->n_out == 0) r->t_first = now_s();
        if (r->n_out < run->s->n_new) r->out[r->n_out++] = ev->token;
    } else {
        r->t_done = now_s();
        run->done++;
        pthread_cond_signal(&run->cv);
    }
    pthread_mutex_unlock(&run->mu);
}

static const char *adapter_name(int k, char *buf, size_t n)
{
    if (k < 0) return NULL;
    snprintf(buf, n, "a%d", k);
    return buf;
}

static bool eng_submit(sv_engine *e, eng_run *run, eng_ud *uds, int i)
{
    breq *r = &run->s->r[i];
    char name[16], err[512];
    sv_request q = {.prompt = r->prompt, .n_prompt = run->s->n_prompt,
                    .adapter = adapter_name(r->adapter, name, sizeof name),
                    .sample = {.temperature = 0, .top_p = 1, .max_new = r->max_new, .eos_id = -1},
                    .on_event = eng_event, .ud = &uds[i]};
    r->t_submit = now_s();
    if (sv_engine_submit(e, &q, &run->ids[i], err, sizeof err) != SV_SUBMIT_OK) {
        fprintf(stderr, "bench_serve: submit: %s\n", err);
        return false;
    }
    return true;
}

/* `streams` closed-loop clients over the first n requests. */
static bool run_engine(sv_engine *e, bset *s, int n, int streams, bresult *res)
{
    bset_reset(s);
    eng_run run = {.s = s, .ids = xcalloc((size_t)n, sizeof(uint64_t))};
    pthread_mutex_init(&run.mu, NULL);
    pthread_cond_init(&run.cv, NULL);
    eng_ud *uds = xcalloc((size_t)n, sizeof *uds);
    for (int i = 0; i < n; i++) uds[i] = (eng_ud){&run, i};
    double t0 = now_s();
    int sent = 0;
    bool ok = true;
    while (ok && sent < n && sent < streams) ok = eng_submit(e, &run, uds, sent++);
    pthread_mutex_lock(&run.mu);
    while (ok && run.done < sent) {
        int before = run.done;
        pthread_cond_wait(&run.cv, &run.mu);
        int finished = run.done - before;
        pthread_mutex_unlock(&run.mu);
        for (int k = 0; ok && k < finished && sent < n; k++) ok = eng_submit(e, &run, uds, sent++);
        pthread_mutex_lock(&run.mu);
    }
    pthread_mutex_unlock(&run.mu);
    double secs = now_s() - t0;
    if (ok) summarise(s, n, secs, res);
    pthread_cond_destroy(&run.cv);
    pthread_mutex_destroy(&run.mu);
    free(uds);
    free(run.ids);
    return ok;
}

/* ---------------------------------------------------------------- children */

/* Runs argv, waits; its exit status, or -1 when it could not start. */
static int run_child(char **argv)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        execvp(argv[0], argv);
        fprintf(stderr, "bench_serve: cannot run %s\n", argv[0]);
        _exit(127);
    }
    int st;
    if (waitpid(pid, &st, 0) < 0) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Reads a script's OUT.json (torch_gen.py / llama_cpp_bench.mjs) into res and
 * the generated tokens into s. */
static bool read_script_out(const char *path, bset *s, int n, bresult *res)
{
    json_error_t je;
    json_t *o = json_load_file(path, 0, &je);
    if (!o) return false;
    json_t *gen = json_object_get(o, "generated"), *ttft = json_object_get(o, "ttft_ms");
    bool ok = json_is_array(gen) && json_is_array(ttft) && (int)json_array_size(gen) >= n;
    double *t = xcalloc((size_t)n + 1, sizeof *t);
    for (int i = 0; ok && i < n; i++) {
        json_t *g = json_array_get(gen, (size_t)i);
        s->r[i].n_out = 0;
        for (size_t k = 0; k < json_array_size(g) && s->r[i].n_out < s->n_new; k++)
            s->r[i].out[s->r[i].n_out++] = (int32_t)json_integer_value(json_array_get(g, k));
        t[i] = json_number_value(json_array_get(ttft, (size_t)i));
    }
    if (ok) {
        res->ran = true;
        res->tok_s = json_number_value(json_object_get(o, "tokens_per_s"));
        res->ttft_p50 = percentile(t, n, 0.50);
        res->ttft_p99 = percentile(t, n, 0.99);
    }
    free(t);
    json_decref(o);
    return ok;
}

static char *self_dir(void)
{
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return xstrdup(".");
    buf[n] = 0;
    char *slash = strrchr(buf, '/');
    if (slash) *slash = 0;
    return xstrdup(buf);
}

/* ---------------------------------------------------------------- setup */

/* Writes adapter k (rank r on every projection, A and B random so the delta
 * is not zero) into dir/a<k> unless it is there. */
static bool make_adapter(const char *mdir, const char *adir, int rank, uint64_t seed, tr_backend *be,
                         char *err, size_t errsz)
{
    char *cfgp = path_join(adir, "adapter_config.json");
    struct stat st;
    bool have = stat(cfgp, &st) == 0;
    free(cfgp);
    if (have) return true;
    tr_model m;
    tr_model_opts mo = {.mode = TR_MODE_LORA,
                        .lora = {.rank = rank, .alpha = 2.0f * rank, .targets = (1u << TR_NPROJ) - 1},
                        .seed = seed};
    if (!tr_model_load(&m, mdir, &mo, be, err, errsz)) return false;
    tr_rng rng;
    tr_rng_seed(&rng, seed * 7 + 1);
    for (size_t i = 0; i < m.n_floats; i++) m.param_data[i] = 0.02f * tr_rng_normal(&rng);
    bool ok = tr_mkdir_p(adir, err, errsz);
    char *stp = path_join(adir, "adapter_model.safetensors"), *cp = path_join(adir, "adapter_config.json");
    if (ok && tr_model_save_params(&m, stp, TR_F32) != 0) {
        snprintf(err, errsz, "%s: cannot write", stp);
        ok = false;
    }
    if (ok) {
        char *js = tr_adapter_config_json(&m, mdir);
        if (file_write_atomic(cp, js, strlen(js)) != 0) {
            snprintf(err, errsz, "%s: cannot write", cp);
            ok = false;
        }
        free(js);
    }
    free(stp);
    free(cp);
    tr_model_free(&m);
    return ok;
}

static int parse_list(const char *s, int *out)
{
    int n = 0;
    while (*s && n < MAX_LIST) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v <= 0) return -1;
        out[n++] = (int)v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return n;
}

static int parse(bench_opts *o, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--no-torch") == 0) o->torch = false;
        else if (strcmp(a, "--no-llama-cpp") == 0) o->llama = false;
        else if (strcmp(a, "--small") == 0) o->small = true;
        else if (strcmp(a, "--uniform") == 0) o->mixed = false;
        else if (v && strcmp(a, "--threads") == 0) o->threads = atoi(v), i++;
        else if (v && strcmp(a, "--prompt") == 0) o->prompt = atoi(v), i++;
        else if (v && strcmp(a, "--new") == 0) o->new_tokens = atoi(v), i++;
        else if (v && strcmp(a, "--per-stream") == 0) o->per_stream = atoi(v), i++;
        else if (v && strcmp(a, "--rank") == 0) o->rank = atoi(v), i++;
        else if (v && strcmp(a, "--dir") == 0) o->dir = v, i++;
        else if (v && strcmp(a, "--streams") == 0) o->n_streams = parse_list(v, o->streams), i++;
        else if (v && strcmp(a, "--adapters") == 0) o->n_adapters = parse_list(v, o->adapters), i++;
        else {
            fprintf(stderr, "usage: bench_serve [--threads N] [--prompt T] [--new N] [--per-stream R]\n"
                            "                   [--streams 1,8,32] [--adapters 1,4] [--rank R]\n"
                            "                   [--no-torch] [--no-llama-cpp] [--small] [--uniform] [--dir DIR]\n");
            return 1;
        }
    }
    if (o->threads < 1 || o->prompt < 1 || o->new_tokens < 1 || o->per_stream < 1 || o->rank < 1 ||
        o->n_streams < 1 || o->n_adapters < 1) {
        fprintf(stderr, "bench_serve: every number must be a whole number from 1\n");
        return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- report */

static void print_row(const char *what, const bresult *r, double base_tok_s)
{
    if (!r->ran) {
        printf("  %-34s %s\n", what, r->note[0] ? r->note : "not run");
        return;
    }
    char eq[48] = "";
    if (r->compared) snprintf(eq, sizeof eq, "%d/%d", r->equal, r->compared);
    printf("  %-34s %9.1f %8.2fx %10.0f %10.0f   %s\n", what, r->tok_s,
           base_tok_s > 0 ? r->tok_s / base_tok_s : NAN, r->ttft_p50, r->ttft_p99, eq);
}

int main(int argc, char **argv)
{
    tr_reexec_with_passive_wait(argv);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    bench_opts o = {.threads = cores > 0 ? (int)cores : 2, .prompt = 32, .new_tokens = 32,
                    .per_stream = 2, .rank = 8, .streams = {1, 8, 32}, .n_streams = 3,
                    .adapters = {1, 4}, .n_adapters = 2, .torch = true, .llama = true, .mixed = true};
    if (parse(&o, argc, argv)) return 1;
    tr_set_threads(o.threads);
    char *dir = o.dir ? xstrdup(o.dir) : xstrdup(o.small ? "/tmp/lathe-bench-serve-small" : "/tmp/lathe-bench-serve");
    char *mdir = path_join(dir, "model"), err[1024];
    tr_config c = bench_qwen_config(o.small);
    if (!tr_mkdir_p(dir, err, sizeof err) || !bench_model_ready(mdir, &c, TR_F32, err, sizeof err)) {
        fprintf(stderr, "bench_serve: %s\n", err);
        return 1;
    }
    int max_adapters = 0;
    for (int i = 0; i < o.n_adapters; i++) max_adapters = o.adapters[i] > max_adapters ? o.adapters[i] : max_adapters;
    tr_backend *be = tr_backend_cpu_create(o.threads);
    char **adirs = xcalloc((size_t)max_adapters, sizeof *adirs);
    for (int k = 0; k < max_adapters; k++) {
        char name[16];
        snprintf(name, sizeof name, "a%d", k);
        adirs[k] = path_join(dir, name);
        if (!make_adapter(mdir, adirs[k], o.rank, (uint64_t)k + 11, be, err, sizeof err)) {
            fprintf(stderr, "bench_serve: %s\n", err);
            return 1;
        }
    }
    /* (a) needs one model per adapter (tr_generate runs the adapter loaded
     * into the model) and one without */
    tr_model *models = xcalloc((size_t)max_adapters + 1, sizeof *models);
    tr_model_opts plain = {.mode = TR_MODE_LORA};
    for (int k = 0; k <= max_adapters; k++) {
        if (!tr_model_load(&models[k], mdir, &plain, be, err, sizeof err) ||
            (k < max_adapters && !tr_model_load_adapter(&models[k], adirs[k], err, sizeof err))) {
            fprintf(stderr, "bench_serve: %s\n", err);
            return 1;
        }
    }
    tr_model base;
    if (!tr_model_load(&base, mdir, &plain, be, err, sizeof err)) {
        fprintf(stderr, "bench_serve: %s\n", err);
        return 1;
    }
    int max_streams = 0;
    for (int i = 0; i < o.n_streams; i++) max_streams = o.streams[i] > max_streams ? o.streams[i] : max_streams;
    /* the engine's default KV cache holds a full context per stream */
    sv_engine_opts eo = {.max_batch = max_streams, .max_waiting = 4 * max_streams,
                         .max_adapters = max_adapters, .max_context = o.prompt + 2 * o.new_tokens};
    sv_engine *e = sv_engine_create(&base, &eo, err, sizeof err);
    if (!e) {
        fprintf(stderr, "bench_serve: %s\n", err);
        return 1;
    }
    for (int k = 0; k < max_adapters; k++) {
        char name[16];
        if (!sv_engine_add_adapter(e, adapter_name(k, name, sizeof name), adirs[k], err, sizeof err)) {
            fprintf(stderr, "bench_serve: %s\n", err);
            return 1;
        }
    }
    char *bin = self_dir();
    char *lathe = path_join(bin, "../lathe");
    char *torch_py = xasprintf("%s/bench/serve/torch_gen.py", LATHE_SOURCE_DIR);
    char *llama_mjs = xasprintf("%s/bench/serve/llama_cpp_bench.mjs", LATHE_SOURCE_DIR);
    /* Debian's python3-torch is /usr/bin/python3's, whatever python3 comes
     * first on PATH; $PYTHON overrides */
    const char *python = getenv("PYTHON") ? getenv("PYTHON") : "/usr/bin/python3";
    const char *nlc_env = getenv("NODE_LLAMA_CPP_DIR");
    char *nlc = nlc_env ? xstrdup(nlc_env) : path_join(dir, "nlc");
    char *nlc_pkg = xasprintf("%s/node_modules/node-llama-cpp/package.json", nlc);
    struct stat st;
    bool have_nlc = stat(nlc_pkg, &st) == 0;
    char *gguf = path_join(dir, "a0-merged-f32.gguf");
    /* llama.cpp loads no model without a tokenizer: the full-size model has
     * Qwen's vocabulary, so the file carries the Qwen3 tokenizer (the same
     * byte-level BPE as Qwen2.5's); --small has none */
    char *tokp = xasprintf("%s/share/tokenizers/qwen3/tokenizer.json", LATHE_SOURCE_DIR);
    if (o.llama && have_nlc && !o.small && stat(gguf, &st) != 0) {
        printf("exporting the model with adapter a0 merged to %s ...\n", gguf);
        char *ev[] = {lathe, "export", "--to", "gguf", "--model", mdir, "--adapter", adirs[0],
                      "--tokenizer", tokp, "--dtype", "f32", gguf, NULL};
        if (run_child(ev) != 0) printf("  lathe export failed: llama.cpp is not measured\n");
    }
    long long np = (long long)tr_config_param_count(&c);
    printf("\nbench_serve: Qwen2.5-0.5B-shaped (%lld parameters, f32, random), LoRA rank %d on all "
           "projections; prompt %d tokens, %s %d generated (greedy, no stop), %d request(s) per stream, "
           "%d threads\n",
           np, o.rank, o.prompt, o.mixed ? "on average" : "exactly", o.new_tokens, o.per_stream, o.threads);
    printf("  baseline (a): lathe one request at a time (tr_generate); tok/s ratios are against it;\n"
           "  'equal' counts requests whose greedy tokens equal (a)'s\n");
    int rc = 0;
    char *reqp = path_join(dir, "requests.json"), *outp = path_join(dir, "out.json");
    char thr[16], str[16];
    snprintf(thr, sizeof thr, "%d", o.threads);
    int n_all = max_streams * o.per_stream, n_single = n_all < 4 ? n_all : 4;
    for (int ai = 0; ai < o.n_adapters && rc != 1; ai++) {
        int na = o.adapters[ai];
        /* one set of requests per adapter count; a stream count takes its
         * first streams x per-stream. (a) runs the first four once: its rate
         * does not depend on streams, and every side's first four are
         * compared with its tokens */
        uint64_t seed = 1000 + (uint64_t)na;
        bset ref = bset_make(n_all, o.prompt, o.new_tokens, o.mixed, na, c.vocab, seed);
        bresult ra = {0};
        run_single(models, max_adapters, &ref, n_single, &ra);
        ra.equal = ra.compared = n_single;
        for (int si = 0; si < o.n_streams; si++) {
            int streams = o.streams[si], n = streams * o.per_stream, n_cmp = n < n_single ? n : n_single;
            bset s = bset_make(n_all, o.prompt, o.new_tokens, o.mixed, na, c.vocab, seed);
            bresult re = {0}, rt = {0}, rl = {0};
            if (!run_engine(e, &s, n, streams, &re)) {
                rc = 1;
                bset_free(&s);
                break;
            }
            compare(&s, &ref, n_cmp, &re);
            if (re.equal != re.compared) rc = 2;
            bset_write_json(&s, n, reqp);
            snprintf(str, sizeof str, "%d", streams);
            if (o.torch) {
                char *tv[2 * MAX_LIST + 12] = {(char *)python, torch_py, mdir, reqp, outp, "--streams", str,
                                               "--threads", thr};
                int k = 9;
                for (int a = 0; a < na; a++) {
                    tv[k++] = "--adapter";
                    tv[k++] = adirs[a];
                }
                tv[k] = NULL;
                bset ts = bset_make(n_all, o.prompt, o.new_tokens, o.mixed, na, c.vocab, seed);
                int trc = run_child(tv);
                if (trc == 0 && read_script_out(outp, &ts, n, &rt)) compare(&ts, &ref, n_cmp, &rt);
                else snprintf(rt.note, sizeof rt.note, "not run (torch_gen.py exit %d; Debian's python3-torch?)", trc);
                bset_free(&ts);
            } else {
                snprintf(rt.note, sizeof rt.note, "not run (--no-torch)");
            }
            if (!o.llama) snprintf(rl.note, sizeof rl.note, "not run (--no-llama-cpp)");
            else if (na != 1) snprintf(rl.note, sizeof rl.note, "not run (one merged adapter per GGUF)");
            else if (o.small) snprintf(rl.note, sizeof rl.note, "not run (--small has no tokenizer for llama.cpp)");
            else if (!have_nlc) snprintf(rl.note, sizeof rl.note, "not run (npm i --prefix %s -E node-llama-cpp@3.21.1)", nlc);
            else if (stat(gguf, &st) != 0) snprintf(rl.note, sizeof rl.note, "not run (no GGUF export)");
            else {
                char *lv[] = {"node", llama_mjs, gguf, reqp, outp, "--streams", str, "--threads", thr,
                              "--modules", nlc, NULL};
                bset ls = bset_make(n_all, o.prompt, o.new_tokens, o.mixed, na, c.vocab, seed);
                int lrc = run_child(lv);
                if (lrc == 0 && read_script_out(outp, &ls, n, &rl)) compare(&ls, &ref, n_cmp, &rl);
                else snprintf(rl.note, sizeof rl.note, "not run (llama_cpp_bench.mjs exit %d)", lrc);
                bset_free(&ls);
            }
            printf("\n%d adapter(s), %d stream(s), %d requests        tok/s    ratio  TTFT p50  TTFT p99   equal\n",
                   na, streams, n);
            print_row("(a) lathe one at a time", &ra, ra.tok_s);
            char what[64];
            snprintf(what, sizeof what, "lathe engine, %d streams", streams);
            print_row(what, &re, ra.tok_s);
            print_row("(b) PyTorch eager (static batches)", &rt, ra.tok_s);
            print_row("(c) llama.cpp (node-llama-cpp)", &rl, ra.tok_s);
            if (rt.ran) printf("  lathe engine / PyTorch: %.2fx\n", re.tok_s / rt.tok_s);
            if (rl.ran) printf("  lathe engine / llama.cpp: %.2fx\n", re.tok_s / rl.tok_s);
            fflush(stdout);
            bset_free(&s);
        }
        bset_free(&ref);
    }
    if (rc == 2) printf("\nbench_serve: the engine's greedy tokens differ from the one-at-a-time path\n");
    sv_engine_free(e);
    tr_model_free(&base);
    for (int k = 0; k <= max_adapters; k++) tr_model_free(&models[k]);
    free(models);
    for (int k = 0; k < max_adapters; k++) free(adirs[k]);
    free(adirs);
    be->destroy(be);
    free(bin), free(lathe), free(torch_py), free(llama_mjs), free(nlc), free(nlc_pkg), free(gguf), free(tokp);
    free(reqp), free(outp), free(mdir), free(dir);
    return rc;
}
