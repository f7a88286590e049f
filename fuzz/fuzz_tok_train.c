/* fuzz_tok_train.c: libFuzzer target for the BPE trainer (lib/tok,
 * tok_trainer_*; `lathe init-tokenizer`). The first byte picks the
 * vocabulary (259 + byte x 4) and the minimum pair count (1 or 2); the rest
 * is texts separated by NUL bytes. Invalid UTF-8 must be refused with a
 * message; otherwise the trained tokenizer.json (with its config) must load,
 * have the vocabulary reported (never more than asked), and give back
 * every text it learned from, byte for byte, through encode and decode.
 * It stops on a crash, a sanitizer report, a leak, or a broken invariant. */
#include "base/base.h"
#include "tok/tok.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* encode + decode gives the text back. */
static void fz_round_trip(tok_tokenizer *t, const char *s, size_t n)
{
    tok_ids ids;
    tok_ids_init(&ids);
    char err[300];
    if (!tok_encode(t, s, n, TOK_SPLIT_SPECIAL, &ids, err, sizeof err)) {
        if (!strstr(err, "backtracking")) abort(); /* valid UTF-8 encodes */
        tok_ids_free(&ids);
        return;
    }
    size_t len;
    char *back = tok_decode(t, ids.ids, ids.len, false, &len, err, sizeof err);
    if (!back || len != n || memcmp(back, s, n)) abort();
    free(back);
    tok_ids_free(&ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    tok_train_options o = {.vocab_size = 259 + (size_t)data[0] * 4, .min_frequency = 1 + (data[0] & 1)};
    const char *p = (const char *)data + 1, *end = (const char *)data + size;
    tok_trainer *tr = tok_trainer_new();
    char err[300];
    bool ok = true;
    for (const char *s = p; s <= end && ok;) {
        const char *nul = memchr(s, 0, (size_t)(end - s));
        size_t n = nul ? (size_t)(nul - s) : (size_t)(end - s);
        ok = tok_trainer_feed(tr, s, n, err, sizeof err);
        if (!ok && !err[0]) abort(); /* refused without saying why */
        s += n + 1;
    }
    tok_train_result res;
    char *json = ok ? tok_trainer_run(tr, &o, &res, err, sizeof err) : NULL;
    tok_trainer_free(tr);
    if (!json) {
        if (ok && size > 1 && !err[0]) abort();
        return 0;
    }
    if (res.vocab > o.vocab_size || res.vocab < 259) abort();
    char *cfg = tok_train_config_json();
    diag_list d;
    diag_list_init(&d);
    tok_tokenizer *t = tok_load_json(json, strlen(json), cfg, strlen(cfg), "trained.json", &d);
    if (!t || tok_vocab_size(t) != res.vocab) abort();
    for (const char *s = p; s <= end;) {
        const char *nul = memchr(s, 0, (size_t)(end - s));
        size_t n = nul ? (size_t)(nul - s) : (size_t)(end - s);
        fz_round_trip(t, s, n);
        s += n + 1;
    }
    tok_free(t);
    diag_list_free(&d);
    free(cfg);
    free(json);
    return 0;
}
