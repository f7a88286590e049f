/* data.c: reading a JSONL training file into token sequences with loss
 * masks (data.h): line reading with a length limit, record validation
 * with file:line:field errors (or skip-and-count), format detection,
 * tokenisation through the chat template, truncation and packing. The
 * batch iterator is in data_iter.c. */
#include "train/data.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DATA_DEFAULT_LINE = 16 << 20, DATA_MAX_WARNINGS = 20 };

struct data_set {
    char *name;
    size_t max_seq_len;
    int32_t pad_id;
    data_stats st;
    /* all tokens; sequence i is [start[i], start[i] + len[i]) */
    int32_t *ids;
    uint8_t *mask;
    size_t ntok, captok;
    size_t *start, *len, *line;
    size_t nseq, capseq;
    /* packing: where each record begins in the token stream */
    size_t *rec_start, *rec_line;
    size_t nrec, caprec;
    uint64_t fingerprint;
    data_set *held; /* the records held out (opt.holdout > 0), until taken */
};

const char *data_format_name(data_format f)
{
    switch (f) {
    case DATA_ALPACA: return "alpaca";
    case DATA_MESSAGES: return "messages";
    case DATA_TEXT: return "text";
    default: return "auto";
    }
}

bool data_format_parse(const char *name, data_format *out)
{
    static const data_format all[] = {DATA_AUTO, DATA_ALPACA, DATA_MESSAGES, DATA_TEXT};
    for (size_t i = 0; i < 4; i++)
        if (str_ieq(name, data_format_name(all[i]))) {
            *out = all[i];
            return true;
        }
    return false;
}

void data_options_init(data_options *o)
{
    memset(o, 0, sizeof *o);
    o->format = DATA_AUTO;
    o->max_seq_len = 2048;
    o->max_line_bytes = DATA_DEFAULT_LINE;
    o->chat.enable_thinking = -1;
}

/* ---- the loader's state ---- */

typedef struct loader {
    data_set *d;
    tok_tokenizer *tok;
    const chat_template *tmpl;
    const data_options *opt;
    diag_list *diags;
    data_format fmt;
    size_t fmt_line; /* where the format was detected (0: forced) */
    size_t warned;
    bool failed;
    tok_ids ids;
    sb scratch;
} loader;

/* A malformed record: an error that stops the load (L->failed), or
 * (skip_bad) a warning and a count. Returns true when the load goes on. */
static bool bad_record(loader *L, size_t line, int col, const char *path, const char *expected,
                       const char *found, const char *fmt, ...) __attribute__((format(printf, 7, 8)));

static bool bad_record(loader *L, size_t line, int col, const char *path, const char *expected,
                       const char *found, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    bool skip = L->opt->skip_bad;
    if (skip) {
        L->d->st.skipped++;
        if (L->warned++ >= DATA_MAX_WARNINGS) return true;
    }
    diag *x = diag_add(L->diags, skip ? DIAG_WARNING : DIAG_ERROR, L->d->name, (int)line, col, path, msg);
    if (expected) diag_set_expected(x, "%s", expected);
    if (found) diag_set_found(x, "%s", found);
    if (skip) diag_set_suggestion(x, "skipped (--skip-bad)");
    else diag_set_suggestion(x, "fix the record, or pass --skip-bad to skip malformed records and count them");
    if (!skip) L->failed = true;
    return skip;
}

/* A short description of a JSON value for "found ...". */
static void describe(const json_t *v, char *out, size_t n)
{
    if (!v) {
        snprintf(out, n, "nothing");
        return;
    }
    switch (json_typeof(v)) {
    case JSON_OBJECT: snprintf(out, n, "an object"); break;
    case JSON_ARRAY: snprintf(out, n, "an array"); break;
    case JSON_STRING: snprintf(out, n, "a string"); break;
    case JSON_INTEGER: snprintf(out, n, "the number %lld", (long long)json_integer_value(v)); break;
    case JSON_REAL: snprintf(out, n, "the number %g", json_real_value(v)); break;
    case JSON_TRUE: snprintf(out, n, "true"); break;
    case JSON_FALSE: snprintf(out, n, "false"); break;
    default: snprintf(out, n, "null"); break;
    }
}

