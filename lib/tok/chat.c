/* chat.c: the chat template families of chat.h, rendered in C, their
 * detection from a Jinja template, and encoding with the assistant loss
 * mask. Each render_* function follows its vendor template line by line
 * for conversations without tools (the Jinja sources are in
 * tests/ref/tokenizers/chat-templates; docs/data.md has the rules). */
#include "tok/chat.h"

#include "tok/unicode.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    chat_family f;
    const char *name;
} FAMILY_NAMES[] = {
    {CHAT_NONE, "none"},          {CHAT_CHATML, "chatml"},           {CHAT_QWEN2, "qwen2"},
    {CHAT_QWEN25, "qwen2.5"},     {CHAT_QWEN3, "qwen3"},             {CHAT_LLAMA3, "llama3"},
    {CHAT_LLAMA3_EARLY, "llama3-early"}, {CHAT_LLAMA31, "llama3.1"}, {CHAT_LLAMA32, "llama3.2"},
};

#define N_FAMILIES (sizeof FAMILY_NAMES / sizeof FAMILY_NAMES[0])
#define FAMILY_LIST "chatml, qwen2, qwen2.5, qwen3, llama3, llama3-early, llama3.1, llama3.2"

/* FNV-1a 64 of known vendor templates, trailing whitespace removed. The
 * texts are tests/ref/tokenizers/chat-templates (llama.cpp's copies of the
 * vendors' templates) and the chat_template of share/tokenizers/{qwen3,llama3}. */
static const struct {
    uint64_t hash;
    chat_family f;
    const char *source;
} KNOWN[] = {
    {0xe642ce246d7f2e3dull, CHAT_QWEN25, "Qwen/Qwen2.5-7B-Instruct"},
    {0x2bfdb7aa9754484eull, CHAT_QWEN3, "Qwen/Qwen3-0.6B"},
    {0x74891e390e614ae2ull, CHAT_LLAMA3_EARLY, "meta-llama/Meta-Llama-3 (early upload)"},
    {0xcc0368e1ffb6b958ull, CHAT_LLAMA31, "meta-llama/Llama-3.1-8B-Instruct"},
    {0x368f4c34b8554414ull, CHAT_LLAMA32, "meta-llama/Llama-3.2-3B-Instruct"},
    {0xa41d6bae9b9141bcull, CHAT_CHATML, "ChatML (CHAT_CHATML_JINJA)"},
};

