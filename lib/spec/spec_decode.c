/* spec_decode.c: the one mechanism that turns YAML nodes into struct fields.
 *
 * Every object is described by a constant table (spec_schema): for each key
 * its kind (string, integer, duration, enum, nested mapping, ...), where the
 * value goes (an offset into the target struct), its range or enum, and
 * where to record its position. spec_decode_map walks a mapping against
 * such a table and reports, with file:line:col and the field path:
 *   - unknown keys, with "did you mean" from str_suggest;
 *   - wrong kinds (a list where a number belongs, ...);
 *   - text that does not parse (a duration that is not one, a size, ...);
 *   - values out of range, with the range and a hint;
 *   - required fields that are missing.
 * It never stops at the first problem: every error of a file is reported.
 *
 * Values are interpreted by the field's type, so quotes never matter:
 * `cpu: "4"` and `cpu: 4` are the same, as Kubernetes users write them.
 */
#include "spec_internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(spec_method) == sizeof(int), "enums are stored through int");
_Static_assert(sizeof(long) == sizeof(int64_t), "SF_LONG holds an int64");

#define SLOT(type) ((type *)(void *)((char *)base + f->off))
#define SLOT_N() ((size_t *)(void *)((char *)base + f->off_n))

/* ---- context, paths and reports ---- */
void spec_dctx_init(spec_dctx *c, const char *file, diag_list *d)
{
    memset(c, 0, sizeof *c);
    c->file = file;
    c->d = d;
    sb_init(&c->path);
}

void spec_dctx_free(spec_dctx *c)
{
    sb_free(&c->path);
    free(c->bad);
    c->bad = NULL;
    c->n_bad = c->cap_bad = 0;
}

static size_t bad_slot(const spec_ynode *const *set, size_t cap, const spec_ynode *n)
{
    size_t i = (size_t)(((uintptr_t)n >> 4) * 11400714819323198485ULL) & (cap - 1);
    while (set[i] && set[i] != n) i = (i + 1) & (cap - 1);
    return i;
}

bool spec_dctx_bad(const spec_dctx *c, const spec_ynode *n)
{
    return n && c->cap_bad && c->bad[bad_slot(c->bad, c->cap_bad, n)] == n;
}

static void mark_bad(spec_dctx *c, const spec_ynode *n)
{
    if ((c->n_bad + 1) * 2 > c->cap_bad) {
        size_t cap = c->cap_bad ? c->cap_bad * 2 : 64;
        const spec_ynode **set = xcalloc(cap, sizeof *set);
        for (size_t i = 0; i < c->cap_bad; i++)
            if (c->bad[i]) set[bad_slot(set, cap, c->bad[i])] = c->bad[i];
        free(c->bad);
        c->bad = set;
        c->cap_bad = cap;
    }
    size_t i = bad_slot(c->bad, c->cap_bad, n);
    if (!c->bad[i]) {
        c->bad[i] = n;
        c->n_bad++;
    }
}

size_t spec_path_push(spec_dctx *c, const char *key)
{
    size_t old = c->path.len;
    if (c->path.len) sb_putc(&c->path, '.');
    sb_puts(&c->path, key);
    return old;
}

size_t spec_path_push_index(spec_dctx *c, size_t i)
{
    size_t old = c->path.len;
    sb_printf(&c->path, "[%zu]", i);
    return old;
}

void spec_path_pop(spec_dctx *c, size_t old_len)
{
    if (old_len < c->path.len) {
        c->path.len = old_len;
        c->path.buf[old_len] = '\0';
    }
}

diag *spec_report(spec_dctx *c, diag_level level, const spec_ynode *n, const char *fmt, ...)
{
    sb msg;
    sb_init(&msg);
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(&msg, fmt, ap);
    va_end(ap);
    diag *x = diag_add(c->d, level, c->file, n ? n->line : 0, n ? n->col : 0,
                       c->path.len ? sb_str(&c->path) : NULL, sb_str(&msg));
    sb_free(&msg);
    return x;
}

