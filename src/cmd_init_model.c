/* cmd_init_model.c: `lathe init-model`, a random-initialised Hugging Face
 * model folder (config.json + model.safetensors, plus tokenizer files when a
 * tokenizer is given), so tests and demos need no download. */
#include "cli.h"

#include "base/base.h"
#include "nn/nn.h"
#include "tok/tok.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool im_arch(const char *s, tr_arch *a)
{
    static const char *const names[] = {"llama", "mistral", "qwen2", "qwen3"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, names[i])) {
            *a = (tr_arch)i;
            return true;
        }
    return false;
}

static bool im_dtype(const char *s, tr_dtype *t)
{
    if (str_ieq(s, "f32") || str_ieq(s, "float32")) *t = TR_F32;
    else if (str_ieq(s, "bf16") || str_ieq(s, "bfloat16")) *t = TR_BF16;
    else if (str_ieq(s, "f16") || str_ieq(s, "float16")) *t = TR_F16;
    else return false;
    return true;
}

/* Loads the tokenizer and sizes the vocabulary and special ids from it. */
static tok_tokenizer *im_tokenizer(const char *tok_path, tr_config *c)
{
    diag_list d;
    diag_list_init(&d);
    tok_tokenizer *t = tok_load(tok_path, &d);
    if (!t) diag_print_all(&d, stderr);
    diag_list_free(&d);
    if (!t) return NULL;
    c->vocab = (int)tok_vocab_size(t);
    c->bos_id = tok_bos_id(t);
    c->eos_id = tok_eos_id(t);
    return t;
}

/* Copies tokenizer.json (and tokenizer_config.json beside it) into dir. */
static int im_copy_tokenizer(const tok_tokenizer *t, const char *dir)
{
    char *src_dir = xstrdup(tok_source(t));
    char *slash = strrchr(src_dir, '/');
    if (slash) *slash = 0;
    else strcpy(src_dir, ".");
    const char *files[] = {"tokenizer.json", "tokenizer_config.json"};
    int rc = LT_EXIT_OK;
    for (int i = 0; i < 2 && !rc; i++) {
        char *from = i == 0 ? xstrdup(tok_source(t)) : path_join(src_dir, files[i]);
        char *to = path_join(dir, files[i]);
        char err[512];
        size_t len;
        char *text = file_exists(from) ? file_read_all(from, (size_t)1 << 30, &len, err, sizeof err) : NULL;
        if (text && file_write_atomic(to, text, len) != 0) {
            fprintf(stderr, "lathe init-model: cannot write %s\n", to);
            rc = LT_EXIT_IO;
        }
        free(text);
        free(from);
        free(to);
    }
    free(src_dir);
    return rc;
}

