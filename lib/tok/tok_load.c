/* tok_load.c: reading tokenizer.json and tokenizer_config.json into a
 * tok_tokenizer: the BPE vocabulary and merges, added tokens, normaliser,
 * pre-tokenizer, post-processor and decoder, with an error naming the file
 * and the JSON field for anything malformed or unsupported. */
#include "tok/tok_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    TOK_MAX_FILE = 1 << 30,     /* 1 GiB: far above any real tokenizer.json */
    TOK_MAX_ID = 1 << 24,       /* ids above 16M are refused */
};

/* GPT-2's pre-tokenizer pattern, which ByteLevel applies when use_regex is
 * true (Hugging Face tokenizers, pre_tokenizers/byte_level.rs). */
static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static const char SENTENCEPIECE_HINT[] =
    "lathe reads byte-level BPE tokenizers (Qwen2 / Qwen2.5 / Qwen3, Llama 3); SentencePiece "
    "tokenizers (Llama 2, Mistral, Gemma, T5) are not supported yet";

typedef struct loader {
    tok_tokenizer *t;
    const char *file;     /* tokenizer.json, for messages */
    const char *cfg_file; /* tokenizer_config.json */
    diag_list *d;
    bool failed;
} loader;

static diag *lerr(loader *L, const char *file, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static diag *lerr(loader *L, const char *file, const char *path, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    L->failed = true;
    return diag_add(L->d, DIAG_ERROR, file, 0, 0, path, msg);
}

/* A boolean field with a default; an error when present and not boolean. */
static bool get_bool(loader *L, json_t *obj, const char *key, const char *path, bool dflt)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return dflt;
    if (!json_is_boolean(v)) {
        char p[160];
        snprintf(p, sizeof p, "%s.%s", path, key);
        diag *x = lerr(L, L->file, p, "wrong type");
        diag_set_expected(x, "true or false");
        diag_set_found(x, "%s", json_kind(v));
        return dflt;
    }
    return json_is_true(v);
}

static const char *type_of(json_t *obj)
{
    return json_string_value(json_object_get(obj, "type"));
}

/* ---- the id tables ---- */

static void ensure_ids(tok_tokenizer *t, size_t n)
{
    if (n <= t->n_ids) return;
    t->soff = xrealloc(t->soff, n * sizeof *t->soff);
    t->boff = xrealloc(t->boff, n * sizeof *t->boff);
    t->blen = xrealloc(t->blen, n * sizeof *t->blen);
    t->kind = xrealloc(t->kind, n);
    for (size_t i = t->n_ids; i < n; i++) {
        t->soff[i] = t->boff[i] = UINT32_MAX;
        t->blen[i] = 0;
        t->kind[i] = TOK_KIND_NONE;
    }
    t->n_ids = n;
}

/* Records id's spelling and bytes. `bytelevel`: the spelling is undone
 * through the byte mapping when every character is a mapped one. Returns
 * true when the bytes came from the mapping. */
static bool set_token(tok_tokenizer *t, int32_t id, const char *s, size_t len, uint8_t kind)
{
    t->soff[id] = (uint32_t)t->spell.len;
    sb_putn(&t->spell, s, len);
    sb_putc(&t->spell, 0);
    t->boff[id] = (uint32_t)t->bytes.len;
    bool mapped = tok_unmap(s, len, &t->bytes);
    if (!mapped) sb_putn(&t->bytes, s, len);
    t->blen[id] = (uint32_t)(t->bytes.len - t->boff[id]);
    t->kind[id] = kind;
    return mapped;
}

/* ---- model ---- */

