/* spec_experiment.c: the LoRAExperiment: a job template plus a matrix of
 * values, expanded into named jobs.
 *
 *   spec:
 *     maxConcurrent: 2
 *     template: <a LoRATrainingJob spec body>   (or {metadata: {labels}, spec: body})
 *     matrix:
 *       lora.rank: [8, 16, 32]
 *       hyperparams.learningRate: [1e-4, 2e-4]
 *
 * The size of the product is computed (overflow-checked) before anything is
 * expanded. Each variant is the template's tree with the matrix values laid
 * over it (the path's mappings copied, the rest shared), decoded by the same
 * job decoder as a lone job, so a bad value is reported where the matrix
 * wrote it, naming the axis value. Jobs are named
 * <experiment>-<axis><value>..., e.g. sweep-r8-lr1e-4, or <experiment>-<k>
 * when those names would be too long, invalid or not unique.
 */
#include "spec_internal.h"

#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Errors from variants shown per experiment; the rest are counted. */
#define MATRIX_MAX_REPORTED 100

void spec_experiment_free(spec_experiment *e)
{
    if (!e) return;
    free(e->file);
    free(e->name);
    free(e->namespace_);
    spec_kv_free(e->labels, e->n_labels);
    for (size_t i = 0; i < e->n_axes; i++) {
        free(e->axes[i].path);
        str_list_free(e->axes[i].values, e->axes[i].n_values);
    }
    free(e->axes);
    for (size_t i = 0; i < e->n_jobs; i++) spec_job_free(e->jobs[i]);
    free(e->jobs);
    free(e);
}

/* ---- schema of the experiment itself ---- */
#define E(m) offsetof(spec_experiment, m)
#define SCHEMA(tab) {tab, sizeof tab / sizeof tab[0], 0, NULL, NULL}

static const spec_field exp_meta_fields[] = {
    {.key = "name", .type = SF_STR, .off = E(name), .flags = SF_REQUIRED | SF_DNS},
    {.key = "namespace", .type = SF_STR, .off = E(namespace_), .flags = SF_DNS},
    {.key = "labels", .type = SF_KV, .off = E(labels), .off_n = E(n_labels)},
};
static const spec_schema exp_meta_schema = SCHEMA(exp_meta_fields);

/* The template's own metadata: labels for every job. */
typedef struct tmpl_meta {
    spec_kv *labels;
    size_t n_labels;
} tmpl_meta;

static const spec_field tmpl_meta_fields[] = {
    {.key = "labels", .type = SF_KV, .off = offsetof(tmpl_meta, labels),
     .off_n = offsetof(tmpl_meta, n_labels)},
};
static const spec_schema tmpl_meta_schema = SCHEMA(tmpl_meta_fields);

/* What the wrapped form's metadata and spec hold (decoded elsewhere). */
static const spec_field tmpl_meta_like = {.key = "metadata", .type = SF_OBJ,
                                          .sub = &tmpl_meta_schema};
static const spec_field tmpl_body_like = {.key = "spec", .type = SF_OBJ,
                                          .sub = &spec_job_body_schema};

static const spec_field tmpl_wrapped_fields[] = {
    {.key = "metadata", .type = SF_IGNORE, .like = &tmpl_meta_like, .n_like = 1},
    {.key = "spec", .type = SF_IGNORE, .flags = SF_REQUIRED, .like = &tmpl_body_like,
     .n_like = 1},
};
static const spec_schema tmpl_wrapped_schema = SCHEMA(tmpl_wrapped_fields);

/* The template's shapes: a job spec body (with a metadata key beside it or
 * not), or {metadata, spec}. */
static const spec_field tmpl_like[] = {
    {.key = "template", .type = SF_OBJ, .sub = &spec_job_body_schema},
    {.key = "template", .type = SF_OBJ, .sub = &tmpl_wrapped_schema},
};

