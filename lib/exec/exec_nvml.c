/* exec_nvml.c: NVIDIA's management library (NVML), loaded at run time with
 * dlopen so that lathe builds and runs without the driver. It lists this
 * machine's GPUs (exec_inventory_local) and samples them (exec_nvml_sample:
 * utilisation, memory, power, temperature, SM clock, energy), which the
 * server exports under DCGM exporter's names and keeps per job.
 *
 * The library is libnvidia-ml.so.1 found the way the dynamic loader finds
 * any library (LD_LIBRARY_PATH, ld.so.cache), or the file LATHE_NVML_LIBRARY
 * names (a driver installed outside the loader's path; the tests' stand-in).
 *
 * Types and signatures from NVIDIA's nvml.h (NVML API Reference):
 * nvmlInit_v2, nvmlShutdown, nvmlDeviceGetCount_v2,
 * nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetName, nvmlDeviceGetUUID,
 * nvmlDeviceGetMemoryInfo (total, free, used: unsigned long long bytes),
 * nvmlSystemGetDriverVersion, nvmlErrorString; and for samples
 * nvmlDeviceGetUtilizationRates (gpu, memory: unsigned int percent over the
 * driver's last sample period), nvmlDeviceGetPowerUsage (milliwatts),
 * nvmlDeviceGetTemperature (sensor NVML_TEMPERATURE_GPU = 0, degrees C),
 * nvmlDeviceGetClockInfo (NVML_CLOCK_SM = 1, MHz),
 * nvmlDeviceGetTotalEnergyConsumption (millijoules since the driver
 * loaded), nvmlDeviceGetMinorNumber (the N of /dev/nvidiaN). NVML_SUCCESS
 * is 0; name and UUID buffers of 96 bytes (NVML_DEVICE_NAME_V2_BUFFER_SIZE,
 * NVML_DEVICE_UUID_V2_BUFFER_SIZE). A function a driver lacks, or that
 * answers NVML_ERROR_NOT_SUPPORTED, leaves its figure unknown (NAN). */
#include "exec_internal.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int nvml_ret;
typedef struct nvml_device_st *nvml_device;
typedef struct nvml_memory {
    unsigned long long total, free, used;
} nvml_memory;
typedef struct nvml_utilization {
    unsigned int gpu, memory;
} nvml_utilization;

enum { NVML_TEMPERATURE_GPU = 0, NVML_CLOCK_SM = 1 };

struct exec_nvml {
    void *lib;
    nvml_ret (*init)(void);
    nvml_ret (*shutdown)(void);
    nvml_ret (*count)(unsigned int *);
    nvml_ret (*handle)(unsigned int, nvml_device *);
    nvml_ret (*name)(nvml_device, char *, unsigned int);
    nvml_ret (*uuid)(nvml_device, char *, unsigned int);
    nvml_ret (*memory)(nvml_device, nvml_memory *);
    nvml_ret (*driver)(char *, unsigned int);
    const char *(*error)(nvml_ret);
    /* samples: each may be NULL (an older driver) */
    nvml_ret (*util)(nvml_device, nvml_utilization *);
    nvml_ret (*power)(nvml_device, unsigned int *);
    nvml_ret (*temp)(nvml_device, int, unsigned int *);
    nvml_ret (*clock)(nvml_device, int, unsigned int *);
    nvml_ret (*energy)(nvml_device, unsigned long long *);
    nvml_ret (*minor)(nvml_device, unsigned int *);
    unsigned int n;
};

/* dlsym into a typed pointer without a cast between object and function
 * pointers (which ISO C leaves undefined). */
#define NVML_SYM(a, field, sym) (*(void **)(&(a)->field) = dlsym((a)->lib, sym))

static const char *nvml_err(const exec_nvml *a, nvml_ret r)
{
    return a->error ? a->error(r) : "NVML error";
}

