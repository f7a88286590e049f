/* test_store_crash.c: real crashes. A child process runs the workload
 * (store_test_util.h) against a database file and reports each
 * acknowledged operation through a pipe; the parent SIGKILLs it at a random
 * instant (while it opens the file, inside a transaction, between two), 100
 * times in a row on the same file. After every kill the reopened database
 * must pass the integrity check and hold every acknowledged operation, at
 * most one more (the one in flight), and never part of one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "store_test_util.h"

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KILLS 100
#define MAX_OPS_PER_CHILD 400

/* The child: run operations from `start` on, acknowledging each. */
static void child(const char *path, long start, int fd)
{
    char err[512];
    store *st = store_open(path, NULL, err, sizeof err);
    if (!st) _exit(3);
    long ready = -1;
    if (write(fd, &ready, sizeof ready) != sizeof ready) _exit(5);
    for (long k = start; k < start + MAX_OPS_PER_CHILD; k++) {
        if (su_op(st, k) != STORE_OK) _exit(4);
        if (write(fd, &k, sizeof k) != sizeof k) _exit(5);
    }
    store_close(st);
    _exit(0);
}

/* Reads every acknowledgement the child sent before it died; returns the
 * number of operations acknowledged in all (start when none). */
static long read_acks(int fd, long start)
{
    long acked = start, k;
    ssize_t r;
    while ((r = read(fd, &k, sizeof k)) == sizeof k) {
        if (k < 0) continue; /* the child's "opened" */
        assert_int_equal(k, acked);
        acked = k + 1;
    }
    assert_true(r == 0);
    return acked;
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void test_sigkill_at_random_instants(void **state)
{
    (void)state;
    char *dir = su_tempdir();
    char *path = path_join(dir, "crash.db");
    unsigned seed = (unsigned)time(NULL);
    print_message("seed %u\n", seed);
    long applied = 0;
    int in_flight_applied = 0, before_ack = 0;
    for (int i = 0; i < KILLS; i++) {
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            child(path, applied, fds[1]);
        }
        close(fds[1]);
        /* One kill in five at any instant from the start (often while the
         * child opens the file); the others once it has opened it. */
        long ready;
        bool wait_open = rand_r(&seed) % 5 != 0;
        if (wait_open) assert_int_equal(read(fds[0], &ready, sizeof ready), sizeof ready);
        sleep_us(rand_r(&seed) % (wait_open ? 20000 : 8000));
        kill(pid, SIGKILL);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        /* Killed, or (rarely, on a fast machine) done with its operations. */
        assert_true((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ||
                    (WIFEXITED(status) && WEXITSTATUS(status) == 0));
        long acked = read_acks(fds[0], applied);
        close(fds[0]);
        if (acked == applied) before_ack++;

        char err[512], why[512];
        store *st = store_open(path, NULL, err, sizeof err);
        if (!st) fail_msg("kill %d: reopen: %s", i, err);
        long now = su_check(st, acked + 2 * SU_PHASES, why, sizeof why);
        store_close(st);
        if (now < 0) fail_msg("kill %d: %s", i, why);
        if (now < acked || now > acked + 1)
            fail_msg("kill %d: %ld operations acknowledged, %ld in the database", i, acked, now);
        in_flight_applied += now == acked + 1;
        applied = now;
    }
    print_message("%d kills, %ld operations survived, %d kills found the operation in flight "
                  "committed, %d kills came before the child's first acknowledgement\n",
                  KILLS, applied, in_flight_applied, before_ack);
    /* The children got work done between the kills (a loaded machine
     * slows them; none at all would mean the test tested nothing). */
    assert_true(applied >= KILLS / 5);
    free(path);
    su_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigkill_at_random_instants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