/* A string field. *bad is set (and the record reported) when a required
 * field is missing or the field has another type; an absent or null
 * optional field gives NULL with *bad false. */
static const char *field_string(loader *L, size_t line, json_t *obj, const char *key,
                                const char *path, bool required, bool *bad)
{
    json_t *v = json_object_get(obj, key);
    *bad = false;
    if (!v || (!required && json_is_null(v))) {
        if (required) {
            *bad = true;
            bad_record(L, line, 0, path, "a string", "nothing", "missing field '%s'", key);
        }
        return NULL;
    }
    if (!json_is_string(v)) {
        char found[64];
        describe(v, found, sizeof found);
        *bad = true;
        bad_record(L, line, 0, path, "a string", found, "wrong type");
        return NULL;
    }
    return json_string_value(v);
}

/* ---- records -> tokens ---- */

static data_format format_of(json_t *obj)
{
    if (json_object_get(obj, "messages")) return DATA_MESSAGES;
    if (json_object_get(obj, "instruction") || json_object_get(obj, "output")) return DATA_ALPACA;
    if (json_object_get(obj, "text")) return DATA_TEXT;
    return DATA_AUTO;
}

static void append_tokens(data_set *d, const int32_t *ids, const uint8_t *mask, size_t n)
{
    if (d->ntok + n > d->captok) {
        d->captok = d->captok ? d->captok : 4096;
        while (d->ntok + n > d->captok) d->captok *= 2;
        d->ids = xrealloc(d->ids, d->captok * sizeof *d->ids);
        d->mask = xrealloc(d->mask, d->captok);
    }
    if (n) {
        memcpy(d->ids + d->ntok, ids, n * sizeof *ids);
        memcpy(d->mask + d->ntok, mask, n);
    }
    d->ntok += n;
}

static void add_sequence(data_set *d, size_t start, size_t len, size_t line)
{
    if (d->nseq == d->capseq) {
        d->capseq = d->capseq ? 2 * d->capseq : 256;
        d->start = xrealloc(d->start, d->capseq * sizeof *d->start);
        d->len = xrealloc(d->len, d->capseq * sizeof *d->len);
        d->line = xrealloc(d->line, d->capseq * sizeof *d->line);
    }
    d->start[d->nseq] = start;
    d->len[d->nseq] = len;
    d->line[d->nseq] = line;
    d->nseq++;
}

bool data_line_held_out(size_t line, double share, uint64_t seed)
{
    if (!(share > 0)) return false;
    uint64_t x = seed ^ 0x686f6c646f7574ull ^ ((uint64_t)line * 0x9e3779b97f4a7c15ull);
    return (double)(rng_splitmix64(&x) >> 11) * 0x1p-53 < share;
}

/* One tokenised record: kept as a sequence (truncated), or added to the
 * packing stream; a held-out record goes to the held-out set, one
 * unpacked sequence each. */
static void keep_record(loader *L, size_t line, const int32_t *ids, const uint8_t *mask, size_t n)
{
    data_set *d = L->d;
    bool held = d->held && data_line_held_out(line, L->opt->holdout, L->opt->holdout_seed);
    if (held) d = d->held;
    d->st.records++;
    if (L->opt->pack && !held) {
        if (d->nrec == d->caprec) {
            d->caprec = d->caprec ? 2 * d->caprec : 256;
            d->rec_start = xrealloc(d->rec_start, d->caprec * sizeof *d->rec_start);
            d->rec_line = xrealloc(d->rec_line, d->caprec * sizeof *d->rec_line);
        }
        d->rec_start[d->nrec] = d->ntok;
        d->rec_line[d->nrec++] = line;
        append_tokens(d, ids, mask, n);
        return;
    }
    if (n > d->max_seq_len) {
        n = d->max_seq_len;
        d->st.truncated++;
    }
    size_t targets = 0;
    for (size_t i = 0; i < n; i++) targets += mask[i];
    if (targets == 0) {
        d->st.empty++;
        return;
    }
    add_sequence(d, d->ntok, n, line);
    append_tokens(d, ids, mask, n);
}

