/* bench_tokenizer.c: tokens/s of the byte-level BPE encoder on
 * share/data/tinyshakespeare/input.txt (and on a multilingual text),
 * for the Qwen3 and Llama 3 tokenizers, against baselines measured in the
 * same run: the same pipeline without the word cache, and a textbook BPE
 * (no cache, every pair's rank looked up again after each merge). Each
 * run starts with an empty cache. Also
 * load time and decode speed. The three encoders must agree; the bench
 * says so or fails.
 *
 *   build/bench/bench_tokenizer [runs]     (default 3; best run reported)
 */
#include "base/base.h"
#include "tok/tok.h"
#include "tok/tok_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef enum { MODE_FAST, MODE_NOCACHE, MODE_NAIVE } mode;

/* Wall time of one encoding of text, starting with an empty cache. */
static double time_encode(tok_tokenizer *t, const char *text, size_t len, mode m, tok_ids *out)
{
    t->naive = m == MODE_NAIVE;
    t->no_cache = m == MODE_NOCACHE;
    tok_cache_free(&t->cache);
    tok_ids_clear(out);
    char err[256];
    double t0 = now();
    bool ok = tok_encode(t, text, len, 0, out, err, sizeof err);
    double dt = now() - t0;
    t->naive = t->no_cache = false;
    if (!ok) {
        fprintf(stderr, "encode failed: %s\n", err);
        exit(1);
    }
    return dt;
}

static void bench_one(const char *name, const char *path, const char *label, const char *text,
                      size_t len, int runs)
{
    diag_list d;
    diag_list_init(&d);
    double t0 = now();
    tok_tokenizer *t = tok_load(path, &d);
    double load = now() - t0;
    if (!t) {
        diag_print_all(&d, stderr);
        exit(1);
    }
    diag_list_free(&d);
    tok_ids fast, nocache, naive;
    tok_ids_init(&fast);
    tok_ids_init(&nocache);
    tok_ids_init(&naive);
    /* the modes take turns, so that a busy machine slows all of them alike;
     * the best run of each counts */
    double tf = 1e30, tn = 1e30, tb = 1e30;
    for (int r = 0; r < runs; r++) {
        double x = time_encode(t, text, len, MODE_FAST, &fast);
        if (x < tf) tf = x;
        x = time_encode(t, text, len, MODE_NOCACHE, &nocache);
        if (x < tn) tn = x;
        x = time_encode(t, text, len, MODE_NAIVE, &naive);
        if (x < tb) tb = x;
    }
    bool agree = fast.len == naive.len && fast.len == nocache.len &&
                 memcmp(fast.ids, naive.ids, fast.len * sizeof *fast.ids) == 0 &&
                 memcmp(fast.ids, nocache.ids, fast.len * sizeof *fast.ids) == 0;
    char err[256];
    double td = 1e30;
    for (int r = 0; r < runs; r++) {
        double s = now();
        size_t dlen;
        char *back = tok_decode(t, fast.ids, fast.len, false, &dlen, err, sizeof err);
        double dt = now() - s;
        if (dt < td) td = dt;
        agree = agree && back && (strcmp(name, "qwen3") == 0 || (dlen == len && memcmp(back, text, len) == 0));
        free(back);
    }
    double mb = (double)len / 1e6;
    printf("%-7s %-13s load %.2fs  %zu tokens (%.2f bytes/token)\n", name, label, load, fast.len,
           (double)len / (double)fast.len);
    printf("  encode, cache + scan/heap BPE  : %8.2f Mtok/s  %6.1f MB/s\n", (double)fast.len / tf / 1e6, mb / tf);
    printf("  encode, no word cache          : %8.2f Mtok/s  %6.1f MB/s  (fast is %.1fx)\n",
           (double)fast.len / tn / 1e6, mb / tn, tn / tf);
    printf("  encode, textbook BPE, no cache : %8.2f Mtok/s  %6.1f MB/s  (fast is %.1fx)\n",
           (double)fast.len / tb / 1e6, mb / tb, tb / tf);
    printf("  decode                         : %8.2f Mtok/s\n", (double)fast.len / td / 1e6);
    printf("  the three encoders %s\n", agree ? "agree" : "DISAGREE");
    tok_ids_free(&fast);
    tok_ids_free(&nocache);
    tok_ids_free(&naive);
    tok_free(t);
    if (!agree) exit(1);
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 3;
    if (runs < 1) runs = 1;
    char err[256];
    size_t len;
    char *text = file_read_all(LATHE_SOURCE_DIR "/share/data/tinyshakespeare/input.txt", 1 << 26, &len, err, sizeof err);
    if (!text) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    /* scripts the play lacks: a mixed paragraph repeated to 1 MiB (the
     * cache makes repeats cheap, so this measures the warm path) */
    const char *mixed_para = "Привет, мир! 日本語のテキスト、漢字とひらがな。中文：你好，世界！한국어 텍스트 "
                             "naïve café 😀👍🏽 العربية नमस्ते 12345 3.14 Ελληνικά\n\n";
    sb mixed;
    sb_init(&mixed);
    while (mixed.len < 1 << 20) sb_puts(&mixed, mixed_para);
    printf("tinyshakespeare: %zu bytes; mixed scripts: %zu bytes; best of %d runs\n\n", len, mixed.len, runs);
    const char *names[] = {"qwen3", "llama3"};
    const char *paths[] = {LATHE_SOURCE_DIR "/share/tokenizers/qwen3", LATHE_SOURCE_DIR "/share/tokenizers/llama3"};
    for (int k = 0; k < 2; k++) {
        bench_one(names[k], paths[k], "shakespeare", text, len, runs);
        bench_one(names[k], paths[k], "mixed", mixed.buf, mixed.len, runs);
    }
    sb_free(&mixed);
    free(text);
    return 0;
}
