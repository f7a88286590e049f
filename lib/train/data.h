/* data.h: training data for the built-in trainer. A JSONL file is read,
 * every record is turned into token ids and a loss mask, and an iterator
 * hands out batches in a seeded, per-epoch shuffled order whose position can
 * be saved and restored exactly (docs/data.md).
 *
 * Record forms (one JSON object per line; other keys such as "id" are
 * ignored; an empty or blank line is a malformed record, as is a line
 * longer than max_line_bytes; a UTF-8 BOM and CRLF line ends are fine):
 *   alpaca    {"instruction": S, "input": S (optional), "output": S,
 *              "system": S (optional)}
 *             -> user = instruction, plus "\n\n" + input when input is not
 *                empty; assistant = output
 *   messages  {"messages": [{"role": R, "content": S}, ...]}
 *             with at least one assistant message
 *   text      {"text": S}
 * alpaca and messages are rendered with the chat template (chat.h) and the
 * loss mask is 1 only on the assistant's tokens; text is encoded as it is
 * (with the post-processor's special tokens, e.g. a BOS, when the tokenizer
 * adds them) followed by the EOS token, and every token is a target.
 *
 * Loss mask convention: mask[i] = 1 means token i is a target, i.e. the
 * loss term "predict ids[i] from ids[0..i-1]" counts. mask[0] can be 1 but
 * has nothing before it; the trainer sums over i >= 1.
 *
 * Sequences: without packing each record is one sequence, cut to
 * max_seq_len tokens (counted as truncated). With packing, the records'
 * tokens are concatenated (in file order) and cut into sequences of exactly
 * max_seq_len tokens; the tail shorter than that is dropped (counted).
 * A record with no target token left is dropped (counted).
 */
#ifndef LATHE_TRAIN_DATA_H
#define LATHE_TRAIN_DATA_H

#include "base/base.h"
#include "tok/tok.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum data_format {
    DATA_AUTO = 0, /* decided by the first record; every record must then match */
    DATA_ALPACA,
    DATA_MESSAGES,
    DATA_TEXT,
} data_format;

/* "auto", "alpaca", "messages", "text". */
const char *data_format_name(data_format f);
bool data_format_parse(const char *name, data_format *out);

typedef struct data_options {
    data_format format;   /* DATA_AUTO to detect */
    size_t max_seq_len;   /* > 0 */
    bool pack;            /* pack into sequences of exactly max_seq_len */
    bool skip_bad;        /* skip malformed records (warning + count) instead of failing */
    size_t max_line_bytes; /* a longer line is malformed; 0 means 16 MiB */
    chat_options chat;    /* passed to the template (add_generation_prompt is ignored) */
    /* Held-out records (an eval set cut from the training file): a record
     * whose line data_line_held_out picks for (holdout, holdout_seed) goes
     * to a second set (data_take_holdout), one unpacked sequence per record
     * (truncated at max_seq_len), and not into this one. 0 = none. */
    double holdout;       /* the share, in [0, 1) */
    uint64_t holdout_seed;
} data_options;

/* Fills the defaults: auto format, max_seq_len 2048, no packing, fail on
 * bad records, 16 MiB lines. */
void data_options_init(data_options *o);

typedef struct data_stats {
    data_format format; /* the form used (detected or forced) */
    size_t lines;       /* lines read */
    size_t records;     /* records turned into tokens */
    size_t skipped;     /* malformed records skipped (skip_bad) */
    size_t truncated;   /* records cut at max_seq_len (no packing) */
    size_t empty;       /* records dropped because no target token was left */
    size_t sequences;   /* sequences the iterator serves */
    uint64_t tokens;    /* tokens in those sequences */
    uint64_t targets;   /* of which mask = 1 */
    uint64_t dropped_tail; /* packing: tokens of the last, partial sequence */
} data_stats;

typedef struct data_set data_set;

/* Reads and tokenises a JSONL file. `tmpl` is needed for the alpaca and
 * messages forms (may be NULL for text-only data). On error returns NULL
 * with an error in diags naming file:line and the field (for example
 * "data.jsonl:12: messages[1].content: expected a string, found 3");
 * with skip_bad, malformed records become warnings (the first 20 are
 * listed) and are counted in the stats. */
data_set *data_load(const char *path, tok_tokenizer *tok, const chat_template *tmpl,
                    const data_options *opt, diag_list *diags);

/* The same from a buffer in memory; `name` stands for the file in messages. */
data_set *data_load_buffer(const char *buf, size_t len, const char *name, tok_tokenizer *tok,
                           const chat_template *tmpl, const data_options *opt,
                           diag_list *diags);

