/* policy_path.c: paths as the kernel would open them (policy.h).
 *
 *   policy_normalize   lexical: joined to a base, "//", "." and ".." folded
 *   policy_resolve     the kernel's walk: one component at a time, every
 *                      symbolic link read with readlink(2) and its target
 *                      walked in turn (at most 40, as Linux), ".." taken
 *                      from what the part before it resolved to; the tail
 *                      that does not exist yet is appended lexically, until
 *                      a ".." leads back into the part that exists, which
 *                      is looked up again
 *   policy_path_under  component-wise prefix
 *
 * Why not realpath(3): it fails on a path whose tail does not exist (a
 * dataset written later, an output folder), and a policy must still say
 * where such a path would land. Why not fold ".." first: "a/link/../x" is
 * "<link's target's parent>/x" to the kernel, not "a/x"; folding it
 * lexically would let a link lead a checked path somewhere else.
 *
 * Nothing here opens a file: lstat(2) and readlink(2) only. A check and a
 * later open are two moments (a link may be swapped in between); the
 * supervisor checks again right before the trainer starts, and the sandbox
 * exposes only the roots themselves.
 */
#include "policy.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_LINKS 40        /* Linux's MAXSYMLINKS */
#define MAX_PATH_LEN 4096   /* PATH_MAX, with its NUL */

const char *policy_rc_name(policy_rc rc)
{
    switch (rc) {
    case POLICY_OK: return "ok";
    case POLICY_E_OUTSIDE: return "outside";
    case POLICY_E_DENIED: return "denied";
    case POLICY_E_INVALID: return "invalid";
    case POLICY_E_IO: return "io";
    }
    return "?";
}

static bool has_control(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s == 0x7f) return true;
    return false;
}

/* Removes the last component of an absolute normalised path in place
 * ("/a/b" -> "/a", "/a" -> "/", "/" stays). */
static void drop_last(sb *p)
{
    while (p->len > 1 && p->buf[p->len - 1] != '/') p->len--;
    if (p->len > 1) p->len--; /* the '/' before it, unless it is the root's */
    p->buf[p->len] = '\0';
}

/* Appends component c (n bytes, no '/') to an absolute normalised path. */
static void append(sb *p, const char *c, size_t n)
{
    if (p->len != 1) sb_putc(p, '/');
    sb_putn(p, c, n);
}

char *policy_normalize(const char *base, const char *path)
{
    if (!path || !*path || has_control(path)) return NULL;
    if (path[0] != '/' && (!base || base[0] != '/' || has_control(base))) return NULL;
    sb out;
    sb_init(&out);
    sb_putc(&out, '/');
    const char *parts[2] = {path[0] == '/' ? NULL : base, path};
    for (int k = 0; k < 2; k++) {
        const char *s = parts[k];
        if (!s) continue;
        while (*s) {
            while (*s == '/') s++;
            const char *e = s;
            while (*e && *e != '/') e++;
            size_t n = (size_t)(e - s);
            if (n == 0 || (n == 1 && s[0] == '.')) {
                /* nothing */
            } else if (n == 2 && s[0] == '.' && s[1] == '.') {
                drop_last(&out);
            } else {
                append(&out, s, n);
            }
            s = e;
        }
    }
    return sb_take(&out);
}

static policy_rc fail(policy_rc rc, char *why, size_t whysz, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static policy_rc fail(policy_rc rc, char *why, size_t whysz, const char *fmt, ...)
{
    if (why && whysz) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, whysz, fmt, ap);
        va_end(ap);
    }
    return rc;
}

