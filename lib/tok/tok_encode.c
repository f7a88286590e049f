/* tok_encode.c: the tokenizer's encode and decode pipelines and its
 * look-ups. Encoding runs, as Hugging Face tokenizers does:
 *   1. added tokens with normalized = false are cut out of the raw text
 *      (leftmost-longest, honouring single_word / lstrip / rstrip);
 *   2. each remaining segment is normalised (NFC ...), keeping a map from
 *      normalised bytes back to the caller's offsets;
 *   3. added tokens with normalized = true are cut out of that;
 *   4. the Split steps cut the rest into pieces (regex, Isolated);
 *   5. ByteLevel adds the prefix space and its own regex split if asked;
 *   6. every piece goes through BPE (tok_bpe.c).
 * Decoding turns ids back into bytes and repairs invalid UTF-8 with U+FFFD. */
#include "tok/tok_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ---- id lists ---- */

void tok_ids_init(tok_ids *v)
{
    memset(v, 0, sizeof *v);
}

void tok_ids_free(tok_ids *v)
{
    free(v->ids);
    free(v->offsets);
    memset(v, 0, sizeof *v);
}

void tok_ids_clear(tok_ids *v)
{
    v->len = 0;
}

void tok_ids_push(tok_ids *v, int32_t id, size_t offset)
{
    if (v->len == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 64;
        v->ids = xrealloc(v->ids, v->cap * sizeof *v->ids);
        v->offsets = xrealloc(v->offsets, v->cap * sizeof *v->offsets);
    }
    v->ids[v->len] = id;
    v->offsets[v->len] = offset;
    v->len++;
}

/* ---- added tokens ---- */

typedef struct added_match {
    size_t start, end;
    int32_t id;
} added_match;

/* Rust's \w, which Hugging Face's single_word check uses. */
static bool is_word_cp(uint32_t cp)
{
    int c = uni_category(cp);
    return (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_NO) || c == UTF8PROC_CATEGORY_PC;
}

/* The code point that ends s[0..end), or 0. */
static uint32_t cp_before(const char *s, size_t end)
{
    if (end == 0) return 0;
    size_t i = end - 1;
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80) i--;
    uint32_t cp = 0;
    size_t j = i;
    return uni_next(s, end, &j, &cp) ? cp : 0;
}

static bool single_word_ok(const char *s, size_t len, size_t start, size_t end)
{
    if (start > 0 && is_word_cp(cp_before(s, start))) return false;
    size_t j = end;
    uint32_t cp;
    if (end < len && uni_next(s, len, &j, &cp) && is_word_cp(cp)) return false;
    return true;
}

/* The next added token of list `pass` in s[from..len); `floor` is where
 * lstrip may reach back to. */
static bool next_added(const tok_tokenizer *t, int pass, const char *s, size_t len, size_t from,
                       size_t floor, unsigned flags, added_match *m)
{
    size_t i = from;
    while (i < len) {
        unsigned char b = (unsigned char)s[i];
        uint32_t n = t->n_added_by_byte[pass][b];
        const tok_added *hit = NULL;
        for (uint32_t k = 0; k < n && !hit; k++) {
            const tok_added *a = &t->added[t->added_by_byte[pass][b][k]];
            const char *c = pass ? a->ncontent : a->content;
            size_t cl = pass ? a->nlen : a->len;
            if (cl <= len - i && memcmp(s + i, c, cl) == 0) hit = a;
        }
        if (!hit) {
            i++;
            continue;
        }
        size_t start = i, end = i + (pass ? hit->nlen : hit->len);
        if (((flags & TOK_SPLIT_SPECIAL) && hit->special) ||
            (hit->single_word && !single_word_ok(s, len, start, end))) {
            i = end; /* consumed, as the automaton would, but not a match */
            continue;
        }
        if (hit->lstrip)
            while (start > floor) {
                size_t p = start - 1;
                while (p > floor && ((unsigned char)s[p] & 0xC0) == 0x80) p--;
                size_t q = p;
                uint32_t cp;
                if (!uni_next(s, len, &q, &cp) || !uni_is_white_space(cp)) break;
                start = p;
            }
        if (hit->rstrip) {
            size_t q = end;
            uint32_t cp;
            while (q < len && uni_next(s, len, &q, &cp) && uni_is_white_space(cp)) end = q;
        }
        *m = (added_match){start, end, hit->id};
        return true;
    }
    return false;
}

/* ---- normalisation ---- */

static void map_push(tok_tokenizer *t, size_t at, size_t value)
{
    if (at >= t->norm_map_cap) {
        t->norm_map_cap = t->norm_map_cap ? 2 * t->norm_map_cap : 256;
        while (at >= t->norm_map_cap) t->norm_map_cap *= 2;
        t->norm_map = xrealloc(t->norm_map, t->norm_map_cap * sizeof *t->norm_map);
    }
    t->norm_map[at] = value;
}

