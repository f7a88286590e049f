/* test_spec_openapi.c: the OpenAPI schemas of spec_openapi_schema (the
 * CRDs' spec) against the decoder's own tables. The tables are walked here
 * independently, recursively (nested tables, lists, the like shapes of
 * custom and ignored fields): every field the decoder accepts is a
 * property with the type, enum, range and required flag the field says
 * (spec_openapi.c's mapping, restated here: typed where a structural schema
 * can type every spelling the decoder takes, kept as written otherwise),
 * and every property of the schema is a key of the table, so the CRD
 * accepts no key lathe refuses and prunes none lathe reads. Then the
 * schema is structural (every node typed, int-or-string, or free-form; no
 * type inside a junctor but int-or-string's), and a few fields are checked
 * by name. (tests/k8s/crd.sh validates real documents against it.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "spec/spec_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t n_fields_checked;

static void fail_at(const char *path, const char *what)
{
    fprintf(stderr, "%s: %s\n", path, what);
    fail();
}

static const char *type_of(const json_t *node)
{
    return json_string_value(json_object_get(node, "type"));
}

static bool flag(const json_t *node, const char *key)
{
    return json_is_true(json_object_get(node, key));
}

static void expect_type(const json_t *node, const char *type, const char *path)
{
    const char *t = type_of(node);
    if (!t || strcmp(t, type) != 0) {
        char msg[128];
        snprintf(msg, sizeof msg, "expected type %s, found %s", type, t ? t : "none");
        fail_at(path, msg);
    }
}

/* A bound of the node equals the field's, or is absent when it has none. */
static void expect_bound(const json_t *node, const char *key, const char *excl, bool has,
                         double v, bool exclusive, const char *path)
{
    const json_t *b = json_object_get(node, key);
    if (!has) {
        if (b) fail_at(path, "a bound the table does not have");
        return;
    }
    if (!json_is_number(b) || fabs(json_number_value(b) - v) > 1e-9 * (fabs(v) + 1))
        fail_at(path, "a bound that differs from the table's");
    if (flag(node, excl) != exclusive) fail_at(path, "exclusive bound differs");
}

static void expect_range(const spec_field *f, const json_t *node, const char *path)
{
    bool u64 = f->type == SF_U64 && !(f->flags & SF_MIN);
    expect_bound(node, "minimum", "exclusiveMinimum", (f->flags & SF_MIN) || u64,
                 u64 ? 0 : f->min, f->flags & SF_MIN_EXCL, path);
    expect_bound(node, "maximum", "exclusiveMaximum", f->flags & SF_MAX, f->max,
                 f->flags & SF_MAX_EXCL, path);
}

static void expect_int_or_string(const json_t *node, const char *path)
{
    if (!flag(node, "x-kubernetes-int-or-string") || type_of(node))
        fail_at(path, "expected x-kubernetes-int-or-string without a type");
}

static void expect_free_form(const json_t *node, const char *path)
{
    if (!flag(node, "x-kubernetes-preserve-unknown-fields") || type_of(node))
        fail_at(path, "expected any value (x-kubernetes-preserve-unknown-fields, no type)");
}

/* Every name of the enum table, and nothing else, in the schema's enum: a
 * string enum, or for numbers (quantization.bits) an int-or-string one
 * with both spellings. */
static void expect_enum(const spec_enum_def *e, const json_t *node, const char *path)
{
    const json_t *vals = json_object_get(node, "enum");
    bool numbers = true;
    for (size_t i = 0; i < e->n; i++) {
        int64_t v;
        numbers &= spec_parse_i64(e->e[i].name, &v);
    }
    if (numbers) expect_int_or_string(node, path);
    else expect_type(node, "string", path);
    if (!json_is_array(vals) || json_array_size(vals) != e->n * (numbers ? 2 : 1))
        fail_at(path, "enum size");
    for (size_t i = 0; i < e->n; i++) {
        bool as_text = false, as_number = !numbers;
        for (size_t k = 0; k < json_array_size(vals); k++) {
            const json_t *v = json_array_get(vals, k);
            if (json_is_string(v)) as_text |= strcmp(json_string_value(v), e->e[i].name) == 0;
            if (json_is_integer(v))
                as_number |= json_integer_value(v) == strtoll(e->e[i].name, NULL, 10);
        }
        if (!as_text || !as_number) fail_at(path, e->e[i].name);
    }
}