static const spec_field exp_spec_fields[] = {
    {.key = "template", .type = SF_IGNORE, .flags = SF_REQUIRED, .like = tmpl_like,
     .n_like = 2, .hint = "the spec of a LoRATrainingJob, or {metadata: {labels}, spec}"},
    {.key = "matrix", .type = SF_IGNORE, .flags = SF_REQUIRED,
     .hint = "a mapping of dotted job fields to lists of values, e.g. lora.rank: [8, 16]"},
    {.key = "maxConcurrent", .type = SF_INT, .off = E(max_concurrent),
     .flags = SF_MIN | SF_MAX, .min = 0, .max = SPEC_MAX_MATRIX_JOBS,
     .hint = "0 means no limit"},
};
static const spec_schema exp_spec_schema = SCHEMA(exp_spec_fields);

static const spec_field exp_top_fields[] = {
    {.key = "apiVersion", .type = SF_IGNORE},
    {.key = "kind", .type = SF_IGNORE},
    {.key = "metadata", .type = SF_OBJ, .sub = &exp_meta_schema, .flags = SF_REQUIRED},
    {.key = "spec", .type = SF_OBJ, .sub = &exp_spec_schema, .flags = SF_REQUIRED},
};
const spec_schema spec_experiment_schema = SCHEMA(exp_top_fields);

/* ---- the template ---- */
typedef struct tmpl {
    const spec_ynode *body; /* the job spec body (a mapping), or NULL */
    const char *prefix;     /* its path: "spec.template" or "spec.template.spec" */
    tmpl_meta meta;
} tmpl;

/* Finds the body and metadata of the template; both forms are accepted. */
static bool read_template(spec_dctx *c, const spec_ynode *t, spec_ystream *owner, tmpl *out)
{
    memset(out, 0, sizeof *out);
    size_t before = c->d->errors;
    size_t old = spec_path_push(c, "template");
    if (t->kind != SPEC_YMAP) {
        diag *x = spec_report(c, DIAG_ERROR, t, "wrong type");
        diag_set_expected(x, "a mapping: the spec of a LoRATrainingJob");
        spec_path_pop(c, old);
        return false;
    }
    const spec_ynode *meta = spec_ymap_get(t, "metadata");
    if (spec_ymap_get(t, "spec")) { /* {metadata, spec} */
        spec_decode_map(c, t, t, &tmpl_wrapped_schema, NULL);
        out->body = spec_ymap_get(t, "spec");
        out->prefix = "spec.template.spec";
    } else if (meta) { /* the body with a metadata key beside it */
        spec_ynode *body = spec_ynode_new(owner, SPEC_YMAP, t->line, t->col);
        for (size_t i = 0; i + 1 < t->n_items; i += 2) {
            if (t->items[i]->kind == SPEC_YSCALAR && !strcmp(t->items[i]->text, "metadata"))
                continue;
            spec_ynode_append(body, t->items[i]);
            spec_ynode_append(body, t->items[i + 1]);
        }
        out->body = body;
        out->prefix = "spec.template";
    } else {
        out->body = t;
        out->prefix = "spec.template";
    }
    if (!spec_yabsent(meta)) {
        size_t o2 = spec_path_push(c, "metadata");
        spec_decode_map(c, meta, meta, &tmpl_meta_schema, &out->meta);
        spec_path_pop(c, o2);
    }
    if (out->body && out->body->kind != SPEC_YMAP) {
        diag *x = spec_report(c, DIAG_ERROR, out->body, "wrong type");
        diag_set_expected(x, "a mapping: the spec of a LoRATrainingJob");
        out->body = NULL;
    }
    spec_path_pop(c, old);
    return c->d->errors == before && out->body;
}

/* ---- the matrix ---- */
typedef struct axis {
    const spec_ynode *key;    /* "lora.rank" as written */
    const spec_ynode *values; /* the list */
    char **segs;              /* the path split at '.' */
    size_t n_segs;
} axis;

