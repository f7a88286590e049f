/* fuzz_tokenizer.c: libFuzzer target for the tokenizer and chat templates.
 * The first byte picks what the rest is:
 *   0: a tokenizer.json, optionally followed by a NUL and a text: the file
 *      must load or be refused with an error; a loaded one encodes the
 *      text (and a few fixed ones) and decodes the result;
 *   1: a text, encoded with the real Qwen3 and Llama 3 tokenizers (from
 *      share/tokenizers, loaded once): valid UTF-8 must encode,
 *      decode back to itself (Llama 3) or to its NFC form (Qwen3), with
 *      offsets in order, and the fast path must equal the textbook BPE;
 *      invalid UTF-8 must be refused;
 *   2: a conversation (messages separated by 0x01, roles in turn), rendered
 *      by every template family and encoded: spans in order and inside
 *      the text, the mask only on assistant spans.
 * It stops on a crash, a sanitizer report, a leak, or a broken invariant.
 * The data folder is $LATHE_DATA_DIR, else the source tree's share/, found
 * from this file's path. */
#include "base/base.h"
#include "tok/tok.h"
#include "tok/tok_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The real tokenizers, loaded once: a fuzzer's process-wide fixture. */
static tok_tokenizer *fz_real[2];

static char *fz_data_dir(void)
{
    const char *env = getenv("LATHE_DATA_DIR");
    if (env) return xstrdup(env);
    /* __FILE__ is .../fuzz/fuzz_tokenizer.c; the data folder is share/ of
     * the project root */
    const char *f = __FILE__;
    const char *slash = strrchr(f, '/');
    size_t n = slash ? (size_t)(slash - f) : 0;
    char *fuzz_dir = xstrndup(f, n);
    char *p = xasprintf("%s/../share", fuzz_dir);
    free(fuzz_dir);
    return p;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char *share = fz_data_dir();
    const char *names[2] = {"qwen3", "llama3"};
    for (int k = 0; k < 2; k++) {
        char *dir = xasprintf("%s/tokenizers/%s", share, names[k]);
        diag_list d;
        diag_list_init(&d);
        fz_real[k] = tok_load(dir, &d);
        if (!fz_real[k]) fprintf(stderr, "fuzz_tokenizer: %s not loaded; modes 1 and 2 are off\n", dir);
        diag_list_free(&d);
        free(dir);
    }
    free(share);
    return 0;
}

/* Mode 0: a tokenizer.json (and a text after a NUL). */
static void fz_load(const char *s, size_t n)
{
    const char *nul = memchr(s, 0, n);
    size_t jlen = nul ? (size_t)(nul - s) : n;
    diag_list d;
    diag_list_init(&d);
    tok_tokenizer *t = tok_load_json(s, jlen, NULL, 0, "fuzz.json", &d);
    if (!t) {
        if (d.errors == 0) abort(); /* refused without saying why */
        sb out;
        sb_init(&out);
        for (size_t i = 0; i < d.len; i++) diag_format(&d.items[i], &out);
        sb_free(&out);
        diag_list_free(&d);
        return;
    }
    diag_list_free(&d);
    const char *texts[] = {"Hello world", " 's 'll  x\n\n", "naïve 😀 日本", "", "<|im_end|>"};
    tok_ids ids;
    tok_ids_init(&ids);
    char err[256];
    for (size_t i = 0; i < 6; i++) {
        const char *txt = i < 5 ? texts[i] : nul ? nul + 1 : "";
        size_t tl = i < 5 ? strlen(txt) : nul ? n - jlen - 1 : 0;
        tok_ids_clear(&ids);
        if (!tok_encode(t, txt, tl, TOK_ADD_SPECIAL, &ids, err, sizeof err)) continue;
        for (size_t k = 0; k < ids.len; k++)
            if (!tok_token_str(t, ids.ids[k]) || ids.offsets[k] > tl) abort();
        char *back = tok_decode(t, ids.ids, ids.len, i & 1, NULL, err, sizeof err);
        if (!back) abort();
        free(back);
    }
    tok_ids_free(&ids);
    tok_free(t);
}

