/* cmd_train.c: `lathe train`, the built-in LoRA / full fine-tuning trainer.
 * Reads options from the command line, then the trainer-contract
 * environment (BASE_MODEL_PATH, DATASET_PATH, LORA_RANK, CHECKPOINT_DIR,
 * CHECKPOINT_INTERVAL; EVAL_DATASET_PATH), opens the data and its eval set,
 * turns SIGTERM / SIGINT into "checkpoint and stop",
 * and runs tr_train (lib/train). Owns the one piece of global state a signal
 * handler needs: the stop flag. */
#include "cli.h"

#include "base/base.h"
#include "spec/spec.h"
#include "train/train.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Exit status after a SIGTERM that was honoured (checkpoint written): what a
 * shell reports for a process ended by SIGTERM, 128 + 15. */
#define TRAIN_EXIT_STOPPED 143

static volatile sig_atomic_t train_stop_flag;

static void train_on_signal(int sig)
{
    (void)sig;
    train_stop_flag = 1;
}

typedef struct train_args {
    tr_train_opts o;
    const char *text, *data, *tokenizer, *chat_template, *job_file;
    int seq_len, byte_offset;
    bool alpha_set, pack, skip_bad;
    spec_file spec; /* the job file, when given (owns the strings used) */
    bool have_spec;
    tr_eval_opts eval; /* --eval-data / --eval-split (trainingData.evalDatasetPath / evalSplit) */
    tr_eval_set eval_set;
} train_args;

static bool parse_double(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) return false;
    *out = v;
    return true;
}

/* Defaults from the trainer contract's environment variables. */
static int apply_env(train_args *a)
{
    const char *v;
    long n;
    if ((v = getenv("BASE_MODEL_PATH")) && *v) a->o.model_dir = v;
    if ((v = getenv("DATASET_PATH")) && *v) a->data = v;
    if ((v = getenv("EVAL_DATASET_PATH")) && *v) {
        a->eval.path = v;
        a->eval.split = 0;
    }
    if ((v = getenv("CHECKPOINT_DIR")) && *v) a->o.checkpoint_dir = v;
    if ((v = getenv("LORA_RANK")) && *v) {
        if (!cli_parse_long(v, 1, 4096, &n))
            return cli_usage_error("train", "LORA_RANK=%s: expected an integer 1..4096", v);
        a->o.model.lora.rank = (int)n;
    }
    if ((v = getenv("CHECKPOINT_INTERVAL")) && *v) {
        if (!cli_parse_long(v, 0, 100000000, &n))
            return cli_usage_error("train", "CHECKPOINT_INTERVAL=%s: expected a number of steps", v);
        a->o.checkpoint_interval = (int)n;
    }
    if ((v = getenv("LATHE_THREADS")) && *v) {
        if (!cli_parse_long(v, 1, 1024, &n))
            return cli_usage_error("train", "LATHE_THREADS=%s: expected 1..1024", v);
        a->o.threads = (int)n;
    }
    return LT_EXIT_OK;
}

