/* tok_train.c: a byte-level BPE tokenizer learned from text (tokenizer.h,
 * "Training"), written as a Hugging Face tokenizer.json and
 * tokenizer_config.json that tok_load and Hugging Face `tokenizers` read.
 *
 * The tokenizer has Qwen2's layout with a small vocabulary: the Qwen2
 * pre-tokenizer regex (Split, Isolated) then ByteLevel without a prefix
 * space, no normaliser, ids 0..255 for the 256 bytes (id = byte value, in
 * the ByteLevel spelling), one id per merge in the order learned, and the
 * ChatML special tokens <|endoftext|>, <|im_start|>, <|im_end|> after them.
 *
 * Learning is the textbook algorithm (Sennrich et al. 2016, as Hugging
 * Face's BpeTrainer runs it): the texts are pre-tokenized into words, each
 * distinct word is counted; then, until the vocabulary is full, the most
 * frequent adjacent pair of symbols over all words (weighted by the words'
 * counts; on a tie the pair of smaller ids) becomes a new symbol. Pair
 * counts are kept in a table and updated only for the words a merge
 * touches, so a merge costs one pass over the words' symbols. The result
 * depends only on the texts and their order: the same input gives the same
 * file, byte for byte. */
#include "tok/chat.h"
#include "tok/tok_internal.h"
#include "tok/unicode.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Qwen2 / Qwen2.5 / Qwen3's pre-tokenizer pattern (their tokenizer.json,
 * share/tokenizers/qwen3): letters with one leading non-letter, single
 * digits, punctuation runs, newlines, spaces. */
