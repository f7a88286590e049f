/* test_slurm_unit.c: the Slurm executor's pure parts (lib/exec/
 * exec_slurm_map.c, exec_slurm_render.c), without a cluster: Slurm's state
 * names, squeue / sacct --json as Slurm 22.05 prints them, the mapping of
 * every final state onto lathe's ends, `scontrol -o show nodes` lines, host
 * lists, --time, and the sbatch argv, batch script and step file of a
 * request (placement, account, QOS, GRES type, grace, no shell). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "exec/exec.h"
#include "exec/exec_slurm_internal.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_states(void **state)
{
    (void)state;
    assert_int_equal(slurm_state_parse("RUNNING"), SLURM_ST_RUNNING);
    assert_int_equal(slurm_state_parse("PENDING"), SLURM_ST_PENDING);
    assert_int_equal(slurm_state_parse("CANCELLED by 0"), SLURM_ST_CANCELLED);
    assert_int_equal(slurm_state_parse("OUT_OF_MEMORY"), SLURM_ST_OOM);
    assert_int_equal(slurm_state_parse("NODE_FAIL"), SLURM_ST_NODE_FAIL);
    assert_int_equal(slurm_state_parse("TIMEOUT"), SLURM_ST_TIMEOUT);
    assert_int_equal(slurm_state_parse("PREEMPTED"), SLURM_ST_PREEMPTED);
    assert_int_equal(slurm_state_parse("REQUEUED"), SLURM_ST_REQUEUED);
    assert_int_equal(slurm_state_parse("RUNNINGX"), SLURM_ST_UNKNOWN);
    assert_int_equal(slurm_state_parse(NULL), SLURM_ST_UNKNOWN);
    assert_true(slurm_state_final(SLURM_ST_COMPLETED));
    assert_false(slurm_state_final(SLURM_ST_RUNNING));
    assert_false(slurm_state_final(SLURM_ST_REQUEUED));
}

/* squeue --json's shape in 22.05 (fields lathe reads, and some it does not) */
static const char squeue_json[] =
    "{\"meta\":{\"plugin\":{\"type\":\"openapi/v0.0.38\"}},\"errors\":[],\"jobs\":["
    "{\"job_id\":12,\"name\":\"lathe-team-a-r8-1\",\"comment\":\"lathe job=team-a/r8 attempt=1 id=3\","
    "\"job_state\":\"PENDING\",\"state_reason\":\"Resources\",\"nodes\":\"\",\"exit_code\":0,"
    "\"restart_cnt\":0,\"start_time\":0,\"end_time\":0,\"account\":\"root\"},"
    "{\"job_id\":13,\"name\":\"x\",\"comment\":\"\",\"job_state\":\"FAILED\",\"state_reason\":"
    "\"NonZeroExitCode\",\"nodes\":\"n1\",\"exit_code\":768,\"restart_cnt\":2,\"start_time\":"
    "1796216135,\"end_time\":1796216136},"
    "{\"job_id\":14,\"name\":\"y\",\"job_state\":\"CANCELLED\",\"exit_code\":15},"
    "{\"name\":\"no id\"}]}";

