/* file.c: whole-file reads with a size limit and atomic writes (temp file,
 * fsync, rename, fsync of the folder), so that a crash leaves either the old
 * file or the new one, never a torn one. */
#include "base.h"

#include <errno.h>
#include <fcntl.h>
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