static bool check_model_kind(loader *L, json_t *model)
{
    const char *type = type_of(model);
    if (!type && json_object_get(model, "merges")) type = "BPE";
    if (!type) {
        lerr(L, L->file, "model.type", "missing model type");
        return false;
    }
    if (strcmp(type, "Unigram") == 0) {
        diag *x = lerr(L, L->file, "model.type",
                       "this is a SentencePiece Unigram tokenizer, which is not supported yet");
        diag_set_suggestion(x, "%s", SENTENCEPIECE_HINT);
        return false;
    }
    if (strcmp(type, "BPE") != 0) {
        diag *x = lerr(L, L->file, "model.type", "tokenizer model '%s' is not supported", type);
        diag_set_expected(x, "BPE");
        diag_set_suggestion(x, "%s", SENTENCEPIECE_HINT);
        return false;
    }
    if (get_bool(L, model, "byte_fallback", "model", false)) {
        diag *x = lerr(L, L->file, "model.byte_fallback",
                       "this is a SentencePiece-style BPE tokenizer (byte_fallback), which is "
                       "not supported yet");
        diag_set_suggestion(x, "%s", SENTENCEPIECE_HINT);
        return false;
    }
    const char *keys[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (size_t i = 0; i < 2; i++) {
        const char *v = json_string_value(json_object_get(model, keys[i]));
        if (v && *v) {
            char p[80];
            snprintf(p, sizeof p, "model.%s", keys[i]);
            lerr(L, L->file, p, "'%s' is not supported (byte-level BPE does not use it)", v);
            return false;
        }
    }
    json_t *dropout = json_object_get(model, "dropout");
    if (dropout && !json_is_null(dropout) && json_number_value(dropout) != 0.0) {
        lerr(L, L->file, "model.dropout", "BPE dropout is a training-time option; lathe does not apply it");
        return false;
    }
    return true;
}

static bool load_vocab(loader *L, json_t *model)
{
    tok_tokenizer *t = L->t;
    json_t *vocab = json_object_get(model, "vocab");
    if (!json_is_object(vocab)) {
        diag *x = lerr(L, L->file, "model.vocab", vocab ? "wrong type" : "missing");
        diag_set_expected(x, "an object mapping token -> id");
        return false;
    }
    size_t max_id = 0;
    const char *key;
    json_t *v;
    json_object_foreach(vocab, key, v) {
        json_int_t id = json_integer_value(v);
        if (!json_is_integer(v) || id < 0 || id >= TOK_MAX_ID) {
            diag *x = lerr(L, L->file, "model.vocab", "bad id for token \"%.60s\"", key);
            diag_set_expected(x, "an integer id from 0 to %d", TOK_MAX_ID - 1);
            diag_set_found(x, "%s", json_kind(v));
            return false;
        }
        if ((size_t)id + 1 > max_id) max_id = (size_t)id + 1;
    }
    ensure_ids(t, max_id);
    tok_strmap_init(&t->vocab, json_object_size(vocab));
    json_object_foreach(vocab, key, v) {
        int32_t id = (int32_t)json_integer_value(v);
        if (t->kind[id] != TOK_KIND_NONE) {
            lerr(L, L->file, "model.vocab", "id %d is given to two tokens (\"%.60s\" and another)",
                 id, key);
            return false;
        }
        if (set_token(t, id, key, strlen(key), TOK_KIND_VOCAB)) tok_strmap_put(&t->vocab, t, id);
    }
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        t->byte_id[b] = tok_strmap_get(&t->vocab, t, &c, 1);
    }
    return true;
}

/* A token of a merge, by spelling: its id or -1. */
static int32_t spelling_id(const tok_tokenizer *t, const char *s, size_t len, sb *scratch)
{
    sb_clear(scratch);
    if (!tok_unmap(s, len, scratch)) return -1;
    return tok_strmap_get(&t->vocab, t, scratch->buf ? scratch->buf : "", scratch->len);
}

static bool merge_parts(json_t *m, const char **a, size_t *alen, const char **b, size_t *blen)
{
    if (json_is_string(m)) {
        const char *s = json_string_value(m);
        size_t n = json_string_length(m);
        const char *sp = memchr(s, ' ', n);
        if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - s))) return false;
        *a = s;
        *alen = (size_t)(sp - s);
        *b = sp + 1;
        *blen = n - *alen - 1;
        return *alen && *blen;
    }
    if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
        json_is_string(json_array_get(m, 1))) {
        *a = json_string_value(json_array_get(m, 0));
        *alen = json_string_length(json_array_get(m, 0));
        *b = json_string_value(json_array_get(m, 1));
        *blen = json_string_length(json_array_get(m, 1));
        return true;
    }
    return false;
}