static void test_squeue(void **state)
{
    (void)state;
    slurm_job *jobs;
    size_t n;
    char err[256];
    assert_true(slurm_parse_squeue_json(squeue_json, strlen(squeue_json), &jobs, &n, err, sizeof err));
    assert_int_equal(n, 3);
    assert_int_equal(jobs[0].id, 12);
    assert_string_equal(jobs[0].name, "lathe-team-a-r8-1");
    assert_string_equal(jobs[0].comment, "lathe job=team-a/r8 attempt=1 id=3");
    assert_int_equal(jobs[0].state, SLURM_ST_PENDING);
    assert_string_equal(jobs[0].reason, "Resources");
    assert_int_equal(jobs[1].exit_code, 3); /* a wait status: 768 = 3 << 8 */
    assert_int_equal(jobs[1].signal, 0);
    assert_int_equal(jobs[1].restarts, 2);
    assert_true(jobs[1].start > 1.7e9);
    assert_int_equal(jobs[2].exit_code, -1);
    assert_int_equal(jobs[2].signal, 15);
    slurm_jobs_free(jobs, n);

    const char *bad[] = {"", "[]", "{\"jobs\":{}}", "{\"errors\":[{\"description\":\"Invalid user\"}],\"jobs\":[]}",
                         "not json"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_false(slurm_parse_squeue_json(bad[i], strlen(bad[i]), &jobs, &n, err, sizeof err));
        assert_true(strstr(err, "squeue") != NULL);
        assert_int_equal(n, 0);
    }
    const char *e = "{\"errors\":[{\"description\":\"Invalid user\"}],\"jobs\":[]}";
    slurm_parse_squeue_json(e, strlen(e), &jobs, &n, err, sizeof err);
    assert_true(strstr(err, "Invalid user") != NULL);
}

static void test_sacct(void **state)
{
    (void)state;
    const char *t =
        "{\"errors\":[],\"jobs\":[{\"job_id\":7,\"name\":\"lathe-a-b-1\",\"state\":{\"current\":"
        "\"OUT_OF_MEMORY\",\"reason\":\"None\"},\"exit_code\":{\"status\":\"FAILED\",\"return_code\":0},"
        "\"time\":{\"start\":100,\"end\":200}},{\"job_id\":8,\"state\":{\"current\":\"CANCELLED by 0\"},"
        "\"exit_code\":{\"status\":\"SIGNALED\",\"signal\":{\"signal_id\":9,\"name\":\"KILL\"}}}]}";
    slurm_job *jobs;
    size_t n;
    char err[256];
    assert_true(slurm_parse_sacct_json(t, strlen(t), &jobs, &n, err, sizeof err));
    assert_int_equal(n, 2);
    assert_int_equal(jobs[0].state, SLURM_ST_OOM);
    assert_int_equal(jobs[0].exit_code, 0);
    assert_true(jobs[0].end == 200);
    assert_int_equal(jobs[1].state, SLURM_ST_CANCELLED);
    assert_int_equal(jobs[1].signal, 9);
    slurm_jobs_free(jobs, n);
}

static slurm_job job(slurm_state st, const char *name, int code, int sig, const char *reason)
{
    slurm_job j;
    memset(&j, 0, sizeof j);
    j.id = 42;
    j.state = st;
    snprintf(j.state_name, sizeof j.state_name, "%s", name);
    j.exit_code = code;
    j.signal = sig;
    j.reason = (char *)reason;
    j.start = 1000;
    j.end = 1100;
    return j;
}

