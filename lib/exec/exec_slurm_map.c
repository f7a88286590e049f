/* exec_slurm_map.c: the pure parts of the Slurm backend (docs/slurm.md):
 * Slurm's job states and their mapping onto lathe's ends, squeue / sacct
 * --json (through jansson), `scontrol -o show nodes` lines, host lists and
 * --time. No process is started here. */
#include "exec_slurm_internal.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- states ---- */
static const struct {
    const char *name;
    slurm_state st;
} state_tab[] = {
    {"PENDING", SLURM_ST_PENDING},       {"CONFIGURING", SLURM_ST_PENDING},
    {"REQUEUE_HOLD", SLURM_ST_PENDING},  {"REQUEUE_FED", SLURM_ST_PENDING},
    {"RESIZING", SLURM_ST_PENDING},      {"RUNNING", SLURM_ST_RUNNING},
    {"COMPLETING", SLURM_ST_RUNNING},    {"STAGE_OUT", SLURM_ST_RUNNING},
    {"SIGNALING", SLURM_ST_RUNNING},     {"SUSPENDED", SLURM_ST_SUSPENDED},
    {"STOPPED", SLURM_ST_SUSPENDED},     {"REQUEUED", SLURM_ST_REQUEUED},
    {"COMPLETED", SLURM_ST_COMPLETED},   {"FAILED", SLURM_ST_FAILED},
    {"BOOT_FAIL", SLURM_ST_FAILED},      {"CANCELLED", SLURM_ST_CANCELLED},
    {"TIMEOUT", SLURM_ST_TIMEOUT},       {"DEADLINE", SLURM_ST_TIMEOUT},
    {"OUT_OF_MEMORY", SLURM_ST_OOM},     {"NODE_FAIL", SLURM_ST_NODE_FAIL},
    {"PREEMPTED", SLURM_ST_PREEMPTED},
};

slurm_state slurm_state_parse(const char *name)
{
    if (!name) return SLURM_ST_UNKNOWN;
    size_t n = strcspn(name, " ");
    for (size_t i = 0; i < sizeof state_tab / sizeof state_tab[0]; i++)
        if (strlen(state_tab[i].name) == n && strncmp(state_tab[i].name, name, n) == 0)
            return state_tab[i].st;
    return SLURM_ST_UNKNOWN;
}

const char *slurm_state_name(slurm_state s)
{
    static const char *const names[] = {"UNKNOWN",   "PENDING", "RUNNING",   "SUSPENDED",
                                        "REQUEUED",  "COMPLETED", "FAILED",  "CANCELLED",
                                        "TIMEOUT",   "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "UNKNOWN";
}

bool slurm_state_final(slurm_state s)
{
    return s >= SLURM_ST_COMPLETED;
}

void slurm_jobs_free(slurm_job *jobs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(jobs[i].name);
        free(jobs[i].comment);
        free(jobs[i].reason);
        free(jobs[i].nodes);
        free(jobs[i].array_tasks);
    }
    free(jobs);
}

/* ---- --json ---- */
static char *str_of(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? xstrdup(json_string_value(v)) : NULL;
}

static double num_of(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : 0;
}

static json_t *load_jobs(const char *text, size_t len, const char *what, char *err, size_t errsz)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    if (!root || !json_is_object(root)) {
        snprintf(err, errsz, "%s --json printed %s (line %d: %s)", what,
                 root ? "JSON that is not an object" : "something that is not JSON", je.line,
                 root ? "" : je.text);
        json_decref(root);
        return NULL;
    }
    json_t *errs = json_object_get(root, "errors");
    if (json_is_array(errs) && json_array_size(errs) > 0) {
        json_t *e0 = json_array_get(errs, 0);
        const char *d = json_is_object(e0) ? json_string_value(json_object_get(e0, "description")) : NULL;
        snprintf(err, errsz, "%s --json reports an error: %s", what, d ? d : "(no description)");
        json_decref(root);
        return NULL;
    }
    if (!json_is_array(json_object_get(root, "jobs"))) {
        snprintf(err, errsz, "%s --json printed no \"jobs\" array", what);
        json_decref(root);
        return NULL;
    }
    return root;
}