static const char TRAIN_PATTERN[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

static const char *const TRAIN_SPECIALS[TOK_TRAIN_SPECIALS] = {"<|endoftext|>", "<|im_start|>",
                                                               "<|im_end|>"};

typedef struct tt_word {
    size_t off;     /* bytes in keys; later, symbols in syms */
    uint32_t len;   /* bytes; later, symbols */
    uint64_t count; /* times the word was seen */
} tt_word;

struct tok_trainer {
    tok_regex *re;
    tok_cps cps;
    sb keys;        /* the distinct words' bytes, back to back */
    tt_word *words;
    size_t n_words, cap_words;
    size_t *slots;  /* word index + 1, 0 = empty */
    size_t mask;
    uint64_t bytes, pieces;
};

tok_trainer *tok_trainer_new(void)
{
    tok_trainer *tr = xcalloc(1, sizeof *tr);
    char err[300];
    tr->re = tok_regex_compile(TRAIN_PATTERN, err, sizeof err);
    if (!tr->re) { /* the pattern is a constant the tokenizer's tests cover */
        fprintf(stderr, "tok_trainer_new: %s\n", err);
        abort();
    }
    sb_init(&tr->keys);
    tr->mask = 4095;
    tr->slots = xcalloc(tr->mask + 1, sizeof *tr->slots);
    return tr;
}

void tok_trainer_free(tok_trainer *tr)
{
    if (!tr) return;
    tok_regex_free(tr->re);
    tok_cps_free(&tr->cps);
    sb_free(&tr->keys);
    free(tr->words);
    free(tr->slots);
    free(tr);
}

static void word_grow(tok_trainer *tr)
{
    size_t cap = (tr->mask + 1) * 2;
    size_t *slots = xcalloc(cap, sizeof *slots);
    for (size_t i = 0; i < tr->n_words; i++) {
        const tt_word *w = &tr->words[i];
        size_t h = tok_hash_bytes(tr->keys.buf + w->off, w->len) & (cap - 1);
        while (slots[h]) h = (h + 1) & (cap - 1);
        slots[h] = i + 1;
    }
    free(tr->slots);
    tr->slots = slots;
    tr->mask = cap - 1;
}

/* Counts one pre-token. */
static void word_add(tok_trainer *tr, const char *s, size_t n)
{
    size_t h = tok_hash_bytes(s, n) & tr->mask;
    for (; tr->slots[h]; h = (h + 1) & tr->mask) {
        tt_word *w = &tr->words[tr->slots[h] - 1];
        if (w->len == n && !memcmp(tr->keys.buf + w->off, s, n)) {
            w->count++;
            return;
        }
    }
    if (tr->n_words == tr->cap_words) {
        tr->cap_words = tr->cap_words ? 2 * tr->cap_words : 1024;
        tr->words = xrealloc(tr->words, tr->cap_words * sizeof *tr->words);
    }
    tr->words[tr->n_words] = (tt_word){tr->keys.len, (uint32_t)n, 1};
    sb_putn(&tr->keys, s, n);
    tr->slots[h] = ++tr->n_words;
    if (tr->n_words * 2 > tr->mask) word_grow(tr);
}

bool tok_trainer_feed(tok_trainer *tr, const char *text, size_t len, char *err, size_t errsz)
{
    size_t bad;
    if (!uni_valid(text, len, &bad)) {
        snprintf(err, errsz, "not valid UTF-8 at byte %zu", bad);
        return false;
    }
    if (len > UINT32_MAX) {
        snprintf(err, errsz, "a text of %zu bytes is too long (at most 4 GiB at once)", len);
        return false;
    }
    tok_cps_fill(&tr->cps, text, len);
    const tok_cps *c = &tr->cps;
    size_t pos = 0, ms, me;
    while (pos < c->n) {
        int r = tok_regex_find(tr->re, c, pos, c->n, &ms, &me);
        if (r < 0) {
            snprintf(err, errsz, "the pre-tokenizer gave up at byte %zu (too much backtracking)",
                     c->off[pos]);
            return false;
        }
        if (r == 0) ms = me = c->n;
        if (ms > pos) word_add(tr, text + c->off[pos], c->off[ms] - c->off[pos]), tr->pieces++;
        if (me > ms) word_add(tr, text + c->off[ms], c->off[me] - c->off[ms]), tr->pieces++;
        pos = me;
    }
    tr->bytes += len;
    return true;
}

/* ---- pair counts: (left << 32 | right) -> count ---- */

typedef struct tt_pairs {
    uint64_t *keys; /* UINT64_MAX = empty */
    int64_t *counts;
    size_t mask, used;
} tt_pairs;

static uint64_t pair_key(uint32_t a, uint32_t b)
{
    return (uint64_t)a << 32 | b;
}

static size_t pair_slot(const tt_pairs *p, uint64_t key)
{
    size_t h = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & p->mask;
    while (p->keys[h] != UINT64_MAX && p->keys[h] != key) h = (h + 1) & p->mask;
    return h;
}

static void pairs_init(tt_pairs *p, size_t cap)
{
    p->mask = cap - 1;
    p->used = 0;
    p->keys = xmalloc(cap * sizeof *p->keys);
    memset(p->keys, 0xff, cap * sizeof *p->keys);
    p->counts = xcalloc(cap, sizeof *p->counts);
}

static void pairs_add(tt_pairs *p, uint32_t a, uint32_t b, int64_t n)
{
    uint64_t key = pair_key(a, b);
    size_t h = pair_slot(p, key);
    if (p->keys[h] == UINT64_MAX) {
        p->keys[h] = key;
        if (++p->used * 2 > p->mask) { /* keep the load under one half */
            tt_pairs big;
            pairs_init(&big, (p->mask + 1) * 2);
            for (size_t i = 0; i <= p->mask; i++)
                if (p->keys[i] != UINT64_MAX) {
                    size_t j = pair_slot(&big, p->keys[i]);
                    big.keys[j] = p->keys[i];
                    big.counts[j] = p->counts[i] + (p->keys[i] == key ? n : 0);
                    big.used++;
                }
            free(p->keys);
            free(p->counts);
            *p = big;
            return;
        }
    }
    p->counts[h] += n;
}

/* The most frequent pair (smallest key on a tie); its count in *count. */
static uint64_t pairs_best(const tt_pairs *p, int64_t *count)
{
    uint64_t best = UINT64_MAX;
    int64_t bc = 0;
    for (size_t i = 0; i <= p->mask; i++) {
        if (p->keys[i] == UINT64_MAX) continue;
        if (p->counts[i] > bc || (p->counts[i] == bc && bc > 0 && p->keys[i] < best)) {
            bc = p->counts[i];
            best = p->keys[i];
        }
    }
    *count = bc;
    return best;
}

/* Adds n times every adjacent pair of s[0..len). */
static void pairs_of_word(tt_pairs *p, const uint32_t *s, uint32_t len, int64_t n)
{
    for (uint32_t i = 0; i + 1 < len; i++) pairs_add(p, s[i], s[i + 1], n);
}

/* ---- the merges ---- */

/* The learned ids: their bytes, a map from bytes to id (two merges can
 * spell the same bytes: the later one reuses the id, as Hugging Face's
 * trainer does), and the merges in order. */
typedef struct tt_vocab {
    sb bytes;       /* each id's bytes, back to back */
    size_t *off;    /* per id */
    uint32_t *len;
    size_t n_ids, cap_ids;
    uint32_t *slots; /* id + 1, 0 = empty */
    size_t mask;
    uint32_t *left, *right; /* per merge: the pair */
    size_t n_merges, cap_merges;
} tt_vocab;

static int64_t vocab_find(const tt_vocab *v, const char *b, size_t n, size_t *slot)
{
    size_t h = tok_hash_bytes(b, n) & v->mask;
    for (; v->slots[h]; h = (h + 1) & v->mask) {
        uint32_t id = v->slots[h] - 1;
        if (v->len[id] == n && !memcmp(v->bytes.buf + v->off[id], b, n)) return id;
    }
    *slot = h;
    return -1;
}

/* The id of the bytes b[0..n), added when new. */
static uint32_t vocab_id(tt_vocab *v, const char *b, size_t n)
{
    size_t slot;
    int64_t id = vocab_find(v, b, n, &slot);
    if (id >= 0) return (uint32_t)id;
    if (v->n_ids == v->cap_ids) {
        v->cap_ids = v->cap_ids ? 2 * v->cap_ids : 512;
        v->off = xrealloc(v->off, v->cap_ids * sizeof *v->off);
        v->len = xrealloc(v->len, v->cap_ids * sizeof *v->len);
    }
    v->off[v->n_ids] = v->bytes.len;
    v->len[v->n_ids] = (uint32_t)n;
    sb_putn(&v->bytes, b, n);
    v->slots[slot] = (uint32_t)++v->n_ids;
    if (v->n_ids * 2 > v->mask) { /* rehash at half load */
        free(v->slots);
        v->mask = v->mask * 2 + 1;
        v->slots = xcalloc(v->mask + 1, sizeof *v->slots);
        for (size_t i = 0; i < v->n_ids; i++) {
            size_t h = tok_hash_bytes(v->bytes.buf + v->off[i], v->len[i]) & v->mask;
            while (v->slots[h]) h = (h + 1) & v->mask;
            v->slots[h] = (uint32_t)i + 1;
        }
    }
    return (uint32_t)(v->n_ids - 1);
}

static void vocab_init(tt_vocab *v)
{
    memset(v, 0, sizeof *v);
    sb_init(&v->bytes);
    v->mask = 1023;
    v->slots = xcalloc(v->mask + 1, sizeof *v->slots);
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        vocab_id(v, &c, 1);
    }
}

