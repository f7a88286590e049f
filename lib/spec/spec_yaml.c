/* spec_yaml.c: the one YAML reader of lathe. It turns text into a tree of
 * spec_ynode, one per document, where every node keeps its line and column.
 *
 * It is built on libyaml's event API (not yaml_parser_load) so that lathe
 * owns the limits a hostile file could abuse:
 *   - text: at most SPEC_MAX_FILE_BYTES; NUL bytes, invalid UTF-8 and control
 *     characters are refused up front with one message (not a cascade);
 *   - nesting: at most SPEC_MAX_DEPTH open mappings / sequences;
 *   - size: at most SPEC_MAX_NODES nodes per file counting every alias as
 *     the whole subtree it stands for. An alias is one pointer to the
 *     anchored node and costs its precomputed weight, so a "billion laughs"
 *     file is refused as soon as its expansion passes the limit, without
 *     ever being walked.
 * Duplicate keys are errors; "<<" merge keys (YAML 1.1) are applied; a
 * libyaml error becomes file:line:col with libyaml's own problem text.
 */
#include "spec_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* ---- anchors: a small open-addressing hash table (name -> node) ---- */
typedef struct anchor_slot {
    char *name;
    spec_ynode *node;
} anchor_slot;

typedef struct anchor_table {
    anchor_slot *slots;
    size_t cap, len;
} anchor_table;

static uint64_t anchor_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static anchor_slot *anchor_find_slot(anchor_slot *slots, size_t cap, const char *name)
{
    size_t i = (size_t)(anchor_hash(name) & (cap - 1));
    while (slots[i].name && strcmp(slots[i].name, name) != 0) i = (i + 1) & (cap - 1);
    return &slots[i];
}

static void anchor_put(anchor_table *t, const char *name, spec_ynode *node)
{
    if ((t->len + 1) * 2 > t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 16;
        anchor_slot *ns = xcalloc(ncap, sizeof *ns);
        for (size_t i = 0; i < t->cap; i++)
            if (t->slots[i].name) *anchor_find_slot(ns, ncap, t->slots[i].name) = t->slots[i];
        free(t->slots);
        t->slots = ns;
        t->cap = ncap;
    }
    anchor_slot *s = anchor_find_slot(t->slots, t->cap, name);
    if (!s->name) {
        s->name = xstrdup(name);
        t->len++;
    }
    s->node = node; /* a redefined anchor replaces the old one (YAML 1.2) */
}

static spec_ynode *anchor_get(const anchor_table *t, const char *name)
{
    if (!t->cap) return NULL;
    anchor_slot *s = anchor_find_slot(t->slots, t->cap, name);
    return s->name ? s->node : NULL;
}

