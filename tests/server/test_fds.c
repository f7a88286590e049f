/* test_fds.c: a server whose descriptors are numbered above FD_SETSIZE
 * (1024) still answers new connections. A server with thousands of running
 * Kubernetes attempts holds that many (each attempt's log, its followers'
 * connections); with select() its listener refused every connection whose
 * socket was numbered 1024 or more. Here the server inherits 1100 open
 * descriptors from the test, so its sockets are numbered above them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <sys/resource.h>

#define HELD 1100

static void test_connections_above_fd_setsize(void **state)
{
    (void)state;
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_max < HELD + 200) skip(); /* the machine allows no more */
    if (rl.rlim_cur < HELD + 200) {
        rl.rlim_cur = HELD + 200;
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
    }
    int held[HELD];
    int n = 0;
    int null = open("/dev/null", O_RDONLY);
    assert_true(null >= 0);
    while (n < HELD) { /* not O_CLOEXEC: the server inherits them */
        int fd = dup(null);
        assert_true(fd >= 0);
        held[n++] = fd;
    }
    hs h;
    hs_init(&h, 1, NULL);
    bool up = hs_start(&h);
    for (int i = 0; i < n; i++) close(held[i]);
    close(null);
    if (!up) hs_print_log(&h);
    assert_true(up);
    for (int i = 0; i < 20; i++) { /* fresh connections, one each */
        hs_resp r = hs_http(&h, "GET", "/readyz", NULL, NULL);
        assert_int_equal(r.status, 200);
        hs_resp_free(&r);
    }
    hs_finish(&h);
    curl_global_cleanup();
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_connections_above_fd_setsize)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
