/* cmd_export.c: `lathe export --to gguf`, a model (with its LoRA adapter
 * merged) written as one GGUF file for llama.cpp and Ollama (lib/export,
 * docs/export.md). */
#include "cli.h"

#include "base/base.h"
#include "export/export.h"

#include <stdio.h>
#include <string.h>

typedef struct ex_args {
    const char *to, *out;
    ex_gguf_opts o;
} ex_args;

static bool ex_parse_dtype(const char *s, tr_dtype *t)
{
    if (str_ieq(s, "f32") || str_ieq(s, "float32")) *t = TR_F32;
    else if (str_ieq(s, "f16") || str_ieq(s, "float16")) *t = TR_F16;
    else return false;
    return true;
}

static int ex_parse(ex_args *a, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--no-tokenizer")) { a->o.no_tokenizer = true; continue; }
        if (o[0] != '-') {
            if (a->out) return cli_usage_error("export", "two output files: %s and %s", a->out, o);
            a->out = o;
            continue;
        }
        if (i + 1 >= argc) return cli_usage_error("export", "%s needs a value", o);
        const char *v = argv[++i];
        if (!strcmp(o, "--to")) a->to = v;
        else if (!strcmp(o, "--model")) a->o.model_dir = v;
        else if (!strcmp(o, "--adapter")) a->o.adapter_dir = v;
        else if (!strcmp(o, "--tokenizer")) a->o.tokenizer = v;
        else if (!strcmp(o, "--pre")) a->o.pre = v;
        else if (!strcmp(o, "--name")) a->o.name = v;
        else if (!strcmp(o, "-o") || !strcmp(o, "--output")) a->out = v;
        else if (!strcmp(o, "--dtype")) {
            if (!ex_parse_dtype(v, &a->o.dtype))
                return cli_usage_error("export", "--dtype %s: give f32 or f16", v);
        } else return cli_usage_error("export", "unknown option %s", o);
    }
    if (!a->to || strcmp(a->to, "gguf") != 0)
        return cli_usage_error("export", "give --to gguf (the one format lathe exports)");
    if (!a->o.model_dir) return cli_usage_error("export", "give --model DIR");
    if (!a->out) return cli_usage_error("export", "give the output file (OUT.gguf or -o OUT.gguf)");
    if (a->o.no_tokenizer && a->o.tokenizer)
        return cli_usage_error("export", "--tokenizer and --no-tokenizer contradict each other");
    return LT_EXIT_OK;
}

static int export_run(int argc, char **argv)
{
    ex_args a = {.o = {.dtype = TR_F16}};
    int rc = ex_parse(&a, argc, argv);
    if (rc) return rc;
    char err[1024];
    ex_gguf_summary s;
    if (!ex_export_gguf(&a.o, a.out, &s, err, sizeof err)) {
        fprintf(stderr, "lathe export: %s\n", err);
        return s.write_failed ? LT_EXIT_IO : LT_EXIT_INVALID;
    }
    printf("wrote %s: %s, %zu tensors (%s)%s", a.out, s.arch, s.n_tensors,
           a.o.dtype == TR_F16 ? "f16 weights, f32 norms" : "f32",
           s.merged_adapter ? ", adapter merged" : "");
    if (s.n_tokens) printf(", %zu tokens, %zu merges, pre %s", s.n_tokens, s.n_merges, s.pre);
    printf("\n");
    return LT_EXIT_OK;
}

const cli_command cli_cmd_export = {
    .name = "export",
    .summary = "write a model (adapter merged) as GGUF for llama.cpp and Ollama",
    .help =
        "usage: lathe export --to gguf --model DIR [--adapter DIR] [--dtype f32|f16]\n"
        "                    [--tokenizer PATH | --no-tokenizer] [--pre NAME] [--name NAME]\n"
        "                    (OUT.gguf | -o OUT.gguf)\n"
        "\n"
        "Writes the Hugging Face model in DIR (config.json + safetensors) as one GGUF\n"
        "file that llama.cpp and Ollama load: the weights with the PEFT adapter folder\n"
        "merged in when --adapter is given (W + scale * B A, in fp32), and the\n"
        "tokenizer (vocabulary, merges, special ids, chat template) from\n"
        "DIR/tokenizer.json or --tokenizer.\n"
        "\n"
        "options:\n"
        "  --to gguf          the format (GGUF version 3)\n"
        "  --model DIR        the base model folder\n"
        "  --adapter DIR      a PEFT LoRA adapter folder to merge\n"
        "  --dtype f16|f32    2-D weights' type (default f16); norms, biases stay f32\n"
        "  --tokenizer PATH   tokenizer.json or its folder (default DIR/tokenizer.json)\n"
        "  --no-tokenizer     write the tensors and model keys only\n"
        "  --pre NAME         llama.cpp's pre-tokenizer name (default: detected from the\n"
        "                     tokenizer's regex: llama-bpe, qwen2 or gpt-2)\n"
        "  --name NAME        general.name (default: the model folder's name)\n"
        "  -o, --output FILE  the output file (or give it as the last argument)\n"
        "\n"
        "Architectures: llama, mistral (llama.cpp's `llama`), qwen2, qwen3.\n"
        "See docs/export.md (what is written, Ollama's Modelfile).\n"
        "\n"
        "exit codes: 0 written, 1 usage, 2 invalid model, adapter or tokenizer,\n"
        "4 the output could not be written\n"
        "\n"
        "example:\n"
        "  lathe export --to gguf --model base/ --adapter run/adapter out.gguf\n",
    .run = export_run,
};