static void check_field(const spec_field *f, const json_t *node, const char *path);

/* A mapping of one or several tables: their keys as properties and only
 * their keys; required as the one table says (none for a union). */
static void check_object(const spec_schema *const *subs, size_t n, const json_t *node,
                         const char *path)
{
    expect_type(node, "object", path);
    const json_t *props = json_object_get(node, "properties");
    const json_t *req = json_object_get(node, "required");
    if (!json_is_object(props)) fail_at(path, "no properties");
    size_t n_req = 0;
    for (size_t k = 0; k < n; k++)
        for (size_t i = 0; i < subs[k]->n_fields; i++) {
            const spec_field *f = &subs[k]->fields[i];
            char sub[512];
            snprintf(sub, sizeof sub, "%s.%s", path, f->key);
            const json_t *p = json_object_get(props, f->key);
            if (!p) fail_at(sub, "a key the decoder accepts is not in the schema");
            bool required = false;
            for (size_t r = 0; r < json_array_size(req); r++)
                required |= strcmp(json_string_value(json_array_get(req, r)), f->key) == 0;
            bool want = n == 1 && (f->flags & SF_REQUIRED);
            if (required != want) fail_at(sub, want ? "required, not in `required`"
                                                    : "in `required`, not required");
            n_req += want;
            bool first = true; /* a key of two tables is checked against the first */
            for (size_t j = 0; j < k && first; j++)
                for (size_t m = 0; m < subs[j]->n_fields; m++)
                    if (strcmp(subs[j]->fields[m].key, f->key) == 0) first = false;
            if (first) check_field(f, p, sub);
        }
    if (json_array_size(req) != n_req) fail_at(path, "required lists keys twice");
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)props, key, v) {
        bool known = false;
        for (size_t k = 0; k < n && !known; k++)
            for (size_t i = 0; i < subs[k]->n_fields && !known; i++)
                known = strcmp(subs[k]->fields[i].key, key) == 0;
        if (!known) {
            char sub[512];
            snprintf(sub, sizeof sub, "%s.%s", path, key);
            fail_at(sub, "a property the decoder does not accept");
        }
    }
}

static void check_field(const spec_field *f, const json_t *node, const char *path)
{
    n_fields_checked++;
    switch (f->type) {
    case SF_STR:
        expect_type(node, "string", path);
        if ((f->flags & SF_DNS) && json_integer_value(json_object_get(node, "maxLength")) != 63)
            fail_at(path, "a DNS-1123 name is at most 63 long");
        if ((f->flags & SF_DNS) && !json_object_get(node, "pattern")) fail_at(path, "no pattern");
        if (!(f->flags & SF_EMPTY_OK) != (json_integer_value(json_object_get(node, "minLength")) == 1))
            fail_at(path, "minLength is not what SF_EMPTY_OK says");
        break;
    case SF_INT:
    case SF_LONG:
    case SF_I64:
    case SF_U64: /* 32 or "32" */
        expect_int_or_string(node, path);
        expect_range(f, node, path);
        break;
    case SF_DOUBLE: /* 0.05 or "0.05": no structural type holds both */
        expect_free_form(node, path);
        break;
    case SF_BOOL: expect_type(node, "boolean", path); break;
    case SF_ENUM:
    case SF_ENUM_STR: expect_enum(f->enm, node, path); break;
    case SF_DURATION:
    case SF_BYTES:
    case SF_COUNT:
    case SF_CPU:
        expect_int_or_string(node, path);
        expect_range(f, node, path);
        break;
    case SF_TOGGLE:  /* true, false or "auto" */
    case SF_STRLIST: /* a list of names, or one name */
    case SF_KV:      /* a mapping, or a list of {name, value} */
        expect_free_form(node, path);
        break;
    case SF_OBJ: check_object(&f->sub, 1, node, path); break;
    case SF_LIST:
        expect_type(node, "array", path);
        check_object(&f->sub, 1, json_object_get(node, "items"), path);
        break;
    case SF_CUSTOM:
    case SF_IGNORE:
        if (!f->like || f->n_like == 0) {
            expect_free_form(node, path);
        } else if (f->n_like == 1) {
            check_field(&f->like[0], node, path);
        } else {
            const spec_schema *subs[8];
            assert_true(f->n_like <= 8);
            for (size_t i = 0; i < f->n_like; i++) {
                assert_int_equal(f->like[i].type, SF_OBJ);
                subs[i] = f->like[i].sub;
            }
            check_object(subs, f->n_like, node, path);
        }
        break;
    }
}