/* ---- scalar parsers ---- */
bool spec_parse_i64(const char *s, int64_t *out)
{
    const char *p = s;
    if (*p == '+' || *p == '-') p++;
    if (!isdigit((unsigned char)*p)) return false;
    for (const char *q = p; *q; q++)
        if (!isdigit((unsigned char)*q)) return false;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE || *end) return false;
    *out = (int64_t)v;
    return true;
}

bool spec_parse_double(const char *s, double *out)
{
    const char *p = s;
    if (*p == '+' || *p == '-') p++;
    if (!isdigit((unsigned char)*p) && !(*p == '.' && isdigit((unsigned char)p[1]))) return false;
    for (const char *q = p; *q; q++) /* plain decimals only: no hex, inf or nan */
        if (!isdigit((unsigned char)*q) && *q != '.' && *q != 'e' && *q != 'E' && *q != '+' &&
            *q != '-')
            return false;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (*end || errno == ERANGE || !isfinite(v)) return false;
    *out = v;
    return true;
}

static bool parse_bool(const char *s, bool *out)
{
    if (str_ieq(s, "true")) *out = true;
    else if (str_ieq(s, "false")) *out = false;
    else return false;
    return true;
}

/* ---- DNS-1123 labels ---- */
bool spec_dns_label(const char *s, char *fixed, size_t fixedsz)
{
    size_t n = strlen(s);
    bool ok = n >= 1 && n <= 63 && isalnum((unsigned char)s[0]) &&
              isalnum((unsigned char)s[n - 1]);
    for (size_t i = 0; ok && i < n; i++)
        ok = islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '-';
    if (ok || !fixed || fixedsz == 0) return ok;
    /* lowercase, other characters become '-', no runs of '-', trimmed */
    size_t o = 0, cap = fixedsz - 1 < 63 ? fixedsz - 1 : 63;
    for (size_t i = 0; i < n && o < cap; i++) {
        unsigned char ch = (unsigned char)s[i];
        char w = isalnum(ch) && ch < 0x80 ? (char)tolower(ch) : '-';
        if (w == '-' && (o == 0 || fixed[o - 1] == '-')) continue;
        fixed[o++] = w;
    }
    while (o && fixed[o - 1] == '-') o--;
    fixed[o] = '\0';
    return false;
}

/* ---- what a field expects, in words ---- */
static void range_text(const spec_field *f, bool integer, sb *out)
{
    bool lo = f->flags & SF_MIN, hi = f->flags & SF_MAX;
    bool units = f->type == SF_DURATION || f->type == SF_BYTES || f->type == SF_COUNT ||
                 f->type == SF_CPU;
    if (units && !hi && f->min == 0) return; /* "> 0" goes without saying for sizes */
    bool lox = f->flags & SF_MIN_EXCL, hix = f->flags & SF_MAX_EXCL;
    if (lo && hi && integer && !lox && !hix)
        sb_printf(out, " from %.15g to %.15g", f->min, f->max);
    else if (lo && hi)
        sb_printf(out, " in %c%.15g, %.15g%c", lox ? '(' : '[', f->min, f->max, hix ? ')' : ']');
    else if (lo)
        sb_printf(out, " %s %.15g", lox ? ">" : ">=", f->min);
    else if (hi)
        sb_printf(out, " %s %.15g", hix ? "<" : "<=", f->max);
}

