/* tok_internal.h: what the tokenizer's source files share and nothing else
 * includes (tests excepted): the tokenizer struct, the regex matcher
 * (tok_regex.c), the byte-level mapping (tok_bytes.c), the BPE core and its
 * hash maps (tok_bpe.c). tok.h (tokenizer.h, chat.h) is the public side. */
#ifndef LATHE_TOK_TOK_INTERNAL_H
#define LATHE_TOK_TOK_INTERNAL_H

#include "tok/tokenizer.h"
#include "tok/unicode.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- regex (tok_regex.c) ---- */

typedef struct tok_regex tok_regex;

/* A text prepared for matching: code points and, per code point, its
 * general category with bit 0x80 set for White_Space. */
typedef struct tok_cps {
    uint32_t *cp;
    uint8_t *cat;
    size_t *off; /* byte offset of each code point; off[n] = byte length */
    size_t n, cap;
    uint8_t ascii_cat[128]; /* the same facts for ASCII, looked up once */
    bool ascii_ready;
} tok_cps;

/* Decodes valid UTF-8 into t (reusing its memory). */
void tok_cps_fill(tok_cps *t, const char *s, size_t len);
void tok_cps_free(tok_cps *t);

/* Compiles a pattern (Oniguruma / Perl syntax, the subset in
 * docs/tokenizer.md). Returns NULL with a message naming the construct and
 * its offset in err when the pattern uses something unsupported. */
tok_regex *tok_regex_compile(const char *pattern, char *err, size_t errsz);
void tok_regex_free(tok_regex *re);

/* Finds the leftmost non-empty match in code points [from, end) of t,
 * treating `end` as the end of the text. Returns 1 with [*ms, *me), 0 when
 * there is none, -1 when the backtracking budget ran out. */
int tok_regex_find(const tok_regex *re, const tok_cps *t, size_t from, size_t end, size_t *ms,
                   size_t *me);

/* ---- byte-level mapping (tok_bytes.c) ---- */

/* GPT-2's bytes_to_unicode: the code point byte b is written as. */
uint32_t tok_byte_to_cp(unsigned char b);
/* The inverse: the byte of a mapped code point, or -1. */
int tok_cp_to_byte(uint32_t cp);
/* Converts a token's spelling to the bytes it stands for: appends to out
 * and returns true when every character is a mapped one; otherwise appends
 * nothing and returns false. */
bool tok_unmap(const char *s, size_t len, sb *out);
/* Appends the mapped spelling of raw bytes. */
void tok_map(const char *s, size_t len, sb *out);

/* ---- hash maps and BPE (tok_bpe.c) ---- */

/* bytes -> id, for the model's vocabulary (keys live in the tokenizer's
 * byte arena). */
typedef struct tok_strmap {
    int32_t *slots; /* id, or -1 when empty */
    size_t mask;
    size_t count;
} tok_strmap;

/* (left id, right id) -> (rank, merged id). */
typedef struct tok_merge {
    uint64_t key;
    uint32_t rank;
    int32_t id;
} tok_merge;

typedef struct tok_mergemap {
    tok_merge *slots; /* key 0 with id -1 means empty */
    size_t mask;
    size_t count;
} tok_mergemap;

/* A bounded cache: word bytes -> ids. Cleared when full. */
typedef struct tok_cache {
    struct tok_cache_slot *slots;
    size_t mask, count;
    sb keys;    /* word bytes of the entries */
    int32_t *vals;
    size_t nvals, capvals;
} tok_cache;

/* One added token (tokenizer.json's added_tokens). */
typedef struct tok_added {
    int32_t id;
    char *content; /* as written */
    size_t len;
    char *ncontent; /* normalised (what normalized = true tokens match) */
    size_t nlen;
    bool special, single_word, lstrip, rstrip, normalized;
} tok_added;

/* One Split pre-tokenizer step (a String pattern is compiled as an
 * escaped regex). */
typedef struct tok_step {
    tok_regex *re;
} tok_step;

struct tok_tokenizer {
    char *source;