/* A wait status as squeue prints exit_code: the code in the high byte,
 * a signal in the low 7 bits. */
static void wait_status(long long w, int *code, int *sig)
{
    if (w < 0) {
        *code = -1;
        *sig = 0;
    } else if ((w & 0x7f) != 0) {
        *code = -1;
        *sig = (int)(w & 0x7f);
    } else {
        *code = (int)((w >> 8) & 0xff);
        *sig = 0;
    }
}

/* The records of squeue's or sacct's --json (`what`) with a job id, each
 * filled by fill from its object. */
static bool parse_jobs(const char *text, size_t len, const char *what,
                       void (*fill)(slurm_job *j, json_t *o), slurm_job **jobs, size_t *n,
                       char *err, size_t errsz)
{
    *jobs = NULL;
    *n = 0;
    json_t *root = load_jobs(text, len, what, err, errsz);
    if (!root) return false;
    json_t *arr = json_object_get(root, "jobs");
    size_t cnt = json_array_size(arr);
    slurm_job *out = xcalloc(cnt ? cnt : 1, sizeof *out);
    size_t k = 0;
    for (size_t i = 0; i < cnt; i++) {
        json_t *o = json_array_get(arr, i);
        json_t *id = json_object_get(o, "job_id");
        if (!json_is_object(o) || !json_is_integer(id) || json_integer_value(id) <= 0) continue;
        slurm_job *j = &out[k++];
        j->id = (uint64_t)json_integer_value(id);
        fill(j, o);
    }
    json_decref(root);
    *jobs = out;
    *n = k;
    return true;
}

/* one record of squeue --json */
static void squeue_fill(slurm_job *j, json_t *o)
{
    j->name = str_of(o, "name");
    j->comment = str_of(o, "comment");
    j->reason = str_of(o, "state_reason");
    j->nodes = str_of(o, "nodes");
    const char *st = json_string_value(json_object_get(o, "job_state"));
    snprintf(j->state_name, sizeof j->state_name, "%s", st ? st : "");
    j->state = slurm_state_parse(st);
    json_t *ec = json_object_get(o, "exit_code");
    wait_status(json_is_integer(ec) ? json_integer_value(ec) : -1, &j->exit_code, &j->signal);
    j->restarts = (int)num_of(o, "restart_cnt");
    j->start = num_of(o, "start_time");
    j->end = num_of(o, "end_time");
    j->time_limit = num_of(o, "time_limit") * 60; /* minutes; null when none */
    j->gpus_per_node = slurm_tres_gpus(json_string_value(json_object_get(o, "tres_per_node")));
    /* a task of a job array: its own record (array_task_id), or the
     * array's pending tasks in one record (array_task_string "2-3%2") */
    json_t *aj = json_object_get(o, "array_job_id"), *at = json_object_get(o, "array_task_id");
    j->array_id = json_is_integer(aj) && json_integer_value(aj) > 0 ? (uint64_t)json_integer_value(aj) : 0;
    j->array_task = json_is_integer(at) && json_integer_value(at) >= 0 &&
                            json_integer_value(at) < INT32_MAX
                        ? (int)json_integer_value(at)
                        : -1;
    const char *ats = json_string_value(json_object_get(o, "array_task_string"));
    j->array_tasks = j->array_id && j->array_task < 0 && ats && *ats ? xstrdup(ats) : NULL;
}

bool slurm_parse_squeue_json(const char *text, size_t len, slurm_job **jobs, size_t *n, char *err,
                             size_t errsz)
{
    return parse_jobs(text, len, "squeue", squeue_fill, jobs, n, err, errsz);
}