static void expected_text(const spec_field *f, sb *out)
{
    switch (f->type) {
    case SF_STR:
        sb_puts(out, f->flags & SF_DNS ? "a DNS-1123 name: lowercase letters, digits and '-', "
                                         "starting and ending with a letter or digit, at most 63"
                                       : "a text");
        break;
    case SF_INT:
    case SF_LONG:
    case SF_I64:
    case SF_U64:
        sb_puts(out, "an integer");
        range_text(f, true, out);
        break;
    case SF_DOUBLE:
        sb_puts(out, "a number");
        range_text(f, false, out);
        break;
    case SF_BOOL: sb_puts(out, "true or false"); break;
    case SF_ENUM:
    case SF_ENUM_STR:
        sb_puts(out, "one of ");
        spec_enum_list(f->enm, out);
        break;
    case SF_TOGGLE: sb_puts(out, "true, false or auto"); break;
    case SF_DURATION:
        sb_puts(out, "a duration such as 8h, 90m, 1h30m or PT8H");
        range_text(f, false, out);
        break;
    case SF_BYTES:
        sb_puts(out, "a size such as 32Gi, 28GB or 512Mi");
        range_text(f, false, out);
        break;
    case SF_COUNT:
        sb_puts(out, "a count such as 7B, 500M or 50000");
        range_text(f, false, out);
        break;
    case SF_CPU:
        sb_puts(out, "CPU cores such as 4, \"4\", 1.5 or 500m");
        range_text(f, false, out);
        break;
    case SF_STRLIST: sb_puts(out, "a list of names"); break;
    case SF_KV: sb_puts(out, "a mapping of names to values"); break;
    case SF_OBJ: sb_puts(out, "a mapping"); break;
    case SF_LIST: sb_puts(out, "a list of mappings"); break;
    case SF_CUSTOM:
    case SF_IGNORE: sb_puts(out, "a value"); break;
    }
}

void spec_field_expected(const spec_field *f, sb *out)
{
    expected_text(f, out);
}

/* An error at v: message, expected (from the field), found (v). */
static diag *field_error(spec_dctx *c, const spec_field *f, const spec_ynode *v, const char *msg)
{
    diag *x = spec_report(c, DIAG_ERROR, v, "%s", msg);
    sb e;
    sb_init(&e);
    expected_text(f, &e);
    diag_set_expected(x, "%s", sb_str(&e));
    sb_free(&e);
    char found[64];
    spec_ydescribe(v, found, sizeof found);
    diag_set_found(x, "%s", found);
    return x;
}

static bool in_range(const spec_field *f, double v)
{
    if (f->flags & SF_MIN) {
        if (f->flags & SF_MIN_EXCL ? !(v > f->min) : !(v >= f->min)) return false;
    }
    if (f->flags & SF_MAX) {
        if (f->flags & SF_MAX_EXCL ? !(v < f->max) : !(v <= f->max)) return false;
    }
    return true;
}

static bool check_range(spec_dctx *c, const spec_field *f, const spec_ynode *v, double x)
{
    if (in_range(f, x)) return true;
    diag *d = field_error(c, f, v, "out of range");
    if (f->hint) diag_set_suggestion(d, "%s", f->hint);
    return false;
}

/* The scalar text of v, or NULL after reporting a wrong kind. */
static const char *scalar_text(spec_dctx *c, const spec_field *f, const spec_ynode *v)
{
    if (v->kind == SPEC_YSCALAR) return v->text;
    diag *x = field_error(c, f, v, "wrong type");
    if (v->kind == SPEC_YSEQ && f->type != SF_OBJ)
        diag_set_suggestion(x, "write a single value, not a list");
    return NULL;
}

/* ---- one value per type ---- */
static bool decode_string(spec_dctx *c, const spec_field *f, const spec_ynode *v, void *base)
{
    const char *s = scalar_text(c, f, v);
    if (!s) return false;
    if (!*s && !(f->flags & SF_EMPTY_OK)) {
        field_error(c, f, v, "must not be empty");
        return false;
    }
    char fixed[64];
    if ((f->flags & SF_DNS) && !spec_dns_label(s, fixed, sizeof fixed)) {
        diag *x = field_error(c, f, v, "not a valid name");
        if (fixed[0]) diag_set_suggestion(x, "use \"%s\"", fixed);
        return false;
    }
    free(*SLOT(char *));
    *SLOT(char *) = xstrdup(s);
    return true;
}

