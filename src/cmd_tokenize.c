/* cmd_tokenize.c: `lathe tokenize`: text to token ids and back with a
 * Hugging Face tokenizer.json, line by line with --jsonl, and a look at
 * what the trainer would make of a JSONL dataset (--data). */
#include "cli.h"

#include "base/base.h"
#include "tok/tok.h"
#include "train/data.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TK_MAX_INPUT = 1 << 30 };

typedef struct tk_args {
    const char *tokenizer, *text, *input, *data, *format, *chat_template;
    bool decode, jsonl, add_special, split_special, skip_special, tokens, info, pack, skip_bad;
    long max_seq_len, show;
} tk_args;

static const char TK_HELP[] =
    "usage: lathe tokenize --tokenizer PATH [options] [TEXT | -]\n"
    "\n"
    "Encodes TEXT (or standard input, or --input FILE) with a Hugging Face\n"
    "tokenizer.json and prints the token ids, separated by spaces. No special\n"
    "tokens are added unless --add-special is given; special tokens written in\n"
    "the text (\"<|im_end|>\") are recognised, as Hugging Face does.\n"
    "\n"
    "options:\n"
    "  --tokenizer PATH     tokenizer.json, or a model folder holding one (required)\n"
    "  --decode             read token ids (spaces or commas between them) and print the text\n"
    "  --jsonl              one JSON value per input line: a string, printed back as the JSON\n"
    "                       array of its ids; with --decode, an array of ids, printed back as\n"
    "                       a JSON string\n"
    "  -i, --input FILE     read FILE instead of TEXT or standard input\n"
    "  --add-special        add what the tokenizer's post-processor adds (a BOS token)\n"
    "  --split-special      read special tokens in the text as plain text\n"
    "  --skip-special       with --decode: leave special tokens out\n"
    "  --tokens             print one token per line: id and spelling\n"
    "  --info               print the tokenizer's facts (sizes, special ids, chat template)\n"
    "\n"
    "  --data FILE          tokenise a JSONL training file as the trainer does and print\n"
    "                       the chat template chosen and counts of records and tokens\n"
    "    --format F         alpaca, messages, text or auto (default: auto)\n"
    "    --chat-template T  chatml, qwen2, qwen2.5, qwen3, llama3, llama3-early, llama3.1,\n"
    "                       llama3.2 (default: chosen from tokenizer_config.json)\n"
    "    --max-seq-len N    truncate (or pack) at N tokens (default 2048)\n"
    "    --pack             pack records into sequences of exactly N tokens\n"
    "    --skip-bad         skip malformed records (and count them) instead of failing\n"
    "    --show I           print sequence I with its loss targets between [[ and ]]\n"
    "\n"
    "examples:\n"
    "  lathe tokenize --tokenizer share/tokenizers/qwen3 \"Hello world\"\n"
    "  lathe tokenize --tokenizer models/qwen --decode \"9707 1879\"\n"
    "  printf '\"a\"\\n\"b c\"\\n' | lathe tokenize --tokenizer models/qwen --jsonl\n"
    "  lathe tokenize --tokenizer models/qwen --data train.jsonl --show 0\n";

