/* tok.h: tokenizers and chat templates, what the `tok` part offers.
 *
 *   - tokenizer:       byte-level BPE read from a Hugging Face
 *                      tokenizer.json (+ tokenizer_config.json), encode and
 *                      decode exactly as `tokenizers` does (tokenizer.h;
 *                      tok_load.c, tok_encode.c, tok_bpe.c, tok_regex.c,
 *                      tok_bytes.c; docs/tokenizer.md)
 *   - chat templates:  the supported families' templates rendered in C, with
 *                      the assistant's spans for a loss mask (chat.h; chat.c;
 *                      docs/data.md)
 *
 * The part depends on base only (and on utf8proc, jansson): the trainer's
 * data (lib/train/data.h), `lathe tokenize` / `generate` and serving use it;
 * the model (lib/nn) works on token ids and does not need it. The two
 * headers it had inside lib/train stay as they were, each with its own
 * top comment, and this one includes both, so a user includes "tok/tok.h".
 * tok_internal.h and unicode.h are the part's own (tests and the tokenizer
 * benchmark and fuzzer look inside through tok_internal.h).
 */
#ifndef LATHE_TOK_H
#define LATHE_TOK_H

#include "tok/chat.h"
#include "tok/tokenizer.h"

#endif
