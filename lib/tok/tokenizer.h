/* tokenizer.h (part of tok.h): the tokenizer. Byte-level BPE exactly as
 * Hugging Face `tokenizers` runs it for Qwen2 / Qwen2.5 / Qwen3 and Llama 3, read
 * from a `tokenizer.json` (plus `tokenizer_config.json` beside it for the
 * special-token names and the chat template).
 *
 * The pipeline (docs/tokenizer.md describes it step by step):
 *   added / special tokens are cut out of the text first (leftmost-longest),
 *   each remaining segment is normalised (NFC where the file asks for it),
 *   split by the pre-tokenizer (the file's own regex, run by a small matcher
 *   in tok_regex.c, then the ByteLevel byte -> unicode mapping), and every
 *   piece is merged by BPE (merge ranks, `ignore_merges`, a word cache).
 *
 * Supported: model.type "BPE" with a ByteLevel pre-tokenizer / decoder.
 * Not supported yet, with an error that says so: SentencePiece tokenizers
 * (Unigram models, or BPE with Metaspace / byte_fallback as in Llama 2 and
 * Mistral), WordPiece, WordLevel.
 *
 * Thread safety: decode and the look-ups are safe from many threads.
 * tok_encode updates the tokenizer's word cache, so one tokenizer must not
 * encode from two threads at once (load one per thread, or lock).
 */
#ifndef LATHE_TOK_TOKENIZER_H
#define LATHE_TOK_TOKENIZER_H

#include "base/base.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tok_tokenizer tok_tokenizer;

/* A growable list of token ids. offsets[i] is the byte offset, in the text
 * given to tok_encode, where token i's text begins (tokens made of an added
 * token or of a piece the normaliser rewrote point at the start of that
 * token / rewritten run). Zero-initialise it, or call tok_ids_init. */
typedef struct tok_ids {
    int32_t *ids;
    size_t *offsets;
    size_t len, cap;
} tok_ids;

void tok_ids_init(tok_ids *v);
void tok_ids_free(tok_ids *v);
/* Empties the list and keeps its memory. */
void tok_ids_clear(tok_ids *v);
/* Appends one id with its offset. */
void tok_ids_push(tok_ids *v, int32_t id, size_t offset);

/* Loads a tokenizer. `path` is a tokenizer.json file or a folder holding
 * one; tokenizer_config.json next to it is read when present (bos / eos /
 * pad names, chat template). Returns NULL with at least one error in `diags`
 * naming the file and the JSON field when the file is missing, malformed or
 * of an unsupported kind. */
tok_tokenizer *tok_load(const char *path, diag_list *diags);

/* Loads from tokenizer.json text held in memory (`config_json` may be NULL;
 * `name` is used in messages). Same result and errors as tok_load. */
tok_tokenizer *tok_load_json(const char *json, size_t len, const char *config_json,
                             size_t config_len, const char *name, diag_list *diags);

void tok_free(tok_tokenizer *t);

/* Flags of tok_encode. */
enum {
    /* Add what the file's post-processor adds around a single sequence
     * (TemplateProcessing, e.g. <|begin_of_text|> for Llama 3.1). Off: the
     * same as Hugging Face's add_special_tokens=False. */
    TOK_ADD_SPECIAL = 1u << 0,
    /* Treat special tokens written in the text as plain text (Hugging Face's
     * split_special_tokens=True). Off: "<|im_end|>" in the text becomes the
     * special token, as Hugging Face does by default. */
    TOK_SPLIT_SPECIAL = 1u << 1,
};

/* Encodes `len` bytes of UTF-8 text, appending ids (and offsets) to `out`.
 * With flags = 0 the result equals Hugging Face's
 * tokenizer.encode(text, add_special_tokens=False). Returns true; on invalid
 * UTF-8, or a text on which the pre-tokenizer regex gives up (too many
 * backtracking steps), returns false with a message in err (naming the byte
 * offset) and leaves `out` as it was. Not thread-safe (see the top). */
bool tok_encode(tok_tokenizer *t, const char *text, size_t len, unsigned flags, tok_ids *out,
                char *err, size_t errsz);

/* Decodes ids to text as Hugging Face's decode does (ByteLevel decoder):
 * token strings -> bytes, then invalid UTF-8 sequences (a multi-byte
 * character cut between ids) become U+FFFD. With skip_special, special
 * tokens are left out. Returns a NUL-terminated string (length in *out_len
 * when not NULL) that the caller frees, or NULL when an id is not in the
 * vocabulary, with a message in err. */
char *tok_decode(const tok_tokenizer *t, const int32_t *ids, size_t n, bool skip_special,
                 size_t *out_len, char *err, size_t errsz);

