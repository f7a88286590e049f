/* exec_cgroup.c: the attempt's own cgroup (exec_internal.h, "the attempt's
 * own cgroup"): a child of the supervisor's cgroup v2 where that delegates
 * the memory or pids controller, else of its v1 memory and pids
 * hierarchies where they are writable; the limits written, the trainer's
 * first process moved in (exec_cgroup_join, in the sandbox's child: only
 * async-signal-safe calls there), the OOM kills read, the folders removed
 * once the attempt is over. */
#include "exec_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the attempt's cgroup ---- */

/* The mount point of the hierarchy whose mountinfo line has type `fstype`
 * and (for v1) the controller among its super options; its mount root in
 * *root. NULL when there is none. */
static char *cgroup_mount(const char *fstype, const char *controller, char **root)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f) return NULL;
    char *line = NULL, *found = NULL;
    size_t cap = 0;
    while (!found && getline(&line, &cap, f) > 0) {
        /* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS */
        char *fields[6] = {0};
        char *save = NULL, *tok = strtok_r(line, " \n", &save);
        for (int i = 0; tok && i < 6; i++, tok = strtok_r(NULL, " \n", &save)) fields[i] = tok;
        while (tok && strcmp(tok, "-") != 0) tok = strtok_r(NULL, " \n", &save);
        char *type = tok ? strtok_r(NULL, " \n", &save) : NULL;
        char *source = type ? strtok_r(NULL, " \n", &save) : NULL;
        char *super = source ? strtok_r(NULL, " \n", &save) : NULL;
        if (!type || !fields[4] || strcmp(type, fstype) != 0) continue;
        if (controller) {
            bool has = false;
            char *s2 = NULL;
            for (char *o = super ? strtok_r(super, ",", &s2) : NULL; o; o = strtok_r(NULL, ",", &s2))
                if (!strcmp(o, controller)) has = true;
            if (!has) continue;
        }
        found = xstrdup(fields[4]);
        *root = xstrdup(fields[3]);
    }
    free(line);
    fclose(f);
    return found;
}

/* This process's cgroup path in the hierarchy of `controller` (v1), or
 * the 0:: line (controller NULL: v2), from /proc/self/cgroup. */
static char *own_cgroup(const char *controller)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f) return NULL;
    char *line = NULL, *found = NULL;
    size_t cap = 0;
    while (!found && getline(&line, &cap, f) > 0) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = '\0';
        const char *ctrls = c1 + 1;
        if (!controller) {
            if (!strcmp(line, "0") && !*ctrls) found = xstrdup(c2 + 1);
            continue;
        }
        char *dup = xstrdup(ctrls), *s2 = NULL;
        for (char *o = strtok_r(dup, ",", &s2); o && !found; o = strtok_r(NULL, ",", &s2))
            if (!strcmp(o, controller)) found = xstrdup(c2 + 1);
        free(dup);
    }
    free(line);
    fclose(f);
    return found;
}

/* The folder of this process's cgroup: the mount point plus its path
 * below the mount's root. */
static char *cgroup_dir(const char *fstype, const char *controller)
{
    char *root = NULL, *mnt = cgroup_mount(fstype, controller, &root);
    char *own = mnt ? own_cgroup(!strcmp(fstype, "cgroup2") ? NULL : controller) : NULL;
    char *dir = NULL;
    if (own) {
        const char *rel = own;
        if (strcmp(root, "/") != 0 && str_starts_with(own, root)) rel = own + strlen(root);
        dir = xasprintf("%s%s%s", mnt, *rel == '/' ? "" : "/", rel);
        size_t n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/') dir[--n] = '\0';
    }
    free(root);
    free(mnt);
    free(own);
    return dir;
}

static bool has_word(const char *path, const char *word)
{
    char err[64];
    size_t len;
    char *text = file_read_all(path, 4096, &len, err, sizeof err);
    bool found = false;
    char *save = NULL;
    for (char *w = text ? strtok_r(text, " \n", &save) : NULL; w && !found;
         w = strtok_r(NULL, " \n", &save))
        found = !strcmp(w, word);
    free(text);
    return found;
}

static int put(const char *dir, const char *file, const char *value)
{
    char *path = path_join(dir, file);
    int e = exec_write_file(path, value);
    free(path);
    return e;
}

static void cg_add(exec_cgroup *cg, char *dir)
{
    cg->dirs[cg->n++] = dir;
}

/* cgroup v2: a child of this process's cgroup, where that one delegates
 * the controllers (they are in its cgroup.subtree_control, or can be put
 * there). */