static int tk_parse(tk_args *a, int argc, char **argv)
{
    static const struct {
        const char *name;
        size_t off;
    } flags[] = {
        {"--decode", offsetof(tk_args, decode)},           {"--jsonl", offsetof(tk_args, jsonl)},
        {"--add-special", offsetof(tk_args, add_special)}, {"--split-special", offsetof(tk_args, split_special)},
        {"--skip-special", offsetof(tk_args, skip_special)}, {"--tokens", offsetof(tk_args, tokens)},
        {"--info", offsetof(tk_args, info)},               {"--pack", offsetof(tk_args, pack)},
        {"--skip-bad", offsetof(tk_args, skip_bad)},
    };
    a->max_seq_len = 2048;
    a->show = -1;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        bool matched = false;
        for (size_t k = 0; k < sizeof flags / sizeof flags[0] && !matched; k++)
            if (strcmp(o, flags[k].name) == 0) {
                *(bool *)((char *)a + flags[k].off) = true;
                matched = true;
            }
        if (matched) continue;
        if (strcmp(o, "-") == 0 || o[0] != '-') {
            if (a->text) return cli_usage_error("tokenize", "give one TEXT (quote it), found also \"%s\"", o);
            a->text = o;
            continue;
        }
        if (i + 1 >= argc) return cli_usage_error("tokenize", "%s needs a value", o);
        const char *v = argv[++i];
        if (!strcmp(o, "--tokenizer")) a->tokenizer = v;
        else if (!strcmp(o, "--input") || !strcmp(o, "-i")) a->input = v;
        else if (!strcmp(o, "--data")) a->data = v;
        else if (!strcmp(o, "--format")) a->format = v;
        else if (!strcmp(o, "--chat-template")) a->chat_template = v;
        else if (!strcmp(o, "--max-seq-len")) {
            if (!cli_parse_long(v, 1, 1L << 24, &a->max_seq_len))
                return cli_usage_error("tokenize", "--max-seq-len %s: expected a whole number from 1 to %ld", v, 1L << 24);
        } else if (!strcmp(o, "--show")) {
            if (!cli_parse_long(v, 0, 1L << 40, &a->show))
                return cli_usage_error("tokenize", "--show %s: expected a sequence index (0, 1, ...)", v);
        } else return cli_usage_error("tokenize", "unknown option %s", o);
    }
    if (!a->tokenizer) return cli_usage_error("tokenize", "give --tokenizer PATH (a tokenizer.json or its folder)");
    if (a->text && a->input) return cli_usage_error("tokenize", "give TEXT or --input FILE, not both");
    if (a->data && (a->text || a->input || a->decode || a->jsonl))
        return cli_usage_error("tokenize", "--data FILE takes no other input");
    return LT_EXIT_OK;
}

/* Reads all of a stream; NULL (after a message) when it is larger than
 * TK_MAX_INPUT or cannot be read. */
static char *tk_read_stream(FILE *f, const char *name, size_t *len)
{
    sb s;
    sb_init(&s);
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        sb_putn(&s, buf, n);
        if (s.len > TK_MAX_INPUT) {
            fprintf(stderr, "lathe tokenize: %s: input larger than 1 GiB; split it\n", name);
            sb_free(&s);
            return NULL;
        }
    }
    if (ferror(f)) {
        fprintf(stderr, "lathe tokenize: %s: read error\n", name);
        sb_free(&s);
        return NULL;
    }
    *len = s.len;
    return s.buf ? sb_take(&s) : xstrdup("");
}

/* The input as a buffer and a name for messages. */
static char *tk_input(const tk_args *a, size_t *len, const char **name, int *rc)
{
    char err[512];
    *rc = LT_EXIT_OK;
    if (a->input) {
        *name = a->input;
        char *s = file_read_all(a->input, TK_MAX_INPUT, len, err, sizeof err);
        if (!s) {
            fprintf(stderr, "lathe tokenize: %s\n", err);
            *rc = LT_EXIT_IO;
        }
        return s;
    }
    if (a->text && strcmp(a->text, "-") != 0) {
        *name = "argument";
        *len = strlen(a->text);
        return xstrdup(a->text);
    }
    *name = "<stdin>";
    char *s = tk_read_stream(stdin, *name, len);
    if (!s) *rc = LT_EXIT_IO;
    return s;
}

static tok_tokenizer *tk_load(const char *path, int *rc)
{
    diag_list d;
    diag_list_init(&d);
    tok_tokenizer *t = tok_load(path, &d);
    diag_print_all(&d, stderr);
    *rc = t ? LT_EXIT_OK : (file_exists(path) || dir_exists(path)) ? LT_EXIT_INVALID : LT_EXIT_IO;
    diag_list_free(&d);
    return t;
}