static void anchor_clear(anchor_table *t)
{
    for (size_t i = 0; i < t->cap; i++) free(t->slots[i].name);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

/* ---- nodes ---- */
spec_ynode *spec_ynode_new(spec_ystream *owner, spec_ykind kind, int line, int col)
{
    spec_ynode *n = xcalloc(1, sizeof *n);
    n->kind = kind;
    n->line = line;
    n->col = col;
    n->weight = 1;
    if (owner->n_all == owner->cap_all) {
        owner->cap_all = owner->cap_all ? owner->cap_all * 2 : 64;
        owner->all = xrealloc(owner->all, owner->cap_all * sizeof *owner->all);
    }
    owner->all[owner->n_all++] = n;
    return n;
}

void spec_ynode_append(spec_ynode *parent, spec_ynode *child)
{
    if (parent->n_items == parent->cap) {
        parent->cap = parent->cap ? parent->cap * 2 : 4;
        parent->items = xrealloc(parent->items, parent->cap * sizeof *parent->items);
    }
    parent->items[parent->n_items++] = child;
}

void spec_ystream_free(spec_ystream *s)
{
    for (size_t i = 0; i < s->n_all; i++) {
        free(s->all[i]->text);
        free(s->all[i]->items);
        free(s->all[i]);
    }
    free(s->all);
    free(s->docs);
    memset(s, 0, sizeof *s);
}

/* ---- the text check: one clear message for what is not YAML text ---- */

/* YAML's printable set (YAML 1.2, 5.1): tab, LF, CR, 0x20-0x7E, NEL,
 * 0xA0-0xD7FF, 0xE000-0xFFFD, 0x10000-0x10FFFF. */
static bool yaml_printable(uint32_t cp)
{
    return cp == 0x09 || cp == 0x0A || cp == 0x0D || (cp >= 0x20 && cp <= 0x7E) || cp == 0x85 ||
           (cp >= 0xA0 && cp <= 0xD7FF) || (cp >= 0xE000 && cp <= 0xFFFD) ||
           (cp >= 0x10000 && cp <= 0x10FFFF);
}

/* Decodes one UTF-8 sequence at t (n bytes left). Returns its length, or 0
 * when it is not valid UTF-8 (overlong forms and surrogates included). */
static size_t utf8_decode(const unsigned char *t, size_t n, uint32_t *cp)
{
    unsigned c = t[0];
    size_t len;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if ((c & 0xE0) == 0xC0) {
        len = 2, v = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        len = 3, v = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        len = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((t[i] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (t[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return len;
}

/* Line and column (1-based, columns in characters as libyaml counts them)
 * of byte offset off. */
static void text_position(const unsigned char *t, size_t off, int *line, int *col)
{
    int l = 1, c = 1;
    for (size_t i = 0; i < off;) {
        uint32_t cp = '?';
        size_t n = utf8_decode(t + i, off - i, &cp);
        if (n == 0) n = 1;
        if (cp == '\n' || (cp == '\r' && !(i + 1 < off && t[i + 1] == '\n'))) l++, c = 1;
        else if (cp != '\r') c++;
        i += n;
    }
    *line = l;
    *col = c;
}

static void refuse_text(const char *file, const unsigned char *t, size_t off, diag_list *d,
                        const char *msg, const char *found, const char *hint)
{
    int line, col;
    text_position(t, off, &line, &col);
    diag *x = diag_add(d, DIAG_ERROR, file, line, col, NULL, msg);
    diag_set_expected(x, "a UTF-8 YAML text");
    diag_set_found(x, "%s", found);
    diag_set_suggestion(x, "%s", hint);
}

/* True when t is UTF-8 text made of YAML's printable characters; otherwise
 * reports the first problem, once. */
static bool text_check(const char *file, const unsigned char *t, size_t len, diag_list *d)
{
    char found[64];
    if (len >= 2 && ((t[0] == 0xFE && t[1] == 0xFF) || (t[0] == 0xFF && t[1] == 0xFE))) {
        refuse_text(file, t, 0, d, "the file is UTF-16, not UTF-8", "a UTF-16 byte order mark",
                    "save the file as UTF-8");
        return false;
    }
    const unsigned char *nul = memchr(t, 0, len);
    if (nul) {
        refuse_text(file, t, (size_t)(nul - t), d, "the file holds binary data, not YAML text",
                    "a NUL byte", "check that this is the YAML file you meant");
        return false;
    }
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t n = utf8_decode(t + i, len - i, &cp);
        if (n == 0) {
            snprintf(found, sizeof found, "the byte 0x%02X", t[i]);
            refuse_text(file, t, i, d, "the file is not valid UTF-8", found,
                        "save the file as UTF-8 (is it a binary file?)");
            return false;
        }
        if (!yaml_printable(cp) && !(i == 0 && cp == 0xFEFF)) {
            snprintf(found, sizeof found, "the control character U+%04X", (unsigned)cp);
            refuse_text(file, t, i, d, "a character YAML does not allow", found,
                        "remove it (is it a binary file?)");
            return false;
        }
        i += n;
    }
    return true;
}

/* ---- the tree builder: libyaml events in, nodes out ---- */
typedef struct builder {
    const char *file;
    const unsigned char *text;
    size_t len;
    diag_list *d;
    spec_ystream *out;
    spec_ynode **stack; /* open collections, outermost first */
    size_t depth, cap;
    anchor_table anchors;
    uint64_t expanded; /* nodes in the file so far, aliases expanded */
    bool fatal;        /* reading stopped */
    spec_ydoc doc;     /* the document being built */
} builder;

/* The field path of the value being built: "spec.lora.targetModules[2]".
 * A collection is attached to its parent when it opens, so below the top
 * of the stack the child is the parent's last item; at the top, the next
 * node is about to be attached. */
static void builder_path(const builder *b, sb *out)
{
    for (size_t i = 0; i < b->depth; i++) {
        const spec_ynode *p = b->stack[i];
        bool top = i + 1 == b->depth;
        if (p->kind == SPEC_YSEQ) {
            sb_printf(out, "[%zu]", top ? p->n_items : p->n_items - 1);
            continue;
        }
        const spec_ynode *k = NULL;
        if (top && p->n_items % 2 == 1) k = p->items[p->n_items - 1]; /* value comes next */
        else if (!top && p->n_items % 2 == 0) k = p->items[p->n_items - 2];
        if (!k) continue;
        if (out->len) sb_putc(out, '.');
        sb_puts(out, k->kind == SPEC_YSCALAR ? k->text : "?");
    }
}

static diag *builder_error(builder *b, int line, int col, const char *extra_path,
                           const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static diag *builder_error(builder *b, int line, int col, const char *extra_path,
                           const char *fmt, ...)
{
    sb path, msg;
    sb_init(&path);
    sb_init(&msg);
    builder_path(b, &path);
    if (extra_path) {
        if (path.len) sb_putc(&path, '.');
        sb_puts(&path, extra_path);
    }
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(&msg, fmt, ap);
    va_end(ap);
    diag *x = diag_add(b->d, DIAG_ERROR, b->file, line, col, path.len ? sb_str(&path) : NULL,
                       sb_str(&msg));
    sb_free(&path);
    sb_free(&msg);
    b->doc.errors++;
    return x;
}

/* Counts `weight` more nodes against SPEC_MAX_NODES. */
static bool builder_count(builder *b, uint64_t weight, int line, int col, const char *alias)
{
    b->expanded += weight;
    if (b->expanded <= SPEC_MAX_NODES) return true;
    diag *x;
    if (alias) {
        x = builder_error(b, line, col, NULL,
                          "alias *%s stands for %llu nodes: the file would expand past the "
                          "limit of %d nodes (an alias bomb, \"billion laughs\")",
                          alias, (unsigned long long)weight, SPEC_MAX_NODES);
        diag_set_suggestion(x, "write the values out instead of nesting aliases");
    } else {
        x = builder_error(b, line, col, NULL, "the file holds more than %d YAML nodes",
                          SPEC_MAX_NODES);
        diag_set_suggestion(x, "split it into several files");
    }
    b->fatal = true;
    return false;
}

static void builder_attach(builder *b, spec_ynode *n)
{
    if (b->depth == 0) {
        b->doc.root = n;
        return;
    }
    spec_ynode_append(b->stack[b->depth - 1], n);
}

/* Tags: the standard ones (!!str, !!int, ...) are fine and !!str makes a
 * scalar a string; application tags ("!foo") mean nothing to lathe. */
static bool builder_tag(builder *b, const yaml_char_t *tag, int line, int col)
{
    if (!tag) return false;
    const char *t = (const char *)tag;
    if (str_starts_with(t, "tag:yaml.org,2002:")) return strcmp(t, "tag:yaml.org,2002:str") == 0;
    if (strcmp(t, "!") == 0) return true; /* the non-specific tag: a string */
    diag *x = builder_error(b, line, col, NULL, "the tag %s means nothing to lathe", t);
    diag_set_suggestion(x, "remove the tag");
    return false;
}

static bool plain_null(const char *s)
{
    return !*s || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 ||
           strcmp(s, "NULL") == 0;
}

static void builder_scalar(builder *b, const yaml_event_t *ev, int line, int col)
{
    if (!builder_count(b, 1, line, col, NULL)) return;
    spec_ynode *n = spec_ynode_new(b->out, SPEC_YSCALAR, line, col);
    const char *v = (const char *)ev->data.scalar.value;
    size_t len = ev->data.scalar.length;
    bool str_tag = builder_tag(b, ev->data.scalar.tag, line, col);
    if (memchr(v, 0, len)) {
        diag *x = builder_error(b, line, col, NULL, "a value holds a NUL character");
        diag_set_suggestion(x, "remove the \\0 escape");
        n->text = xstrdup("");
        n->invalid = true;
    } else {
        n->text = xstrndup(v, len);
    }
    n->quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE || str_tag;
    n->null = !n->quoted && plain_null(n->text);
    if (ev->data.scalar.anchor) anchor_put(&b->anchors, (const char *)ev->data.scalar.anchor, n);
    builder_attach(b, n);
}

static void builder_open(builder *b, spec_ykind kind, const yaml_char_t *anchor,
                         const yaml_char_t *tag, int line, int col)
{
    if (b->depth >= SPEC_MAX_DEPTH) {
        diag *x = builder_error(b, line, col, NULL,
                                "the file nests lists and mappings deeper than %d levels",
                                SPEC_MAX_DEPTH);
        diag_set_suggestion(x, "flatten the structure; no lathe object nests this deep");
        b->fatal = true;
        return;
    }
    if (!builder_count(b, 1, line, col, NULL)) return;
    builder_tag(b, tag, line, col);
    spec_ynode *n = spec_ynode_new(b->out, kind, line, col);
    n->open = true;
    if (anchor) anchor_put(&b->anchors, (const char *)anchor, n);
    builder_attach(b, n);
    if (b->depth == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 16;
        b->stack = xrealloc(b->stack, b->cap * sizeof *b->stack);
    }
    b->stack[b->depth++] = n;
}

typedef struct keyref {
    const char *key;
    size_t prio;  /* 0: written in the mapping; k: from the k-th merged mapping */
    size_t order; /* position among those of the same prio */
    spec_ynode *k, *v;
    bool keep;
} keyref;

static int keyref_by_key(const void *a, const void *b)
{
    const keyref *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (c) return c;
    if (x->prio != y->prio) return x->prio < y->prio ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static int keyref_by_place(const void *a, const void *b)
{
    const keyref *x = a, *y = b;
    if (x->prio != y->prio) return x->prio < y->prio ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static bool is_merge_key(const spec_ynode *k)
{
    return k->kind == SPEC_YSCALAR && !k->quoted && strcmp(k->text, "<<") == 0;
}

/* Collects the pairs of m written in it (prio 0) and those its "<<" keys
 * merge in (prio 1, 2, ...). Reports non-string keys and bad merges. */
static size_t collect_keys(builder *b, spec_ynode *m, keyref **out)
{
    size_t n = 0, cap = m->n_items / 2 + 4, prio = 0;
    keyref *r = xmalloc(cap * sizeof *r);
    for (size_t i = 0; i + 1 < m->n_items; i += 2) {
        spec_ynode *k = m->items[i], *v = m->items[i + 1];
        if (k->kind != SPEC_YSCALAR) {
            diag *x = builder_error(b, k->line, k->col, NULL,
                                    "a key must be a name, not a list or a mapping");
            diag_set_suggestion(x, "write a plain key such as `rank:`");
            continue;
        }
        if (!is_merge_key(k)) {
            if (n == cap) r = xrealloc(r, (cap *= 2) * sizeof *r);
            r[n++] = (keyref){k->text, 0, i, k, v, true};
            continue;
        }
        size_t ns = v->kind == SPEC_YSEQ ? v->n_items : 1;
        for (size_t s = 0; s < ns; s++) {
            spec_ynode *src = v->kind == SPEC_YSEQ ? v->items[s] : v;
            prio++;
            if (src->kind != SPEC_YMAP) {
                diag *x = builder_error(b, src->line, src->col, "<<",
                                        "a merge key takes a mapping or a list of mappings");
                diag_set_suggestion(x, "write `<<: *anchor` with an anchored mapping");
                continue;
            }
            for (size_t j = 0; j + 1 < src->n_items; j += 2) {
                if (src->items[j]->kind != SPEC_YSCALAR) continue;
                if (n == cap) r = xrealloc(r, (cap *= 2) * sizeof *r);
                r[n++] = (keyref){src->items[j]->text, prio, j, src->items[j], src->items[j + 1],
                                  true};
            }
        }
    }
    *out = r;
    return n;
}

/* Duplicate keys are errors; merged keys give way to written ones and to
 * earlier merges. Rebuilds m's items: written pairs, then merged ones. */
static void builder_close_map(builder *b, spec_ynode *m)
{
    keyref *r;
    size_t n = collect_keys(b, m, &r);
    qsort(r, n, sizeof *r, keyref_by_key);
    size_t first = 0; /* where the current run of equal keys starts */
    for (size_t i = 1; i < n; i++) {
        if (strcmp(r[i].key, r[i - 1].key) != 0) {
            first = i;
            continue;
        }
        if (r[i].prio != 0) {
            r[i].keep = false; /* a merged key overridden: fine */
            continue;
        }
        diag *x = builder_error(b, r[i].k->line, r[i].k->col, r[i].key,
                                "the key \"%s\" appears twice in this mapping (first at line "
                                "%d, column %d)",
                                r[i].key, r[first].k->line, r[first].k->col);
        diag_set_suggestion(x, "keep one of them");
    }
    qsort(r, n, sizeof *r, keyref_by_place);
    m->n_items = 0;
    for (size_t i = 0; i < n; i++) {
        if (!r[i].keep) continue;
        spec_ynode_append(m, r[i].k);
        spec_ynode_append(m, r[i].v);
    }
    free(r);
}

static void builder_close(builder *b)
{
    if (b->depth == 0) return;
    spec_ynode *n = b->stack[b->depth - 1];
    if (n->kind == SPEC_YMAP) builder_close_map(b, n);
    b->depth--;
    n->open = false;
    n->weight = 1;
    for (size_t i = 0; i < n->n_items; i++) n->weight += n->items[i]->weight;
}

static void builder_alias(builder *b, const char *name, int line, int col)
{
    spec_ynode *t = anchor_get(&b->anchors, name);
    const char *problem = !t ? "refers to no anchor" : t->open ? "refers to a node that holds it"
                                                                : NULL;
    if (problem) {
        diag *x = builder_error(b, line, col, NULL, "the alias *%s %s", name, problem);
        diag_set_suggestion(x, t ? "recursive structures are not allowed; write the value out"
                                 : "define the anchor (&name) before the alias uses it");
        t = spec_ynode_new(b->out, SPEC_YSCALAR, line, col);
        t->text = xstrdup("");
        t->invalid = true;
    }
    if (!builder_count(b, t->weight, line, col, name)) return;
    builder_attach(b, t);
}

static void builder_doc_end(builder *b)
{
    spec_ynode *r = b->doc.root;
    if (r && !(r->kind == SPEC_YSCALAR && r->null)) {
        spec_ystream *s = b->out;
        if ((s->n_docs & (s->n_docs - 1)) == 0) /* 0, 1, 2, 4, ...: grow by doubling */
            s->docs = xrealloc(s->docs, (s->n_docs ? s->n_docs * 2 : 1) * sizeof *s->docs);
        s->docs[s->n_docs++] = b->doc;
    }
    memset(&b->doc, 0, sizeof b->doc);
    anchor_clear(&b->anchors); /* anchors live within their document */
}

static void builder_event(builder *b, const yaml_event_t *ev)
{
    int line = (int)ev->start_mark.line + 1, col = (int)ev->start_mark.column + 1;
    switch (ev->type) {
    case YAML_DOCUMENT_START_EVENT:
        memset(&b->doc, 0, sizeof b->doc);
        b->doc.line = line;
        b->doc.col = col;
        break;
    case YAML_DOCUMENT_END_EVENT: builder_doc_end(b); break;
    case YAML_SCALAR_EVENT: builder_scalar(b, ev, line, col); break;
    case YAML_SEQUENCE_START_EVENT:
        builder_open(b, SPEC_YSEQ, ev->data.sequence_start.anchor, ev->data.sequence_start.tag,
                     line, col);
        break;
    case YAML_MAPPING_START_EVENT:
        builder_open(b, SPEC_YMAP, ev->data.mapping_start.anchor, ev->data.mapping_start.tag,
                     line, col);
        break;
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT: builder_close(b); break;
    case YAML_ALIAS_EVENT: builder_alias(b, (const char *)ev->data.alias.anchor, line, col); break;
    default: break;
    }
}

/* Advice for libyaml's most common complaints. */
static const char *syntax_hint(const yaml_parser_t *p, const builder *b)
{
    const char *prob = p->problem ? p->problem : "";
    size_t off = p->problem_mark.index;
    if (off < b->len && b->text[off] == '\t')
        return "YAML indents with spaces, never tabs";
    if (strstr(prob, "expected ',' or ']'"))
        return "close the list with ] (or add the missing comma)";
    if (strstr(prob, "expected ',' or '}'"))
        return "close the mapping with } (or add the missing comma)";
    if (strstr(prob, "mapping values are not allowed"))
        return "quote a value that holds \": \", or check the indentation";
    if (strstr(prob, "did not find expected key") || strstr(prob, "did not find expected -"))
        return "check this line's indentation against the lines above";
    if (strstr(prob, "found undefined tag handle")) return "remove the tag";
    if (strstr(prob, "could not find expected ':'"))
        return "a key needs \": \" after it; a long plain value may need quotes";
    return "fix the YAML syntax at this place";
}

static void report_syntax(builder *b, const yaml_parser_t *p)
{
    int line, col;
    if (p->error == YAML_READER_ERROR) {
        text_position(b->text, p->problem_offset < b->len ? p->problem_offset : b->len, &line,
                      &col);
    } else {
        line = (int)p->problem_mark.line + 1;
        col = (int)p->problem_mark.column + 1;
    }
    sb msg;
    sb_init(&msg);
    sb_printf(&msg, "YAML syntax error: %s", p->problem ? p->problem : "unknown problem");
    if (p->context)
        sb_printf(&msg, " (%s at line %d, column %d)", p->context,
                  (int)p->context_mark.line + 1, (int)p->context_mark.column + 1);
    diag *x = diag_add(b->d, DIAG_ERROR, b->file, line, col, NULL, sb_str(&msg));
    diag_set_suggestion(x, "%s", syntax_hint(p, b));
    sb_free(&msg);
    b->fatal = true;
}

bool spec_yaml_parse(const char *file, const char *text, size_t len, spec_ystream *out,
                     diag_list *d)
{
    memset(out, 0, sizeof *out);
    if (len > SPEC_MAX_FILE_BYTES) {
        diag *x = diag_add(d, DIAG_ERROR, file, 0, 0, NULL, "the file is too large");
        diag_set_expected(x, "at most %u bytes", SPEC_MAX_FILE_BYTES);
        diag_set_found(x, "%zu bytes", len);
        diag_set_suggestion(x, "a job, experiment or cluster file is a few KiB; is this the "
                               "right file?");
        return false;
    }
    const unsigned char *t = (const unsigned char *)text;
    if (!text_check(file, t, len, d)) return false;

    builder b = {.file = file, .text = t, .len = len, .d = d, .out = out};
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) {
        diag_add(d, DIAG_ERROR, file, 0, 0, NULL, "cannot start the YAML parser");
        return false;
    }
    yaml_parser_set_input_string(&p, t, len);
    yaml_parser_set_encoding(&p, YAML_UTF8_ENCODING);
    bool done = false;
    while (!done && !b.fatal) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            report_syntax(&b, &p);
            break;
        }
        done = ev.type == YAML_STREAM_END_EVENT;
        builder_event(&b, &ev);
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    anchor_clear(&b.anchors);
    free(b.stack);
    return !b.fatal;
}

/* ---- reading the tree ---- */
const spec_ynode *spec_ymap_key(const spec_ynode *m, const char *key)
{
    if (!m || m->kind != SPEC_YMAP) return NULL;
    for (size_t i = 0; i + 1 < m->n_items; i += 2) {
        const spec_ynode *k = m->items[i];
        if (k->kind == SPEC_YSCALAR && strcmp(k->text, key) == 0) return k;
    }
    return NULL;
}

const spec_ynode *spec_ymap_get(const spec_ynode *m, const char *key)
{
    if (!m || m->kind != SPEC_YMAP) return NULL;
    for (size_t i = 0; i + 1 < m->n_items; i += 2) {
        const spec_ynode *k = m->items[i];
        if (k->kind == SPEC_YSCALAR && strcmp(k->text, key) == 0) return m->items[i + 1];
    }
    return NULL;
}

const spec_ynode *spec_yitem_get(const spec_ynode *seq, size_t i, const char *key)
{
    if (!seq || seq->kind != SPEC_YSEQ || i >= seq->n_items) return NULL;
    return spec_ymap_get(seq->items[i], key);
}

const spec_ynode *spec_ypath(const spec_ynode *m, const char *dotted)
{
    char seg[128];
    const char *p = dotted;
    while (m && *p) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (n >= sizeof seg) return NULL;
        memcpy(seg, p, n);
        seg[n] = '\0';
        m = spec_ymap_get(m, seg);
        p = dot ? dot + 1 : p + n;
    }
    return m;
}

bool spec_yabsent(const spec_ynode *n)
{
    return !n || (n->kind == SPEC_YSCALAR && n->null);
}

void spec_ydescribe(const spec_ynode *n, char *out, size_t outsz)
{
    if (!n) snprintf(out, outsz, "nothing");
    else if (n->kind == SPEC_YMAP) snprintf(out, outsz, "a mapping");
    else if (n->kind == SPEC_YSEQ) snprintf(out, outsz, "a list");
    else if (n->null) snprintf(out, outsz, "an empty value");
    else if (strlen(n->text) > 40) snprintf(out, outsz, "\"%.37s...\"", n->text);
    else if (n->quoted) snprintf(out, outsz, "\"%s\"", n->text);
    else snprintf(out, outsz, "%s", n->text);
}

#define FLOW_TEXT_MAX 200

static void flow_text(const spec_ynode *n, sb *out, int depth)
{
    if (out->len > FLOW_TEXT_MAX || depth > SPEC_MAX_DEPTH) return;
    if (n->kind == SPEC_YSCALAR) {
        sb_puts(out, n->text);
        return;
    }
    bool map = n->kind == SPEC_YMAP;
    sb_putc(out, map ? '{' : '[');
    for (size_t i = 0; i < n->n_items && out->len <= FLOW_TEXT_MAX; i++) {
        if (i) sb_puts(out, map && i % 2 ? ": " : ", ");
        flow_text(n->items[i], out, depth + 1);
    }
    sb_putc(out, map ? '}' : ']');
}

char *spec_yflow_text(const spec_ynode *n)
{
    sb s;
    sb_init(&s);
    flow_text(n, &s, 0);
    if (s.len > FLOW_TEXT_MAX) {
        s.len = FLOW_TEXT_MAX;
        s.buf[s.len] = '\0';
        sb_puts(&s, "...");
    }
    return sb_take(&s);
}
