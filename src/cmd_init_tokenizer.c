/* cmd_init_tokenizer.c: `lathe init-tokenizer`, a small byte-level BPE
 * tokenizer learned from the user's text (lib/tok, tok_trainer_*), written
 * as tokenizer.json + tokenizer_config.json, so that a small model made
 * with `lathe init-model --tokenizer` gets a vocabulary that fits it (the
 * demo's base model uses one). */
#include "cli.h"

#include "base/base.h"
#include "nn/nn.h"
#include "tok/tok.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { IT_MAX_FILE = 1 << 30 };

static const char it_help[] =
    "usage: lathe init-tokenizer DIR FILE... [--vocab N] [--min-frequency N]\n"
    "\n"
    "Learns a byte-level BPE tokenizer from the FILEs and writes DIR/tokenizer.json\n"
    "and DIR/tokenizer_config.json, as Hugging Face `tokenizers` and lathe read them.\n"
    "A FILE ending in .jsonl is read as JSON records, one per line, and every string\n"
    "value in them (not the keys) is a text: the instructions and answers of alpaca\n"
    "or messages records, the text of text records. Any other FILE is one plain\n"
    "text, read whole.\n"
    "\n"
    "The tokenizer has Qwen2's layout with a small vocabulary: Qwen2's pre-tokenizer\n"
    "regex, the byte-level mapping, ids 0-255 for the bytes, then the learned tokens\n"
    "(the most frequent adjacent pair merged first), then <|endoftext|>, <|im_start|>\n"
    "and <|im_end|>. Its config gives eos <|im_end|>, pad <|endoftext|> and a ChatML\n"
    "chat template, so `lathe train` renders alpaca and messages records with it and\n"
    "`lathe generate --chat` stops at <|im_end|>. The same files in the same order give\n"
    "the same tokenizer, byte for byte.\n"
    "\n"
    "options:\n"
    "  --vocab N            ids in all, 259 to 1048576 (default 1024): 256 bytes, the\n"
    "                       learned tokens and the 3 special tokens\n"
    "  --min-frequency N    never merge a pair seen fewer than N times (default 2); the\n"
    "                       vocabulary stays smaller when the text runs out of pairs\n"
    "\n"
    "example:\n"
    "  lathe init-tokenizer /tmp/tok share/data/tinyshakespeare/input.txt \\\n"
    "      share/data/self-instruct/seed_tasks.alpaca.jsonl --vocab 1024\n"
    "  lathe init-model /tmp/toy --preset tiny --tokenizer /tmp/tok/tokenizer.json\n"
    "\n"
    "exit: 0 written, 1 usage, 2 a FILE is not valid UTF-8 or JSON (file:line said),\n"
    "      4 a file could not be read or written\n";

/* The texts to learn from, each with where it came from (for messages). */
typedef struct it_texts {
    char **text;
    size_t *len;
    const char **file;
    size_t *line;           /* its JSONL line; 0 for a whole file */
    size_t n, cap;
} it_texts;

static void it_push(it_texts *t, const char *s, size_t n, const char *file, size_t line)
{
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->text = xrealloc(t->text, t->cap * sizeof *t->text);
        t->len = xrealloc(t->len, t->cap * sizeof *t->len);
        t->file = xrealloc(t->file, t->cap * sizeof *t->file);
        t->line = xrealloc(t->line, t->cap * sizeof *t->line);
    }
    t->text[t->n] = xstrndup(s, n);
    t->len[t->n] = n;
    t->file[t->n] = file;
    t->line[t->n++] = line;
}

static void it_texts_free(it_texts *t)
{
    for (size_t i = 0; i < t->n; i++) free(t->text[i]);
    free(t->text);
    free(t->len);
    free(t->file);
    free(t->line);
}