static bool load_merges(loader *L, json_t *model)
{
    tok_tokenizer *t = L->t;
    json_t *merges = json_object_get(model, "merges");
    if (!merges || json_is_null(merges)) merges = NULL;
    if (merges && !json_is_array(merges)) {
        diag *x = lerr(L, L->file, "model.merges", "wrong type");
        diag_set_expected(x, "an array of \"a b\" strings or [\"a\", \"b\"] pairs");
        diag_set_found(x, "%s", json_kind(merges));
        return false;
    }
    size_t n = merges ? json_array_size(merges) : 0;
    tok_mergemap_init(&t->merges, n);
    sb scratch, both;
    sb_init(&scratch);
    sb_init(&both);
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        const char *a, *b;
        size_t alen, blen;
        char path[64];
        if (!merge_parts(json_array_get(merges, i), &a, &alen, &b, &blen)) {
            snprintf(path, sizeof path, "model.merges[%zu]", i);
            diag *x = lerr(L, L->file, path, "malformed merge");
            diag_set_expected(x, "\"a b\" (two tokens, one space) or [\"a\", \"b\"]");
            ok = false;
            break;
        }
        int32_t ia = spelling_id(t, a, alen, &scratch), ib = spelling_id(t, b, blen, &scratch);
        sb_clear(&both);
        sb_putn(&both, a, alen);
        sb_putn(&both, b, blen);
        int32_t im = spelling_id(t, both.buf, both.len, &scratch);
        if (ia < 0 || ib < 0 || im < 0) {
            snprintf(path, sizeof path, "model.merges[%zu]", i);
            const char *missing = ia < 0 ? a : ib < 0 ? b : both.buf;
            int mlen = (int)(ia < 0 ? alen : ib < 0 ? blen : both.len);
            lerr(L, L->file, path, "merge uses token \"%.*s\", which is not in the vocabulary",
                 mlen > 60 ? 60 : mlen, missing);
            ok = false;
            break;
        }
        tok_mergemap_put(&t->merges, ia, ib, (uint32_t)i, im);
    }
    sb_free(&scratch);
    sb_free(&both);
    t->ignore_merges = get_bool(L, model, "ignore_merges", "model", false);
    return ok;
}

/* ---- added tokens ---- */

static bool normalize_all(const tok_tokenizer *t, const char *s, size_t len, sb *out)
{
    sb a, b;
    sb_init(&a);
    sb_init(&b);
    sb_putn(&a, s, len);
    bool ok = true;
    for (size_t k = 0; k < t->n_norm && ok; k++) {
        sb_clear(&b);
        ok = uni_normalize(sb_str(&a), a.len, t->norm[k], &b);
        sb tmp = a;
        a = b;
        b = tmp;
    }
    sb_putn(out, sb_str(&a), a.len);
    sb_free(&a);
    sb_free(&b);
    return ok;
}

/* Indexes the added tokens by first byte, longest first (for
 * leftmost-longest matching): list 0 for the raw text, 1 for normalised. */
static void index_added(tok_tokenizer *t)
{
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < t->n_added; i++) {
            const tok_added *a = &t->added[i];
            if (a->normalized != (pass == 1)) continue;
            const char *c = pass ? a->ncontent : a->content;
            size_t len = pass ? a->nlen : a->len;
            if (!len) continue;
            unsigned char b = (unsigned char)c[0];
            uint32_t k = t->n_added_by_byte[pass][b]++;
            t->added_by_byte[pass][b] =
                xrealloc(t->added_by_byte[pass][b], (k + 1) * sizeof(uint32_t));
            t->added_by_byte[pass][b][k] = (uint32_t)i;
        }
    for (int pass = 0; pass < 2; pass++)
        for (int b = 0; b < 256; b++)
            if (t->n_added_by_byte[pass][b] > 1) {
                /* insertion sort by length, longest first (lists are short) */
                uint32_t *v = t->added_by_byte[pass][b];
                for (uint32_t x = 1; x < t->n_added_by_byte[pass][b]; x++) {
                    uint32_t key = v[x];
                    size_t klen = pass ? t->added[key].nlen : t->added[key].len;
                    uint32_t y = x;
                    while (y > 0 && (pass ? t->added[v[y - 1]].nlen : t->added[v[y - 1]].len) < klen) {
                        v[y] = v[y - 1];
                        y--;
                    }
                    v[y] = key;
                }
            }
}

