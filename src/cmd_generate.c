/* cmd_generate.c: `lathe generate`, text (or token ids) from a base model
 * with an optional PEFT adapter: greedy, temperature and top-p sampling with
 * a KV cache, so a user can see what an adapter learned. */
#include "cli.h"

#include "base/base.h"
#include "nn/nn.h"
#include "tok/tok.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct gen_args {
    const char *model, *adapter, *prompt, *ids, *tokenizer;
    bool chat, no_eos;
    int threads;
    tr_sample_opts s;
} gen_args;

static bool gen_num(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) return false;
    *out = v;
    return true;
}

static int gen_parse(gen_args *a, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--chat")) { a->chat = true; continue; }
        if (!strcmp(o, "--no-eos")) { a->no_eos = true; continue; }
        if (strncmp(o, "--", 2) != 0) return cli_usage_error("generate", "unexpected argument %s", o);
        if (i + 1 >= argc) return cli_usage_error("generate", "%s needs a value", o);
        const char *v = argv[++i];
        double d;
        if (!strcmp(o, "--model")) a->model = v;
        else if (!strcmp(o, "--adapter")) a->adapter = v;
        else if (!strcmp(o, "--prompt")) a->prompt = v;
        else if (!strcmp(o, "--ids")) a->ids = v;
        else if (!strcmp(o, "--tokenizer")) a->tokenizer = v;
        else if (!strcmp(o, "--max-new") && gen_num(v, 1, 1 << 20, &d)) a->s.max_new = (int)d;
        else if (!strcmp(o, "--temperature") && gen_num(v, 0, 100, &d)) a->s.temperature = (float)d;
        else if (!strcmp(o, "--top-p") && gen_num(v, 0, 1, &d)) a->s.top_p = (float)d;
        else if (!strcmp(o, "--seed") && gen_num(v, 0, 9e15, &d)) a->s.seed = (uint64_t)d;
        else if (!strcmp(o, "--threads") && gen_num(v, 1, 1024, &d)) a->threads = (int)d;
        else return cli_usage_error("generate", "%s %s: unknown option or invalid value", o, v);
    }
    if (!a->model) return cli_usage_error("generate", "give --model DIR");
    if (!a->prompt == !a->ids) return cli_usage_error("generate", "give either --prompt TEXT or --ids \"1 2 3\"");
    return LT_EXIT_OK;
}

/* "1 2,3" -> ids */
static int32_t *gen_parse_ids(const char *s, int vocab, int *n)
{
    int32_t *ids = xmalloc((strlen(s) / 2 + 2) * sizeof *ids);
    *n = 0;
    const char *p = s;
    while (*p) {
        while (*p == ' ' || *p == ',') p++;
        if (!*p) break;
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v >= vocab) {
            fprintf(stderr, "lathe generate: --ids: \"%s\" is not a token id of this model (0..%d)\n", p, vocab - 1);
            free(ids);
            return NULL;
        }
        ids[(*n)++] = (int32_t)v;
        p = end;
    }
    return ids;
}

/* The prompt's ids through the tokenizer (and the chat template with --chat). */
static int32_t *gen_encode(tok_tokenizer *t, const gen_args *a, int *n)
{
    char err[512];
    tok_ids ids;
    tok_ids_init(&ids);
    bool ok;
    if (a->chat) {
        diag_list d;
        diag_list_init(&d);
        chat_template tmpl = {0};
        ok = chat_template_for_tokenizer(t, NULL, &tmpl, &d);
        if (!ok) diag_print_all(&d, stderr);
        diag_list_free(&d);
        chat_message msg = {"user", a->prompt};
        chat_options co = {.add_generation_prompt = true, .enable_thinking = -1};
        if (ok) ok = chat_encode(t, &tmpl, &msg, 1, &co, &ids, NULL, err, sizeof err);
        chat_template_free(&tmpl);
    } else {
        ok = tok_encode(t, a->prompt, strlen(a->prompt), TOK_ADD_SPECIAL, &ids, err, sizeof err);
    }
    if (!ok || ids.len == 0) {
        if (!ok) fprintf(stderr, "lathe generate: %s\n", err);
        else fprintf(stderr, "lathe generate: the prompt encodes to no tokens\n");
        tok_ids_free(&ids);
        return NULL;
    }
    int32_t *out = xmalloc(ids.len * sizeof *out);
    memcpy(out, ids.ids, ids.len * sizeof *out);
    *n = (int)ids.len;
    tok_ids_free(&ids);
    return out;
}

