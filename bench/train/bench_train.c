/* bench_train.c: tokens/s of one LoRA training step (forward, backward,
 * AdamW) on a Qwen2.5-0.5B-shaped model with random weights at sequence
 * length 512, lathe against the PyTorch reference (bench/train/torch_bench.py,
 * the same step written in PyTorch, run with the same thread count) in one
 * run; the share of this machine's measured sgemm peak that lathe reaches
 * (FLOPs of the step / step time / peak); and lathe's peak resident memory
 * against weights + adapter + activations.
 *
 * usage: bench_train [--threads N] [--seq T] [--rank R] [--steps S]
 *                    [--dtype f32|bf16] [--grad-checkpoint] [--no-torch]
 *                    [--small] [--model-dir DIR]
 * The model is written once to DIR (default /tmp/lathe-bench-qwen2.5-0.5b-<dtype>)
 * and reused. --small uses a 4-layer, 32k-vocabulary model of the same width.
 */
#include "train/train.h"

#include "../common/bench_model.h"
#include "../common/bench_clock.h"

#include <cblas.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct bench_opts {
    int threads, seq, rank, steps;
    tr_dtype dtype;
    bool ckpt, torch, small;
    const char *model_dir;
} bench_opts;

static double cpu_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Best GFLOP/s of sgemm over a square and a model-shaped problem. */
static double sgemm_peak(void)
{
    const int shapes[2][3] = {{2048, 2048, 2048}, {512, 4864, 896}};
    double best = 0;
    for (int s = 0; s < 2; s++) {
        int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *a = xcalloc((size_t)M * K, 4), *b = xcalloc((size_t)N * K, 4), *c = xcalloc((size_t)M * N, 4);
        for (size_t i = 0; i < (size_t)M * K; i++) a[i] = (float)(i % 7) * 0.1f;
        for (size_t i = 0; i < (size_t)N * K; i++) b[i] = (float)(i % 5) * 0.1f;
        for (int rep = 0; rep < 6; rep++) {
            double t = now_s();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1, a, K, b, K, 0, c, N);
            t = now_s() - t;
            if (rep) best = fmax(best, 2.0 * M * N * K / t / 1e9);
        }
        free(a);
        free(b);
        free(c);
    }
    return best;
}

/* FLOPs of one LoRA step, the same count for both sides: forward linears
 * (2 per multiply-add) incl. lm_head, backward dX of the same (frozen
 * weights: no dW), attention counted over the full T x T as PyTorch computes
 * it (QK^T and PV in forward, four products in backward; lathe skips most of
 * the masked triangle, so its achieved rate can exceed what it computes),
 * LoRA (forward 2 small products; backward 4), and one more forward with
 * gradient checkpointing. */
static double step_flops(const tr_config *c, int T, int r, bool ckpt)
{
    double D = c->dim, F = c->hidden, qd = (double)c->n_heads * c->head_dim;
    double kvd = (double)c->n_kv_heads * c->head_dim, L = c->n_layers;
    double per_tok_layer = D * qd + 2 * D * kvd + qd * D + 3 * D * F;
    double lin = 2.0 * T * (L * per_tok_layer + D * c->vocab);
    double att = L * 2.0 * 2.0 * T * (double)T * c->head_dim * c->n_heads;
    double lora_mac = L * r * (D + qd + D + kvd + D + kvd + qd + D + D + F + D + F + F + D);
    double lora = 2.0 * T * lora_mac;
    double fwd = lin + att + lora;
    double bwd = lin + 2 * att + 2 * lora;
    return fwd + bwd + (ckpt ? fwd - 2.0 * T * D * c->vocab : 0);
}

/* The smallest of the array's entries after the first (the warm-up step). */
static double best_after_first(const json_t *arr)
{
    double b = 0;
    for (size_t i = 1; i < json_array_size(arr); i++) {
        double v = json_number_value(json_array_get(arr, i));
        if (i == 1 || v < b) b = v;
    }
    return b;
}

/* Runs the PyTorch side; returns its best step time (0 when skipped) and in
 * *cpu_s its best CPU seconds per step. */