/* one record of sacct --json */
static void sacct_fill(slurm_job *j, json_t *o)
{
    j->name = str_of(o, "name");
    j->nodes = str_of(o, "nodes");
    json_t *st = json_object_get(o, "state");
    const char *cur = json_is_object(st) ? json_string_value(json_object_get(st, "current")) : NULL;
    snprintf(j->state_name, sizeof j->state_name, "%s", cur ? cur : "");
    j->state = slurm_state_parse(cur);
    j->reason = json_is_object(st) ? str_of(st, "reason") : NULL;
    json_t *ec = json_object_get(o, "exit_code");
    j->exit_code = -1;
    if (json_is_object(ec)) {
        json_t *rc = json_object_get(ec, "return_code");
        json_t *sig = json_object_get(ec, "signal");
        json_t *sid = json_is_object(sig) ? json_object_get(sig, "signal_id") : NULL;
        if (json_is_integer(sid) && json_integer_value(sid) > 0 && json_integer_value(sid) < 65)
            j->signal = (int)json_integer_value(sid);
        else if (json_is_integer(rc) && json_integer_value(rc) >= 0 && json_integer_value(rc) < 256)
            j->exit_code = (int)json_integer_value(rc);
    }
    json_t *tm = json_object_get(o, "time");
    if (json_is_object(tm)) {
        j->start = num_of(tm, "start");
        j->end = num_of(tm, "end");
        j->time_limit = num_of(tm, "limit") * 60;
    }
    json_t *ar = json_object_get(o, "array"); /* a task of a job array */
    json_t *aj = json_is_object(ar) ? json_object_get(ar, "job_id") : NULL;
    json_t *at = json_is_object(ar) ? json_object_get(ar, "task_id") : NULL;
    j->array_id = json_is_integer(aj) && json_integer_value(aj) > 0 ? (uint64_t)json_integer_value(aj) : 0;
    j->array_task = j->array_id && json_is_integer(at) && json_integer_value(at) >= 0 &&
                            json_integer_value(at) < INT32_MAX
                        ? (int)json_integer_value(at)
                        : -1;
    json_t *rq = json_object_get(o, "requeue"); /* not in 22.05's sacct; kept if present */
    j->restarts = json_is_integer(rq) ? (int)json_integer_value(rq) : 0;
}

bool slurm_parse_sacct_json(const char *text, size_t len, slurm_job **jobs, size_t *n, char *err,
                            size_t errsz)
{
    return parse_jobs(text, len, "sacct", sacct_fill, jobs, n, err, errsz);
}

/* ---- the mapping ---- */
static void ended(exec_status *st, const slurm_job *j)
{
    st->phase = EXEC_EXITED;
    st->exit_code = j->exit_code;
    st->signal = j->signal;
    st->started_at = j->start;
    st->ended_at = j->end;
}

static void set(exec_status *st, exec_end e, bool retryable, const char *fmt, const slurm_job *j)
{
    st->end = e;
    st->retryable = retryable;
    char why[96] = "";
    if (j->reason && j->reason[0] && strcmp(j->reason, "None") != 0)
        snprintf(why, sizeof why, ", reason %.80s", j->reason);
    snprintf(st->reason, sizeof st->reason, fmt, (unsigned long long)j->id, why);
}