void data_free(data_set *d);

/* Whether the record on JSONL line `line` (1-based) is held out for a
 * share and seed: a hash of (seed, line) below share, so the choice is the
 * same in every run with that seed and does not depend on the other lines. */
bool data_line_held_out(size_t line, double share, uint64_t seed);

/* The set of held-out records loaded with d (options.holdout > 0), now the
 * caller's to free; NULL when none was asked or it was taken before. Its
 * stats count its own records; lines, skipped and the form are d's. */
data_set *data_take_holdout(data_set *d);

const data_stats *data_get_stats(const data_set *d);

/* Number of sequences. */
size_t data_count(const data_set *d);

/* Sequence i (< data_count): its ids, mask and length; pointers owned by
 * the set. `line` (may be NULL) receives the JSONL line it came from (for
 * packed sequences: the line of its first token). */
void data_get(const data_set *d, size_t i, const int32_t **ids, const uint8_t **mask, size_t *len,
              size_t *line);

/* Each token's position in its record, into pos[len] for sequence i:
 * 0, 1, 2, ... for an unpacked sequence; for a packed one the count starts
 * again at 0 where each record begins (and at the sequence's first token,
 * for a record cut by the sequence boundary), so the trainer can keep
 * packed records from attending to each other. Returns true when the
 * sequence holds more than one record. */
bool data_positions(const data_set *d, size_t i, int32_t *pos);

/* The id padding fills batches with: pad_token, else eos_token, else 0. */
int32_t data_pad_id(const data_set *d);

/* The max_seq_len the set was loaded with. */
size_t data_max_seq_len(const data_set *d);

/* A hash of every sequence's ids and mask: two sets with the same
 * fingerprint serve the same data. */
uint64_t data_fingerprint(const data_set *d);

/* ---- batches ---- */

typedef struct data_iter_options {
    size_t batch_size; /* sequences per batch, > 0 */
    bool shuffle;      /* a new seeded permutation every epoch */
    uint64_t seed;
    bool drop_last;    /* skip an epoch's last, smaller batch */
    bool pad_to_max;   /* pad every batch to max_seq_len, not to its longest row */
} data_iter_options;

/* A batch: rows x seq_len, row-major. Rows shorter than seq_len are padded
 * with pad_id and mask 0. */
typedef struct data_batch {
    size_t rows, seq_len;
    int32_t *ids;
    uint8_t *mask;
    size_t *lens;     /* real length of each row */
    size_t *seq;      /* which sequence (data_get index) each row holds */
    uint64_t epoch;   /* the epoch this batch belongs to (0-based) */
    uint64_t index;   /* its first position within the epoch's order */
} data_batch;

void data_batch_free(data_batch *b);

/* Where an iterator stands: enough to continue exactly. The shuffle of
 * epoch e is a pure function of (seed, e), so (seed, epoch, index) is the
 * whole state of the random order; fingerprint and count guard against
 * resuming on different data. A plain struct of integers: store it as it is
 * or with data_pos_format. */
typedef struct data_pos {
    uint64_t seed;
    uint64_t epoch;
    uint64_t index;       /* next position in the epoch's order */
    uint64_t count;       /* data_count of the set */
    uint64_t fingerprint; /* data_fingerprint of the set */
} data_pos;

typedef struct data_iter data_iter;

/* An iterator at the start of epoch 0. Returns NULL with a message in err
 * when batch_size is 0 or larger than the set (with drop_last), or the
 * set is empty. */
data_iter *data_iter_new(const data_set *d, const data_iter_options *o, char *err, size_t errsz);

void data_iter_free(data_iter *it);

/* Fills the next batch (reusing b's memory; zero-initialise b before the
 * first call) and moves on; after an epoch's last batch the next call
 * starts the next epoch. Always succeeds. */
void data_iter_next(data_iter *it, data_batch *b);

/* The current position. */
data_pos data_iter_tell(const data_iter *it);

/* Moves to a saved position. Returns false with a message in err when the
 * position belongs to another data set (count / fingerprint) or seed, or
 * lies past the end of the epoch. */
bool data_iter_seek(data_iter *it, const data_pos *pos, char *err, size_t errsz);

/* Batches per epoch. */
size_t data_iter_batches_per_epoch(const data_iter *it);

/* A position as one JSON object ({"seed": "0x...", "epoch": N, ...};
 * 64-bit values as hex strings). The caller frees it. */
char *data_pos_format(const data_pos *p);

/* Parses what data_pos_format wrote. */
bool data_pos_parse(const char *json, data_pos *p, char *err, size_t errsz);

#endif