const char CHAT_CHATML_JINJA[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' "
    "}}{% endif %}";

const char *chat_family_name(chat_family f)
{
    for (size_t i = 0; i < N_FAMILIES; i++)
        if (FAMILY_NAMES[i].f == f) return FAMILY_NAMES[i].name;
    return "none";
}

bool chat_family_parse(const char *name, chat_family *out)
{
    for (size_t i = 1; i < N_FAMILIES; i++)
        if (str_ieq(name, FAMILY_NAMES[i].name)) {
            *out = FAMILY_NAMES[i].f;
            return true;
        }
    return false;
}

static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

/* The family by the template's markers and rules (not an exact match). */
static chat_family family_by_features(const char *j)
{
    if (strstr(j, "<|im_start|>")) {
        if (strstr(j, "<think>")) return CHAT_QWEN3;
        if (strstr(j, "You are Qwen, created by Alibaba Cloud")) return CHAT_QWEN25;
        if (strstr(j, "You are a helpful assistant")) return CHAT_QWEN2;
        return CHAT_CHATML;
    }
    if (strstr(j, "<|start_header_id|>")) {
        if (strstr(j, "Cutting Knowledge Date"))
            return strstr(j, "strftime_now") ? CHAT_LLAMA32 : CHAT_LLAMA31;
        return strstr(j, "add_generation_prompt") ? CHAT_LLAMA3 : CHAT_LLAMA3_EARLY;
    }
    return CHAT_NONE;
}

bool chat_template_detect(const char *jinja, const char *bos_token, chat_template *out, char *err,
                          size_t errsz)
{
    memset(out, 0, sizeof *out);
    size_t n = strlen(jinja);
    while (n > 0 && (jinja[n - 1] == ' ' || jinja[n - 1] == '\n' || jinja[n - 1] == '\t' ||
                     jinja[n - 1] == '\r'))
        n--;
    uint64_t h = fnv1a(jinja, n);
    for (size_t i = 0; i < sizeof KNOWN / sizeof KNOWN[0]; i++)
        if (KNOWN[i].hash == h) {
            chat_template_force(KNOWN[i].f, bos_token, out);
            out->forced = false;
            out->exact = true;
            return true;
        }
    chat_family f = family_by_features(jinja);
    if (f == CHAT_NONE) {
        if (strstr(jinja, "[INST]"))
            snprintf(err, errsz,
                     "the chat template uses [INST] (Mistral / Llama 2), which lathe does not "
                     "render yet; supported families: " FAMILY_LIST);
        else
            snprintf(err, errsz,
                     "the chat template is of no family lathe knows (it renders " FAMILY_LIST ")");
        return false;
    }
    chat_template_force(f, bos_token, out);
    out->forced = false;
    return true;
}

void chat_template_force(chat_family f, const char *bos_token, chat_template *out)
{
    memset(out, 0, sizeof *out);
    out->family = f;
    out->forced = true;
    out->bos_token = xstrdup(bos_token ? bos_token : "");
}

void chat_template_free(chat_template *t)
{
    free(t->bos_token);
    memset(t, 0, sizeof *t);
}

void chat_template_describe(const chat_template *t, sb *out)
{
    sb_puts(out, chat_family_name(t->family));
    if (t->forced) sb_puts(out, " (chosen by the user)");
    else if (t->exact) sb_puts(out, " (the tokenizer's template is a known vendor template)");
    else sb_puts(out, " (the tokenizer's template is not a known one; it has this family's markers)");
}

/* The folder of a path, joined with name. */
static char *beside(const char *path, const char *name)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return xstrdup(name);
    char *dir = xstrndup(path, (size_t)(slash - path));
    char *p = path_join(dir, name);
    free(dir);
    return p;
}

bool chat_template_for_tokenizer(const tok_tokenizer *tok, const char *force, chat_template *out,
                                 diag_list *diags)
{
    memset(out, 0, sizeof *out);
    char *cfg = beside(tok_source(tok), "tokenizer_config.json");
    bool ok = false;
    if (force) {
        chat_family f;
        if (chat_family_parse(force, &f)) {
            chat_template_force(f, tok_bos_token(tok), out);
            ok = true;
        } else {
            const char *names[N_FAMILIES];
            for (size_t i = 0; i < N_FAMILIES; i++) names[i] = FAMILY_NAMES[i].name;
            diag *x = diag_add(diags, DIAG_ERROR, NULL, 0, 0, "chat template", "unknown template family");
            diag_set_expected(x, "one of " FAMILY_LIST);
            diag_set_found(x, "%s", force);
            const char *s = str_suggest(force, names + 1, N_FAMILIES - 1);
            if (s) diag_set_suggestion(x, "did you mean '%s'?", s);
        }
    } else if (!tok_chat_template(tok)) {
        diag *x = diag_add(diags, DIAG_ERROR, cfg, 0, 0, "chat_template",
                           "the tokenizer has no chat template");
        diag_set_suggestion(x, "choose one with --chat-template NAME (" FAMILY_LIST ")");
    } else {
        char err[300];
        ok = chat_template_detect(tok_chat_template(tok), tok_bos_token(tok), out, err, sizeof err);
        if (!ok) {
            diag *x = diag_add(diags, DIAG_ERROR, cfg, 0, 0, "chat_template", err);
            diag_set_suggestion(x, "choose a family with --chat-template NAME if one fits");
        }
    }
    free(cfg);
    return ok;
}

/* ---- rendering helpers ---- */

typedef struct render {
    sb out;
    chat_span *spans;
    size_t nspans, cap;
    char *err;
    size_t errsz;
} render;

static void span_open(render *r)
{
    if (r->nspans == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 8;
        r->spans = xrealloc(r->spans, r->cap * sizeof *r->spans);
    }
    r->spans[r->nspans].begin = r->spans[r->nspans].end = r->out.len;
    r->nspans++;
}

static void span_close(render *r)
{
    r->spans[r->nspans - 1].end = r->out.len;
}

static void put(render *r, const char *s)
{
    sb_puts(&r->out, s);
}