void slurm_map_status(const slurm_job *j, bool term_sent, bool kill_sent, bool oom_line,
                      bool requeued, const int *no_retry, size_t n_no_retry, exec_status *st)
{
    memset(st, 0, sizeof *st);
    st->exit_code = -1;
    st->term_sent = term_sent;
    st->kill_sent = kill_sent;
    st->started_at = j->start;
    if (requeued || j->state == SLURM_ST_REQUEUED || j->state == SLURM_ST_PREEMPTED) {
        ended(st, j);
        bool preempted = j->state == SLURM_ST_PREEMPTED ||
                         (j->reason && strstr(j->reason, "Preempt") != NULL);
        if (term_sent && !preempted) {
            set(st, kill_sent ? EXEC_END_KILLED : EXEC_END_STOPPED, true,
                "Slurm job %llu stopped by lathe and requeued%s", j);
        } else if (preempted) {
            set(st, EXEC_END_EVICTED, true,
                "Slurm preempted job %llu%s: back to the queue, resuming from its checkpoint", j);
        } else {
            set(st, EXEC_END_LOST, true, "Slurm requeued job %llu%s: its node failed or was "
                                         "taken away; retried from the newest checkpoint", j);
        }
        return;
    }
    switch (j->state) {
    case SLURM_ST_UNKNOWN:
    case SLURM_ST_PENDING:
    case SLURM_ST_SUSPENDED:
    case SLURM_ST_RUNNING:
    case SLURM_ST_REQUEUED:
    case SLURM_ST_PREEMPTED:
        st->phase = EXEC_RUNNING;
        st->end = EXEC_END_NONE;
        snprintf(st->reason, sizeof st->reason, "Slurm job %llu is %s", (unsigned long long)j->id,
                 j->state_name[0] ? j->state_name : "unknown");
        if (j->state == SLURM_ST_PENDING || j->state == SLURM_ST_SUSPENDED)
            snprintf(st->waiting, sizeof st->waiting, "Slurm: %s (%s)",
                     j->state == SLURM_ST_PENDING ? "pending" : "suspended",
                     j->reason && j->reason[0] ? j->reason : "None");
        return;
    case SLURM_ST_COMPLETED:
    case SLURM_ST_FAILED:
    case SLURM_ST_CANCELLED:
        ended(st, j);
        if (j->state == SLURM_ST_COMPLETED && st->exit_code < 0 && st->signal == 0) st->exit_code = 0;
        if (j->state == SLURM_ST_CANCELLED && !term_sent) {
            set(st, EXEC_END_FAILED, true,
                "Slurm job %llu was cancelled outside lathe (scancel by its user or an "
                "administrator%s)", j);
            return;
        }
        if (j->state == SLURM_ST_CANCELLED && st->signal == 0 && st->exit_code < 0)
            st->signal = kill_sent ? SIGKILL : SIGTERM;
        exec_classify(st, oom_line, false, no_retry, n_no_retry);
        if (j->state == SLURM_ST_FAILED && strcmp(j->reason ? j->reason : "", "JobLaunchFailure") == 0)
            snprintf(st->reason + strlen(st->reason), sizeof st->reason - strlen(st->reason),
                     " (Slurm could not launch the batch script: see the job's output)");
        return;
    case SLURM_ST_TIMEOUT:
        ended(st, j);
        set(st, EXEC_END_TIMED_OUT, false,
            "Slurm job %llu reached its time limit (--time) after the --signal that let it "
            "checkpoint%s", j);
        return;
    case SLURM_ST_OOM:
        ended(st, j);
        set(st, EXEC_END_OOM, true,
            "Slurm job %llu ran out of memory (OUT_OF_MEMORY: over its --mem%s)", j);
        return;
    case SLURM_ST_NODE_FAIL:
        ended(st, j);
        set(st, EXEC_END_LOST, true, "Slurm job %llu: its node failed (NODE_FAIL%s); retried", j);
        return;
    }
}

bool slurm_signalled_by_limit(const slurm_job *j, double grace)
{
    if (!(j->time_limit > 0) || !(j->start > 0) || !(j->end >= j->start)) return false;
    if (j->state != SLURM_ST_FAILED && j->state != SLURM_ST_CANCELLED) return false;
    bool term = j->exit_code == 128 + SIGTERM || j->signal == SIGTERM;
    return term && j->end - j->start >= j->time_limit - (grace > 0 ? grace : 0) - 60;
}

/* ---- scontrol -o show nodes ---- */
static double mib(const char *v)
{
    char *end;
    double x = strtod(v, &end);
    return end != v && isfinite(x) && x >= 0 ? x * 1024 * 1024 : 0;
}

/* "gpu:4", "gpu:a100:4", "gpu:a100:4(S:0-1)", "gpu:1,shard:8": the GPUs
 * and their type; 0 when none. */
