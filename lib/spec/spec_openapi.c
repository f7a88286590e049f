/* spec_openapi.c: the OpenAPI v3 schema of a LoRATrainingJob or a
 * LoRAExperiment, generated from the very tables the decoder reads
 * (spec_job.c, spec_experiment.c), so the CustomResourceDefinitions of
 * lib/k8s accept what `lathe validate` accepts: one source of truth.
 *
 * The schema is structural, as apiextensions.k8s.io/v1 wants it: every
 * mapping is `type: object` with its `properties` (unknown keys are pruned
 * by the API server, so the keys are exactly the decoder's), every list
 * has `items`. Values are typed as far as a structural schema can without
 * refusing a document `lathe validate` accepts: the decoder reads values by
 * the field's type, so quotes never matter (`rank: "32"`, `alpha: "64"`,
 * `cpu: "4"`, as Kubernetes users write them) and a single name is a list
 * of one; a structural schema has no number-or-string type, so such values
 * are kept as written and lathe's own validation (the Invalid condition,
 * with `lathe validate`'s messages) checks them. Per field type:
 *
 *   SF_STR            string; minLength 1 unless "" is allowed; DNS-1123
 *                     names with maxLength 63 and their pattern
 *   SF_INT .. SF_U64  x-kubernetes-int-or-string (32 or "32", 50K), with
 *                     minimum / maximum / exclusive* from SF_MIN / SF_MAX for
 *                     the integer form
 *   SF_DURATION, SF_BYTES, SF_COUNT, SF_CPU
 *                     int-or-string too ("8h", "32Gi", "7B", 4) with the range;
 *                     a fraction is written "1.5" or 1500m
 *   SF_DOUBLE         any value (a number, or a quoted one)
 *   SF_BOOL           boolean
 *   SF_ENUM(_STR)     string with the table's names (aliases included; the
 *                     decoder also takes them in any case, the schema as the
 *                     table spells them); int-or-string when every name is a
 *                     number (quantization.bits: 4 or "4")
 *   SF_TOGGLE         any value (true, false or "auto")
 *   SF_STRLIST        any value (a list of names, or one name)
 *   SF_KV             any value (a mapping NAME: value, or Kubernetes' list
 *                     of {name, value})
 *   SF_OBJ, SF_LIST   object / array of objects from the nested table
 *   SF_CUSTOM, SF_IGNORE
 *                     the shape of their `like` fields, else any value
 *
 * "Any value" is x-kubernetes-preserve-unknown-fields without a type; its
 * description says what lathe takes there. Descriptions are the decoder's
 * "expected" text plus the table's hint. metadata is the API server's own:
 * a CRD may only restrict metadata.name, so only the name is described.
 */
#include "spec_internal.h"

#include <stdlib.h>
#include <string.h>

#define DNS_PATTERN "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"

static json_t *field_node(const spec_field *f);

/* "an integer from 1 to 1024. LoRA ranks are usually 8, 16, 32 or 64" */
static void describe(json_t *node, const spec_field *f)
{
    sb d;
    sb_init(&d);
    /* "a text", "true or false" say no more than the type; a value kept
     * as written says what it is in words */
    bool plain = (f->type == SF_STR && !(f->flags & SF_DNS)) || f->type == SF_BOOL ||
                 f->type == SF_OBJ || f->type == SF_LIST || f->type == SF_IGNORE ||
                 f->type == SF_CUSTOM;
    if (!plain) spec_field_expected(f, &d);
    if (f->hint) sb_printf(&d, "%s%s", d.len ? ". " : "", f->hint);
    if (d.len) json_object_set_new(node, "description", json_string(sb_str(&d)));
    sb_free(&d);
}

/* A bound as JSON: whole numbers as integers. */
static json_t *number(double v)
{
    if (v > -9e15 && v < 9e15 && v == (double)(int64_t)v) return json_integer((json_int_t)v);
    return json_real(v);
}

/* minimum / maximum and their exclusive flags (OpenAPI v3.0 booleans). */
static void set_range(json_t *node, const spec_field *f)
{
    if (f->flags & SF_MIN) {
        json_object_set_new(node, "minimum", number(f->min));
        if (f->flags & SF_MIN_EXCL) json_object_set_new(node, "exclusiveMinimum", json_true());
    }
    if (f->flags & SF_MAX) {
        json_object_set_new(node, "maximum", number(f->max));
        if (f->flags & SF_MAX_EXCL) json_object_set_new(node, "exclusiveMaximum", json_true());
    }
}

/* An integer or a string, the one union a structural schema allows. */
static json_t *int_or_string(void)
{
    return json_pack("{s:b, s:[{s:s}, {s:s}]}", "x-kubernetes-int-or-string", 1, "anyOf", "type",
                     "integer", "type", "string");
}

static json_t *any_value(void)
{
    return json_pack("{s:b}", "x-kubernetes-preserve-unknown-fields", 1);
}

static bool all_integers(const spec_enum_def *e)
{
    for (size_t i = 0; i < e->n; i++) {
        int64_t v;
        if (!spec_parse_i64(e->e[i].name, &v)) return false;
    }
    return e->n > 0;
}

static json_t *enum_node(const spec_enum_def *e)
{
    bool ints = all_integers(e);
    json_t *vals = json_array();
    for (size_t i = 0; i < e->n; i++) { /* numbers: 4 and "4" */
        int64_t v = 0;
        if (ints && spec_parse_i64(e->e[i].name, &v)) json_array_append_new(vals, json_integer(v));
        json_array_append_new(vals, json_string(e->e[i].name));
    }
    json_t *o = ints ? int_or_string() : json_pack("{s:s}", "type", "string");
    json_object_set_new(o, "enum", vals);
    return o;
}