/* The whole document: apiVersion and kind strings, metadata restricted to
 * its name (the API server owns the rest), every other key of the top
 * table as the table says; required: the table's, less metadata. */
static void check_document(const spec_schema *top, const char *kind)
{
    json_t *doc = spec_openapi_schema(kind);
    assert_non_null(doc);
    expect_type(doc, "object", kind);
    const json_t *props = json_object_get(doc, "properties");
    assert_int_equal(json_object_size(props), top->n_fields);
    size_t n_req = 0;
    for (size_t i = 0; i < top->n_fields; i++) {
        const spec_field *f = &top->fields[i];
        const json_t *p = json_object_get(props, f->key);
        if (!p) fail_at(kind, f->key);
        if (strcmp(f->key, "apiVersion") == 0 || strcmp(f->key, "kind") == 0) {
            expect_type(p, "string", f->key);
        } else if (strcmp(f->key, "metadata") == 0) {
            expect_type(p, "object", "metadata");
            const json_t *mp = json_object_get(p, "properties");
            assert_int_equal(json_object_size(mp), 1);
            bool is_obj;
            const spec_field *name = spec_schema_find(f->sub, "name", &is_obj);
            assert_non_null(name);
            check_field(name, json_object_get(mp, "name"), "metadata.name");
        } else {
            check_field(f, p, f->key);
            if (f->flags & SF_REQUIRED) n_req++;
        }
    }
    const json_t *req = json_object_get(doc, "required");
    assert_int_equal(json_array_size(req), n_req);
    json_decref(doc);
}

static void test_job_schema_is_the_tables(void **state)
{
    (void)state;
    n_fields_checked = 0;
    check_document(&spec_job_schema, "LoRATrainingJob");
    assert_true(n_fields_checked > 60); /* the walk went through every section */
}

static void test_experiment_schema_is_the_tables(void **state)
{
    (void)state;
    n_fields_checked = 0;
    check_document(&spec_experiment_schema, "LoRAExperiment");
    /* the template holds a whole job body twice (plain and wrapped forms) */
    assert_true(n_fields_checked > 120);
}

/* Structural, as apiextensions.k8s.io/v1 wants: every node a type, or
 * int-or-string, or free-form; junctors only in int-or-string's pattern and
 * without types otherwise; no additionalProperties false. */
static void check_structural(const json_t *node, const char *path)
{
    bool ios = flag(node, "x-kubernetes-int-or-string");
    bool free_form = flag(node, "x-kubernetes-preserve-unknown-fields");
    if (!type_of(node) && !ios && !free_form) fail_at(path, "a node without a type");
    const json_t *ap = json_object_get(node, "additionalProperties");
    if (json_is_false(ap)) fail_at(path, "additionalProperties: false");
    const json_t *any = json_object_get(node, "anyOf");
    if (any && !ios) fail_at(path, "anyOf outside int-or-string");
    if (any) {
        assert_int_equal(json_array_size(any), 2);
        expect_type(json_array_get(any, 0), "integer", path);
        expect_type(json_array_get(any, 1), "string", path);
    }
    assert_null(json_object_get(node, "oneOf"));
    assert_null(json_object_get(node, "allOf"));
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)json_object_get(node, "properties"), key, v) {
        char sub[512];
        snprintf(sub, sizeof sub, "%s.%s", path, key);
        check_structural(v, sub);
    }
    const json_t *items = json_object_get(node, "items");
    if (type_of(node) && strcmp(type_of(node), "array") == 0 && !items)
        fail_at(path, "an array without items");
    if (items) check_structural(items, path);
}