static bool load_added(loader *L, json_t *root)
{
    tok_tokenizer *t = L->t;
    json_t *arr = json_object_get(root, "added_tokens");
    if (!arr || json_is_null(arr)) return true;
    if (!json_is_array(arr)) {
        diag *x = lerr(L, L->file, "added_tokens", "wrong type");
        diag_set_expected(x, "an array of objects");
        return false;
    }
    size_t n = json_array_size(arr);
    t->added = xcalloc(n ? n : 1, sizeof *t->added);
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(arr, i);
        char path[64];
        snprintf(path, sizeof path, "added_tokens[%zu]", i);
        json_t *jid = json_object_get(o, "id"), *jc = json_object_get(o, "content");
        json_int_t id = json_integer_value(jid);
        if (!json_is_object(o) || !json_is_integer(jid) || id < 0 || id >= TOK_MAX_ID ||
            !json_is_string(jc) || json_string_length(jc) == 0) {
            diag *x = lerr(L, L->file, path, "malformed added token");
            diag_set_expected(x, "{\"id\": 0..%d, \"content\": non-empty string, ...}", TOK_MAX_ID - 1);
            return false;
        }
        tok_added *a = &t->added[t->n_added++];
        a->id = (int32_t)id;
        a->len = json_string_length(jc);
        a->content = xstrndup(json_string_value(jc), a->len);
        a->special = get_bool(L, o, "special", path, false);
        a->single_word = get_bool(L, o, "single_word", path, false);
        a->lstrip = get_bool(L, o, "lstrip", path, false);
        a->rstrip = get_bool(L, o, "rstrip", path, false);
        a->normalized = get_bool(L, o, "normalized", path, !a->special);
        sb nb;
        sb_init(&nb);
        normalize_all(t, a->content, a->len, &nb);
        a->nlen = nb.len;
        a->ncontent = nb.len ? sb_take(&nb) : xstrdup("");
        sb_free(&nb);
        ensure_ids(t, (size_t)id + 1);
        uint8_t kind = a->special ? TOK_KIND_SPECIAL : TOK_KIND_ADDED;
        if (t->kind[id] == TOK_KIND_VOCAB) {
            /* a vocabulary token promoted to an added token: must be the same token */
            sb raw;
            sb_init(&raw);
            if (!tok_unmap(a->content, a->len, &raw)) sb_putn(&raw, a->content, a->len);
            bool same = raw.len == t->blen[id] && memcmp(sb_str(&raw), t->bytes.buf + t->boff[id], raw.len) == 0;
            sb_free(&raw);
            if (!same) {
                lerr(L, L->file, path, "id %d already belongs to the vocabulary token \"%.60s\"",
                     a->id, t->spell.buf + t->soff[id]);
                return false;
            }
            t->kind[id] = kind;
        } else if (t->kind[id] != TOK_KIND_NONE) {
            lerr(L, L->file, path, "id %d is given to two added tokens", a->id);
            return false;
        } else {
            set_token(t, a->id, a->content, a->len, kind);
        }
    }
    if (L->failed) return false;
    index_added(t);
    return true;
}

/* ---- normaliser ---- */

static bool sentencepiece_component(loader *L, const char *path, const char *type)
{
    if (strcmp(type, "Prepend") == 0 || strcmp(type, "Replace") == 0 ||
        strcmp(type, "Metaspace") == 0 || strcmp(type, "Precompiled") == 0 ||
        strcmp(type, "ByteFallback") == 0 || strcmp(type, "Fuse") == 0 ||
        strcmp(type, "Strip") == 0) {
        diag *x = lerr(L, L->file, path,
                       "'%s' belongs to a SentencePiece-style tokenizer, which is not supported yet",
                       type);
        diag_set_suggestion(x, "%s", SENTENCEPIECE_HINT);
        return true;
    }
    return false;
}

static bool load_normalizer(loader *L, json_t *n, const char *path)
{
    tok_tokenizer *t = L->t;
    if (!n || json_is_null(n)) return true;
    const char *type = type_of(n);
    if (!type) {
        lerr(L, L->file, path, "normalizer without a type");
        return false;
    }
    if (strcmp(type, "Sequence") == 0) {
        json_t *list = json_object_get(n, "normalizers");
        if (!json_is_array(list)) {
            lerr(L, L->file, path, "Sequence without a normalizers array");
            return false;
        }
        for (size_t i = 0; i < json_array_size(list); i++) {
            char p[96];
            snprintf(p, sizeof p, "%s.normalizers[%zu]", path, i);
            if (!load_normalizer(L, json_array_get(list, i), p)) return false;
        }
        return true;
    }
    static const struct {
        const char *name;
        uni_form form;
    } forms[] = {{"NFC", UNI_NFC}, {"NFD", UNI_NFD}, {"NFKC", UNI_NFKC}, {"NFKD", UNI_NFKD}};
    for (size_t i = 0; i < 4; i++)
        if (strcmp(type, forms[i].name) == 0) {
            if (t->n_norm == sizeof t->norm / sizeof t->norm[0]) {
                lerr(L, L->file, path, "too many normalizers");
                return false;
            }
            t->norm[t->n_norm++] = forms[i].form;
            return true;
        }
    if (!sentencepiece_component(L, path, type)) {
        diag *x = lerr(L, L->file, path, "normalizer '%s' is not supported", type);
        diag_set_expected(x, "NFC, NFD, NFKC, NFKD or a Sequence of them");
    }
    return false;
}