exec_nvml *exec_nvml_open(char *note, size_t notesz)
{
    const char *path = getenv("LATHE_NVML_LIBRARY");
    if (!path || !*path) path = "libnvidia-ml.so.1";
    exec_nvml *a = xcalloc(1, sizeof *a);
    a->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!a->lib) {
        snprintf(note, notesz, "no NVIDIA driver: %s not found", path);
        free(a);
        return NULL;
    }
    NVML_SYM(a, init, "nvmlInit_v2");
    NVML_SYM(a, shutdown, "nvmlShutdown");
    NVML_SYM(a, count, "nvmlDeviceGetCount_v2");
    NVML_SYM(a, handle, "nvmlDeviceGetHandleByIndex_v2");
    NVML_SYM(a, name, "nvmlDeviceGetName");
    NVML_SYM(a, uuid, "nvmlDeviceGetUUID");
    NVML_SYM(a, memory, "nvmlDeviceGetMemoryInfo");
    NVML_SYM(a, driver, "nvmlSystemGetDriverVersion");
    NVML_SYM(a, error, "nvmlErrorString");
    NVML_SYM(a, util, "nvmlDeviceGetUtilizationRates");
    NVML_SYM(a, power, "nvmlDeviceGetPowerUsage");
    NVML_SYM(a, temp, "nvmlDeviceGetTemperature");
    NVML_SYM(a, clock, "nvmlDeviceGetClockInfo");
    NVML_SYM(a, energy, "nvmlDeviceGetTotalEnergyConsumption");
    NVML_SYM(a, minor, "nvmlDeviceGetMinorNumber");
    if (!a->init || !a->shutdown || !a->count || !a->handle || !a->name || !a->uuid ||
        !a->memory) {
        snprintf(note, notesz, "%s lacks the NVML functions lathe uses", path);
        dlclose(a->lib);
        free(a);
        return NULL;
    }
    nvml_ret r = a->init();
    if (r != 0) {
        snprintf(note, notesz, "NVML did not start: %s", nvml_err(a, r));
        dlclose(a->lib);
        free(a);
        return NULL;
    }
    r = a->count(&a->n);
    if (r != 0) {
        snprintf(note, notesz, "NVML cannot count GPUs: %s", nvml_err(a, r));
        exec_nvml_close(a);
        return NULL;
    }
    char version[80] = "";
    if (a->n == 0) snprintf(note, notesz, "the NVIDIA driver reports no GPU");
    else if (a->driver && a->driver(version, sizeof version) == 0)
        snprintf(note, notesz, "NVIDIA driver %s", version);
    else snprintf(note, notesz, "NVML");
    return a;
}

void exec_nvml_close(exec_nvml *a)
{
    if (!a) return;
    a->shutdown();
    dlclose(a->lib);
    free(a);
}

size_t exec_nvml_count(const exec_nvml *a)
{
    return a ? a->n : 0;
}

bool exec_nvml_describe(const exec_nvml *a, unsigned int i, const char *host, exec_gpu *g,
                        char *note, size_t notesz)
{
    nvml_device d;
    char name[96] = "", uuid[96] = "";
    nvml_memory mem = {0, 0, 0};
    nvml_ret r = a->handle(i, &d);
    if (r == 0) r = a->name(d, name, sizeof name);
    if (r == 0) r = a->uuid(d, uuid, sizeof uuid);
    if (r == 0) r = a->memory(d, &mem);
    if (r != 0) {
        snprintf(note, notesz, "NVML cannot describe GPU %u: %s", i, nvml_err(a, r));
        return false;
    }
    *g = (exec_gpu){xstrdup(host), (int)i, xstrdup(uuid), xstrdup(uuid), xstrdup(name),
                    (double)mem.total, false};
    return true;
}

/* One device's figures; false when NVML cannot even find it. */
static bool sample_one(const exec_nvml *a, unsigned int i, exec_gpu_sample *s)
{
    memset(s, 0, sizeof *s);
    s->index = (int)i;
    s->minor = -1;
    s->util = s->mem_util = s->mem_used = s->mem_total = s->power = s->temp = s->sm_clock =
        s->energy = NAN;
    nvml_device d;
    if (a->handle(i, &d) != 0) return false;
    nvml_memory mem;
    if (a->memory(d, &mem) == 0) {
        s->mem_used = (double)mem.used;
        s->mem_total = (double)mem.total;
    }
    nvml_utilization u;
    if (a->util && a->util(d, &u) == 0) {
        s->util = u.gpu;
        s->mem_util = u.memory;
    }
    unsigned int v;
    if (a->power && a->power(d, &v) == 0) s->power = v / 1000.0;
    if (a->temp && a->temp(d, NVML_TEMPERATURE_GPU, &v) == 0) s->temp = v;
    if (a->clock && a->clock(d, NVML_CLOCK_SM, &v) == 0) s->sm_clock = v;
    if (a->minor && a->minor(d, &v) == 0) s->minor = (int)v;
    unsigned long long e;
    if (a->energy && a->energy(d, &e) == 0) s->energy = (double)e / 1000.0;
    s->ok = true;
    return true;
}

size_t exec_nvml_sample(const exec_nvml *a, exec_gpu_sample *out, size_t max)
{
    size_t n = 0;
    for (unsigned int i = 0; a && i < a->n && n < max; i++)
        if (sample_one(a, i, &out[n])) n++;
    return n;
}