static void putn(render *r, const char *s, size_t n)
{
    sb_putn(&r->out, s, n);
}

/* Python's str.strip() / lstrip() / rstrip(): chars = NULL means
 * whitespace (str.isspace), otherwise strip that one ASCII character. */
static void strip_range(const char *s, size_t *b, size_t *e, bool left, bool right, char ch)
{
    if (left)
        while (*b < *e) {
            size_t i = *b;
            uint32_t cp;
            if (ch) {
                if (s[i] != ch) break;
                *b = i + 1;
                continue;
            }
            if (!uni_next(s, *e, &i, &cp) || !uni_is_py_space(cp)) break;
            *b = i;
        }
    if (right)
        while (*e > *b) {
            if (ch) {
                if (s[*e - 1] != ch) break;
                (*e)--;
                continue;
            }
            size_t p = *e - 1;
            while (p > *b && ((unsigned char)s[p] & 0xC0) == 0x80) p--;
            size_t q = p;
            uint32_t cp;
            if (!uni_next(s, *e, &q, &cp) || q != *e || !uni_is_py_space(cp)) break;
            *e = p;
        }
}

/* Jinja's `trim` (Python str.strip()). */
static void put_trimmed(render *r, const char *s)
{
    size_t b = 0, e = strlen(s);
    strip_range(s, &b, &e, true, true, 0);
    putn(r, s + b, e - b);
}

static bool is_role(const chat_message *m, const char *role)
{
    return strcmp(m->role, role) == 0;
}

static bool check_messages(render *r, const chat_template *t, const chat_message *msgs, size_t n)
{
    if (n == 0) {
        snprintf(r->err, r->errsz, "the conversation has no messages");
        return false;
    }
    bool qwen = t->family == CHAT_CHATML || t->family == CHAT_QWEN2 || t->family == CHAT_QWEN25 ||
                t->family == CHAT_QWEN3;
    bool llama31 = t->family == CHAT_LLAMA31 || t->family == CHAT_LLAMA32;
    for (size_t i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content) {
            snprintf(r->err, r->errsz, "message %zu has no %s", i, msgs[i].role ? "content" : "role");
            return false;
        }
        const char *role = msgs[i].role;
        size_t bad;
        if (!uni_valid(msgs[i].content, strlen(msgs[i].content), &bad)) {
            snprintf(r->err, r->errsz, "message %zu: content is not valid UTF-8 (byte %zu)", i, bad);
            return false;
        }
        bool ok = is_role(&msgs[i], "system") || is_role(&msgs[i], "user") ||
                  is_role(&msgs[i], "assistant") ||
                  ((qwen && t->family != CHAT_CHATML && t->family != CHAT_QWEN2) &&
                   is_role(&msgs[i], "tool")) ||
                  (llama31 && (is_role(&msgs[i], "tool") || is_role(&msgs[i], "ipython")));
        if (!ok) {
            snprintf(r->err, r->errsz,
                     "message %zu has role '%.40s', which the %s template does not render "
                     "(expected system, user, assistant%s)",
                     i, role, chat_family_name(t->family),
                     t->family == CHAT_QWEN25 || t->family == CHAT_QWEN3 ? " or tool"
                     : llama31                                           ? ", tool or ipython"
                                                                         : "");
            return false;
        }
    }
    return true;
}

/* ---- ChatML family (chatml, qwen2, qwen2.5) ---- */

static void chatml_turn(render *r, const chat_message *m)
{
    put(r, "<|im_start|>");
    put(r, m->role);
    put(r, "\n");
    bool assistant = is_role(m, "assistant");
    if (assistant) span_open(r);
    put(r, m->content);
    put(r, "<|im_end|>");
    if (assistant) span_close(r);
    put(r, "\n");
}

/* Qwen2.5 / Qwen3: consecutive tool messages share one user turn. */
static void qwen_tool(render *r, const chat_message *msgs, size_t n, size_t i)
{
    if (i == 0 || !is_role(&msgs[i - 1], "tool")) put(r, "<|im_start|>user");
    put(r, "\n<tool_response>\n");
    put(r, msgs[i].content);
    put(r, "\n</tool_response>");
    if (i + 1 == n || !is_role(&msgs[i + 1], "tool")) put(r, "<|im_end|>\n");
}