/* ---- pre-tokenizer ---- */

/* A String pattern becomes a regex of escaped characters. */
static char *escape_literal(const char *s)
{
    sb out;
    sb_init(&out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x80 && !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) {
            if (c == '\n') sb_puts(&out, "\\n");
            else if (c == '\r') sb_puts(&out, "\\r");
            else if (c == '\t') sb_puts(&out, "\\t");
            else if (c < 0x20 || c == 0x7F) sb_printf(&out, "\\x%02X", c);
            else {
                sb_putc(&out, '\\');
                sb_putc(&out, (char)c);
            }
        } else {
            sb_putc(&out, (char)c);
        }
    }
    return out.len ? sb_take(&out) : xstrdup("");
}

static bool add_split(loader *L, json_t *p, const char *path)
{
    tok_tokenizer *t = L->t;
    json_t *pat = json_object_get(p, "pattern");
    const char *rx = json_string_value(json_object_get(pat, "Regex"));
    const char *lit = json_string_value(json_object_get(pat, "String"));
    const char *behavior = json_string_value(json_object_get(p, "behavior"));
    if (!rx && !lit) {
        diag *x = lerr(L, L->file, path, "Split without a pattern");
        diag_set_expected(x, "\"pattern\": {\"Regex\": \"...\"} or {\"String\": \"...\"}");
        return false;
    }
    if (!behavior || strcmp(behavior, "Isolated") != 0) {
        diag *x = lerr(L, L->file, path, "Split behavior '%s' is not supported",
                       behavior ? behavior : "(missing)");
        diag_set_expected(x, "Isolated");
        return false;
    }
    if (get_bool(L, p, "invert", path, false)) {
        lerr(L, L->file, path, "Split with invert: true is not supported");
        return false;
    }
    if (lit && !*lit) {
        lerr(L, L->file, path, "Split with an empty String pattern");
        return false;
    }
    char *pattern = lit ? escape_literal(lit) : xstrdup(rx);
    char err[300];
    tok_regex *re = tok_regex_compile(pattern, err, sizeof err);
    free(pattern);
    if (!re) {
        diag *x = lerr(L, L->file, path, "pre-tokenizer pattern: %s", err);
        diag_set_suggestion(x, "see docs/tokenizer.md for the regex constructs lathe supports");
        return false;
    }
    t->steps = xrealloc(t->steps, (t->n_steps + 1) * sizeof *t->steps);
    t->steps[t->n_steps++].re = re;
    return true;
}

static bool load_pretok(loader *L, json_t *p, const char *path, bool *have_bytelevel)
{
    tok_tokenizer *t = L->t;
    if (!p || json_is_null(p)) return true;
    const char *type = type_of(p);
    if (!type) {
        lerr(L, L->file, path, "pre-tokenizer without a type");
        return false;
    }
    if (*have_bytelevel) {
        lerr(L, L->file, path, "a pre-tokenizer after ByteLevel ('%s') is not supported", type);
        return false;
    }
    if (strcmp(type, "Sequence") == 0) {
        json_t *list = json_object_get(p, "pretokenizers");
        if (!json_is_array(list)) {
            lerr(L, L->file, path, "Sequence without a pretokenizers array");
            return false;
        }
        for (size_t i = 0; i < json_array_size(list); i++) {
            char sub[96];
            snprintf(sub, sizeof sub, "%s.pretokenizers[%zu]", path, i);
            if (!load_pretok(L, json_array_get(list, i), sub, have_bytelevel)) return false;
        }
        return true;
    }
    if (strcmp(type, "Split") == 0) return add_split(L, p, path);
    if (strcmp(type, "ByteLevel") == 0) {
        *have_bytelevel = true;
        t->bl_prefix_space = get_bool(L, p, "add_prefix_space", path, true);
        if (get_bool(L, p, "use_regex", path, true)) {
            char err[300];
            t->bl_regex = tok_regex_compile(GPT2_PATTERN, err, sizeof err);
        }
        return !L->failed;
    }
    if (!sentencepiece_component(L, path, type)) {
        diag *x = lerr(L, L->file, path, "pre-tokenizer '%s' is not supported", type);
        diag_set_expected(x, "Split (Isolated) and ByteLevel, alone or in a Sequence");
    }
    return false;
}

/* ---- post-processor and decoder ---- */