static void axes_free(axis *a, size_t n)
{
    for (size_t i = 0; i < n; i++) str_list_free(a[i].segs, a[i].n_segs);
    free(a);
}

/* A matrix path must name a value of the job spec. */
static bool check_axis_path(spec_dctx *c, const spec_ynode *k, const spec_ynode *body)
{
    bool is_obj = false;
    const spec_field *f = spec_schema_find(&spec_job_body_schema, k->text, &is_obj);
    if (f && !is_obj) {
        /* every mapping on the way must be a mapping in the template too */
        char **segs;
        size_t n = str_split(k->text, '.', &segs);
        const spec_ynode *m = body;
        bool ok = true;
        for (size_t i = 0; ok && m && i + 1 < n; i++) {
            m = spec_ymap_get(m, segs[i]);
            if (m && !spec_yabsent(m) && m->kind != SPEC_YMAP) {
                diag *x = spec_report(c, DIAG_ERROR, k, "the template's %s is not a mapping",
                                      segs[i]);
                diag_set_suggestion(x, "fix the template's %s section first", segs[i]);
                ok = false;
            }
        }
        str_list_free(segs, n);
        return ok;
    }
    diag *x = spec_report(c, DIAG_ERROR, k, is_obj ? "a matrix path must name a value, not a "
                                                     "section"
                                                   : "not a field of a job spec");
    diag_set_found(x, "\"%s\"", k->text);
    char **leaves;
    size_t n = spec_schema_leaves(&spec_job_body_schema, &leaves);
    const char *s = str_suggest(k->text, (const char *const *)leaves, n);
    if (s) diag_set_suggestion(x, "did you mean %s?", s);
    else diag_set_suggestion(x, "write a dotted path such as lora.rank or hyperparams.learningRate");
    str_list_free(leaves, n);
    return false;
}

/* A list of at least one value, no value twice. */
static bool check_axis_values(spec_dctx *c, const spec_ynode *v)
{
    if (v->kind != SPEC_YSEQ || v->n_items == 0) {
        diag *x = spec_report(c, DIAG_ERROR, v, v->kind == SPEC_YSEQ ? "an axis needs a value"
                                                                      : "wrong type");
        diag_set_expected(x, "a list of values such as [8, 16, 32]");
        char found[64];
        spec_ydescribe(v, found, sizeof found);
        diag_set_found(x, "%s", found);
        return false;
    }
    bool ok = true;
    char **texts = xcalloc(v->n_items, sizeof *texts);
    for (size_t i = 0; i < v->n_items; i++) {
        texts[i] = spec_yflow_text(v->items[i]);
        for (size_t k = 0; k < i && ok; k++) {
            if (strcmp(texts[k], texts[i]) != 0) continue;
            size_t old = spec_path_push_index(c, i);
            diag *x = spec_report(c, DIAG_ERROR, v->items[i], "the value %s appears twice",
                                  texts[i]);
            diag_set_suggestion(x, "remove one: it would make the same job twice");
            spec_path_pop(c, old);
            ok = false;
        }
    }
    str_list_free(texts, v->n_items);
    return ok;
}

/* Reads the matrix; reports bad paths and values. */
static size_t read_matrix(spec_dctx *c, const spec_ynode *m, const spec_ynode *body, axis **out,
                          bool *ok)
{
    *out = NULL;
    size_t old = spec_path_push(c, "matrix");
    if (m->kind != SPEC_YMAP || m->n_items == 0) {
        diag *x = spec_report(c, DIAG_ERROR, m, m->kind == SPEC_YMAP ? "the matrix is empty"
                                                                     : "wrong type");
        diag_set_expected(x, "a mapping of job fields to lists, e.g. lora.rank: [8, 16]");
        spec_path_pop(c, old);
        *ok = false;
        return 0;
    }
    size_t n = m->n_items / 2, k = 0;
    axis *a = xcalloc(n, sizeof *a);
    for (size_t i = 0; i < n; i++) {
        const spec_ynode *key = m->items[2 * i], *val = m->items[2 * i + 1];
        if (key->kind != SPEC_YSCALAR) continue;
        size_t o2 = spec_path_push(c, key->text);
        bool good = check_axis_path(c, key, body);
        good &= check_axis_values(c, val);
        spec_path_pop(c, o2);
        if (!good) {
            *ok = false;
            continue;
        }
        a[k].key = key;
        a[k].values = val;
        a[k].n_segs = str_split(key->text, '.', &a[k].segs);
        k++;
    }
    spec_path_pop(c, old);
    *out = a;
    return k;
}

