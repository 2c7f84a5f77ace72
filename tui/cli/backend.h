/* Which device backend the program uses: the GPU backend when this build
 * has one (engine/kv_device_reg.c) and a device answers, else the host
 * backend, said once on stderr. Everything goes through the device
 * interface (engine/kv_device.h): nothing here knows CUDA. */
#ifndef KVLAB_BACKEND_H
#define KVLAB_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kv_device.h"
#include "kv_args.h"
#include "kv_gpu.h"
#include "kv_plan.h"

/* 1 when a GPU backend was compiled in. */
int kvlab_backend_cuda_built(void);

/* Opens the CUDA backend for num_ranks tensor-parallel ranks, placeholders
 * on or off (--no-placeholders). Returns it, or NULL meaning "use the host
 * backend" (kv_engine_config.device = NULL makes the engine create one).
 * Says once per process on stderr which backend runs and why ("kvlab: no
 * CUDA device (<reason>); using the host backend"), and when ranks share
 * one card. The environment variable KVLAB_DEVICE=host skips CUDA quietly;
 * KVLAB_DEVICE=cuda makes a missing device an error: NULL with *failed = 1
 * and the reason in err. failed/err may be NULL. */
kv_device *kvlab_backend_open(int num_ranks, int placeholders, int *failed, char *err, size_t errlen);

/* The lesson app's backend: CUDA with placeholders for up to max_ranks
 * ranks (engines with tp <= max_ranks; ranks side by side when there are
 * fewer GPUs), or NULL for the host backend, said once like
 * kvlab_backend_open. Lesson engines that do not fit the real card fall
 * back to the host backend themselves (lessons/host/lsn_server.c). */
kv_device *kvlab_backend_open_app(int max_ranks);

/* The real card, for `--gpu this`: card 0 of the GPU backend as measured
 * once in this process (kv_device_driver_card), as a catalogue-style entry
 * in *out: id "this", the device name, the total cudaMemGetInfo reports, and
 * bandwidth/fp8 from the matching catalogue entry of cat (may be NULL; a MIG
 * slice matches none). *context_bytes = the measured CUDA context (-1 when
 * NVML could not measure it). Returns 0, or -1 with the reason in err (no
 * backend built, no device). */
int kvlab_backend_this_gpu(const kv_gpu_catalog *cat, kv_gpu *out, double *context_bytes,
                           char *err, size_t errlen);


/* ---- `kvlab serve` on a real card ---------------------------------------- */


/* kvlab's device flags for serve, which vLLM does not have. */
typedef struct kvlab_serve_dev {
    int allocate;        /* --allocate: hold the plan's memory on the GPU */
    int placeholders;    /* 1, or 0 with --no-placeholders (pool only; for a shared card) */
    double hold_s;       /* --hold S: keep it S seconds (inf: until a signal); -1: until Enter on a
                            terminal, else not at all */
    int on_this_gpu;     /* the plan is for the real card (--gpu this, or the default when one answers) */
    int64_t context_bytes; /* the measured CUDA context, -1 when not measured */
    char note[2048];     /* lines (each ending in \n) to show with serve's notes */
} kvlab_serve_dev;

/* What --allocate did. */
typedef struct kvlab_alloc_result {
    int attempted;       /* 1 when --allocate ran */
    int ok;              /* 1: every term and pool is held */
    int oom;             /* 1: a real CUDA out-of-memory stopped it */
    char error[512];     /* the OOM line or other failure */
    char backend[16];    /* "cuda", or "host" (no GPU: the memory is simulated) */
    char device_name[128];
    int num_ranks;
    int shared_card;     /* ranks side by side on one device */
    double scale;        /* 1 = as planned; < 1 when the simulated card is bigger than the real one */
    int64_t num_blocks;  /* blocks in each rank's pool as allocated */
    double held_bytes;   /* kvlab's allocations on rank 0's device (every rank placed there) */
    double card_bytes;   /* rank 0's device total (the host backend: the simulated card's) */
    double host_bytes;   /* the host backend: the fingerprint mappings of every rank (the host
                            memory the "held" bytes really take), -1 on a GPU */
    double context_bytes;/* measured context of rank 0's device, -1 unknown */
    double used_bytes;   /* what rank 0's device shows kvlab using: context + the drop in free memory
                            since the context was created (cudaMemGetInfo), -1 unknown */
    long pid;            /* this process, as nvidia-smi lists it */
    double pool_alloc_ms;/* rank 0's one cudaMalloc for the pool */
    double write_gbps;   /* K/V written into the whole pool of rank 0 */
    double write_gib;
    int64_t write_tokens;
    int64_t mismatches;  /* gather-verify of that write: 0 = every block holds its bytes */
} kvlab_alloc_result;

/* Takes --allocate, --no-placeholders and --hold S out of argv[0..argc) (in
 * place) and fills *o. S is a number of seconds >= 0 in strtod's decimal
 * forms, or inf/infinity (hold until a signal); NaN, a negative number, hex
 * and trailing text are refused. Returns the new argc, or -1 with err. */
int kvlab_serve_dev_flags(int argc, char **argv, kvlab_serve_dev *o, char *err, size_t errlen);

/* `--gpu this`, and the default card when no --gpu / --gpu-memory-gib was
 * given and a CUDA device answers: fills *out with the real card (see
 * kvlab_backend_this_gpu) and sets a->cuda_context_gib to the measured
 * context and a->gpu_used_gib to what other processes hold, unless the user
 * set them. Returns 1 when the plan should use *out, 0 when not (no device
 * and --gpu was not "this"), -1 with err when --gpu this has no device. */
int kvlab_serve_pick_gpu(kv_args *a, const kv_gpu_catalog *cat, kvlab_serve_dev *o, kv_gpu *out,
                         char *err, size_t errlen);

/* After kv_plan_compute: marks the CUDA context term as measured. */
void kvlab_serve_mark_plan(kv_plan *p, const kvlab_serve_dev *o);

/* --allocate: opens the GPU backend for the plan's ranks (the host backend,
 * simulating the plan's card, when there is none), reserves each rank's
 * weights / activation / CUDA-graph / NCCL terms (placeholders) and its KV
 * pool, writes K/V into every block (up to 4M tokens) and reads them back.
 * A planned card larger than the real one, or ranks sharing one, scale
 * every term down to fit (kv_device_fit_scale) and say so. Returns the
 * device holding the memory (destroy it after kvlab_serve_hold), or NULL
 * with *r saying why (r->oom for a real OOM). */
kv_device *kvlab_serve_allocate(const kv_plan *p, const kvlab_serve_dev *o, kvlab_alloc_result *r);

/* Prints what --allocate did (text, to f). */
void kvlab_serve_print_alloc(FILE *f, const kvlab_alloc_result *r);

/* Adds r as a "device" object to a serve --json object (a cJSON *). */
void kvlab_serve_json_alloc(void *json_object, const kvlab_alloc_result *r);

/* Keeps the memory held for o->hold_s seconds (any number: it sleeps, in
 * steps, until the deadline; inf until a signal) or, with no --hold on a
 * terminal, until Enter; SIGINT, SIGTERM and SIGHUP end the hold early so
 * the caller releases the memory and exits. Says so on stderr. Returns the
 * signal that ended it, or 0. */
int kvlab_serve_hold(const kvlab_serve_dev *o, const kvlab_alloc_result *r);

/* Seconds a --hold value means: >= 0 (inf allowed), or -1 with err when it
 * is not a number kvlab accepts (see kvlab_serve_dev_flags). */
double kvlab_parse_hold(const char *v, char *err, size_t errlen);

#endif