static void encode_chat(loader *L, size_t line, const chat_message *m, size_t n)
{
    if (!L->tmpl || L->tmpl->family == CHAT_NONE) {
        diag *x = diag_add(L->diags, DIAG_ERROR, L->d->name, (int)line, 0, NULL,
                           "chat records need a chat template, and none was given");
        diag_set_suggestion(x, "use a tokenizer with a chat_template, or pass --chat-template NAME");
        L->failed = true;
        return;
    }
    uint8_t *mask = NULL;
    char err[512];
    if (!chat_encode(L->tok, L->tmpl, m, n, &L->opt->chat, &L->ids, &mask, err, sizeof err)) {
        bad_record(L, line, 0, NULL, NULL, NULL, "%s", err);
        return;
    }
    keep_record(L, line, L->ids.ids, mask, L->ids.len);
    free(mask);
}

static void record_alpaca(loader *L, size_t line, json_t *obj)
{
    bool bad;
    const char *ins = field_string(L, line, obj, "instruction", "instruction", true, &bad);
    if (bad) return;
    const char *input = field_string(L, line, obj, "input", "input", false, &bad);
    if (bad) return;
    const char *out = field_string(L, line, obj, "output", "output", true, &bad);
    if (bad) return;
    const char *sys = field_string(L, line, obj, "system", "system", false, &bad);
    if (bad) return;
    sb_clear(&L->scratch);
    sb_puts(&L->scratch, ins);
    if (input && *input) {
        sb_puts(&L->scratch, "\n\n");
        sb_puts(&L->scratch, input);
    }
    chat_message m[3];
    size_t n = 0;
    if (sys) m[n++] = (chat_message){"system", sys};
    m[n++] = (chat_message){"user", sb_str(&L->scratch)};
    m[n++] = (chat_message){"assistant", out};
    encode_chat(L, line, m, n);
}

/* Reads messages[i]; false (reported) when malformed. */
static bool one_message(loader *L, size_t line, json_t *e, size_t i, chat_message *m)
{
    char path[64], found[64];
    bool bad;
    if (!json_is_object(e)) {
        snprintf(path, sizeof path, "messages[%zu]", i);
        describe(e, found, sizeof found);
        bad_record(L, line, 0, path, "an object {role, content}", found, "wrong type");
        return false;
    }
    snprintf(path, sizeof path, "messages[%zu].role", i);
    m->role = field_string(L, line, e, "role", path, true, &bad);
    if (bad) return false;
    snprintf(path, sizeof path, "messages[%zu].content", i);
    m->content = field_string(L, line, e, "content", path, true, &bad);
    return !bad;
}

static void record_messages(loader *L, size_t line, json_t *obj)
{
    json_t *arr = json_object_get(obj, "messages");
    if (!arr) {
        bad_record(L, line, 0, "messages", "an array of {role, content}", "nothing", "missing field 'messages'");
        return;
    }
    if (!json_is_array(arr) || json_array_size(arr) == 0) {
        char found[64];
        describe(arr, found, sizeof found);
        bad_record(L, line, 0, "messages", "a non-empty array of {role, content}",
                   json_is_array(arr) ? "an empty array" : found, "wrong type");
        return;
    }
    size_t n = json_array_size(arr);
    chat_message *m = xcalloc(n, sizeof *m);
    bool ok = true, has_assistant = false;
    for (size_t i = 0; i < n && ok; i++) {
        ok = one_message(L, line, json_array_get(arr, i), i, &m[i]);
        has_assistant |= ok && strcmp(m[i].role, "assistant") == 0;
    }
    if (ok && !has_assistant)
        bad_record(L, line, 0, "messages", "at least one assistant message", NULL,
                   "no assistant message: nothing to learn from this record");
    else if (ok)
        encode_chat(L, line, m, n);
    free(m);
}

