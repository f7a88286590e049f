/* serve.h: the `serve` part, an OpenAI-compatible HTTP server over the
 * serving engine (`lathe serve`, docs/serve.md).
 *
 *   - engine:      continuous batching of generation requests across LoRA
 *                  adapters over one base model (engine.h, engine*.c;
 *                  docs/serve-engine.md)
 *   - options:     the command line of `lathe serve`, its defaults and
 *                  checks, the API key file (serve_opts.c)
 *   - server:      loading the model, tokenizer, chat template and
 *                  adapters, the engine, the signals' drain (serve_server.c)
 *   - http:        libmicrohttpd, one thread per connection; routing, the
 *                  API key, body limits, states (loading, ready, draining),
 *                  error replies in OpenAI's shape (serve_http.c)
 *   - openai:      request parsing and validation of /v1/completions and
 *                  /v1/chat/completions, the JSON shapes of responses,
 *                  chunks, models and errors (serve_openai.c)
 *   - generation:  a request's choices as engine requests, the event
 *                  callback's per-request buffer, stop strings, complete
 *                  and streamed (server-sent events) replies, the live
 *                  list a timed-out drain cancels (serve_gen.c,
 *                  serve_stream.c)
 *   - text:        incremental UTF-8-safe decoding of token bytes, the
 *                  stop-string search and hold-back (serve_text.c)
 *   - routes:      models, adapters loaded and unloaded at run time,
 *                  health and readiness (serve_routes.c)
 *   - metrics:     Prometheus text of requests, tokens, latencies and the
 *                  engine's state (serve_metrics.c)
 *
 * Dependencies: nn, tok and base (and libmicrohttpd, jansson), never train.
 * serve_internal.h is the part's own; a caller includes "serve/serve.h".
 */
#ifndef LATHE_SERVE_H
#define LATHE_SERVE_H

#include "serve/engine.h"

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

/* One --adapter NAME=DIR. */
typedef struct sv_adapter_arg {
    char *name, *dir;
} sv_adapter_arg;

typedef struct sv_serve_opts {
    char *model_dir;       /* --model (required) */
    char *served_name;     /* --served-model-name; default: model_dir as given */
    char *tokenizer;       /* --tokenizer; default MODEL/tokenizer.json */
    char *chat_template;   /* --chat-template FAMILY, or NULL: detected */
    sv_adapter_arg *adapters;
    size_t n_adapters;
    char *host;            /* --host (default 127.0.0.1) */
    int port;              /* --port (default 8000; 0: the system picks) */
    char *api_key;         /* --api-key, --api-key-file or LATHE_API_KEY; NULL: none */
    size_t max_body;       /* --max-body bytes (default 4 MiB) */
    int max_connections;   /* --max-connections (default 256) */
    int threads;           /* --threads for the model (0: all) */
    double drain_timeout;  /* --drain-timeout seconds (default 120) */
    bool quiet;            /* --quiet: no request log lines */
    sv_engine_opts engine; /* --max-batch, --max-waiting, --kv-memory, ... */
} sv_serve_opts;

/* Parses `lathe serve`'s arguments (argv[0] is "serve") into o, which it
 * zeroes first. Returns LT_EXIT_OK, or LT_EXIT_USAGE with a message naming
 * the option and the fix in err (an unreadable --api-key-file too). */
int sv_opts_parse(sv_serve_opts *o, int argc, char **argv, char *err, size_t errsz);
void sv_opts_free(sv_serve_opts *o);

/* Runs the server: listens first (503 while loading), loads the model,
 * tokenizer and adapters, serves until *stop becomes non-zero (SIGTERM,
 * SIGINT), then drains: new requests get 503, running ones finish (at
 * most drain_timeout), and it returns LT_EXIT_OK. Returns LT_EXIT_INVALID
 * for a model, tokenizer or adapter that cannot be loaded and
 * LT_EXIT_UNAVAILABLE when it cannot listen, with a message on stderr. */
int sv_server_run(const sv_serve_opts *o, volatile sig_atomic_t *stop);

#endif