/* Integers; with SF_UNITS also counts such as 50K. */
static bool decode_integer(spec_dctx *c, const spec_field *f, const spec_ynode *v, void *base)
{
    const char *s = scalar_text(c, f, v);
    if (!s) return false;
    int64_t x;
    double dx;
    if (!spec_parse_i64(s, &x)) {
        bool counted = (f->flags & SF_UNITS) && units_parse_count(s, &dx) && dx == floor(dx) &&
                       dx < 9.2e18;
        if (!counted) {
            bool num = spec_parse_double(s, &dx);
            diag *d = field_error(c, f, v, num ? "not a whole number" : "not an integer");
            if (num && dx < 0) diag_set_suggestion(d, "write a count of 0 or more");
            return false;
        }
        x = (int64_t)dx;
    }
    /* int64 fits long and uint64 (from 0); int needs its own bounds */
    if ((f->type == SF_INT && (x < INT32_MIN || x > INT32_MAX)) || (f->type == SF_U64 && x < 0)) {
        field_error(c, f, v, x < 0 ? "out of range" : "too large");
        return false;
    }
    if (!check_range(c, f, v, (double)x)) return false;
    switch (f->type) {
    case SF_INT: *SLOT(int) = (int)x; break;
    case SF_LONG: *SLOT(long) = (long)x; break;
    case SF_I64: *SLOT(int64_t) = x; break;
    default: *SLOT(uint64_t) = (uint64_t)x; break;
    }
    return true;
}

/* Numbers, durations, sizes, counts and CPU cores: all land in a double. */
static bool decode_real(spec_dctx *c, const spec_field *f, const spec_ynode *v, void *base)
{
    const char *s = scalar_text(c, f, v);
    if (!s) return false;
    double x = 0;
    bool ok;
    const char *what;
    switch (f->type) {
    case SF_DURATION: ok = units_parse_duration(s, &x), what = "not a duration"; break;
    case SF_BYTES: ok = units_parse_bytes(s, &x), what = "not a size"; break;
    case SF_COUNT: ok = units_parse_count(s, &x), what = "not a count"; break;
    case SF_CPU: {
        size_t n = strlen(s);
        if (n > 1 && s[n - 1] == 'm') { /* millicores, as Kubernetes writes them */
            char *num = xstrndup(s, n - 1);
            ok = spec_parse_double(num, &x);
            x /= 1000;
            free(num);
        } else {
            ok = spec_parse_double(s, &x);
        }
        what = "not a CPU quantity";
        break;
    }
    default: ok = spec_parse_double(s, &x), what = "not a number"; break;
    }
    if (!ok) {
        diag *d = field_error(c, f, v, what);
        double n;
        if (s[0] == '-' || (spec_parse_double(s, &n) && n < 0))
            diag_set_suggestion(d, "negative values make no sense here");
        else if (f->type == SF_DURATION)
            diag_set_suggestion(d, "write a number with a unit (d, h, m, s) such as 8h or "
                                   "1h30m, or ISO 8601 such as PT8H");
        else if (f->type == SF_BYTES)
            diag_set_suggestion(d, "write a number with a unit: Ki Mi Gi Ti (powers of "
                                   "1024) or K M G T (powers of 1000), such as 32Gi or 28GB");
        return false;
    }
    if (!check_range(c, f, v, x)) return false;
    *SLOT(double) = x;
    return true;
}

static bool decode_bool(spec_dctx *c, const spec_field *f, const spec_ynode *v, void *base)
{
    const char *s = scalar_text(c, f, v);
    if (!s) return false;
    bool b;
    if (f->type == SF_TOGGLE && str_ieq(s, "auto")) {
        *SLOT(int) = TOGGLE_AUTO;
        return true;
    }
    if (!parse_bool(s, &b)) {
        diag *x = field_error(c, f, v, "not true or false");
        if (str_ieq(s, "yes") || str_ieq(s, "on")) diag_set_suggestion(x, "write true");
        else if (str_ieq(s, "no") || str_ieq(s, "off")) diag_set_suggestion(x, "write false");
        return false;
    }
    if (f->type == SF_TOGGLE) *SLOT(int) = b ? TOGGLE_ON : TOGGLE_OFF;
    else *SLOT(bool) = b;
    return true;
}