    /* tokens by id: spelling (offsets into `spell`), bytes (into `bytes`),
     * kind; UINT32_MAX offsets for ids no token has */
    size_t n_ids;
    sb spell, bytes;
    uint32_t *soff, *boff, *blen;
    uint8_t *kind; /* TOK_KIND_* */

    tok_strmap vocab;   /* model vocabulary, byte-level tokens: bytes -> id */
    tok_mergemap merges;
    int32_t byte_id[256]; /* the token of each single byte, or -1 */
    bool ignore_merges;

    tok_added *added;
    size_t n_added;
    /* per first byte: indices into `added`, longest first; [0] for the raw
     * text (normalized = false), [1] for normalised text */
    uint32_t *added_by_byte[2][256];
    uint32_t n_added_by_byte[2][256];

    /* normaliser: forms applied in order (none when n_norm = 0) */
    uni_form norm[8];
    size_t n_norm;

    /* pre-tokenizer: Split steps, then the ByteLevel step */
    tok_step *steps;
    size_t n_steps;
    bool bl_prefix_space;
    tok_regex *bl_regex; /* ByteLevel use_regex: GPT-2's pattern; or NULL */

    /* post-processor (TemplateProcessing "single"): ids before / after */
    int32_t *post_pre, *post_post;
    size_t n_post_pre, n_post_post;

    int32_t bos, eos, pad;
    char *bos_token, *eos_token, *pad_token;
    char *chat_template;

    /* encode scratch and cache (this is why encode is not thread-safe) */
    tok_cache cache;
    /* for benchmarks and cross-checks: skip the word cache; use the
     * textbook merge loop (and no cache) */
    bool no_cache, naive;
    tok_cps cps, cps2;
    sb norm_buf, tmp;
    size_t *norm_map;
    size_t norm_map_cap;
    size_t *pieces[2];
    size_t piece_cap[2];
};

enum { TOK_KIND_NONE = 0, TOK_KIND_VOCAB = 1, TOK_KIND_ADDED = 2, TOK_KIND_SPECIAL = 3 };

/* Builds the maps once the vocabulary is filled. */
void tok_strmap_init(tok_strmap *m, size_t expected);
void tok_strmap_free(tok_strmap *m);
/* Adds id under its bytes (from t). Returns false when the bytes are
 * already present (the existing id is kept). */
bool tok_strmap_put(tok_strmap *m, const tok_tokenizer *t, int32_t id);
int32_t tok_strmap_get(const tok_strmap *m, const tok_tokenizer *t, const char *s, size_t len);

void tok_mergemap_init(tok_mergemap *m, size_t expected);
void tok_mergemap_free(tok_mergemap *m);
/* Sets (left, right) -> (rank, id); a later duplicate replaces the earlier
 * one, as in Hugging Face. */
void tok_mergemap_put(tok_mergemap *m, int32_t left, int32_t right, uint32_t rank, int32_t id);
const tok_merge *tok_mergemap_get(const tok_mergemap *m, int32_t left, int32_t right);

void tok_cache_init(tok_cache *c);
void tok_cache_free(tok_cache *c);

/* BPE of one pre-tokenized word (raw bytes): appends ids to out, each with
 * offset base + its first byte's position in the word. Uses the cache. */
void tok_bpe_word(tok_tokenizer *t, const char *w, size_t n, size_t base, tok_ids *out);

/* The two merge loops, exposed so a test can compare them: a plain scan
 * (short words) and a heap (long words). Append ids only (offsets 0). */
void tok_bpe_merge_scan(const tok_tokenizer *t, const char *w, size_t n, tok_ids *out);
/* The textbook loop (every pair's rank looked up again after each merge),
 * used when t->naive is set: a baseline and an independent cross-check. */
void tok_bpe_merge_naive(const tok_tokenizer *t, const char *w, size_t n, tok_ids *out);
void tok_bpe_merge_heap(const tok_tokenizer *t, const char *w, size_t n, tok_ids *out);

/* 64-bit hash of a byte string. */
uint64_t tok_hash_bytes(const void *p, size_t n);

#endif
