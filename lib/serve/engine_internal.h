/* engine_internal.h: the serving engine's state, shared by engine.c (the
 * thread, queue, admission and steps), engine_kv.c (KV blocks) and
 * engine_adapters.c (the adapter registry). Nothing outside lib/serve's
 * engine*.c includes it. */
#ifndef LATHE_SERVE_ENGINE_INTERNAL_H
#define LATHE_SERVE_ENGINE_INTERNAL_H

#include "serve/engine.h"

#include <pthread.h>

/* ---------------------------------------------------------------- KV blocks */

/* The paged KV cache (tr_kv_pool: [n_blocks, layers, block_len, kv_dim] for
 * k and for v) and its free list, a stack of block ids. */
typedef struct sv_kv {
    tr_kv_pool pool;
    int n_blocks, n_free;
    int32_t *free_ids; /* [n_blocks]; the first n_free are free */
} sv_kv;

/* Bytes of one block (k and v, every layer). */
size_t sv_kv_block_bytes(const tr_model *m, int block_len);
/* A pool of as many blocks as fit in bytes; false (message) when none. */
bool sv_kv_init(sv_kv *kv, const tr_model *m, int block_len, size_t bytes, char *err,
                size_t errsz);
void sv_kv_free(sv_kv *kv);
/* Blocks for tokens positions: ceil(tokens / block_len). */
int sv_kv_blocks_for(const sv_kv *kv, int tokens);
/* Takes n blocks into ids; false (nothing taken) when fewer are free. */
bool sv_kv_take(sv_kv *kv, int n, int32_t *ids);
/* Gives n blocks back. */
void sv_kv_give(sv_kv *kv, const int32_t *ids, int n);

/* ---------------------------------------------------------------- adapters */

typedef struct sv_adapter_ent {
    char *name, *dir;
    int rank;
    tr_adapter ad;
    bool loaded;   /* ad holds the weights */
    bool loading;  /* the engine thread is loading it, the lock released */
    bool removed;  /* unregistered; freed when refs reaches 0 */
    int refs;      /* requests (waiting or running) naming it */
    int active;    /* running requests using it: not evictable while > 0 */
    int64_t last_used;  /* monotonic ms */
    uint64_t use_seq;   /* order of last use, for LRU */
    struct sv_adapter_ent *next; /* registration order */
} sv_adapter_ent;

/* ---------------------------------------------------------------- requests */

typedef struct sv_req {
    uint64_t id;
    int32_t *prompt;
    int n_prompt;
    int32_t *stop_ids;
    int n_stop;
    tr_sample_opts sample;
    int max_new;
    sv_event_fn on_event;
    void *ud;
    sv_adapter_ent *ad;   /* NULL: the base model */
    tr_rng rng;
    int done_prompt;      /* prompt tokens in the KV cache */
    int generated;
    int32_t last;         /* the last generated token: the next step's input */
    int32_t *blocks;      /* its KV blocks once admitted */
    int n_blocks;
    bool cancelled;
    bool hit_stop;        /* generated a stop id */
    sv_finish finish;     /* once finished */
    char *message;        /* SV_FINISH_ERROR */
    struct sv_req *next;  /* waiting queue / done list */
} sv_req;

struct sv_engine {
    tr_model *m;
    sv_engine_opts o;
    pthread_t thread;
    bool started;        /* thread runs */
    pthread_mutex_t mu;
    pthread_cond_t wake; /* work for the engine thread */
    pthread_cond_t idle; /* a request ended (drain) */
    bool stop, draining;
    uint64_t next_id;
    /* under mu */
    sv_req *wait_head, *wait_tail;
    int n_waiting;
    sv_req **run;        /* [max_batch] running, in admission order */
    int n_run;
    int n_live;          /* submitted, DONE not yet sent */
    sv_kv kv;
    sv_adapter_ent *adapters;
    int n_loaded;
    uint64_t use_seq;
    sv_engine_stats st;
    /* the engine thread's own */
    sv_req *done_head, *done_tail; /* finished, DONE not yet sent */
    tr_batch_seq *bseq;  /* [max_batch] the step's sequences */
    sv_req **breq;       /* [max_batch] their requests */
    int *lrow;           /* [max_batch] their logits row, or -1 */
    int32_t *picked;     /* [max_batch] sampled tokens by logits row */
    float *logits;       /* [max_batch, vocab] */
};

int64_t sv_now_ms(void);

/* Registry, all under e->mu. */
sv_adapter_ent *sv_adapter_find(sv_engine *e, const char *name);
/* Frees the least recently used loaded adapter not in use; false if none. */
bool sv_adapter_evict_lru(sv_engine *e);
/* Makes room for one more loaded adapter (evicting); false when every
 * loaded one is in use. */
bool sv_adapter_make_room(sv_engine *e);
/* Drops one reference; frees a removed entry at the last. */
void sv_adapter_unref(sv_engine *e, sv_adapter_ent *a);
/* Frees every entry (sv_engine_free). */
void sv_adapters_free_all(sv_engine *e);
/* Loads a (not loaded) entry on the engine thread, releasing the lock
 * while it reads the files; false with a message (caller frees). */
bool sv_adapter_load_locked(sv_engine *e, sv_adapter_ent *a, char **message);

#endif
