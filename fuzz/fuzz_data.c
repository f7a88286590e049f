/* fuzz_data.c: libFuzzer target for the JSONL training-data reader and the
 * batch iterator. The first byte picks the options (format, packing,
 * skip_bad, a small max_seq_len and line limit); the rest is the JSONL
 * file. A tiny byte-level tokenizer with ChatML specials, built here, keeps
 * runs fast. A load must succeed or fail with an error naming a line; a
 * loaded set must have consistent statistics, masks of 0/1, sequences
 * within max_seq_len and record positions that count up from 0 and restart
 * only in packed sequences; its iterator must hand out every sequence once per
 * epoch and resume exactly from a saved (and re-parsed) position. */
#include "base/base.h"
#include "tok/tok.h"
#include "tok/tok_internal.h"
#include "train/data.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The tokenizer and template, built once: a fuzzer's process-wide fixture. */
static tok_tokenizer *fz_tok;
static chat_template fz_tmpl;

/* 256 byte tokens, merges "Ġ t", "h e", "Ġt he", added <|im_start|>,
 * <|im_end|>, <|endoftext|>; eos <|im_end|>. */
static char *fz_tokenizer_json(void)
{
    json_t *vocab = json_object(), *merges = json_array();
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        sb s;
        sb_init(&s);
        tok_map(&c, 1, &s);
        json_object_set_new(vocab, sb_str(&s), json_integer(b));
        sb_free(&s);
    }
    json_object_set_new(vocab, "\xc4\xa0t", json_integer(256));
    json_object_set_new(vocab, "he", json_integer(257));
    json_object_set_new(vocab, "\xc4\xa0the", json_integer(258));
    json_array_append_new(merges, json_string("\xc4\xa0 t"));
    json_array_append_new(merges, json_string("h e"));
    json_array_append_new(merges, json_string("\xc4\xa0t he"));
    json_t *added = json_array();
    const char *specials[] = {"<|im_start|>", "<|im_end|>", "<|endoftext|>"};
    for (int i = 0; i < 3; i++)
        json_array_append_new(added, json_pack("{s:i, s:s, s:b}", "id", 259 + i, "content", specials[i], "special", 1));
    json_t *root = json_pack(
        "{s:o, s:{s:s, s:[{s:s, s:{s:s}, s:s}, {s:s, s:b, s:b}]}, s:{s:s}, s:{s:s, s:o, s:o}}",
        "added_tokens", added, "pre_tokenizer", "type", "Sequence", "pretokenizers", "type", "Split",
        "pattern", "Regex", "'s|'t| ?\\p{L}+| ?\\p{N}| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
        "behavior", "Isolated", "type", "ByteLevel", "add_prefix_space", 0, "use_regex", 0,
        "decoder", "type", "ByteLevel", "model", "type", "BPE", "vocab", vocab, "merges", merges);
    char *s = json_dumps(root, 0);
    json_decref(root);
    return s;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char *json = fz_tokenizer_json();
    const char *cfg = "{\"eos_token\": \"<|im_end|>\", \"pad_token\": \"<|endoftext|>\"}";
    diag_list d;
    diag_list_init(&d);
    fz_tok = tok_load_json(json, strlen(json), cfg, strlen(cfg), "fuzz-tokenizer.json", &d);
    free(json);
    if (!fz_tok) {
        diag_print_all(&d, stderr);
        abort();
    }
    diag_list_free(&d);
    chat_template_force(CHAT_QWEN25, NULL, &fz_tmpl);
    return 0;
}

