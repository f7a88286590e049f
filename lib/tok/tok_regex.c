/* tok_regex.c: the small regex matcher behind the tokenizer's Split
 * pre-tokenizer. It is not a general engine: it knows the constructs that
 * tokenizer.json files use (GPT-2, Llama 3, Qwen2 and similar patterns) and
 * says plainly when a pattern uses anything else.
 *
 * Supported: literals (UTF-8), '.', classes [...] with ranges, negation and
 * escapes, \s \S \d \D \w \W, \p{..} / \P{..} general categories, \r \n \t
 * \f \v \a \e \xHH \x{H..} \uHHHH, alternation, groups ( ), (?: ), (?i: )
 * and (?i), lookahead (?= ) (?! ), atomic groups (?> ), quantifiers ? * +
 * {n} {n,} {n,m} {,m} on single characters, with lazy (?) and possessive
 * (+) forms, and ? on groups.
 *
 * Semantics are Oniguruma's (which Hugging Face tokenizers uses):
 * leftmost-first backtracking, \s = White_Space, \w = letters, marks,
 * numbers and connector punctuation, (?i) by simple case folding.
 *
 * Matching is recursive backtracking with continuations: a node is matched
 * at a position together with "what comes after it" (a chain of sequence
 * frames on the C stack). Repeats of single characters loop instead of
 * recursing, so the stack depth depends on the pattern, never on the text.
 * A step budget turns pathological backtracking into an error.
 */
#include "tok/tok_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

enum { RX_MAX_NODES = 512, RX_MAX_DEPTH = 64 };

typedef enum { RX_CHAR, RX_SET, RX_ANY, RX_SEQ, RX_ALT, RX_REP, RX_LOOK, RX_ATOMIC, RX_EMPTY } rx_kind;
typedef enum { RX_GREEDY, RX_LAZY, RX_POSSESSIVE } rx_mode;

typedef struct rx_node {
    rx_kind kind;
    bool icase;     /* CHAR: compare folded */
    bool negate;    /* LOOK: (?! ) */
    uint32_t ch;    /* CHAR (folded when icase) */
    int set;        /* SET: index into sets */
    int child;      /* REP, LOOK, ATOMIC */
    int first, n;   /* SEQ, ALT: children kids[first .. first+n) */
    uint32_t min, max; /* REP; max UINT32_MAX = unbounded */
    rx_mode mode;
    /* what a match of this node can start with, to skip alternatives
     * early: ASCII code points (bitmap), any non-ASCII one, or nothing
     * (nullable: it can match the empty string) */
    uint32_t first_ascii[4];
    bool first_nonascii, nullable;
} rx_node;

typedef enum { RX_IT_RANGE, RX_IT_CATS, RX_IT_SPACE } rx_item_kind;

typedef struct rx_item {
    rx_item_kind kind;
    bool neg;       /* \S, \P{..}, \W, \D */
    uint32_t lo, hi; /* RANGE */
    uint32_t cats;  /* CATS: bit per utf8proc category */
} rx_item;

typedef struct rx_set {
    bool negate, icase;
    int first, n; /* items[first .. first+n) */
    uint32_t ascii[4]; /* precomputed answer for code points < 128 */
} rx_set;

struct tok_regex {
    rx_node *nodes;
    size_t nnodes, capnodes;
    int *kids;
    size_t nkids, capkids;
    rx_set *sets;
    size_t nsets, capsets;
    rx_item *items;
    size_t nitems, capitems;
    int root;
};

/* ---- category names ---- */

#define CAT(x) (1u << UTF8PROC_CATEGORY_##x)
#define CATS_L (CAT(LU) | CAT(LL) | CAT(LT) | CAT(LM) | CAT(LO))
#define CATS_M (CAT(MN) | CAT(MC) | CAT(ME))
#define CATS_N (CAT(ND) | CAT(NL) | CAT(NO))
#define CATS_P (CAT(PC) | CAT(PD) | CAT(PS) | CAT(PE) | CAT(PI) | CAT(PF) | CAT(PO))
#define CATS_S (CAT(SM) | CAT(SC) | CAT(SK) | CAT(SO))
#define CATS_Z (CAT(ZS) | CAT(ZL) | CAT(ZP))
#define CATS_C (CAT(CC) | CAT(CF) | CAT(CS) | CAT(CO) | CAT(CN))

/* General category names and aliases (Unicode PropertyValueAliases.txt),
 * compared after lower-casing and dropping '_', '-' and ' ' as Oniguruma
 * does. */
