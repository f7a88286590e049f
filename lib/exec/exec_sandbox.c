/* exec_sandbox.c: the local trainer's sandbox (exec.h, "the sandbox of a
 * local trainer"; docs/executors.md, "The sandbox"). Own system calls, no
 * helper program:
 *
 *   exec_sandbox_probe   whether namespaces can be made here (at load)
 *   exec_sandbox_child   in the supervisor's child: namespaces, the new
 *                        root, limits, the user switch, the trainer
 *   exec_chown_tree      the trainer's folders given to its user
 *
 * Beside it: exec_sandbox_cfg.c (the environment's allow-list, the sandbox
 * in the supervisor's config, the re-check of the spec's paths) and
 * exec_cgroup.c (the attempt's own cgroup).
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
#include "policy/policy.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <ftw.h>
#include <grp.h>
#include <strings.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- small async-signal-safe helpers (the probe runs in a child of a
 * possibly threaded server) ---- */

size_t exec_utoa(unsigned long long v, char *out)
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

int exec_write_file(const char *path, const char *text)
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
    size_t n = exec_utoa(uid, line);
    line[n++] = ' ';
    n += exec_utoa(uid, line + n);
    memcpy(line + n, " 1\n", 4);
    int e = exec_write_file("/proc/self/uid_map", line);
    if (e) return e;
    e = exec_write_file("/proc/self/setgroups", "deny\n");
    if (e && e != ENOENT) return e;
    n = exec_utoa(gid, line);
    line[n++] = ' ';
    n += exec_utoa(gid, line + n);
    memcpy(line + n, " 1\n", 4);
    return exec_write_file("/proc/self/gid_map", line);
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

/* The per-mount flags statvfs reports, which a bind's remount must keep
 * (in a user namespace the kernel refuses to drop locked ones). The probe
 * and the sandbox remount with it (statvfs is a plain system call). */
static unsigned long kept_flags(const char *path)
{
    struct statvfs v;
    if (statvfs(path, &v) != 0) return 0;
    unsigned long f = 0;
    if (v.f_flag & ST_NOSUID) f |= MS_NOSUID;
    if (v.f_flag & ST_NODEV) f |= MS_NODEV;
    if (v.f_flag & ST_NOEXEC) f |= MS_NOEXEC;
    if (v.f_flag & ST_RDONLY) f |= MS_RDONLY;
    if (v.f_flag & ST_NOATIME) f |= MS_NOATIME;
    if (v.f_flag & ST_NODIRATIME) f |= MS_NODIRATIME;
#ifdef ST_RELATIME
    if (v.f_flag & ST_RELATIME) f |= MS_RELATIME;
#endif
    return f;
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
    /* a read-only bind, as of /sys and every root: some containers refuse it */
    if (mkdir("/tmp/sys", 0755) != 0) probe_fail(fd, errno, "mkdir in the tmpfs");
    if (mount("/sys", "/tmp/sys", NULL, MS_BIND, NULL) != 0 &&
        (errno != EINVAL || mount("/sys", "/tmp/sys", NULL, MS_BIND | MS_REC, NULL) != 0))
        probe_fail(fd, errno, "binding /sys");
    if (mount(NULL, "/tmp/sys", NULL,
              MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | kept_flags("/tmp/sys"),
              NULL) != 0)
        probe_fail(fd, errno, "making a bind read-only");
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

/* ---- the sandbox's processes (in the supervisor's child: the supervisor
 * has one thread, so everything here may allocate) ---- */

void exec_spawn_fail(int fd, int e, const char *what, const char *path)
{
    exec_spawn_msg m;
    memset(&m, 0, sizeof m);
    m.err = e;
    snprintf(m.what, sizeof m.what, "%s%s%s", what, path ? " " : "", path ? path : "");
    ssize_t w = write(fd, &m, sizeof m);
    (void)w;
    _exit(127);
}

typedef struct sbx {
    const exec_sandbox_run *r;
    int fd; /* errpipe */
    bool userns;
    char *root;
} sbx;

static char *in_root(const sbx *s, const char *path)
{
    return xasprintf("%s%s", s->root, path);
}

/* Makes the mount point for src at dst: a folder, or an empty file. */
static void make_point(const sbx *s, const char *src, const char *dst)
{
    struct stat st;
    if (stat(src, &st) != 0) exec_spawn_fail(s->fd, errno, "cannot bind", src);
    struct stat dt;
    if (stat(dst, &dt) == 0) return; /* a bind of a parent shows it already */
    if (S_ISDIR(st.st_mode)) {
        int e = exec_mkdirs(dst, 0755);
        if (e) exec_spawn_fail(s->fd, e, "making the mount point", dst);
        return;
    }
    char *parent = xstrdup(dst);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) *slash = '\0';
    int e = exec_mkdirs(parent, 0755);
    free(parent);
    int fd = e ? -1 : open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0444);
    if (fd < 0) exec_spawn_fail(s->fd, e ? e : errno, "making the mount point", dst);
    close(fd);
}