static double run_torch(const bench_opts *o, const tr_config *c, double *rss_mib, double *loss,
                        double *cpu_s)
{
    int fd[2];
    if (pipe(fd) != 0) return 0;
    char a[10][32];
    snprintf(a[0], 32, "%d", o->threads);
    snprintf(a[1], 32, "%d", o->seq);
    snprintf(a[2], 32, "%d", o->rank);
    snprintf(a[3], 32, "%d", o->steps + 1);
    snprintf(a[4], 32, "%d", c->dim);
    snprintf(a[5], 32, "%d", c->hidden);
    snprintf(a[6], 32, "%d", c->n_layers);
    snprintf(a[7], 32, "%d", c->n_heads);
    snprintf(a[8], 32, "%d", c->n_kv_heads);
    snprintf(a[9], 32, "%d", c->vocab);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        char *argv[] = {"/usr/bin/python3", LATHE_SOURCE_DIR "/bench/train/torch_bench.py",
                        "--threads", a[0], "--seq", a[1], "--rank", a[2], "--steps", a[3],
                        "--dim", a[4], "--hidden", a[5], "--layers", a[6], "--heads", a[7],
                        "--kv-heads", a[8], "--vocab", a[9], NULL};
        execv(argv[0], argv);
        _exit(77);
    }
    close(fd[1]);
    sb out;
    sb_init(&out);
    char buf[4096];
    ssize_t n;
    while ((n = read(fd[0], buf, sizeof buf)) > 0) sb_putn(&out, buf, (size_t)n);
    close(fd[0]);
    int st;
    waitpid(pid, &st, 0);
    json_t *j = json_loads(sb_str(&out), 0, NULL);
    double best = 0;
    json_t *times = json_object_get(j, "step_s");
    if (json_is_array(times) && json_array_size(times) > 1) {
        best = best_after_first(times); /* the least disturbed by other load */
        *cpu_s = best_after_first(json_object_get(j, "cpu_s"));
        *rss_mib = json_number_value(json_object_get(j, "max_rss_mib"));
        *loss = json_number_value(json_object_get(j, "loss"));
    } else {
        printf("pytorch: skipped (%s)\n", json_is_object(j) && json_object_get(j, "skip")
               ? json_string_value(json_object_get(j, "skip")) : sb_str(&out));
    }
    json_decref(j);
    sb_free(&out);
    return best;
}

static int parse(bench_opts *o, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--grad-checkpoint")) o->ckpt = true;
        else if (!strcmp(a, "--no-torch")) o->torch = false;
        else if (!strcmp(a, "--small")) o->small = true;
        else if (v && !strcmp(a, "--threads")) { o->threads = atoi(v); i++; }
        else if (v && !strcmp(a, "--seq")) { o->seq = atoi(v); i++; }
        else if (v && !strcmp(a, "--rank")) { o->rank = atoi(v); i++; }
        else if (v && !strcmp(a, "--steps")) { o->steps = atoi(v); i++; }
        else if (v && !strcmp(a, "--model-dir")) { o->model_dir = v; i++; }
        else if (v && !strcmp(a, "--dtype")) { o->dtype = !strcmp(v, "bf16") ? TR_BF16 : TR_F32; i++; }
        else {
            fprintf(stderr, "usage: bench_train [--threads N] [--seq T] [--rank R] [--steps S] "
                    "[--dtype f32|bf16] [--grad-checkpoint] [--no-torch] [--small] [--model-dir DIR]\n");
            return 1;
        }
    }
    if (o->threads < 1 || o->seq < 2 || o->rank < 1 || o->steps < 1) {
        fprintf(stderr, "bench_train: threads, seq, rank and steps must be positive\n");
        return 1;
    }
    return 0;
}

/* The best of n step times: on a shared machine the least disturbed one. */
static double best_of(const double *t, int n)
{
    double b = t[0];
    for (int i = 1; i < n; i++) b = t[i] < b ? t[i] : b;
    return b;
}

