/* mon_fields.c: the GPU metrics under DCGM exporter's names (the field
 * names and units of NVIDIA's dcgm-exporter, whose default counters use
 * these; the help texts are ours). */
#include "monitor.h"

const mon_field mon_dcgm_fields[MON_N_DCGM] = {
    [MON_GPU_UTIL] = {"DCGM_FI_DEV_GPU_UTIL", "gauge",
                      "GPU utilization (in %): the time a kernel ran over the driver's last period."},
    [MON_MEM_COPY_UTIL] = {"DCGM_FI_DEV_MEM_COPY_UTIL", "gauge",
                           "Memory utilization (in %): the time memory was read or written."},
    [MON_FB_USED] = {"DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."},
    [MON_FB_FREE] = {"DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."},
    [MON_POWER_USAGE] = {"DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."},
    [MON_GPU_TEMP] = {"DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."},
    [MON_SM_CLOCK] = {"DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."},
    [MON_ENERGY] = {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
                    "Total energy consumption since the driver loaded (in mJ)."},
};