static void vocab_free(tt_vocab *v)
{
    sb_free(&v->bytes);
    free(v->off);
    free(v->len);
    free(v->slots);
    free(v->left);
    free(v->right);
}

static void merge_add(tt_vocab *v, uint32_t a, uint32_t b)
{
    if (v->n_merges == v->cap_merges) {
        v->cap_merges = v->cap_merges ? 2 * v->cap_merges : 512;
        v->left = xrealloc(v->left, v->cap_merges * sizeof *v->left);
        v->right = xrealloc(v->right, v->cap_merges * sizeof *v->right);
    }
    v->left[v->n_merges] = a;
    v->right[v->n_merges++] = b;
}

/* Replaces every (a, b) in the words that hold it by c, keeping the pair
 * counts right: a touched word's pairs are taken out, the word merged, its
 * new pairs put in. Words down to one symbol leave the active list. */
static void merge_all(tt_pairs *p, tt_word *words, size_t *active, size_t *n_active,
                      uint32_t *syms, uint32_t a, uint32_t b, uint32_t c)
{
    for (size_t k = 0; k < *n_active;) {
        tt_word *w = &words[active[k]];
        uint32_t *s = syms + w->off;
        uint32_t i = 0;
        while (i + 1 < w->len && !(s[i] == a && s[i + 1] == b)) i++;
        if (i + 1 >= w->len) {
            k++;
            continue;
        }
        pairs_of_word(p, s, w->len, -(int64_t)w->count);
        uint32_t j = 0;
        for (i = 0; i < w->len;) {
            if (i + 1 < w->len && s[i] == a && s[i + 1] == b) {
                s[j++] = c;
                i += 2;
            } else {
                s[j++] = s[i++];
            }
        }
        w->len = j;
        pairs_of_word(p, s, w->len, (int64_t)w->count);
        if (w->len < 2) active[k] = active[--*n_active];
        else k++;
    }
}