/* One option with its value; returns LT_EXIT_OK, or a usage error. */
static int apply_option(train_args *a, const char *opt, const char *val)
{
    long n;
    double d;
    char err[256];
    tr_train_opts *o = &a->o;
#define NEED_LONG(lo, hi) if (!cli_parse_long(val, lo, hi, &n)) \
        return cli_usage_error("train", "%s %s: expected an integer %ld..%ld", opt, val, (long)(lo), (long)(hi))
#define NEED_DOUBLE(lo, hi) if (!parse_double(val, lo, hi, &d)) \
        return cli_usage_error("train", "%s %s: expected a number in [%g, %g]", opt, val, (double)(lo), (double)(hi))
    if (!strcmp(opt, "--model")) o->model_dir = val;
    else if (!strcmp(opt, "--data")) a->data = val;
    else if (!strcmp(opt, "--text")) a->text = val;
    else if (!strcmp(opt, "--tokenizer")) a->tokenizer = val;
    else if (!strcmp(opt, "--chat-template")) a->chat_template = val;
    else if (!strcmp(opt, "--checkpoint-dir")) o->checkpoint_dir = val;
    else if (!strcmp(opt, "--eval-data")) { a->eval.path = val; a->eval.split = 0; }
    else if (!strcmp(opt, "--eval-split")) {
        if (!parse_double(val, 0, 0.5, &d) || d <= 0 || d >= 0.5)
            return cli_usage_error("train", "--eval-split %s: expected a share above 0 and below 0.5, "
                                   "such as 0.05", val);
        a->eval.split = d;
        a->eval.path = NULL;
    }
    else if (!strcmp(opt, "--eval-steps")) { NEED_LONG(0, 1000000000); o->eval_steps = n; }
    else if (!strcmp(opt, "--output")) o->output_dir = val;
    else if (!strcmp(opt, "--checkpoint-interval")) { NEED_LONG(0, 100000000); o->checkpoint_interval = (int)n; }
    else if (!strcmp(opt, "--keep")) { NEED_LONG(1, 1000000); o->keep_last = (int)n; }
    else if (!strcmp(opt, "--rank")) { NEED_LONG(1, 4096); o->model.lora.rank = (int)n; }
    else if (!strcmp(opt, "--alpha")) { NEED_DOUBLE(1e-6, 1e6); o->model.lora.alpha = (float)d; a->alpha_set = true; }
    else if (!strcmp(opt, "--dropout")) { NEED_DOUBLE(0, 0.99); o->model.lora.dropout = (float)d; }
    else if (!strcmp(opt, "--targets")) {
        if (!tr_targets_parse(val, &o->model.lora.targets, err, sizeof err))
            return cli_usage_error("train", "--targets: %s", err);
    }
    else if (!strcmp(opt, "--lr")) { NEED_DOUBLE(0, 10); o->optim.lr = d; }
    else if (!strcmp(opt, "--weight-decay")) { NEED_DOUBLE(0, 10); o->optim.weight_decay = d; }
    else if (!strcmp(opt, "--warmup")) { NEED_LONG(0, 100000000); o->optim.warmup_steps = (int)n; }
    else if (!strcmp(opt, "--max-grad-norm")) { NEED_DOUBLE(0, 1e9); o->optim.max_grad_norm = d; }
    else if (!strcmp(opt, "--scheduler")) {
        if (!tr_schedule_parse(val, &o->optim.schedule))
            return cli_usage_error("train", "--scheduler %s: expected cosine, linear or constant", val);
    }
    else if (!strcmp(opt, "--batch-size")) { NEED_LONG(1, 100000); o->batch_size = (int)n; }
    else if (!strcmp(opt, "--grad-accum")) { NEED_LONG(1, 100000); o->grad_accum = (int)n; }
    else if (!strcmp(opt, "--epochs")) { NEED_LONG(1, 100000); o->epochs = (int)n; }
    else if (!strcmp(opt, "--max-steps")) { NEED_LONG(1, 1000000000); o->max_steps = n; }
    else if (!strcmp(opt, "--seq-len")) { NEED_LONG(2, 1 << 20); a->seq_len = (int)n; }
    else if (!strcmp(opt, "--byte-offset")) { NEED_LONG(0, 1 << 30); a->byte_offset = (int)n; }
    else if (!strcmp(opt, "--seed")) { NEED_LONG(0, 0x7fffffffffffffffL); o->seed = (uint64_t)n; }
    else if (!strcmp(opt, "--threads")) { NEED_LONG(1, 1024); o->threads = (int)n; }
    else if (!strcmp(opt, "--fault-kill")) { /* tests: STEP:PHASE, see tr_train_opts */
        long step, phase;
        char *colon = strchr(val, ':');
        char *s = colon ? xstrndup(val, (size_t)(colon - val)) : NULL;
        bool ok = s && cli_parse_long(s, 1, 1000000000, &step) && cli_parse_long(colon + 1, 1, 3, &phase);
        free(s);
        if (!ok) return cli_usage_error("train", "--fault-kill %s: expected STEP:1, STEP:2 or STEP:3", val);
        o->fault_step = step;
        o->fault_phase = (int)phase;
    }
    else return cli_usage_error("train", "unknown option %s", opt);
    return LT_EXIT_OK;
#undef NEED_LONG
#undef NEED_DOUBLE
}

static const char *const train_flags[] = {"--full", "--rslora", "--grad-checkpoint", "--no-resume",
                                          "--packing", "--skip-bad"};

/* The job file: the one argument that is not an option or its value, else
 * LATHE_SPEC (the resolved spec the executors pass). */
