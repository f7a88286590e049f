/* fuzz_slurm.c: libFuzzer target for the Slurm executor's parsers
 * (lib/exec/exec_slurm_map.c): what squeue, sacct and scontrol print is
 * not ours (another version, a site's wrapper, a truncated pipe). The
 * input goes whole through the squeue --json and sacct --json readers and
 * the `scontrol -o show nodes` line parser, and each line through the host
 * list reader, the comment reader and the job array task range reader. Each must return cleanly: counts
 * that match, states in range, exit codes and signals in range, strings
 * terminated, a first host that is a prefix-shaped name. */
#include "base/base.h"
#include "exec/exec_slurm_internal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_jobs(slurm_job *jobs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (jobs[i].state < SLURM_ST_UNKNOWN || jobs[i].state > SLURM_ST_PREEMPTED) abort();
        if (jobs[i].exit_code < -1 || jobs[i].exit_code > 255) abort();
        if (jobs[i].signal < 0 || jobs[i].signal > 127) abort();
        if (strlen(jobs[i].state_name) >= sizeof jobs[i].state_name) abort();
        exec_status st;
        slurm_map_status(&jobs[i], i & 1, i & 2, i & 4, i & 8, NULL, 0, &st);
        if (strlen(st.reason) >= sizeof st.reason || strlen(st.waiting) >= sizeof st.waiting) abort();
        (void)slurm_signalled_by_limit(&jobs[i], 20);
        if (jobs[i].array_task < -1 || (jobs[i].array_tasks && jobs[i].array_task != -1)) abort();
        if (jobs[i].array_id && slurm_find_task(jobs, n, jobs[i].array_id, jobs[i].array_task < 0 ? 0 : jobs[i].array_task) == NULL &&
            jobs[i].array_task >= 0)
            abort();
    }
    slurm_jobs_free(jobs, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    char err[256];
    slurm_job *jobs;
    size_t n;
    if (slurm_parse_squeue_json(text, size, &jobs, &n, err, sizeof err)) check_jobs(jobs, n);
    else if (n != 0) abort();
    if (slurm_parse_sacct_json(text, size, &jobs, &n, err, sizeof err)) check_jobs(jobs, n);
    exec_slurm_node *nodes;
    if (slurm_parse_nodes(text, size, &nodes, &n, err, sizeof err)) {
        for (size_t i = 0; i < n; i++) {
            if (!nodes[i].name || nodes[i].gpus < 0 || nodes[i].gpus_used < 0) abort();
            if (strlen(nodes[i].why) >= sizeof nodes[i].why) abort();
        }
        exec_slurm_nodes_free(nodes, n);
    }
    char *copy = xstrndup(text, size);
    char *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char host[64];
        if (slurm_first_host(line, host, sizeof host) && (strlen(host) >= sizeof host || !host[0]))
            abort();
        char **hs;
        size_t nh;
        if (slurm_hosts(line, 64, &hs, &nh)) {
            if (nh == 0 || nh > 64) abort();
            for (size_t k = 0; k < nh; k++)
                if (!hs[k] || !hs[k][0]) abort();
            str_list_free(hs, nh);
        }
        if (slurm_tres_gpus(line) < 0) abort();
        int a = slurm_comment_attempt(line, slurm_dir_key(line));
        if (a < 0) abort();
        char t[48];
        slurm_format_time(atof(line), t, sizeof t);
        (void)slurm_array_range_has(line, (int)(size % 64));
    }
    free(copy);
    return 0;
}
