/* exec_sandbox.c: the local trainer's sandbox (exec.h, "the sandbox of a
 * local trainer"; docs/executors.md, "The sandbox"). Own system calls, no
 * helper program:
 *
 *   exec_sandbox_probe   whether namespaces can be made here (at load)
 *   exec_sandbox_env_*   the trainer's environment allow-list
 *   exec_sandbox_json /  the sandbox in the supervisor's config
 *   exec_sandbox_parse
 *   exec_sandbox_recheck the spec's paths resolved again right before the
 *                        start (a link swapped after submission)
 *   exec_cgroup_*        the attempt's own cgroup (v2 where delegated, else
 *                        the v1 memory and pids hierarchies)
 *   exec_sandbox_child   in the supervisor's child: namespaces, the new
 *                        root, limits, the user switch, the trainer
 *
 * The processes: the supervisor forks C (its trainer child as before: the
 * process group leader, what it waits for). C joins the attempt's cgroup,
 * unshares the mount, PID and IPC namespaces (through a user namespace when
 * it is not root) and forks G, PID 1 of the new PID namespace. G builds the
 * new root and forks the trainer T. G reaps every orphan; when T ends it
 * hands T's wait status to C and exits, which kills what T left in the
 * namespace; C ends the same way T did, so the supervisor classifies the
 * trainer's own end. */
#define _GNU_SOURCE
#include "exec_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- small async-signal-safe helpers (the probe runs in a child of a
 * possibly threaded server) ---- */

static size_t utoa(unsigned long long v, char *out)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
    out[n] = '\0';
    return n;
}

static int write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    size_t len = strlen(text);
    ssize_t w = write(fd, text, len);
    int e = w == (ssize_t)len ? 0 : w < 0 ? errno : EIO;
    close(fd);
    return e;
}

/* Maps this process's uid and gid to themselves in a new user namespace
 * (the only mapping an unprivileged process may write). 0 or errno. */
static int map_self(uid_t uid, gid_t gid)
{
    char line[64];
    size_t n = utoa(uid, line);
    line[n++] = ' ';
    n += utoa(uid, line + n);
    memcpy(line + n, " 1\n", 4);
    int e = write_file("/proc/self/uid_map", line);
    if (e) return e;
    e = write_file("/proc/self/setgroups", "deny\n");
    if (e && e != ENOENT) return e;
    n = utoa(gid, line);
    line[n++] = ' ';
    n += utoa(gid, line + n);
    memcpy(line + n, " 1\n", 4);
    return write_file("/proc/self/gid_map", line);
}

int exec_sandbox_unshare(bool *userns, const char **what)
{
    uid_t uid = geteuid();
    gid_t gid = getegid();
    *userns = false;
    *what = "unshare(CLONE_NEWNS|CLONE_NEWPID|CLONE_NEWIPC)";
    if (unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC) == 0) return 0;
    int e = errno;
    if (uid == 0 || (e != EPERM && e != EINVAL)) return e;
    *what = "unshare(CLONE_NEWUSER)";
    if (unshare(CLONE_NEWUSER) != 0) return errno;
    *what = "writing /proc/self/uid_map and gid_map";
    e = map_self(uid, gid);
    if (e) return e;
    *userns = true;
    *what = "unshare(CLONE_NEWNS|CLONE_NEWPID|CLONE_NEWIPC) in a user namespace";
    return unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC) == 0 ? 0 : errno;
}

/* ---- the probe ---- */

typedef struct probe_msg {
    int err;
    char what[120];
} probe_msg;

static void probe_fail(int fd, int e, const char *what)
{
    probe_msg m;
    memset(&m, 0, sizeof m);
    m.err = e;
    size_t n = strlen(what);
    if (n >= sizeof m.what) n = sizeof m.what - 1;
    memcpy(m.what, what, n);
    ssize_t w = write(fd, &m, sizeof m);
    (void)w;
    _exit(1);
}

/* G of the probe: PID 1 of the new namespace; what the sandbox does first. */
static void probe_init(int fd)
{
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        probe_fail(fd, errno, "making / private (mount MS_REC|MS_PRIVATE)");
    /* /tmp of this private namespace only: the host's stays as it is */
    if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755") != 0)
        probe_fail(fd, errno, "mounting a tmpfs");
    if (mkdir("/tmp/proc", 0755) != 0) probe_fail(fd, errno, "mkdir in the tmpfs");
    if (mount("proc", "/tmp/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
        probe_fail(fd, errno, "mounting a /proc of the new PID namespace");
    _exit(0);
}

static void probe_child(int fd)
{
    bool userns;
    const char *what;
    int e = exec_sandbox_unshare(&userns, &what);
    if (e) probe_fail(fd, e, what);
    pid_t g = fork();
    if (g < 0) probe_fail(fd, errno, "fork in the new PID namespace");
    if (g == 0) probe_init(fd);
    int status;
    while (waitpid(g, &status, 0) < 0 && errno == EINTR) {
    }
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

bool exec_sandbox_probe(char *why, size_t whysz)
{
    if (whysz) why[0] = '\0';
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        snprintf(why, whysz, "pipe: %s", strerror(errno));
        return false;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, whysz, "fork: %s", strerror(errno));
        close(p[0]);
        close(p[1]);
        return false;
    }
    if (pid == 0) {
        close(p[0]);
        probe_child(p[1]);
    }
    close(p[1]);
    probe_msg m;
    memset(&m, 0, sizeof m);
    ssize_t r;
    while ((r = read(p[0], &m, sizeof m)) < 0 && errno == EINTR) {
    }
    close(p[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (r == (ssize_t)sizeof m) {
        m.what[sizeof m.what - 1] = '\0';
        snprintf(why, whysz, "%s: %s", m.what, strerror(m.err));
        return false;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(why, whysz, "the probe's child ended with status %d", status);
        return false;
    }
    return true;
}
