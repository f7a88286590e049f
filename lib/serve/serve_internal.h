/* serve_internal.h: what the files of the HTTP server (serve_*.c) share:
 * the server's state, the request record of one HTTP request, errors in
 * OpenAI's shape, parsed OpenAI requests, the incremental detokeniser and
 * stop strings, a generation (one request's choices as engine requests)
 * and the metrics. The part's users include serve.h only; the fuzz target
 * and the unit tests look inside through this header. */
#ifndef LATHE_SERVE_INTERNAL_H
#define LATHE_SERVE_INTERNAL_H

#include "serve/serve.h"
#include "tok/tok.h"

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* ---------------------------------------------------------------- limits */
#define SV_MAX_N 16          /* n: choices per prompt */
#define SV_MAX_PROMPTS 32    /* prompts of one /v1/completions request */
#define SV_MAX_CHOICES 64    /* prompts x n */
#define SV_MAX_STOP 16       /* stop strings */
#define SV_MAX_STOP_LEN 256  /* bytes of one stop string */
#define SV_MAX_MESSAGES 4096 /* chat messages */
#define SV_MAX_URL 4096      /* bytes of a URL */
#define SV_MAX_NAME 128      /* bytes of an adapter name */
#define SV_IDLE_TIMEOUT 300u /* seconds a connection may idle (not during a completion) */

/* ---------------------------------------------------------------- errors */
/* An error reply: {"error": {"message", "type", "param", "code"}}. */
typedef struct sv_error {
    int status;       /* HTTP status */
    const char *type; /* "invalid_request_error", "authentication_error", ... */
    const char *code; /* NULL: null */
    char param[64];   /* "": null */
    char message[1024];
} sv_error;