static bool template_ids(loader *L, json_t *proc, json_t *item, const char *path, bool after_a)
{
    tok_tokenizer *t = L->t;
    json_t *st = json_object_get(item, "SpecialToken");
    const char *name = json_string_value(json_object_get(st, "id"));
    json_t *ids = json_object_get(json_object_get(json_object_get(proc, "special_tokens"), name ? name : ""), "ids");
    if (!name || !json_is_array(ids)) {
        lerr(L, L->file, path, "TemplateProcessing: special token '%s' has no ids in special_tokens",
             name ? name : "(missing)");
        return false;
    }
    for (size_t i = 0; i < json_array_size(ids); i++) {
        json_int_t id = json_integer_value(json_array_get(ids, i));
        if (id < 0 || (size_t)id >= t->n_ids || t->kind[id] == TOK_KIND_NONE) {
            lerr(L, L->file, path, "TemplateProcessing: id %lld is not a token", (long long)id);
            return false;
        }
        int32_t **v = after_a ? &t->post_post : &t->post_pre;
        size_t *n = after_a ? &t->n_post_post : &t->n_post_pre;
        *v = xrealloc(*v, (*n + 1) * sizeof **v);
        (*v)[(*n)++] = (int32_t)id;
    }
    return true;
}

static bool load_template(loader *L, json_t *p, const char *path)
{
    json_t *single = json_object_get(p, "single");
    if (!json_is_array(single)) {
        lerr(L, L->file, path, "TemplateProcessing without a 'single' list");
        return false;
    }
    bool after_a = false;
    for (size_t i = 0; i < json_array_size(single); i++) {
        json_t *item = json_array_get(single, i);
        char sub[96];
        snprintf(sub, sizeof sub, "%s.single[%zu]", path, i);
        json_t *seq = json_object_get(item, "Sequence");
        if (seq) {
            const char *id = json_string_value(json_object_get(seq, "id"));
            if (!id || strcmp(id, "A") != 0 || after_a) {
                lerr(L, L->file, sub, "TemplateProcessing: unexpected sequence in 'single'");
                return false;
            }
            after_a = true;
        } else if (!template_ids(L, p, item, sub, after_a)) {
            return false;
        }
    }
    return true;
}

static bool load_post(loader *L, json_t *p, const char *path)
{
    if (!p || json_is_null(p)) return true;
    const char *type = type_of(p);
    if (type && strcmp(type, "Sequence") == 0) {
        json_t *list = json_object_get(p, "processors");
        for (size_t i = 0; i < json_array_size(list); i++) {
            char sub[96];
            snprintf(sub, sizeof sub, "%s.processors[%zu]", path, i);
            if (!load_post(L, json_array_get(list, i), sub)) return false;
        }
        return true;
    }
    if (type && strcmp(type, "ByteLevel") == 0) return true; /* offsets only */
    if (type && strcmp(type, "TemplateProcessing") == 0) return load_template(L, p, path);
    diag *x = lerr(L, L->file, path, "post-processor '%s' is not supported", type ? type : "(none)");
    diag_set_expected(x, "ByteLevel, TemplateProcessing or a Sequence of them");
    return false;
}

static bool load_decoder(loader *L, json_t *p, const char *path)
{
    if (!p || json_is_null(p)) return true; /* decoded as byte-level anyway */
    const char *type = type_of(p);
    if (type && strcmp(type, "ByteLevel") == 0) return true;
    if (type && strcmp(type, "Sequence") == 0) {
        json_t *list = json_object_get(p, "decoders");
        for (size_t i = 0; i < json_array_size(list); i++) {
            char sub[96];
            snprintf(sub, sizeof sub, "%s.decoders[%zu]", path, i);
            if (!load_decoder(L, json_array_get(list, i), sub)) return false;
        }
        return true;
    }
    if (!type || !sentencepiece_component(L, path, type)) {
        diag *x = lerr(L, L->file, path, "decoder '%s' is not supported", type ? type : "(none)");
        diag_set_expected(x, "ByteLevel");
    }
    return false;
}

/* ---- tokenizer_config.json ---- */

/* bos_token and friends: a string, or an AddedToken object {"content": ..}. */
static char *config_token(json_t *cfg, const char *key)
{
    json_t *v = json_object_get(cfg, key);
    if (json_is_object(v)) v = json_object_get(v, "content");
    const char *s = json_string_value(v);
    return s ? xstrdup(s) : NULL;
}

static int32_t resolve_config_token(loader *L, const char *key, const char *content)
{
    if (!content) return -1;
    int32_t id = tok_token_id(L->t, content);
    if (id < 0)
        diag_add(L->d, DIAG_WARNING, L->cfg_file, 0, 0, key,
                 "this token is not in the tokenizer's vocabulary; its id is unknown");
    return id;
}