static void test_structural(void **state)
{
    (void)state;
    const char *kinds[] = {"LoRATrainingJob", "LoRAExperiment"};
    for (size_t i = 0; i < 2; i++) {
        json_t *doc = spec_openapi_schema(kinds[i]);
        check_structural(doc, kinds[i]);
        json_decref(doc);
    }
    assert_null(spec_openapi_schema("Cluster"));
    assert_null(spec_openapi_schema(NULL));
}

/* A path of property names from the root ("spec.lora.rank"). */
static const json_t *at(const json_t *doc, const char *dotted)
{
    char **segs;
    size_t n = str_split(dotted, '.', &segs);
    const json_t *node = doc;
    for (size_t i = 0; i < n && node; i++)
        node = json_object_get(json_object_get(node, "properties"), segs[i]);
    str_list_free(segs, n);
    return node;
}

static void test_fields_by_name(void **state)
{
    (void)state;
    json_t *job = spec_openapi_schema("LoRATrainingJob");
    const json_t *rank = at(job, "spec.lora.rank");
    assert_true(flag(rank, "x-kubernetes-int-or-string"));
    assert_int_equal(json_integer_value(json_object_get(rank, "minimum")), 1);
    assert_int_equal(json_integer_value(json_object_get(rank, "maximum")), 1024);
    assert_non_null(strstr(json_string_value(json_object_get(rank, "description")),
                           "usually 8, 16, 32 or 64"));
    const json_t *bits = at(job, "spec.quantization.bits");
    assert_true(flag(bits, "x-kubernetes-int-or-string"));
    assert_int_equal(json_integer_value(json_array_get(json_object_get(bits, "enum"), 0)), 4);
    assert_string_equal(json_string_value(json_array_get(json_object_get(bits, "enum"), 1)), "4");
    assert_string_equal(type_of(at(job, "spec.method")), "string");
    assert_string_equal(type_of(at(job, "spec.checkpoint.enabled")), "boolean");
    assert_non_null(strstr(json_string_value(json_object_get(at(job, "spec.lora.dropout"),
                                                             "description")),
                           "[0, 1)"));
    assert_true(flag(at(job, "spec.resources.cpu"), "x-kubernetes-int-or-string"));
    assert_true(flag(at(job, "spec.resources.cpu"), "exclusiveMinimum"));
    assert_true(flag(at(job, "spec.timeout.maxDuration"), "x-kubernetes-int-or-string"));
    assert_true(flag(at(job, "spec.trainingData.samples"), "x-kubernetes-int-or-string"));
    assert_true(flag(at(job, "spec.trainer.command"), "x-kubernetes-preserve-unknown-fields"));
    assert_true(flag(at(job, "spec.trainer.env"), "x-kubernetes-preserve-unknown-fields"));
    assert_true(flag(at(job, "spec.hyperparams.flashAttention"),
                     "x-kubernetes-preserve-unknown-fields"));
    const json_t *req = json_object_get(at(job, "spec.trainingData"), "required");
    assert_string_equal(json_string_value(json_array_get(req, 0)), "datasetPath");
    req = json_object_get(at(job, "spec"), "required");
    assert_int_equal(json_array_size(req), 2); /* baseModel, trainingData */
    json_decref(job);

    json_t *exp = spec_openapi_schema("LoRAExperiment");
    const json_t *tmpl = at(exp, "spec.template");
    assert_null(json_object_get(tmpl, "required")); /* either form */
    assert_non_null(at(exp, "spec.template.lora.rank"));
    assert_non_null(at(exp, "spec.template.metadata.labels"));
    assert_true(flag(at(exp, "spec.template.spec.lora.rank"), "x-kubernetes-int-or-string"));
    assert_int_equal(json_array_size(json_object_get(at(exp, "spec.template.spec"), "required")),
                     2);
    expect_free_form(at(exp, "spec.matrix"), "spec.matrix");
    req = json_object_get(at(exp, "spec"), "required");
    assert_int_equal(json_array_size(req), 2); /* template, matrix */
    json_decref(exp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_job_schema_is_the_tables),
        cmocka_unit_test(test_experiment_schema_is_the_tables),
        cmocka_unit_test(test_structural),
        cmocka_unit_test(test_fields_by_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