static void render_chatml(render *r, const chat_template *t, const chat_message *msgs, size_t n)
{
    const char *dflt = t->family == CHAT_QWEN25 ? "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
                       : t->family == CHAT_QWEN2 ? "You are a helpful assistant."
                                                 : NULL;
    if (dflt && !is_role(&msgs[0], "system")) {
        put(r, "<|im_start|>system\n");
        put(r, dflt);
        put(r, "<|im_end|>\n");
    }
    for (size_t i = 0; i < n; i++) {
        if (is_role(&msgs[i], "tool")) qwen_tool(r, msgs, n, i);
        else chatml_turn(r, &msgs[i]);
    }
}

/* ---- Qwen3 ---- */

/* Python's s.find(sub) from the end: the last occurrence, or NULL. */
static const char *last_occurrence(const char *s, const char *sub)
{
    const char *last = NULL;
    for (const char *p = strstr(s, sub); p; p = strstr(p + 1, sub)) last = p;
    return last;
}

static void qwen3_assistant(render *r, const chat_message *m, bool after_last_query, bool is_last)
{
    const char *c = m->content;
    size_t cb = 0, ce = strlen(c);  /* content */
    const char *rs = "";
    size_t rb = 0, re = 0;          /* reasoning_content */
    const char *close = strstr(c, "</think>");
    if (close) {
        /* content = content.split('</think>')[-1].lstrip('\n') */
        cb = (size_t)(last_occurrence(c, "</think>") - c) + strlen("</think>");
        strip_range(c, &cb, &ce, true, false, '\n');
        /* reasoning = content.split('</think>')[0].rstrip('\n')
         *                    .split('<think>')[-1].lstrip('\n') */
        size_t b = 0, e = (size_t)(close - c);
        strip_range(c, &b, &e, false, true, '\n');
        for (const char *p = c + b; (p = strstr(p, "<think>")) && p + 7 <= c + e; p++)
            b = (size_t)(p - c) + 7;
        strip_range(c, &b, &e, true, false, '\n');
        rs = c;
        rb = b;
        re = e;
    }
    put(r, "<|im_start|>assistant\n");
    span_open(r);
    if (after_last_query && (is_last || re > rb)) {
        /* '<think>\n' + reasoning.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') */
        strip_range(rs, &rb, &re, true, true, '\n');
        put(r, "<think>\n");
        putn(r, rs + rb, re - rb);
        put(r, "\n</think>\n\n");
        strip_range(c, &cb, &ce, true, false, '\n');
    }
    putn(r, c + cb, ce - cb);
    put(r, "<|im_end|>");
    span_close(r);
    put(r, "\n");
}