/* The raw bytes a token stands for (after the byte-level mapping is undone;
 * an added token's content as it is). For streaming output: concatenate the
 * bytes of successive ids and print whole UTF-8 characters. Sets *len and
 * returns a pointer owned by the tokenizer, or NULL for an unknown id. */
const char *tok_token_bytes(const tok_tokenizer *t, int32_t id, size_t *len);

/* The id of a token given in the file's own spelling ("Ġworld",
 * "<|im_end|>"), or -1. */
int32_t tok_token_id(const tok_tokenizer *t, const char *token);

/* The file's spelling of a token ("Ġworld"), or NULL for an unknown id. */
const char *tok_token_str(const tok_tokenizer *t, int32_t id);

/* One more than the largest id (vocabulary plus added tokens): the number of
 * rows an embedding matrix needs at least. */
size_t tok_vocab_size(const tok_tokenizer *t);

/* True when id is an added token marked "special". */
bool tok_is_special(const tok_tokenizer *t, int32_t id);

/* Special ids from tokenizer_config.json (bos_token, eos_token, pad_token),
 * or -1 when not known. */
int32_t tok_bos_id(const tok_tokenizer *t);
int32_t tok_eos_id(const tok_tokenizer *t);
int32_t tok_pad_id(const tok_tokenizer *t);

/* The content of those tokens ("<|im_end|>"), or NULL. */
const char *tok_bos_token(const tok_tokenizer *t);
const char *tok_eos_token(const tok_tokenizer *t);

/* tokenizer_config.json's chat_template string, or NULL when there is none
 * (see chat.h for how it is used). */
const char *tok_chat_template(const tok_tokenizer *t);

/* Accessors for exporters (lib/export writes the vocabulary into GGUF):
 * true when id is one of tokenizer.json's added_tokens, special or not. */
bool tok_is_added(const tok_tokenizer *t, int32_t id);

/* The BPE merges in rank order, as (left id, right id) pairs: fills up to
 * cap pairs into left[] / right[] and returns how many merges there are
 * (cap 0 only counts). A merge that a later duplicate in the file replaced
 * appears once, at the later rank, as encode uses it. */
size_t tok_merges(const tok_tokenizer *t, int32_t *left, int32_t *right, size_t cap);

/* The file the tokenizer was loaded from (for messages). */
const char *tok_source(const tok_tokenizer *t);

/* ---- Training (tok_train.c) ----
 *
 * A byte-level BPE tokenizer learned from text, for small models (tests,
 * the demo): Qwen2's pre-tokenizer regex and ByteLevel mapping, no
 * normaliser, ids 0..255 for the bytes, then one id per new token in the
 * order learned, then the ChatML special tokens <|endoftext|>,
 * <|im_start|>, <|im_end|>. Feed texts, then run: the most frequent pair
 * of adjacent symbols is merged until the vocabulary is full. The same
 * texts in the same order give the same file, byte for byte. */

enum {
    TOK_TRAIN_SPECIALS = 3,         /* <|endoftext|>, <|im_start|>, <|im_end|> */
    TOK_TRAIN_MAX_VOCAB = 1 << 20,
};

typedef struct tok_trainer tok_trainer;

typedef struct tok_train_options {
    size_t vocab_size;      /* ids in all, 259 (bytes and specials) to TOK_TRAIN_MAX_VOCAB */
    uint64_t min_frequency; /* a pair seen fewer times is never merged (0 = 1) */
} tok_train_options;

typedef struct tok_train_result {
    size_t vocab;           /* ids in all (below vocab_size when it stopped early) */
    size_t merges;          /* merges learned */
    uint64_t bytes;         /* text fed */
    uint64_t words;         /* pre-tokens in it */
    size_t distinct_words;
    bool stopped_early;     /* no pair was frequent enough to fill the vocabulary */
} tok_train_result;

tok_trainer *tok_trainer_new(void);
void tok_trainer_free(tok_trainer *tr);

/* Counts the pre-tokens of one text (a document: the pre-tokenizer sees it
 * whole, as tok_encode would). Returns false with a message in err when
 * the text is not valid UTF-8 (naming the byte). */
bool tok_trainer_feed(tok_trainer *tr, const char *text, size_t len, char *err, size_t errsz);

/* Learns the merges and returns the tokenizer.json text (caller frees), or
 * NULL with a message in err (a vocabulary size out of range, no text). */
char *tok_trainer_run(tok_trainer *tr, const tok_train_options *o, tok_train_result *res,
                      char *err, size_t errsz);

/* The tokenizer_config.json text for a trained tokenizer (caller frees):
 * eos <|im_end|>, pad <|endoftext|>, no bos, and a ChatML chat template,
 * which chat.h renders as its `chatml` family. */
char *tok_train_config_json(void);

#endif