static int gres_gpus(const char *v, char **type)
{
    int total = 0;
    char *copy = xstrdup(v), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (strncmp(tok, "gpu", 3) != 0 || (tok[3] != ':' && tok[3] != '\0')) continue;
        tok[strcspn(tok, "(")] = '\0';
        char *parts[3] = {NULL, NULL, NULL};
        int np = 0;
        char *s2 = NULL;
        for (char *p = strtok_r(tok, ":", &s2); p && np < 3; p = strtok_r(NULL, ":", &s2)) parts[np++] = p;
        const char *count = np == 3 ? parts[2] : np == 2 ? parts[1] : NULL;
        if (np == 2 && !isdigit((unsigned char)parts[1][0])) count = NULL; /* gpu:TYPE */
        char *end;
        long c = count ? strtol(count, &end, 10) : 0;
        if (count && (*end || c < 0 || c > 1 << 20)) c = 0;
        total += (int)c;
        if (np == 3 && type && !*type) *type = xstrdup(parts[1]);
    }
    free(copy);
    return total;
}

static void node_set(exec_slurm_node *nd, const char *key, size_t klen, const char *val)
{
#define KEY(s) (klen == sizeof(s) - 1 && memcmp(key, s, klen) == 0)
    if (KEY("NodeName")) {
        free(nd->name);
        nd->name = xstrdup(val);
    } else if (KEY("Gres")) {
        free(nd->gres_type);
        nd->gres_type = NULL;
        nd->gpus = gres_gpus(val, &nd->gres_type);
    } else if (KEY("GresUsed")) {
        nd->gpus_used = gres_gpus(val, NULL);
    } else if (KEY("AllocTRES")) {
        const char *g = strstr(val, "gres/gpu=");
        if (g) nd->gpus_used = atoi(g + 9) > 0 ? atoi(g + 9) : 0;
    } else if (KEY("CPUTot")) {
        nd->cpu = atof(val);
    } else if (KEY("RealMemory")) {
        nd->memory = mib(val);
    } else if (KEY("State")) {
        snprintf(nd->state, sizeof nd->state, "%s", val);
    } else if (KEY("Reason")) {
        snprintf(nd->why, sizeof nd->why, "%s", val);
    }
#undef KEY
}

static const char *const unusable[] = {"DOWN", "DRAIN", "FAIL", "NOT_RESPONDING", "FUTURE",
                                       "POWERED_DOWN", "POWERING_DOWN", "REBOOT", "MAINT",
                                       "UNKNOWN", "INVAL"};

static void node_finish(exec_slurm_node *nd)
{
    nd->schedulable = nd->state[0] != '\0';
    for (size_t i = 0; i < sizeof unusable / sizeof unusable[0]; i++)
        if (strstr(nd->state, unusable[i])) nd->schedulable = false;
    if (strchr(nd->state, '*')) nd->schedulable = false; /* not responding */
    if (!nd->schedulable) {
        char why[256];
        snprintf(why, sizeof why, "%.63s%s%.150s", nd->state[0] ? nd->state : "no state",
                 nd->why[0] ? ": " : "", nd->why);
        memcpy(nd->why, why, sizeof nd->why - 1);
        nd->why[sizeof nd->why - 1] = '\0';
    } else {
        nd->why[0] = '\0';
    }
}