int main(int argc, char **argv)
{
    tr_reexec_with_passive_wait(argv); /* as lathe train does; torch inherits it */
    bench_opts o = {.threads = 2, .seq = 512, .rank = 16, .steps = 3, .dtype = TR_F32, .torch = true};
    if (parse(&o, argc, argv)) return 1;
    tr_set_threads(o.threads);
    tr_config c = bench_qwen_config(o.small);
    char *dir = o.model_dir ? xstrdup(o.model_dir)
                            : xasprintf("/tmp/lathe-bench-qwen2.5-0.5b%s-%s", o.small ? "-small" : "",
                                        o.dtype == TR_BF16 ? "bf16" : "f32");
    char err[1024];
    if (!bench_model_ready(dir, &c, o.dtype, err, sizeof err)) {
        fprintf(stderr, "bench_train: %s\n", err);
        return 1;
    }
    double peak = sgemm_peak();
    tr_backend *be = tr_backend_cpu_create(o.threads);
    tr_model m;
    tr_model_opts mo = {.mode = TR_MODE_LORA, .grad_checkpoint = o.ckpt, .seed = 1,
                        .lora = {.rank = o.rank, .alpha = 2.0f * o.rank, .targets = 0x7f}};
    if (!tr_model_load(&m, dir, &mo, be, err, sizeof err)) {
        fprintf(stderr, "bench_train: %s\n", err);
        return 1;
    }
    int T = o.seq;
    int32_t *ids = xmalloc((size_t)T * sizeof *ids);
    uint8_t *mask = xmalloc((size_t)T);
    tr_rng r;
    tr_rng_seed(&r, 2);
    for (int t = 0; t < T; t++) {
        ids[t] = (int32_t)(tr_rng_next(&r) % (uint64_t)c.vocab);
        mask[t] = 1;
    }
    tr_optim_opts oo;
    tr_optim_defaults(&oo);
    float *m1 = xcalloc(m.n_floats, 4), *m2 = xcalloc(m.n_floats, 4);
    double *times = xmalloc((size_t)(o.steps + 1) * sizeof *times), loss = 0;
    double *cpus = xmalloc((size_t)(o.steps + 1) * sizeof *cpus);
    for (int s = 0; s <= o.steps; s++) { /* step 0 is warm-up */
        double t0 = now_s(), c0 = cpu_now_s();
        memset(m.grad_data, 0, m.n_floats * 4);
        int nt;
        loss = tr_model_loss_backward(&m, ids, mask, T, 1.0f / (T - 1), 0, &nt) / nt;
        (void)tr_grad_norm(m.grad_data, m.n_floats);
        tr_adamw_step(&oo, m.params, m.n_params, m.param_data, m.grad_data, m1, m2, 2e-4, s + 1);
        times[s] = now_s() - t0;
        cpus[s] = cpu_now_s() - c0;
    }
    double lathe_s = best_of(times + 1, o.steps), lathe_cpu = best_of(cpus + 1, o.steps);
    peak = fmax(peak, sgemm_peak()); /* measured before and after: the less disturbed one */
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double rss = (double)ru.ru_maxrss / 1024.0;
    double weights = (double)tr_config_param_count(&c) * tr_dtype_size(o.dtype) / 1048576.0;
    double adapter = (double)m.n_floats * 16 / 1048576.0; /* params, grads, 2 moments */
    double acts = (double)tr_model_ws_bytes(&m) / 1048576.0;
    double flops = step_flops(&c, T, o.rank, o.ckpt);

    char np[32], na[32];
    str_thousands(np, sizeof np, (uint64_t)tr_config_param_count(&c));
    str_thousands(na, sizeof na, (uint64_t)m.n_floats);
    printf("model: Qwen2.5-0.5B shape%s (%s parameters, %s), LoRA r=%d all-linear (%s trainable), "
           "seq %d, %d threads%s\n", o.small ? " (small: 4 layers, vocab 32000)" : "", np,
           tr_dtype_name(o.dtype), o.rank, na, T, o.threads, o.ckpt ? ", gradient checkpointing" : "");
    printf("sgemm peak (OpenBLAS, %d threads): %.1f GFLOP/s; step = %.1f GFLOP\n", o.threads, peak, flops / 1e9);
    printf("%-22s %9s %9s %10s %9s %9s %10s\n", "best of the steps", "step s", "cpu s", "tokens/s",
           "GFLOP/s", "% peak", "loss");
    printf("%-22s %9.3f %9.3f %10.1f %9.1f %8.1f%% %10.4f\n", "lathe", lathe_s, lathe_cpu, T / lathe_s,
           flops / lathe_s / 1e9, 100 * flops / lathe_s / 1e9 / peak, loss);
    double trss = 0, tloss = 0, tcpu = 0;
    double torch_s = o.torch ? run_torch(&o, &c, &trss, &tloss, &tcpu) : 0;
    if (torch_s > 0) {
        printf("%-22s %9.3f %9.3f %10.1f %9.1f %8.1f%% %10.4f\n", "pytorch (same step)", torch_s, tcpu,
               T / torch_s, flops / torch_s / 1e9, 100 * flops / torch_s / 1e9 / peak, tloss);
        printf("lathe / pytorch: %.2fx tokens/s (wall), %.2fx CPU time per step\n", torch_s / lathe_s,
               tcpu / lathe_cpu);
    }
    printf("memory: lathe peak RSS %.0f MiB; weights %.0f MiB (mapped, %s) + LoRA params, grads, "
           "moments %.0f MiB + activation workspace %.0f MiB = %.0f MiB", rss, weights,
           tr_dtype_name(o.dtype), adapter, acts, weights + adapter + acts);
    if (torch_s > 0) printf("; pytorch peak RSS %.0f MiB", trss);
    printf("\n");
    free(times);
    free(cpus);
    free(m1);
    free(m2);
    free(ids);
    free(mask);
    tr_model_free(&m);
    be->destroy(be);
    free(dir);
    return 0;
}