/* Binds src at dst (inside the new root), read-only unless writable. */
static void bind_at(const sbx *s, const char *src, const char *dst, bool writable, bool rec)
{
    make_point(s, src, dst);
    unsigned long f = MS_BIND | (rec ? MS_REC : 0);
    if (mount(src, dst, NULL, f, NULL) != 0) {
        /* a user namespace may not bind a tree alone whose submounts are locked */
        if (rec || errno != EINVAL || mount(src, dst, NULL, f | MS_REC, NULL) != 0)
            exec_spawn_fail(s->fd, errno, "binding", src);
    }
    unsigned long keep = kept_flags(dst);
    unsigned long r = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | (keep & ~MS_RDONLY) |
                      (writable && !(keep & MS_RDONLY) ? 0 : MS_RDONLY);
    if (mount(NULL, dst, NULL, r, NULL) != 0)
        exec_spawn_fail(s->fd, errno, "making read-only", dst);
}

/* /usr, /bin, /lib* ...: the same links where the system has links (merged
 * /usr), read-only binds of the folders. */
static void system_folders(const sbx *s)
{
    static const char *const dirs[] = {"/usr", "/bin", "/sbin", "/lib", "/lib32",
                                       "/lib64", "/libx32", "/etc"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        struct stat st;
        if (lstat(dirs[i], &st) != 0) continue;
        char *dst = in_root(s, dirs[i]);
        if (S_ISLNK(st.st_mode)) {
            char target[4096];
            ssize_t n = readlink(dirs[i], target, sizeof target - 1);
            if (n > 0) {
                target[n] = '\0';
                if (symlink(target, dst) != 0) exec_spawn_fail(s->fd, errno, "linking", dst);
            }
        } else if (S_ISDIR(st.st_mode)) {
            bind_at(s, dirs[i], dst, false, true);
        }
        free(dst);
    }
}

/* An empty read-only file over each secret of /etc. */
static void mask_file(const sbx *s, const char *path)
{
    char *dst = in_root(s, path);
    struct stat st;
    if (lstat(dst, &st) == 0 && S_ISREG(st.st_mode)) {
        char *empty = in_root(s, "/.empty");
        if (mount(empty, dst, NULL, MS_BIND, NULL) != 0 ||
            mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV |
                                       (kept_flags(dst) & ~MS_RDONLY),
                  NULL) != 0)
            exec_spawn_fail(s->fd, errno, "masking", path);
        free(empty);
    }
    free(dst);
}

static void mask_dir(const sbx *s, const char *path)
{
    char *dst = in_root(s, path);
    struct stat st;
    if (lstat(dst, &st) == 0 && S_ISDIR(st.st_mode) &&
        mount("tmpfs", dst, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "size=4k,mode=0755") != 0)
        exec_spawn_fail(s->fd, errno, "masking", path);
    free(dst);
}

