/* test_nvml.c: NVML through the tests' stand-in library
 * (build/tests/nvml/libnvidia-ml.so.1, tests/nvml/nvml_standin.c), loaded
 * with dlopen as the real one is: the inventory (names, UUIDs, memory, the
 * driver's version), samples (utilisation, memory, power in watts from
 * milliwatts, temperature, SM clock, energy in joules from millijoules), a
 * figure the board does not report (NAN, the rest still read), figures
 * that change between samples, and what lathe says when the library is
 * absent, lacks functions or does not start. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "exec/exec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STANDIN LATHE_BINARY_DIR "/tests/nvml/libnvidia-ml.so.1"

static char dir[] = "/tmp/lathe-nvml-test-XXXXXX";
static char *desc;

static void describe(const char *json)
{
    /* a new file each time: the stand-in reads it again when it changes */
    char *tmp = xasprintf("%s.tmp", desc);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    fputs(json, f);
    fclose(f);
    assert_int_equal(rename(tmp, desc), 0);
    free(tmp);
}

static const char two_gpus[] =
    "{\"driver\": \"550.54.15\", \"gpus\": ["
    "{\"name\": \"NVIDIA H100 80GB HBM3\", \"uuid\": \"GPU-11111111-2222-3333-4444-555555555555\","
    " \"memory\": 85520809984, \"used\": 42949672960, \"util\": 87, \"mem_util\": 41,"
    " \"power_mw\": 312500, \"temp\": 61, \"sm_clock\": 1980, \"energy_mj\": 7200000, \"minor\": 0},"
    "{\"name\": \"NVIDIA H100 80GB HBM3\", \"uuid\": \"GPU-66666666-7777-8888-9999-000000000000\","
    " \"memory\": 85520809984, \"used\": 0, \"util\": 0, \"temp\": 34, \"minor\": 1,"
    " \"unsupported\": [\"power\", \"energy\"]}]}";

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(dir)) return -1;
    desc = path_join(dir, "gpus.json");
    setenv("LATHE_NVML_STANDIN", desc, 1);
    setenv("LATHE_NVML_LIBRARY", STANDIN, 1);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char err[256];
    file_remove_tree(dir, err, sizeof err);
    free(desc);
    return 0;
}

static void test_inventory(void **state)
{
    (void)state;
    describe(two_gpus);
    exec_inventory inv;
    exec_inventory_local(&inv);
    assert_string_equal(inv.source, "nvml");
    assert_string_equal(inv.note, "NVIDIA driver 550.54.15");
    assert_int_equal(inv.n_gpus, 2);
    assert_string_equal(inv.gpus[0].name, "NVIDIA H100 80GB HBM3");
    assert_string_equal(inv.gpus[1].uuid, "GPU-66666666-7777-8888-9999-000000000000");
    assert_string_equal(inv.gpus[1].id, inv.gpus[1].uuid);
    assert_int_equal(inv.gpus[1].index, 1);
    assert_true(inv.gpus[0].memory == 85520809984.0);
    assert_false(inv.gpus[0].is_virtual);
    exec_inventory_free(&inv);
}

static void test_samples(void **state)
{
    (void)state;
    describe(two_gpus);
    char note[256];
    exec_nvml *a = exec_nvml_open(note, sizeof note);
    assert_non_null(a);
    assert_int_equal(exec_nvml_count(a), 2);
    exec_gpu_sample s[4];
    assert_int_equal(exec_nvml_sample(a, s, 4), 2);
    assert_true(s[0].ok);
    assert_true(s[0].util == 87 && s[0].mem_util == 41);
    assert_true(s[0].mem_used == 42949672960.0 && s[0].mem_total == 85520809984.0);
    assert_true(fabs(s[0].power - 312.5) < 1e-9);
    assert_true(s[0].temp == 61 && s[0].sm_clock == 1980);
    assert_true(fabs(s[0].energy - 7200) < 1e-9);
    assert_int_equal(s[0].minor, 0);
    /* a board without a power sensor: that figure unknown, the rest read */
    assert_true(s[1].ok && isnan(s[1].power) && isnan(s[1].energy) && isnan(s[1].sm_clock));
    assert_true(s[1].temp == 34 && s[1].util == 0 && s[1].mem_used == 0);
    /* at most max */
    assert_int_equal(exec_nvml_sample(a, s, 1), 1);
    /* the figures move between samples */
    char moved[sizeof two_gpus];
    memcpy(moved, two_gpus, sizeof two_gpus);
    char *u = strstr(moved, "\"util\": 87");
    assert_non_null(u);
    memcpy(u, "\"util\": 12", 10);
    describe(moved);
    assert_int_equal(exec_nvml_sample(a, s, 4), 2);
    assert_true(s[0].util == 12);
    exec_nvml_close(a);
    assert_int_equal(exec_nvml_sample(NULL, s, 4), 0);
    assert_int_equal(exec_nvml_count(NULL), 0);
}

static void test_absent_or_broken(void **state)
{
    (void)state;
    describe(two_gpus);
    char note[256];
    setenv("LATHE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
    assert_null(exec_nvml_open(note, sizeof note));
    assert_non_null(strstr(note, "no NVIDIA driver: /nonexistent/libnvidia-ml.so.1 not found"));
    exec_inventory inv;
    exec_inventory_local(&inv);
    assert_string_equal(inv.source, "none");
    assert_int_equal(inv.n_gpus, 0);
    exec_inventory_free(&inv);
    /* a library without NVML's functions (libjansson is loaded already) */
    setenv("LATHE_NVML_LIBRARY", "libc.so.6", 1);
    assert_null(exec_nvml_open(note, sizeof note));
    assert_non_null(strstr(note, "lacks the NVML functions lathe uses"));
    setenv("LATHE_NVML_LIBRARY", STANDIN, 1);
    describe("{\"fail_init\": true, \"gpus\": []}");
    assert_null(exec_nvml_open(note, sizeof note));
    assert_string_equal(note, "NVML did not start: Unknown Error");
    describe("{\"driver\": \"1\", \"gpus\": []}");
    exec_nvml *a = exec_nvml_open(note, sizeof note);
    assert_non_null(a);
    assert_string_equal(note, "the NVIDIA driver reports no GPU");
    exec_nvml_close(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inventory),
        cmocka_unit_test(test_samples),
        cmocka_unit_test(test_absent_or_broken),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