static bool decode_enum(spec_dctx *c, const spec_field *f, const spec_ynode *v, void *base)
{
    const char *s = scalar_text(c, f, v);
    if (!s) return false;
    int x;
    if (!spec_enum_lookup(f->enm, s, &x)) {
        diag *d = field_error(c, f, v, "unknown value");
        const char *sug = spec_enum_suggest(f->enm, s);
        if (sug) diag_set_suggestion(d, "did you mean %s?", sug);
        return false;
    }
    if (f->type == SF_ENUM) {
        *SLOT(int) = x;
    } else {
        free(*SLOT(char *));
        *SLOT(char *) = xstrdup(spec_enum_name(f->enm, x));
    }
    return true;
}

/* A list of names; a single name is a list of one. */
static bool decode_strlist(spec_dctx *c, const spec_field *f, const spec_ynode *v, void *base)
{
    if (v->kind == SPEC_YMAP) {
        field_error(c, f, v, "wrong type");
        return false;
    }
    size_t n = v->kind == SPEC_YSEQ ? v->n_items : 1;
    char **list = xcalloc(n, sizeof *list);
    spec_pos *pos = xcalloc(n, sizeof *pos);
    bool ok = true;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const spec_ynode *it = v->kind == SPEC_YSEQ ? v->items[i] : v;
        size_t old = v->kind == SPEC_YSEQ ? spec_path_push_index(c, i) : c->path.len;
        if (it->kind != SPEC_YSCALAR || it->null || !it->text[0]) {
            diag *x = field_error(c, f, it, "each entry must be a name");
            diag_set_suggestion(x, "write the names as a list of strings");
            ok = false;
        } else {
            list[k] = xstrdup(it->text);
            pos[k++] = (spec_pos){it->line, it->col};
        }
        spec_path_pop(c, old);
    }
    if (!ok) {
        str_list_free(list, k);
        free(pos);
        return false;
    }
    str_list_free(*SLOT(char **), *SLOT_N());
    *SLOT(char **) = list;
    *SLOT_N() = k;
    if (f->flags & SF_POS) {
        spec_pos **slot = (spec_pos **)(void *)((char *)base + f->off_pos);
        free(*slot);
        *slot = pos;
    } else {
        free(pos);
    }
    return true;
}

/* Appends to a list allocated for every entry up front (decode_kv). */
static void kv_append(spec_kv **kv, size_t *n, const char *k, const char *v)
{
    (*kv)[*n].key = xstrdup(k);
    (*kv)[*n].value = xstrdup(v);
    (*n)++;
}

/* One {name: X, value: Y} entry of an environment-style list. */
static bool kv_list_entry(spec_dctx *c, const spec_field *f, const spec_ynode *it, spec_kv **kv,
                          size_t *n)
{
    static const char *const keys[] = {"name", "value"};
    if (it->kind != SPEC_YMAP) {
        diag *x = field_error(c, f, it, "each entry must be a mapping {name, value}");
        diag_set_suggestion(x, "write `- name: KEY` and `value: VALUE`");
        return false;
    }
    bool ok = true;
    for (size_t i = 0; i + 1 < it->n_items; i += 2) {
        const spec_ynode *k = it->items[i];
        if (k->kind != SPEC_YSCALAR || strcmp(k->text, "name") == 0 ||
            strcmp(k->text, "value") == 0)
            continue;
        size_t old = spec_path_push(c, k->text);
        diag *x = spec_report(c, DIAG_ERROR, k, "unknown field \"%s\"", k->text);
        const char *s = str_suggest(k->text, keys, 2);
        if (s) diag_set_suggestion(x, "did you mean %s?", s);
        else diag_set_suggestion(x, "an entry has only a name and a value");
        spec_path_pop(c, old);
        ok = false;
    }
    const spec_ynode *name = spec_ymap_get(it, "name"), *value = spec_ymap_get(it, "value");
    if (spec_yabsent(name) || name->kind != SPEC_YSCALAR || (value && value->kind != SPEC_YSCALAR)) {
        diag *x = field_error(c, f, it, "each entry needs a name and a text value");
        diag_set_suggestion(x, "write `- name: KEY` and `value: VALUE`");
        return false;
    }
    if (ok) kv_append(kv, n, name->text, spec_yabsent(value) ? "" : value->text);
    return ok;
}

