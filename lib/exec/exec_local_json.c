/* exec_local_json.c: the local backend's two JSON documents: the handle
 * (stored in the attempt row, written to current.json and handle.json;
 * everything a new server needs to re-attach) and the exit record the
 * supervisor writes atomically when the trainer has ended. jansson only. */
#include "exec_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *exec_json_str(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

double exec_json_num(json_t *o, const char *key, double dflt)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

static char *dump(json_t *o)
{
    char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    if (!text) abort(); /* jansson fails only on allocation */
    char *out = xstrdup(text);
    free(text);
    return out;
}

/* ---- the handle ---- */

char *exec_local_desc_json(const exec_local_desc *d)
{
    json_t *o = json_object();
    json_object_set_new(o, "backend", json_string("local"));
    json_object_set_new(o, "version", json_integer(EXEC_HANDLE_VERSION));
    json_object_set_new(o, "job_dir", json_string(d->job_dir));
    json_object_set_new(o, "work_dir", json_string(d->work_dir));
    json_object_set_new(o, "log", json_string(d->log_path));
    if (d->checkpoint_dir) json_object_set_new(o, "checkpoint_dir", json_string(d->checkpoint_dir));
    json_object_set_new(o, "attempt", json_integer(d->attempt));
    json_object_set_new(o, "started_at", json_real(d->started_at));
    json_object_set_new(o, "boot_id", json_string(d->ids.boot_id));
    json_object_set_new(o, "shim_pid", json_integer(d->ids.shim_pid));
    json_object_set_new(o, "shim_start", json_integer((json_int_t)d->ids.shim_start));
    json_object_set_new(o, "trainer_pid", json_integer(d->ids.trainer_pid));
    json_object_set_new(o, "trainer_start", json_integer((json_int_t)d->ids.trainer_start));
    json_t *codes = json_array();
    for (size_t i = 0; i < d->n_no_retry; i++) json_array_append_new(codes, json_integer(d->no_retry[i]));
    json_object_set_new(o, "no_retry_codes", codes);
    if (d->term_at > 0) json_object_set_new(o, "term_at", json_real(d->term_at));
    if (d->kill_at > 0) json_object_set_new(o, "kill_at", json_real(d->kill_at));
    if (d->kill_sent) json_object_set_new(o, "kill_sent", json_true());
    if (d->sandbox_set) {
        json_t *b = json_object();
        json_object_set_new(b, "on", json_boolean(d->sandboxed));
        json_object_set_new(b, "uid", json_integer(d->sandbox_uid));
        json_object_set_new(b, "gid", json_integer(d->sandbox_gid));
        if (d->sandbox_note) json_object_set_new(b, "note", json_string(d->sandbox_note));
        json_object_set_new(o, "sandbox", b);
    }
    return dump(o);
}

static bool need_str(json_t *o, const char *key, char **out, char *err, size_t errsz)
{
    const char *v = exec_json_str(o, key);
    if (!v || !*v) {
        snprintf(err, errsz, "the handle has no \"%s\"", key);
        return false;
    }
    *out = xstrdup(v);
    return true;
}

static bool need_int(json_t *o, const char *key, json_int_t *out, char *err, size_t errsz)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        snprintf(err, errsz, "the handle has no \"%s\" (a non-negative integer)", key);
        return false;
    }
    *out = json_integer_value(v);
    return true;
}

static bool parse_ids(json_t *o, exec_local_ids *ids, char *err, size_t errsz)
{
    json_int_t sp, ss, tp, ts;
    if (!need_int(o, "shim_pid", &sp, err, errsz) || !need_int(o, "shim_start", &ss, err, errsz) ||
        !need_int(o, "trainer_pid", &tp, err, errsz) ||
        !need_int(o, "trainer_start", &ts, err, errsz))
        return false;
    ids->shim_pid = (int)sp;
    ids->shim_start = (uint64_t)ss;
    ids->trainer_pid = (int)tp;
    ids->trainer_start = (uint64_t)ts;
    const char *boot = exec_json_str(o, "boot_id");
    snprintf(ids->boot_id, sizeof ids->boot_id, "%s", boot ? boot : "");
    return true;
}

