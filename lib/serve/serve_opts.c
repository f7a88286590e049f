/* serve_opts.c: the command line of `lathe serve` (its help text is in
 * src/cmd_serve.c and docs/serve.md): every option's value checked with a
 * message that names the option and the fix, the defaults, --adapter
 * NAME=DIR pairs, and the API key read from --api-key-file (or the
 * environment's LATHE_API_KEY) so that it need not appear in the process
 * list. */
#include "serve_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct opt_ctx {
    sv_serve_opts *o;
    char *err;
    size_t errsz;
} opt_ctx;

static bool fail(opt_ctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool fail(opt_ctx *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->err, x->errsz, fmt, ap);
    va_end(ap);
    return false;
}

static bool int_value(opt_ctx *x, const char *opt, const char *v, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || end == v || *end || n < lo || n > hi) {
        snprintf(x->err, x->errsz, "%s %s: give a whole number from %ld to %ld", opt, v, lo, hi);
        return false;
    }
    *out = (int)n;
    return true;
}

static bool bytes_value(opt_ctx *x, const char *opt, const char *v, double lo, size_t *out)
{
    double b;
    if (!units_parse_bytes(v, &b) || b < lo || b > 1e15) {
        snprintf(x->err, x->errsz, "%s %s: give a size of at least %.0f bytes, such as 512Mi, "
                 "4Gi or 1048576", opt, v, lo);
        return false;
    }
    *out = (size_t)b;
    return true;
}

static bool read_key_file(opt_ctx *x, const char *path)
{
    char why[512];
    size_t len;
    char *text = file_read_all(path, 4096, &len, why, sizeof why);
    if (!text) return fail(x, "--api-key-file %s: %s", path, why);
    while (len && strchr(" \t\r\n", text[len - 1])) text[--len] = '\0';
    size_t start = strspn(text, " \t\r\n");
    if (start == len || strpbrk(text + start, "\r\n")) {
        free(text);
        return fail(x, "--api-key-file %s: the file must hold the key on one line (and nothing "
                    "else)", path);
    }
    free(x->o->api_key);
    x->o->api_key = xstrdup(text + start);
    free(text);
    return true;
}

static bool add_adapter(opt_ctx *x, const char *v)
{
    sv_serve_opts *o = x->o;
    const char *eq = strchr(v, '=');
    if (!eq || eq == v || !eq[1])
        return fail(x, "--adapter %s: give NAME=DIR, the model id clients ask for and the PEFT "
                    "adapter folder", v);
    char *name = xstrndup(v, (size_t)(eq - v));
    if (!sv_name_ok(name)) {
        free(name);
        return fail(x, "--adapter %s: the name must be 1 to 128 characters of letters, digits "
                    "and ._:@/+-", v);
    }
    for (size_t i = 0; i < o->n_adapters; i++) {
        if (strcmp(o->adapters[i].name, name) == 0) {
            free(name);
            return fail(x, "--adapter %s: the name is given twice; each adapter needs its own", v);
        }
    }
    o->adapters = xrealloc(o->adapters, (o->n_adapters + 1) * sizeof *o->adapters);
    o->adapters[o->n_adapters++] = (sv_adapter_arg){name, xstrdup(eq + 1)};
    return true;
}

static void set_str(char **field, const char *v)
{
    free(*field);
    *field = xstrdup(v);
}