/* Applies the normaliser's forms, in order, to one chunk; appends to out. */
static void normalize_chunk(const tok_tokenizer *t, const char *s, size_t n, sb *out, sb *a, sb *b)
{
    sb_clear(a);
    sb_putn(a, s, n);
    for (size_t k = 0; k < t->n_norm; k++) {
        sb_clear(b);
        if (!uni_normalize(sb_str(a), a->len, t->norm[k], b)) continue; /* keep a */
        sb x = *a;
        *a = *b;
        *b = x;
    }
    sb_putn(out, sb_str(a), a->len);
}

/* Normalises s into t->norm_buf with t->norm_map[i] = the offset in s of
 * normalised byte i. Returns false when the text does not change (the
 * buffers then hold nothing useful). Text is cut before every ASCII character: NFC and its
 * relatives never combine across such a cut (no canonical composition
 * has an ASCII second character and ASCII characters are starters), so
 * each chunk normalises alone and maps to its own start. */
static bool normalize(tok_tokenizer *t, const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && (unsigned char)s[i] < 0x80) i++;
    if (i == n) return false; /* ASCII is invariant */
    sb *out = &t->norm_buf;
    sb_clear(out);
    sb a, b;
    sb_init(&a);
    sb_init(&b);
    size_t pos = 0;
    while (pos < n) {
        size_t j = pos + 1;
        if ((unsigned char)s[pos] < 0x80 && (j >= n || (unsigned char)s[j] < 0x80)) {
            map_push(t, out->len, pos);
            sb_putc(out, s[pos]);
            pos = j;
            continue;
        }
        while (j < n && (unsigned char)s[j] >= 0x80) j++;
        size_t at = out->len;
        normalize_chunk(t, s + pos, j - pos, out, &a, &b);
        for (size_t k = at; k < out->len; k++) map_push(t, k, pos);
        pos = j;
    }
    map_push(t, out->len, n);
    sb_free(&a);
    sb_free(&b);
    return !(out->len == n && memcmp(out->buf, s, n) == 0);
}

/* ---- pre-tokenization and BPE ---- */

/* Where a segment's normalised bytes come from. */
typedef struct seg_map {
    const size_t *map; /* NULL: identity */
    size_t base;       /* offset of the segment in the caller's text */
} seg_map;

static size_t orig_offset(const seg_map *sm, size_t npos)
{
    return sm->base + (sm->map ? sm->map[npos] : npos);
}

static void push_piece(size_t **v, size_t *cap, size_t *n, size_t a, size_t b)
{
    if (2 * (*n + 1) > *cap) {
        *cap = *cap ? 2 * *cap : 64;
        *v = xrealloc(*v, *cap * sizeof **v);
    }
    (*v)[2 * *n] = a;
    (*v)[2 * *n + 1] = b;
    (*n)++;
}

/* Splits code-point pieces [a,b) of c by re (Isolated: matches and gaps
 * both kept). Returns false when the regex gave up. */
static bool split_pieces(tok_regex *re, const tok_cps *c, const size_t *in, size_t nin,
                         size_t **out, size_t *cap, size_t *nout)
{
    *nout = 0;
    for (size_t k = 0; k < nin; k++) {
        size_t pos = in[2 * k], end = in[2 * k + 1], ms, me;
        while (pos < end) {
            int r = tok_regex_find(re, c, pos, end, &ms, &me);
            if (r < 0) return false;
            if (r == 0) break;
            if (ms > pos) push_piece(out, cap, nout, pos, ms);
            push_piece(out, cap, nout, ms, me);
            pos = me;
        }
        if (pos < end) push_piece(out, cap, nout, pos, end);
    }
    return true;
}

/* BPE of one word w (bytes) whose byte k sits at normalised position
 * npos(k) = npos0 + k - shift (k >= shift), npos0 for k < shift (the
 * prefix space). */
static void emit_word(tok_tokenizer *t, const char *w, size_t wn, size_t npos0, size_t shift,
                      const seg_map *sm, tok_ids *out)
{
    size_t first = out->len;
    tok_bpe_word(t, w, wn, 0, out);
    for (size_t i = first; i < out->len; i++) {
        size_t k = out->offsets[i];
        out->offsets[i] = orig_offset(sm, npos0 + (k >= shift ? k - shift : 0));
    }
}

