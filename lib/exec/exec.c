/* exec.c: what every executor backend shares: the calls that dispatch to a
 * backend, result and end names, the trainer contract's environment, exit
 * classification and the out-of-memory line detector. */
#include "exec_internal.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const int EXEC_BUILTIN_NO_RETRY[1] = {2};

const char *exec_rc_name(exec_rc rc)
{
    switch (rc) {
    case EXEC_OK: return "ok";
    case EXEC_E_BUSY: return "busy";
    case EXEC_E_INVALID: return "invalid";
    case EXEC_E_GONE: return "gone";
    case EXEC_E_SYSTEM: return "system";
    case EXEC_E_UNAVAILABLE: return "unavailable";
    }
    return "unknown";
}

const char *exec_end_name(exec_end e)
{
    static const char *const names[] = {"none",    "succeeded", "failed", "invalid",  "oom",
                                        "stopped", "killed",    "signalled", "lost", "evicted", "timed_out"};
    return (unsigned)e < sizeof names / sizeof names[0] ? names[e] : "unknown";
}

/* ---- dispatch ---- */

bool exec_ready(exec_backend *be, char *why, size_t whysz)
{
    if (why && whysz) why[0] = '\0';
    return !be->ready || be->ready(be, why, whysz);
}

exec_rc exec_prepare(exec_backend *be, const exec_request *req, char *err, size_t errsz)
{
    return be->prepare ? be->prepare(be, req, err, errsz) : EXEC_OK;
}

exec_rc exec_unprepare(exec_backend *be, const exec_request *req, char *err, size_t errsz)
{
    return be->unprepare ? be->unprepare(be, req, err, errsz) : EXEC_OK;
}

exec_rc exec_start(exec_backend *be, const exec_request *req, exec_handle **out, char *err,
                   size_t errsz)
{
    *out = NULL;
    return be->start(be, req, out, err, errsz);
}

void exec_start_many(exec_backend *be, const exec_request *const *reqs, size_t n,
                     exec_start_result *res)
{
    for (size_t i = 0; i < n; i++) {
        res[i].h = NULL;
        res[i].rc = EXEC_OK;
        res[i].err[0] = '\0';
    }
    if (be->start_many && n > 1) {
        be->start_many(be, reqs, n, res);
        return;
    }
    for (size_t i = 0; i < n; i++)
        res[i].rc = be->start(be, reqs[i], &res[i].h, res[i].err, sizeof res[i].err);
}

exec_rc exec_attach(exec_backend *be, const char *handle_json, exec_handle **out, char *err,
                    size_t errsz)
{
    *out = NULL;
    return be->attach(be, handle_json, out, err, errsz);
}

exec_rc exec_find(exec_backend *be, const char *job_dir, exec_handle **out, char *err,
                  size_t errsz)
{
    *out = NULL;
    return be->find(be, job_dir, out, err, errsz);
}

void exec_poll(exec_handle *h, double now, exec_status *st, exec_update *up)
{
    h->backend->poll(h, now, st, up);
}

exec_rc exec_signal(exec_handle *h, int sig, char *err, size_t errsz)
{
    return h->backend->signal(h, sig, err, errsz);
}

exec_rc exec_cancel(exec_handle *h, double now, double grace, char *err, size_t errsz)
{
    return h->backend->cancel(h, now, grace, err, errsz);
}

char *exec_handle_json(const exec_handle *h)
{
    return h->backend->handle_json(h);
}

void exec_release(exec_handle *h)
{
    if (h) h->backend->release(h);
}

void exec_backend_free(exec_backend *be)
{
    if (be) be->destroy(be);
}

bool exec_signal_forwardable(int sig)
{
    return sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT || sig == SIGUSR2;
}

/* ---- the trainer contract's environment ---- */

static void env_push(char ***env, size_t *n, char *entry)
{
    *env = xrealloc(*env, (*n + 1) * sizeof **env);
    (*env)[(*n)++] = entry;
}

static void env_str(char ***env, size_t *n, const char *name, const char *value)
{
    if (value) env_push(env, n, xasprintf("%s=%s", name, value));
}

static void env_int(char ***env, size_t *n, const char *name, long value)
{
    env_push(env, n, xasprintf("%s=%ld", name, value));
}