/* The number of jobs, or 0 after reporting a product over the limit. */
static size_t matrix_size(spec_dctx *c, const spec_ynode *m, const axis *a, size_t n)
{
    uint64_t total = 1;
    bool overflow = false;
    for (size_t i = 0; i < n; i++) {
        uint64_t v = a[i].values->n_items;
        if (total > UINT64_MAX / v) overflow = true;
        else total *= v;
    }
    if (!overflow && total <= SPEC_MAX_MATRIX_JOBS) return (size_t)total;
    size_t old = spec_path_push(c, "matrix");
    diag *x = spec_report(c, DIAG_ERROR, m, "the matrix expands into too many jobs");
    diag_set_expected(x, "at most %d jobs", SPEC_MAX_MATRIX_JOBS);
    if (overflow) diag_set_found(x, "more than %llu jobs", (unsigned long long)UINT64_MAX);
    else diag_set_found(x, "%llu jobs", (unsigned long long)total);
    diag_set_suggestion(x, "use fewer values per axis, or split the experiment");
    spec_path_pop(c, old);
    return 0;
}

/* ---- variants ---- */

/* A copy of mapping m (entries shared) with segs set to value. Nodes made
 * here belong to arena. The tree is never written through: the casts only
 * let shared nodes sit in the new mapping's item array. */
static spec_ynode *overlay(spec_ystream *arena, const spec_ynode *m, char **segs, size_t n,
                          const spec_ynode *key_at, const spec_ynode *value)
{
    const spec_ynode *at = m ? m : key_at;
    spec_ynode *copy = spec_ynode_new(arena, SPEC_YMAP, at->line, at->col);
    bool replaced = false;
    for (size_t i = 0; m && m->kind == SPEC_YMAP && i + 1 < m->n_items; i += 2) {
        spec_ynode *k = m->items[i], *v = m->items[i + 1];
        if (k->kind == SPEC_YSCALAR && strcmp(k->text, segs[0]) == 0) {
            v = n == 1 ? (spec_ynode *)value
                       : overlay(arena, spec_yabsent(v) ? NULL : v, segs + 1, n - 1, key_at, value);
            replaced = true;
        }
        spec_ynode_append(copy, k);
        spec_ynode_append(copy, v);
    }
    if (!replaced) {
        spec_ynode *k = spec_ynode_new(arena, SPEC_YSCALAR, key_at->line, key_at->col);
        k->text = xstrdup(segs[0]);
        spec_ynode_append(copy, k);
        spec_ynode_append(copy, n == 1 ? (spec_ynode *)value
                                       : overlay(arena, NULL, segs + 1, n - 1, key_at, value));
    }
    return copy;
}

/* The axis whose value (in this variant) sits at line:col, or -1. */
static int axis_at(const axis *a, size_t n, const size_t *pick, int line, int col)
{
    for (size_t i = 0; i < n; i++) {
        const spec_ynode *v = a[i].values->items[pick[i]];
        if ((v->line == line && v->col == col) ||
            (a[i].key->line == line && a[i].key->col == col))
            return (int)i;
        for (size_t k = 0; v->kind != SPEC_YSCALAR && k < v->n_items; k++)
            if (v->items[k]->line == line && v->items[k]->col == col) return (int)i;
    }
    return -1;
}