static void load_config(loader *L, const char *cfg_json, size_t cfg_len)
{
    tok_tokenizer *t = L->t;
    json_error_t je;
    /* INT_AS_REAL: model_max_length is often 1e30, beyond a 64-bit integer */
    json_t *cfg = json_loadb(cfg_json, cfg_len, JSON_DECODE_INT_AS_REAL, &je);
    if (!json_is_object(cfg)) {
        diag_add(L->d, DIAG_ERROR, L->cfg_file, je.line > 0 ? je.line : 0,
                 je.column > 0 ? je.column : 0, NULL, cfg ? "expected a JSON object" : je.text);
        L->failed = true;
        json_decref(cfg);
        return;
    }
    t->bos_token = config_token(cfg, "bos_token");
    t->eos_token = config_token(cfg, "eos_token");
    t->pad_token = config_token(cfg, "pad_token");
    t->bos = resolve_config_token(L, "bos_token", t->bos_token);
    t->eos = resolve_config_token(L, "eos_token", t->eos_token);
    t->pad = resolve_config_token(L, "pad_token", t->pad_token);
    json_t *ct = json_object_get(cfg, "chat_template");
    if (json_is_string(ct)) {
        t->chat_template = xstrdup(json_string_value(ct));
    } else if (json_is_array(ct)) { /* [{"name": "default", "template": "..."}, ...] */
        for (size_t i = 0; i < json_array_size(ct); i++) {
            json_t *e = json_array_get(ct, i);
            const char *name = json_string_value(json_object_get(e, "name"));
            const char *tmpl = json_string_value(json_object_get(e, "template"));
            if (name && tmpl && strcmp(name, "default") == 0) t->chat_template = xstrdup(tmpl);
        }
    } else if (ct && !json_is_null(ct)) {
        diag *x = diag_add(L->d, DIAG_ERROR, L->cfg_file, 0, 0, "chat_template", "wrong type");
        diag_set_expected(x, "a string");
        L->failed = true;
    }
    json_decref(cfg);
}

/* ---- entry points ---- */

static tok_tokenizer *tok_new(const char *source)
{
    tok_tokenizer *t = xcalloc(1, sizeof *t);
    t->source = xstrdup(source);
    t->bos = t->eos = t->pad = -1;
    for (int b = 0; b < 256; b++) t->byte_id[b] = -1;
    tok_cache_init(&t->cache);
    return t;
}

static void load_root(loader *L, json_t *root)
{
    json_t *model = json_object_get(root, "model");
    bool bytelevel = false;
    if (!json_is_object(model)) {
        diag *x = lerr(L, L->file, "model", "missing or not an object");
        diag_set_expected(x, "a Hugging Face tokenizers file with a \"model\" object");
        return;
    }
    if (!check_model_kind(L, model) || !load_normalizer(L, json_object_get(root, "normalizer"), "normalizer") ||
        !load_vocab(L, model) || !load_merges(L, model) || !load_added(L, root) ||
        !load_pretok(L, json_object_get(root, "pre_tokenizer"), "pre_tokenizer", &bytelevel) ||
        !load_post(L, json_object_get(root, "post_processor"), "post_processor") ||
        !load_decoder(L, json_object_get(root, "decoder"), "decoder"))
        return;
    if (!bytelevel) {
        diag *x = lerr(L, L->file, "pre_tokenizer",
                       "no ByteLevel pre-tokenizer: this is not a byte-level BPE tokenizer");
        diag_set_suggestion(x, "%s", SENTENCEPIECE_HINT);
    }
}

static tok_tokenizer *load_impl(const char *json, size_t len, const char *file, const char *cfg,
                                size_t cfg_len, const char *cfg_file, diag_list *diags)
{
    loader L = {.file = file, .cfg_file = cfg_file, .d = diags};
    json_error_t je;
    json_t *root = json_loadb(json, len, 0, &je);
    if (!root) {
        diag *x = diag_add(diags, DIAG_ERROR, file, je.line > 0 ? je.line : 0,
                           je.column > 0 ? je.column : 0, NULL, "not valid JSON");
        diag_set_found(x, "%s", je.text);
        return NULL;
    }
    L.t = tok_new(file);
    if (!json_is_object(root)) lerr(&L, file, NULL, "expected a JSON object");
    else load_root(&L, root);
    json_decref(root);
    if (!L.failed && cfg) load_config(&L, cfg, cfg_len);
    if (L.failed) {
        tok_free(L.t);
        return NULL;
    }
    return L.t;
}

