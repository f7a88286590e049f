/* spec_values.c: the reverse of the decoder: the values a struct holds,
 * read back through the same schema table into JSON that the decoder
 * takes again (spec_schema_values, spec_internal.h). Only values that
 * differ from a default struct are written, so the output holds what a
 * file said and nothing a later default would contradict. Durations,
 * sizes and counts are written as plain numbers (seconds, bytes), which
 * every unit parser accepts. SF_CUSTOM and SF_IGNORE fields are skipped:
 * their decoders are not reversible here.
 */
#include "spec_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define AT(type, b) ((type const *)(const void *)((const char *)(b) + f->off))
#define AT_N(b) (*(const size_t *)(const void *)((const char *)(b) + f->off_n))

static json_t *number(double v)
{
    if (v > -9e15 && v < 9e15 && v == floor(v)) return json_integer((json_int_t)v);
    return json_real(v);
}

static bool same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool same_kv(const spec_kv *a, size_t na, const spec_kv *b, size_t nb)
{
    if (na != nb) return false;
    for (size_t i = 0; i < na; i++)
        if (!same_str(a[i].key, b[i].key) || !same_str(a[i].value, b[i].value)) return false;
    return true;
}

static bool same_strv(char *const *a, size_t na, char *const *b, size_t nb)
{
    if (na != nb) return false;
    for (size_t i = 0; i < na; i++)
        if (!same_str(a[i], b[i])) return false;
    return true;
}

/* The elements of an SF_LIST, each against a freshly initialised one. */
static json_t *list_values(const spec_field *f, const void *base)
{
    const spec_schema *s = f->sub;
    const char *elems = *AT(char *, base);
    size_t n = AT_N(base);
    char *dflt = xcalloc(1, s->elem_size ? s->elem_size : 1);
    if (s->init) s->init(dflt);
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, spec_schema_values(s, elems + i * s->elem_size, dflt));
    free(dflt); /* the tables' init functions set numbers only */
    return a;
}

/* One field's value, or NULL when it equals the default. */
static json_t *field_value(const spec_field *f, const void *base, const void *dflt)
{
    switch (f->type) {
    case SF_STR:
    case SF_ENUM_STR: {
        const char *v = *AT(char *, base);
        if (!v || (dflt && same_str(v, *AT(char *, dflt)))) return NULL;
        return json_string(v);
    }
    case SF_INT:
    case SF_ENUM:
    case SF_TOGGLE: {
        int v = *AT(int, base);
        if (dflt && v == *AT(int, dflt)) return NULL;
        if (f->type == SF_ENUM) return json_string(spec_enum_name(f->enm, v));
        if (f->type == SF_TOGGLE)
            return v == TOGGLE_AUTO ? json_string("auto") : json_boolean(v == TOGGLE_ON);
        return json_integer(v);
    }
    case SF_LONG:
    case SF_I64: {
        int64_t v = *AT(int64_t, base);
        if (dflt && v == *AT(int64_t, dflt)) return NULL;
        return json_integer((json_int_t)v);
    }
    case SF_U64: {
        uint64_t v = *AT(uint64_t, base);
        if (dflt && v == *AT(uint64_t, dflt)) return NULL;
        return json_integer((json_int_t)v);
    }
    case SF_DOUBLE:
    case SF_DURATION:
    case SF_BYTES:
    case SF_COUNT:
    case SF_CPU: {
        double v = *AT(double, base);
        if (dflt && v == *AT(double, dflt)) return NULL;
        return number(v);
    }
    case SF_BOOL: {
        bool v = *AT(bool, base);
        if (dflt && v == *AT(bool, dflt)) return NULL;
        return json_boolean(v);
    }
    case SF_STRLIST: {
        char *const *v = *AT(char **, base);
        size_t n = AT_N(base);
        if (!n || (dflt && same_strv(v, n, *AT(char **, dflt), AT_N(dflt)))) return NULL;
        json_t *a = json_array();
        for (size_t i = 0; i < n; i++) json_array_append_new(a, json_string(v[i]));
        return a;
    }
    case SF_KV: {
        const spec_kv *kv = *AT(spec_kv *, base);
        size_t n = AT_N(base);
        if (!n || (dflt && same_kv(kv, n, *AT(spec_kv *, dflt), AT_N(dflt)))) return NULL;
        json_t *o = json_object();
        for (size_t i = 0; i < n; i++) json_object_set_new(o, kv[i].key, json_string(kv[i].value));
        return o;
    }
    case SF_OBJ: {
        json_t *o = spec_schema_values(f->sub, base, dflt);
        if (json_object_size(o)) return o;
        json_decref(o);
        return NULL;
    }
    case SF_LIST: {
        if (!AT_N(base)) return NULL;
        return list_values(f, base);
    }
    case SF_CUSTOM:
    case SF_IGNORE: return NULL;
    }
    return NULL;
}

json_t *spec_schema_values(const spec_schema *s, const void *base, const void *dflt)
{
    json_t *o = json_object();
    for (size_t i = 0; i < s->n_fields; i++) {
        json_t *v = field_value(&s->fields[i], base, dflt);
        if (v) json_object_set_new(o, s->fields[i].key, v);
    }
    return o;
}
