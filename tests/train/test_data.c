/* test_data.c: JSONL training data: the self-instruct sets in alpaca and
 * messages form (which must tokenise identically), loss masks, truncation,
 * packing, plain text, every malformed case under data/tok/ as an error
 * with file:line:field or skipped and counted, and the batch iterator's
 * seeded shuffle and exact resume; records held out for evaluation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "train/data.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SI LATHE_SOURCE_DIR "/share/data/self-instruct/"
#define BAD LATHE_TEST_DATA "/tok/"

typedef struct fixture {
    tok_tokenizer *qwen, *llama;
    chat_template tq, tl;
} fixture;

static int setup(void **state)
{
    fixture *f = xcalloc(1, sizeof *f);
    diag_list d;
    diag_list_init(&d);
    f->qwen = tok_load(LATHE_SOURCE_DIR "/share/tokenizers/qwen3", &d);
    f->llama = tok_load(LATHE_SOURCE_DIR "/share/tokenizers/llama3", &d);
    bool ok = f->qwen && f->llama && chat_template_for_tokenizer(f->qwen, NULL, &f->tq, &d) &&
              chat_template_for_tokenizer(f->llama, "llama3.1", &f->tl, &d);
    if (!ok) diag_print_all(&d, stderr);
    diag_list_free(&d);
    *state = f;
    return ok ? 0 : -1;
}

static int teardown(void **state)
{
    fixture *f = *state;
    chat_template_free(&f->tq);
    chat_template_free(&f->tl);
    tok_free(f->qwen);
    tok_free(f->llama);
    free(f);
    return 0;
}

static data_set *load(fixture *f, const char *path, const data_options *o, diag_list *d)
{
    return data_load(path, f->qwen, &f->tq, o, d);
}

/* The alpaca and messages files hold the same conversations. */
static void test_alpaca_equals_messages(void **state)
{
    fixture *f = *state;
    data_options o;
    data_options_init(&o);
    diag_list d;
    diag_list_init(&d);
    data_set *a = load(f, SI "seed_tasks.alpaca.jsonl", &o, &d);
    data_set *m = load(f, SI "seed_tasks.messages.jsonl", &o, &d);
    if (!a || !m) diag_print_all(&d, stderr);
    assert_non_null(a);
    assert_non_null(m);
    assert_int_equal(data_get_stats(a)->format, DATA_ALPACA);
    assert_int_equal(data_get_stats(m)->format, DATA_MESSAGES);
    assert_int_equal(data_get_stats(a)->records, 175);
    assert_int_equal(data_count(a), 175);
    assert_int_equal(data_fingerprint(a), data_fingerprint(m));
    for (size_t i = 0; i < data_count(a); i++) {
        const int32_t *ia, *im;
        const uint8_t *ma, *mm;
        size_t la, lm, line;
        data_get(a, i, &ia, &ma, &la, &line);
        data_get(m, i, &im, &mm, &lm, NULL);
        assert_int_equal(line, i + 1);
        assert_int_equal(la, lm);
        assert_memory_equal(ia, im, la * sizeof *ia);
        assert_memory_equal(ma, mm, la);
    }
    data_free(a);
    data_free(m);
    diag_list_free(&d);
}

/* The mask: one run of targets per record (one assistant turn), ending
 * with the end-of-turn token, and decoding the targets gives the output. */
static void check_masks(tok_tokenizer *tok, data_set *ds, const char *eot, const char *path)
{
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    char *line = NULL;
    size_t cap = 0;
    for (size_t i = 0; i < data_count(ds); i++) {
        const int32_t *ids;
        const uint8_t *mask;
        size_t len, runs = 0, nt = 0;
        data_get(ds, i, &ids, &mask, &len, NULL);
        int32_t *tg = xmalloc(len * sizeof *tg);
        for (size_t k = 0; k < len; k++) {
            if (mask[k]) tg[nt++] = ids[k];
            if (mask[k] && (k == 0 || !mask[k - 1])) runs++;
        }
        assert_int_equal(runs, 1);
        assert_int_equal(tg[nt - 1], tok_token_id(tok, eot));
        char err[200];
        char *text = tok_decode(tok, tg, nt - 1, false, NULL, err, sizeof err);
        assert_true(getline(&line, &cap, fp) > 0);
        /* the output, as it appears (JSON-escaped) in the line */
        json_error_t je;
        json_t *rec = json_loads(line, 0, &je);
        const char *out = json_string_value(json_object_get(rec, "output"));
        const char *body = strstr(text, "</think>\n\n");
        body = body ? body + strlen("</think>\n\n") : text;
        if (strcmp(body, out) != 0) fail_msg("record %zu: target text [%s] != output [%s]", i, body, out);
        json_decref(rec);
        free(text);
        free(tg);
    }
    free(line);
    fclose(fp);
}