static const struct {
    const char *name;
    uint32_t cats;
} rx_cat_names[] = {
    {"l", CATS_L}, {"letter", CATS_L}, {"lc", CAT(LU) | CAT(LL) | CAT(LT)},
    {"l&", CAT(LU) | CAT(LL) | CAT(LT)}, {"casedletter", CAT(LU) | CAT(LL) | CAT(LT)},
    {"lu", CAT(LU)}, {"uppercaseletter", CAT(LU)}, {"ll", CAT(LL)}, {"lowercaseletter", CAT(LL)},
    {"lt", CAT(LT)}, {"titlecaseletter", CAT(LT)}, {"lm", CAT(LM)}, {"modifierletter", CAT(LM)},
    {"lo", CAT(LO)}, {"otherletter", CAT(LO)},
    {"m", CATS_M}, {"mark", CATS_M}, {"combiningmark", CATS_M}, {"mn", CAT(MN)},
    {"nonspacingmark", CAT(MN)}, {"mc", CAT(MC)}, {"spacingmark", CAT(MC)}, {"me", CAT(ME)},
    {"enclosingmark", CAT(ME)},
    {"n", CATS_N}, {"number", CATS_N}, {"nd", CAT(ND)}, {"decimalnumber", CAT(ND)},
    {"nl", CAT(NL)}, {"letternumber", CAT(NL)}, {"no", CAT(NO)}, {"othernumber", CAT(NO)},
    {"p", CATS_P}, {"punctuation", CATS_P}, {"pc", CAT(PC)}, {"connectorpunctuation", CAT(PC)},
    {"pd", CAT(PD)}, {"dashpunctuation", CAT(PD)}, {"ps", CAT(PS)}, {"openpunctuation", CAT(PS)},
    {"pe", CAT(PE)}, {"closepunctuation", CAT(PE)}, {"pi", CAT(PI)},
    {"initialpunctuation", CAT(PI)}, {"pf", CAT(PF)}, {"finalpunctuation", CAT(PF)},
    {"po", CAT(PO)}, {"otherpunctuation", CAT(PO)},
    {"s", CATS_S}, {"symbol", CATS_S}, {"sm", CAT(SM)}, {"mathsymbol", CAT(SM)},
    {"sc", CAT(SC)}, {"currencysymbol", CAT(SC)}, {"sk", CAT(SK)}, {"modifiersymbol", CAT(SK)},
    {"so", CAT(SO)}, {"othersymbol", CAT(SO)},
    {"z", CATS_Z}, {"separator", CATS_Z}, {"zs", CAT(ZS)}, {"spaceseparator", CAT(ZS)},
    {"zl", CAT(ZL)}, {"lineseparator", CAT(ZL)}, {"zp", CAT(ZP)},
    {"paragraphseparator", CAT(ZP)},
    {"c", CATS_C}, {"other", CATS_C}, {"cc", CAT(CC)}, {"control", CAT(CC)}, {"cf", CAT(CF)},
    {"format", CAT(CF)}, {"cs", CAT(CS)}, {"surrogate", CAT(CS)}, {"co", CAT(CO)},
    {"privateuse", CAT(CO)}, {"cn", CAT(CN)}, {"unassigned", CAT(CN)},
    {"any", 0x3FFFFFFFu},
};

/* ---- building ---- */

typedef struct rx_parser {
    tok_regex *re;
    const char *p; /* the pattern */
    size_t len, i;
    int depth;
    char *err;
    size_t errsz;
    bool failed;
} rx_parser;

static void rx_fail(rx_parser *ps, size_t at, const char *fmt, const char *what)
{
    if (ps->failed) return;
    ps->failed = true;
    char msg[200];
    snprintf(msg, sizeof msg, fmt, what);
    snprintf(ps->err, ps->errsz, "%s at offset %zu of the pattern", msg, at);
}

static int rx_new_node(rx_parser *ps, rx_kind kind)
{
    tok_regex *re = ps->re;
    if (re->nnodes >= RX_MAX_NODES) {
        rx_fail(ps, ps->i, "pattern too long (more than %s nodes)", "512");
        return -1;
    }
    if (re->nnodes == re->capnodes) {
        re->capnodes = re->capnodes ? re->capnodes * 2 : 32;
        re->nodes = xrealloc(re->nodes, re->capnodes * sizeof *re->nodes);
    }
    rx_node *n = &re->nodes[re->nnodes];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->child = n->set = -1;
    return (int)re->nnodes++;
}

/* Stores a list of children and returns the index of the first. */
static int rx_put_kids(tok_regex *re, const int *list, size_t n)
{
    if (re->nkids + n > re->capkids) {
        while (re->nkids + n > re->capkids) re->capkids = re->capkids ? re->capkids * 2 : 64;
        re->kids = xrealloc(re->kids, re->capkids * sizeof *re->kids);
    }
    int first = (int)re->nkids;
    if (n) memcpy(re->kids + re->nkids, list, n * sizeof *list);
    re->nkids += n;
    return first;
}

static void rx_add_item(tok_regex *re, rx_item it)
{
    if (re->nitems == re->capitems) {
        re->capitems = re->capitems ? re->capitems * 2 : 16;
        re->items = xrealloc(re->items, re->capitems * sizeof *re->items);
    }
    re->items[re->nitems++] = it;
}

static int rx_new_set(tok_regex *re)
{
    if (re->nsets == re->capsets) {
        re->capsets = re->capsets ? re->capsets * 2 : 8;
        re->sets = xrealloc(re->sets, re->capsets * sizeof *re->sets);
    }
    rx_set *s = &re->sets[re->nsets];
    memset(s, 0, sizeof *s);
    s->first = (int)re->nitems;
    return (int)re->nsets++;
}