void exec_contract_env(const exec_contract *c, char ***env, size_t *n)
{
    env_str(env, n, "LATHE_JOB", c->job);
    if (c->attempt > 0) env_int(env, n, "LATHE_ATTEMPT", c->attempt);
    env_str(env, n, "LATHE_SPEC", c->spec_path);
    env_str(env, n, "BASE_MODEL_PATH", c->base_model_path);
    env_str(env, n, "DATASET_PATH", c->dataset_path);
    env_str(env, n, "EVAL_DATASET_PATH", c->eval_dataset_path);
    if (c->lora_rank > 0) env_int(env, n, "LORA_RANK", c->lora_rank);
    env_str(env, n, "CHECKPOINT_DIR", c->checkpoint_dir);
    if (c->checkpoint_interval >= 0) env_int(env, n, "CHECKPOINT_INTERVAL", c->checkpoint_interval);
    const char *gpus = c->gpus ? c->gpus : "";
    env_str(env, n, "LATHE_GPUS", gpus);
    /* Empty hides every GPU from a CPU job (CUDA reads "" as none). */
    env_str(env, n, "CUDA_VISIBLE_DEVICES", gpus);
    if (c->virtual_gpus) env_str(env, n, "LATHE_VIRTUAL_GPUS", "1");
    if (c->gpu_share > 0 && c->gpu_share < 1) {
        env_push(env, n, xasprintf("LATHE_GPU_SHARE=%.2f", c->gpu_share));
        /* as NVIDIA's device plugin does for MPS sharing: SMs and memory
         * held to the job's part (no effect without the MPS daemon) */
        env_int(env, n, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", lround(c->gpu_share * 100));
        if (c->gpu_memory_limit > 0)
            env_push(env, n, xasprintf("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=%lldM",
                                       (long long)(c->gpu_memory_limit / (1024.0 * 1024.0))));
    }
    if (c->nnodes > 0) {
        env_int(env, n, "NNODES", c->nnodes);
        env_int(env, n, "NODE_RANK", c->node_rank >= 0 ? c->node_rank : 0);
    }
    if (c->nproc_per_node > 0) env_int(env, n, "NPROC_PER_NODE", c->nproc_per_node);
    env_str(env, n, "MASTER_ADDR", c->master_addr);
    if (c->master_port > 0) env_int(env, n, "MASTER_PORT", c->master_port);
}

/* ---- out of memory ---- */

/* Messages that mean the trainer ran out of memory. Sources: PyTorch's
 * caching allocator ("CUDA out of memory. Tried to allocate ...",
 * torch.OutOfMemoryError / torch.cuda.OutOfMemoryError), cuBLAS status
 * names (CUBLAS_STATUS_ALLOC_FAILED), the CUDA driver and runtime error
 * names (CUDA_ERROR_OUT_OF_MEMORY, cudaErrorMemoryAllocation), ROCm's
 * "HIP out of memory", and lathe's own allocator ("lathe: out of memory"). */
static const char *const oom_patterns[] = {
    "CUDA out of memory",        "OutOfMemoryError",          "CUBLAS_STATUS_ALLOC_FAILED",
    "CUDA_ERROR_OUT_OF_MEMORY",  "cudaErrorMemoryAllocation", "HIP out of memory",
    "lathe: out of memory",
};

static bool contains(const char *hay, size_t len, const char *needle)
{
    size_t n = strlen(needle);
    for (size_t i = 0; i + n <= len; i++)
        if (hay[i] == needle[0] && memcmp(hay + i, needle, n) == 0) return true;
    return false;
}

bool exec_line_is_oom(const char *line, size_t len)
{
    for (size_t i = 0; i < sizeof oom_patterns / sizeof oom_patterns[0]; i++)
        if (contains(line, len, oom_patterns[i])) return true;
    return false;
}

/* ---- classification ---- */

static const char *signal_name(int sig)
{
    static const struct { int sig; const char *name; } names[] = {
        {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
        {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
        {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
        {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGXCPU, "SIGXCPU"},
        {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].sig == sig) return names[i].name;
    return "a signal";
}

static bool in_list(int code, const int *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (list[i] == code) return true;
    return false;
}

static void set_end(exec_status *st, exec_end end, bool retryable)
{
    st->end = end;
    st->retryable = retryable;
}

void exec_classify(exec_status *st, bool oom_line, bool oom_killed, const int *no_retry_codes,
                   size_t n_no_retry_codes)
{
    char *r = st->reason;
    size_t rs = sizeof st->reason;
    if (st->phase == EXEC_RUNNING) {
        set_end(st, EXEC_END_NONE, false);
        snprintf(r, rs, "running");
    } else if (st->phase == EXEC_LOST) {
        set_end(st, EXEC_END_LOST, true);
        snprintf(r, rs, "the trainer's supervisor is gone and how the trainer ended is unknown");
    } else if (st->exit_code == 0 && st->signal == 0) {
        set_end(st, EXEC_END_SUCCEEDED, false);
        snprintf(r, rs, "exit code 0");
    } else if (st->kill_sent && st->signal == SIGKILL) {
        set_end(st, EXEC_END_KILLED, true);
        snprintf(r, rs, "killed with SIGKILL: the grace period after SIGTERM ran out");
    } else if (st->term_sent && (st->exit_code == 128 + SIGTERM || st->exit_code == 128 + SIGINT ||
                                 st->signal == SIGTERM || st->signal == SIGINT)) {
        set_end(st, EXEC_END_STOPPED, true);
        snprintf(r, rs, "stopped after SIGTERM (%s %d)", st->signal ? "signal" : "exit code",
                 st->signal ? st->signal : st->exit_code);
    } else if (oom_line || oom_killed) {
        set_end(st, EXEC_END_OOM, true);
        if (oom_line)
            snprintf(r, rs, "out of memory (the output says so); %s %d",
                     st->signal ? "signal" : "exit code", st->signal ? st->signal : st->exit_code);
        else
            snprintf(r, rs, "killed with SIGKILL by the kernel's out-of-memory killer");
    } else if (st->signal == 0 && in_list(st->exit_code, no_retry_codes, n_no_retry_codes)) {
        set_end(st, EXEC_END_INVALID, false);
        snprintf(r, rs, "exit code %d: the trainer says the job cannot succeed (invalid model, "
                        "data or job); not retried",
                 st->exit_code);
    } else if (st->signal) {
        set_end(st, EXEC_END_SIGNALLED, true);
        snprintf(r, rs, "killed by %s (signal %d)", signal_name(st->signal), st->signal);
    } else {
        set_end(st, EXEC_END_FAILED, true);
        snprintf(r, rs, "exit code %d", st->exit_code);
    }
}