static void test_masks(void **state)
{
    fixture *f = *state;
    data_options o;
    data_options_init(&o);
    diag_list d;
    diag_list_init(&d);
    data_set *q = load(f, SI "seed_tasks.alpaca.jsonl", &o, &d);
    assert_non_null(q);
    check_masks(f->qwen, q, "<|im_end|>", SI "seed_tasks.alpaca.jsonl");
    data_free(q);
    /* Llama 3.1 trims: compare on a set whose outputs have no edge spaces */
    data_set *l = data_load(SI "seed_tasks.alpaca.jsonl", f->llama, &f->tl, &o, &d);
    assert_non_null(l);
    const int32_t *ids;
    const uint8_t *mask;
    size_t len;
    data_get(l, 0, &ids, &mask, &len, NULL);
    assert_int_equal(ids[0], 128000); /* <|begin_of_text|> */
    assert_int_equal(ids[len - 1], tok_token_id(f->llama, "<|eot_id|>"));
    assert_int_equal(mask[len - 1], 1);
    assert_int_equal(mask[0], 0);
    data_free(l);
    /* the eval-only set loads the same way (it is only read here) */
    data_set *e = load(f, SI "user_oriented_instructions.messages.jsonl", &o, &d);
    assert_non_null(e);
    assert_int_equal(data_count(e), 252);
    data_free(e);
    assert_int_equal(d.errors, 0);
    diag_list_free(&d);
}

static void test_truncate_and_pack(void **state)
{
    fixture *f = *state;
    data_options o;
    data_options_init(&o);
    diag_list d;
    diag_list_init(&d);
    data_set *full = load(f, SI "seed_tasks.messages.jsonl", &o, &d);
    uint64_t total = data_get_stats(full)->tokens;
    o.max_seq_len = 64;
    data_set *cut = load(f, SI "seed_tasks.messages.jsonl", &o, &d);
    const data_stats *s = data_get_stats(cut);
    assert_true(s->truncated > 0);
    assert_int_equal(s->records, 175);
    assert_int_equal(s->sequences + s->empty, 175);
    for (size_t i = 0; i < data_count(cut); i++) {
        const int32_t *ids;
        const uint8_t *mask;
        size_t len;
        data_get(cut, i, &ids, &mask, &len, NULL);
        assert_true(len <= 64);
    }
    o.max_seq_len = 256;
    o.pack = true;
    data_set *p = load(f, SI "seed_tasks.messages.jsonl", &o, &d);
    s = data_get_stats(p);
    assert_int_equal(s->truncated, 0);
    assert_true(s->dropped_tail < 256);
    assert_int_equal(s->tokens + s->dropped_tail + 256 * s->empty, total);
    for (size_t i = 0; i < data_count(p); i++) {
        const int32_t *ids;
        const uint8_t *mask;
        size_t len;
        data_get(p, i, &ids, &mask, &len, NULL);
        assert_int_equal(len, 256);
    }
    /* packed sequences are the concatenation, in order */
    const int32_t *a, *b;
    const uint8_t *ma;
    size_t la;
    data_get(full, 0, &a, &ma, &la, NULL);
    data_get(p, 0, &b, &ma, &la, NULL);
    assert_memory_equal(a, b, 16 * sizeof *a);
    /* positions restart where each record begins: walking the unpacked
     * records' lengths gives the same boundaries */
    int32_t pos[256];
    assert_true(data_positions(p, 0, pos));
    size_t k = 0, at = 0;
    for (size_t r = 0; r < data_count(full) && at < 256; r++) {
        const int32_t *ri;
        const uint8_t *rm;
        size_t rl;
        data_get(full, r, &ri, &rm, &rl, NULL);
        for (size_t t = 0; t < rl && at < 256; t++, at++) assert_int_equal(pos[at], (int32_t)t);
        k++;
    }
    assert_true(k >= 2);
    /* a later sequence starts mid-record: its count starts at 0 there */
    assert_true(data_positions(p, 1, pos) || pos[255] == 255);
    assert_int_equal(pos[0], 0);
    for (size_t t = 1; t < 256; t++) assert_true(pos[t] == 0 || pos[t] == pos[t - 1] + 1);
    /* an unpacked sequence is one record */
    data_get(full, 0, &a, &ma, &la, NULL);
    int32_t *one = xmalloc((la + 1) * sizeof *one);
    assert_false(data_positions(full, 0, one));
    for (size_t t = 0; t < la; t++) assert_int_equal(one[t], (int32_t)t);
    free(one);
    data_free(full);
    data_free(cut);
    data_free(p);
    diag_list_free(&d);
}