/* ---- matching one character ---- */

static bool rx_item_has(const rx_item *it, uint32_t cp, uint8_t cat)
{
    bool in;
    switch (it->kind) {
    case RX_IT_RANGE: in = cp >= it->lo && cp <= it->hi; break;
    case RX_IT_CATS: in = (it->cats >> (cat & 0x1F)) & 1u; break;
    default: in = (cat & 0x80) != 0; break;
    }
    return in != it->neg;
}

static bool rx_set_slow(const tok_regex *re, const rx_set *s, uint32_t cp, uint8_t cat)
{
    bool in = false;
    for (int k = 0; k < s->n && !in; k++) in = rx_item_has(&re->items[s->first + k], cp, cat);
    if (!in && s->icase) {
        /* try the other cases of cp; categories of those are looked up */
        uint32_t alt[3] = {uni_fold(cp), (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp),
                           (uint32_t)utf8proc_toupper((utf8proc_int32_t)cp)};
        for (int a = 0; a < 3 && !in; a++) {
            if (alt[a] == cp) continue;
            uint8_t c2 = (uint8_t)(uni_category(alt[a]) | (uni_is_white_space(alt[a]) ? 0x80 : 0));
            for (int k = 0; k < s->n && !in; k++) in = rx_item_has(&re->items[s->first + k], alt[a], c2);
        }
    }
    return in != s->negate;
}

static bool rx_single(const tok_regex *re, const rx_node *n, uint32_t cp, uint8_t cat)
{
    switch (n->kind) {
    case RX_CHAR: return cp == n->ch || (n->icase && uni_fold(cp) == n->ch);
    case RX_ANY: return cp != '\n';
    default: {
        const rx_set *s = &re->sets[n->set];
        if (cp < 128) return (s->ascii[cp >> 5] >> (cp & 31)) & 1u;
        return rx_set_slow(re, s, cp, cat);
    }
    }
}

static void rx_set_finish(tok_regex *re, rx_set *s)
{
    s->n = (int)re->nitems - s->first;
    for (uint32_t c = 0; c < 128; c++) {
        uint8_t cat = (uint8_t)(uni_category(c) | (uni_is_white_space(c) ? 0x80 : 0));
        if (rx_set_slow(re, s, c, cat)) s->ascii[c >> 5] |= 1u << (c & 31);
    }
}

/* ---- parsing ---- */

static bool rx_peek_cp(rx_parser *ps, uint32_t *cp, size_t *after)
{
    size_t j = ps->i;
    if (!uni_next(ps->p, ps->len, &j, cp)) {
        rx_fail(ps, ps->i, "%s", "invalid UTF-8 in the pattern");
        return false;
    }
    *after = j;
    return true;
}

static bool rx_hex(rx_parser *ps, size_t ndigits_max, bool braced, uint32_t *out)
{
    uint32_t v = 0;
    size_t nd = 0;
    while (ps->i < ps->len && nd < ndigits_max) {
        char c = ps->p[ps->i];
        int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
        if (d < 0) break;
        v = v * 16 + (uint32_t)d;
        nd++;
        ps->i++;
    }
    if (braced) {
        if (ps->i >= ps->len || ps->p[ps->i] != '}') nd = 0;
        else ps->i++;
    } else if (nd != ndigits_max) {
        nd = 0;
    }
    if (nd == 0 || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
        rx_fail(ps, ps->i, "%s", "bad hexadecimal escape");
        return false;
    }
    *out = v;
    return true;
}

/* \p{Name}: fills cats; sets *neg for \P and \p{^..}. */
static bool rx_property(rx_parser *ps, bool upper, rx_item *it)
{
    size_t at = ps->i;
    if (ps->i >= ps->len || ps->p[ps->i] != '{') {
        rx_fail(ps, at, "%s", "\\p needs {Name}");
        return false;
    }
    ps->i++;
    bool neg = upper;
    if (ps->i < ps->len && ps->p[ps->i] == '^') {
        neg = !neg;
        ps->i++;
    }
    char name[40];
    size_t n = 0;
    while (ps->i < ps->len && ps->p[ps->i] != '}') {
        char c = ps->p[ps->i++];
        if (c == '_' || c == '-' || c == ' ') continue;
        if (c >= 'A' && c <= 'Z') c = (char)(c + 32);
        if (n + 1 < sizeof name) name[n++] = c;
    }
    name[n] = 0;
    if (ps->i >= ps->len) {
        rx_fail(ps, at, "%s", "unterminated \\p{");
        return false;
    }
    ps->i++;
    for (size_t k = 0; k < sizeof rx_cat_names / sizeof rx_cat_names[0]; k++)
        if (strcmp(rx_cat_names[k].name, name) == 0) {
            it->kind = RX_IT_CATS;
            it->cats = rx_cat_names[k].cats;
            it->neg = neg;
            return true;
        }
    rx_fail(ps, at,
            "unsupported property \\p{%s} (only general categories such as L, N, Lu, P are "
            "supported, not scripts or binary properties)",
            name);
    return false;
}