bool slurm_parse_nodes(const char *text, size_t len, exec_slurm_node **out, size_t *n, char *err,
                       size_t errsz)
{
    *out = NULL;
    *n = 0;
    size_t cap = 0;
    exec_slurm_node *nodes = NULL;
    size_t pos = 0;
    while (pos < len) {
        size_t eol = pos;
        while (eol < len && text[eol] != '\n') eol++;
        char *line = xstrndup(text + pos, eol - pos);
        pos = eol + 1;
        if (strncmp(line, "NodeName=", 9) != 0) {
            free(line);
            continue;
        }
        exec_slurm_node nd;
        memset(&nd, 0, sizeof nd);
        /* words; a word without '=' continues the value before it */
        char *key = NULL;
        size_t klen = 0;
        sb val;
        sb_init(&val);
        char *save = NULL;
        for (char *w = strtok_r(line, " \t\r", &save); w; w = strtok_r(NULL, " \t\r", &save)) {
            char *eq = strchr(w, '=');
            if (eq && eq != w) {
                if (key) node_set(&nd, key, klen, sb_str(&val));
                key = w;
                klen = (size_t)(eq - w);
                sb_clear(&val);
                sb_puts(&val, eq + 1);
            } else if (key) {
                sb_putc(&val, ' ');
                sb_puts(&val, w);
            }
        }
        if (key) node_set(&nd, key, klen, sb_str(&val));
        sb_free(&val);
        free(line);
        if (!nd.name || !nd.name[0]) {
            free(nd.name);
            free(nd.gres_type);
            continue;
        }
        node_finish(&nd);
        if (*n == cap) {
            cap = cap ? cap * 2 : 8;
            nodes = xrealloc(nodes, cap * sizeof *nodes);
        }
        nodes[(*n)++] = nd;
    }
    if (*n == 0) {
        free(nodes);
        snprintf(err, errsz, "scontrol show nodes printed no node (no line starts with NodeName=)");
        return false;
    }
    *out = nodes;
    return true;
}

void exec_slurm_nodes_free(exec_slurm_node *nodes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(nodes[i].name);
        free(nodes[i].gres_type);
    }
    free(nodes);
}

/* ---- small things ---- */
bool slurm_first_host(const char *list, char *out, size_t outsz)
{
    if (!list || !*list || outsz == 0) return false;
    size_t i = 0, o = 0;
    /* the prefix up to ',' or '[' */
    while (list[i] && list[i] != ',' && list[i] != '[') {
        if (o + 1 >= outsz) return false;
        out[o++] = list[i++];
    }
    if (o == 0) return false;
    if (list[i] == '[') {
        i++;
        /* the first number of the range, zero padding kept */
        size_t start = i;
        while (isdigit((unsigned char)list[i])) i++;
        if (i == start || (list[i] != '-' && list[i] != ',' && list[i] != ']')) return false;
        if (o + (i - start) + 1 > outsz) return false;
        memcpy(out + o, list + start, i - start);
        o += i - start;
        if (!strchr(list + i, ']')) return false;
    }
    out[o] = '\0';
    return true;
}

void slurm_format_time(double seconds, char *out, size_t outsz)
{
    if (!(seconds > 0) || !isfinite(seconds)) seconds = 60;
    if (seconds > 365.0 * 86400) seconds = 365.0 * 86400;
    long long m = (long long)ceil(seconds / 60.0);
    if (m < 1) m = 1;
    snprintf(out, outsz, "%lld-%02lld:%02lld:00", m / 1440, (m / 60) % 24, m % 60);
}

bool slurm_name_ok(const char *s)
{
    if (!s || !*s || strlen(s) > 200) return false;
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("._-+", *p)) return false;
    return true;
}

uint32_t slurm_dir_key(const char *dir)
{
    uint32_t h = 2166136261u;
    for (const char *p = dir ? dir : "."; *p; p++) h = (h ^ (unsigned char)*p) * 16777619u;
    return h;
}

int slurm_comment_attempt(const char *comment, uint32_t key)
{
    if (!comment || strncmp(comment, "lathe job=", 10) != 0) return 0;
    const char *a = strstr(comment, " attempt="), *d = strstr(comment, " dir=");
    if (!a || !d) return 0;
    char want[16];
    snprintf(want, sizeof want, "%08x", key);
    if (strcmp(d + 5, want) != 0) return 0;
    char *end;
    long n = strtol(a + 9, &end, 10);
    return *end == ' ' && n > 0 && n < 1000000 ? (int)n : 0;
}