static void tk_put_ids(sb *out, const tok_ids *ids, bool json)
{
    if (json) sb_putc(out, '[');
    for (size_t i = 0; i < ids->len; i++) {
        if (i) sb_puts(out, json ? ", " : " ");
        sb_printf(out, "%d", (int)ids->ids[i]);
    }
    if (json) sb_putc(out, ']');
    sb_putc(out, '\n');
}

static unsigned tk_flags(const tk_args *a)
{
    return (a->add_special ? TOK_ADD_SPECIAL : 0u) | (a->split_special ? TOK_SPLIT_SPECIAL : 0u);
}

/* One token per line: id, then its spelling as a JSON string. */
static void tk_put_tokens(sb *out, const tok_tokenizer *t, const tok_ids *ids)
{
    for (size_t i = 0; i < ids->len; i++) {
        json_t *s = json_string(tok_token_str(t, ids->ids[i]));
        char *js = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
        sb_printf(out, "%d\t%s\n", (int)ids->ids[i], js ? js : "\"?\"");
        free(js);
        json_decref(s);
    }
}

/* Parses "1 2, 3" into ids; false with a message naming the position. */
static bool tk_parse_ids(const char *s, size_t len, const char *name, size_t line, tok_ids *out)
{
    size_t i = 0;
    while (i < len) {
        char c = s[i];
        if (c == ' ' || c == ',' || c == '\n' || c == '\t' || c == '\r' || c == '[' || c == ']') {
            i++;
            continue;
        }
        long v = 0;
        size_t start = i;
        while (i < len && s[i] >= '0' && s[i] <= '9' && v <= INT32_MAX) v = v * 10 + (s[i++] - '0');
        if (i == start || v > INT32_MAX) {
            fprintf(stderr, "lathe tokenize: %s:%zu: expected token ids (whole numbers), found \"%.20s\"\n",
                    name, line, s + start);
            return false;
        }
        tok_ids_push(out, (int32_t)v, 0);
    }
    return true;
}

/* Whole-input mode: one text in, one line of ids out (or back). */
static int tk_whole(const tk_args *a, tok_tokenizer *t, const char *in, size_t len, const char *name)
{
    tok_ids ids;
    tok_ids_init(&ids);
    sb out;
    sb_init(&out);
    char err[512];
    int rc = LT_EXIT_OK;
    if (a->decode) {
        size_t dlen;
        char *text = NULL;
        if (!tk_parse_ids(in, len, name, 1, &ids)) rc = LT_EXIT_INVALID;
        else if (!(text = tok_decode(t, ids.ids, ids.len, a->skip_special, &dlen, err, sizeof err))) {
            fprintf(stderr, "lathe tokenize: %s: %s\n", name, err);
            rc = LT_EXIT_INVALID;
        } else {
            sb_putn(&out, text, dlen);
            sb_putc(&out, '\n');
        }
        free(text);
    } else if (!tok_encode(t, in, len, tk_flags(a), &ids, err, sizeof err)) {
        fprintf(stderr, "lathe tokenize: %s: %s\n", name, err);
        rc = LT_EXIT_INVALID;
    } else if (a->tokens) {
        tk_put_tokens(&out, t, &ids);
    } else {
        tk_put_ids(&out, &ids, false);
    }
    fwrite(sb_str(&out), 1, out.len, stdout);
    sb_free(&out);
    tok_ids_free(&ids);
    return rc;
}

