#include "kv_device_host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "kv_util.h"

#define MAX_TERMS 16

typedef struct host_term {
    kv_dev_handle h;          /* 0 = slot unused */
    uint64_t bytes;           /* counted in held (0 with placeholders off) */
} host_term;

typedef struct host_rank {
    kv_pool_layout layout;
    uint64_t *fp;             /* one fingerprint per slot (mmap) */
    size_t map_bytes;
    uint64_t pool_bytes;
    kv_dev_handle pool_h;
    host_term terms[MAX_TERMS];
    double pool_alloc_ms;
} host_rank;

typedef struct host_impl {
    uint64_t total;
    int placeholders;
    kv_dev_handle next_h;
    host_rank ranks[64];
} host_impl;

static host_impl *impl(kv_device *d) { return (host_impl *)d->impl; }

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int check_rank(kv_device *d, int rank, char *err, size_t errlen)
{
    if (rank < 0 || rank >= d->num_ranks)
        return kv_errf(err, errlen, KV_DEV_EINVAL, "rank %d out of range (0..%d)", rank, d->num_ranks - 1);
    return 0;
}

static uint64_t rank_held(const host_rank *r)
{
    uint64_t b = r->pool_bytes;
    for (int i = 0; i < MAX_TERMS; i++)
        if (r->terms[i].h)
            b += r->terms[i].bytes;
    return b;
}

static kv_dev_handle new_handle(host_impl *h)
{
    if (++h->next_h == 0)
        h->next_h = 1;
    return h->next_h;
}

static int h_info(kv_device *d, int rank, kv_device_info *out, char *err, size_t errlen)
{
    int rc = check_rank(d, rank, err, errlen);
    if (rc)
        return rc;
    host_impl *h = impl(d);
    memset(out, 0, sizeof *out);
    snprintf(out->backend, sizeof out->backend, "host");
    if (h->total)
        snprintf(out->name, sizeof out->name, "host memory (a simulated %.2f GiB card per rank)", kv_gib((double)h->total));
    else
        snprintf(out->name, sizeof out->name, "host memory (an unlimited simulated card per rank)");
    out->card = rank;
    out->ranks_on_card = 1;
    out->total_bytes = h->total;
    out->free_bytes = h->total;
    out->context_bytes = 0;
    snprintf(out->context_how, sizeof out->context_how, "none: the host backend has no CUDA context");
    snprintf(out->peak_how, sizeof out->peak_how, "not known for host memory");
    out->pool_alloc_ms = h->ranks[rank].pool_alloc_ms;
    return 0;
}

static int h_mem_info(kv_device *d, int rank, uint64_t *free_bytes, uint64_t *total_bytes, char *err,
                      size_t errlen)
{
    int rc = check_rank(d, rank, err, errlen);
    if (rc)
        return rc;
    host_impl *h = impl(d);
    uint64_t held = rank_held(&h->ranks[rank]);
    *total_bytes = h->total;
    *free_bytes = h->total > held ? h->total - held : 0;
    return 0;
}

static int over(host_impl *h, const host_rank *r, uint64_t bytes, const char *what, int rank, char *err,
                size_t errlen)
{
    uint64_t held = rank_held(r);
    if (h->total && held + bytes > h->total)
        return kv_errf(err, errlen, KV_DEV_ENOMEM,
                       "CUDA out of memory (simulated). Tried to allocate %.2f GiB for %s on rank %d; "
                       "%.2f GiB of %.2f GiB already held",
                       kv_gib((double)bytes), what, rank, kv_gib((double)held), kv_gib((double)h->total));
    return 0;
}