static void test_text(void **state)
{
    fixture *f = *state;
    data_options o;
    data_options_init(&o);
    diag_list d;
    diag_list_init(&d);
    data_set *t = data_load(BAD "text.jsonl", f->qwen, NULL, &o, &d);
    assert_non_null(t);
    assert_int_equal(data_get_stats(t)->format, DATA_TEXT);
    assert_int_equal(data_count(t), 3);
    const int32_t *ids;
    const uint8_t *mask;
    size_t len;
    data_get(t, 1, &ids, &mask, &len, NULL);
    assert_int_equal(ids[len - 1], tok_eos_id(f->qwen));
    for (size_t k = 0; k < len; k++) assert_int_equal(mask[k], 1);
    char err[100];
    char *s = tok_decode(f->qwen, ids, len - 1, false, NULL, err, sizeof err);
    assert_string_equal(s, "All:\nSpeak, speak.");
    free(s);
    data_free(t);
    /* chat data without a template is an error */
    assert_null(data_load(SI "seed_tasks.alpaca.jsonl", f->qwen, NULL, &o, &d));
    assert_int_equal(d.errors, 1);
    diag_list_free(&d);
}

/* A malformed file: an error at file:line (path, message), or with
 * skip_bad the given number skipped and `kept` records kept. */
static void expect_bad(fixture *f, const char *name, size_t line, const char *path,
                       const char *msg, size_t skipped, size_t kept, size_t max_line)
{
    char file[512];
    snprintf(file, sizeof file, BAD "%s", name);
    data_options o;
    data_options_init(&o);
    if (max_line) o.max_line_bytes = max_line;
    diag_list d;
    diag_list_init(&d);
    assert_null(load(f, file, &o, &d));
    assert_int_equal(d.errors, 1);
    diag *x = &d.items[d.len - 1];
    assert_string_equal(x->file, file);
    if ((size_t)x->line != line) fail_msg("%s: error on line %d, expected %zu", name, x->line, line);
    if (path) assert_string_equal(x->path, path);
    if (!strstr(x->message, msg)) fail_msg("%s: message [%s] lacks [%s]", name, x->message, msg);
    assert_non_null(x->suggestion);
    diag_list_free(&d);

    diag_list_init(&d);
    o.skip_bad = true;
    data_set *ds = load(f, file, &o, &d);
    assert_non_null(ds);
    assert_int_equal(d.errors, 0);
    assert_true(d.warnings >= 1);
    assert_int_equal(data_get_stats(ds)->skipped, skipped);
    assert_int_equal(data_get_stats(ds)->records, kept);
    data_free(ds);
    diag_list_free(&d);
}

static void test_malformed(void **state)
{
    fixture *f = *state;
    expect_bad(f, "bad_json.jsonl", 2, NULL, "not valid JSON", 1, 2, 0);
    expect_bad(f, "missing_field.jsonl", 2, "output", "missing field 'output'", 1, 2, 0);
    expect_bad(f, "wrong_type.jsonl", 3, "messages[1].content", "wrong type", 1, 2, 0);
    expect_bad(f, "empty_line.jsonl", 2, NULL, "empty line", 1, 2, 0);
    expect_bad(f, "long_line.jsonl", 2, NULL, "longer than the limit", 1, 2, 1024);
    expect_bad(f, "mixed.jsonl", 2, NULL, "detected on line 1", 1, 1, 0);
    expect_bad(f, "no_assistant.jsonl", 2, "messages", "no assistant message", 1, 1, 0);
    expect_bad(f, "not_object.jsonl", 2, NULL, "wrong type", 1, 1, 0);
    expect_bad(f, "unknown_fields.jsonl", 1, NULL, "none of the known fields", 1, 0, 0);
    expect_bad(f, "bad_role.jsonl", 2, NULL, "role 'function'", 1, 1, 0);
    /* found by fuzz_data: a later record without the detected form's field */
    expect_bad(f, "missing_messages.jsonl", 3, "messages", "missing field 'messages'", 1, 2, 0);
    /* the message names the expected and found types */
    data_options o;
    data_options_init(&o);
    diag_list d;
    diag_list_init(&d);
    assert_null(load(f, BAD "wrong_type.jsonl", &o, &d));
    assert_string_equal(d.items[0].expected, "a string");
    assert_string_equal(d.items[0].found, "the number 3");
    diag_list_free(&d);
    /* many bad lines: 20 warnings, then a note with the rest */
    diag_list_init(&d);
    o.skip_bad = true;
    data_set *ds = load(f, BAD "many_bad.jsonl", &o, &d);
    assert_int_equal(data_get_stats(ds)->skipped, 30);
    assert_int_equal(d.warnings, 20);
    assert_non_null(strstr(d.items[d.len - 1].message, "10 more"));
    data_free(ds);
    diag_list_free(&d);
    /* a missing file, a folder */
    diag_list_init(&d);
    assert_null(load(f, BAD "no-such-file.jsonl", &o, &d));
    assert_int_equal(d.errors, 1);
    assert_null(load(f, BAD, &o, &d));
    assert_non_null(strstr(d.items[1].message, "folder"));
    diag_list_free(&d);
}

