/* k8s_lines.c: the pure pieces under the streams: clocks and RFC 3339
 * times, the newline splitter of watch and log streams, the watch-event
 * parser and resourceVersion comparison. */
#include "k8s_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- times ---- */
double k8s_now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double k8s_now_real(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

bool k8s_sleep(double seconds, const atomic_bool *stop)
{
    double end = k8s_now_mono() + seconds;
    for (;;) {
        if (stop && atomic_load(stop)) return false;
        double left = end - k8s_now_mono();
        if (left <= 0) return true;
        if (left > 0.05) left = 0.05;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(left * 1e9)};
        nanosleep(&ts, NULL);
    }
}

static bool digits(const char *s, size_t n, int *out)
{
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

bool k8s_time_parse(const char *s, size_t len, int64_t *sec, int32_t *nsec)
{
    int y, mo, d, h, mi, se;
    if (len < 20) return false;
    if (!digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) || s[7] != '-' ||
        !digits(s + 8, 2, &d) || (s[10] != 'T' && s[10] != 't') || !digits(s + 11, 2, &h) ||
        s[13] != ':' || !digits(s + 14, 2, &mi) || s[16] != ':' || !digits(s + 17, 2, &se))
        return false;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60) return false;
    size_t i = 19;
    int32_t ns = 0;
    if (i < len && s[i] == '.') {
        i++;
        size_t nd = 0;
        int32_t scale = 100000000;
        while (i < len && s[i] >= '0' && s[i] <= '9') {
            if (nd < 9) ns += (s[i] - '0') * scale;
            scale /= 10;
            nd++;
            i++;
        }
        if (nd == 0) return false;
    }
    int off = 0;
    if (i < len && (s[i] == 'Z' || s[i] == 'z')) {
        i++;
    } else if (i + 6 <= len && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':') {
        int oh, om;
        if (!digits(s + i + 1, 2, &oh) || !digits(s + i + 4, 2, &om) || oh > 23 || om > 59)
            return false;
        off = (oh * 60 + om) * 60 * (s[i] == '-' ? -1 : 1);
        i += 6;
    } else {
        return false;
    }
    if (i != len) return false;
    *sec = units_days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + se - off;
    *nsec = ns;
    return true;
}

/* ---- lines ---- */
void k8s_lines_init(k8s_lines *l, size_t max, bool pieces)
{
    memset(l, 0, sizeof *l);
    sb_init(&l->buf);
    l->max = max;
    l->pieces = pieces;
}

void k8s_lines_free(k8s_lines *l)
{
    sb_free(&l->buf);
}

static int emit(k8s_lines *l, const char *p, size_t n, bool more, k8s_line_cb cb, void *ud)
{
    if (!more && n > 0 && p[n - 1] == '\r') n--;
    bool first = !l->in_line;
    l->in_line = more;
    return cb(ud, p, n, first, more);
}

int k8s_lines_feed(k8s_lines *l, const char *data, size_t n, k8s_line_cb cb, void *ud)
{
    while (n > 0) {
        const char *nl = memchr(data, '\n', n);
        size_t take = nl ? (size_t)(nl - data) : n;
        if (l->buf.len + take > l->max) {
            if (!l->pieces) {
                l->overflow = true;
                return -1;
            }
            size_t room = l->max - l->buf.len;
            sb_putn(&l->buf, data, room);
            int rc = emit(l, l->buf.buf, l->buf.len, true, cb, ud);
            sb_clear(&l->buf);
            if (rc) return rc;
            data += room;
            n -= room;
            continue;
        }
        if (!nl) {
            sb_putn(&l->buf, data, take);
            return 0;
        }
        int rc;
        if (l->buf.len == 0) {
            rc = emit(l, data, take, false, cb, ud);
        } else {
            sb_putn(&l->buf, data, take);
            rc = emit(l, l->buf.buf, l->buf.len, false, cb, ud);
            sb_clear(&l->buf);
        }
        if (rc) return rc;
        data += take + 1;
        n -= take + 1;
    }
    return 0;
}

int k8s_lines_finish(k8s_lines *l, k8s_line_cb cb, void *ud)
{
    if (l->buf.len == 0 && !l->in_line) return 0;
    int rc = emit(l, l->buf.len ? l->buf.buf : "", l->buf.len, false, cb, ud);
    sb_clear(&l->buf);
    return rc;
}

/* ---- watch events ---- */
static const struct {
    const char *name;
    k8s_wtype type;
} wtypes[] = {{"ADDED", K8S_W_ADDED},       {"MODIFIED", K8S_W_MODIFIED},
              {"DELETED", K8S_W_DELETED},   {"BOOKMARK", K8S_W_BOOKMARK},
              {"ERROR", K8S_W_ERROR}};

static const char *meta_str(const json_t *obj, const char *key)
{
    const json_t *m = json_object_get(obj, "metadata");
    const json_t *v = json_object_get(m, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

bool k8s_watch_parse_line(const char *line, size_t len, k8s_wevent *ev, char *err,
                          size_t errsz)
{
    memset(ev, 0, sizeof *ev);
    json_error_t je;
    json_t *root = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!root) {
        snprintf(err, errsz, "a watch event that is not JSON (%s at column %d)", je.text,
                 je.column);
        return false;
    }
    const json_t *t = json_object_get(root, "type");
    json_t *obj = json_object_get(root, "object");
    if (!json_is_object(root) || !json_is_string(t) || !json_is_object(obj)) {
        snprintf(err, errsz, "a watch event without a \"type\" string and an \"object\"");
        json_decref(root);
        return false;
    }
    bool known = false;
    for (size_t i = 0; i < sizeof wtypes / sizeof wtypes[0]; i++)
        if (strcmp(json_string_value(t), wtypes[i].name) == 0) {
            ev->type = wtypes[i].type;
            known = true;
        }
    if (!known) {
        snprintf(err, errsz, "a watch event of unknown type \"%.40s\"", json_string_value(t));
        json_decref(root);
        return false;
    }
    ev->object = json_incref(obj);
    json_decref(root);
    ev->rv = meta_str(obj, "resourceVersion");
    ev->ns = meta_str(obj, "namespace");
    ev->name = meta_str(obj, "name");
    if (ev->type != K8S_W_ERROR && ev->type != K8S_W_BOOKMARK && !ev->name) {
        snprintf(err, errsz, "a watch event whose object has no metadata.name");
        k8s_wevent_free(ev);
        return false;
    }
    return true;
}

void k8s_wevent_free(k8s_wevent *ev)
{
    json_decref(ev->object);
    memset(ev, 0, sizeof *ev);
}

static bool rv_int(const char *s, unsigned long long *out)
{
    if (!s || !*s || *s < '0' || *s > '9') return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return false;
    *out = v;
    return true;
}

int k8s_rv_cmp(const char *a, const char *b)
{
    unsigned long long x, y;
    if (rv_int(a, &x) && rv_int(b, &y)) return x < y ? -1 : x > y ? 1 : 0;
    if (!a || !b) return a == b ? 0 : 2;
    return strcmp(a, b) == 0 ? 0 : 2;
}