static bool cgroup_v2(exec_cgroup *cg, const char *name, double memory, long processes)
{
    char *parent = cgroup_dir("cgroup2", NULL);
    if (!parent) return false;
    char *ctl = path_join(parent, "cgroup.controllers");
    char *sub = path_join(parent, "cgroup.subtree_control");
    bool mem = has_word(ctl, "memory"), pids = has_word(ctl, "pids");
    if (mem && !has_word(sub, "memory")) mem = exec_write_file(sub, "+memory") == 0;
    if (pids && !has_word(sub, "pids")) pids = exec_write_file(sub, "+pids") == 0;
    free(ctl);
    free(sub);
    char *dir = path_join(parent, name);
    free(parent);
    if ((!mem && !pids) || (mkdir(dir, 0755) != 0 && errno != EEXIST)) {
        free(dir);
        return false;
    }
    char v[32];
    if (mem) {
        cg->memory_dir = xstrdup(dir);
        cg->v2 = true;
        if (memory > 0) {
            exec_utoa((unsigned long long)memory, v);
            cg->memory_limited = put(dir, "memory.max", v) == 0;
            put(dir, "memory.swap.max", "0"); /* absent without swap accounting */
        }
    }
    if (pids && processes > 0) {
        exec_utoa((unsigned long long)processes, v);
        cg->pids_limited = put(dir, "pids.max", v) == 0;
    }
    cg_add(cg, dir);
    snprintf(cg->note, sizeof cg->note, "cgroup v2 %s", dir);
    return true;
}

/* cgroup v1: a child in the memory and in the pids hierarchy each, where
 * they are mounted and writable. */
static void cgroup_v1(exec_cgroup *cg, const char *name, double memory, long processes)
{
    char v[32];
    char *mdir = cgroup_dir("cgroup", "memory");
    if (mdir) {
        char *dir = path_join(mdir, name);
        if (mkdir(dir, 0755) == 0 || errno == EEXIST) {
            cg->memory_dir = xstrdup(dir);
            if (memory > 0) {
                exec_utoa((unsigned long long)memory, v);
                cg->memory_limited = put(dir, "memory.limit_in_bytes", v) == 0;
                /* memory + swap: the same, so the hog is killed, not swapped */
                put(dir, "memory.memsw.limit_in_bytes", v);
            }
            cg_add(cg, dir);
        } else {
            free(dir);
        }
        free(mdir);
    }
    char *pdir = cgroup_dir("cgroup", "pids");
    if (pdir) {
        char *dir = path_join(pdir, name);
        if (mkdir(dir, 0755) == 0 || errno == EEXIST) {
            if (processes > 0) {
                exec_utoa((unsigned long long)processes, v);
                cg->pids_limited = put(dir, "pids.max", v) == 0;
            }
            cg_add(cg, dir);
        } else {
            free(dir);
        }
        free(pdir);
    }
    if (cg->n) snprintf(cg->note, sizeof cg->note, "cgroup v1 %s%s%s", cg->dirs[0],
                        cg->n > 1 ? " and " : "", cg->n > 1 ? cg->dirs[1] : "");
}

void exec_cgroup_make(exec_cgroup *cg, const char *name, double memory, long processes)
{
    memset(cg, 0, sizeof *cg);
    if (!cgroup_v2(cg, name, memory, processes)) cgroup_v1(cg, name, memory, processes);
    if (!cg->n) snprintf(cg->note, sizeof cg->note, "no cgroup: none is delegated or writable");
}

int exec_cgroup_join(const exec_cgroup *cg)
{
    char pid[24];
    exec_utoa((unsigned long long)getpid(), pid);
    for (size_t i = 0; i < cg->n; i++) {
        int e = put(cg->dirs[i], "cgroup.procs", pid);
        if (e) return e;
    }
    return 0;
}

int exec_cgroup_oom_count(const exec_cgroup *cg)
{
    if (!cg->memory_dir) return -1;
    char *path = path_join(cg->memory_dir, cg->v2 ? "memory.events" : "memory.oom_control");
    char err[64];
    size_t len;
    char *text = file_read_all(path, 65536, &len, err, sizeof err);
    free(path);
    if (!text) return -1;
    const char *p = strstr(text, "oom_kill ");
    int n = p ? atoi(p + strlen("oom_kill ")) : -1;
    free(text);
    return n;
}

void exec_cgroup_remove(exec_cgroup *cg)
{
    for (size_t i = 0; i < cg->n; i++) {
        /* the processes of the namespace take a moment to be gone */
        for (int tries = 0; tries < 200 && rmdir(cg->dirs[i]) != 0 && errno == EBUSY; tries++)
            usleep(10000);
        free(cg->dirs[i]);
    }
    free(cg->memory_dir);
    memset(cg, 0, sizeof *cg);
}