/* Learns merges into v until it holds max_ids ids, or no pair is seen
 * min_frequency times. */
static void learn(tok_trainer *tr, size_t max_ids, uint64_t min_frequency, tt_vocab *v)
{
    uint32_t *syms = xmalloc((tr->keys.len ? tr->keys.len : 1) * sizeof *syms);
    size_t *active = xmalloc((tr->n_words ? tr->n_words : 1) * sizeof *active), n_active = 0;
    tt_pairs p;
    pairs_init(&p, 1 << 14);
    for (size_t i = 0; i < tr->n_words; i++) {
        tt_word *w = &tr->words[i];
        for (uint32_t k = 0; k < w->len; k++)
            syms[w->off + k] = (unsigned char)tr->keys.buf[w->off + k];
        pairs_of_word(&p, syms + w->off, w->len, (int64_t)w->count);
        if (w->len >= 2) active[n_active++] = i;
    }
    sb joined;
    sb_init(&joined);
    while (v->n_ids < max_ids) {
        int64_t count;
        uint64_t best = pairs_best(&p, &count);
        if (count <= 0 || (uint64_t)count < min_frequency) break;
        uint32_t a = (uint32_t)(best >> 32), b = (uint32_t)best;
        joined.len = 0;
        sb_putn(&joined, v->bytes.buf + v->off[a], v->len[a]);
        sb_putn(&joined, v->bytes.buf + v->off[b], v->len[b]);
        uint32_t c = vocab_id(v, joined.buf, joined.len);
        merge_add(v, a, b);
        merge_all(&p, tr->words, active, &n_active, syms, a, b, c);
    }
    sb_free(&joined);
    free(p.keys);
    free(p.counts);
    free(syms);
    free(active);
}

/* A token's spelling in the file: its bytes through the ByteLevel map. */
static json_t *spelling(const tt_vocab *v, size_t id)
{
    sb s;
    sb_init(&s);
    tok_map(v->bytes.buf + v->off[id], v->len[id], &s);
    json_t *j = json_stringn(s.buf ? s.buf : "", s.len);
    sb_free(&s);
    return j;
}

static json_t *bytelevel(bool use_regex)
{
    return json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 0,
                     "trim_offsets", 0, "use_regex", use_regex);
}