static void record_text(loader *L, size_t line, json_t *obj)
{
    bool bad;
    const char *text = field_string(L, line, obj, "text", "text", true, &bad);
    if (bad) return;
    char err[256];
    tok_ids_clear(&L->ids);
    if (!tok_encode(L->tok, text, strlen(text), TOK_ADD_SPECIAL, &L->ids, err, sizeof err)) {
        bad_record(L, line, 0, "text", NULL, NULL, "%s", err);
        return;
    }
    if (tok_eos_id(L->tok) >= 0) tok_ids_push(&L->ids, tok_eos_id(L->tok), strlen(text));
    uint8_t *mask = xmalloc(L->ids.len ? L->ids.len : 1);
    memset(mask, 1, L->ids.len);
    keep_record(L, line, L->ids.ids, mask, L->ids.len);
    free(mask);
}

static bool is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return false;
    return true;
}

/* One record of a line's JSON. */
static void process_record(loader *L, size_t line, json_t *obj)
{
    data_format f = format_of(obj);
    if (!json_is_object(obj)) {
        char found[64];
        describe(obj, found, sizeof found);
        bad_record(L, line, 0, NULL, "a JSON object", found, "wrong type");
        return;
    }
    if (L->fmt == DATA_AUTO && f == DATA_AUTO) {
        bad_record(L, line, 0, NULL, "\"messages\", \"instruction\" + \"output\", or \"text\"",
                   "none of them", "the record has none of the known fields");
        return;
    }
    if (L->fmt == DATA_AUTO) {
        L->fmt = f;
        L->fmt_line = line;
    }
    if (f != DATA_AUTO && f != L->fmt) {
        char why[96];
        if (L->fmt_line) snprintf(why, sizeof why, "detected on line %zu", L->fmt_line);
        else snprintf(why, sizeof why, "chosen with --format");
        bad_record(L, line, 0, NULL, data_format_name(L->fmt), data_format_name(f),
                   "the record is in the %s form but the file is %s (%s)", data_format_name(f),
                   data_format_name(L->fmt), why);
        return;
    }
    if (L->fmt == DATA_ALPACA) record_alpaca(L, line, obj);
    else if (L->fmt == DATA_MESSAGES) record_messages(L, line, obj);
    else record_text(L, line, obj);
}

/* One line (without its '\n'). Returns false when loading must stop. */
static bool process_line(loader *L, const char *s, size_t n, size_t line)
{
    L->d->st.lines++;
    if (line == 1 && n >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) s += 3, n -= 3; /* BOM */
    if (n > 0 && s[n - 1] == '\r') n--;
    if (is_blank(s, n)) {
        bad_record(L, line, 0, NULL, "one JSON object per line", "an empty line", "empty line");
        return !L->failed;
    }
    json_error_t je;
    json_t *obj = json_loadb(s, n, JSON_DECODE_INT_AS_REAL, &je);
    if (!obj) {
        bad_record(L, line, je.column > 0 ? je.column : 0, NULL, NULL, NULL, "not valid JSON: %s",
                   je.text);
        return !L->failed;
    }
    process_record(L, line, obj);
    json_decref(obj);
    return !L->failed;
}

static size_t line_limit(const data_options *o)
{
    return o->max_line_bytes ? o->max_line_bytes : DATA_DEFAULT_LINE;
}

static bool too_long(loader *L, size_t line)
{
    L->d->st.lines++;
    char lim[64];
    units_format_bytes(lim, sizeof lim, (double)line_limit(L->opt));
    bad_record(L, line, 0, NULL, NULL, NULL,
               "the line is longer than the limit (%s); a JSONL record should be one line of "
               "reasonable size",
               lim);
    return !L->failed;
}

/* ---- reading lines ---- */

