/* exec_test.h: what the executor tests with real processes or a double
 * share (test_exec_local.c, test_exec_sandbox.c, test_exec_k8s_adopt.c):
 * the wall clock and a nap for their polling loops, the check that every
 * supervisor's shim.log is clean, an attempt's whole output log.
 * Include it after <cmocka.h> (it calls fail_msg). */
#ifndef LATHE_TEST_EXEC_TEST_H
#define LATHE_TEST_EXEC_TEST_H

#include "exec/exec.h"

#include <errno.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Seconds since the epoch, as the backends' exec_poll wants "now". */
static inline double et_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Sleeps s seconds, through signals. */
static inline void et_nap(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Every supervisor under dir (DIR/<job>/attempt-N/shim.log) wrote nothing
 * but lines that start with one of allowed (NULL-terminated; NULL: none
 * allowed): no error, and in the sanitizer build no report (a supervisor
 * is the test program too). Fails the test naming the log and the line. */
static inline void et_check_shim_logs(const char *dir, const char *const *allowed)
{
    char *pattern = path_join(dir, "*/attempt-*/shim.log");
    glob_t g;
    if (glob(pattern, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++) {
            char err[256];
            size_t len;
            char *text = file_read_all(g.gl_pathv[i], 1 << 20, &len, err, sizeof err);
            char *save = NULL;
            for (char *line = text ? strtok_r(text, "\n", &save) : NULL; line;
                 line = strtok_r(NULL, "\n", &save)) {
                bool ok = false;
                for (size_t k = 0; allowed && allowed[k] && !ok; k++)
                    ok = str_starts_with(line, allowed[k]);
                if (!ok) fail_msg("%s: %s", g.gl_pathv[i], line);
            }
            free(text);
        }
        globfree(&g);
    }
    free(pattern);
}

/* The whole output log of an attempt; fails the test where it cannot be
 * read. */
static inline char *et_read_log(const exec_handle *h)
{
    char err[256];
    size_t len;
    char *text = file_read_all(h->log_path, 1 << 24, &len, err, sizeof err);
    if (!text) fail_msg("%s", err);
    return text;
}

#endif