/* A line above the default 16 MiB limit, in a temporary file. */
static void test_huge_line(void **state)
{
    fixture *f = *state;
    char path[] = "/tmp/lathe-huge-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *fp = fdopen(fd, "w");
    fputs("{\"text\": \"ok\"}\n{\"text\": \"", fp);
    for (int i = 0; i < (17 << 20) / 64; i++)
        fputs("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", fp);
    fputs("\"}\n{\"text\": \"after\"}", fp); /* no final newline */
    fclose(fp);
    data_options o;
    data_options_init(&o);
    o.skip_bad = true;
    diag_list d;
    diag_list_init(&d);
    data_set *ds = load(f, path, &o, &d);
    assert_non_null(ds);
    assert_int_equal(data_get_stats(ds)->skipped, 1);
    assert_int_equal(data_get_stats(ds)->records, 2);
    assert_int_equal(data_get_stats(ds)->lines, 3);
    assert_int_equal(d.items[0].line, 2);
    data_free(ds);
    diag_list_free(&d);
    unlink(path);
}

static void test_forced_format_and_bom(void **state)
{
    fixture *f = *state;
    data_options o;
    data_options_init(&o);
    diag_list d;
    diag_list_init(&d);
    data_set *ds = load(f, BAD "crlf_bom.jsonl", &o, &d);
    assert_non_null(ds);
    assert_int_equal(data_count(ds), 2);
    data_free(ds);
    o.format = DATA_MESSAGES;
    assert_null(load(f, BAD "crlf_bom.jsonl", &o, &d));
    assert_non_null(strstr(d.items[0].message, "chosen with --format"));
    diag_list_free(&d);
    data_format fm;
    assert_true(data_format_parse("Alpaca", &fm));
    assert_int_equal(fm, DATA_ALPACA);
    assert_false(data_format_parse("sharegpt", &fm));
}

/* ---- iterator ---- */

static data_set *small_set(fixture *f)
{
    data_options o;
    data_options_init(&o);
    diag_list d;
    diag_list_init(&d);
    data_set *ds = load(f, SI "seed_tasks.alpaca.jsonl", &o, &d);
    diag_list_free(&d);
    return ds;
}