static bool same_diag(const diag *x, const diag *y)
{
    return x->level == y->level && x->line == y->line && x->col == y->col &&
           strcmp(x->message, y->message) == 0 &&
           strcmp(x->path ? x->path : "", y->path ? y->path : "") == 0;
}

static void copy_text(char **dst, const char *src)
{
    if (src) *dst = xstrdup(src);
}

/* Moves a variant's diagnostics into the file's list: each names the
 * matrix value that caused it, and one reported by an earlier variant
 * (a template error every variant repeats) is dropped. */
static void merge_diags(spec_dctx *c, const diag_list *vd, size_t first, const axis *a,
                        size_t n, const size_t *pick, size_t *hidden)
{
    for (size_t i = 0; i < vd->len; i++) {
        const diag *x = &vd->items[i];
        int ax = axis_at(a, n, pick, x->line, x->col);
        char *msg = ax < 0 ? xstrdup(x->message)
                           : xasprintf("%s, from matrix value %s = %s", x->message,
                                       a[ax].key->text,
                                       a[ax].values->items[pick[ax]]->kind == SPEC_YSCALAR
                                           ? a[ax].values->items[pick[ax]]->text
                                           : "this value");
        diag probe = *x;
        probe.message = msg;
        bool dup = false;
        for (size_t k = first; k < c->d->len && !dup; k++) dup = same_diag(&c->d->items[k], &probe);
        if (!dup && c->d->len - first >= MATRIX_MAX_REPORTED) {
            (*hidden)++; /* counted in a note after the expansion */
            dup = true;
        }
        if (!dup) {
            diag *y = diag_add(c->d, x->level, x->file, x->line, x->col, x->path, msg);
            copy_text(&y->expected, x->expected);
            copy_text(&y->found, x->found);
            copy_text(&y->suggestion, x->suggestion);
        }
        free(msg);
    }
}

/* Decodes variant `pick` of the matrix into a job (NULL on errors). */
static spec_job *decode_variant(spec_dctx *c, const tmpl *t, const spec_experiment *e,
                                const axis *a, size_t n, const size_t *pick, size_t first,
                                size_t *hidden)
{
    spec_ystream arena = {0};
    const spec_ynode *body = t->body;
    for (size_t i = 0; i < n; i++)
        body = overlay(&arena, body, a[i].segs, a[i].n_segs, a[i].key,
                       a[i].values->items[pick[i]]);

    spec_job *j = spec_job_new_default();
    free(j->name);
    j->name = NULL;
    j->file = xstrdup(c->file);
    j->namespace_ = e->namespace_ ? xstrdup(e->namespace_) : NULL;
    diag_list vd;
    diag_list_init(&vd);
    spec_dctx vc;
    spec_dctx_init(&vc, c->file, &vd);
    sb_puts(&vc.path, t->prefix);
    spec_decode_job_body(&vc, body, body, j);
    merge_diags(c, &vd, first, a, n, pick, hidden);
    bool ok = vd.errors == 0;
    spec_dctx_free(&vc);
    diag_list_free(&vd);
    spec_ystream_free(&arena);
    if (!ok) {
        spec_job_free(j);
        return NULL;
    }
    return j;
}

/* ---- names ---- */

/* "learningRate" -> "lr", "rank" -> "r", "gradientAccumulation" -> "ga";
 * a value that starts with a letter is set off with '-' (tm-all-linear). */
static void axis_abbrev(const char *path, sb *out)
{
    const char *leaf = strrchr(path, '.');
    leaf = leaf ? leaf + 1 : path;
    if (*leaf) sb_putc(out, (char)tolower((unsigned char)*leaf));
    for (const char *p = leaf + 1; *p; p++)
        if (isupper((unsigned char)*p)) sb_putc(out, (char)tolower((unsigned char)*p));
}