/* Parses an escape after '\'. Either a single code point (*is_cp) or a
 * class item. */
static bool rx_escape(rx_parser *ps, bool *is_cp, uint32_t *cp, rx_item *it)
{
    size_t at = ps->i - 1;
    if (ps->i >= ps->len) {
        rx_fail(ps, at, "%s", "pattern ends with a backslash");
        return false;
    }
    char c = ps->p[ps->i++];
    *is_cp = true;
    memset(it, 0, sizeof *it);
    switch (c) {
    case 't': *cp = '\t'; return true;
    case 'n': *cp = '\n'; return true;
    case 'r': *cp = '\r'; return true;
    case 'f': *cp = '\f'; return true;
    case 'v': *cp = 0x0B; return true;
    case 'a': *cp = 0x07; return true;
    case 'e': *cp = 0x1B; return true;
    case 'x':
        if (ps->i < ps->len && ps->p[ps->i] == '{') {
            ps->i++;
            return rx_hex(ps, 8, true, cp);
        }
        return rx_hex(ps, 2, false, cp);
    case 'u': return rx_hex(ps, 4, false, cp);
    case 's': case 'S':
        *is_cp = false;
        it->kind = RX_IT_SPACE;
        it->neg = c == 'S';
        return true;
    case 'd': case 'D':
        *is_cp = false;
        it->kind = RX_IT_CATS;
        it->cats = CAT(ND);
        it->neg = c == 'D';
        return true;
    case 'w': case 'W':
        *is_cp = false;
        it->kind = RX_IT_CATS;
        it->cats = CATS_L | CATS_M | CATS_N | CAT(PC);
        it->neg = c == 'W';
        return true;
    case 'p': case 'P':
        *is_cp = false;
        return rx_property(ps, c == 'P', it);
    default: break;
    }
    if ((unsigned char)c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
        (c >= '0' && c <= '9')) {
        char what[3] = {'\\', c, 0};
        rx_fail(ps, at, "unsupported escape %s (anchors, back-references and \\h are not supported)",
                what);
        return false;
    }
    *cp = (uint32_t)(unsigned char)c; /* escaped punctuation stands for itself */
    return true;
}

/* One class member: a code point (possibly starting a range) or an item. */
static bool rx_class_member(rx_parser *ps, bool *is_cp, uint32_t *cp, rx_item *it)
{
    char c = ps->p[ps->i];
    if (c == '[') {
        rx_fail(ps, ps->i, "%s", "nested or POSIX classes ([[:alpha:]], [a[b]]) are not supported");
        return false;
    }
    if (c == '&' && ps->i + 1 < ps->len && ps->p[ps->i + 1] == '&') {
        rx_fail(ps, ps->i, "%s", "class intersection && is not supported");
        return false;
    }
    if (c == '\\') {
        ps->i++;
        return rx_escape(ps, is_cp, cp, it);
    }
    size_t after;
    if (!rx_peek_cp(ps, cp, &after)) return false;
    ps->i = after;
    *is_cp = true;
    return true;
}

static int rx_parse_class(rx_parser *ps, bool icase)
{
    size_t at = ps->i - 1;
    tok_regex *re = ps->re;
    int si = rx_new_set(re);
    if (ps->i < ps->len && ps->p[ps->i] == '^') {
        re->sets[si].negate = true;
        ps->i++;
    }
    re->sets[si].icase = icase;
    bool first = true;
    for (;;) {
        if (ps->i >= ps->len) {
            rx_fail(ps, at, "%s", "unterminated character class");
            return -1;
        }
        if (ps->p[ps->i] == ']' && !first) {
            ps->i++;
            break;
        }
        first = false;
        bool is_cp;
        uint32_t lo;
        rx_item it;
        if (!rx_class_member(ps, &is_cp, &lo, &it)) return -1;
        if (!is_cp) {
            rx_add_item(re, it);
            continue;
        }
        uint32_t hi = lo;
        if (ps->i + 1 < ps->len && ps->p[ps->i] == '-' && ps->p[ps->i + 1] != ']') {
            ps->i++;
            size_t rat = ps->i;
            if (!rx_class_member(ps, &is_cp, &hi, &it)) return -1;
            if (!is_cp || hi < lo) {
                rx_fail(ps, rat, "%s", "bad range in character class");
                return -1;
            }
        }
        rx_add_item(re, (rx_item){.kind = RX_IT_RANGE, .lo = lo, .hi = hi});
    }
    rx_set_finish(re, &re->sets[si]);
    int n = rx_new_node(ps, RX_SET);
    if (n >= 0) re->nodes[n].set = si;
    return n;
}

static int rx_parse_alt(rx_parser *ps, bool icase);