/* Mode 1: a text through the real tokenizers. */
static void fz_text(const char *s, size_t n)
{
    size_t bad;
    bool valid = uni_valid(s, n, &bad);
    for (int k = 0; k < 2; k++) {
        tok_tokenizer *t = fz_real[k];
        if (!t) continue;
        tok_ids a, b;
        tok_ids_init(&a);
        tok_ids_init(&b);
        char err[256];
        bool ok = tok_encode(t, s, n, 0, &a, err, sizeof err);
        if (!valid) {
            if (ok) abort();
            continue;
        }
        if (!ok) abort(); /* the real patterns never exhaust the budget */
        for (size_t i = 0; i < a.len; i++)
            if (a.offsets[i] > n || (i && a.offsets[i] < a.offsets[i - 1])) abort();
        size_t dlen;
        char *back = tok_decode(t, a.ids, a.len, false, &dlen, err, sizeof err);
        if (!back) abort();
        sb want;
        sb_init(&want);
        if (k == 0) uni_normalize(s, n, UNI_NFC, &want);
        else sb_putn(&want, s, n);
        if (dlen != want.len || memcmp(back, sb_str(&want), dlen) != 0) abort();
        sb_free(&want);
        free(back);
        t->naive = true;
        if (!tok_encode(t, s, n, 0, &b, err, sizeof err)) abort();
        t->naive = false;
        if (a.len != b.len || (a.len && memcmp(a.ids, b.ids, a.len * sizeof *a.ids) != 0)) abort();
        tok_ids_free(&a);
        tok_ids_free(&b);
    }
}

/* Mode 2: a conversation through every template family. */
static void fz_chat(const char *s, size_t n)
{
    if (!fz_real[0] || !fz_real[1]) return;
    char *copy = xstrndup(s, n); /* stops at a NUL: contents are C strings */
    chat_message m[16];
    size_t nm = 0;
    static const char *const roles[] = {"system", "user", "assistant", "tool", "user", "assistant"};
    for (char *p = copy; nm < 16;) {
        char *sep = strchr(p, 1);
        if (sep) *sep = 0;
        m[nm].role = roles[(nm + (unsigned char)copy[0]) % 6];
        m[nm].content = p;
        nm++;
        if (!sep) break;
        p = sep + 1;
    }
    for (int f = CHAT_CHATML; f <= CHAT_LLAMA32; f++) {
        chat_template t;
        chat_template_force((chat_family)f, "<|begin_of_text|>", &t);
        chat_options o = {.add_generation_prompt = n & 1, .enable_thinking = (int)(n % 3) - 1};
        chat_text ct;
        char err[300];
        if (chat_render(&t, m, nm, &o, &ct, err, sizeof err)) {
            size_t prev = 0;
            for (size_t i = 0; i < ct.nspans; i++) {
                if (ct.spans[i].begin < prev || ct.spans[i].end < ct.spans[i].begin || ct.spans[i].end > ct.len)
                    abort();
                prev = ct.spans[i].end;
            }
            chat_text_free(&ct);
            tok_ids ids;
            tok_ids_init(&ids);
            uint8_t *mask = NULL;
            tok_tokenizer *tok = f >= CHAT_LLAMA3 ? fz_real[1] : fz_real[0];
            if (chat_encode(tok, &t, m, nm, &o, &ids, &mask, err, sizeof err)) free(mask);
            tok_ids_free(&ids);
        } else if (!err[0]) {
            abort();
        }
        chat_template_free(&t);
    }
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    const char *s = (const char *)data + 1;
    size_t n = size - 1;
    switch (data[0] % 3) {
    case 0: fz_load(s, n); break;
    case 1: fz_text(s, n); break;
    default: fz_chat(s, n); break;
    }
    return 0;
}