static void test_map(void **state)
{
    (void)state;
    const int nr[] = {2};
    exec_status st;
    slurm_job j = job(SLURM_ST_PENDING, "PENDING", -1, 0, "QOSMaxGRESPerUser");
    slurm_map_status(&j, false, false, false, false, nr, 1, &st);
    assert_int_equal(st.phase, EXEC_RUNNING);
    assert_string_equal(st.waiting, "Slurm: pending (QOSMaxGRESPerUser)");

    j = job(SLURM_ST_RUNNING, "RUNNING", -1, 0, "None");
    slurm_map_status(&j, false, false, false, false, nr, 1, &st);
    assert_int_equal(st.phase, EXEC_RUNNING);
    assert_string_equal(st.waiting, "");

    struct {
        slurm_state s;
        const char *name;
        int code, sig;
        bool term, kill, oom, requeued;
        exec_end want;
        bool retry;
    } cases[] = {
        {SLURM_ST_COMPLETED, "COMPLETED", 0, 0, false, false, false, false, EXEC_END_SUCCEEDED, false},
        {SLURM_ST_FAILED, "FAILED", 1, 0, false, false, false, false, EXEC_END_FAILED, true},
        {SLURM_ST_FAILED, "FAILED", 2, 0, false, false, false, false, EXEC_END_INVALID, false},
        {SLURM_ST_FAILED, "FAILED", 1, 0, false, false, true, false, EXEC_END_OOM, true},
        {SLURM_ST_FAILED, "FAILED", 143, 0, true, false, false, false, EXEC_END_STOPPED, true},
        {SLURM_ST_CANCELLED, "CANCELLED", -1, 15, true, false, false, false, EXEC_END_STOPPED, true},
        {SLURM_ST_CANCELLED, "CANCELLED", -1, 9, true, true, false, false, EXEC_END_KILLED, true},
        {SLURM_ST_CANCELLED, "CANCELLED", -1, 15, false, false, false, false, EXEC_END_FAILED, true},
        {SLURM_ST_TIMEOUT, "TIMEOUT", -1, 0, false, false, false, false, EXEC_END_TIMED_OUT, false},
        {SLURM_ST_OOM, "OUT_OF_MEMORY", 0, 0, false, false, false, false, EXEC_END_OOM, true},
        {SLURM_ST_NODE_FAIL, "NODE_FAIL", -1, 0, false, false, false, false, EXEC_END_LOST, true},
        {SLURM_ST_PREEMPTED, "PREEMPTED", -1, 0, false, false, false, false, EXEC_END_EVICTED, true},
        {SLURM_ST_PENDING, "PENDING", -1, 0, false, false, false, true, EXEC_END_LOST, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        j = job(cases[i].s, cases[i].name, cases[i].code, cases[i].sig, "None");
        slurm_map_status(&j, cases[i].term, cases[i].kill, cases[i].oom, cases[i].requeued, nr, 1, &st);
        print_message("  %s code %d sig %d -> %s: %s\n", cases[i].name, cases[i].code, cases[i].sig,
                      exec_end_name(st.end), st.reason);
        assert_int_not_equal(st.phase, EXEC_RUNNING);
        assert_int_equal(st.end, cases[i].want);
        assert_int_equal(st.retryable, cases[i].retry);
        assert_true(strstr(st.reason, "42") != NULL || st.end <= EXEC_END_SIGNALLED);
    }
    assert_string_equal(exec_end_name(EXEC_END_TIMED_OUT), "timed_out");

    /* stopped by the --signal of its time limit: 20 s grace, a 2-minute limit */
    j = job(SLURM_ST_FAILED, "FAILED", 143, 0, "NonZeroExitCode");
    j.time_limit = 120;
    j.start = 1000;
    j.end = 1000 + 95;
    assert_true(slurm_signalled_by_limit(&j, 20));
    j.end = 1000 + 10; /* long before: not the limit's */
    assert_false(slurm_signalled_by_limit(&j, 20));
    j.end = 1000 + 95;
    j.exit_code = 1; /* not stopped by SIGTERM */
    assert_false(slurm_signalled_by_limit(&j, 20));
    j.exit_code = 143;
    j.time_limit = 0; /* no limit */
    assert_false(slurm_signalled_by_limit(&j, 20));
}

static void test_nodes(void **state)
{
    (void)state;
    const char *t =
        "NodeName=n1 Arch=x86_64 CoresPerSocket=1  CPUAlloc=1 CPUEfctv=4 CPUTot=4 Gres=gpu:4 "
        "NodeAddr=127.0.0.1 RealMemory=8000 AllocMem=0 State=MIXED Partitions=gpu "
        "AllocTRES=cpu=1,gres/gpu=3\n"
        "NodeName=n2 CPUTot=8 Gres=gpu:a100:2(S:0-1),shard:8 RealMemory=16000 State=DOWN+DRAIN "
        "Reason=set down by test [root@2026-12-02T12:00:00]\n"
        "NodeName=n3 CPUTot=2 Gres=(null) RealMemory=1000 State=IDLE*\n"
        "garbage line\n";
    exec_slurm_node *nodes;
    size_t n;
    char err[256];
    assert_true(slurm_parse_nodes(t, strlen(t), &nodes, &n, err, sizeof err));
    assert_int_equal(n, 3);
    assert_string_equal(nodes[0].name, "n1");
    assert_int_equal(nodes[0].gpus, 4);
    assert_null(nodes[0].gres_type);
    assert_true(nodes[0].schedulable);
    assert_true(nodes[0].memory == 8000.0 * 1024 * 1024);
    assert_true(nodes[0].cpu == 4);
    assert_int_equal(nodes[0].gpus_used, 3);
    assert_int_equal(nodes[1].gpus, 2);
    assert_string_equal(nodes[1].gres_type, "a100");
    assert_false(nodes[1].schedulable);
    assert_true(strstr(nodes[1].why, "set down by test") != NULL);
    assert_true(strstr(nodes[1].why, "DOWN") != NULL);
    assert_int_equal(nodes[2].gpus, 0);
    assert_false(nodes[2].schedulable); /* '*': not responding */
    exec_slurm_nodes_free(nodes, n);
    assert_false(slurm_parse_nodes("nothing\n", 8, &nodes, &n, err, sizeof err));
}

static void test_small(void **state)
{
    (void)state;
    char h[64];
    assert_true(slurm_first_host("n[1-3,7],m2", h, sizeof h));
    assert_string_equal(h, "n1");
    assert_true(slurm_first_host("gpu[007-009]", h, sizeof h));
    assert_string_equal(h, "gpu007");
    assert_true(slurm_first_host("node-a,node-b", h, sizeof h));
    assert_string_equal(h, "node-a");
    assert_false(slurm_first_host("", h, sizeof h));
    assert_false(slurm_first_host("[1-2]", h, sizeof h));
    assert_false(slurm_first_host("n[x]", h, sizeof h));
    assert_false(slurm_first_host("n[1-2", h, sizeof h));
    char **hs;
    size_t nh;
    assert_true(slurm_hosts("n[1-3,7],m2", 100, &hs, &nh));
    assert_int_equal(nh, 5);
    assert_string_equal(hs[0], "n1");
    assert_string_equal(hs[2], "n3");
    assert_string_equal(hs[3], "n7");
    assert_string_equal(hs[4], "m2");
    str_list_free(hs, nh);
    assert_true(slurm_hosts("gpu[007-009]", 2, &hs, &nh)); /* cut at max */
    assert_int_equal(nh, 2);
    assert_string_equal(hs[1], "gpu008");
    str_list_free(hs, nh);
    assert_true(slurm_hosts("n1", 10, &hs, &nh));
    assert_int_equal(nh, 1);
    str_list_free(hs, nh);
    const char *bad_lists[] = {"", "n[", "n[1-", "n[3-1]", "n[a]", ",n1", "n[1]x", "[1-2]"};
    for (size_t i = 0; i < sizeof bad_lists / sizeof bad_lists[0]; i++) {
        assert_false(slurm_hosts(bad_lists[i], 10, &hs, &nh));
        assert_int_equal(nh, 0);
    }
    assert_int_equal(slurm_tres_gpus("gres:gpu:4"), 4);
    assert_int_equal(slurm_tres_gpus("gres:gpu:a100:2"), 2);
    assert_int_equal(slurm_tres_gpus("gres/gpu=3"), 3);
    assert_int_equal(slurm_tres_gpus("gres:gpu:a100"), 0);
    assert_int_equal(slurm_tres_gpus(""), 0);
    assert_int_equal(slurm_tres_gpus(NULL), 0);
    char t[48];
    slurm_format_time(30, t, sizeof t);
    assert_string_equal(t, "0-00:01:00");
    slurm_format_time(3600 * 25 + 61, t, sizeof t);
    assert_string_equal(t, "1-01:02:00");
    uint32_t key = slurm_dir_key("/data/jobs/team-a/r8");
    char c[160];
    snprintf(c, sizeof c, "lathe job=team-a/r8 attempt=3 id=5 dir=%08x", key);
    assert_int_equal(slurm_comment_attempt(c, key), 3);
    assert_int_equal(slurm_comment_attempt(c, key + 1), 0);
    assert_int_equal(slurm_comment_attempt("lathe job=a/b attempt=x id=1 dir=00000000", 0), 0);
    assert_int_equal(slurm_comment_attempt("someone else's job", key), 0);
    assert_int_equal(slurm_comment_attempt(NULL, key), 0);
    assert_true(slurm_name_ok("lathe-team-a-r8-1"));
    assert_false(slurm_name_ok("a b"));
    assert_false(slurm_name_ok("$(x)"));
}

static bool has_arg(const exec_slurm_submit *s, const char *a)
{
    for (size_t i = 0; i < s->argc; i++)
        if (strcmp(s->argv[i], a) == 0) return true;
    return false;
}

static void test_render(void **state)
{
    (void)state;
    spec_slurm cfg;
    spec_slurm_defaults(&cfg);
    cfg.partition = xstrdup("gpu");
    cfg.n_qos = 1;
    cfg.qos = xcalloc(1, sizeof *cfg.qos);
    cfg.qos[0].key = xstrdup("urgent");
    cfg.qos[0].value = xstrdup("high");
    cfg.n_accounts = 1;
    cfg.accounts = xcalloc(1, sizeof *cfg.accounts);
    cfg.accounts[0].key = xstrdup("team-b");
    cfg.accounts[0].value = xstrdup("acct-b");
    cfg.n_gpu_types = 1;
    cfg.gpu_types = xcalloc(1, sizeof *cfg.gpu_types);
    cfg.gpu_types[0].key = xstrdup("a100");
    cfg.gpu_types[0].value = xstrdup("A100-80GB");

    char *argv[] = {"python3", "train.py", "$(touch /tmp/pwned)", NULL};
    const char *env[] = {"FOO=bar; rm -rf /"};
    const char *nodes[] = {"n1", "n2"};
    exec_request q;
    memset(&q, 0, sizeof q);
    q.argv = argv;
    q.argc = 3;
    q.env = env;
    q.n_env = 1;
    q.job_dir = "/data/jobs/team-a/r8";
    q.attempt = 2;
    q.contract.job = "team-a/r8";
    q.contract.attempt = 2;
    q.contract.nnodes = 2;
    q.contract.master_port = 29600;
    q.cluster.team = "team-a";
    q.cluster.name = "r8";
    q.cluster.job_id = 5;
    q.cluster.nnodes = 2;
    q.cluster.gpus_per_node = 4;
    q.cluster.gpu_type = "A100-80GB";
    q.cluster.cpu = 3.5;
    q.cluster.memory = 2.0 * 1024 * 1024 * 1024;
    q.cluster.nodes = nodes;
    q.cluster.n_nodes = 2;
    q.cluster.priority_class = "urgent";
    q.cluster.grace = 20;
    q.cluster.time_limit = 600;
    q.cluster.slurm_account = "ai-training";
    exec_slurm_submit s;
    char err[256];
    assert_true(exec_slurm_render(&q, &cfg, "/opt/lathe/bin/lathe", &s, err, sizeof err));
    for (size_t i = 0; i < s.argc; i++) print_message("  %s\n", s.argv[i]);
    assert_string_equal(s.argv[0], "sbatch");
    assert_true(has_arg(&s, "--job-name=lathe-team-a-r8-2"));
    assert_true(has_arg(&s, "--comment=lathe job=team-a/r8 attempt=2 id=5 dir=29155b1e"));
    assert_true(has_arg(&s, "--output=/data/jobs/team-a/r8/attempt-2/output.log"));
    assert_true(has_arg(&s, "--nodes=2"));
    assert_true(has_arg(&s, "--ntasks-per-node=1"));
    assert_true(has_arg(&s, "--gres=gpu:a100:4"));
    assert_true(has_arg(&s, "--cpus-per-task=4"));
    assert_true(has_arg(&s, "--mem=2048M"));
    assert_true(has_arg(&s, "--time=0-00:10:00"));
    assert_true(has_arg(&s, "--signal=B:TERM@20"));
    assert_true(has_arg(&s, "--requeue"));
    assert_true(has_arg(&s, "--partition=gpu"));
    assert_true(has_arg(&s, "--account=ai-training")); /* the policy's wins */
    assert_true(has_arg(&s, "--qos=high"));
    assert_true(has_arg(&s, "--nodelist=n1,n2"));
    assert_true(has_arg(&s, "--export=NIL"));
    assert_string_equal(s.argv[s.argc - 2], "/data/jobs/team-a/r8/attempt-2/slurm-batch.sh");
    assert_string_equal(s.argv[s.argc - 1], "/data/jobs/team-a/r8/attempt-2/slurm-step.json");
    /* the script names no user string: only lathe and "$1" */
    assert_true(strstr(s.script, "exec /opt/lathe/bin/lathe slurm-step \"$1\"") != NULL);
    assert_null(strstr(s.script, "python3"));
    assert_null(strstr(s.script, "touch"));
    json_t *o = json_loads(s.step_json, 0, NULL);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_array_get(json_object_get(o, "argv"), 2)),
                        "$(touch /tmp/pwned)");
    assert_int_equal(json_integer_value(json_object_get(o, "nnodes")), 2);
    assert_int_equal(json_integer_value(json_object_get(o, "master_port")), 29600);
    assert_true(json_is_true(json_object_get(o, "gpus")));
    json_decref(o);
    exec_slurm_submit_free(&s);

    /* Slurm decides: no --nodelist; the settings' account for a team without a policy one */
    free(cfg.decide);
    cfg.decide = xstrdup("slurm");
    q.cluster.slurm_account = NULL;
    q.cluster.team = "team-b";
    q.cluster.priority_class = NULL;
    q.cluster.gpu_type = NULL;
    assert_true(exec_slurm_render(&q, &cfg, "/usr/bin/lathe", &s, err, sizeof err));
    for (size_t i = 0; i < s.argc; i++) assert_null(strstr(s.argv[i], "--nodelist"));
    for (size_t i = 0; i < s.argc; i++) assert_null(strstr(s.argv[i], "--qos"));
    assert_true(has_arg(&s, "--account=acct-b"));
    assert_true(has_arg(&s, "--gres=gpu:4"));
    exec_slurm_submit_free(&s);

    /* refused: a lathe path a script cannot hold, a name Slurm cannot take */
    assert_false(exec_slurm_render(&q, &cfg, "/usr/bin/lathe; rm -rf /", &s, err, sizeof err));
    assert_true(strstr(err, "lathePath") != NULL);
    q.cluster.name = "a b";
    assert_false(exec_slurm_render(&q, &cfg, "/usr/bin/lathe", &s, err, sizeof err));
    spec_slurm_free(&cfg);
}