static int find_job_file(train_args *a, int argc, char **argv)
{
    const char *env = getenv("LATHE_SPEC");
    if (env && *env) a->job_file = env;
    bool given = false;
    for (int i = 1; i < argc; i++) {
        bool flag = false;
        for (size_t k = 0; k < sizeof train_flags / sizeof *train_flags; k++)
            flag |= !strcmp(argv[i], train_flags[k]);
        if (flag) continue;
        if (!strncmp(argv[i], "--", 2)) { i++; continue; }
        if (given) return cli_usage_error("train", "two job files given: %s and %s", a->job_file, argv[i]);
        a->job_file = argv[i];
        given = true;
    }
    return LT_EXIT_OK;
}

static int parse_args(train_args *a, int argc, char **argv)
{
    const char *const *flags = train_flags;
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i];
        if (!strcmp(opt, flags[0])) { a->o.model.mode = TR_MODE_FULL; continue; }
        if (!strcmp(opt, flags[1])) { a->o.model.lora.rslora = true; continue; }
        if (!strcmp(opt, flags[2])) { a->o.model.grad_checkpoint = true; continue; }
        if (!strcmp(opt, flags[3])) { a->o.resume = false; continue; }
        if (!strcmp(opt, flags[4])) { a->pack = true; continue; }
        if (!strcmp(opt, flags[5])) { a->skip_bad = true; continue; }
        if (strncmp(opt, "--", 2) != 0) continue; /* the job file */
        if (i + 1 >= argc) return cli_usage_error("train", "%s needs a value", opt);
        int rc = apply_option(a, opt, argv[++i]);
        if (rc) return rc;
    }
    if (!a->alpha_set) a->o.model.lora.alpha = 2.0f * (float)a->o.model.lora.rank;
    if (!a->o.model_dir) return cli_usage_error("train", "no model: give --model DIR or BASE_MODEL_PATH");
    if (!a->o.checkpoint_dir)
        return cli_usage_error("train", "no checkpoint folder: give --checkpoint-dir DIR or CHECKPOINT_DIR");
    if (!a->text && !a->data)
        return cli_usage_error("train", "no data: give --text FILE (plain text as bytes) or --data "
                               "FILE.jsonl / DATASET_PATH");
    return LT_EXIT_OK;
}

static int open_data(train_args *a, tr_data *d)
{
    char err[1024];
    if (a->text) {
        if (!tr_text_source_open_eval(d, a->text, a->seq_len, a->byte_offset, a->o.seed, &a->eval,
                                      &a->eval_set, err, sizeof err)) {
            fprintf(stderr, "lathe train: %s\n", err);
            return LT_EXIT_INVALID;
        }
        if (a->eval_set.available)
            printf("[lathe-train] eval set %s: %zu sequences, %zu kept (%ld tokens; at most %d "
                   "sequences and %d tokens are evaluated)\n", a->eval_set.source,
                   a->eval_set.available, a->eval_set.n, a->eval_set.tokens, TR_EVAL_MAX_SEQUENCES,
                   TR_EVAL_MAX_TOKENS);
        return LT_EXIT_OK;
    }
    char *tok = a->tokenizer ? xstrdup(a->tokenizer) : path_join(a->o.model_dir, "tokenizer.json");
    tr_jsonl_opts jo = {.path = a->data, .tokenizer = tok, .chat_template = a->chat_template,
                        .seq_len = a->seq_len, .pack = a->pack, .skip_bad = a->skip_bad,
                        .seed = a->o.seed, .eval = a->eval,
                        .eval_out = &a->eval_set};
    char *summary = NULL;
    bool ok = tr_jsonl_source_open(d, &jo, &summary, err, sizeof err);
    free(tok);
    if (!ok) {
        fprintf(stderr, "lathe train: %s\n", err);
        return LT_EXIT_INVALID;
    }
    printf("[lathe-train] %s\n", summary);
    free(summary);
    return LT_EXIT_OK;
}

/* A LoRATrainingJob's fields as trainer options (the environment and the
 * command line override them). */
