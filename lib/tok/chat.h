/* chat.h (part of tok.h): chat templates rendered in C, for the families lathe supports
 * (there is no general Jinja engine). Each family reproduces, character for
 * character, what its vendor's Jinja template renders for conversations of
 * system / user / assistant (and, for Qwen, tool) messages; docs/data.md
 * lists the rules of each.
 *
 * The family is chosen from tokenizer_config.json's chat_template: a
 * template identical to a known vendor template is recognised exactly; one
 * that differs but clearly belongs to a family (its markers and rules) is
 * rendered as that family and reported as "similar"; anything else is an
 * error that names the families and how to force one.
 *
 * Rendering also says which byte spans of the text are the assistant's: for
 * each assistant message, exactly what the model should write after the
 * generation prompt, up to and including its end-of-turn token
 * (<|im_end|>, <|eot_id|>). Those spans become the loss mask.
 */
#ifndef LATHE_TOK_CHAT_H
#define LATHE_TOK_CHAT_H

#include "tok/tokenizer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum chat_family {
    CHAT_NONE = 0,
    CHAT_CHATML,       /* "chatml": <|im_start|>role\n...<|im_end|>\n, no default system */
    CHAT_QWEN2,        /* "qwen2": ChatML, default system "You are a helpful assistant." */
    CHAT_QWEN25,       /* "qwen2.5": ChatML, default system "You are Qwen, created by ..." */
    CHAT_QWEN3,        /* "qwen3": ChatML, no default system, <think> blocks */
    CHAT_LLAMA3,       /* "llama3": Meta-Llama-3-Instruct, content trimmed */
    CHAT_LLAMA3_EARLY, /* "llama3-early": the same, but always ends with the assistant header */
    CHAT_LLAMA31,      /* "llama3.1": system header with "Cutting Knowledge Date" */
    CHAT_LLAMA32,      /* "llama3.2": as llama3.1 (the date is today's in HF; see chat_options) */
} chat_family;

/* A chosen template. Fill it with chat_template_detect / _for_tokenizer /
 * _force; free with chat_template_free. */
typedef struct chat_template {
    chat_family family;
    bool exact;      /* the Jinja text is identical to a known vendor template */
    bool forced;     /* chosen by the caller, not detected */
    char *bos_token; /* for the Llama families ("<|begin_of_text|>"); may be NULL */
} chat_template;

typedef struct chat_message {
    const char *role;    /* "system", "user", "assistant" (and "tool" for Qwen) */
    const char *content; /* UTF-8 */
} chat_message;

typedef struct chat_options {
    /* End with the header the model continues from ("<|im_start|>assistant\n"). */
    bool add_generation_prompt;
    /* Qwen3's enable_thinking: -1 not given (the template's default), 0 false
     * (the generation prompt gets an empty <think></think>), 1 true. */
    int enable_thinking;
    /* Llama 3.1 / 3.2 "Today Date: ..."; NULL means "26 Jul 2024", the
     * templates' default. (HF renders Llama 3.2 with today's date; a fixed
     * date keeps tokenised data reproducible across resumes.) */
    const char *date_string;
} chat_options;

/* A byte range [begin, end) of rendered text. */
typedef struct chat_span {
    size_t begin, end;
} chat_span;

typedef struct chat_text {
    char *text; /* NUL-terminated */
    size_t len;
    chat_span *spans; /* the assistant spans, in order */
    size_t nspans;
} chat_text;

/* "chatml", "qwen2.5", ... ; "none" for CHAT_NONE. */
const char *chat_family_name(chat_family f);

/* Parses a family name as chat_family_name writes it. */
bool chat_family_parse(const char *name, chat_family *out);

/* The common ChatML Jinja template (no default system message), which
 * the chatml family renders exactly; `lathe init-tokenizer` writes it. */
extern const char CHAT_CHATML_JINJA[];

/* Chooses the family of a Jinja chat template. bos_token may be NULL.
 * Returns false with a message in err for a template of no known family. */
bool chat_template_detect(const char *jinja, const char *bos_token, chat_template *out, char *err,
                          size_t errsz);

/* Chooses the template for a tokenizer: `force` (a family name) when not
 * NULL, otherwise detected from the tokenizer's chat_template. Errors (no
 * template, unknown template, unknown family name) go to diags, naming
 * tokenizer_config.json and the fix (--chat-template NAME). */
bool chat_template_for_tokenizer(const tok_tokenizer *tok, const char *force, chat_template *out,
                                 diag_list *diags);

/* Sets out to a family chosen by the caller (no detection). */
void chat_template_force(chat_family f, const char *bos_token, chat_template *out);

void chat_template_free(chat_template *t);

/* One line for logs: "qwen2.5 (exact match of the tokenizer's template)". */
void chat_template_describe(const chat_template *t, sb *out);

/* Renders messages as the family's Jinja template would. opts may be NULL
 * (no generation prompt). Returns false with a message in err for a role
 * the family does not render (where the vendor template would silently
 * drop the message), a missing or non-UTF-8 content, or an empty
 * conversation. Free with chat_text_free. */
bool chat_render(const chat_template *t, const chat_message *msgs, size_t n,
                 const chat_options *opts, chat_text *out, char *err, size_t errsz);

void chat_text_free(chat_text *c);

/* Renders, then encodes the text with tok (special tokens recognised, none
 * added) into ids, which is emptied first. When mask is not NULL, *mask
 * receives a malloc'd array of ids->len bytes where 1 marks the tokens that
 * begin inside an assistant span (the caller frees it). Returns false with
 * a message in err. */
bool chat_encode(tok_tokenizer *tok, const chat_template *t, const chat_message *msgs, size_t n,
                 const chat_options *opts, tok_ids *ids, uint8_t **mask, char *err,
                 size_t errsz);

#endif