/* Job arrays: squeue's records of an array (its tasks' own, and its
 * pending tasks collapsed into one with a range), sacct's "array", the
 * task ranges, and the array's sbatch argv and mapping file. */
static void test_array(void **state)
{
    (void)state;
    /* ranges as squeue prints an array's pending tasks */
    assert_true(slurm_array_range_has("2-3%2", 2));
    assert_true(slurm_array_range_has("2-3%2", 3));
    assert_false(slurm_array_range_has("2-3%2", 1));
    assert_false(slurm_array_range_has("2-3%2", 4));
    assert_true(slurm_array_range_has("1,4-7:3%2", 7));
    assert_false(slurm_array_range_has("1,4-7:3%2", 5));
    assert_true(slurm_array_range_has("1,4-7:3%2", 1));
    assert_true(slurm_array_range_has("5", 5));
    assert_false(slurm_array_range_has("", 0));
    assert_false(slurm_array_range_has(NULL, 0));
    assert_false(slurm_array_range_has("x-3", 1));
    assert_false(slurm_array_range_has("3-1", 2));
    assert_false(slurm_array_range_has("0-2", -1));

    const char *sq =
        "{\"jobs\": ["
        "{\"job_id\": 12, \"array_job_id\": 10, \"array_task_id\": 0, \"array_task_string\": \"\","
        " \"job_state\": \"RUNNING\", \"state_reason\": \"None\", \"name\": \"lathe-team-a-e-array\","
        " \"comment\": \"lathe array=team-a/e tasks=4 key=0000abcd\", \"restart_cnt\": 0},"
        "{\"job_id\": 10, \"array_job_id\": 10, \"array_task_id\": null, \"array_task_string\": \"2-3%2\","
        " \"job_state\": \"PENDING\", \"state_reason\": \"JobArrayTaskLimit\", \"name\": \"lathe-team-a-e-array\"},"
        "{\"job_id\": 13, \"array_job_id\": 0, \"array_task_id\": null, \"job_state\": \"RUNNING\","
        " \"name\": \"other\"}],"
        " \"errors\": []}";
    slurm_job *jobs;
    size_t n;
    char err[256];
    assert_true(slurm_parse_squeue_json(sq, strlen(sq), &jobs, &n, err, sizeof err));
    assert_int_equal(n, 3);
    assert_int_equal(jobs[0].array_id, 10);
    assert_int_equal(jobs[0].array_task, 0);
    assert_null(jobs[0].array_tasks);
    assert_int_equal(jobs[1].array_task, -1);
    assert_string_equal(jobs[1].array_tasks, "2-3%2");
    assert_int_equal(jobs[2].array_id, 0);
    assert_int_equal(jobs[2].array_task, -1);
    assert_ptr_equal(slurm_find_task(jobs, n, 10, 0), &jobs[0]);
    assert_ptr_equal(slurm_find_task(jobs, n, 10, 3), &jobs[1]); /* pending, collapsed */
    assert_string_equal(slurm_find_task(jobs, n, 10, 2)->reason, "JobArrayTaskLimit");
    assert_null(slurm_find_task(jobs, n, 10, 1)); /* ended: sacct's */
    assert_null(slurm_find_task(jobs, n, 13, 0));
    slurm_jobs_free(jobs, n);

    const char *sa = "{\"jobs\": [{\"job_id\": 11, \"name\": \"x\", \"array\": {\"job_id\": 10,"
                     " \"task_id\": 1}, \"state\": {\"current\": \"COMPLETED\", \"reason\": \"None\"},"
                     " \"exit_code\": {\"status\": \"SUCCESS\", \"return_code\": 0}},"
                     " {\"job_id\": 14, \"name\": \"y\", \"array\": {\"job_id\": 0, \"task_id\": null},"
                     " \"state\": {\"current\": \"FAILED\"}}]}";
    assert_true(slurm_parse_sacct_json(sa, strlen(sa), &jobs, &n, err, sizeof err));
    assert_int_equal(n, 2);
    assert_int_equal(jobs[0].array_id, 10);
    assert_int_equal(jobs[0].array_task, 1);
    assert_int_equal(jobs[1].array_id, 0);
    assert_int_equal(jobs[1].array_task, -1);
    slurm_jobs_free(jobs, n);

    /* the array of three attempts */
    spec_slurm cfg;
    spec_slurm_defaults(&cfg);
    free(cfg.decide);
    cfg.decide = xstrdup("slurm");
    char *argv[] = {"python3", "train.py", "$(touch /tmp/pwned)", NULL};
    exec_slurm_submit subs[3];
    const char *dirs[] = {"/data/jobs/1", "/data/jobs/2", "/data/jobs/3"};
    const char *names[] = {"e-r4", "e-r8", "e-r16"};
    for (int i = 0; i < 3; i++) {
        exec_request q;
        memset(&q, 0, sizeof q);
        q.argv = argv;
        q.argc = 3;
        q.job_dir = dirs[i];
        q.attempt = 1;
        q.cluster.team = "team-a";
        q.cluster.name = names[i];
        q.cluster.experiment = "e";
        q.cluster.gpus_per_node = 1;
        q.cluster.array_max = 2;
        q.cluster.job_id = i + 1;
        assert_true(exec_slurm_render(&q, &cfg, "/usr/bin/lathe", &subs[i], err, sizeof err));
    }
    assert_true(exec_slurm_array_compatible(&subs[0], &subs[1]));
    assert_true(exec_slurm_array_compatible(&subs[0], &subs[2]));
    exec_slurm_array a;
    exec_slurm_array_render(subs, 3, 2, "team-a", "e", "/data/jobs/1/attempt-1/slurm-array",
                       "/usr/bin/lathe", &a);
    bool saw_array = false, saw_output = false, saw_gres = false;
    for (size_t i = 0; i < a.argc; i++) {
        if (strcmp(a.argv[i], "--array=0-2%2") == 0) saw_array = true;
        if (strcmp(a.argv[i], "--output=/data/jobs/1/attempt-1/slurm-array/task-%a/output.log") == 0)
            saw_output = true;
        if (strcmp(a.argv[i], "--gres=gpu:1") == 0) saw_gres = true;
        assert_null(strstr(a.argv[i], "e-r8")); /* no task's own name or comment */
    }
    assert_true(saw_array && saw_output && saw_gres);
    assert_string_equal(a.argv[0], "sbatch");
    assert_string_equal(a.argv[a.argc - 1], "/data/jobs/1/attempt-1/slurm-array/slurm-array.json");
    assert_string_equal(a.name, "lathe-team-a-e-array");
    assert_true(strncmp(a.comment, "lathe array=team-a/e tasks=3 key=", 33) == 0);
    /* the script: only `exec LATHE slurm-step --array FILE`, no user string */
    assert_non_null(strstr(a.script, "exec /usr/bin/lathe slurm-step --array \"$1\"\n"));
    assert_null(strstr(a.script, "pwned"));
    /* the mapping: task id -> the attempt's step file */
    json_t *m = json_loads(a.map_json, 0, NULL);
    assert_non_null(m);
    json_t *steps = json_object_get(m, "steps");
    assert_int_equal(json_array_size(steps), 3);
    assert_string_equal(json_string_value(json_array_get(steps, 1)), "/data/jobs/2/attempt-1/slurm-step.json");
    json_decref(m);
    /* the same attempts make the same array (the dedupe); others another */
    exec_slurm_array b2;
    exec_slurm_array_render(subs, 3, 2, "team-a", "e", "/x", "/usr/bin/lathe", &b2);
    assert_string_equal(a.comment, b2.comment);
    exec_slurm_array_free(&b2);
    exec_slurm_array_render(subs, 2, 2, "team-a", "e", "/x", "/usr/bin/lathe", &b2);
    assert_string_not_equal(a.comment, b2.comment);
    exec_slurm_array_free(&b2);
    exec_slurm_array_free(&a);
    /* another shape is not a task of the same array */
    exec_request q;
    memset(&q, 0, sizeof q);
    q.argv = argv;
    q.argc = 3;
    q.job_dir = "/data/jobs/4";
    q.attempt = 1;
    q.cluster.team = "team-a";
    q.cluster.name = "e-big";
    q.cluster.gpus_per_node = 2;
    exec_slurm_submit big;
    assert_true(exec_slurm_render(&q, &cfg, "/usr/bin/lathe", &big, err, sizeof err));
    assert_false(exec_slurm_array_compatible(&subs[0], &big));
    exec_slurm_submit_free(&big);
    for (int i = 0; i < 3; i++) exec_slurm_submit_free(&subs[i]);
    spec_slurm_free(&cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_states), cmocka_unit_test(test_squeue), cmocka_unit_test(test_sacct),
        cmocka_unit_test(test_map),    cmocka_unit_test(test_nodes),  cmocka_unit_test(test_small),
        cmocka_unit_test(test_render), cmocka_unit_test(test_array),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