tok_tokenizer *tok_load_json(const char *json, size_t len, const char *config_json,
                             size_t config_len, const char *name, diag_list *diags)
{
    return load_impl(json, len, name ? name : "tokenizer.json", config_json, config_len,
                     "tokenizer_config.json", diags);
}

/* The folder part of a path ("." when there is none). Caller frees. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return xstrdup(".");
    if (slash == path) return xstrdup("/");
    return xstrndup(path, (size_t)(slash - path));
}

tok_tokenizer *tok_load(const char *path, diag_list *diags)
{
    char *json_path, *dir;
    if (dir_exists(path)) {
        dir = xstrdup(path);
        json_path = path_join(path, "tokenizer.json");
        if (!file_exists(json_path)) {
            char *spm = path_join(path, "tokenizer.model");
            diag *x = diag_add(diags, DIAG_ERROR, json_path, 0, 0, NULL, "no tokenizer.json in this folder");
            if (file_exists(spm))
                diag_set_suggestion(x, "the folder holds a SentencePiece tokenizer.model; %s",
                                    SENTENCEPIECE_HINT);
            else
                diag_set_suggestion(x, "pass the folder of a Hugging Face model, or the path of its tokenizer.json");
            free(spm);
            free(json_path);
            free(dir);
            return NULL;
        }
    } else {
        json_path = xstrdup(path);
        dir = dir_of(path);
        if (str_ends_with(path, ".model")) {
            diag *x = diag_add(diags, DIAG_ERROR, path, 0, 0, NULL,
                               "a SentencePiece .model file is not supported yet");
            diag_set_suggestion(x, "%s", SENTENCEPIECE_HINT);
            free(json_path);
            free(dir);
            return NULL;
        }
    }
    char err[512];
    size_t len = 0, cfg_len = 0;
    char *json = file_read_all(json_path, TOK_MAX_FILE, &len, err, sizeof err);
    if (!json) {
        diag_add(diags, DIAG_ERROR, json_path, 0, 0, NULL, err);
        free(json_path);
        free(dir);
        return NULL;
    }
    char *cfg_path = path_join(dir, "tokenizer_config.json");
    char *cfg = file_exists(cfg_path) ? file_read_all(cfg_path, TOK_MAX_FILE, &cfg_len, err, sizeof err) : NULL;
    if (file_exists(cfg_path) && !cfg) diag_add(diags, DIAG_WARNING, cfg_path, 0, 0, NULL, err);
    tok_tokenizer *t = load_impl(json, len, json_path, cfg, cfg_len, cfg_path, diags);
    /* newer transformers save the template beside the config */
    char *jinja_path = path_join(dir, "chat_template.jinja");
    if (t && !t->chat_template && file_exists(jinja_path)) {
        size_t jl;
        t->chat_template = file_read_all(jinja_path, 1 << 24, &jl, err, sizeof err);
        if (!t->chat_template) diag_add(diags, DIAG_WARNING, jinja_path, 0, 0, NULL, err);
    }
    free(jinja_path);
    free(json);
    free(cfg);
    free(cfg_path);
    free(json_path);
    free(dir);
    return t;
}

void tok_free(tok_tokenizer *t)
{
    if (!t) return;
    free(t->source);
    sb_free(&t->spell);
    sb_free(&t->bytes);
    free(t->soff);
    free(t->boff);
    free(t->blen);
    free(t->kind);
    tok_strmap_free(&t->vocab);
    tok_mergemap_free(&t->merges);
    for (size_t i = 0; i < t->n_added; i++) {
        free(t->added[i].content);
        free(t->added[i].ncontent);
    }
    free(t->added);
    for (int p = 0; p < 2; p++)
        for (int b = 0; b < 256; b++) free(t->added_by_byte[p][b]);
    for (size_t i = 0; i < t->n_steps; i++) tok_regex_free(t->steps[i].re);
    free(t->steps);
    tok_regex_free(t->bl_regex);
    free(t->post_pre);
    free(t->post_post);
    free(t->bos_token);
    free(t->eos_token);
    free(t->pad_token);
    free(t->chat_template);
    tok_cache_free(&t->cache);
    tok_cps_free(&t->cps);
    tok_cps_free(&t->cps2);
    sb_free(&t->norm_buf);
    sb_free(&t->tmp);
    free(t->norm_map);
    free(t->pieces[0]);
    free(t->pieces[1]);
    free(t);
}