static void test_iter_epochs(void **state)
{
    fixture *f = *state;
    data_set *ds = small_set(f);
    size_t n = data_count(ds);
    data_iter_options io = {.batch_size = 8, .shuffle = true, .seed = 42};
    char err[300];
    data_iter *it = data_iter_new(ds, &io, err, sizeof err);
    assert_non_null(it);
    assert_int_equal(data_iter_batches_per_epoch(it), (n + 7) / 8);
    data_batch b = {0};
    uint8_t *seen = xcalloc(n, 1);
    size_t *first_order = xmalloc(n * sizeof *first_order), pos = 0;
    for (size_t k = 0; k < data_iter_batches_per_epoch(it); k++) {
        data_iter_next(it, &b);
        assert_int_equal(b.epoch, 0);
        for (size_t r = 0; r < b.rows; r++) {
            assert_int_equal(seen[b.seq[r]], 0);
            seen[b.seq[r]] = 1;
            first_order[pos++] = b.seq[r];
            /* padding */
            for (size_t c = b.lens[r]; c < b.seq_len; c++) {
                assert_int_equal(b.ids[r * b.seq_len + c], data_pad_id(ds));
                assert_int_equal(b.mask[r * b.seq_len + c], 0);
            }
        }
    }
    assert_int_equal(pos, n);
    assert_int_equal(b.rows, n % 8 ? n % 8 : 8);
    data_pos p = data_iter_tell(it);
    assert_int_equal(p.epoch, 1);
    assert_int_equal(p.index, 0);
    /* the next epoch is another permutation */
    data_iter_next(it, &b);
    assert_int_equal(b.epoch, 1);
    bool differs = false;
    for (size_t r = 0; r < b.rows; r++) differs |= b.seq[r] != first_order[r];
    assert_true(differs);
    /* no shuffle: file order; drop_last: full batches only */
    data_iter_options plain = {.batch_size = 50, .drop_last = true, .pad_to_max = true};
    data_iter *it2 = data_iter_new(ds, &plain, err, sizeof err);
    assert_int_equal(data_iter_batches_per_epoch(it2), 3);
    for (int k = 0; k < 4; k++) {
        data_iter_next(it2, &b);
        assert_int_equal(b.rows, 50);
        assert_int_equal(b.seq_len, data_max_seq_len(ds));
        assert_int_equal(b.seq[0], k < 3 ? (size_t)k * 50 : 0);
    }
    assert_int_equal(b.epoch, 1);
    data_iter_options too_big = {.batch_size = 1000, .drop_last = true};
    assert_null(data_iter_new(ds, &too_big, err, sizeof err));
    data_iter_options zero = {.batch_size = 0};
    assert_null(data_iter_new(ds, &zero, err, sizeof err));
    data_batch_free(&b);
    data_iter_free(it);
    data_iter_free(it2);
    free(seen);
    free(first_order);
    data_free(ds);
}

/* Stop anywhere, save the position as JSON, restore into a new iterator
 * (over a freshly loaded set): the following batches are identical. */
static void test_iter_resume(void **state)
{
    fixture *f = *state;
    data_set *ds = small_set(f), *again = small_set(f);
    data_iter_options io = {.batch_size = 7, .shuffle = true, .seed = 0xDEADBEEFCAFEull};
    char err[300];
    for (size_t stop = 0; stop < 60; stop += 13) {
        data_iter *a = data_iter_new(ds, &io, err, sizeof err);
        data_batch ba = {0}, bb = {0};
        for (size_t k = 0; k < stop; k++) data_iter_next(a, &ba);
        data_pos p = data_iter_tell(a);
        char *json = data_pos_format(&p);
        data_pos q;
        assert_true(data_pos_parse(json, &q, err, sizeof err));
        assert_memory_equal(&p, &q, sizeof p);
        data_iter *b = data_iter_new(again, &io, err, sizeof err);
        assert_true(data_iter_seek(b, &q, err, sizeof err));
        for (int k = 0; k < 40; k++) {
            data_iter_next(a, &ba);
            data_iter_next(b, &bb);
            assert_int_equal(ba.rows, bb.rows);
            assert_int_equal(ba.epoch, bb.epoch);
            assert_int_equal(ba.seq_len, bb.seq_len);
            assert_memory_equal(ba.seq, bb.seq, ba.rows * sizeof *ba.seq);
            assert_memory_equal(ba.ids, bb.ids, ba.rows * ba.seq_len * sizeof *ba.ids);
            assert_memory_equal(ba.mask, bb.mask, ba.rows * ba.seq_len);
        }
        free(json);
        data_batch_free(&ba);
        data_batch_free(&bb);
        data_iter_free(a);
        data_iter_free(b);
    }
    /* refused: another seed, other data, a bad index, bad JSON */
    data_iter *a = data_iter_new(ds, &io, err, sizeof err);
    data_pos p = data_iter_tell(a);
    p.seed++;
    assert_false(data_iter_seek(a, &p, err, sizeof err));
    p.seed--;
    p.fingerprint ^= 1;
    assert_false(data_iter_seek(a, &p, err, sizeof err));
    assert_non_null(strstr(err, "other data"));
    p.fingerprint ^= 1;
    p.index = 1000;
    assert_false(data_iter_seek(a, &p, err, sizeof err));
    data_pos q;
    assert_false(data_pos_parse("{\"seed\": 1}", &q, err, sizeof err));
    assert_false(data_pos_parse("not json", &q, err, sizeof err));
    data_iter_free(a);
    data_free(ds);
    data_free(again);
}