/* {type: object, properties, required?} of a table; of several tables,
 * their union (their keys together, none required). */
static json_t *object_node(const spec_schema *const *subs, size_t n)
{
    json_t *props = json_object(), *req = json_array();
    for (size_t k = 0; k < n; k++)
        for (size_t i = 0; i < subs[k]->n_fields; i++) {
            const spec_field *f = &subs[k]->fields[i];
            if (!json_object_get(props, f->key))
                json_object_set_new(props, f->key, field_node(f));
            if (n == 1 && (f->flags & SF_REQUIRED))
                json_array_append_new(req, json_string(f->key));
        }
    json_t *o = json_pack("{s:s, s:o}", "type", "object", "properties", props);
    if (json_array_size(req)) json_object_set_new(o, "required", req);
    else json_decref(req);
    return o;
}

/* The shape of a custom or ignored field: its like fields, else anything. */
static json_t *like_node(const spec_field *f)
{
    if (!f->like || f->n_like == 0) return any_value();
    if (f->n_like == 1) return field_node(&f->like[0]);
    const spec_schema *subs[8];
    size_t n = 0;
    for (size_t i = 0; i < f->n_like && n < 8; i++)
        if (f->like[i].type == SF_OBJ) subs[n++] = f->like[i].sub;
    return n ? object_node(subs, n) : any_value();
}

static json_t *string_node(const spec_field *f)
{
    json_t *o = json_pack("{s:s}", "type", "string");
    if (f->flags & SF_DNS) {
        json_object_set_new(o, "maxLength", json_integer(63));
        json_object_set_new(o, "pattern", json_string(DNS_PATTERN));
    }
    if (!(f->flags & SF_EMPTY_OK)) json_object_set_new(o, "minLength", json_integer(1));
    return o;
}

static json_t *integer_node(const spec_field *f)
{
    json_t *o = int_or_string();
    set_range(o, f);
    if (f->type == SF_U64 && !(f->flags & SF_MIN)) json_object_set_new(o, "minimum", json_integer(0));
    return o;
}

static json_t *field_node(const spec_field *f)
{
    json_t *o = NULL;
    switch (f->type) {
    case SF_STR: o = string_node(f); break;
    case SF_INT:
    case SF_LONG:
    case SF_I64:
    case SF_U64: o = integer_node(f); break;
    case SF_DOUBLE: o = any_value(); break;
    case SF_BOOL: o = json_pack("{s:s}", "type", "boolean"); break;
    case SF_ENUM:
    case SF_ENUM_STR: o = enum_node(f->enm); break;
    case SF_DURATION:
    case SF_BYTES:
    case SF_COUNT:
    case SF_CPU:
        o = int_or_string();
        set_range(o, f);
        break;
    case SF_TOGGLE:
    case SF_STRLIST:
    case SF_KV: o = any_value(); break;
    case SF_OBJ: o = object_node(&f->sub, 1); break;
    case SF_LIST:
        o = json_pack("{s:s, s:o}", "type", "array", "items", object_node(&f->sub, 1));
        break;
    case SF_CUSTOM:
    case SF_IGNORE: o = like_node(f); break;
    }
    describe(o, f);
    return o;
}

/* metadata: the API server's; a CRD may restrict the name only. */
static json_t *metadata_node(const spec_field *f)
{
    json_t *props = json_object();
    for (size_t i = 0; i < f->sub->n_fields; i++)
        if (strcmp(f->sub->fields[i].key, "name") == 0)
            json_object_set_new(props, "name", field_node(&f->sub->fields[i]));
    return json_pack("{s:s, s:o}", "type", "object", "properties", props);
}

/* The whole document: apiVersion and kind (strings: the API server's),
 * metadata, spec and whatever else the top table holds. */
static json_t *document_node(const spec_schema *s, const char *what)
{
    json_t *props = json_object(), *req = json_array();
    for (size_t i = 0; i < s->n_fields; i++) {
        const spec_field *f = &s->fields[i];
        json_t *node;
        if (strcmp(f->key, "apiVersion") == 0 || strcmp(f->key, "kind") == 0)
            node = json_pack("{s:s}", "type", "string");
        else if (strcmp(f->key, "metadata") == 0 && f->type == SF_OBJ)
            node = metadata_node(f);
        else
            node = field_node(f);
        json_object_set_new(props, f->key, node);
        /* metadata is always there: the API server makes it */
        if ((f->flags & SF_REQUIRED) && strcmp(f->key, "metadata") != 0)
            json_array_append_new(req, json_string(f->key));
    }
    json_t *o = json_pack("{s:s, s:s, s:o}", "type", "object", "description", what,
                          "properties", props);
    if (json_array_size(req)) json_object_set_new(o, "required", req);
    else json_decref(req);
    return o;
}

json_t *spec_openapi_schema(const char *kind)
{
    if (!kind) return NULL;
    if (strcmp(kind, "LoRATrainingJob") == 0)
        return document_node(&spec_job_schema,
                             "A LoRA fine-tuning job: lathe plans it, queues it under its "
                             "team's quota and runs it as a batch/v1 Job (docs/spec.md).");
    if (strcmp(kind, "LoRAExperiment") == 0)
        return document_node(&spec_experiment_schema,
                             "A job template and a matrix of values, expanded by lathe into "
                             "one LoRA fine-tuning job per combination (docs/spec.md).");
    return NULL;
}
