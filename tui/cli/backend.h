/* Which device backend the program uses (DESIGN.md, "Device backends"):
 * the CUDA backend when this build has it and a device answers, else the
 * host backend, said once on stderr. engine/ never knows CUDA; this is the
 * only place outside cuda/ that does (through KVLAB_HAVE_CUDA). */
#ifndef KVLAB_BACKEND_H
#define KVLAB_BACKEND_H

#include <stddef.h>

#include "kv_device.h"
#include "kv_gpu.h"

/* 1 when the CUDA backend was compiled in. */
int kvlab_backend_cuda_built(void);

/* Opens the CUDA backend for num_ranks tensor-parallel ranks, placeholders
 * on or off (--no-placeholders). Returns it, or NULL meaning "use the host
 * backend" (kv_engine_config.device = NULL makes the engine create one).
 * Says once per process on stderr which backend runs and why ("kvlab: no
 * CUDA device (<reason>); using the host backend"), and when ranks share
 * one card. The environment variable KVLAB_DEVICE=host skips CUDA;
 * KVLAB_DEVICE=cuda makes a missing device an error: NULL with *failed = 1
 * and the reason in err. failed/err may be NULL. */
kv_device *kvlab_backend_open(int num_ranks, int placeholders, int *failed, char *err, size_t errlen);

/* The real card, for `--gpu this`: opens CUDA quietly (1 rank) and fills *out
 * as a catalogue-style entry: id "this", the device name, the total
 * cudaMemGetInfo reports, and bandwidth/fp8 from the matching catalogue entry
 * of cat (may be NULL). *context_bytes = the measured CUDA context (-1 when
 * NVML could not measure it). The device is closed again. Returns 0, or -1
 * with the reason in err (no backend built, no device). */
int kvlab_backend_this_gpu(const kv_gpu_catalog *cat, kv_gpu *out, double *context_bytes,
                           char *err, size_t errlen);

#endif