static int init_model_run(int argc, char **argv)
{
    const char *dir = NULL, *preset = "tiny", *tok = NULL;
    tr_arch arch = TR_ARCH_LLAMA;
    tr_dtype dtype = TR_F32;
    long seed = 42, v;
    double init_std = 0.02;
    long dims[7] = {0}; /* vocab dim hidden layers heads kv-heads head-dim */
    static const char *const dim_opts[7] = {"--vocab", "--dim", "--hidden", "--layers",
                                            "--heads", "--kv-heads", "--head-dim"};
    bool untied = false;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--untied")) { untied = true; continue; }
        if (strncmp(o, "--", 2) != 0) {
            if (dir) return cli_usage_error("init-model", "two folders given: %s and %s", dir, o);
            dir = o;
            continue;
        }
        if (i + 1 >= argc) return cli_usage_error("init-model", "%s needs a value", o);
        const char *val = argv[++i];
        int k;
        for (k = 0; k < 7 && strcmp(o, dim_opts[k]); k++) {}
        if (k < 7) {
            if (!cli_parse_long(val, 1, 1 << 22, &dims[k]))
                return cli_usage_error("init-model", "%s %s: expected a positive integer", o, val);
        } else if (!strcmp(o, "--preset")) {
            preset = val;
        } else if (!strcmp(o, "--arch")) {
            if (!im_arch(val, &arch))
                return cli_usage_error("init-model", "--arch %s: expected llama, mistral, qwen2 or qwen3", val);
        } else if (!strcmp(o, "--dtype")) {
            if (!im_dtype(val, &dtype))
                return cli_usage_error("init-model", "--dtype %s: expected f32, bf16 or f16", val);
        } else if (!strcmp(o, "--seed")) {
            if (!cli_parse_long(val, 0, 0x7fffffffffffffffL, &seed))
                return cli_usage_error("init-model", "--seed %s: expected a non-negative integer", val);
        } else if (!strcmp(o, "--tokenizer")) {
            tok = val;
        } else if (!strcmp(o, "--init-std")) {
            char *end;
            init_std = strtod(val, &end);
            if (*end || !(init_std > 0 && init_std <= 10))
                return cli_usage_error("init-model", "--init-std %s: expected a number in (0, 10]", val);
        } else {
            return cli_usage_error("init-model", "unknown option %s", o);
        }
    }
    if (!dir) return cli_usage_error("init-model", "give the folder to write");
    tr_config c;
    if (!tr_preset_config(preset, arch, &c))
        return cli_usage_error("init-model", "--preset %s: expected tiny, small, base or 100m", preset);
    int *fields[7] = {&c.vocab, &c.dim, &c.hidden, &c.n_layers, &c.n_heads, &c.n_kv_heads, &c.head_dim};
    for (int k = 0; k < 7; k++)
        if (dims[k]) *fields[k] = (int)dims[k];
    if (dims[1] && !dims[6]) c.head_dim = c.dim / c.n_heads;
    if (c.n_heads % c.n_kv_heads || c.head_dim % 2)
        return cli_usage_error("init-model", "--heads must be a multiple of --kv-heads and the head "
                               "dimension even (heads %d, kv-heads %d, head-dim %d)",
                               c.n_heads, c.n_kv_heads, c.head_dim);
    c.tie_embeddings = !untied;
    c.init_std = init_std;
    tok_tokenizer *t = tok ? im_tokenizer(tok, &c) : NULL;
    if (tok && !t) return LT_EXIT_INVALID;
    char err[512];
    int rc = LT_EXIT_OK;
    if (!tr_init_model(dir, &c, dtype, (uint64_t)seed, err, sizeof err)) {
        fprintf(stderr, "lathe init-model: %s\n", err);
        rc = LT_EXIT_IO;
    }
    if (!rc && t) rc = im_copy_tokenizer(t, dir);
    if (t) tok_free(t);
    if (rc) return rc;
    v = (long)tr_config_param_count(&c);
    char n[32];
    str_thousands(n, sizeof n, (uint64_t)v);
    printf("wrote %s: %s %s, %s parameters (%s), vocab %d, dim %d, %d layers, %d/%d heads\n", dir,
           c.model_type, preset, n, tr_dtype_name(dtype), c.vocab, c.dim, c.n_layers, c.n_heads,
           c.n_kv_heads);
    return LT_EXIT_OK;
}

const cli_command cli_cmd_init_model = {
    .name = "init-model",
    .summary = "write a random-initialised Hugging Face model (for tests and demos)",
    .help =
        "usage: lathe init-model DIR [--preset tiny|small|base|100m] [--arch llama|mistral|qwen2|qwen3]\n"
        "                        [--dtype f32|bf16|f16] [--seed N] [--tokenizer tokenizer.json]\n"
        "                        [--vocab N] [--dim N] [--hidden N] [--layers N] [--heads N]\n"
        "                        [--kv-heads N] [--head-dim N] [--untied] [--init-std X]\n"
        "\n"
        "Writes DIR/config.json and DIR/model.safetensors with weights drawn from\n"
        "normal(0, X) (X = --init-std, default 0.02 as transformers' initializer_range;\n"
        "norms 1, biases 0), in the layout transformers and lathe read. Tiny models\n"
        "learn more from LoRA with X near 1/sqrt(dim): at 0.02 their tied logits span\n"
        "only about dim x 0.02 nats.\n"
        "Presets (llama, tied embeddings): tiny ~0.1M, small ~1.2M, base ~10M,\n"
        "100m ~101M parameters. With --tokenizer, tokenizer.json (and\n"
        "tokenizer_config.json beside it) are copied in and the vocabulary sized to it.\n"
        "\n"
        "example:\n"
        "  lathe init-model /tmp/toy --preset small --arch qwen3 --tokenizer share/tokenizers/qwen3/tokenizer.json\n",
    .run = init_model_run,
};