static int apply_job(train_args *a)
{
    diag_list d;
    diag_list_init(&d);
    spec_load_file(a->job_file, &a->spec, &d);
    a->have_spec = true;
    const spec_job *j = d.errors ? NULL : spec_file_job(&a->spec);
    if (!j) {
        diag_print_all(&d, stderr);
        if (!d.errors) fprintf(stderr, "lathe train: %s holds no LoRATrainingJob\n", a->job_file);
        diag_list_free(&d);
        return LT_EXIT_INVALID;
    }
    diag_list_free(&d);
    if (j->method == METHOD_QLORA || j->quantization.bits == 4 || j->quantization.bits == 8 ||
        j->method == METHOD_DORA) {
        fprintf(stderr, "lathe train: %s: spec.method %s: the built-in CPU trainer does LoRA and full "
                "fine-tuning in fp32 (set method: lora, or run the job with another trainer)\n",
                a->job_file, spec_method_name(j->method));
        return LT_EXIT_INVALID;
    }
    tr_train_opts *o = &a->o;
    if (j->base_model.path) o->model_dir = j->base_model.path;
    if (j->method == METHOD_FULL) o->model.mode = TR_MODE_FULL;
    o->model.lora.rank = j->lora.rank;
    o->model.lora.alpha = (float)j->lora.alpha;
    a->alpha_set = true;
    o->model.lora.dropout = (float)j->lora.dropout;
    o->model.lora.rslora = j->lora.use_rslora;
    if (j->lora.n_target_modules) {
        sb list;
        sb_init(&list);
        for (size_t i = 0; i < j->lora.n_target_modules; i++)
            sb_printf(&list, "%s%s", i ? "," : "", j->lora.target_modules[i]);
        char err[256];
        bool ok = tr_targets_parse(sb_str(&list), &o->model.lora.targets, err, sizeof err);
        sb_free(&list);
        if (!ok) {
            fprintf(stderr, "lathe train: %s: spec.lora.targetModules: %s\n", a->job_file, err);
            return LT_EXIT_INVALID;
        }
    }
    a->data = j->training_data.dataset_path;
    a->pack = j->training_data.packing;
    a->eval.path = j->training_data.eval_path;
    a->eval.split = j->training_data.eval_split;
    o->eval_steps = j->hyperparams.eval_steps;
    o->batch_size = j->training_data.batch_size > 0 ? j->training_data.batch_size : 1;
    o->grad_accum = j->training_data.gradient_accumulation > 0 ? j->training_data.gradient_accumulation : 1;
    o->epochs = j->hyperparams.epochs > 0 ? j->hyperparams.epochs : 1;
    o->max_steps = j->hyperparams.max_steps;
    o->optim.lr = j->hyperparams.learning_rate;
    o->optim.warmup_steps = j->hyperparams.warmup_steps;
    o->optim.weight_decay = j->hyperparams.weight_decay;
    o->optim.max_grad_norm = j->hyperparams.max_grad_norm;
    if (j->hyperparams.lr_scheduler && !tr_schedule_parse(j->hyperparams.lr_scheduler, &o->optim.schedule)) {
        fprintf(stderr, "lathe train: %s: spec.hyperparams.lrScheduler %s: the built-in trainer knows "
                "cosine, linear and constant\n", a->job_file, j->hyperparams.lr_scheduler);
        return LT_EXIT_INVALID;
    }
    if (j->hyperparams.max_seq_length > 0) a->seq_len = j->hyperparams.max_seq_length;
    o->seed = j->hyperparams.seed;
    o->model.grad_checkpoint = j->hyperparams.gradient_checkpointing == TOGGLE_ON;
    if (j->checkpoint.path) o->checkpoint_dir = j->checkpoint.path;
    if (j->checkpoint.interval_steps > 0) o->checkpoint_interval = j->checkpoint.interval_steps;
    if (j->checkpoint.keep_last > 0) o->keep_last = j->checkpoint.keep_last;
    return LT_EXIT_OK;
}

/* Re-executes `lathe CMD ARGS` with OMP_WAIT_POLICY=passive (see nn/nn.h). */
static void train_passive_wait(int argc, char **argv)
{
    char **full = xcalloc((size_t)argc + 2, sizeof *full);
    full[0] = "lathe";
    for (int i = 0; i < argc; i++) full[i + 1] = argv[i];
    tr_reexec_with_passive_wait(full);
    free(full);
}