/* The lines of a set's sequences. */
static size_t *lines_of(const data_set *d)
{
    size_t *l = xcalloc(data_count(d) + 1, sizeof *l);
    for (size_t i = 0; i < data_count(d); i++) {
        const int32_t *ids;
        const uint8_t *mask;
        size_t len;
        data_get(d, i, &ids, &mask, &len, &l[i]);
    }
    return l;
}

/* Held-out records: the lines the hash picks, the same for a seed, not in
 * the training set, together the whole file, each held-out record one
 * unpacked sequence equal to its sequence in a plain load; with packing
 * the training set packs only the records left. */
static void test_holdout(void **state)
{
    fixture *f = *state;
    data_options o;
    data_options_init(&o);
    o.max_seq_len = 256;
    diag_list d;
    diag_list_init(&d);
    data_set *all = load(f, SI "seed_tasks.messages.jsonl", &o, &d);
    assert_non_null(all);
    o.holdout = 0.2;
    o.holdout_seed = 7;
    data_set *tr = load(f, SI "seed_tasks.messages.jsonl", &o, &d);
    data_set *tr2 = load(f, SI "seed_tasks.messages.jsonl", &o, &d);
    assert_non_null(tr);
    assert_non_null(tr2);
    data_set *held = data_take_holdout(tr), *held2 = data_take_holdout(tr2);
    assert_non_null(held);
    assert_null(data_take_holdout(tr)); /* taken */
    size_t nall = data_count(all), ntr = data_count(tr), nh = data_count(held);
    printf("# %zu records: %zu trained on, %zu held out\n", nall, ntr, nh);
    assert_int_equal(ntr + nh, nall);
    assert_true(nh > nall / 10 && nh < nall * 3 / 10);
    assert_true(data_fingerprint(held) == data_fingerprint(held2));
    assert_true(data_fingerprint(tr) == data_fingerprint(tr2));
    size_t *la = lines_of(all), *lt = lines_of(tr), *lh = lines_of(held);
    for (size_t i = 0, t = 0, h = 0; i < nall; i++) { /* a merge of the two, in file order */
        bool is_held = data_line_held_out(la[i], 0.2, 7);
        const int32_t *ia, *ib;
        const uint8_t *ma, *mb;
        size_t na, nb;
        data_get(all, i, &ia, &ma, &na, NULL);
        if (is_held) {
            assert_true(h < nh && lh[h] == la[i]);
            data_get(held, h++, &ib, &mb, &nb, NULL);
        } else {
            assert_true(t < ntr && lt[t] == la[i]);
            data_get(tr, t++, &ib, &mb, &nb, NULL);
        }
        assert_int_equal(na, nb);
        assert_memory_equal(ia, ib, na * sizeof *ia);
        assert_memory_equal(ma, mb, na);
    }
    free(lt);
    free(lh);
    data_free(held2);
    data_free(tr2);
    /* another seed, other records */
    o.holdout_seed = 8;
    tr2 = load(f, SI "seed_tasks.messages.jsonl", &o, &d);
    held2 = data_take_holdout(tr2);
    assert_true(data_fingerprint(held2) != data_fingerprint(held));
    data_free(held2);
    data_free(tr2);
    data_free(held);
    data_free(tr);
    /* packing: the held-out records stay whole, the rest are packed */
    o.pack = true;
    o.holdout_seed = 7;
    tr = load(f, SI "seed_tasks.messages.jsonl", &o, &d);
    held = data_take_holdout(tr);
    assert_int_equal(data_count(held), nh);
    lh = lines_of(held);
    for (size_t i = 0; i < nh; i++) assert_true(data_line_held_out(lh[i], 0.2, 7));
    size_t *lp = lines_of(tr);
    for (size_t i = 0; i < data_count(tr); i++) assert_false(data_line_held_out(lp[i], 0.2, 7));
    assert_int_equal(data_get_stats(tr)->records + data_get_stats(held)->records,
                     data_get_stats(all)->records);
    free(lp);
    free(lh);
    free(la);
    data_free(held); /* and tr frees nothing twice */
    data_free(tr);
    data_free(all);
    assert_int_equal(d.errors, 0);
    diag_list_free(&d);
    assert_false(data_line_held_out(3, 0, 7));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alpaca_equals_messages),
        cmocka_unit_test(test_masks),
        cmocka_unit_test(test_truncate_and_pack),
        cmocka_unit_test(test_text),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_huge_line),
        cmocka_unit_test(test_forced_format_and_bom),
        cmocka_unit_test(test_iter_epochs),
        cmocka_unit_test(test_iter_resume),
        cmocka_unit_test(test_holdout),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
