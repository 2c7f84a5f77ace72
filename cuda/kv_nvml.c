/* kv_nvml: NVML through dlopen (see kv_nvml.h). The declarations mirror
 * nvml.h (NVML API v2 names), which the toolkit does not always ship. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_nvml.h"

typedef int nvml_return;              /* nvmlReturn_t: 0 = NVML_SUCCESS */
typedef struct nvml_device *nvml_device;
typedef struct nvml_memory {          /* nvmlMemory_t (v1) */
    unsigned long long total, free, used;
} nvml_memory;
enum { NVML_CLOCK_MEM = 2 };          /* nvmlClockType_t */

struct kv_nvml {
    void *lib;
    nvml_return (*init)(void);
    nvml_return (*shutdown)(void);
    const char *(*error_string)(nvml_return);
    nvml_return (*by_pci)(const char *, nvml_device *);
    nvml_return (*by_uuid)(const char *, nvml_device *);
    nvml_return (*memory)(nvml_device, nvml_memory *);
    nvml_return (*is_mig)(nvml_device, unsigned int *);
    nvml_return (*mig_parent)(nvml_device, nvml_device *);
    nvml_return (*mig_mode)(nvml_device, unsigned int *, unsigned int *);
    nvml_return (*max_clock)(nvml_device, int, unsigned int *);
    nvml_return (*bus_width)(nvml_device, unsigned int *);
};

static const char *nv_err(const kv_nvml *n, nvml_return rc)
{
    return n->error_string ? n->error_string(rc) : "error";
}

/* POSIX guarantees a data pointer from dlsym converts to a function pointer. */
#define LOAD(field, sym) (*(void **)&n->field = dlsym(lib, sym))

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
    LOAD(init, "nvmlInit_v2");
    LOAD(shutdown, "nvmlShutdown");
    LOAD(error_string, "nvmlErrorString");
    LOAD(by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
    LOAD(by_uuid, "nvmlDeviceGetHandleByUUID");
    LOAD(memory, "nvmlDeviceGetMemoryInfo");
    /* Optional (older drivers lack the MIG calls): checked where used. */
    LOAD(is_mig, "nvmlDeviceIsMigDeviceHandle");
    LOAD(mig_parent, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle");
    LOAD(mig_mode, "nvmlDeviceGetMigMode");
    LOAD(max_clock, "nvmlDeviceGetMaxClockInfo");
    LOAD(bus_width, "nvmlDeviceGetMemoryBusWidth");
    if (!n->init || !n->shutdown || !n->by_pci || !n->memory) {
        snprintf(why, whylen, "NVML lacks the functions kvlab needs");
        dlclose(lib);
        free(n);
        return NULL;
    }
    nvml_return rc = n->init();
    if (rc != 0) {
        snprintf(why, whylen, "nvmlInit failed: %s", nv_err(n, rc));
        dlclose(lib);
        free(n);
        return NULL;
    }
    return n;
}

int kv_nvml_find(kv_nvml *n, const char *const *uuids, int nuuids, const char *pci_bus_id, kv_nvml_dev *out,
                 char *why, size_t whylen)
{
    memset(out, 0, sizeof *out);
    nvml_device dev = NULL;
    nvml_return rc = -1;
    for (int i = 0; n->by_uuid && i < nuuids && rc != 0; i++) {
        if (!uuids[i] || !uuids[i][0])
            continue;
        rc = n->by_uuid(uuids[i], &dev);
        if (rc == 0)
            snprintf(out->how, sizeof out->how, "UUID %.60s", uuids[i]);
    }
    if (rc != 0 && pci_bus_id && pci_bus_id[0]) {
        rc = n->by_pci(pci_bus_id, &dev);
        if (rc == 0)
            snprintf(out->how, sizeof out->how, "PCI bus id %.40s", pci_bus_id);
    }
    if (rc != 0) {
        snprintf(why, whylen, "NVML cannot find GPU %s: %s", pci_bus_id ? pci_bus_id : "?", nv_err(n, rc));
        return -1;
    }
    out->handle = dev;
    out->parent = dev;
    unsigned int mig = 0;
    if (n->is_mig && n->is_mig(dev, &mig) == 0 && mig) {
        out->is_mig = 1;
        nvml_device p = NULL;
        if (n->mig_parent && n->mig_parent(dev, &p) == 0)
            out->parent = p;
        else
            out->parent = NULL;
    }
    return 0;
}

int kv_nvml_memory(kv_nvml *n, void *handle, uint64_t *used, uint64_t *total, char *why, size_t whylen)
{
    nvml_memory m;
    nvml_return rc = handle ? n->memory((nvml_device)handle, &m) : -1;
    if (rc != 0) {
        snprintf(why, whylen, "NVML cannot read the device's memory: %s", handle ? nv_err(n, rc) : "no device");
        return -1;
    }
    *used = m.used;
    *total = m.total;
    return 0;
}

int kv_nvml_memory_clock(kv_nvml *n, void *handle, unsigned *mhz, unsigned *bus_bits)
{
    unsigned int c = 0, b = 0;
    if (!handle || !n->max_clock || !n->bus_width || n->max_clock((nvml_device)handle, NVML_CLOCK_MEM, &c) != 0 ||
        n->bus_width((nvml_device)handle, &b) != 0 || !c || !b)
        return -1;
    *mhz = c;
    *bus_bits = b;
    return 0;
}

int kv_nvml_mig_mode(kv_nvml *n, void *handle)
{
    unsigned int cur = 0, pending = 0;
    if (!handle || !n->mig_mode || n->mig_mode((nvml_device)handle, &cur, &pending) != 0)
        return -1;
    return cur ? 1 : 0;
}

void kv_nvml_close(kv_nvml *n)
{
    if (!n) return;
    n->shutdown();
    dlclose(n->lib);
    free(n);
}