/* A mapping of names to scalar values, or a list of {name, value}. */
static bool decode_kv(spec_dctx *c, const spec_field *f, const spec_ynode *v, void *base)
{
    spec_kv *kv = xcalloc(v->n_items + 1, sizeof *kv);
    size_t n = 0;
    bool ok = true;
    if (v->kind == SPEC_YMAP) {
        for (size_t i = 0; i + 1 < v->n_items; i += 2) {
            const spec_ynode *k = v->items[i], *val = v->items[i + 1];
            if (k->kind != SPEC_YSCALAR) continue;
            size_t old = spec_path_push(c, k->text);
            if (val->kind != SPEC_YSCALAR) {
                diag *x = field_error(c, f, val, "a value must be a text");
                diag_set_suggestion(x, "write `%s: VALUE`", k->text);
                ok = false;
            } else {
                kv_append(&kv, &n, k->text, val->null ? "" : val->text);
            }
            spec_path_pop(c, old);
        }
    } else if (v->kind == SPEC_YSEQ) {
        for (size_t i = 0; i < v->n_items; i++) {
            size_t old = spec_path_push_index(c, i);
            ok &= kv_list_entry(c, f, v->items[i], &kv, &n);
            spec_path_pop(c, old);
        }
    } else {
        field_error(c, f, v, "wrong type");
        free(kv);
        return false;
    }
    if (!ok || n == 0) { /* an empty list is NULL, as when absent */
        spec_kv_free(kv, n);
        kv = NULL;
    }
    if (!ok) return false;
    spec_kv_free(*SLOT(spec_kv *), *SLOT_N());
    *SLOT(spec_kv *) = kv;
    *SLOT_N() = n;
    return true;
}

/* A list of mappings, each decoded by f->sub into a new element. */
static bool decode_list(spec_dctx *c, const spec_field *f, const spec_ynode *v, void *base)
{
    if (v->kind != SPEC_YSEQ) {
        field_error(c, f, v, "wrong type");
        return false;
    }
    size_t before = c->d->errors;
    const spec_schema *s = f->sub;
    char *elems = xcalloc(v->n_items ? v->n_items : 1, s->elem_size);
    for (size_t i = 0; i < v->n_items; i++) {
        char *e = elems + i * s->elem_size;
        if (s->init) s->init(e);
        size_t old = spec_path_push_index(c, i);
        spec_decode_map(c, v->items[i], v->items[i], s, e);
        if (s->after && v->items[i]->kind == SPEC_YMAP) s->after(c, v->items[i], e);
        spec_path_pop(c, old);
    }
    *SLOT(void *) = elems;
    *SLOT_N() = v->n_items;
    return c->d->errors == before;
}