int slurm_tres_gpus(const char *tres)
{
    if (!tres) return 0;
    const char *g = strstr(tres, "gpu");
    if (!g) return 0;
    const char *end = g + strcspn(g, ",");
    const char *num = end;
    while (num > g && isdigit((unsigned char)num[-1])) num--;
    if (num == end || (num[-1] != ':' && num[-1] != '=')) return 0;
    long v = strtol(num, NULL, 10);
    return v > 0 && v < 1 << 20 ? (int)v : 0;
}

bool slurm_hosts(const char *list, size_t max, char ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!list || !*list) return false;
    char **hosts = NULL;
    size_t cnt = 0, cap = 0;
    const char *p = list;
    bool ok = true;
#define ADD(str)                                                                   \
    do {                                                                           \
        if (cnt < max) {                                                           \
            if (cnt + 2 > cap) {                                                   \
                cap = cap ? cap * 2 : 8;                                           \
                hosts = xrealloc(hosts, cap * sizeof *hosts);                      \
            }                                                                      \
            hosts[cnt++] = (str);                                                  \
            hosts[cnt] = NULL;                                                     \
        } else {                                                                   \
            free(str);                                                             \
        }                                                                          \
    } while (0)
    while (*p && ok) {
        size_t plen = strcspn(p, ",[");
        if (plen == 0) {
            ok = false;
            break;
        }
        if (p[plen] != '[') {
            ADD(xstrndup(p, plen));
            p += plen;
            if (*p == ',') p++;
            continue;
        }
        const char *close = strchr(p + plen, ']');
        if (!close) {
            ok = false;
            break;
        }
        const char *r = p + plen + 1;
        while (r < close && ok) {
            const char *a = r;
            while (r < close && isdigit((unsigned char)*r)) r++;
            size_t width = (size_t)(r - a);
            if (width == 0 || width > 9) {
                ok = false;
                break;
            }
            long lo = strtol(a, NULL, 10), hi = lo;
            if (*r == '-') {
                const char *b = ++r;
                while (r < close && isdigit((unsigned char)*r)) r++;
                if (r == b || r - b > 9) {
                    ok = false;
                    break;
                }
                hi = strtol(b, NULL, 10);
            }
            if (hi < lo || (*r != ',' && r != close)) {
                ok = false;
                break;
            }
            for (long v = lo; v <= hi && cnt < max; v++)
                ADD(xasprintf("%.*s%0*ld", (int)plen, p, (int)width, v));
            if (*r == ',') r++;
        }
        p = close + 1;
        if (*p == ',') p++;
        else if (*p) ok = false;
    }
#undef ADD
    if (!ok || cnt == 0) {
        str_list_free(hosts, cnt);
        return false;
    }
    *out = hosts;
    *n = cnt;
    return true;
}

/* ---- job arrays ---- */
bool slurm_array_range_has(const char *s, int task)
{
    if (!s || task < 0) return false;
    const char *p = s;
    while (*p && *p != '%') {
        char *end;
        errno = 0;
        long a = strtol(p, &end, 10);
        if (end == p || errno || a < 0) return false;
        long b = a;
        p = end;
        if (*p == '-') {
            p++;
            b = strtol(p, &end, 10);
            if (end == p || errno || b < a) return false;
            p = end;
        }
        if (*p == ':') { /* a step ("0-10:2") */
            p++;
            long step = strtol(p, &end, 10);
            if (end == p || errno || step <= 0) return false;
            p = end;
            if (task >= a && task <= b && (task - a) % step == 0) return true;
        } else if (task >= a && task <= b) {
            return true;
        }
        if (*p == ',') p++;
        else if (*p && *p != '%') return false;
    }
    return false;
}

slurm_job *slurm_find_task(slurm_job *jobs, size_t n, uint64_t array_id, int task)
{
    slurm_job *range = NULL;
    for (size_t i = 0; i < n; i++) {
        slurm_job *j = &jobs[i];
        if (j->array_id != array_id) continue;
        if (j->array_task == task) return j;
        if (j->array_task < 0 && slurm_array_range_has(j->array_tasks, task)) range = j;
    }
    return range;
}