/* One "--name VALUE" option; false with a message. */
static bool one_option(opt_ctx *x, const char *opt, const char *v)
{
    sv_serve_opts *o = x->o;
    sv_engine_opts *e = &o->engine;
    double secs;
    if (!strcmp(opt, "--model")) set_str(&o->model_dir, v);
    else if (!strcmp(opt, "--served-model-name")) set_str(&o->served_name, v);
    else if (!strcmp(opt, "--tokenizer")) set_str(&o->tokenizer, v);
    else if (!strcmp(opt, "--host")) set_str(&o->host, v);
    else if (!strcmp(opt, "--api-key")) set_str(&o->api_key, v);
    else if (!strcmp(opt, "--api-key-file")) return read_key_file(x, v);
    else if (!strcmp(opt, "--adapter")) return add_adapter(x, v);
    else if (!strcmp(opt, "--chat-template")) {
        chat_family f;
        if (!chat_family_parse(v, &f) || f == CHAT_NONE)
            return fail(x, "--chat-template %s: not a family lathe renders; give one of chatml, "
                        "qwen2, qwen2.5, qwen3, llama3, llama3-early, llama3.1, llama3.2", v);
        set_str(&o->chat_template, v);
    } else if (!strcmp(opt, "--port")) return int_value(x, opt, v, 0, 65535, &o->port);
    else if (!strcmp(opt, "--max-adapters")) return int_value(x, opt, v, 1, 4096, &e->max_adapters);
    else if (!strcmp(opt, "--max-batch")) return int_value(x, opt, v, 1, 4096, &e->max_batch);
    else if (!strcmp(opt, "--max-waiting")) return int_value(x, opt, v, 1, 1000000, &e->max_waiting);
    else if (!strcmp(opt, "--max-context")) return int_value(x, opt, v, 2, 1 << 24, &e->max_context);
    else if (!strcmp(opt, "--prefill-chunk")) return int_value(x, opt, v, 1, 1 << 20, &e->prefill_chunk);
    else if (!strcmp(opt, "--max-connections")) return int_value(x, opt, v, 1, 65536, &o->max_connections);
    else if (!strcmp(opt, "--threads")) return int_value(x, opt, v, 1, 1024, &o->threads);
    else if (!strcmp(opt, "--kv-memory")) return bytes_value(x, opt, v, 65536, &e->kv_bytes);
    else if (!strcmp(opt, "--max-body")) return bytes_value(x, opt, v, 1024, &o->max_body);
    else if (!strcmp(opt, "--drain-timeout")) {
        if (!units_parse_duration(v, &secs) || secs > 86400)
            return fail(x, "--drain-timeout %s: give a duration such as 30s, 2m or 120", v);
        o->drain_timeout = secs;
    } else {
        return fail(x, "unknown option %s (see `lathe serve --help`)", opt);
    }
    return true;
}

static bool check(opt_ctx *x, bool key_twice)
{
    sv_serve_opts *o = x->o;
    if (!o->model_dir) return fail(x, "give --model DIR, the base model's folder");
    if (key_twice) return fail(x, "give --api-key or --api-key-file, not both");
    if (o->api_key && !*o->api_key) return fail(x, "--api-key: the key is empty");
    const char *base = o->served_name ? o->served_name : o->model_dir;
    for (size_t i = 0; i < o->n_adapters; i++)
        if (strcmp(o->adapters[i].name, base) == 0)
            return fail(x, "--adapter %s: the name is the base model's id; choose another",
                        o->adapters[i].name);
    return true;
}

int sv_opts_parse(sv_serve_opts *o, int argc, char **argv, char *err, size_t errsz)
{
    memset(o, 0, sizeof *o);
    opt_ctx x = {o, err, errsz};
    o->port = 8000;
    o->max_body = 4u << 20;
    o->max_connections = 256;
    o->drain_timeout = 120;
    int keys = 0;
    bool ok = true;
    for (int i = 1; ok && i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            o->quiet = true;
        } else if (strncmp(a, "--", 2) != 0) {
            ok = fail(&x, "unexpected argument %s: every value follows its option (--model DIR)",
                      a);
        } else if (i + 1 >= argc) {
            ok = fail(&x, "%s needs a value", a);
        } else {
            keys += !strcmp(a, "--api-key") || !strcmp(a, "--api-key-file");
            ok = one_option(&x, a, argv[i + 1]);
            i++;
        }
    }
    if (ok && !o->host) o->host = xstrdup("127.0.0.1");
    /* the key from the environment (a Kubernetes Secret) when no option gave one */
    const char *env_key = getenv("LATHE_API_KEY");
    if (ok && !o->api_key && env_key && *env_key) o->api_key = xstrdup(env_key);
    if (ok) ok = check(&x, keys > 1);
    if (!ok) sv_opts_free(o);
    return ok ? LT_EXIT_OK : LT_EXIT_USAGE;
}

void sv_opts_free(sv_serve_opts *o)
{
    free(o->model_dir);
    free(o->served_name);
    free(o->tokenizer);
    free(o->chat_template);
    free(o->host);
    free(o->api_key);
    for (size_t i = 0; i < o->n_adapters; i++) {
        free(o->adapters[i].name);
        free(o->adapters[i].dir);
    }
    free(o->adapters);
    memset(o, 0, sizeof *o);
}