static int h_reserve(kv_device *d, int rank, const char *term, uint64_t bytes, kv_dev_handle *out, char *err,
                     size_t errlen)
{
    if (out)
        *out = 0;
    int rc = check_rank(d, rank, err, errlen);
    if (rc)
        return rc;
    host_impl *h = impl(d);
    host_rank *r = &h->ranks[rank];
    /* The simulated card holds every term, the context included; placeholders off: none. */
    uint64_t held = h->placeholders ? bytes : 0;
    if ((rc = over(h, r, held, term ? term : "?", rank, err, errlen)))
        return rc;
    for (int i = 0; i < MAX_TERMS; i++)
        if (!r->terms[i].h) {
            r->terms[i].h = new_handle(h);
            r->terms[i].bytes = held;
            if (out)
                *out = r->terms[i].h;
            return 0;
        }
    return kv_errf(err, errlen, KV_DEV_EINVAL, "rank %d holds %d placeholders already", rank, MAX_TERMS);
}

static void unmap_rank(host_rank *r)
{
    if (r->fp)
        munmap(r->fp, r->map_bytes);
    r->fp = NULL;
    r->map_bytes = 0;
    r->pool_bytes = 0;
    r->pool_h = 0;
}

static int h_alloc_pool(kv_device *d, int rank, const kv_pool_layout *l, kv_dev_handle *out, char *err,
                        size_t errlen)
{
    if (out)
        *out = 0;
    int rc = check_rank(d, rank, err, errlen);
    if (rc)
        return rc;
    if (l->num_blocks < 1 || l->block_size < 1 || l->num_layers < 1 || l->num_kv_heads < 1 || l->head_size < 1 ||
        (l->kv_factor != 1 && l->kv_factor != 2) || l->cache_dtype < 0 || l->cache_dtype >= KV_DTYPE_COUNT ||
        l->first_kv_head < 0)
        return kv_errf(err, errlen, KV_DEV_EINVAL, "bad pool layout for rank %d", rank);
    host_impl *h = impl(d);
    host_rank *r = &h->ranks[rank];
    unmap_rank(r);
    uint64_t bytes = kv_pool_layout_bytes(l);
    if ((rc = over(h, r, bytes, "the KV cache pool", rank, err, errlen)))
        return rc;
    size_t slots = (size_t)l->num_blocks * (size_t)l->block_size;
    size_t mb = slots * sizeof(uint64_t);
    double t0 = now_ms();
    void *p = mmap(NULL, mb, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return kv_errf(err, errlen, KV_DEV_ENOMEM, "cannot map %zu bytes for rank %d's KV cache pool", mb, rank);
    r->pool_alloc_ms = now_ms() - t0;
    r->fp = p;
    r->map_bytes = mb;
    r->pool_bytes = bytes;
    r->layout = *l;
    r->pool_h = new_handle(h);
    if (out)
        *out = r->pool_h;
    return 0;
}

static void h_free(kv_device *d, int rank, kv_dev_handle hd)
{
    if (!hd || rank < 0 || rank >= d->num_ranks)
        return;
    host_rank *r = &impl(d)->ranks[rank];
    if (r->pool_h == hd) {
        unmap_rank(r);
        return;
    }
    for (int i = 0; i < MAX_TERMS; i++)
        if (r->terms[i].h == hd)
            memset(&r->terms[i], 0, sizeof r->terms[i]);
}

static uint64_t h_held(kv_device *d, int rank)
{
    return rank >= 0 && rank < d->num_ranks ? rank_held(&impl(d)->ranks[rank]) : 0;
}

static void h_set_placeholders(kv_device *d, int on) { impl(d)->placeholders = on ? 1 : 0; }

/* What a slot of rank r holds for a token: layer 0 and the rank's first head stand for all. */
static uint64_t slot_value(const host_rank *r, int32_t token, int32_t pos, uint64_t parent)
{
    return kv_fingerprint(token, pos, 0, r->layout.first_kv_head, parent);
}

static int h_write_kv(kv_device *d, int rank, const kv_slot_write *w, size_t n, char *err, size_t errlen)
{
    int rc = check_rank(d, rank, err, errlen);
    if (rc)
        return rc;
    host_rank *r = &impl(d)->ranks[rank];
    if (!r->fp && n)
        return kv_errf(err, errlen, KV_DEV_EINVAL, "write_kv: rank %d has no KV cache pool", rank);
    int64_t nslots = (int64_t)(r->map_bytes / sizeof(uint64_t));
    for (size_t i = 0; i < n; i++) {
        if (w[i].slot < 0 || w[i].slot >= nslots)
            return kv_errf(err, errlen, KV_DEV_EINVAL, "write_kv: slot %lld outside rank %d's pool (%lld slots)",
                           (long long)w[i].slot, rank, (long long)nslots);
        r->fp[w[i].slot] = slot_value(r, w[i].token_id, w[i].position, w[i].parent);
    }
    return 0;
}

static int h_verify(kv_device *d, int rank, const kv_verify_req *v, int64_t *mismatches, char *err, size_t errlen)
{
    int rc = check_rank(d, rank, err, errlen);
    if (rc)
        return rc;
    host_rank *r = &impl(d)->ranks[rank];
    const kv_pool_layout *l = &r->layout;
    if (!r->fp)
        return kv_errf(err, errlen, KV_DEV_EINVAL, "verify: rank %d has no KV cache pool", rank);
    if (v->first < 0 || v->num_tokens < 0)
        return kv_errf(err, errlen, KV_DEV_EINVAL, "verify: positions from %d, %d tokens", v->first, v->num_tokens);
    int64_t bad = 0, per = (int64_t)l->num_layers * l->num_kv_heads * l->kv_factor;
    for (int32_t i = 0; i < v->num_tokens; i++) {
        int32_t pos = v->first + i, bi = pos / l->block_size;
        if (bi >= v->num_table_blocks || v->block_table[bi] < 0 || v->block_table[bi] >= l->num_blocks)
            return kv_errf(err, errlen, KV_DEV_EINVAL, "verify: token %d has no valid block in the table", pos);
        int64_t slot = (int64_t)v->block_table[bi] * l->block_size + pos % l->block_size;
        if (r->fp[slot] != slot_value(r, v->token_ids[i], pos, v->block_keys ? v->block_keys[bi] : 0))
            bad += per;
    }
    *mismatches = bad;
    return 0;
}

/* Host benchmarks run on what the host backend stores: 8 bytes per token. */
static int h_bench(kv_device *d, int rank, const kv_bench_req *q, kv_bench_result *out, char *err, size_t errlen)
{
    int rc = check_rank(d, rank, err, errlen);
    if (rc)
        return rc;
    host_rank *r = &impl(d)->ranks[rank];
    memset(out, 0, sizeof *out);
    out->mismatches = -1;
    if (!r->fp)
        return kv_errf(err, errlen, KV_DEV_EINVAL, "bench: rank %d has no KV cache pool", rank);
    if (q->kind < 0 || q->kind >= KV_BENCH_COUNT || q->repeats < 1 || q->repeats > 1000)
        return kv_errf(err, errlen, KV_DEV_EINVAL, "bench: bad request (kind %d, %d repeats)", (int)q->kind, q->repeats);
    kv_bench_request b;
    if ((rc = kv_bench_request_make(&r->layout, q->num_tokens, &b, err, errlen)))
        return rc;
    const size_t n = (size_t)b.num_tokens, bytes = n * sizeof(uint64_t);
    uint64_t *buf = malloc(bytes);
    double *ms = malloc((size_t)(q->repeats + 1) * sizeof *ms);
    if (!buf || !ms) {
        free(buf);
        free(ms);
        kv_bench_request_free(&b);
        return kv_errf(err, errlen, KV_DEV_ENOMEM, "bench: out of host memory");
    }
    const kv_verify_req vr = {b.table, b.keys, b.num_blocks, b.tokens, 0, b.num_tokens};
    const kv_verify_req vlate = {b.table, b.keys, b.num_blocks, b.tokens + b.verify_first, b.verify_first,
                                 b.num_tokens - b.verify_first};
    uint64_t traffic = q->kind == KV_BENCH_MEMCPY || q->kind == KV_BENCH_GATHER ? 2 * bytes
                       : q->kind == KV_BENCH_VERIFY ? (n - (size_t)b.verify_first) * sizeof(uint64_t)
                                                    : bytes;
    int64_t bad = -1;
    if (q->kind == KV_BENCH_GATHER || q->kind == KV_BENCH_VERIFY)
        rc = h_write_kv(d, rank, b.writes, n, err, errlen); /* what the reads find */
    volatile uint64_t sink = 0;
    for (int i = 0; !rc && i <= q->repeats; i++) {
        double t0 = now_ms();
        switch (q->kind) {
        case KV_BENCH_MEMSET: memset(buf, i & 0xFF, bytes); break;
        case KV_BENCH_MEMCPY: memcpy(buf, r->fp, bytes); break;
        case KV_BENCH_READ: {
            uint64_t acc = 0;
            for (size_t t = 0; t < n; t++)
                acc ^= r->fp[t];
            sink = acc;
            break;
        }
        case KV_BENCH_WRITE: rc = h_write_kv(d, rank, b.writes, n, err, errlen); break;
        case KV_BENCH_GATHER:
            for (size_t t = 0; t < n; t++)
                buf[t] = r->fp[(int64_t)b.table[t / (size_t)r->layout.block_size] * r->layout.block_size +
                               (int64_t)(t % (size_t)r->layout.block_size)];
            break;
        default: rc = h_verify(d, rank, &vlate, &bad, err, errlen); break;
        }
        if (i > 0)
            ms[i - 1] = now_ms() - t0;
    }
    if (!rc && q->kind == KV_BENCH_WRITE)
        rc = h_verify(d, rank, &vr, &bad, err, errlen);
    if (!rc && q->kind == KV_BENCH_GATHER) {
        bad = 0;
        for (size_t t = 0; t < n; t++)
            bad += buf[t] != slot_value(r, b.tokens[t], (int32_t)t, b.keys[t / (size_t)r->layout.block_size]);
    }
    (void)sink;
    if (!rc) {
        kv_bench_summarize(ms, q->repeats, traffic, out);
        out->mismatches = bad;
    }
    free(buf);
    free(ms);
    kv_bench_request_free(&b);
    return rc;
}

static void h_release(kv_device *d)
{
    host_impl *h = impl(d);
    for (int i = 0; i < d->num_ranks; i++) {
        unmap_rank(&h->ranks[i]);
        memset(h->ranks[i].terms, 0, sizeof h->ranks[i].terms);
    }
}

static void h_destroy(kv_device *d)
{
    if (!d)
        return;
    h_release(d);
    free(d->impl);
    free(d);
}

static const kv_device_ops host_ops = {
    .info = h_info,
    .mem_info = h_mem_info,
    .reserve = h_reserve,
    .alloc_pool = h_alloc_pool,
    .free = h_free,
    .held = h_held,
    .set_placeholders = h_set_placeholders,
    .write_kv = h_write_kv,
    .verify = h_verify,
    .bench = h_bench,
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
    h->placeholders = 1;
    for (int i = 0; i < 64; i++)
        h->ranks[i].pool_alloc_ms = -1;
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

uint64_t kv_device_host_peek(const kv_device *d, int rank, int64_t slot)
{
    if (!d || rank < 0 || rank >= d->num_ranks)
        return 0;
    const host_rank *r = &((const host_impl *)d->impl)->ranks[rank];
    if (!r->fp || slot < 0 || (uint64_t)slot >= r->map_bytes / sizeof(uint64_t))
        return 0;
    return r->fp[slot];
}

int kv_device_host_poke(kv_device *d, int rank, int64_t slot, uint64_t value)
{
    if (!d || rank < 0 || rank >= d->num_ranks)
        return KV_DEV_EINVAL;
    host_rank *r = &((host_impl *)d->impl)->ranks[rank];
    if (!r->fp || slot < 0 || (uint64_t)slot >= r->map_bytes / sizeof(uint64_t))
        return KV_DEV_EINVAL;
    r->fp[slot] = value;
    return 0;
}