/* After '(': the group's kind, then its body and ')'. */
static int rx_parse_group(rx_parser *ps, bool *icase_io, bool *inline_flag)
{
    size_t at = ps->i - 1;
    bool icase = *icase_io;
    rx_kind kind = RX_SEQ; /* plain group */
    bool negate = false;
    if (ps->i < ps->len && ps->p[ps->i] == '?') {
        ps->i++;
        char c = ps->i < ps->len ? ps->p[ps->i] : 0;
        if (c == ':') {
            ps->i++;
        } else if (c == '=' || c == '!') {
            kind = RX_LOOK;
            negate = c == '!';
            ps->i++;
        } else if (c == '>') {
            kind = RX_ATOMIC;
            ps->i++;
        } else if (c == '<' && ps->i + 1 < ps->len && (ps->p[ps->i + 1] == '=' || ps->p[ps->i + 1] == '!')) {
            rx_fail(ps, at, "%s", "lookbehind (?<= (?<! is not supported");
            return -1;
        } else if (c == '<' || c == 'P' || c == '\'') {
            /* named group: the name does not matter for splitting */
            char close = c == '\'' ? '\'' : '>';
            if (c == 'P') ps->i++;
            while (ps->i < ps->len && ps->p[ps->i] != close) ps->i++;
            if (ps->i >= ps->len) {
                rx_fail(ps, at, "%s", "unterminated group name");
                return -1;
            }
            ps->i++;
        } else {
            /* flags: (?i) (?-i) (?i: ) (?-i: ) */
            bool on = true, seen = false;
            while (ps->i < ps->len && ps->p[ps->i] != ':' && ps->p[ps->i] != ')') {
                char f = ps->p[ps->i++];
                if (f == '-') on = false;
                else if (f == 'i') icase = on, seen = true;
                else {
                    char what[2] = {f, 0};
                    rx_fail(ps, ps->i - 1, "unsupported group flag '%s' (only i is supported)", what);
                    return -1;
                }
            }
            if (ps->i >= ps->len || !seen) {
                rx_fail(ps, at, "%s", "unsupported group syntax");
                return -1;
            }
            if (ps->p[ps->i] == ')') { /* (?i): applies to the rest of the enclosing group */
                ps->i++;
                *icase_io = icase;
                *inline_flag = true;
                return rx_new_node(ps, RX_EMPTY);
            }
            ps->i++;
        }
    }
    int body = rx_parse_alt(ps, icase);
    if (body < 0) return -1;
    if (ps->i >= ps->len || ps->p[ps->i] != ')') {
        rx_fail(ps, at, "%s", "unbalanced parenthesis");
        return -1;
    }
    ps->i++;
    if (kind == RX_SEQ) return body;
    int n = rx_new_node(ps, kind);
    if (n >= 0) {
        ps->re->nodes[n].child = body;
        ps->re->nodes[n].negate = negate;
    }
    return n;
}

static bool rx_parse_uint(rx_parser *ps, uint32_t *v)
{
    size_t start = ps->i;
    uint64_t x = 0;
    while (ps->i < ps->len && ps->p[ps->i] >= '0' && ps->p[ps->i] <= '9') {
        x = x * 10 + (uint64_t)(ps->p[ps->i++] - '0');
        if (x > 100000) x = 100000;
    }
    *v = (uint32_t)x;
    return ps->i > start;
}

/* {n}, {n,}, {n,m}, {,m} at ps->i (after '{'); false (position restored)
 * when this is not a valid interval, which Oniguruma reads as a literal '{'. */
static bool rx_parse_interval(rx_parser *ps, uint32_t *min, uint32_t *max)
{
    size_t save = ps->i;
    uint32_t a = 0, b = 0;
    bool has_a = rx_parse_uint(ps, &a);
    if (ps->i < ps->len && ps->p[ps->i] == '}' && has_a) {
        ps->i++;
        *min = *max = a;
        return true;
    }
    if (ps->i < ps->len && ps->p[ps->i] == ',') {
        ps->i++;
        bool has_b = rx_parse_uint(ps, &b);
        if (ps->i < ps->len && ps->p[ps->i] == '}' && (has_a || has_b)) {
            ps->i++;
            *min = has_a ? a : 0;
            *max = has_b ? b : UINT32_MAX;
            if (*max >= *min) return true;
        }
    }
    ps->i = save;
    return false;
}

