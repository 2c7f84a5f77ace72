#include "kv_device_host.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "kv_util.h"

typedef struct host_rank {
    kv_pool_layout layout;
    uint64_t *fp;             /* one fingerprint per slot (mmap) */
    size_t map_bytes;
    uint64_t held;            /* reserved plan terms + pool bytes as a GPU would hold */
    uint64_t pool_bytes;
} host_rank;

typedef struct host_impl {
    uint64_t total;
    host_rank ranks[64];
} host_impl;

static host_impl *impl(kv_device *d) { return (host_impl *)d->impl; }

static int check_rank(kv_device *d, int rank, char *err, size_t errlen)
{
    if (rank < 0 || rank >= d->num_ranks)
        return kv_errf(err, errlen, KV_DEV_EINVAL, "rank %d out of range (0..%d)", rank, d->num_ranks - 1);
    return 0;
}

static int h_mem_info(kv_device *d, int rank, uint64_t *free_bytes, uint64_t *total_bytes, char *err,
                      size_t errlen)
{
    int rc = check_rank(d, rank, err, errlen);
    if (rc)
        return rc;
    host_impl *h = impl(d);
    uint64_t held = h->ranks[rank].held;
    *total_bytes = h->total;
    *free_bytes = h->total > held ? h->total - held : 0;
    return 0;
}

static int h_reserve(kv_device *d, int rank, const char *term, uint64_t bytes, char *err, size_t errlen)
{
    int rc = check_rank(d, rank, err, errlen);
    if (rc)
        return rc;
    host_impl *h = impl(d);
    host_rank *r = &h->ranks[rank];
    if (h->total && r->held + bytes > h->total)
        return kv_errf(err, errlen, KV_DEV_ENOMEM,
                       "CUDA out of memory (simulated). Tried to allocate %.2f GiB for %s on rank %d; "
                       "%.2f GiB of %.2f GiB already held",
                       kv_gib((double)bytes), term ? term : "?", rank, kv_gib((double)r->held),
                       kv_gib((double)h->total));
    r->held += bytes;
    return 0;
}

static void unmap_rank(host_rank *r)
{
    if (r->fp)
        munmap(r->fp, r->map_bytes);
    r->fp = NULL;
    r->map_bytes = 0;
    r->held -= r->pool_bytes;
    r->pool_bytes = 0;
}

static int h_alloc_pool(kv_device *d, int rank, const kv_pool_layout *l, char *err, size_t errlen)
{
    int rc = check_rank(d, rank, err, errlen);
    if (rc)
        return rc;
    if (l->num_blocks < 1 || l->block_size < 1 || l->num_layers < 1 || l->num_kv_heads < 1 || l->head_size < 1)
        return kv_errf(err, errlen, KV_DEV_EINVAL, "bad pool layout");
    host_impl *h = impl(d);
    host_rank *r = &h->ranks[rank];
    unmap_rank(r);
    uint64_t bytes = kv_pool_layout_bytes(l);
    rc = h_reserve(d, rank, "kv_cache", bytes, err, errlen);
    if (rc)
        return rc;
    size_t slots = (size_t)l->num_blocks * (size_t)l->block_size;
    size_t mb = slots * sizeof(uint64_t);
    void *p = mmap(NULL, mb, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        r->held -= bytes;
        return kv_errf(err, errlen, KV_DEV_ENOMEM, "cannot map %zu bytes for rank %d's pool", mb, rank);
    }
    r->fp = p;
    r->map_bytes = mb;
    r->pool_bytes = bytes;
    r->layout = *l;
    return 0;
}

static int h_write_kv(kv_device *d, int rank, const kv_slot_write *w, size_t n, char *err, size_t errlen)
{
    int rc = check_rank(d, rank, err, errlen);
    if (rc)
        return rc;
    host_rank *r = &impl(d)->ranks[rank];
    int64_t nslots = (int64_t)(r->map_bytes / sizeof(uint64_t));
    for (size_t i = 0; i < n; i++) {
        if (w[i].slot < 0 || w[i].slot >= nslots)
            return kv_errf(err, errlen, KV_DEV_EINVAL, "slot %lld outside rank %d's pool (%lld slots)",
                           (long long)w[i].slot, rank, (long long)nslots);
        r->fp[w[i].slot] = kv_fingerprint(w[i].token_id, w[i].position, 0, 0);
    }
    return 0;
}

static int h_verify(kv_device *d, int rank, const int32_t *table, int32_t ntable, const int32_t *tokens,
                    int32_t ntok, int64_t *mismatches, char *err, size_t errlen)
{
    int rc = check_rank(d, rank, err, errlen);
    if (rc)
        return rc;
    host_rank *r = &impl(d)->ranks[rank];
    const kv_pool_layout *l = &r->layout;
    if (!r->fp)
        return kv_errf(err, errlen, KV_DEV_EINVAL, "rank %d has no pool", rank);
    int64_t bad = 0, per = (int64_t)l->num_layers * l->num_kv_heads * l->kv_factor;
    for (int32_t pos = 0; pos < ntok; pos++) {
        int32_t bi = pos / l->block_size;
        if (bi >= ntable || table[bi] < 0 || table[bi] >= l->num_blocks)
            return kv_errf(err, errlen, KV_DEV_EINVAL, "token %d has no valid block in the table", pos);
        int64_t slot = (int64_t)table[bi] * l->block_size + pos % l->block_size;
        if (r->fp[slot] != kv_fingerprint(tokens[pos], pos, 0, 0))
            bad += per;
    }
    *mismatches = bad;
    return 0;
}

static void h_release(kv_device *d)
{
    host_impl *h = impl(d);
    for (int i = 0; i < d->num_ranks; i++) {
        unmap_rank(&h->ranks[i]);
        h->ranks[i].held = 0;
    }
}

static void h_destroy(kv_device *d)
{
    if (!d)
        return;
    free(d->impl);
    free(d);
}

static const kv_device_ops host_ops = {
    .mem_info = h_mem_info,
    .reserve = h_reserve,
    .alloc_pool = h_alloc_pool,
    .write_kv = h_write_kv,
    .verify = h_verify,
    .release = h_release,
    .destroy = h_destroy,
};

kv_device *kv_device_host_open(int num_ranks, uint64_t total_bytes, char *err, size_t errlen)
{
    if (num_ranks < 1 || num_ranks > 64) {
        kv_errf(err, errlen, KV_DEV_EINVAL, "host backend serves 1..64 ranks, asked for %d", num_ranks);
        return NULL;
    }
    kv_device *d = calloc(1, sizeof *d);
    host_impl *h = calloc(1, sizeof *h);
    if (!d || !h) {
        free(d);
        free(h);
        kv_errf(err, errlen, KV_DEV_ENOMEM, "out of memory opening the host backend");
        return NULL;
    }
    h->total = total_bytes;
    d->ops = &host_ops;
    d->name = "host";
    d->num_ranks = num_ranks;
    d->impl = h;
    return d;
}

uint64_t kv_device_host_mapped_bytes(const kv_device *d, int rank)
{
    if (!d || rank < 0 || rank >= d->num_ranks)
        return 0;
    return ((const host_impl *)d->impl)->ranks[rank].map_bytes;
}
