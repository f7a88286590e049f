/* engine.h: the serving engine, continuous batching of generation requests
 * across many LoRA adapters over one base model (the idea of S-LoRA /
 * Punica), what lib/serve's HTTP server (serve.h) drives.
 *
 *   - one engine thread runs steps; a step runs every active sequence
 *     together: up to `prefill_chunk` prompt tokens of sequences still
 *     prefilling and one token of each decoding sequence, whatever their
 *     adapter. The base model's matrix products are batched over all rows;
 *     each LoRA delta is applied to the rows of the sequences that share it
 *     (tr_model_forward_batch, lib/nn).
 *   - requests join between steps; a request is admitted when the KV-cache
 *     blocks its prompt and max_tokens need are free (blocks of `kv_block`
 *     tokens, a free list, `kv_bytes` in all); otherwise it waits, in order.
 *   - adapters: registered by name and folder; at most `max_adapters` are in
 *     memory, the least recently used one not in use is evicted and loaded
 *     again on demand.
 *   - sampling is tr_sample's with the request's own rng seeded from its
 *     seed, so a request's output (greedy or sampled) is what tr_generate
 *     gives for the same prompt, adapter and seed, alone or in any batch.
 *
 * Threads: sv_engine_* functions may be called from any thread. The event
 * callback runs on the engine thread, between steps; it must not block and
 * must not call back into the engine except sv_engine_cancel.
 * Errors: functions that can fail return false (or NULL) and write a message
 * that names what was wrong and the fix into err[errsz].
 */
#ifndef LATHE_SERVE_ENGINE_H
#define LATHE_SERVE_ENGINE_H

#include "nn/nn.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sv_engine sv_engine;

typedef struct sv_engine_opts {
    int max_batch;      /* sequences running at once (default 32) */
    int max_waiting;    /* requests waiting for admission; more: SV_SUBMIT_FULL (default 256) */
    int prefill_chunk;  /* prompt tokens of one sequence per step (default 256) */
    int step_tokens;    /* rows of one step in all (default 512) */
    int kv_block;       /* tokens per KV-cache block (default 16) */
    size_t kv_bytes;    /* bytes of the KV cache in all (default: max(8, max_batch) full contexts, at most 1 GiB) */
    int max_adapters;   /* adapters in memory at once (default 8) */
    int max_context;    /* prompt + generated tokens of one request (default cfg.max_pos) */
} sv_engine_opts;

/* Creates the engine over a model loaded without LoRA (tr_model_load with
 * TR_MODE_LORA and rank 0, as `lathe generate` loads it before an adapter)
 * and starts its thread. The model stays the caller's and must outlive the
 * engine; while the engine runs, no other thread may run the model or its
 * backend (their workspaces are the engine's). Zero fields of o take the
 * defaults. */
sv_engine *sv_engine_create(tr_model *m, const sv_engine_opts *o, char *err, size_t errsz);
/* Stops the thread (running requests end with SV_FINISH_CANCELLED) and frees. */
void sv_engine_free(sv_engine *e);
/* The options in force, defaults filled in. */
const sv_engine_opts *sv_engine_options(const sv_engine *e);

/* ---------------------------------------------------------------- adapters */

/* Registers a PEFT adapter folder (adapter_config.json +
 * adapter_model.safetensors) under name and loads it to check it: a rank,
 * target module or shape that does not fit the base model is refused with
 * why. Replaces nothing: a name already registered is refused. */
bool sv_engine_add_adapter(sv_engine *e, const char *name, const char *dir, char *err,
                           size_t errsz);
/* Unregisters it; requests using it finish first (the memory is freed when
 * the last one ends). False when no adapter has that name. */
bool sv_engine_remove_adapter(sv_engine *e, const char *name);

typedef struct sv_adapter_info {
    char *name, *dir;
    int rank;
    bool loaded;        /* in memory now */
    int64_t last_used;  /* monotonic ms, 0 = never */
} sv_adapter_info;

/* The registered adapters in registration order; free with
 * sv_adapter_info_free. */
sv_adapter_info *sv_engine_adapters(sv_engine *e, size_t *n);
void sv_adapter_info_free(sv_adapter_info *a, size_t n);

/* ---------------------------------------------------------------- requests */

typedef enum {
    SV_FINISH_STOP,      /* a stop token (eos, end of turn) was generated */
    SV_FINISH_LENGTH,    /* max_tokens or the context was reached */
    SV_FINISH_CANCELLED, /* sv_engine_cancel, or the engine stopped */
    SV_FINISH_ERROR      /* the adapter could not be loaded again (message) */
} sv_finish;

/* "stop", "length", "cancelled", "error" */
const char *sv_finish_name(sv_finish f);

typedef enum { SV_EVENT_TOKEN, SV_EVENT_DONE } sv_event_kind;

typedef struct sv_event {
    sv_event_kind kind;
    uint64_t id;          /* the request's */
    int32_t token;        /* SV_EVENT_TOKEN: the new token (a stop token too) */
    int index;            /* SV_EVENT_TOKEN: 0 for the first generated token */
    sv_finish finish;     /* SV_EVENT_DONE */
    int prompt_tokens, generated_tokens; /* SV_EVENT_DONE */
    const char *message;  /* SV_EVENT_DONE with SV_FINISH_ERROR */
} sv_event;

typedef void (*sv_event_fn)(const sv_event *ev, void *ud);

typedef struct sv_request {
    const int32_t *prompt; /* copied by sv_engine_submit */
    int n_prompt;
    const char *adapter;   /* registered name, or NULL for the base model */
    tr_sample_opts sample; /* temperature, top_p, max_new, seed; eos_id is ignored;
                              max_new <= 0: up to max_context */
    const int32_t *stop_ids; /* tokens that end the request (copied) */
    int n_stop;
    sv_event_fn on_event;  /* every token, then one SV_EVENT_DONE */
    void *ud;
} sv_request;

typedef enum {
    SV_SUBMIT_OK,
    SV_SUBMIT_FULL,      /* max_waiting requests wait already: retry later (429) */
    SV_SUBMIT_INVALID,   /* empty prompt, a token outside the vocabulary, prompt +
                            max_new over max_context, or more KV blocks than the
                            whole cache: err says which, with the numbers */
    SV_SUBMIT_NO_ADAPTER,/* no adapter of that name (404) */
    SV_SUBMIT_STOPPING   /* the engine is draining or stopping (503) */
} sv_submit_status;

/* Queues a request; *id gets its id. On anything but SV_SUBMIT_OK no event
 * is ever sent. */
sv_submit_status sv_engine_submit(sv_engine *e, const sv_request *r, uint64_t *id, char *err,
                                  size_t errsz);
/* Ends a waiting or running request with SV_FINISH_CANCELLED (its DONE event
 * still comes). False when it already ended. */
bool sv_engine_cancel(sv_engine *e, uint64_t id);
/* No new requests (SV_SUBMIT_STOPPING), then waits until every admitted and
 * waiting request has ended, or timeout_ms (< 0: forever). True when idle. */
bool sv_engine_drain(sv_engine *e, int timeout_ms);

/* ---------------------------------------------------------------- state */

typedef struct sv_engine_stats {
    int running, waiting;
    int kv_blocks_used, kv_blocks_total;
    int adapters_loaded;
    uint64_t steps, prompt_tokens, generated_tokens;
    uint64_t adapter_loads, adapter_evictions;
} sv_engine_stats;

void sv_engine_get_stats(sv_engine *e, sv_engine_stats *s);

#endif