static bool parse_desc(json_t *o, exec_local_desc *d, char *err, size_t errsz)
{
    const char *backend = exec_json_str(o, "backend");
    if (!backend || strcmp(backend, "local") != 0) {
        snprintf(err, errsz, "not a handle of the local executor (backend \"%s\")",
                 backend ? backend : "?");
        return false;
    }
    json_int_t version, attempt;
    if (!need_int(o, "version", &version, err, errsz)) return false;
    if (version != EXEC_HANDLE_VERSION) {
        snprintf(err, errsz, "handle version %lld; this lathe reads version %d",
                 (long long)version, EXEC_HANDLE_VERSION);
        return false;
    }
    if (!need_str(o, "job_dir", &d->job_dir, err, errsz) ||
        !need_str(o, "work_dir", &d->work_dir, err, errsz) ||
        !need_str(o, "log", &d->log_path, err, errsz) ||
        !need_int(o, "attempt", &attempt, err, errsz) || !parse_ids(o, &d->ids, err, errsz))
        return false;
    d->attempt = (int)attempt;
    const char *ck = exec_json_str(o, "checkpoint_dir");
    d->checkpoint_dir = ck ? xstrdup(ck) : NULL;
    d->started_at = exec_json_num(o, "started_at", 0);
    d->term_at = exec_json_num(o, "term_at", 0);
    d->kill_at = exec_json_num(o, "kill_at", 0);
    d->kill_sent = json_is_true(json_object_get(o, "kill_sent"));
    json_t *b = json_object_get(o, "sandbox"); /* absent in older handles */
    if (json_is_object(b)) {
        d->sandbox_set = true;
        d->sandboxed = json_is_true(json_object_get(b, "on"));
        d->sandbox_uid = (long long)exec_json_num(b, "uid", -1);
        d->sandbox_gid = (long long)exec_json_num(b, "gid", -1);
        const char *note = exec_json_str(b, "note");
        d->sandbox_note = note ? xstrdup(note) : NULL;
    }
    json_t *codes = json_object_get(o, "no_retry_codes");
    size_t n = json_is_array(codes) ? json_array_size(codes) : 0;
    d->no_retry = xcalloc(n ? n : 1, sizeof *d->no_retry);
    for (size_t i = 0; i < n; i++) {
        json_t *c = json_array_get(codes, i);
        if (json_is_integer(c)) d->no_retry[d->n_no_retry++] = (int)json_integer_value(c);
    }
    return true;
}

bool exec_local_desc_parse(const char *text, exec_local_desc *d, char *err, size_t errsz)
{
    memset(d, 0, sizeof *d);
    json_error_t je;
    json_t *o = json_loads(text ? text : "", 0, &je);
    if (!json_is_object(o)) {
        snprintf(err, errsz, "the handle is not a JSON object: %s (line %d)",
                 o ? "another JSON value" : je.text, je.line);
        json_decref(o);
        return false;
    }
    bool ok = parse_desc(o, d, err, errsz);
    json_decref(o);
    if (!ok) exec_local_desc_free(d);
    return ok;
}

void exec_local_desc_free(exec_local_desc *d)
{
    free(d->job_dir);
    free(d->work_dir);
    free(d->log_path);
    free(d->checkpoint_dir);
    free(d->no_retry);
    free(d->sandbox_note);
    memset(d, 0, sizeof *d);
}

/* ---- the exit record ---- */

char *exec_exit_record_json(const exec_exit_record *r)
{
    json_t *o = json_object();
    json_object_set_new(o, "exit_code", json_integer(r->exit_code));
    json_object_set_new(o, "signal", json_integer(r->signal));
    json_object_set_new(o, "term_sent", json_boolean(r->term_sent));
    json_object_set_new(o, "kill_sent", json_boolean(r->kill_sent));
    json_object_set_new(o, "oom_line", json_boolean(r->oom_line));
    if (r->oom_line) {
        json_object_set_new(o, "oom_line_no", json_integer(r->oom_line_no));
        json_object_set_new(o, "oom_text", json_string(r->oom_text));
    }
    json_object_set_new(o, "oom_kills", json_integer(r->oom_kills));
    json_object_set_new(o, "started_at", json_real(r->started_at));
    json_object_set_new(o, "ended_at", json_real(r->ended_at));
    return dump(o);
}

bool exec_exit_record_parse(const char *text, exec_exit_record *r)
{
    memset(r, 0, sizeof *r);
    json_t *o = json_loads(text, 0, NULL);
    json_t *code = json_object_get(o, "exit_code");
    if (!json_is_object(o) || !json_is_integer(code)) {
        json_decref(o);
        return false;
    }
    r->exit_code = (int)json_integer_value(code);
    r->signal = (int)exec_json_num(o, "signal", 0);
    r->term_sent = json_is_true(json_object_get(o, "term_sent"));
    r->kill_sent = json_is_true(json_object_get(o, "kill_sent"));
    r->oom_line = json_is_true(json_object_get(o, "oom_line"));
    r->oom_line_no = (long)exec_json_num(o, "oom_line_no", 0);
    const char *t = exec_json_str(o, "oom_text");
    snprintf(r->oom_text, sizeof r->oom_text, "%s", t ? t : "");
    r->oom_kills = (int)exec_json_num(o, "oom_kills", -1);
    r->started_at = exec_json_num(o, "started_at", 0);
    r->ended_at = exec_json_num(o, "ended_at", 0);
    json_decref(o);
    return true;
}