/* "1e-4" -> "1e-4", "0.05" -> "0p05", "[q_proj, v_proj]" -> "q-proj-v-proj" */
static void value_slug(const char *text, sb *out)
{
    size_t start = out->len;
    for (const char *p = text; *p; p++) {
        unsigned char ch = (unsigned char)*p;
        char w = ch == '.' ? 'p' : (isalnum(ch) && ch < 0x80) ? (char)tolower(ch) : '-';
        if (w == '-' && (out->len == start || out->buf[out->len - 1] == '-')) continue;
        sb_putc(out, w);
    }
    while (out->len > start && out->buf[out->len - 1] == '-') out->buf[--out->len] = '\0';
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Names from the axis values when they are valid and unique, else
 * <experiment>-<k> counting from 1. */
static void name_jobs(spec_experiment *e)
{
    bool ok = true;
    for (size_t k = 0; k < e->n_jobs; k++) {
        sb s;
        sb_init(&s);
        sb_puts(&s, e->name);
        size_t rest = k;
        char **slugs = xcalloc(e->n_axes, sizeof *slugs);
        for (size_t i = e->n_axes; i-- > 0;) {
            size_t pick = rest % e->axes[i].n_values;
            rest /= e->axes[i].n_values;
            sb one;
            sb_init(&one);
            axis_abbrev(e->axes[i].path, &one);
            size_t before = one.len;
            value_slug(e->axes[i].values[pick], &one);
            if (one.len == before) ok = false;
            else if (isalpha((unsigned char)one.buf[before])) { /* "tm-all-linear", "r8" */
                sb_putc(&one, ' ');
                memmove(one.buf + before + 1, one.buf + before, one.len - before - 1);
                one.buf[before] = '-';
            }
            slugs[i] = sb_take(&one);
        }
        for (size_t i = 0; i < e->n_axes; i++) sb_printf(&s, "-%s", slugs[i]);
        str_list_free(slugs, e->n_axes);
        e->jobs[k]->name = sb_take(&s);
        ok &= spec_dns_label(e->jobs[k]->name, NULL, 0);
    }
    char **sorted = xmalloc((e->n_jobs ? e->n_jobs : 1) * sizeof *sorted);
    for (size_t k = 0; k < e->n_jobs; k++) sorted[k] = e->jobs[k]->name;
    qsort(sorted, e->n_jobs, sizeof *sorted, cmp_str);
    for (size_t k = 1; ok && k < e->n_jobs; k++) ok = strcmp(sorted[k - 1], sorted[k]) != 0;
    free(sorted);
    if (ok) return;
    char num[32];
    snprintf(num, sizeof num, "%zu", e->n_jobs);
    size_t keep = 63 - 1 - strlen(num);
    for (size_t k = 0; k < e->n_jobs; k++) {
        free(e->jobs[k]->name);
        e->jobs[k]->name = xasprintf("%.*s-%zu", (int)keep, e->name, k + 1);
    }
}

/* Experiment labels, then the template's (which win on the same key). */
static void job_labels(spec_job *j, const spec_experiment *e, const tmpl_meta *m)
{
    spec_kv_free(j->labels, j->n_labels);
    j->labels = spec_kv_clone(e->labels, e->n_labels);
    j->n_labels = e->n_labels;
    for (size_t i = 0; i < m->n_labels; i++) {
        size_t k = 0;
        while (k < j->n_labels && strcmp(j->labels[k].key, m->labels[i].key) != 0) k++;
        if (k == j->n_labels) {
            j->labels = xrealloc(j->labels, (j->n_labels + 1) * sizeof *j->labels);
            j->labels[j->n_labels++] = (spec_kv){xstrdup(m->labels[i].key), NULL};
        }
        free(j->labels[k].value);
        j->labels[k].value = xstrdup(m->labels[i].value);
    }
}

/* Expands every variant; on errors frees what was made and returns false. */
static bool expand(spec_dctx *c, spec_experiment *e, const tmpl *t, const axis *a, size_t n,
                   size_t total, const spec_ydoc *doc, const char *api)
{
    size_t *pick = xcalloc(n, sizeof *pick);
    size_t first = c->d->len, hidden = 0;
    bool ok = true;
    e->jobs = xcalloc(total, sizeof *e->jobs);
    for (size_t k = 0; k < total; k++) {
        size_t rest = k; /* last axis fastest */
        for (size_t i = n; i-- > 0;) {
            pick[i] = rest % a[i].values->n_items;
            rest /= a[i].values->n_items;
        }
        spec_job *j = decode_variant(c, t, e, a, n, pick, first, &hidden);
        if (!j) {
            ok = false;
            continue;
        }
        free(j->api_version);
        j->api_version = xstrdup(api);
        j->experiment = xstrdup(e->name);
        j->pos = (spec_pos){doc->line, doc->col};
        job_labels(j, e, &t->meta);
        e->jobs[e->n_jobs++] = j;
    }
    if (hidden) {
        char *msg = xasprintf("%zu more problems in other jobs of the matrix are not shown",
                              hidden);
        diag_add(c->d, DIAG_NOTE, c->file, 0, 0, "spec.matrix", msg);
        free(msg);
    }
    free(pick);
    if (!ok) return false;
    name_jobs(e);
    return true;
}

static void record_axes(spec_experiment *e, const axis *a, size_t n)
{
    e->axes = xcalloc(n ? n : 1, sizeof *e->axes);
    e->n_axes = n;
    for (size_t i = 0; i < n; i++) {
        e->axes[i].path = xstrdup(a[i].key->text);
        e->axes[i].n_values = a[i].values->n_items;
        e->axes[i].values = xcalloc(a[i].values->n_items, sizeof(char *));
        for (size_t k = 0; k < a[i].values->n_items; k++)
            e->axes[i].values[k] = spec_yflow_text(a[i].values->items[k]);
    }
}

/* Decodes the template alone, to report its errors when the matrix cannot
 * be expanded. */
static void check_template_alone(spec_dctx *c, const tmpl *t)
{
    spec_job *j = spec_job_new_default();
    size_t old = spec_path_push(c, t->prefix);
    spec_decode_job_body(c, t->body, t->body, j);
    spec_path_pop(c, old);
    spec_job_free(j);
}

spec_experiment *spec_decode_experiment(spec_dctx *c, const spec_ynode *root,
                                        const spec_ydoc *doc, spec_ystream *owner)
{
    size_t before = c->d->errors;
    spec_experiment *e = xcalloc(1, sizeof *e);
    e->file = xstrdup(c->file);
    spec_decode_map(c, root, root, &spec_experiment_schema, e);
    const spec_ynode *spec = spec_ymap_get(root, "spec");
    const spec_ynode *tn = spec_ymap_get(spec, "template"), *mn = spec_ymap_get(spec, "matrix");
    if (spec_yabsent(tn) || spec_yabsent(mn) || !e->name) {
        spec_experiment_free(e);
        return NULL;
    }
    size_t old = spec_path_push(c, "spec");
    tmpl t;
    bool ok = read_template(c, tn, owner, &t);
    axis *a = NULL;
    size_t n = 0, total = 0;
    if (t.body) n = read_matrix(c, mn, t.body, &a, &ok);
    if (ok) total = matrix_size(c, mn, a, n);
    spec_path_pop(c, old);
    const spec_ynode *api = spec_ymap_get(root, "apiVersion");
    if (ok && total > 0) {
        record_axes(e, a, n);
        ok = expand(c, e, &t, a, n, total, doc,
                    api && api->kind == SPEC_YSCALAR ? api->text : "lathe/v1");
    } else if (t.body) {
        check_template_alone(c, &t);
    }
    axes_free(a, n);
    spec_kv_free(t.meta.labels, t.meta.n_labels);
    if (!ok || c->d->errors != before) {
        spec_experiment_free(e);
        return NULL;
    }
    return e;
}
