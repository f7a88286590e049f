/* nvml_standin.c: a stand-in for NVIDIA's libnvidia-ml.so.1, built as
 * build/tests/nvml/libnvidia-ml.so.1 so that the tests load it the way
 * lathe loads the real one (dlopen: LD_LIBRARY_PATH, or the file
 * LATHE_NVML_LIBRARY names). It implements the NVML functions lathe calls
 * (lib/exec/exec_nvml.c), with NVML's signatures and return codes, over
 * GPUs described by the JSON file LATHE_NVML_STANDIN names, read again
 * whenever it changes (so a test can move a GPU's figures while a server
 * samples it):
 *
 *   {"driver": "550.54.15", "fail_init": false,
 *    "gpus": [{"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-...",
 *              "memory": 85899345920, "used": 1073741824, "util": 87,
 *              "mem_util": 40, "power_mw": 312000, "temp": 61,
 *              "sm_clock": 1980, "energy_mj": 123456, "minor": 0,
 *              "unsupported": ["power", "energy"]}]}
 *
 * A figure named in "unsupported" answers NVML_ERROR_NOT_SUPPORTED (3),
 * as drivers do for a sensor a board lacks. Every call is counted in the
 * file LATHE_NVML_STANDIN_LOG names (one line per call), when set. */
#include <jansson.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_UNKNOWN 999

typedef struct nvml_device_st *nvmlDevice_t;
typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
    unsigned int gpu, memory;
} nvmlUtilization_t;

static json_t *state;
static struct timespec state_mtime;
static int inits;

/* Reads the description again when the file changed. */
static void reload(void)
{
    const char *path = getenv("LATHE_NVML_STANDIN");
    struct stat st;
    if (!path || stat(path, &st) != 0) return;
    if (state && st.st_mtim.tv_sec == state_mtime.tv_sec && st.st_mtim.tv_nsec == state_mtime.tv_nsec)
        return;
    json_t *j = json_load_file(path, 0, NULL);
    if (!j) return; /* half written: keep the last one */
    json_decref(state);
    state = j;
    state_mtime = st.st_mtim;
}

static void log_call(const char *fn)
{
    const char *path = getenv("LATHE_NVML_STANDIN_LOG");
    if (!path) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    fprintf(f, "%s\n", fn);
    fclose(f);
}

static json_t *gpu_of(nvmlDevice_t d)
{
    uintptr_t i = (uintptr_t)d;
    if (i == 0) return NULL;
    return json_array_get(json_object_get(state, "gpus"), i - 1);
}

static int unsupported(const json_t *g, const char *what)
{
    const json_t *u = json_object_get(g, "unsupported");
    for (size_t i = 0; i < json_array_size(u); i++) {
        const char *s = json_string_value(json_array_get(u, i));
        if (s && !strcmp(s, what)) return 1;
    }
    return 0;
}

static int copy_string(const char *v, char *out, unsigned int len)
{
    if (!v) return NVML_ERROR_UNKNOWN;
    if (strlen(v) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, v, strlen(v) + 1);
    return NVML_SUCCESS;
}

/* The number at key of device d, for a figure `what`. */
static int number(nvmlDevice_t d, const char *what, const char *key, double *out)
{
    if (!inits) return NVML_ERROR_UNINITIALIZED;
    reload();
    json_t *g = gpu_of(d);
    if (!g) return NVML_ERROR_INVALID_ARGUMENT;
    if (unsupported(g, what)) return NVML_ERROR_NOT_SUPPORTED;
    json_t *v = json_object_get(g, key);
    if (!json_is_number(v)) return NVML_ERROR_NOT_SUPPORTED;
    *out = json_number_value(v);
    return NVML_SUCCESS;
}

int nvmlInit_v2(void)
{
    log_call("nvmlInit_v2");
    reload();
    if (!state || json_is_true(json_object_get(state, "fail_init"))) {
        if (!inits) { /* nothing holds it: lathe calls no nvmlShutdown after a failed init */
            json_decref(state);
            state = NULL;
        }
        return NVML_ERROR_UNKNOWN;
    }
    inits++;
    return NVML_SUCCESS;
}

int nvmlShutdown(void)
{
    log_call("nvmlShutdown");
    if (!inits) return NVML_ERROR_UNINITIALIZED;
    if (--inits == 0) {
        json_decref(state);
        state = NULL;
    }
    return NVML_SUCCESS;
}

const char *nvmlErrorString(int r)
{
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    default: return "Unknown Error";
    }
}

int nvmlSystemGetDriverVersion(char *out, unsigned int len)
{
    if (!inits) return NVML_ERROR_UNINITIALIZED;
    return copy_string(json_string_value(json_object_get(state, "driver")), out, len);
}

int nvmlDeviceGetCount_v2(unsigned int *n)
{
    log_call("nvmlDeviceGetCount_v2");
    if (!inits) return NVML_ERROR_UNINITIALIZED;
    reload();
    *n = (unsigned int)json_array_size(json_object_get(state, "gpus"));
    return NVML_SUCCESS;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d)
{
    if (!inits) return NVML_ERROR_UNINITIALIZED;
    reload();
    if (i >= json_array_size(json_object_get(state, "gpus"))) return NVML_ERROR_INVALID_ARGUMENT;
    *d = (nvmlDevice_t)(uintptr_t)(i + 1);
    return NVML_SUCCESS;
}

int nvmlDeviceGetName(nvmlDevice_t d, char *out, unsigned int len)
{
    json_t *g = inits ? gpu_of(d) : NULL;
    return g ? copy_string(json_string_value(json_object_get(g, "name")), out, len)
             : NVML_ERROR_INVALID_ARGUMENT;
}

int nvmlDeviceGetUUID(nvmlDevice_t d, char *out, unsigned int len)
{
    json_t *g = inits ? gpu_of(d) : NULL;
    return g ? copy_string(json_string_value(json_object_get(g, "uuid")), out, len)
             : NVML_ERROR_INVALID_ARGUMENT;
}

int nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
    log_call("nvmlDeviceGetMemoryInfo");
    double total, used = 0;
    int r = number(d, "memory", "memory", &total);
    if (r) return r;
    number(d, "memory", "used", &used);
    m->total = (unsigned long long)total;
    m->used = (unsigned long long)used;
    m->free = m->total - m->used;
    return NVML_SUCCESS;
}

int nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
    double gpu, mem = 0;
    int r = number(d, "util", "util", &gpu);
    if (r) return r;
    number(d, "util", "mem_util", &mem);
    u->gpu = (unsigned int)gpu;
    u->memory = (unsigned int)mem;
    return NVML_SUCCESS;
}

int nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw)
{
    double v;
    int r = number(d, "power", "power_mw", &v);
    if (!r) *mw = (unsigned int)v;
    return r;
}

int nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *t)
{
    if (sensor != 0) return NVML_ERROR_INVALID_ARGUMENT; /* NVML_TEMPERATURE_GPU */
    double v;
    int r = number(d, "temp", "temp", &v);
    if (!r) *t = (unsigned int)v;
    return r;
}

int nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int *mhz)
{
    if (type != 1) return NVML_ERROR_NOT_SUPPORTED; /* only NVML_CLOCK_SM */
    double v;
    int r = number(d, "sm_clock", "sm_clock", &v);
    if (!r) *mhz = (unsigned int)v;
    return r;
}

int nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *mj)
{
    double v;
    int r = number(d, "energy", "energy_mj", &v);
    if (!r) *mj = (unsigned long long)v;
    return r;
}

int nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned int *minor)
{
    double v;
    int r = number(d, "minor", "minor", &v);
    if (!r) *minor = (unsigned int)v;
    return r;
}