/* A quantifier after atom `a`, if any. */
static int rx_parse_quant(rx_parser *ps, int a)
{
    if (ps->i >= ps->len) return a;
    size_t at = ps->i;
    char c = ps->p[ps->i];
    uint32_t min, max;
    bool interval = false;
    if (c == '?') min = 0, max = 1;
    else if (c == '*') min = 0, max = UINT32_MAX;
    else if (c == '+') min = 1, max = UINT32_MAX;
    else if (c == '{') {
        ps->i++;
        if (!rx_parse_interval(ps, &min, &max)) {
            ps->i = at;
            return a;
        }
        interval = true;
        ps->i--; /* so that the common ++ below lands after '}' */
    } else return a;
    ps->i++;
    rx_mode mode = RX_GREEDY;
    if (ps->i < ps->len && ps->p[ps->i] == '?') {
        mode = RX_LAZY;
        ps->i++;
    } else if (ps->i < ps->len && ps->p[ps->i] == '+') {
        if (interval) {
            rx_fail(ps, ps->i, "%s", "'+' after an interval {n,m} is ambiguous; not supported");
            return -1;
        }
        mode = RX_POSSESSIVE;
        ps->i++;
    }
    if (ps->i < ps->len && (ps->p[ps->i] == '?' || ps->p[ps->i] == '*' || ps->p[ps->i] == '+')) {
        rx_fail(ps, ps->i, "%s", "nested quantifiers are not supported");
        return -1;
    }
    rx_kind k = ps->re->nodes[a].kind;
    bool single = k == RX_CHAR || k == RX_SET || k == RX_ANY;
    if (!single && max > 1) {
        rx_fail(ps, at, "%s",
                "repeating a group with * + or {n,m} is not supported (only ? on groups)");
        return -1;
    }
    if (max == 0) return rx_new_node(ps, RX_EMPTY);
    if (min == 1 && max == 1) return a;
    int n = rx_new_node(ps, RX_REP);
    if (n < 0) return -1;
    rx_node *r = &ps->re->nodes[n];
    r->child = a;
    r->min = min;
    r->max = max;
    r->mode = mode;
    return n;
}

/* One atom (and its quantifier), or -2 at the end of a sequence. */
static int rx_parse_atom(rx_parser *ps, bool *icase)
{
    size_t at = ps->i;
    char c = ps->p[ps->i];
    int a;
    if (c == '|' || c == ')') return -2;
    if (c == '(') {
        ps->i++;
        if (++ps->depth > RX_MAX_DEPTH) {
            rx_fail(ps, at, "%s", "groups nested too deeply");
            return -1;
        }
        bool inline_flag = false;
        a = rx_parse_group(ps, icase, &inline_flag);
        ps->depth--;
        if (inline_flag) return a; /* (?i) takes no quantifier */
    } else if (c == '[') {
        ps->i++;
        a = rx_parse_class(ps, *icase);
    } else if (c == '.') {
        ps->i++;
        a = rx_new_node(ps, RX_ANY);
    } else if (c == '^' || c == '$') {
        rx_fail(ps, at, "%s", "anchors ^ and $ are not supported");
        return -1;
    } else if (c == '*' || c == '+' || c == '?') {
        rx_fail(ps, at, "%s", "quantifier with nothing to repeat");
        return -1;
    } else {
        bool is_cp = true;
        uint32_t cp;
        rx_item it;
        if (c == '\\') {
            ps->i++;
            if (!rx_escape(ps, &is_cp, &cp, &it)) return -1;
        } else {
            size_t after;
            if (!rx_peek_cp(ps, &cp, &after)) return -1;
            ps->i = after;
        }
        if (is_cp) {
            a = rx_new_node(ps, RX_CHAR);
            if (a >= 0) {
                ps->re->nodes[a].icase = *icase;
                ps->re->nodes[a].ch = *icase ? uni_fold(cp) : cp;
            }
        } else {
            int si = rx_new_set(ps->re);
            rx_add_item(ps->re, it);
            ps->re->sets[si].icase = *icase;
            rx_set_finish(ps->re, &ps->re->sets[si]);
            a = rx_new_node(ps, RX_SET);
            if (a >= 0) ps->re->nodes[a].set = si;
        }
    }
    if (a < 0) return -1;
    return rx_parse_quant(ps, a);
}

static int rx_parse_seq(rx_parser *ps, bool icase)
{
    int list[RX_MAX_NODES];
    size_t n = 0;
    while (ps->i < ps->len) {
        int a = rx_parse_atom(ps, &icase);
        if (a == -2) break;
        if (a < 0) return -1;
        if (ps->re->nodes[a].kind == RX_EMPTY) continue;
        list[n++] = a;
    }
    if (n == 1) return list[0];
    int s = rx_new_node(ps, n ? RX_SEQ : RX_EMPTY);
    if (s < 0) return -1;
    ps->re->nodes[s].first = rx_put_kids(ps->re, list, n);
    ps->re->nodes[s].n = (int)n;
    return s;
}

static int rx_parse_alt(rx_parser *ps, bool icase)
{
    int list[RX_MAX_NODES];
    size_t n = 0;
    for (;;) {
        int s = rx_parse_seq(ps, icase);
        if (s < 0) return -1;
        list[n++] = s;
        if (ps->i < ps->len && ps->p[ps->i] == '|') {
            ps->i++;
            continue;
        }
        break;
    }
    if (n == 1) return list[0];
    int a = rx_new_node(ps, RX_ALT);
    if (a < 0) return -1;
    ps->re->nodes[a].first = rx_put_kids(ps->re, list, n);
    ps->re->nodes[a].n = (int)n;
    return a;
}

/* ---- first sets ---- */

static void first_union(rx_node *dst, const rx_node *src)
{
    for (int k = 0; k < 4; k++) dst->first_ascii[k] |= src->first_ascii[k];
    dst->first_nonascii |= src->first_nonascii;
}