static char *tokenizer_json(const tt_vocab *v)
{
    json_t *vocab = json_object(), *merges = json_array(), *added = json_array();
    for (size_t id = 0; id < v->n_ids; id++) {
        json_t *s = spelling(v, id);
        json_object_set_new(vocab, json_string_value(s), json_integer((json_int_t)id));
        json_decref(s);
    }
    for (size_t m = 0; m < v->n_merges; m++)
        json_array_append_new(merges, json_pack("[o, o]", spelling(v, v->left[m]),
                                                spelling(v, v->right[m])));
    for (size_t k = 0; k < TOK_TRAIN_SPECIALS; k++)
        json_array_append_new(added, json_pack("{s:I, s:s, s:b, s:b, s:b, s:b, s:b}", "id",
                                               (json_int_t)(v->n_ids + k), "content",
                                               TRAIN_SPECIALS[k], "single_word", 0, "lstrip", 0,
                                               "rstrip", 0, "normalized", 0, "special", 1));
    json_t *split = json_pack("{s:s, s:{s:s}, s:s, s:b}", "type", "Split", "pattern", "Regex",
                              TRAIN_PATTERN, "behavior", "Isolated", "invert", 0);
    json_t *root = json_pack(
        "{s:s, s:n, s:n, s:o, s:n, s:{s:s, s:[o, o]}, s:o, s:o, s:{s:s, s:n, s:n, s:n, s:n, s:b, "
        "s:b, s:b, s:o, s:o}}",
        "version", "1.0", "truncation", "padding", "added_tokens", added, "normalizer",
        "pre_tokenizer", "type", "Sequence", "pretokenizers", split, bytelevel(false),
        "post_processor", bytelevel(false), "decoder", bytelevel(false), "model", "type", "BPE",
        "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", 0,
        "byte_fallback", 0, "ignore_merges", 0, "vocab", vocab, "merges", merges);
    char *text = json_dumps(root, JSON_INDENT(1));
    json_decref(root);
    return text;
}

char *tok_trainer_run(tok_trainer *tr, const tok_train_options *o, tok_train_result *res,
                      char *err, size_t errsz)
{
    memset(res, 0, sizeof *res);
    size_t fixed = 256 + TOK_TRAIN_SPECIALS;
    if (o->vocab_size < fixed || o->vocab_size > TOK_TRAIN_MAX_VOCAB) {
        snprintf(err, errsz, "a vocabulary of %zu: expected %zu (the 256 bytes and %d special "
                 "tokens) to %d", o->vocab_size, fixed, TOK_TRAIN_SPECIALS, TOK_TRAIN_MAX_VOCAB);
        return NULL;
    }
    if (tr->bytes == 0) {
        snprintf(err, errsz, "no text to learn from");
        return NULL;
    }
    tt_vocab v;
    vocab_init(&v);
    learn(tr, o->vocab_size - TOK_TRAIN_SPECIALS, o->min_frequency ? o->min_frequency : 1, &v);
    char *text = tokenizer_json(&v);
    res->merges = v.n_merges;
    res->vocab = v.n_ids + TOK_TRAIN_SPECIALS;
    res->bytes = tr->bytes;
    res->words = tr->pieces;
    res->distinct_words = tr->n_words;
    res->stopped_early = res->vocab < o->vocab_size;
    vocab_free(&v);
    return text;
}

char *tok_train_config_json(void)
{
    json_t *root = json_pack("{s:b, s:b, s:n, s:s, s:s, s:s, s:b, s:s}", "add_bos_token", 0,
                             "add_prefix_space", 0, "bos_token", "eos_token", "<|im_end|>",
                             "pad_token", "<|endoftext|>", "chat_template", CHAT_CHATML_JINJA,
                             "clean_up_tokenization_spaces", 0, "tokenizer_class",
                             "PreTrainedTokenizerFast");
    char *text = json_dumps(root, JSON_INDENT(2));
    json_decref(root);
    return text;
}