static void mask_etc(const sbx *s)
{
    char *empty = in_root(s, "/.empty");
    int fd = open(empty, O_WRONLY | O_CREAT | O_CLOEXEC, 0444);
    if (fd < 0) exec_spawn_fail(s->fd, errno, "creating", empty);
    close(fd);
    free(empty);
    static const char *const files[] = {"/etc/shadow", "/etc/shadow-", "/etc/gshadow",
                                        "/etc/gshadow-", "/etc/sudoers", "/etc/security/opasswd",
                                        "/etc/ssl/private"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) mask_file(s, files[i]);
    mask_dir(s, "/etc/sudoers.d");
    mask_dir(s, "/etc/ssl/private");
    DIR *d = opendir("/etc/ssh");
    for (struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d))
        if (str_starts_with(e->d_name, "ssh_host_") && !str_ends_with(e->d_name, ".pub")) {
            char *p = xasprintf("/etc/ssh/%s", e->d_name);
            mask_file(s, p);
            free(p);
        }
    if (d) closedir(d);
}

static void mount_fs(const sbx *s, const char *type, const char *path, unsigned long flags,
                     const char *opts)
{
    char *dst = in_root(s, path);
    int e = exec_mkdirs(dst, 0755);
    if (e || mount(type, dst, type, flags, opts) != 0)
        exec_spawn_fail(s->fd, e ? e : errno, "mounting", path);
    free(dst);
}

/* A small /dev: the harmless devices, shm, the NVIDIA devices. */
static void devices(const sbx *s)
{
    mount_fs(s, "tmpfs", "/dev", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k");
    static const char *const nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
    for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
        char *src = xasprintf("/dev/%s", nodes[i]);
        char *dst = in_root(s, src);
        if (access(src, F_OK) == 0) {
            make_point(s, src, dst);
            if (mount(src, dst, NULL, MS_BIND, NULL) != 0)
                exec_spawn_fail(s->fd, errno, "binding", src);
        }
        free(src);
        free(dst);
    }
    DIR *d = opendir("/dev");
    for (struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d))
        if (str_starts_with(e->d_name, "nvidia")) {
            char *src = xasprintf("/dev/%s", e->d_name);
            char *dst = in_root(s, src);
            make_point(s, src, dst);
            if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) != 0)
                exec_spawn_fail(s->fd, errno, "binding", src);
            free(src);
            free(dst);
        }
    if (d) closedir(d);
    static const char *const links[][2] = {{"/proc/self/fd", "/dev/fd"},
                                           {"/proc/self/fd/0", "/dev/stdin"},
                                           {"/proc/self/fd/1", "/dev/stdout"},
                                           {"/proc/self/fd/2", "/dev/stderr"}};
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
        char *dst = in_root(s, links[i][1]);
        if (symlink(links[i][0], dst) != 0) exec_spawn_fail(s->fd, errno, "linking", dst);
        free(dst);
    }
    mount_fs(s, "tmpfs", "/dev/shm", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=1777");
}

/* The spec's binds and the hidden folders, parents first. */
typedef struct entry {
    const char *path;
    int kind; /* 0 read-only, 1 read-write, 2 hidden */
} entry;

static int by_length(const void *a, const void *b)
{
    size_t la = strlen(((const entry *)a)->path), lb = strlen(((const entry *)b)->path);
    return la < lb ? -1 : la > lb;
}

static void binds(const sbx *s)
{
    const exec_sandbox *box = s->r->sb;
    size_t n = box->n_binds + box->n_hide;
    entry *es = xcalloc(n + 1, sizeof *es);
    size_t k = 0;
    for (size_t i = 0; i < box->n_binds; i++)
        es[k++] = (entry){box->binds[i].path, box->binds[i].writable ? 1 : 0};
    for (size_t i = 0; i < box->n_hide; i++) es[k++] = (entry){box->hide[i], 2};
    qsort(es, k, sizeof *es, by_length);
    for (size_t i = 0; i < k; i++) {
        if (!strcmp(es[i].path, "/"))
            exec_spawn_fail(s->fd, EINVAL, "a bind or hidden folder of / (it would show the "
                                           "whole system, or hide all of it)", NULL);
        char *dst = in_root(s, es[i].path);
        if (es[i].kind == 2) {
            struct stat st;
            /* only where a bind shows it */
            if (stat(dst, &st) == 0 && S_ISDIR(st.st_mode) &&
                mount("tmpfs", dst, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                      "size=64k,mode=0755") != 0)
                exec_spawn_fail(s->fd, errno, "hiding", es[i].path);
        } else {
            bind_at(s, es[i].path, dst, es[i].kind == 1, false);
        }
        free(dst);
    }
    /* the hidden folders were writable for the mount points of binds inside them */
    for (size_t i = 0; i < k; i++)
        if (es[i].kind == 2) {
            char *dst = in_root(s, es[i].path);
            mount(NULL, dst, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "size=64k,mode=0755"); /* fails only where nothing was mounted */
            free(dst);
        }
    free(es);
}