/* Fills first_ascii / first_nonascii / nullable of node i and below. */
static void rx_first(tok_regex *re, int i)
{
    rx_node *n = &re->nodes[i];
    memset(n->first_ascii, 0, sizeof n->first_ascii);
    n->first_nonascii = n->nullable = false;
    switch (n->kind) {
    case RX_CHAR:
        for (uint32_t c = 0; c < 128; c++)
            if (c == n->ch || (n->icase && uni_fold(c) == n->ch)) n->first_ascii[c >> 5] |= 1u << (c & 31);
        n->first_nonascii = n->ch >= 128 || n->icase;
        break;
    case RX_SET:
        memcpy(n->first_ascii, re->sets[n->set].ascii, sizeof n->first_ascii);
        n->first_nonascii = true;
        break;
    case RX_ANY:
        memset(n->first_ascii, 0xFF, sizeof n->first_ascii);
        n->first_ascii['\n' >> 5] &= ~(1u << ('\n' & 31));
        n->first_nonascii = true;
        break;
    case RX_SEQ:
        for (int k = 0; k < n->n; k++) rx_first(re, re->kids[n->first + k]);
        n->nullable = true;
        for (int k = 0; k < n->n && n->nullable; k++) {
            const rx_node *c = &re->nodes[re->kids[n->first + k]];
            first_union(n, c);
            n->nullable = c->nullable;
        }
        break;
    case RX_ALT:
        for (int k = 0; k < n->n; k++) {
            int c = re->kids[n->first + k];
            rx_first(re, c);
            first_union(n, &re->nodes[c]);
            n->nullable |= re->nodes[c].nullable;
        }
        break;
    case RX_REP:
    case RX_ATOMIC:
        rx_first(re, n->child);
        first_union(n, &re->nodes[n->child]);
        n->nullable = re->nodes[n->child].nullable || (n->kind == RX_REP && n->min == 0);
        break;
    case RX_LOOK: /* consumes nothing: what follows decides */
        rx_first(re, n->child);
        n->nullable = true;
        break;
    case RX_EMPTY: n->nullable = true; break;
    }
}

/* Can node n match at a position holding cp (or at the end)? False only
 * when it certainly cannot. */
static bool rx_may_start(const rx_node *n, size_t pos, size_t end, uint32_t cp)
{
    if (n->nullable) return true;
    if (pos >= end) return false;
    if (cp < 128) return (n->first_ascii[cp >> 5] >> (cp & 31)) & 1u;
    return n->first_nonascii;
}

tok_regex *tok_regex_compile(const char *pattern, char *err, size_t errsz)
{
    tok_regex *re = xcalloc(1, sizeof *re);
    rx_parser ps = {.re = re, .p = pattern, .len = strlen(pattern), .err = err, .errsz = errsz};
    re->root = rx_parse_alt(&ps, false);
    if (!ps.failed && ps.i < ps.len) rx_fail(&ps, ps.i, "%s", "unbalanced parenthesis");
    if (ps.failed || re->root < 0) {
        if (!ps.failed) snprintf(err, errsz, "invalid pattern");
        tok_regex_free(re);
        return NULL;
    }
    rx_first(re, re->root);
    return re;
}

void tok_regex_free(tok_regex *re)
{
    if (!re) return;
    free(re->nodes);
    free(re->kids);
    free(re->sets);
    free(re->items);
    free(re);
}

/* ---- matching ---- */

/* "Then match children idx.. of sequence `seq`, then `next`." */
typedef struct rx_frame {
    int seq, idx;
    const struct rx_frame *next;
} rx_frame;

typedef struct rx_run {
    const tok_regex *re;
    const uint32_t *cp;
    const uint8_t *cat;
    size_t end;
    size_t steps, budget;
    bool over;
    size_t mend;
} rx_run;

static bool rx_m(rx_run *r, int node, size_t pos, const rx_frame *k);

static bool rx_cont(rx_run *r, size_t pos, const rx_frame *k)
{
    for (; k; k = k->next) {
        const rx_node *s = &r->re->nodes[k->seq];
        if (k->idx < s->n) {
            rx_frame f = {k->seq, k->idx + 1, k->next};
            return rx_m(r, r->re->kids[s->first + k->idx], pos, &f);
        }
    }
    r->mend = pos;
    return true;
}

/* Matches `node` alone at pos; *end receives where it stopped. */
static bool rx_sub(rx_run *r, int node, size_t pos, size_t *end)
{
    size_t save = r->mend;
    bool ok = rx_m(r, node, pos, NULL);
    *end = r->mend;
    r->mend = save;
    return ok;
}

static bool rx_rep_single(rx_run *r, const rx_node *n, size_t pos, const rx_frame *k)
{
    const rx_node *c = &r->re->nodes[n->child];
    size_t cnt = 0;
    while (cnt < n->max && pos + cnt < r->end &&
           rx_single(r->re, c, r->cp[pos + cnt], r->cat[pos + cnt]))
        cnt++;
    if (cnt < n->min) return false;
    if (n->mode == RX_POSSESSIVE) return rx_cont(r, pos + cnt, k);
    if (n->mode == RX_LAZY) {
        for (size_t i = n->min; i <= cnt; i++) {
            if (rx_cont(r, pos + i, k)) return true;
            if (r->over) return false;
        }
        return false;
    }
    for (size_t i = cnt + 1; i-- > n->min;) {
        if (rx_cont(r, pos + i, k)) return true;
        if (r->over) return false;
    }
    return false;
}

