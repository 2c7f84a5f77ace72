/* kv_nvml: NVML through dlopen (see kv_nvml.h). The declarations mirror
 * nvml.h (NVML API v2 names), which the toolkit does not always ship. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "kv_nvml.h"

typedef int nvml_return;              /* nvmlReturn_t: 0 = NVML_SUCCESS */
typedef struct nvml_device *nvml_device;
typedef struct nvml_memory {          /* nvmlMemory_t (v1) */
    unsigned long long total, free, used;
} nvml_memory;

struct kv_nvml {
    void *lib;
    nvml_return (*init)(void);
    nvml_return (*shutdown)(void);
    const char *(*error_string)(nvml_return);
    nvml_return (*by_pci)(const char *, nvml_device *);
    nvml_return (*memory)(nvml_device, nvml_memory *);
};

kv_nvml *kv_nvml_open(char *why, size_t whylen)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(why, whylen, "NVML (libnvidia-ml.so.1) not found");
        return NULL;
    }
    kv_nvml *n = calloc(1, sizeof *n);
    if (!n) {
        dlclose(lib);
        snprintf(why, whylen, "out of host memory");
        return NULL;
    }
    n->lib = lib;
    /* POSIX guarantees a data pointer from dlsym converts to a function pointer. */
    *(void **)&n->init = dlsym(lib, "nvmlInit_v2");
    *(void **)&n->shutdown = dlsym(lib, "nvmlShutdown");
    *(void **)&n->error_string = dlsym(lib, "nvmlErrorString");
    *(void **)&n->by_pci = dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    *(void **)&n->memory = dlsym(lib, "nvmlDeviceGetMemoryInfo");
    if (!n->init || !n->shutdown || !n->by_pci || !n->memory) {
        snprintf(why, whylen, "NVML lacks the functions kvlab needs");
        dlclose(lib);
        free(n);
        return NULL;
    }
    nvml_return rc = n->init();
    if (rc != 0) {
        snprintf(why, whylen, "nvmlInit failed: %s", n->error_string ? n->error_string(rc) : "error");
        dlclose(lib);
        free(n);
        return NULL;
    }
    return n;
}

int kv_nvml_memory(kv_nvml *n, const char *pci_bus_id, uint64_t *used, uint64_t *total,
                   char *why, size_t whylen)
{
    nvml_device dev;
    nvml_return rc = n->by_pci(pci_bus_id, &dev);
    nvml_memory m;
    if (rc == 0) rc = n->memory(dev, &m);
    if (rc != 0) {
        snprintf(why, whylen, "NVML cannot read GPU %s: %s", pci_bus_id,
                 n->error_string ? n->error_string(rc) : "error");
        return -1;
    }
    *used = m.used;
    *total = m.total;
    return 0;
}

void kv_nvml_close(kv_nvml *n)
{
    if (!n) return;
    n->shutdown();
    dlclose(n->lib);
    free(n);
}