static void new_root(sbx *s)
{
    const exec_sandbox_run *r = s->r;
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        exec_spawn_fail(s->fd, errno, "making / private", NULL);
    s->root = xstrdup(r->root_dir);
    if (mount("tmpfs", s->root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") != 0)
        exec_spawn_fail(s->fd, errno, "mounting the new root's tmpfs at", s->root);
    system_folders(s);
    mask_etc(s);
    char *sys = in_root(s, "/sys");
    bind_at(s, "/sys", sys, false, false);
    free(sys);
    mount_fs(s, "proc", "/proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
    devices(s);
    mount_fs(s, "tmpfs", "/tmp", MS_NOSUID | MS_NODEV, "mode=1777");
    binds(s);
    if (chdir(s->root) != 0) exec_spawn_fail(s->fd, errno, "chdir", s->root);
    if (syscall(SYS_pivot_root, ".", ".") != 0) exec_spawn_fail(s->fd, errno, "pivot_root", NULL);
    if (umount2(".", MNT_DETACH) != 0)
        exec_spawn_fail(s->fd, errno, "detaching the old root", NULL);
    if (chdir("/") != 0 ||
        mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) != 0)
        exec_spawn_fail(s->fd, errno, "making the new root read-only", NULL);
    if (chdir(r->trainer_dir) != 0) exec_spawn_fail(s->fd, errno, "chdir", r->trainer_dir);
}

static void limit(const sbx *s, int res, rlim_t v, const char *name)
{
    struct rlimit cur;
    if (getrlimit(res, &cur) != 0) return;
    struct rlimit rl = {v, v};
    /* without privilege a limit cannot rise above the hard one */
    if (cur.rlim_max != RLIM_INFINITY && v > cur.rlim_max) rl.rlim_cur = rl.rlim_max = cur.rlim_max;
    if (setrlimit(res, &rl) != 0) exec_spawn_fail(s->fd, errno, "setrlimit", name);
}

static void limits_and_user(const sbx *s)
{
    const exec_sandbox *box = s->r->sb;
    long long uid = s->userns ? -1 : box->uid;
    uid_t final = uid >= 0 ? (uid_t)uid : geteuid();
    limit(s, RLIMIT_NOFILE, (rlim_t)(box->open_files > 0 ? box->open_files : 65536), "RLIMIT_NOFILE");
    if (box->processes > 0 && final != 0)
        limit(s, RLIMIT_NPROC, (rlim_t)box->processes, "RLIMIT_NPROC");
    if (box->memory > 0 && !s->r->gpus && !s->r->memory_in_cgroup)
        limit(s, RLIMIT_AS, (rlim_t)box->memory, "RLIMIT_AS");
    limit(s, RLIMIT_CORE, 0, "RLIMIT_CORE");
    if (!s->userns && (box->gid >= 0 || box->uid >= 0)) {
        gid_t gid = box->gid >= 0 ? (gid_t)box->gid : getegid();
        if (setgroups(1, &gid) != 0) exec_spawn_fail(s->fd, errno, "setgroups", NULL);
        if (setgid(gid) != 0 || getgid() != gid || getegid() != gid)
            exec_spawn_fail(s->fd, errno ? errno : EPERM, "setgid", NULL);
        if (box->uid >= 0 && (setuid((uid_t)box->uid) != 0 || getuid() != (uid_t)box->uid ||
                             geteuid() != (uid_t)box->uid))
            exec_spawn_fail(s->fd, errno ? errno : EPERM, "setuid", NULL);
        if (box->uid > 0 && setuid(0) == 0) exec_spawn_fail(s->fd, EPERM, "dropping root", NULL);
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        exec_spawn_fail(s->fd, errno, "PR_SET_NO_NEW_PRIVS", NULL);
}

static void empty_handler(int sig)
{
    (void)sig;
}

/* C and G outlive the signals the supervisor sends the group; T gets
 * them with its default dispositions (exec resets caught ones). */
static void survive_forwarded(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = empty_handler;
    sa.sa_flags = SA_RESTART;
    int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR2, SIGUSR1};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaction(sigs[i], &sa, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

static void trainer(const sbx *s)
{
    const exec_sandbox_run *r = s->r;
    pid_t parent = getppid();
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < 65; sig++) sigaction(sig, &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(r->prog, r->argv, r->env);
    exec_spawn_fail(s->fd, errno, "running the trainer", NULL);
}

/* G: PID 1 of the namespace. */
static void init_process(sbx *s, int status_w)
{
    const exec_sandbox_run *r = s->r;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    new_root(s);
    limits_and_user(s);
    survive_forwarded();
    pid_t t = fork();
    if (t < 0) exec_spawn_fail(s->fd, errno, "fork of the trainer", NULL);
    if (t == 0) trainer(s);
    close(s->fd);
    close(r->out_w);
    close(r->err_w);
    close(r->lock_fd);
    for (;;) {
        int st;
        pid_t p = wait(&st);
        if (p == t) {
            ssize_t w = write(status_w, &st, sizeof st);
            (void)w;
            _exit(0);
        }
        if (p < 0 && errno != EINTR) _exit(127);
    }
}

/* Ends this process as the wait status says: the same exit code, or the
 * same signal. */
__attribute__((noreturn)) static void reproduce(int st)
{
    if (WIFSIGNALED(st)) {
        int sig = WTERMSIG(st);
        signal(sig, SIG_DFL);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, sig);
        sigprocmask(SIG_UNBLOCK, &set, NULL);
        raise(sig);
        _exit(128 + sig);
    }
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 127);
}

void exec_sandbox_child(const exec_sandbox_run *r)
{
    sbx s = {.r = r, .fd = r->errpipe};
    if (r->cgroup && exec_cgroup_join(r->cgroup) != 0)
        exec_spawn_fail(r->errpipe, errno, "joining the attempt's cgroup", NULL);
    struct rlimit core = {0, 0};
    setrlimit(RLIMIT_CORE, &core);
    const char *what;
    int e = exec_sandbox_unshare(&s.userns, &what);
    if (e) exec_spawn_fail(r->errpipe, e, what, NULL);
    if (s.userns && (r->sb->uid >= 0 || r->sb->gid >= 0))
        exec_spawn_fail(r->errpipe, EPERM, "switching to the team's user (the supervisor is not "
                                           "root)", NULL);
    int sp[2];
    if (pipe2(sp, O_CLOEXEC) != 0) exec_spawn_fail(r->errpipe, errno, "pipe", NULL);
    survive_forwarded();
    pid_t g = fork();
    if (g < 0) exec_spawn_fail(r->errpipe, errno, "fork in the new PID namespace", NULL);
    if (g == 0) {
        close(sp[0]);
        init_process(&s, sp[1]);
    }
    close(sp[1]);
    close(r->errpipe);
    close(r->out_w);
    close(r->err_w);
    int st = 0;
    ssize_t n;
    while ((n = read(sp[0], &st, sizeof st)) < 0 && errno == EINTR) {
    }
    int gst = 0;
    while (waitpid(g, &gst, 0) < 0 && errno == EINTR) {
    }
    reproduce(n == (ssize_t)sizeof st ? st : gst);
}

/* ---- the trainer's folders ---- */

static uid_t chown_uid;
static gid_t chown_gid;

static int chown_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return lchown(path, chown_uid, chown_gid) == 0 ? 0 : errno;
}

int exec_chown_tree(const char *path, long long uid, long long gid)
{
    chown_uid = uid >= 0 ? (uid_t)uid : (uid_t)-1;
    chown_gid = gid >= 0 ? (gid_t)gid : (gid_t)-1;
    int rc = nftw(path, chown_one, 16, FTW_PHYS | FTW_MOUNT);
    return rc < 0 ? errno : rc;
}