/* The ByteLevel step on one piece (bytes p[0..n), at normalised npos). */
static bool bytelevel_piece(tok_tokenizer *t, const char *p, size_t n, size_t npos,
                            const seg_map *sm, tok_ids *out)
{
    size_t shift = 0;
    if (t->bl_prefix_space && (n == 0 || p[0] != ' ')) {
        sb_clear(&t->tmp);
        sb_putc(&t->tmp, ' ');
        sb_putn(&t->tmp, p, n);
        p = t->tmp.buf;
        n = t->tmp.len;
        shift = 1;
    }
    if (!t->bl_regex) {
        emit_word(t, p, n, npos, shift, sm, out);
        return true;
    }
    tok_cps *c = &t->cps2;
    tok_cps_fill(c, p, n);
    size_t whole[2] = {0, c->n}, np;
    if (!split_pieces(t->bl_regex, c, whole, 1, &t->pieces[1], &t->piece_cap[1], &np)) return false;
    for (size_t k = 0; k < np; k++) {
        size_t a = c->off[t->pieces[1][2 * k]], b = c->off[t->pieces[1][2 * k + 1]];
        size_t base = npos + (a >= shift ? a - shift : 0);
        emit_word(t, p + a, b - a, base, a < shift ? shift : 0, sm, out);
    }
    return true;
}

/* Pre-tokenizes and encodes p[0..n), normalised text at npos. */
static bool pretok_bpe(tok_tokenizer *t, const char *p, size_t n, size_t npos, const seg_map *sm,
                       tok_ids *out, char *err, size_t errsz)
{
    if (n == 0) return true;
    tok_cps *c = &t->cps;
    tok_cps_fill(c, p, n);
    size_t np = 0;
    push_piece(&t->pieces[0], &t->piece_cap[0], &np, 0, c->n);
    for (size_t s = 0; s < t->n_steps; s++) {
        size_t nn;
        if (!split_pieces(t->steps[s].re, c, t->pieces[0], np, &t->pieces[1], &t->piece_cap[1], &nn))
            goto gave_up;
        size_t *x = t->pieces[0];
        t->pieces[0] = t->pieces[1];
        t->pieces[1] = x;
        size_t xc = t->piece_cap[0];
        t->piece_cap[0] = t->piece_cap[1];
        t->piece_cap[1] = xc;
        np = nn;
    }
    /* copy: bytelevel_piece reuses pieces[1] and cps2 */
    for (size_t k = 0; k < np; k++) {
        size_t a = c->off[t->pieces[0][2 * k]], b = c->off[t->pieces[0][2 * k + 1]];
        if (!bytelevel_piece(t, p + a, b - a, npos + a, sm, out)) goto gave_up;
    }
    return true;
gave_up:
    snprintf(err, errsz,
             "the pre-tokenizer pattern needed too many backtracking steps on the text at byte %zu",
             orig_offset(sm, npos));
    return false;
}

/* Steps 2 to 6 for one segment s[0..n) at offset base of the text. */
static bool encode_segment(tok_tokenizer *t, const char *s, size_t n, size_t base, unsigned flags,
                           tok_ids *out, char *err, size_t errsz)
{
    seg_map sm = {NULL, base};
    const char *ns = s;
    size_t nn = n;
    if (t->n_norm && normalize(t, s, n)) {
        sm.map = t->norm_map;
        ns = t->norm_buf.buf;
        nn = t->norm_buf.len;
    }
    size_t seg = 0, from = 0;
    added_match m;
    while (next_added(t, 1, ns, nn, from, seg, flags, &m)) {
        if (m.start > seg && !pretok_bpe(t, ns + seg, m.start - seg, seg, &sm, out, err, errsz))
            return false;
        tok_ids_push(out, m.id, orig_offset(&sm, m.start));
        seg = from = m.end;
    }
    return pretok_bpe(t, ns + seg, nn - seg, seg, &sm, out, err, errsz);
}

bool tok_encode(tok_tokenizer *t, const char *text, size_t len, unsigned flags, tok_ids *out,
                char *err, size_t errsz)
{
    size_t bad = 0;
    if (!uni_valid(text, len, &bad)) {
        snprintf(err, errsz, "invalid UTF-8 at byte %zu", bad);
        return false;
    }
    size_t mark = out->len;
    if (flags & TOK_ADD_SPECIAL)
        for (size_t i = 0; i < t->n_post_pre; i++) tok_ids_push(out, t->post_pre[i], 0);
    size_t seg = 0, from = 0;
    added_match m;
    while (next_added(t, 0, text, len, from, seg, flags, &m)) {
        if (m.start > seg && !encode_segment(t, text + seg, m.start - seg, seg, flags, out, err, errsz))
            goto fail;
        tok_ids_push(out, m.id, m.start);
        seg = from = m.end;
    }
    if (len > seg && !encode_segment(t, text + seg, len - seg, seg, flags, out, err, errsz)) goto fail;
    if (flags & TOK_ADD_SPECIAL)
        for (size_t i = 0; i < t->n_post_post; i++) tok_ids_push(out, t->post_post[i], len);
    return true;
fail:
    out->len = mark;
    return false;
}