/* Every string value of v, depth first, in document order. */
static void it_strings(const json_t *v, it_texts *out, const char *file, size_t line)
{
    if (json_is_string(v)) {
        it_push(out, json_string_value(v), json_string_length(v), file, line);
    } else if (json_is_array(v)) {
        size_t i;
        const json_t *x;
        json_array_foreach(v, i, x) it_strings(x, out, file, line);
    } else if (json_is_object(v)) {
        const char *k;
        const json_t *x;
        json_object_foreach((json_t *)v, k, x) it_strings(x, out, file, line);
    }
}

/* The texts of one JSONL file: a bad line is an error naming file:line. */
static int it_jsonl(const char *path, const char *buf, size_t len, it_texts *out)
{
    size_t line = 0;
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(buf + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - buf) : len, n = end - i;
        line++;
        const char *s = buf + i;
        if (line == 1 && n >= 3 && !memcmp(s, "\xEF\xBB\xBF", 3)) s += 3, n -= 3; /* a BOM */
        while (n && (s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
        i = end + 1;
        if (!n) continue; /* blank lines carry no text */
        json_error_t je;
        json_t *rec = json_loadb(s, n, JSON_DECODE_ANY, &je);
        if (!rec) {
            fprintf(stderr, "lathe init-tokenizer: %s:%zu:%d: not JSON: %s\n", path, line, je.column,
                    je.text);
            return LT_EXIT_INVALID;
        }
        it_strings(rec, out, path, line);
        json_decref(rec);
    }
    return LT_EXIT_OK;
}

/* Reads FILE into texts: a .jsonl file's string values, else the file. */
static int it_read(const char *path, it_texts *out)
{
    char err[512];
    size_t len;
    char *buf = file_read_all(path, IT_MAX_FILE, &len, err, sizeof err);
    if (!buf) {
        fprintf(stderr, "lathe init-tokenizer: %s\n", err);
        return LT_EXIT_IO;
    }
    int rc = LT_EXIT_OK;
    if (str_ends_with(path, ".jsonl")) rc = it_jsonl(path, buf, len, out);
    else it_push(out, buf, len, path, 0);
    free(buf);
    return rc;
}

/* Bytes per token of the written tokenizer on the texts (which also shows
 * that the file loads). Returns 0 when it does not load or encode. */
static double it_bytes_per_token(const char *dir, const it_texts *t)
{
    diag_list d;
    diag_list_init(&d);
    tok_tokenizer *tok = tok_load(dir, &d);
    if (!tok) diag_print_all(&d, stderr);
    diag_list_free(&d);
    if (!tok) return 0;
    tok_ids ids;
    tok_ids_init(&ids);
    uint64_t bytes = 0, tokens = 0;
    char err[256];
    bool ok = true;
    for (size_t i = 0; i < t->n && ok; i++) {
        tok_ids_clear(&ids);
        ok = tok_encode(tok, t->text[i], t->len[i], TOK_SPLIT_SPECIAL, &ids, err, sizeof err);
        bytes += t->len[i];
        tokens += ids.len;
    }
    if (!ok) fprintf(stderr, "lathe init-tokenizer: %s\n", err);
    tok_ids_free(&ids);
    tok_free(tok);
    return ok && tokens ? (double)bytes / (double)tokens : 0;
}

static int it_write(const char *dir, const char *name, const char *text)
{
    char *path = path_join(dir, name);
    int e = file_write_atomic(path, text, strlen(text));
    if (e) fprintf(stderr, "lathe init-tokenizer: cannot write %s: %s\n", path, strerror(e));
    free(path);
    return e ? LT_EXIT_IO : LT_EXIT_OK;
}

/* Learns from the texts and writes the two files. */
static int it_learn(const char *dir, const it_texts *t, const tok_train_options *o, size_t files)
{
    tok_trainer *tr = tok_trainer_new();
    char err[512];
    for (size_t i = 0; i < t->n; i++)
        if (!tok_trainer_feed(tr, t->text[i], t->len[i], err, sizeof err)) {
            if (t->line[i])
                fprintf(stderr, "lathe init-tokenizer: %s:%zu: %s\n", t->file[i], t->line[i], err);
            else
                fprintf(stderr, "lathe init-tokenizer: %s: %s\n", t->file[i], err);
            tok_trainer_free(tr);
            return LT_EXIT_INVALID;
        }
    tok_train_result res;
    char *json = tok_trainer_run(tr, o, &res, err, sizeof err);
    tok_trainer_free(tr);
    if (!json) {
        fprintf(stderr, "lathe init-tokenizer: %s\n", err);
        return LT_EXIT_INVALID;
    }
    char *cfg = tok_train_config_json();
    int rc = LT_EXIT_OK;
    if (!tr_mkdir_p(dir, err, sizeof err)) {
        fprintf(stderr, "lathe init-tokenizer: %s\n", err);
        rc = LT_EXIT_IO;
    }
    if (!rc) rc = it_write(dir, "tokenizer.json", json);
    if (!rc) rc = it_write(dir, "tokenizer_config.json", cfg);
    free(json);
    free(cfg);
    if (rc) return rc;
    double bpt = it_bytes_per_token(dir, t);
    if (bpt == 0) return LT_EXIT_INTERNAL;
    char b[32], w[32], dw[32];
    str_thousands(b, sizeof b, res.bytes);
    str_thousands(w, sizeof w, res.words);
    str_thousands(dw, sizeof dw, res.distinct_words);
    printf("wrote %s: byte-level BPE, vocab %zu (256 bytes, %zu learned, %d special) from %s bytes "
           "of %zu file%s (%s words, %s distinct); %.2f bytes per token on them\n",
           dir, res.vocab, res.vocab - 256 - TOK_TRAIN_SPECIALS, TOK_TRAIN_SPECIALS, b, files,
           files == 1 ? "" : "s", w, dw, bpt);
    if (res.stopped_early)
        printf("note: the text has no more pairs seen %llu times or more: the vocabulary is "
               "%zu, not %zu\n", (unsigned long long)(o->min_frequency ? o->min_frequency : 1),
               res.vocab, o->vocab_size);
    return LT_EXIT_OK;
}

static int init_tokenizer_run(int argc, char **argv)
{
    const char *dir = NULL;
    const char **files = xcalloc((size_t)argc, sizeof *files);
    size_t n_files = 0;
    tok_train_options o = {.vocab_size = 1024, .min_frequency = 2};
    int rc = LT_EXIT_OK;
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i];
        long v;
        if (!strcmp(a, "--vocab") || !strcmp(a, "--min-frequency")) {
            bool vocab = !strcmp(a, "--vocab");
            if (i + 1 >= argc) rc = cli_usage_error("init-tokenizer", "%s needs a value", a);
            else if (!cli_parse_long(argv[++i], vocab ? 256 + TOK_TRAIN_SPECIALS : 1,
                              vocab ? TOK_TRAIN_MAX_VOCAB : 1000000000L, &v))
                rc = cli_usage_error("init-tokenizer", "%s %s: expected %s", a, argv[i],
                                     vocab ? "a number from 259 to 1048576"
                                           : "a positive number");
            else if (vocab) o.vocab_size = (size_t)v;
            else o.min_frequency = (uint64_t)v;
        } else if (!strncmp(a, "--", 2)) {
            rc = cli_usage_error("init-tokenizer", "unknown option %s", a);
        } else if (!dir) {
            dir = a;
        } else {
            files[n_files++] = a;
        }
    }
    if (!rc && !dir) rc = cli_usage_error("init-tokenizer", "give the folder to write");
    if (!rc && !n_files) rc = cli_usage_error("init-tokenizer", "give at least one FILE to learn from");
    it_texts t = {0};
    for (size_t i = 0; i < n_files && !rc; i++) rc = it_read(files[i], &t);
    if (!rc) rc = it_learn(dir, &t, &o, n_files);
    it_texts_free(&t);
    free(files);
    return rc;
}

const cli_command cli_cmd_init_tokenizer = {
    .name = "init-tokenizer",
    .summary = "learn a small byte-level BPE tokenizer from text (for small models and demos)",
    .help = it_help,
    .run = init_tokenizer_run,
};
