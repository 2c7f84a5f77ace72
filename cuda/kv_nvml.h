/* kv_nvml: the few NVML calls the CUDA backend needs, loaded with dlopen
 * from the driver's libnvidia-ml.so.1 so the binary never needs NVML to start.
 * NVML reads device memory without creating a CUDA context, which is what
 * makes the context's own size measurable (kv_cuda_open reads "used" before
 * and after creating the context). */
#ifndef KV_NVML_H
#define KV_NVML_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kv_nvml kv_nvml;

/* Loads and initialises NVML. NULL with a one-line reason in why when the
 * library is absent or nvmlInit fails. */
kv_nvml *kv_nvml_open(char *why, size_t whylen);

/* Device memory of the GPU at a PCI bus id ("0000:3b:00.0", as
 * cudaDeviceGetPCIBusId writes it): bytes used by all processes and the
 * total NVML reports (nvidia-smi's figures). 0 on success, -1 with why. */
int kv_nvml_memory(kv_nvml *n, const char *pci_bus_id, uint64_t *used, uint64_t *total,
                   char *why, size_t whylen);

/* Shuts NVML down and unloads it. NULL is fine. */
void kv_nvml_close(kv_nvml *n);

#ifdef __cplusplus
}
#endif

#endif