static int train_run(int argc, char **argv)
{
    train_passive_wait(argc, argv);
    train_args a = {.seq_len = 512, .byte_offset = 3};
    tr_train_defaults(&a.o);
    int rc = find_job_file(&a, argc, argv);
    if (!rc && a.job_file) rc = apply_job(&a);
    if (!rc) rc = apply_env(&a);
    if (!rc) rc = parse_args(&a, argc, argv);
    tr_data data;
    if (!rc) rc = open_data(&a, &data);
    if (rc) {
        tr_eval_set_free(&a.eval_set);
        if (a.have_spec) spec_file_free(&a.spec);
        return rc;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = train_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    a.o.eval = &a.eval_set;
    rc = tr_train(&a.o, &data, &train_stop_flag, stdout);
    data.destroy(data.ctx);
    tr_eval_set_free(&a.eval_set);
    if (a.have_spec) spec_file_free(&a.spec);
    return rc == -1 ? TRAIN_EXIT_STOPPED : rc;
}

const cli_command cli_cmd_train = {
    .name = "train",
    .summary = "fine-tune a model with LoRA (or fully) with the built-in CPU trainer",
    .help =
        "usage: lathe train [JOB.yaml] --model DIR (--text FILE | --data FILE.jsonl) --checkpoint-dir DIR [options]\n"
        "\n"
        "Trains LoRA adapters (or every weight with --full) of a Hugging Face Llama,\n"
        "Mistral, Qwen2/2.5 or Qwen3 model on the CPU. Writes PEFT checkpoints into\n"
        "CHECKPOINT_DIR/checkpoint-<step>/ and the final adapter into --output\n"
        "(default CHECKPOINT_DIR/final). Resumes from the newest checkpoint by default.\n"
        "One progress line per step on stdout (format: docs/trainer.md).\n"
        "A LoRATrainingJob YAML gives the defaults (baseModel.path, lora, trainingData,\n"
        "hyperparams, checkpoint); the environment and the options override it.\n"
        "\n"
        "environment (the trainer contract; options win):\n"
        "  BASE_MODEL_PATH, DATASET_PATH, LORA_RANK, CHECKPOINT_DIR, CHECKPOINT_INTERVAL,\n"
        "  EVAL_DATASET_PATH, LATHE_THREADS, LATHE_SPEC (the job file when none is given)\n"
        "\n"
        "model and data:\n"
        "  --model DIR              Hugging Face folder (config.json + safetensors)\n"
        "  --text FILE              plain text, one token per byte (id = byte + --byte-offset)\n"
        "  --byte-offset N          id of byte 0 for --text (default 3, llama2.c's layout)\n"
        "  --data FILE.jsonl        alpaca / messages / text JSONL (needs tokenizer.json)\n"
        "  --tokenizer PATH         tokenizer.json (default: MODEL/tokenizer.json)\n"
        "  --chat-template NAME     force a template family (chatml, qwen2.5, qwen3, llama3, ...)\n"
        "  --packing                pack records into full sequences\n"
        "  --skip-bad               skip malformed records (counted) instead of failing\n"
        "  --seq-len N              sequence length (default 512)\n"
        "evaluation (a progress line's eval_loss; docs/trainer.md):\n"
        "  --eval-data FILE         eval records (same form as the data), or EVAL_DATASET_PATH\n"
        "  --eval-split X           hold out a share X (0 < X < 0.5) of the data instead\n"
        "  --eval-steps N           steps between evaluations (default: about 10 per run; and\n"
        "                           always the last step)\n"
        "LoRA:\n"
        "  --rank N (16)  --alpha A (2*rank)  --dropout P (0.05)  --rslora\n"
        "  --targets LIST           q_proj,v_proj (default), any of q k v o gate up down, all-linear\n"
        "  --full                   full fine-tuning instead of LoRA\n"
        "optimisation:\n"
        "  --lr X (2e-4)  --weight-decay X (0)  --warmup N (0)  --scheduler cosine|linear|constant\n"
        "  --max-grad-norm X (1.0, 0 = off)  --batch-size N (1)  --grad-accum N (1)\n"
        "  --epochs N (1)  --max-steps N  --seed N (42)  --grad-checkpoint\n"
        "checkpoints:\n"
        "  --checkpoint-dir DIR  --checkpoint-interval N (500)  --keep N (3)  --output DIR\n"
        "  --no-resume              ignore existing checkpoints\n"
        "  --threads N              CPU threads (default: all)\n"
        "\n"
        "SIGTERM or SIGINT: finish the current step, write a checkpoint, exit 143.\n"
        "exit codes: 0 done, 1 usage, 2 invalid model or data, 4 file error, 143 stopped\n",
    .run = train_run,
};