/* One --jsonl line; false after printing an error naming name:line. */
static bool tk_jsonl_line(const tk_args *a, tok_tokenizer *t, const char *s, size_t n,
                          const char *name, size_t line, tok_ids *ids, sb *out)
{
    json_error_t je;
    json_t *v = json_loadb(s, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    char err[512];
    bool ok = false;
    tok_ids_clear(ids);
    if (!v) {
        fprintf(stderr, "lathe tokenize: %s:%zu:%d: not valid JSON: %s\n", name, line, je.column, je.text);
    } else if (!a->decode && !json_is_string(v)) {
        fprintf(stderr, "lathe tokenize: %s:%zu: expected a JSON string (the text to encode)\n", name, line);
    } else if (a->decode && !json_is_array(v)) {
        fprintf(stderr, "lathe tokenize: %s:%zu: expected a JSON array of token ids\n", name, line);
    } else if (!a->decode) {
        ok = tok_encode(t, json_string_value(v), json_string_length(v), tk_flags(a), ids, err, sizeof err);
        if (ok) tk_put_ids(out, ids, true);
        else fprintf(stderr, "lathe tokenize: %s:%zu: %s\n", name, line, err);
    } else {
        size_t i;
        json_t *e;
        ok = true;
        json_array_foreach(v, i, e) {
            json_int_t id = json_integer_value(e);
            if (!json_is_integer(e) || id < 0 || id > INT32_MAX) {
                fprintf(stderr, "lathe tokenize: %s:%zu: element %zu is not a token id\n", name, line, i);
                ok = false;
                break;
            }
            tok_ids_push(ids, (int32_t)id, 0);
        }
        size_t dlen;
        char *text = ok ? tok_decode(t, ids->ids, ids->len, a->skip_special, &dlen, err, sizeof err) : NULL;
        if (ok && !text) {
            fprintf(stderr, "lathe tokenize: %s:%zu: %s\n", name, line, err);
            ok = false;
        }
        json_t *js = text ? json_stringn(text, dlen) : NULL;
        char *dump = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL;
        if (dump) sb_printf(out, "%s\n", dump);
        free(dump);
        json_decref(js);
        free(text);
    }
    json_decref(v);
    return ok;
}

static int tk_jsonl(const tk_args *a, tok_tokenizer *t, const char *in, size_t len, const char *name)
{
    tok_ids ids;
    tok_ids_init(&ids);
    sb out;
    sb_init(&out);
    int rc = LT_EXIT_OK;
    size_t pos = 0, line = 0;
    while (pos < len && rc == LT_EXIT_OK) {
        const char *nl = memchr(in + pos, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - (in + pos)) : len - pos;
        line++;
        if (!tk_jsonl_line(a, t, in + pos, n, name, line, &ids, &out)) rc = LT_EXIT_INVALID;
        pos += n + 1;
        if (out.len > (1 << 16) || rc != LT_EXIT_OK) {
            fwrite(sb_str(&out), 1, out.len, stdout);
            sb_clear(&out);
        }
    }
    fwrite(sb_str(&out), 1, out.len, stdout);
    sb_free(&out);
    tok_ids_free(&ids);
    return rc;
}

static void tk_info(const tok_tokenizer *t)
{
    printf("tokenizer: %s\nvocabulary: %zu ids\n", tok_source(t), tok_vocab_size(t));
    const char *names[] = {"bos", "eos", "pad"};
    int32_t ids[] = {tok_bos_id(t), tok_eos_id(t), tok_pad_id(t)};
    for (int i = 0; i < 3; i++) {
        if (ids[i] >= 0) printf("%s: %d %s\n", names[i], (int)ids[i], tok_token_str(t, ids[i]));
        else printf("%s: none\n", names[i]);
    }
    if (!tok_chat_template(t)) {
        printf("chat template: none\n");
        return;
    }
    chat_template ct;
    char err[300];
    if (chat_template_detect(tok_chat_template(t), tok_bos_token(t), &ct, err, sizeof err)) {
        sb d;
        sb_init(&d);
        chat_template_describe(&ct, &d);
        printf("chat template: %s\n", sb_str(&d));
        sb_free(&d);
        chat_template_free(&ct);
    } else {
        printf("chat template: not supported: %s\n", err);
    }
}

/* --show: sequence i with its targets between [[ and ]]. */
static void tk_show(const tok_tokenizer *t, const data_set *ds, size_t i)
{
    const int32_t *ids;
    const uint8_t *mask;
    size_t len, line;
    data_get(ds, i, &ids, &mask, &len, &line);
    printf("sequence %zu (line %zu, %zu tokens):\n", i, line, len);
    sb raw;
    sb_init(&raw);
    for (size_t k = 0; k < len; k++) {
        if (mask[k] && (k == 0 || !mask[k - 1])) sb_puts(&raw, "[[");
        size_t n;
        const char *b = tok_token_bytes(t, ids[k], &n);
        if (b) sb_putn(&raw, b, n);
        if (mask[k] && (k + 1 == len || !mask[k + 1])) sb_puts(&raw, "]]");
    }
    fwrite(sb_str(&raw), 1, raw.len, stdout);
    printf("\n");
    sb_free(&raw);
}

static int tk_data(const tk_args *a, tok_tokenizer *t)
{
    data_options o;
    data_options_init(&o);
    if (a->format && !data_format_parse(a->format, &o.format))
        return cli_usage_error("tokenize", "--format %s: expected alpaca, messages, text or auto", a->format);
    o.max_seq_len = (size_t)a->max_seq_len;
    o.pack = a->pack;
    o.skip_bad = a->skip_bad;
    diag_list d;
    diag_list_init(&d);
    chat_template ct = {0};
    bool have_tmpl = chat_template_for_tokenizer(t, a->chat_template, &ct, &d);
    if (!have_tmpl && (a->chat_template || o.format == DATA_ALPACA || o.format == DATA_MESSAGES)) {
        diag_print_all(&d, stderr);
        diag_list_free(&d);
        return a->chat_template ? LT_EXIT_USAGE : LT_EXIT_INVALID;
    }
    diag_list_free(&d); /* text data needs no template */
    diag_list_init(&d);
    data_set *ds = data_load(a->data, t, have_tmpl ? &ct : NULL, &o, &d);
    diag_print_all(&d, stderr);
    int rc = LT_EXIT_OK;
    if (!ds) {
        rc = file_exists(a->data) ? LT_EXIT_INVALID : LT_EXIT_IO;
    } else {
        const data_stats *s = data_get_stats(ds);
        char tokens[32], targets[32];
        str_thousands(tokens, sizeof tokens, s->tokens);
        str_thousands(targets, sizeof targets, s->targets);
        printf("tokenizer: %s (%zu ids)\n", tok_source(t), tok_vocab_size(t));
        if (have_tmpl && s->format != DATA_TEXT) {
            sb desc;
            sb_init(&desc);
            chat_template_describe(&ct, &desc);
            printf("chat template: %s\n", sb_str(&desc));
            sb_free(&desc);
        }
        printf("data: %s, %s form%s\n", a->data, data_format_name(s->format),
               o.format == DATA_AUTO ? " (detected)" : "");
        printf("records: %zu kept, %zu skipped, %zu truncated, %zu without targets\n", s->records,
               s->skipped, s->truncated, s->empty);
        printf("sequences: %zu%s, %s tokens, %s targets\n", s->sequences,
               o.pack ? " (packed)" : "", tokens, targets);
        if (a->show >= 0) {
            if ((size_t)a->show < data_count(ds)) tk_show(t, ds, (size_t)a->show);
            else {
                fprintf(stderr, "lathe tokenize: --show %ld: there are %zu sequences\n", a->show, data_count(ds));
                rc = LT_EXIT_USAGE;
            }
        }
    }
    data_free(ds);
    diag_list_free(&d);
    chat_template_free(&ct);
    return rc;
}

static int tokenize_run(int argc, char **argv)
{
    tk_args a = {0};
    int rc = tk_parse(&a, argc, argv);
    if (rc != LT_EXIT_OK) return rc;
    tok_tokenizer *t = tk_load(a.tokenizer, &rc);
    if (!t) return rc;
    if (a.info) {
        tk_info(t);
    } else if (a.data) {
        rc = tk_data(&a, t);
    } else {
        size_t len;
        const char *name;
        char *in = tk_input(&a, &len, &name, &rc);
        if (in) rc = a.jsonl ? tk_jsonl(&a, t, in, len, name) : tk_whole(&a, t, in, len, name);
        free(in);
    }
    tok_free(t);
    return rc;
}

const cli_command cli_cmd_tokenize = {
    .name = "tokenize",
    .summary = "text to token ids and back with a Hugging Face tokenizer",
    .help = TK_HELP,
    .run = tokenize_run,
};