policy_rc policy_resolve(const char *base, const char *path, char **out, char *why, size_t whysz)
{
    *out = NULL;
    if (why && whysz) why[0] = '\0';
    if (!path || !*path) return fail(POLICY_E_INVALID, why, whysz, "the path is empty");
    if (has_control(path))
        return fail(POLICY_E_INVALID, why, whysz, "the path holds a control character");
    if (strlen(path) >= MAX_PATH_LEN)
        return fail(POLICY_E_INVALID, why, whysz, "the path is longer than %d bytes",
                    MAX_PATH_LEN - 1);
    if (path[0] != '/' && (!base || base[0] != '/'))
        return fail(POLICY_E_INVALID, why, whysz,
                    "the relative path \"%s\" has no folder to start from", path);

    /* rest: what is left to walk, consumed from its front; a link's target
     * is put in front of what follows it */
    sb rest, done;
    sb_init(&rest);
    sb_init(&done);
    if (path[0] != '/') {
        sb_puts(&rest, base);
        sb_putc(&rest, '/');
    }
    sb_puts(&rest, path);
    sb_putc(&done, '/');
    size_t pos = 0;
    int links = 0;
    bool missing = false; /* a component did not exist: the rest is lexical */
    size_t exist_len = 0; /* while missing: the length of the part that exists */
    policy_rc rc = POLICY_OK;
    while (pos < rest.len) {
        const char *s = rest.buf + pos;
        while (*s == '/') s++;
        const char *e = s;
        while (*e && *e != '/') e++;
        size_t n = (size_t)(e - s);
        pos = (size_t)(e - rest.buf);
        if (n == 0 || (n == 1 && s[0] == '.')) continue;
        if (n == 2 && s[0] == '.' && s[1] == '.') {
            drop_last(&done); /* done holds no link: its parent is lexical */
            /* back in the part that exists: what follows is looked up again
             * ("new/../link" reaches the link's target once "new" exists) */
            if (missing && done.len <= exist_len) missing = false;
            continue;
        }
        size_t before = done.len;
        append(&done, s, n);
        if (done.len >= MAX_PATH_LEN) {
            rc = fail(POLICY_E_INVALID, why, whysz,
                      "the path resolves to one longer than %d bytes", MAX_PATH_LEN - 1);
            break;
        }
        if (missing) continue;
        struct stat st;
        if (lstat(done.buf, &st) != 0) {
            int err = errno;
            if (err == ENOENT || err == ENOTDIR) {
                missing = true; /* not there yet: the rest is where it would be */
                exist_len = before;
                continue;
            }
            if (err == EACCES)
                rc = fail(POLICY_E_IO, why, whysz,
                          "%s: permission denied (the server cannot look inside the folder "
                          "holding it)",
                          done.buf);
            else if (err == ELOOP)
                rc = fail(POLICY_E_INVALID, why, whysz, "%s: a loop of symbolic links",
                          done.buf);
            else if (err == ENAMETOOLONG)
                rc = fail(POLICY_E_INVALID, why, whysz, "%s: the name is too long", done.buf);
            else
                rc = fail(POLICY_E_IO, why, whysz, "%s: %s", done.buf, strerror(err));
            break;
        }
        if (!S_ISLNK(st.st_mode)) continue;
        if (++links > MAX_LINKS) {
            rc = fail(POLICY_E_INVALID, why, whysz,
                      "%s: a loop of symbolic links (more than %d followed)", done.buf,
                      MAX_LINKS);
            break;
        }
        char target[MAX_PATH_LEN];
        ssize_t tn = readlink(done.buf, target, sizeof target);
        if (tn < 0) {
            int err = errno;
            rc = fail(err == EACCES ? POLICY_E_IO : POLICY_E_INVALID, why, whysz,
                      "%s: the link cannot be read: %s", done.buf, strerror(err));
            break;
        }
        if (tn == 0 || (size_t)tn >= sizeof target) {
            rc = fail(POLICY_E_INVALID, why, whysz, "%s: the link's target is %s", done.buf,
                      tn == 0 ? "empty" : "too long");
            break;
        }
        target[tn] = '\0';
        if (has_control(target)) {
            rc = fail(POLICY_E_INVALID, why, whysz,
                      "%s: the link's target holds a control character", done.buf);
            break;
        }
        /* the target replaces the link: from "/" when absolute, else from
         * the link's folder; then what followed the link */
        sb next;
        sb_init(&next);
        sb_puts(&next, target);
        sb_putc(&next, '/');
        sb_puts(&next, rest.buf + pos);
        if (next.len >= (size_t)MAX_PATH_LEN * (MAX_LINKS + 2)) {
            sb_free(&next);
            rc = fail(POLICY_E_INVALID, why, whysz, "%s: the links lead to a path too long",
                      done.buf);
            break;
        }
        sb_free(&rest);
        rest = next;
        pos = 0;
        if (target[0] == '/') {
            sb_clear(&done);
            sb_putc(&done, '/');
        } else {
            done.len = before;
            done.buf[done.len] = '\0';
        }
    }
    sb_free(&rest);
    if (rc != POLICY_OK) {
        sb_free(&done);
        return rc;
    }
    *out = sb_take(&done);
    return POLICY_OK;
}

bool policy_path_under(const char *path, const char *root)
{
    if (!path || !root || path[0] != '/' || root[0] != '/') return false;
    size_t n = strlen(root);
    while (n > 1 && root[n - 1] == '/') n--; /* tolerate "/data/" */
    if (n == 1) return true;                 /* "/" holds everything */
    return strncmp(path, root, n) == 0 && (path[n] == '\0' || path[n] == '/');
}
