/* kv_nvml: the few NVML calls the CUDA backend needs, loaded with dlopen
 * from the driver's libnvidia-ml.so.1 so the binary never needs NVML to start.
 * NVML reads device memory without creating a CUDA context, which is what
 * makes the context's own size measurable (the backend reads "used" before
 * and after creating the context). A MIG slice is found by its UUID, so its
 * own memory is read, not the parent GPU's. */
#ifndef KV_NVML_H
#define KV_NVML_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kv_nvml kv_nvml;

/* One NVML device: a whole GPU or a MIG slice. */
typedef struct kv_nvml_dev {
    void *handle;            /* nvmlDevice_t */
    void *parent;            /* the whole GPU of a MIG slice (== handle otherwise) */
    int is_mig;
    char how[96];            /* how it was found ("UUID MIG-...", "PCI bus id ...") */
} kv_nvml_dev;

/* Loads and initialises NVML. NULL with a one-line reason in why when the
 * library is absent or nvmlInit fails. */
kv_nvml *kv_nvml_open(char *why, size_t whylen);

/* Finds the device a CUDA device is: by each of the n UUIDs in turn
 * ("MIG-..." then "GPU-...", as nvidia-smi -L prints them), then by PCI bus
 * id ("0000:3b:00.0", as cudaDeviceGetPCIBusId writes it), which names the
 * whole GPU. 0, or -1 with why. */
int kv_nvml_find(kv_nvml *n, const char *const *uuids, int nuuids, const char *pci_bus_id, kv_nvml_dev *out,
                 char *why, size_t whylen);

/* Memory of a device (a MIG slice: its own): bytes used by all processes
 * and the total (nvidia-smi's figures). 0, or -1 with why. */
int kv_nvml_memory(kv_nvml *n, void *handle, uint64_t *used, uint64_t *total, char *why, size_t whylen);

/* The device's maximum memory clock (MHz) and memory bus width (bits). 0,
 * or -1 when NVML does not report them. */
int kv_nvml_memory_clock(kv_nvml *n, void *handle, unsigned *mhz, unsigned *bus_bits);

/* Whether MIG mode is on for a whole GPU: 1 on, 0 off, -1 unknown. */
int kv_nvml_mig_mode(kv_nvml *n, void *handle);

/* Shuts NVML down and unloads it. NULL is fine. */
void kv_nvml_close(kv_nvml *n);

#ifdef __cplusplus
}
#endif

#endif
