/* spec_json_yaml.c: JSON values (jansson) printed as YAML, the one printer
 * of lathe's `-o yaml` (the client commands, `lathe render`). libyaml's
 * emitter writes the text; this file only walks the
 * value and chooses each scalar's style:
 *   - strings stay strings: a string a YAML 1.1 or 1.2 reader would take
 *     for a number, boolean, null, timestamp or merge key ("4", "500m",
 *     "True", "on", "~", "2026-12-01", "<<") is double-quoted; one that
 *     holds line breaks is a literal block ("|") when the emitter allows
 *     it (it falls back to double quotes itself otherwise); anything else is
 *     plain unless the emitter finds it needs quotes (": ", a leading "-").
 *   - integers, reals, booleans and null are plain (true, false, null);
 *     reals use the shortest text that reads back to the same double and
 *     always look like floats ("1.0", "2.5e-05").
 *   - keys keep the object's order (jansson keeps insertion order);
 *     empty objects and arrays are written {} and [].
 */
#include "spec.h"

#include "base/base.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* The emitter and the text it writes. */
typedef struct yout {
    yaml_emitter_t em;
    sb text;
    bool failed;
} yout;

/* libyaml's output handler: appends to the sb. */
static int yout_write(void *data, unsigned char *buffer, size_t size)
{
    sb_putn(data, (const char *)buffer, size);
    return 1;
}

/* Emits one event; after a failure, events are only freed. */
static void emit(yout *y, yaml_event_t *ev)
{
    if (y->failed) {
        yaml_event_delete(ev);
        return;
    }
    if (!yaml_emitter_emit(&y->em, ev)) y->failed = true;
}

/* True when a YAML reader would resolve the plain scalar s to something
 * other than a string. Conservative: anything that starts like a number
 * (a digit, a sign, a dot) is quoted, and so is every word YAML 1.1 reads
 * as a boolean or null, in any case. */
static bool plain_is_not_string(const char *s)
{
    static const char *const words[] = {"y", "yes", "n", "no", "true", "false", "on", "off",
                                        "null", "~", "<<", "=", ".inf", ".nan"};
    if (!*s || strchr("0123456789+-.", *s)) return true;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (str_ieq(s, words[i])) return true;
    return false;
}

/* One scalar event; plain_ok says a plain scalar reads back as what v is
 * (so the emitter needs no tag), quoted ones are always strings. */
static void scalar(yout *y, const char *v, size_t len, yaml_scalar_style_t style, int plain_ok)
{
    yaml_event_t ev;
    yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)v, (int)len, plain_ok, 1, style);
    emit(y, &ev);
}

/* A string value or key, styled so it reads back as the same string. */
static void string_scalar(yout *y, const char *v, size_t len)
{
    if (memchr(v, '\n', len))
        scalar(y, v, len, YAML_LITERAL_SCALAR_STYLE, 0);
    else if (strlen(v) != len || plain_is_not_string(v))
        scalar(y, v, len, YAML_DOUBLE_QUOTED_SCALAR_STYLE, 0);
    else
        scalar(y, v, len, YAML_ANY_SCALAR_STYLE, 1);
}

/* The shortest text that reads back as v, with a '.' or an exponent so
 * that YAML readers see a float. */
static void real_text(char *buf, size_t n, double v)
{
    if (isnan(v)) {
        snprintf(buf, n, ".nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, n, v < 0 ? "-.inf" : ".inf");
        return;
    }
    char t[40]; /* "%.17g" writes at most 24 characters */
    int p = 1;
    for (; p < 17; p++) {
        snprintf(t, sizeof t, "%.*g", p, v);
        if (strtod(t, NULL) == v) break;
    }
    if (p == 17) snprintf(t, sizeof t, "%.17g", v);
    const char *e = strchr(t, 'e');
    if (strchr(t, '.'))
        snprintf(buf, n, "%s", t);
    else if (e)
        snprintf(buf, n, "%.*s.0%s", (int)(e - t), t, e);
    else
        snprintf(buf, n, "%s.0", t);
}

/* One value, recursively. */
static void value(yout *y, const json_t *v)
{
    yaml_event_t ev;
    char buf[64];
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
                                            json_object_size(v) ? YAML_BLOCK_MAPPING_STYLE
                                                                : YAML_FLOW_MAPPING_STYLE);
        emit(y, &ev);
        const char *key;
        const json_t *item;
        json_object_foreach((json_t *)v, key, item) {
            string_scalar(y, key, strlen(key));
            value(y, item);
        }
        yaml_mapping_end_event_initialize(&ev);
        emit(y, &ev);
        break;
    }
    case JSON_ARRAY: {
        yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
                                             json_array_size(v) ? YAML_BLOCK_SEQUENCE_STYLE
                                                                : YAML_FLOW_SEQUENCE_STYLE);
        emit(y, &ev);
        size_t i;
        const json_t *item;
        json_array_foreach(v, i, item) value(y, item);
        yaml_sequence_end_event_initialize(&ev);
        emit(y, &ev);
        break;
    }
    case JSON_STRING: string_scalar(y, json_string_value(v), json_string_length(v)); break;
    case JSON_INTEGER:
        snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        scalar(y, buf, strlen(buf), YAML_PLAIN_SCALAR_STYLE, 1);
        break;
    case JSON_REAL:
        real_text(buf, sizeof buf, json_real_value(v));
        scalar(y, buf, strlen(buf), YAML_PLAIN_SCALAR_STYLE, 1);
        break;
    case JSON_TRUE: scalar(y, "true", 4, YAML_PLAIN_SCALAR_STYLE, 1); break;
    case JSON_FALSE: scalar(y, "false", 5, YAML_PLAIN_SCALAR_STYLE, 1); break;
    case JSON_NULL: scalar(y, "null", 4, YAML_PLAIN_SCALAR_STYLE, 1); break;
    }
}

/* One document: "---" (unless implicit) then the value. */
static void document(yout *y, const json_t *obj, int implicit)
{
    yaml_event_t ev;
    yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, implicit);
    emit(y, &ev);
    value(y, obj);
    yaml_document_end_event_initialize(&ev, 1);
    emit(y, &ev);
}

char *spec_json_to_yaml(const json_t *objs, bool documents)
{
    if (!objs) return xstrdup("");
    yout y;
    memset(&y, 0, sizeof y);
    sb_init(&y.text);
    if (!yaml_emitter_initialize(&y.em)) return xstrdup("");
    yaml_emitter_set_output(&y.em, yout_write, &y.text);
    yaml_emitter_set_unicode(&y.em, 1);
    yaml_emitter_set_width(&y.em, -1); /* never fold long lines */
    yaml_emitter_set_indent(&y.em, 2);
    yaml_event_t ev;
    yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING);
    emit(&y, &ev);
    if (documents && json_is_array(objs)) {
        size_t i;
        const json_t *o;
        json_array_foreach(objs, i, o) document(&y, o, 0);
    } else {
        document(&y, objs, !documents);
    }
    yaml_stream_end_event_initialize(&ev);
    emit(&y, &ev);
    yaml_emitter_flush(&y.em);
    yaml_emitter_delete(&y.em);
    if (y.failed) {
        /* only a string that is not UTF-8 gets here: jansson refuses those */
        sb_free(&y.text);
        return xstrdup("");
    }
    char *out = sb_take(&y.text);
    return out ? out : xstrdup("");
}
