/* exec_proc.c: process identity and small system helpers for the local
 * backend: a process's start time and state from /proc/PID/stat, the boot
 * id, signalling a process only if it is still the one we started (pidfd),
 * the memory cgroup's OOM-kill count, PATH lookup without a shell, and
 * mkdir -p. Linux only, like the rest of the local backend. */
#include "exec_internal.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* What lathe reads from /proc/PID/stat: the state letter (field 3), the
 * process group (field 5) and the start time (field 22, clock ticks since
 * boot). The command name (field 2) may hold spaces and parentheses, so
 * fields are counted from the last ')'. */
typedef struct proc_info {
    char state;
    int pgrp;
    uint64_t start;
} proc_info;

static bool proc_stat(int pid, proc_info *pi)
{
    if (pid <= 0) return false;
    char path[64], err[128];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    size_t len;
    char *text = file_read_all(path, 4096, &len, err, sizeof err);
    if (!text) return false;
    char *p = strrchr(text, ')');
    bool ok = false;
    if (p && p[1] == ' ') {
        p += 2; /* field 3 */
        pi->state = *p;
        for (int field = 3; field < 22 && p; field++) {
            if (field == 5) pi->pgrp = atoi(p);
            p = strchr(p, ' ');
            if (p) p++;
        }
        if (p) {
            char *end;
            pi->start = strtoull(p, &end, 10);
            ok = end != p;
        }
    }
    free(text);
    return ok;
}

uint64_t exec_proc_start_time(int pid)
{
    proc_info pi;
    return proc_stat(pid, &pi) ? pi.start : 0;
}

void exec_boot_id(char *out, size_t outsz)
{
    char err[128];
    size_t len;
    char *text = file_read_all("/proc/sys/kernel/random/boot_id", 256, &len, err, sizeof err);
    out[0] = '\0';
    if (!text) return;
    text[strcspn(text, "\n")] = '\0';
    snprintf(out, outsz, "%s", text);
    free(text);
}

bool exec_proc_alive(int pid, uint64_t start, const char *boot_id)
{
    if (boot_id && *boot_id) {
        char now[40];
        exec_boot_id(now, sizeof now);
        if (*now && strcmp(now, boot_id) != 0) return false; /* the machine restarted */
    }
    proc_info pi;
    if (!proc_stat(pid, &pi)) return false;
    /* A zombie has ended; only its parent has not collected it yet. */
    return pi.start == start && start != 0 && pi.state != 'Z' && pi.state != 'X';
}

int exec_proc_signal(int pid, uint64_t start, int sig)
{
#if defined(SYS_pidfd_open) && defined(SYS_pidfd_send_signal)
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd >= 0) {
        /* The pidfd names the process that had pid when it was opened; if
         * that is still the one that started at `start`, the signal cannot
         * reach another process, even if the pid is recycled meanwhile. */
        int rc = 0;
        if (exec_proc_start_time(pid) != start) rc = ESRCH;
        else if (syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0) != 0) rc = errno;
        close(fd);
        return rc;
    }
    if (errno != ENOSYS) return errno == ESRCH ? ESRCH : errno;
#endif
    if (exec_proc_start_time(pid) != start) return ESRCH;
    return kill(pid, sig) == 0 ? 0 : errno;
}

int exec_proc_kill_group(int pgid, uint64_t leader_start)
{
    proc_info leader;
    /* A live process holding the id that is not the leader: the id may
     * name another group now. */
    if (pgid <= 0 || (proc_stat(pgid, &leader) && leader.start != leader_start)) return 0;
    DIR *d = opendir("/proc");
    if (!d) return 0;
    int killed = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        proc_info pi;
        if (*end || pid <= 0 || !proc_stat((int)pid, &pi)) continue;
        /* Members started with or after the leader; each is signalled only
         * while it is still the process just read. */
        if (pi.pgrp == pgid && pi.start >= leader_start &&
            exec_proc_signal((int)pid, pi.start, SIGKILL) == 0)
            killed++;
    }
    closedir(d);
    return killed;
}

/* ---- the memory cgroup's OOM kills ---- */

/* Reads "key N" from a cgroup file; -1 when absent. */
static int read_counter(const char *path, const char *key)
{
    char err[128];
    size_t len;
    char *text = file_read_all(path, 1 << 16, &len, err, sizeof err);
    if (!text) return -1;
    int value = -1;
    size_t kl = strlen(key);
    for (char *line = text; line && *line;) {
        char *next = strchr(line, '\n');
        if (next) *next++ = '\0';
        if (strncmp(line, key, kl) == 0 && line[kl] == ' ') value = atoi(line + kl + 1);
        line = next;
    }
    free(text);
    return value;
}

int exec_cgroup_oom_kills(void)
{
    char err[128];
    size_t len;
    char *text = file_read_all("/proc/self/cgroup", 1 << 16, &len, err, sizeof err);
    if (!text) return -1;
    int value = -1;
    for (char *line = text; line && *line && value < 0;) {
        char *next = strchr(line, '\n');
        if (next) *next++ = '\0';
        /* "ID:CONTROLLERS:PATH"; v2 has ID 0 and no controllers. */
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (c2) {
            *c2 = '\0';
            const char *controllers = c1 + 1, *cg = c2 + 1;
            char path[4200];
            if (strcmp(line, "0") == 0 && *controllers == '\0') {
                snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.events", cg);
                value = read_counter(path, "oom_kill");
            } else if (strstr(controllers, "memory")) {
                snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s/memory.oom_control", cg);
                value = read_counter(path, "oom_kill");
            }
        }
        line = next;
    }
    free(text);
    return value;
}

/* ---- programs and folders ---- */

static bool executable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

char *exec_find_program(const char *prog, char *const *env)
{
    if (!prog || !*prog) {
        errno = ENOENT;
        return NULL;
    }
    if (strchr(prog, '/')) {
        if (executable(prog)) return xstrdup(prog);
        errno = access(prog, F_OK) == 0 ? EACCES : ENOENT;
        return NULL;
    }
    const char *path = "/usr/local/bin:/usr/bin:/bin";
    for (size_t i = 0; env && env[i]; i++)
        if (strncmp(env[i], "PATH=", 5) == 0) path = env[i] + 5;
    int err = ENOENT;
    while (*path) {
        size_t n = strcspn(path, ":");
        char *dir = n ? xstrndup(path, n) : xstrdup(".");
        char *full = path_join(dir, prog);
        free(dir);
        if (executable(full)) return full;
        if (access(full, F_OK) == 0) err = EACCES;
        free(full);
        path += n;
        if (*path == ':') path++;
    }
    errno = err;
    return NULL;
}

int exec_mkdirs(const char *path, mode_t mode)
{
    char *p = xstrdup(path);
    int rc = 0;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0') continue;
        char c = *s;
        *s = '\0';
        if (mkdir(p, mode) != 0 && errno != EEXIST) {
            rc = errno;
            break;
        }
        *s = c;
        if (!c) break;
    }
    if (!rc && !dir_exists(path)) rc = ENOTDIR;
    free(p);
    return rc;
}