typedef struct gen_print {
    tok_tokenizer *tok;
    int count;
} gen_print;

static void gen_on_token(int32_t id, void *ud)
{
    gen_print *p = ud;
    size_t len;
    const char *b = p->tok ? tok_token_bytes(p->tok, id, &len) : NULL;
    if (b) fwrite(b, 1, len, stdout);
    else printf("%s%d", p->count ? " " : "", id);
    p->count++;
    fflush(stdout);
}

/* Re-executes `lathe CMD ARGS` with OMP_WAIT_POLICY=passive (see nn/nn.h). */
static void generate_passive_wait(int argc, char **argv)
{
    char **full = xcalloc((size_t)argc + 2, sizeof *full);
    full[0] = "lathe";
    for (int i = 0; i < argc; i++) full[i + 1] = argv[i];
    tr_reexec_with_passive_wait(full);
    free(full);
}

static int generate_run(int argc, char **argv)
{
    generate_passive_wait(argc, argv);
    gen_args a = {.s = {.temperature = 0, .top_p = 1, .max_new = 64, .seed = 0}};
    int rc = gen_parse(&a, argc, argv);
    if (rc) return rc;
    tr_backend *be = tr_backend_cpu_create(a.threads);
    tr_model m;
    tr_model_opts mo = {.mode = TR_MODE_LORA};
    char err[1024];
    if (!tr_model_load(&m, a.model, &mo, be, err, sizeof err) ||
        (a.adapter && !tr_model_load_adapter(&m, a.adapter, err, sizeof err))) {
        fprintf(stderr, "lathe generate: %s\n", err);
        be->destroy(be);
        return LT_EXIT_INVALID;
    }
    tok_tokenizer *tok = NULL;
    char *tpath = a.tokenizer ? xstrdup(a.tokenizer) : path_join(a.model, "tokenizer.json");
    if (a.prompt) {
        diag_list d;
        diag_list_init(&d);
        tok = tok_load(tpath, &d);
        if (!tok) diag_print_all(&d, stderr);
        diag_list_free(&d);
    }
    free(tpath);
    int n = 0;
    int32_t *prompt = NULL;
    if (a.ids) prompt = gen_parse_ids(a.ids, m.cfg.vocab, &n);
    else if (tok) prompt = gen_encode(tok, &a, &n);
    rc = LT_EXIT_INVALID;
    if (prompt && n > 0) {
        a.s.eos_id = a.no_eos ? -1 : (tok && tok_eos_id(tok) >= 0 ? tok_eos_id(tok) : m.cfg.eos_id);
        int32_t *out = xmalloc((size_t)a.s.max_new * sizeof *out);
        gen_print gp = {a.ids ? NULL : tok, 0};
        tr_generate(&m, prompt, n, &a.s, out, gen_on_token, &gp);
        printf("\n");
        free(out);
        rc = LT_EXIT_OK;
    } else if (a.prompt && !tok) {
        fprintf(stderr, "lathe generate: --prompt needs the model's tokenizer.json (or --tokenizer); "
                "--ids takes token ids without one\n");
    }
    free(prompt);
    if (tok) tok_free(tok);
    tr_model_free(&m);
    be->destroy(be);
    return rc;
}

const cli_command cli_cmd_generate = {
    .name = "generate",
    .summary = "generate text with a model and an optional LoRA adapter",
    .help =
        "usage: lathe generate --model DIR [--adapter DIR] (--prompt TEXT | --ids \"1 2 3\")\n"
        "                      [--max-new N] [--temperature T] [--top-p P] [--seed N]\n"
        "                      [--chat] [--tokenizer PATH] [--no-eos] [--threads N]\n"
        "\n"
        "Runs the prompt through the model (with the PEFT adapter folder when given)\n"
        "and prints what it generates: greedy with --temperature 0 (the default),\n"
        "otherwise sampled, from the smallest set of tokens whose probability reaches\n"
        "--top-p. --prompt needs tokenizer.json (in the model folder or --tokenizer);\n"
        "--chat wraps it as a user message in the tokenizer's chat template. --ids\n"
        "takes token ids and prints ids. Stops at the end-of-sequence token unless\n"
        "--no-eos.\n",
    .run = generate_run,
};
