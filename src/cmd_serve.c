/* cmd_serve.c: `lathe serve`, an OpenAI-compatible HTTP server for a base
 * model and its LoRA adapters (lib/serve, docs/serve.md). Owns the help
 * text and the one piece of global state a signal handler needs: the flag
 * SIGTERM and SIGINT raise, on which the server drains and exits 0. */
#include "cli.h"

#include "base/base.h"
#include "nn/nn.h"
#include "serve/serve.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile sig_atomic_t serve_stop_flag;

static void serve_on_signal(int sig)
{
    (void)sig;
    serve_stop_flag = 1;
}

static const char serve_help[] =
    "usage: lathe serve --model DIR [--adapter NAME=DIR ...] [--host H] [--port P]\n"
    "                   [--api-key KEY | --api-key-file FILE] [options]\n"
    "\n"
    "Serves a base model and its LoRA adapters over OpenAI's HTTP API, with\n"
    "continuous batching of every request across adapters (docs/serve.md).\n"
    "Routes: GET /v1/models, POST /v1/completions, POST /v1/chat/completions,\n"
    "POST /v1/load_lora_adapter and /v1/unload_lora_adapter (as vLLM), GET\n"
    "/health, /ready and /metrics (Prometheus). A request's \"model\" is the base\n"
    "model's id or an adapter's NAME. SIGTERM or Ctrl-C drains: new requests get\n"
    "503, running ones finish, then it exits 0.\n"
    "\n"
    "model:\n"
    "  --model DIR              the base model (config.json + safetensors)\n"
    "  --served-model-name ID   the base model's id in the API (default: DIR as given)\n"
    "  --adapter NAME=DIR       a PEFT adapter folder served as model NAME (repeat it)\n"
    "  --tokenizer PATH         tokenizer.json (default: DIR/tokenizer.json)\n"
    "  --chat-template FAMILY   force a template family (chatml, qwen2, qwen2.5, qwen3,\n"
    "                           llama3, llama3-early, llama3.1, llama3.2); default:\n"
    "                           detected from tokenizer_config.json\n"
    "  --threads N              CPU threads of the model (default: all)\n"
    "listening:\n"
    "  --host H                 address to listen on (default 127.0.0.1; 0.0.0.0: all)\n"
    "  --port P                 port (default 8000; 0: the system picks one, printed)\n"
    "  --api-key KEY            ask every /v1 request for `Authorization: Bearer KEY`\n"
    "  --api-key-file FILE      the same with the key read from FILE (one line), so\n"
    "                           it is not in the process list; without either, the\n"
    "                           environment's LATHE_API_KEY when set\n"
    "  --max-body BYTES         largest request body (default 4Mi; larger: 413)\n"
    "  --max-connections N      open connections at once (default 256)\n"
    "  --drain-timeout SECONDS  longest drain after SIGTERM (default 120s)\n"
    "  --quiet                  no log line per request\n"
    "engine:\n"
    "  --max-batch N            sequences generating at once (default 32)\n"
    "  --max-waiting N          requests waiting for admission; more get 429 (default 256)\n"
    "  --max-adapters N         adapters in memory at once, least recently used evicted\n"
    "                           (default 8)\n"
    "  --max-context N          prompt + completion tokens of a request (default: the\n"
    "                           model's max_position_embeddings)\n"
    "  --kv-memory BYTES        KV cache in all (default: a full context for each of\n"
    "                           max(8, --max-batch) sequences, at most 1Gi)\n"
    "  --prefill-chunk N        prompt tokens of one sequence per step (default 256)\n"
    "\n"
    "exit: 0 stopped (after a drain), 1 usage, 2 invalid model, tokenizer or adapter,\n"
    "      5 cannot listen\n"
    "\n"
    "examples:\n"
    "  lathe serve --model ./qwen3-0.6b --adapter support=./ck/final --port 8000\n"
    "  curl localhost:8000/v1/chat/completions -H 'Content-Type: application/json' \\\n"
    "    -d '{\"model\": \"support\", \"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}'\n";

/* Re-executes `lathe serve ARGS` with OMP_WAIT_POLICY=passive (nn/nn.h). */
static void serve_passive_wait(int argc, char **argv)
{
    char **full = xcalloc((size_t)argc + 2, sizeof *full);
    full[0] = "lathe";
    for (int i = 0; i < argc; i++) full[i + 1] = argv[i];
    tr_reexec_with_passive_wait(full);
    free(full);
}

static int serve_run(int argc, char **argv)
{
    sv_serve_opts o;
    char err[1024];
    int rc = sv_opts_parse(&o, argc, argv, err, sizeof err);
    if (rc != LT_EXIT_OK) return cli_usage_error("serve", "%s", err);
    serve_passive_wait(argc, argv);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = serve_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    serve_stop_flag = 0;
    rc = sv_server_run(&o, &serve_stop_flag);
    sv_opts_free(&o);
    return rc;
}

const cli_command cli_cmd_serve = {
    .name = "serve",
    .summary = "serve a model and its LoRA adapters over OpenAI's HTTP API",
    .help = serve_help,
    .run = serve_run,
};