/* ---- decode ---- */

static bool known(const tok_tokenizer *t, int32_t id)
{
    return id >= 0 && (size_t)id < t->n_ids && t->kind[id] != TOK_KIND_NONE;
}

char *tok_decode(const tok_tokenizer *t, const int32_t *ids, size_t n, bool skip_special,
                 size_t *out_len, char *err, size_t errsz)
{
    sb raw, out;
    sb_init(&raw);
    sb_init(&out);
    for (size_t i = 0; i < n; i++) {
        if (!known(t, ids[i])) {
            snprintf(err, errsz, "id %d (position %zu) is not in the vocabulary (%zu ids)",
                     (int)ids[i], i, t->n_ids);
            sb_free(&raw);
            return NULL;
        }
        if (skip_special && t->kind[ids[i]] == TOK_KIND_SPECIAL) continue;
        sb_putn(&raw, t->bytes.buf + t->boff[ids[i]], t->blen[ids[i]]);
    }
    uni_append_lossy(&out, sb_str(&raw), raw.len);
    sb_free(&raw);
    if (out_len) *out_len = out.len;
    return out.buf ? sb_take(&out) : xstrdup("");
}

/* ---- look-ups ---- */

const char *tok_token_bytes(const tok_tokenizer *t, int32_t id, size_t *len)
{
    if (!known(t, id)) return NULL;
    *len = t->blen[id];
    return t->bytes.buf + t->boff[id];
}

int32_t tok_token_id(const tok_tokenizer *t, const char *token)
{
    size_t len = strlen(token);
    for (size_t i = 0; i < t->n_added; i++)
        if (t->added[i].len == len && memcmp(t->added[i].content, token, len) == 0)
            return t->added[i].id;
    sb raw;
    sb_init(&raw);
    int32_t id = -1;
    if (tok_unmap(token, len, &raw)) {
        id = tok_strmap_get(&t->vocab, t, sb_str(&raw), raw.len);
    } else {
        /* a spelling outside the byte alphabet: rare, look it up the slow way */
        for (size_t i = 0; i < t->n_ids && id < 0; i++)
            if (t->soff[i] != UINT32_MAX && strcmp(t->spell.buf + t->soff[i], token) == 0)
                id = (int32_t)i;
    }
    sb_free(&raw);
    return id;
}

const char *tok_token_str(const tok_tokenizer *t, int32_t id)
{
    return known(t, id) ? t->spell.buf + t->soff[id] : NULL;
}

size_t tok_vocab_size(const tok_tokenizer *t)
{
    return t->n_ids;
}

bool tok_is_special(const tok_tokenizer *t, int32_t id)
{
    return known(t, id) && t->kind[id] == TOK_KIND_SPECIAL;
}

bool tok_is_added(const tok_tokenizer *t, int32_t id)
{
    return known(t, id) && t->kind[id] >= TOK_KIND_ADDED;
}

static int merge_by_rank(const void *a, const void *b)
{
    const tok_merge *x = a, *y = b;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

size_t tok_merges(const tok_tokenizer *t, int32_t *left, int32_t *right, size_t cap)
{
    size_t n = t->merges.count;
    if (cap == 0 || n == 0) return n;
    tok_merge *all = xmalloc(n * sizeof *all);
    size_t k = 0;
    for (size_t i = 0; i <= t->merges.mask && k < n; i++)
        if (t->merges.slots[i].id >= 0) all[k++] = t->merges.slots[i];
    qsort(all, k, sizeof *all, merge_by_rank);
    for (size_t i = 0; i < k && i < cap; i++) {
        left[i] = (int32_t)(uint32_t)(all[i].key >> 32);
        right[i] = (int32_t)(uint32_t)all[i].key;
    }
    free(all);
    return n;
}

int32_t tok_bos_id(const tok_tokenizer *t)
{
    return t->bos;
}

int32_t tok_eos_id(const tok_tokenizer *t)
{
    return t->eos;
}

int32_t tok_pad_id(const tok_tokenizer *t)
{
    return t->pad;
}

const char *tok_bos_token(const tok_tokenizer *t)
{
    return t->bos_token;
}

const char *tok_eos_token(const tok_tokenizer *t)
{
    return t->eos_token;
}

const char *tok_chat_template(const tok_tokenizer *t)
{
    return t->chat_template;
}

const char *tok_source(const tok_tokenizer *t)
{
    return t->source;
}