void sv_error_set(sv_error *e, int status, const char *type, const char *code, const char *param,
                  const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* 400 invalid_request_error naming the field. */
void sv_error_field(sv_error *e, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
json_t *sv_error_json(const sv_error *e);

/* ---------------------------------------------------------------- requests */
typedef enum { SV_API_COMPLETIONS, SV_API_CHAT } sv_api;

/* One prompt of /v1/completions: text, or token ids. */
typedef struct sv_prompt {
    char *text;
    int32_t *ids;
    int n_ids;
} sv_prompt;

typedef struct sv_msg {
    char *role, *content;
} sv_msg;

typedef struct sv_oai_req {
    sv_api api;
    char *model;            /* NULL: the base model */
    sv_prompt *prompts;     /* completions */
    size_t n_prompts;
    sv_msg *msgs;           /* chat */
    size_t n_msgs;
    int enable_thinking;    /* chat_template_kwargs.enable_thinking: -1 not given */
    int max_tokens;         /* 0: not given */
    const char *max_tokens_param; /* "max_tokens" or "max_completion_tokens" */
    float temperature, top_p;
    bool has_seed;
    uint64_t seed;
    char **stop;
    size_t n_stop;
    int n;
    bool stream, include_usage;
} sv_oai_req;

/* Parses and checks the JSON body of /v1/completions or
 * /v1/chat/completions: every field's type and range (temperature 0..2,
 * top_p (0, 1], n 1..16, max_tokens >= 1, stop a string or up to 16
 * strings), and the fields lathe serve does not support (logprobs, tools,
 * penalties, ...) refused by name. False with a 400 in e. */
bool sv_oai_parse(sv_api api, const char *body, size_t len, sv_oai_req *r, sv_error *e);
void sv_oai_req_free(sv_oai_req *r);
/* {"lora_name": ..., "lora_path": ...} of the adapter routes (path only
 * when need_path). False with a 400 in e. Strings are the caller's. */
bool sv_oai_parse_adapter(const char *body, size_t len, bool need_path, char **name, char **path,
                          sv_error *e);
/* Adapter names: 1..128 bytes of [A-Za-z0-9._:@/+-]. */
bool sv_name_ok(const char *name);

/* Response shapes. */
json_t *sv_oai_usage(int prompt_tokens, int completion_tokens);
/* The object of a complete reply, with an empty "choices". */
json_t *sv_oai_response(sv_api api, const char *id, int64_t created, const char *model);
json_t *sv_oai_choice(sv_api api, int index, const char *text, const char *finish);
/* A chunk with an empty "choices" (and "usage": null when usage_null). */
json_t *sv_oai_chunk(sv_api api, const char *id, int64_t created, const char *model,
                     bool usage_null);
/* A chunk's choice: text (NULL: none), the assistant role (chat's first
 * chunk), finish (NULL: null). */
json_t *sv_oai_chunk_choice(sv_api api, int index, const char *text, bool role,
                            const char *finish);
json_t *sv_oai_model(const char *id, int64_t created, const char *root, const char *parent,
                     int max_model_len);

/* ---------------------------------------------------------------- text */
/* Bytes to UTF-8 text as a WHATWG decoder (and Hugging Face's decode) does:
 * an invalid sequence becomes U+FFFD, a character cut between tokens waits
 * for its next bytes, so `text` never ends in half a character. */
typedef struct sv_detok {
    sb text;
    unsigned char pend[4];
    int npend, need;
    unsigned char lo, hi;
} sv_detok;

void sv_detok_init(sv_detok *d);
void sv_detok_free(sv_detok *d);
void sv_detok_push(sv_detok *d, const char *bytes, size_t n);
/* End of input: an unfinished character becomes U+FFFD. */
void sv_detok_flush(sv_detok *d);
/* Cuts text at the first stop string found at or after byte `from`;
 * returns true when one was found. */
bool sv_stop_cut(sb *text, size_t from, char *const *stops, size_t n);
/* Bytes at the end of text[0..len) that might begin a stop string (held
 * back from a stream until the next tokens decide). */
size_t sv_stop_holdback(const char *text, size_t len, char *const *stops, size_t n);
/* The longest stop string's length. */
size_t sv_stop_maxlen(char *const *stops, size_t n);

/* ---------------------------------------------------------------- metrics */
#define SV_HIST_MAX 24

typedef struct sv_hist {
    const double *bounds; /* upper bounds, seconds */
    int n;
    _Atomic uint64_t counts[SV_HIST_MAX + 1]; /* per bucket; the last is +Inf */
    _Atomic uint64_t total;
    _Atomic uint64_t sum_ns;
} sv_hist;

typedef struct sv_req_count {
    char *model;
    int code;
    uint64_t n;
} sv_req_count;

typedef struct sv_metrics {
    pthread_mutex_t mu; /* reqs */
    sv_req_count *reqs;
    size_t n_reqs, cap_reqs;
    _Atomic uint64_t prompt_tokens, generation_tokens;
    sv_hist ttft, itl, e2e;
} sv_metrics;

void sv_metrics_init(sv_metrics *m);
void sv_metrics_free(sv_metrics *m);
/* Lock-free: safe from the engine's event callback. */
void sv_hist_observe(sv_hist *h, int64_t ns);
void sv_metrics_request(sv_metrics *m, const char *model, int code);
struct sv_server;
/* The Prometheus text exposition of everything. */
void sv_metrics_render(struct sv_server *s, sb *out);
/* Label values escaped as the text format asks (\\, \", \n). */
void sv_prom_label(sb *out, const char *v);

/* ---------------------------------------------------------------- server */
enum { SV_LOADING, SV_READY, SV_DRAINING };

typedef struct sv_server {
    const sv_serve_opts *o;
    atomic_int state;
    tr_backend *be;
    tr_model model;
    bool model_loaded;
    tok_tokenizer *tok;
    pthread_mutex_t tok_mu; /* tok_encode is not thread-safe */
    chat_template tmpl;
    bool has_tmpl;
    char tmpl_err[512];
    int32_t stop_ids[8];
    int n_stop_ids;
    int vocab, max_context;
    sv_engine *engine;
    const char *base_id;
    int64_t created;
    struct MHD_Daemon *mhd;
    char address[160];
    sv_metrics metrics;
    atomic_uint_fast64_t seq; /* request ids, random seeds */
    pthread_mutex_t mu;       /* inflight, live */
    pthread_cond_t cv;
    int inflight;
    struct sv_gen *live;      /* generations with engine requests (a drain's timeout cancels them) */
} sv_server;

int64_t sv_now_ns(void);
/* True when id is a registered adapter (is_base: the base model's id). */
bool sv_model_known(sv_server *s, const char *id, bool *is_base);
/* "base, a1, a2": the model ids, for a 404's message. Caller frees. */
char *sv_model_list(sv_server *s);

/* ---------------------------------------------------------------- http */
/* One HTTP request. */
typedef struct sv_conn {
    sv_server *s;
    struct MHD_Connection *conn;
    const char *method, *url;
    sb body;
    bool too_large;
    int status;
    struct MHD_Response *resp;
    char *model_label; /* a known model's id, for the metrics */
    bool generation;   /* a completion: its duration is observed */
    bool no_timeout;   /* the idle timeout is off until the request completes */
    int64_t t0_ns;
} sv_conn;

int sv_http_start(sv_server *s, char *err, size_t errsz);
void sv_http_stop(sv_server *s);
const char *sv_conn_header(const sv_conn *c, const char *name);
void sv_conn_set_model(sv_conn *c, const char *id);
void sv_reply_json(sv_conn *c, int status, json_t *body);
void sv_reply_error(sv_conn *c, const sv_error *e);
void sv_reply_text(sv_conn *c, int status, const char *content_type, const char *text);
/* A reply read from read() as it comes (chunked); done() when MHD lets go. */
void sv_reply_callback(sv_conn *c, int status, const char *content_type,
                       MHD_ContentReaderCallback read, void *cls,
                       MHD_ContentReaderFreeCallback done);
void sv_reply_header(sv_conn *c, const char *name, const char *value);

/* ---------------------------------------------------------------- routes */
void sv_route_models(sv_conn *c, const char *id);
void sv_route_load_adapter(sv_conn *c);
void sv_route_unload_adapter(sv_conn *c);
void sv_route_health(sv_conn *c, bool ready_body);
void sv_route_metrics(sv_conn *c);
/* /v1/completions, /v1/chat/completions (serve_gen.c) */
void sv_route_generate(sv_conn *c, sv_api api);

/* ---------------------------------------------------------------- generation */
typedef struct sv_gen sv_gen;

typedef struct sv_choice {
    sv_gen *g;
    int index, prompt;
    uint64_t id;
    bool submitted;
    /* from the engine thread, under g->mu */
    int32_t *in;
    size_t n_in, cap_in;
    bool closed; /* the HTTP side wants no more tokens */
    bool done;
    sv_finish finish;
    int gen_tokens;
    char *message;
    /* the engine thread's own */
    int64_t last_ns;
    /* the HTTP thread's own */
    int32_t *take; /* tokens taken from `in` (the buffers swap) */
    size_t cap_take;
    sv_detok dt;
    size_t sent;        /* bytes of dt.text streamed */
    size_t searched;    /* bytes of dt.text searched for stop strings */
    int used;           /* tokens taken */
    bool stopped;       /* a stop string was found */
    bool ended;         /* no more text: finish is known */
    bool finish_sent;
    const char *finish_reason; /* "stop", "length"; NULL: failed */
} sv_choice;

struct sv_gen {
    sv_server *s;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs; /* the HTTP side's one, one per submitted choice not DONE */
    sv_oai_req req;
    int32_t **pids; /* per prompt (chat: one) */
    int *npids;
    size_t n_pids;
    int prompt_tokens;
    sv_choice *ch;
    size_t n_ch;
    char id[64];
    int64_t created, t0_ns;
    char *model;         /* the model id of the reply */
    /* a stream's output */
    sb out;
    size_t out_off;
    int stage;
    bool failed;
    sv_error err;
    /* in the server's list of live generations, under s->mu */
    sv_gen *live_prev, *live_next;
    bool live;
};

/* Takes what the engine sent; blocks for it when wait. Updates each
 * choice's text, stop strings, ends. False when every choice has ended. */
bool sv_gen_step(sv_gen *g, bool wait);
bool sv_gen_all_ended(const sv_gen *g);
/* Completion tokens of every choice (to a stop string's token when one cut
 * the text). */
int sv_gen_completion_tokens(const sv_gen *g);
/* Cancels what still runs and drops the HTTP side's reference. */
void sv_gen_release(sv_gen *g);
/* Cancels every live generation's engine requests (a drain that timed out). */
void sv_gen_cancel_all(sv_server *s);
/* Streams g as server-sent events (serve_stream.c). */
void sv_stream_reply(sv_conn *c, sv_gen *g);

#endif