static void fz_check_set(const data_set *ds, const data_options *o)
{
    const data_stats *st = data_get_stats(ds);
    uint64_t tokens = 0, targets = 0;
    for (size_t i = 0; i < data_count(ds); i++) {
        const int32_t *ids;
        const uint8_t *mask;
        size_t len;
        data_get(ds, i, &ids, &mask, &len, NULL);
        if (len == 0 || len > o->max_seq_len || (o->pack && len != o->max_seq_len)) abort();
        for (size_t k = 0; k < len; k++) {
            if (mask[k] > 1 || ids[k] < 0 || (size_t)ids[k] >= tok_vocab_size(fz_tok)) abort();
            targets += mask[k];
        }
        tokens += len;
        /* positions count up from 0 and restart only where a record begins */
        int32_t *pos = xmalloc((len + 1) * sizeof *pos);
        bool several = data_positions(ds, i, pos);
        bool reset = false;
        if (pos[0] != 0 || (!o->pack && several)) abort();
        for (size_t k = 1; k < len; k++) {
            if (pos[k] != 0 && pos[k] != pos[k - 1] + 1) abort();
            reset |= pos[k] == 0;
        }
        if (reset != several) abort();
        free(pos);
    }
    if (tokens != st->tokens || targets != st->targets || st->sequences != data_count(ds)) abort();
    if (st->records + st->skipped > st->lines) abort();
}

static void fz_iterate(const data_set *ds, unsigned char knobs)
{
    size_t n = data_count(ds);
    data_iter_options io = {.batch_size = 1 + knobs % 5, .shuffle = knobs & 1, .seed = knobs,
                            .drop_last = (knobs >> 1) & 1, .pad_to_max = (knobs >> 2) & 1};
    char err[300];
    data_iter *a = data_iter_new(ds, &io, err, sizeof err);
    if (!a) {
        if (n && !(io.drop_last && io.batch_size > n)) abort();
        return;
    }
    data_batch b = {0}, c = {0};
    /* one epoch: every sequence at most once, all of them unless drop_last */
    uint8_t *seen = xcalloc(n, 1);
    size_t count = 0;
    for (size_t k = 0; k < data_iter_batches_per_epoch(a); k++) {
        data_iter_next(a, &b);
        if (b.epoch != 0) abort();
        for (size_t r = 0; r < b.rows; r++) {
            if (b.seq[r] >= n || seen[b.seq[r]]++) abort();
            count++;
        }
    }
    if (!io.drop_last && count != n) abort();
    if (data_iter_tell(a).epoch != 1) abort();
    /* save, re-parse, resume in a second iterator */
    data_pos p = data_iter_tell(a), q;
    char *js = data_pos_format(&p);
    if (!data_pos_parse(js, &q, err, sizeof err) || memcmp(&p, &q, sizeof p) != 0) abort();
    data_iter *r = data_iter_new(ds, &io, err, sizeof err);
    if (!r || !data_iter_seek(r, &q, err, sizeof err)) abort();
    for (int k = 0; k < 3; k++) {
        data_iter_next(a, &b);
        data_iter_next(r, &c);
        if (b.rows != c.rows || b.seq_len != c.seq_len ||
            memcmp(b.seq, c.seq, b.rows * sizeof *b.seq) != 0 ||
            memcmp(b.ids, c.ids, b.rows * b.seq_len * sizeof *b.ids) != 0)
            abort();
    }
    free(js);
    free(seen);
    data_batch_free(&b);
    data_batch_free(&c);
    data_iter_free(a);
    data_iter_free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    unsigned char knobs = data[0];
    data_options o;
    data_options_init(&o);
    o.format = (data_format)(knobs % 4);
    o.pack = (knobs >> 2) & 1;
    o.skip_bad = (knobs >> 3) & 1;
    o.max_seq_len = 1 + (size_t)(knobs >> 4) * 4;
    o.max_line_bytes = 64 + (size_t)((knobs >> 5) & 1) * 4096;
    diag_list d;
    diag_list_init(&d);
    data_set *ds = data_load_buffer((const char *)data + 1, size - 1, "fuzz.jsonl", fz_tok, &fz_tmpl, &o, &d);
    if (!ds) {
        /* refused: an error that names the file */
        if (d.errors == 0 || !d.items[d.len - 1].file) abort();
    } else {
        if (d.errors) abort();
        fz_check_set(ds, &o);
        fz_iterate(ds, knobs);
        data_free(ds);
    }
    sb out;
    sb_init(&out);
    for (size_t i = 0; i < d.len; i++) diag_format(&d.items[i], &out);
    sb_free(&out);
    diag_list_free(&d);
    return 0;
}
