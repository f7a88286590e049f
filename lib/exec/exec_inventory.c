/* exec_inventory.c: what the local executor can run on. This machine's
 * NVIDIA GPUs through NVML, loaded at run time with dlopen so that lathe
 * builds and runs without the driver (no library or no GPU is an empty
 * inventory, not an error); or virtual GPUs from a Cluster spec, for demos
 * and tests on a machine without GPUs; plus CPU slots for CPU-only jobs. */
#include "exec_internal.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- NVML (types and signatures from NVIDIA's nvml.h, NVML API
 * Reference: nvmlInit_v2, nvmlDeviceGetCount_v2,
 * nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetName, nvmlDeviceGetUUID,
 * nvmlDeviceGetMemoryInfo, nvmlSystemGetDriverVersion, nvmlErrorString,
 * nvmlShutdown; NVML_SUCCESS is 0; name and UUID buffers of 96 bytes
 * (NVML_DEVICE_NAME_V2_BUFFER_SIZE, NVML_DEVICE_UUID_V2_BUFFER_SIZE)) ---- */
typedef int nvml_ret;
typedef struct nvml_device_st *nvml_device;
typedef struct nvml_memory {
    unsigned long long total, free, used;
} nvml_memory;

typedef struct nvml_api {
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
} nvml_api;

static bool nvml_load(nvml_api *a, char *note, size_t notesz)
{
    memset(a, 0, sizeof *a);
    a->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!a->lib) {
        snprintf(note, notesz, "no NVIDIA driver: libnvidia-ml.so.1 not found");
        return false;
    }
    a->init = (nvml_ret(*)(void))dlsym(a->lib, "nvmlInit_v2");
    a->shutdown = (nvml_ret(*)(void))dlsym(a->lib, "nvmlShutdown");
    a->count = (nvml_ret(*)(unsigned int *))dlsym(a->lib, "nvmlDeviceGetCount_v2");
    a->handle = (nvml_ret(*)(unsigned int, nvml_device *))dlsym(a->lib,
                                                                 "nvmlDeviceGetHandleByIndex_v2");
    a->name = (nvml_ret(*)(nvml_device, char *, unsigned int))dlsym(a->lib, "nvmlDeviceGetName");
    a->uuid = (nvml_ret(*)(nvml_device, char *, unsigned int))dlsym(a->lib, "nvmlDeviceGetUUID");
    a->memory = (nvml_ret(*)(nvml_device, nvml_memory *))dlsym(a->lib, "nvmlDeviceGetMemoryInfo");
    a->driver = (nvml_ret(*)(char *, unsigned int))dlsym(a->lib, "nvmlSystemGetDriverVersion");
    a->error = (const char *(*)(nvml_ret))dlsym(a->lib, "nvmlErrorString");
    if (!a->init || !a->shutdown || !a->count || !a->handle || !a->name || !a->uuid ||
        !a->memory) {
        snprintf(note, notesz, "libnvidia-ml.so.1 lacks the NVML functions lathe uses");
        dlclose(a->lib);
        a->lib = NULL;
        return false;
    }
    return true;
}

static const char *nvml_err(const nvml_api *a, nvml_ret r)
{
    return a->error ? a->error(r) : "NVML error";
}

static void gpu_push(exec_inventory *inv, const exec_gpu *g)
{
    inv->gpus = xrealloc(inv->gpus, (inv->n_gpus + 1) * sizeof *inv->gpus);
    inv->gpus[inv->n_gpus++] = *g;
}

/* Adds device i; false (with a note) when NVML cannot describe it. */
static bool nvml_device_add(const nvml_api *a, unsigned int i, const char *host,
                            exec_inventory *inv)
{
    nvml_device d;
    char name[96] = "", uuid[96] = "";
    nvml_memory mem = {0, 0, 0};
    nvml_ret r = a->handle(i, &d);
    if (r == 0) r = a->name(d, name, sizeof name);
    if (r == 0) r = a->uuid(d, uuid, sizeof uuid);
    if (r == 0) r = a->memory(d, &mem);
    if (r != 0) {
        snprintf(inv->note, sizeof inv->note, "NVML cannot describe GPU %u: %s", i,
                 nvml_err(a, r));
        return false;
    }
    exec_gpu g = {xstrdup(host), (int)i, xstrdup(uuid), xstrdup(uuid), xstrdup(name),
                  (double)mem.total, false};
    gpu_push(inv, &g);
    return true;
}

static void nvml_scan(nvml_api *a, exec_inventory *inv)
{
    nvml_ret r = a->init();
    if (r != 0) {
        snprintf(inv->note, sizeof inv->note, "NVML did not start: %s", nvml_err(a, r));
        return;
    }
    unsigned int n = 0;
    r = a->count(&n);
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    if (r != 0) snprintf(inv->note, sizeof inv->note, "NVML cannot count GPUs: %s", nvml_err(a, r));
    for (unsigned int i = 0; r == 0 && i < n; i++)
        if (!nvml_device_add(a, i, host, inv)) break;
    char version[80] = "";
    if (inv->n_gpus) {
        snprintf(inv->source, sizeof inv->source, "nvml");
        if (a->driver && a->driver(version, sizeof version) == 0)
            snprintf(inv->note, sizeof inv->note, "NVIDIA driver %s", version);
    } else if (r == 0 && !inv->note[0]) {
        snprintf(inv->note, sizeof inv->note, "the NVIDIA driver reports no GPU");
    }
    a->shutdown();
}

static int online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

void exec_inventory_local(exec_inventory *inv)
{
    memset(inv, 0, sizeof *inv);
    snprintf(inv->source, sizeof inv->source, "none");
    inv->cpu_slots = online_cpus();
    nvml_api a;
    if (!nvml_load(&a, inv->note, sizeof inv->note)) return;
    nvml_scan(&a, inv);
    dlclose(a.lib);
}

void exec_inventory_from_cluster(const spec_cluster *c, exec_inventory *inv)
{
    memset(inv, 0, sizeof *inv);
    snprintf(inv->source, sizeof inv->source, "cluster");
    double cpus = 0;
    for (size_t i = 0; i < c->n_nodes; i++) {
        const spec_node *n = &c->nodes[i];
        cpus += n->cpus;
        const spec_gpu_type *t = n->gpu_type ? spec_cluster_gpu_type(c, n->gpu_type) : NULL;
        for (int k = 0; k < n->gpus; k++) {
            exec_gpu g = {xstrdup(n->name), k, xasprintf("%d", k), NULL,
                          xstrdup(n->gpu_type ? n->gpu_type : "GPU"), t ? t->memory : 0, true};
            gpu_push(inv, &g);
        }
    }
    inv->cpu_slots = cpus >= 1 ? (int)cpus : online_cpus();
    snprintf(inv->note, sizeof inv->note, "%zu virtual GPUs on %zu nodes of %s; the work runs on "
                                          "this machine's CPUs",
             inv->n_gpus, c->n_nodes, c->name ? c->name : c->file ? c->file : "the cluster");
}

void exec_inventory_free(exec_inventory *inv)
{
    for (size_t i = 0; i < inv->n_gpus; i++) {
        free(inv->gpus[i].node);
        free(inv->gpus[i].id);
        free(inv->gpus[i].uuid);
        free(inv->gpus[i].name);
    }
    free(inv->gpus);
    memset(inv, 0, sizeof *inv);
}