static void read_buffer(loader *L, const char *buf, size_t len)
{
    size_t pos = 0, line = 0, limit = line_limit(L->opt);
    while (pos < len) {
        const char *nl = memchr(buf + pos, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - (buf + pos)) : len - pos;
        line++;
        bool go = n > limit ? too_long(L, line) : process_line(L, buf + pos, n, line);
        if (!go) return;
        pos += n + 1;
    }
}

static bool read_file(loader *L, const char *path)
{
    if (dir_exists(path)) {
        diag *x = diag_add(L->diags, DIAG_ERROR, path, 0, 0, NULL, "this is a folder, not a JSONL file");
        diag_set_suggestion(x, "give the path of the .jsonl file");
        L->failed = true;
        return false;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        diag *x = diag_add(L->diags, DIAG_ERROR, path, 0, 0, NULL, strerror(errno));
        diag_set_suggestion(x, "check the dataset path");
        L->failed = true;
        return false;
    }
    size_t limit = line_limit(L->opt), line = 0;
    char *buf = xmalloc(1 << 16);
    sb cur;
    sb_init(&cur);
    bool over = false, go = true;
    size_t n;
    while (go && (n = fread(buf, 1, 1 << 16, f)) > 0) {
        size_t i = 0;
        while (go && i < n) {
            char *nl = memchr(buf + i, '\n', n - i);
            size_t take = nl ? (size_t)(nl - (buf + i)) : n - i;
            if (!over && cur.len + take > limit) {
                over = true;
                sb_clear(&cur);
            }
            if (!over) sb_putn(&cur, buf + i, take);
            i += take;
            if (!nl) break;
            i++;
            line++;
            go = over ? too_long(L, line) : process_line(L, sb_str(&cur), cur.len, line);
            sb_clear(&cur);
            over = false;
        }
    }
    if (go && (cur.len || over)) {
        line++;
        if (over) too_long(L, line);
        else process_line(L, sb_str(&cur), cur.len, line);
    }
    if (ferror(f)) {
        diag_add(L->diags, DIAG_ERROR, path, (int)line, 0, NULL, strerror(errno));
        L->failed = true;
    }
    fclose(f);
    free(buf);
    sb_free(&cur);
    return !L->failed;
}

/* ---- finishing ---- */

/* Packing: cut the stream into sequences of exactly max_seq_len. */
static void pack(data_set *d)
{
    size_t L = d->max_seq_len, r = 0;
    for (size_t s = 0; s + L <= d->ntok; s += L) {
        while (r + 1 < d->nrec && d->rec_start[r + 1] <= s) r++;
        size_t targets = 0;
        for (size_t i = s; i < s + L; i++) targets += d->mask[i];
        if (targets == 0) d->st.empty++;
        else add_sequence(d, s, L, d->nrec ? d->rec_line[r] : 0);
    }
    d->st.dropped_tail = d->ntok % L;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    return (h ^ v) * 0x100000001b3ull;
}

static void finish(data_set *d)
{
    uint64_t h = mix(0xcbf29ce484222325ull, d->nseq);
    for (size_t i = 0; i < d->nseq; i++) {
        h = mix(h, d->len[i]);
        for (size_t k = d->start[i]; k < d->start[i] + d->len[i]; k++) {
            h = mix(h, (uint32_t)d->ids[k]);
            h = mix(h, d->mask[k]);
            d->st.targets += d->mask[k];
        }
        d->st.tokens += d->len[i];
    }
    d->fingerprint = h;
    d->st.sequences = d->nseq;
}