static bool decode_value(spec_dctx *c, const spec_field *f, const spec_ynode *key,
                         const spec_ynode *v, void *base)
{
    if ((f->flags & SF_POS) && f->type != SF_STRLIST) {
        spec_pos *p = (spec_pos *)(void *)((char *)base + f->off_pos);
        *p = (spec_pos){v->line, v->col};
    }
    switch (f->type) {
    case SF_STR: return decode_string(c, f, v, base);
    case SF_INT:
    case SF_LONG:
    case SF_I64:
    case SF_U64: return decode_integer(c, f, v, base);
    case SF_DOUBLE:
    case SF_DURATION:
    case SF_BYTES:
    case SF_COUNT:
    case SF_CPU: return decode_real(c, f, v, base);
    case SF_BOOL:
    case SF_TOGGLE: return decode_bool(c, f, v, base);
    case SF_ENUM:
    case SF_ENUM_STR: return decode_enum(c, f, v, base);
    case SF_STRLIST: return decode_strlist(c, f, v, base);
    case SF_KV: return decode_kv(c, f, v, base);
    case SF_OBJ: {
        size_t before = c->d->errors, bad_before = c->n_bad;
        spec_decode_map(c, v, key ? key : v, f->sub, base);
        return c->d->errors == before && c->n_bad == bad_before;
    }
    case SF_LIST: {
        size_t bad_before = c->n_bad;
        return decode_list(c, f, v, base) && c->n_bad == bad_before;
    }
    case SF_CUSTOM: {
        size_t before = c->d->errors, bad_before = c->n_bad;
        f->fn(c, f, v, base);
        return c->d->errors == before && c->n_bad == bad_before;
    }
    case SF_IGNORE: return true;
    }
    return false;
}

/* Decodes one value and remembers it when it failed. */
static bool decode_field_at(spec_dctx *c, const spec_field *f, const spec_ynode *key,
                            const spec_ynode *v, void *base)
{
    bool ok = !v->invalid && decode_value(c, f, key, v, base);
    if (!ok) mark_bad(c, v);
    return ok;
}

bool spec_decode_field(spec_dctx *c, const spec_field *f, const spec_ynode *v, void *base)
{
    return decode_field_at(c, f, NULL, v, base);
}

/* ---- mappings ---- */
static const spec_field *schema_field(const spec_schema *s, const char *key)
{
    for (size_t i = 0; i < s->n_fields; i++)
        if (strcmp(s->fields[i].key, key) == 0) return &s->fields[i];
    return NULL;
}

static void unknown_key(spec_dctx *c, const spec_schema *s, const spec_ynode *k)
{
    const char *names[64];
    size_t n = 0;
    for (size_t i = 0; i < s->n_fields && n < 64; i++) names[n++] = s->fields[i].key;
    diag *x = spec_report(c, DIAG_ERROR, k, "unknown field \"%s\"", k->text);
    const char *sug = str_suggest(k->text, names, n);
    if (sug) {
        diag_set_suggestion(x, "did you mean %s?", sug);
        return;
    }
    sb list;
    sb_init(&list);
    for (size_t i = 0; i < n; i++) sb_printf(&list, "%s%s", i ? ", " : "", names[i]);
    diag_set_suggestion(x, "the fields here are %s", sb_str(&list));
    sb_free(&list);
}

/* A required field absent from a mapping (reported at `at`, the mapping's
 * key) or written without a value (`empty`: the path already names it). */
static void missing_field(spec_dctx *c, const spec_field *f, const spec_ynode *at, bool empty)
{
    size_t old = empty ? c->path.len : spec_path_push(c, f->key);
    diag *x = spec_report(c, DIAG_ERROR, at, empty ? "a required field has no value"
                                                   : "missing required field %s", f->key);
    sb e;
    sb_init(&e);
    expected_text(f, &e);
    diag_set_expected(x, "%s", sb_str(&e));
    diag_set_suggestion(x, "add `%s:` here", f->key);
    sb_free(&e);
    spec_path_pop(c, old);
}