/* A group with ? (max 1). */
static bool rx_rep_group(rx_run *r, const rx_node *n, size_t pos, const rx_frame *k)
{
    if (n->mode == RX_POSSESSIVE) {
        size_t e;
        if (rx_sub(r, n->child, pos, &e)) return rx_cont(r, e, k);
        return !r->over && rx_cont(r, pos, k);
    }
    if (n->mode == RX_LAZY) {
        if (rx_cont(r, pos, k)) return true;
        return !r->over && n->min == 0 && rx_m(r, n->child, pos, k);
    }
    if (rx_m(r, n->child, pos, k)) return true;
    return !r->over && n->min == 0 && rx_cont(r, pos, k);
}

static bool rx_m(rx_run *r, int node, size_t pos, const rx_frame *k)
{
    if (r->over || ++r->steps > r->budget) {
        r->over = true;
        return false;
    }
    const rx_node *n = &r->re->nodes[node];
    switch (n->kind) {
    case RX_CHAR:
    case RX_SET:
    case RX_ANY:
        if (pos < r->end && rx_single(r->re, n, r->cp[pos], r->cat[pos])) return rx_cont(r, pos + 1, k);
        return false;
    case RX_EMPTY: return rx_cont(r, pos, k);
    case RX_SEQ: {
        rx_frame f = {node, 1, k};
        return rx_m(r, r->re->kids[n->first], pos, &f);
    }
    case RX_ALT: {
        uint32_t cp = pos < r->end ? r->cp[pos] : 0;
        for (int i = 0; i < n->n; i++) {
            int c = r->re->kids[n->first + i];
            if (!rx_may_start(&r->re->nodes[c], pos, r->end, cp)) continue;
            if (rx_m(r, c, pos, k)) return true;
            if (r->over) return false;
        }
        return false;
    }
    case RX_REP: {
        rx_kind ck = r->re->nodes[n->child].kind;
        if (ck == RX_CHAR || ck == RX_SET || ck == RX_ANY) return rx_rep_single(r, n, pos, k);
        return rx_rep_group(r, n, pos, k);
    }
    case RX_LOOK: {
        size_t e;
        bool found = rx_sub(r, n->child, pos, &e);
        if (r->over) return false;
        return found != n->negate && rx_cont(r, pos, k);
    }
    case RX_ATOMIC: {
        size_t e;
        if (!rx_sub(r, n->child, pos, &e)) return false;
        return rx_cont(r, e, k);
    }
    }
    return false;
}

int tok_regex_find(const tok_regex *re, const tok_cps *t, size_t from, size_t end, size_t *ms,
                   size_t *me)
{
    rx_run r = {.re = re, .cp = t->cp, .cat = t->cat, .end = end};
    r.budget = 100000 + 64 * (end - from);
    const rx_node *root = &re->nodes[re->root];
    for (size_t s = from; s < end; s++) {
        if (!rx_may_start(root, s, end, t->cp[s])) continue;
        if (rx_m(&r, re->root, s, NULL) && r.mend > s) {
            *ms = s;
            *me = r.mend;
            return 1;
        }
        if (r.over) return -1;
    }
    return 0;
}

/* ---- prepared text ---- */

void tok_cps_fill(tok_cps *t, const char *s, size_t len)
{
    if (len + 1 > t->cap) {
        t->cap = len + 1 > 2 * t->cap ? len + 1 : 2 * t->cap;
        t->cp = xrealloc(t->cp, t->cap * sizeof *t->cp);
        t->cat = xrealloc(t->cat, t->cap);
        t->off = xrealloc(t->off, t->cap * sizeof *t->off);
    }
    if (!t->ascii_ready) {
        for (uint32_t c = 0; c < 128; c++)
            t->ascii_cat[c] = (uint8_t)(uni_category(c) | (uni_is_white_space(c) ? 0x80 : 0));
        t->ascii_ready = true;
    }
    size_t i = 0, n = 0;
    while (i < len) {
        unsigned char b = (unsigned char)s[i];
        t->off[n] = i;
        if (b < 0x80) {
            t->cp[n] = b;
            t->cat[n] = t->ascii_cat[b];
            i++;
        } else {
            uint32_t cp = 0xFFFD;
            if (!uni_next(s, len, &i, &cp)) i++; /* callers pass valid UTF-8 */
            t->cp[n] = cp;
            t->cat[n] = (uint8_t)(uni_category(cp) | (uni_is_white_space(cp) ? 0x80 : 0));
        }
        n++;
    }
    t->off[n] = len;
    t->n = n;
}

void tok_cps_free(tok_cps *t)
{
    free(t->cp);
    free(t->cat);
    free(t->off);
    memset(t, 0, sizeof *t);
}
