/* file.c: whole-file reads with a size limit and atomic writes (temp file,
 * fsync, rename, fsync of the folder), so that a crash leaves either the old
 * file or the new one, never a torn one; removing a folder tree. */
#include "base.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *file_read_all(const char *path, size_t max_bytes, size_t *len, char *err, size_t errsz)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errsz, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
        snprintf(err, errsz, "cannot read %s: %s", path,
                 S_ISDIR(st.st_mode) ? "it is a folder" : strerror(errno));
        close(fd);
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = xmalloc(cap + 1);
    for (;;) {
        if (n == cap) {
            if (cap > max_bytes) break;
            cap *= 2;
            buf = xrealloc(buf, cap + 1);
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            snprintf(err, errsz, "cannot read %s: %s", path, strerror(errno));
            free(buf);
            close(fd);
            return NULL;
        }
        if (r == 0) break;
        n += (size_t)r;
        if (n > max_bytes) break;
    }
    close(fd);
    if (n > max_bytes) {
        snprintf(err, errsz, "%s is larger than the limit of %zu bytes", path, max_bytes);
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

bool file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

bool dir_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

char *path_join(const char *dir, const char *name)
{
    size_t ld = strlen(dir);
    if (ld && dir[ld - 1] == '/') return xasprintf("%s%s", dir, name);
    return xasprintf("%s/%s", dir, name);
}

static int write_full(int fd, const char *p, size_t len)
{
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return errno;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

static int fsync_parent(const char *path)
{
    char *copy = xstrdup(path);
    int dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(copy);
    if (dfd < 0) return errno;
    int rc = fsync(dfd) == 0 ? 0 : errno;
    close(dfd);
    return rc;
}

int file_write_atomic(const char *path, const void *data, size_t len)
{
    char *tmp = xasprintf("%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return e;
    }
    int rc = write_full(fd, data, len);
    if (!rc && fsync(fd) != 0) rc = errno;
    if (close(fd) != 0 && !rc) rc = errno;
    if (!rc && rename(tmp, path) != 0) rc = errno;
    if (rc) unlink(tmp);
    else rc = fsync_parent(path);
    free(tmp);
    return rc;
}

/* Empties the folder open as fd (the caller closes it); path is for
 * messages. Depth is bounded by the file system's own path limit. */
static int empty_dir(int fd, const char *path, char *err, size_t errsz)
{
    int dup_fd = dup(fd);
    DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    if (!d) {
        int e = errno;
        if (dup_fd >= 0) close(dup_fd);
        snprintf(err, errsz, "cannot read %s: %s", path, strerror(e));
        return e;
    }
    int rc = 0;
    struct dirent *ent;
    while (rc == 0 && (errno = 0, ent = readdir(d)) != NULL) {
        const char *name = ent->d_name;
        if (!strcmp(name, ".") || !strcmp(name, "..")) continue;
        char *sub = path_join(path, name);
        int child = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (child >= 0) { /* a folder (not a link to one): empty it, then remove it */
            rc = empty_dir(child, sub, err, errsz);
            close(child);
            if (rc == 0 && unlinkat(fd, name, AT_REMOVEDIR) != 0) rc = errno;
        } else if (unlinkat(fd, name, 0) != 0) {
            rc = errno;
        }
        if (rc && !err[0]) snprintf(err, errsz, "cannot remove %s: %s", sub, strerror(rc));
        free(sub);
    }
    if (rc == 0 && errno != 0) {
        rc = errno;
        snprintf(err, errsz, "cannot read %s: %s", path, strerror(rc));
    }
    closedir(d);
    return rc;
}

int file_remove_tree(const char *path, char *err, size_t errsz)
{
    if (errsz) err[0] = '\0';
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT) return 0;
        if (e == ENOTDIR || e == ELOOP) { /* a file or a link: remove it alone */
            if (unlink(path) == 0) return 0;
            e = errno;
        }
        snprintf(err, errsz, "cannot remove %s: %s", path, strerror(e));
        return e;
    }
    int rc = empty_dir(fd, path, err, errsz);
    close(fd);
    if (rc == 0 && rmdir(path) != 0) {
        rc = errno;
        snprintf(err, errsz, "cannot remove %s: %s", path, strerror(rc));
    }
    return rc;
}
