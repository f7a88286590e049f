/* unicode.h: the few Unicode facts the tokenizer and the chat templates
 * need, on top of utf8proc: strict UTF-8 decoding, lossy repair, the
 * White_Space property, Python's str.isspace, general categories, simple
 * case folding and normalisation (NFC and friends) of a byte range.
 * Internal to the tok part (tok_*.c, chat.c). */
#ifndef LATHE_TOK_UNICODE_H
#define LATHE_TOK_UNICODE_H

#include "base/base.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Decodes one code point of strict UTF-8 (no overlong forms, no
 * surrogates, at most U+10FFFF) at s[*i], advancing *i. Returns false,
 * leaving *i unchanged, on an invalid sequence. */
bool uni_next(const char *s, size_t len, size_t *i, uint32_t *cp);

/* Writes cp as UTF-8 into out (room for 4); returns the byte count. */
size_t uni_encode(uint32_t cp, char out[4]);

/* True when all of s is strict UTF-8; otherwise *bad is the offset of the
 * first invalid byte. */
bool uni_valid(const char *s, size_t len, size_t *bad);

/* Appends s to out, replacing every maximal invalid subsequence by U+FFFD
 * (the Unicode "substitution of maximal subparts" practice, which Rust's
 * String::from_utf8_lossy and Python's errors="replace" follow). */
void uni_append_lossy(sb *out, const char *s, size_t len);

/* Unicode White_Space (PropList.txt): what \s means in Oniguruma and in
 * Rust's char::is_whitespace. */
bool uni_is_white_space(uint32_t cp);

/* Python's str.isspace() for one character (what Jinja's trim strips):
 * White_Space plus U+001C..U+001F. */
bool uni_is_py_space(uint32_t cp);

/* The utf8proc general category (UTF8PROC_CATEGORY_*, 0..29). */
int uni_category(uint32_t cp);

/* Simple case fold: the one-code-point full case folding of cp, or cp
 * itself ('S' -> 's', U+017F long s -> 's', U+212A Kelvin -> 'k'). */
uint32_t uni_fold(uint32_t cp);

typedef enum { UNI_NFC, UNI_NFD, UNI_NFKC, UNI_NFKD } uni_form;

/* Normalises s[0..len) (valid UTF-8) into out, appending. Returns false
 * only if utf8proc rejects the text. */
bool uni_normalize(const char *s, size_t len, uni_form form, sb *out);

#endif
