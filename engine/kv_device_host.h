/* kv_device_host: the device interface (kv_device.h) on host memory.
 *
 * Each rank's KV pool is one fingerprint (8 bytes) per slot in an anonymous
 * mapping that the kernel backs lazily, so only pages actually written cost
 * RAM: the 8B-on-H100 pool (~400k tokens) is ~3 MiB of address space. A slot
 * written with (token id, position, parent key) stores kv_fingerprint(token,
 * position, layer 0, the rank's first global KV head, parent): one write
 * always fills every layer and KV head of the rank at once, so that one
 * value stands for all of them, and a read-back that finds another value
 * counts layers x heads x kv_factor mismatches. Two ranks hold different
 * heads, so they store different values (a rank mix-up reads back wrong).
 * Plan terms (weights, activation, ...) are bookkeeping only: the host
 * reports the simulated card's total and total - held as free. Each rank is
 * its own simulated card. */
#ifndef KV_DEVICE_HOST_H
#define KV_DEVICE_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "kv_device.h"

/* Open a host backend serving num_ranks ranks (1..64), each a simulated GPU
 * of total_bytes (0 = unlimited: reserve never fails). NULL on bad
 * arguments or out of memory (message in err). Free with
 * d->ops->destroy(d). */
kv_device *kv_device_host_open(int num_ranks, uint64_t total_bytes, char *err, size_t errlen);

/* Bytes of the rank's fingerprint mapping (address space, not RSS). */
uint64_t kv_device_host_mapped_bytes(const kv_device *d, int rank);

/* The fingerprint stored for slot of rank (tests: what a rank holds), or 0
 * when there is no pool or the slot is outside it. */
uint64_t kv_device_host_peek(const kv_device *d, int rank, int64_t slot);

/* Overwrites what slot of rank holds (tests: a wrong share or a rank
 * mix-up, made on purpose). 0, or EINVAL outside the pool. */
int kv_device_host_poke(kv_device *d, int rank, int64_t slot, uint64_t value);

#endif