static void render_qwen3(render *r, const chat_message *msgs, size_t n)
{
    if (is_role(&msgs[0], "system")) {
        put(r, "<|im_start|>system\n");
        put(r, msgs[0].content);
        put(r, "<|im_end|>\n");
    }
    /* the last user message that is not a wrapped tool response */
    size_t last_query = n - 1;
    for (size_t k = n; k-- > 0;) {
        const char *c = msgs[k].content;
        bool wrapped = str_starts_with(c, "<tool_response>") && str_ends_with(c, "</tool_response>");
        if (is_role(&msgs[k], "user") && !wrapped) {
            last_query = k;
            break;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const chat_message *m = &msgs[i];
        if (is_role(m, "user") || (is_role(m, "system") && i > 0)) chatml_turn(r, m);
        else if (is_role(m, "assistant")) qwen3_assistant(r, m, i > last_query, i + 1 == n);
        else if (is_role(m, "tool")) qwen_tool(r, msgs, n, i);
    }
}

/* ---- Llama 3 ---- */

static void llama_turn(render *r, const char *role, const char *content, bool trim)
{
    put(r, "<|start_header_id|>");
    put(r, role);
    put(r, "<|end_header_id|>\n\n");
    bool assistant = strcmp(role, "assistant") == 0;
    if (assistant) span_open(r);
    if (trim) put_trimmed(r, content);
    else put(r, content);
    put(r, "<|eot_id|>");
    if (assistant) span_close(r);
}

static void render_llama3(render *r, const chat_template *t, const chat_message *msgs, size_t n)
{
    put(r, t->bos_token ? t->bos_token : "");
    for (size_t i = 0; i < n; i++) llama_turn(r, msgs[i].role, msgs[i].content, true);
}

/* tojson of a string, as transformers' tojson (json.dumps, ensure_ascii
 * off) writes it. */
static void put_json_string(render *r, const char *s)
{
    json_t *j = json_string(s);
    char *d = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    put(r, d ? d : "\"\"");
    free(d);
    json_decref(j);
}

static void render_llama31(render *r, const chat_template *t, const chat_message *msgs, size_t n,
                           const chat_options *o)
{
    put(r, t->bos_token ? t->bos_token : "");
    size_t first = 0;
    put(r, "<|start_header_id|>system<|end_header_id|>\n\n");
    put(r, "Cutting Knowledge Date: December 2023\n");
    put(r, "Today Date: ");
    put(r, o && o->date_string ? o->date_string : "26 Jul 2024");
    put(r, "\n\n");
    if (is_role(&msgs[0], "system")) {
        put_trimmed(r, msgs[0].content);
        first = 1;
    }
    put(r, "<|eot_id|>");
    for (size_t i = first; i < n; i++) {
        const chat_message *m = &msgs[i];
        if (is_role(m, "tool") || is_role(m, "ipython")) {
            /* a string "is iterable" in Jinja, so the template writes it as JSON */
            put(r, "<|start_header_id|>ipython<|end_header_id|>\n\n");
            put_json_string(r, m->content);
            put(r, "<|eot_id|>");
        } else {
            llama_turn(r, m->role, m->content, true);
        }
    }
}

/* ---- entry points ---- */

bool chat_render(const chat_template *t, const chat_message *msgs, size_t n,
                 const chat_options *opts, chat_text *out, char *err, size_t errsz)
{
    memset(out, 0, sizeof *out);
    render r = {.err = err, .errsz = errsz};
    sb_init(&r.out);
    if (t->family == CHAT_NONE) {
        snprintf(err, errsz, "no chat template chosen");
        return false;
    }
    if (!check_messages(&r, t, msgs, n)) {
        free(r.spans);
        return false;
    }
    bool gen = opts && opts->add_generation_prompt;
    switch (t->family) {
    case CHAT_CHATML:
    case CHAT_QWEN2:
    case CHAT_QWEN25: render_chatml(&r, t, msgs, n); break;
    case CHAT_QWEN3: render_qwen3(&r, msgs, n); break;
    case CHAT_LLAMA3:
    case CHAT_LLAMA3_EARLY: render_llama3(&r, t, msgs, n); break;
    default: render_llama31(&r, t, msgs, n, opts); break;
    }
    if (t->family == CHAT_LLAMA3_EARLY || (gen && t->family >= CHAT_LLAMA3)) {
        put(&r, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    } else if (gen) {
        put(&r, "<|im_start|>assistant\n");
        if (t->family == CHAT_QWEN3 && opts->enable_thinking == 0) put(&r, "<think>\n\n</think>\n\n");
    }
    out->len = r.out.len;
    out->text = r.out.len ? sb_take(&r.out) : xstrdup("");
    out->spans = r.spans;
    out->nspans = r.nspans;
    return true;
}

void chat_text_free(chat_text *c)
{
    free(c->text);
    free(c->spans);
    memset(c, 0, sizeof *c);
}

bool chat_encode(tok_tokenizer *tok, const chat_template *t, const chat_message *msgs, size_t n,
                 const chat_options *opts, tok_ids *ids, uint8_t **mask, char *err,
                 size_t errsz)
{
    chat_text ct;
    tok_ids_clear(ids);
    if (!chat_render(t, msgs, n, opts, &ct, err, errsz)) return false;
    bool ok = tok_encode(tok, ct.text, ct.len, 0, ids, err, errsz);
    if (ok && mask) {
        uint8_t *m = xmalloc(ids->len ? ids->len : 1);
        size_t s = 0;
        for (size_t i = 0; i < ids->len; i++) {
            size_t off = ids->offsets[i];
            while (s < ct.nspans && ct.spans[s].end <= off) s++;
            m[i] = s < ct.nspans && off >= ct.spans[s].begin && off < ct.spans[s].end;
        }
        *mask = m;
    }
    chat_text_free(&ct);
    return ok;
}