static data_set *load_common(const char *name, const char *buf, size_t len, bool from_file,
                             tok_tokenizer *tok, const chat_template *tmpl,
                             const data_options *opt, diag_list *diags)
{
    if (opt->max_seq_len == 0) {
        diag *x = diag_add(diags, DIAG_ERROR, NULL, 0, 0, "max_seq_len", "must be at least 1");
        diag_set_found(x, "0");
        return NULL;
    }
    data_set *d = xcalloc(1, sizeof *d);
    d->name = xstrdup(name);
    d->max_seq_len = opt->max_seq_len;
    d->pad_id = tok_pad_id(tok) >= 0 ? tok_pad_id(tok) : tok_eos_id(tok) >= 0 ? tok_eos_id(tok) : 0;
    if (opt->holdout > 0) {
        d->held = xcalloc(1, sizeof *d->held);
        d->held->name = xstrdup(name);
        d->held->max_seq_len = d->max_seq_len;
        d->held->pad_id = d->pad_id;
    }
    loader L = {.d = d, .tok = tok, .tmpl = tmpl, .opt = opt, .diags = diags, .fmt = opt->format};
    tok_ids_init(&L.ids);
    sb_init(&L.scratch);
    if (from_file) read_file(&L, name);
    else read_buffer(&L, buf, len);
    tok_ids_free(&L.ids);
    sb_free(&L.scratch);
    if (L.warned > DATA_MAX_WARNINGS) {
        char msg[128];
        snprintf(msg, sizeof msg, "%zu more malformed records were skipped", L.warned - DATA_MAX_WARNINGS);
        diag_add(diags, DIAG_NOTE, name, 0, 0, NULL, msg);
    }
    if (L.failed) {
        data_free(d);
        return NULL;
    }
    d->st.format = L.fmt;
    if (opt->pack) pack(d);
    finish(d);
    if (d->held) {
        d->held->st.format = L.fmt;
        finish(d->held);
    }
    return d;
}

data_set *data_load(const char *path, tok_tokenizer *tok, const chat_template *tmpl,
                    const data_options *opt, diag_list *diags)
{
    return load_common(path, NULL, 0, true, tok, tmpl, opt, diags);
}

data_set *data_load_buffer(const char *buf, size_t len, const char *name, tok_tokenizer *tok,
                           const chat_template *tmpl, const data_options *opt, diag_list *diags)
{
    return load_common(name, buf, len, false, tok, tmpl, opt, diags);
}

data_set *data_take_holdout(data_set *d)
{
    data_set *h = d->held;
    d->held = NULL;
    return h;
}

void data_free(data_set *d)
{
    if (!d) return;
    data_free(d->held);
    free(d->name);
    free(d->ids);
    free(d->mask);
    free(d->start);
    free(d->len);
    free(d->line);
    free(d->rec_start);
    free(d->rec_line);
    free(d);
}

const data_stats *data_get_stats(const data_set *d)
{
    return &d->st;
}

size_t data_count(const data_set *d)
{
    return d->nseq;
}

void data_get(const data_set *d, size_t i, const int32_t **ids, const uint8_t **mask, size_t *len,
              size_t *line)
{
    *ids = d->ids + d->start[i];
    *mask = d->mask + d->start[i];
    *len = d->len[i];
    if (line) *line = d->line[i];
}

bool data_positions(const data_set *d, size_t i, int32_t *pos)
{
    size_t s = d->start[i], n = d->len[i];
    if (d->nrec == 0) { /* not packed: one record */
        for (size_t t = 0; t < n; t++) pos[t] = (int32_t)t;
        return false;
    }
    /* the last record that begins at or before s (rec_start is sorted) */
    size_t lo = 0, hi = d->nrec;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->rec_start[mid] <= s) lo = mid;
        else hi = mid;
    }
    size_t r = lo, begin = s;
    bool several = false;
    for (size_t t = 0; t < n; t++) {
        size_t k = s + t;
        while (r + 1 < d->nrec && d->rec_start[r + 1] <= k) {
            begin = d->rec_start[++r];
            several = several || begin > s;
        }
        pos[t] = (int32_t)(k - begin);
    }
    return several;
}

uint64_t data_fingerprint(const data_set *d)
{
    return d->fingerprint;
}

int32_t data_pad_id(const data_set *d)
{
    return d->pad_id;
}

size_t data_max_seq_len(const data_set *d)
{
    return d->max_seq_len;
}