void spec_decode_map(spec_dctx *c, const spec_ynode *m, const spec_ynode *key_at,
                     const spec_schema *s, void *base)
{
    if (m->kind != SPEC_YMAP) {
        diag *x = spec_report(c, DIAG_ERROR, m, "wrong type");
        char found[64];
        spec_ydescribe(m, found, sizeof found);
        diag_set_expected(x, "a mapping with fields such as %s", s->fields[0].key);
        diag_set_found(x, "%s", found);
        return;
    }
    unsigned char *seen = xcalloc(s->n_fields ? s->n_fields : 1, 1);
    for (size_t i = 0; i + 1 < m->n_items; i += 2) {
        const spec_ynode *k = m->items[i], *v = m->items[i + 1];
        if (k->kind != SPEC_YSCALAR) continue; /* reported by the YAML layer */
        const spec_field *f = schema_field(s, k->text);
        size_t old = spec_path_push(c, k->text);
        if (!f) {
            unknown_key(c, s, k);
        } else if (seen[f - s->fields]) {
            /* a duplicate key, reported by the YAML layer: decode it once */
        } else if (spec_yabsent(v)) {
            if (f->flags & SF_REQUIRED) missing_field(c, f, k, true);
            seen[f - s->fields] = 1; /* "key:" with no value counts as absent */
        } else {
            seen[f - s->fields] = 1;
            decode_field_at(c, f, k, v, base);
        }
        spec_path_pop(c, old);
    }
    for (size_t i = 0; i < s->n_fields; i++)
        if ((s->fields[i].flags & SF_REQUIRED) && !seen[i])
            missing_field(c, &s->fields[i], key_at ? key_at : m, false);
    free(seen);
}

/* ---- schema queries (matrix paths) ---- */
static void leaves(const spec_schema *s, sb *prefix, char ***out, size_t *n, size_t *cap)
{
    for (size_t i = 0; i < s->n_fields; i++) {
        const spec_field *f = &s->fields[i];
        if (f->type == SF_IGNORE) continue;
        size_t old = prefix->len;
        if (prefix->len) sb_putc(prefix, '.');
        sb_puts(prefix, f->key);
        if (f->type == SF_OBJ) {
            leaves(f->sub, prefix, out, n, cap);
        } else {
            if (*n == *cap) *out = xrealloc(*out, (*cap = *cap ? *cap * 2 : 32) * sizeof **out);
            (*out)[(*n)++] = xstrdup(sb_str(prefix));
        }
        prefix->len = old;
        if (prefix->buf) prefix->buf[old] = '\0';
    }
}

size_t spec_schema_leaves(const spec_schema *s, char ***out)
{
    sb prefix;
    sb_init(&prefix);
    size_t n = 0, cap = 0;
    *out = NULL;
    leaves(s, &prefix, out, &n, &cap);
    sb_free(&prefix);
    return n;
}

const spec_field *spec_schema_find(const spec_schema *s, const char *dotted, bool *is_obj)
{
    char **segs;
    size_t n = str_split(dotted, '.', &segs);
    const spec_field *f = NULL;
    bool ok = n > 0 && dotted[0] != '.' && dotted[strlen(dotted) - 1] != '.' &&
              !strstr(dotted, "..") && !strpbrk(dotted, " \t");
    for (size_t i = 0; ok && i < n; i++) {
        f = schema_field(s, segs[i]);
        if (!f || f->type == SF_IGNORE) ok = false;
        else if (f->type == SF_OBJ) s = f->sub;
        else if (i + 1 < n) ok = false; /* a value has no fields below it */
    }
    str_list_free(segs, n);
    if (!ok) return NULL;
    *is_obj = f->type == SF_OBJ;
    return f;
}

/* ---- small list helpers ---- */
spec_kv *spec_kv_clone(const spec_kv *kv, size_t n)
{
    if (!n) return NULL;
    spec_kv *out = xcalloc(n, sizeof *out);
    for (size_t i = 0; i < n; i++) {
        out[i].key = xstrdup(kv[i].key);
        out[i].value = xstrdup(kv[i].value);
    }
    return out;
}

void spec_kv_free(spec_kv *kv, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(kv[i].key);
        free(kv[i].value);
    }
    free(kv);
}

char **spec_strv_clone(char *const *v, size_t n)
{
    if (!n) return NULL;
    char **out = xcalloc(n, sizeof *out);
    for (size_t i = 0; i < n; i++) out[i] = xstrdup(v[i]);
    return out;
}
