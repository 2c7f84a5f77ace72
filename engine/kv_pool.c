#include "kv_hash.h"
#include "kv_pool.h"

#include <stdlib.h>
#include <string.h>

#include "kv_engine.h" /* KV_EV_* */
#include "kv_util.h"

/* A map slot: the block id and the low 32 bits of its hash (the home slot,
 * as num_blocks < 2^31 keeps the table under 2^32 slots), so probing and
 * deleting read no block record until a tag matches. */
typedef struct map_slot {
    uint32_t tag;
    int32_t id;
} map_slot;

static inline uint32_t tag_of(kv_hash h) { return (uint32_t)h.lo; }

struct kv_pool {
    int32_t num_blocks;
    int enable_caching;
    int free_to_tail;          /* release rule: every freed block to the tail */
    kv_block *blocks;          /* num_blocks + 2 (two sentinels) */
    kv_pool_fq fq;
    map_slot *map;             /* open addressing: the first block per hash (id -1 = empty) */
    uint64_t map_mask;         /* slots - 1 (a power of two, >= 2 x num_blocks) */
    int32_t num_hashed;
    kv_pool_stats stats;
    kv_pool_event_fn ev;
    void *ev_ctx;
};

/* ---- free block queue ------------------------------------------------ */

#define FQ_HEAD(q) ((q)->n)
#define FQ_TAIL(q) ((q)->n + 1)

void kv_pool_fq_init(kv_pool_fq *q, kv_block *blocks, int32_t n)
{
    q->blocks = blocks;
    q->n = n;
    q->num_free = n;
    for (int32_t i = 0; i < n + 2; i++) {
        memset(&blocks[i], 0, sizeof blocks[i]);
        blocks[i].block_id = i < n ? i : -1;
        blocks[i].dup_next = -1;
    }
    for (int32_t i = 0; i < n; i++) {
        blocks[i].prev_free = i == 0 ? FQ_HEAD(q) : i - 1;
        blocks[i].next_free = i == n - 1 ? FQ_TAIL(q) : i + 1;
        blocks[i].in_free = 1;
    }
    blocks[FQ_HEAD(q)].next_free = n ? 0 : FQ_TAIL(q);
    blocks[FQ_HEAD(q)].prev_free = -1;
    blocks[FQ_TAIL(q)].prev_free = n ? n - 1 : FQ_HEAD(q);
    blocks[FQ_TAIL(q)].next_free = -1;
}

static void fq_unlink(kv_pool_fq *q, int32_t id)
{
    kv_block *b = &q->blocks[id];
    q->blocks[b->prev_free].next_free = b->next_free;
    q->blocks[b->next_free].prev_free = b->prev_free;
    b->prev_free = b->next_free = -1;
    b->in_free = 0;
    q->num_free--;
}

int32_t kv_pool_fq_popleft(kv_pool_fq *q, char *err, size_t errlen)
{
    int32_t id = q->blocks[FQ_HEAD(q)].next_free;
    if (id == FQ_TAIL(q))
        return kv_errf(err, errlen, -1, "No free blocks available");
    fq_unlink(q, id);
    return id;
}

int kv_pool_fq_remove(kv_pool_fq *q, int32_t id, char *err, size_t errlen)
{
    if (id < 0 || id >= q->n || !q->blocks[id].in_free)
        return kv_errf(err, errlen, -1, "remove() called on an invalid block: %d", (int)id);
    fq_unlink(q, id);
    return 0;
}

void kv_pool_fq_insert_after(kv_pool_fq *q, int32_t after, int32_t id)
{
    int32_t a = after < 0 ? FQ_HEAD(q) : after;
    kv_block *b = &q->blocks[id];
    int32_t nx = q->blocks[a].next_free;
    b->prev_free = a;
    b->next_free = nx;
    q->blocks[a].next_free = id;
    q->blocks[nx].prev_free = id;
    b->in_free = 1;
    q->num_free++;
}

int kv_pool_fq_append(kv_pool_fq *q, int32_t id)
{
    if (id < 0 || id >= q->n || q->blocks[id].in_free)
        return -1;
    int32_t last = q->blocks[FQ_TAIL(q)].prev_free;
    kv_pool_fq_insert_after(q, last == FQ_HEAD(q) ? -1 : last, id);
    return 0;
}

int32_t kv_pool_fq_head(const kv_pool_fq *q)
{
    int32_t id = q->blocks[FQ_HEAD(q)].next_free;
    return id == FQ_TAIL(q) ? -1 : id;
}

int32_t kv_pool_fq_tail(const kv_pool_fq *q)
{
    int32_t id = q->blocks[FQ_TAIL(q)].prev_free;
    return id == FQ_HEAD(q) ? -1 : id;
}

int32_t kv_pool_fq_get_all(const kv_pool_fq *q, int32_t *out, int32_t max)
{
    int32_t k = 0;
    for (int32_t id = q->blocks[FQ_HEAD(q)].next_free; id != FQ_TAIL(q); id = q->blocks[id].next_free) {
        if (k < max)
            out[k] = id;
        k++;
    }
    return k;
}

/* ---- hash map ------------------------------------------------------- */

/* Keys are xxh3-128 hashes: their low bits are already uniform. */
static uint64_t map_slots(int64_t num_blocks)
{
    uint64_t n = 16;
    while (n < (uint64_t)num_blocks * 2)
        n <<= 1;
    return n;
}

uint64_t kv_pool_host_bytes(int64_t num_blocks)
{
    if (num_blocks < 1)
        return 0;
    return (uint64_t)(num_blocks + 2) * sizeof(kv_block) + map_slots(num_blocks) * sizeof(map_slot) + sizeof(kv_pool);
}

/* Slot holding hash h, or the empty slot where it would go. */
static uint64_t map_find(const kv_pool *p, kv_hash h)
{
    uint64_t i = h.lo & p->map_mask;
    uint32_t tag = tag_of(h);
    for (;;) {
        const map_slot *m = &p->map[i];
        if (m->id < 0 || (m->tag == tag && kv_hash_eq(p->blocks[m->id].hash, h)))
            return i;
        i = (i + 1) & p->map_mask;
    }
}

/* Backward-shift deletion: keeps every probe chain unbroken, no tombstones. */
static void map_delete_slot(kv_pool *p, uint64_t i)
{
    uint64_t j = i;
    for (;;) {
        j = (j + 1) & p->map_mask;
        int32_t id = p->map[j].id;
        if (id < 0)
            break;
        uint64_t home = p->map[j].tag & p->map_mask;
        /* move j back to i unless its home lies cyclically in (i, j] */
        if (((j - home) & p->map_mask) >= ((j - i) & p->map_mask)) {
            p->map[i] = p->map[j];
            i = j;
        }
    }
    p->map[i].id = -1;
}

static void map_insert(kv_pool *p, kv_block *b)
{
    uint64_t i = map_find(p, b->hash);
    int32_t first = p->map[i].id;
    if (first < 0) {
        p->map[i].id = b->block_id;
        p->map[i].tag = tag_of(b->hash);
        b->in_map = 1;
        b->dup_next = -1;
        return;
    }
    /* same content already cached: chain right behind the first (no de-dup;
     * lookups return the first, so the order of the others does not matter) */
    kv_block *f = &p->blocks[first];
    b->dup_next = f->dup_next;
    f->dup_next = b->block_id;
    b->in_map = 0;
}

static void map_remove(kv_pool *p, kv_block *b)
{
    uint64_t i = map_find(p, b->hash);
    if (b->in_map) {
        b->in_map = 0;
        if (b->dup_next >= 0) {
            p->map[i].id = b->dup_next;
            p->blocks[b->dup_next].in_map = 1;
        } else {
            map_delete_slot(p, i);
        }
    } else {
        /* a duplicate: unlink it from the chain behind the first */
        for (int32_t id = p->map[i].id; id >= 0; id = p->blocks[id].dup_next)
            if (p->blocks[id].dup_next == b->block_id) {
                p->blocks[id].dup_next = b->dup_next;
                break;
            }
    }
    b->dup_next = -1;
}

static void evict(kv_pool *p, kv_block *b, int64_t req_id)
{
    map_remove(p, b);
    b->has_hash = 0;
    memset(&b->hash, 0, sizeof b->hash);
    p->num_hashed--;
    p->stats.evictions++;
    if (p->ev)
        p->ev(p->ev_ctx, KV_EV_EVICT, b->block_id, req_id, 0);
}

/* ---- pool ----------------------------------------------------------- */

kv_pool *kv_pool_create(int32_t num_blocks, int enable_caching, char *err, size_t errlen)
{
    if (num_blocks < 1) {
        kv_errf(err, errlen, -1, "num_blocks must be at least 1 (the null block), got %d", (int)num_blocks);
        return NULL;
    }
    kv_pool *p = calloc(1, sizeof *p);
    uint64_t slots = map_slots(num_blocks);
    if (!p || !(p->blocks = malloc(((size_t)num_blocks + 2) * sizeof(kv_block))) ||
        !(p->map = malloc((size_t)slots * sizeof(map_slot)))) {
        if (p)
            free(p->blocks);
        free(p);
        kv_errf(err, errlen, -1, "out of memory for a pool of %d blocks", (int)num_blocks);
        return NULL;
    }
    memset(p->map, 0xff, (size_t)slots * sizeof(map_slot));
    p->map_mask = slots - 1;
    p->num_blocks = num_blocks;
    p->enable_caching = enable_caching;
    kv_pool_fq_init(&p->fq, p->blocks, num_blocks);
    int32_t null_id = kv_pool_fq_popleft(&p->fq, NULL, 0);
    p->blocks[null_id].is_null = 1;
    return p;
}

void kv_pool_destroy(kv_pool *p)
{
    if (!p)
        return;
    free(p->map);
    free(p->blocks);
    free(p);
}

void kv_pool_set_free_to_tail(kv_pool *p, int on) { p->free_to_tail = on != 0; }

void kv_pool_set_event_sink(kv_pool *p, kv_pool_event_fn fn, void *ctx)
{
    p->ev = fn;
    p->ev_ctx = ctx;
}

int32_t kv_pool_num_blocks(const kv_pool *p) { return p->num_blocks; }
int kv_pool_caching(const kv_pool *p) { return p->enable_caching; }
int32_t kv_pool_num_free(const kv_pool *p) { return p->fq.num_free; }
int32_t kv_pool_num_hashed(const kv_pool *p) { return p->num_hashed; }
const kv_pool_fq *kv_pool_queue(const kv_pool *p) { return &p->fq; }

double kv_pool_usage(const kv_pool *p)
{
    int32_t total = p->num_blocks - 1;
    if (total <= 0)
        return 0.0;
    return 1.0 - (double)p->fq.num_free / (double)total;
}

const kv_block *kv_pool_block(const kv_pool *p, int32_t id)
{
    if (id < 0 || id >= p->num_blocks)
        return NULL;
    return &p->blocks[id];
}

static void take(kv_pool *p, int32_t id, int64_t req_id)
{
    kv_block *b = &p->blocks[id];
    if (b->has_hash)
        evict(p, b, req_id);
    b->ref_cnt = 1;
    p->stats.allocations++;
    if (p->ev)
        p->ev(p->ev_ctx, KV_EV_ALLOC, id, req_id, 1);
}

int kv_pool_get_new_blocks(kv_pool *p, int32_t n, int32_t *out, int64_t req_id, char *err, size_t errlen)
{
    if (n < 0 || n > p->fq.num_free)
        return kv_errf(err, errlen, -1, "Cannot get %d free blocks from the pool", (int)n);
    const int32_t tail = FQ_TAIL(&p->fq);
    for (int32_t i = 0; i < n; i++) {
        /* the free queue is a linked list: fetch the next blocks, and the map
         * slot an eviction of the next one will touch, while this one is taken */
        int32_t nx = p->blocks[p->blocks[FQ_HEAD(&p->fq)].next_free].next_free;
        int32_t id = kv_pool_fq_popleft(&p->fq, NULL, 0);
        if (nx != tail) {
            const kv_block *b = &p->blocks[nx];
            if (b->next_free != tail)
                __builtin_prefetch(&p->blocks[b->next_free]);
            if (b->has_hash)
                __builtin_prefetch(&p->map[b->hash.lo & p->map_mask]);
        }
        take(p, id, req_id);
        out[i] = id;
    }
    return 0;
}

int kv_pool_get_contiguous(kv_pool *p, int32_t n, int32_t *out, int64_t req_id)
{
    if (n <= 0 || n > p->fq.num_free)
        return -1;
    int32_t run = 0;
    for (int32_t id = 1; id < p->num_blocks; id++) {
        run = p->blocks[id].in_free ? run + 1 : 0;
        if (run == n) {
            int32_t start = id - n + 1;
            for (int32_t k = 0; k < n; k++) {
                fq_unlink(&p->fq, start + k);
                take(p, start + k, req_id);
                out[k] = start + k;
            }
            return 0;
        }
    }
    return -1;
}

void kv_pool_touch(kv_pool *p, const int32_t *ids, int32_t n, int64_t req_id)
{
    for (int32_t i = 0; i < n; i++) {
        kv_block *b = &p->blocks[ids[i]];
        if (b->ref_cnt == 0 && !b->is_null)
            fq_unlink(&p->fq, ids[i]);
        b->ref_cnt++;
        p->stats.hits++;
        if (p->ev)
            p->ev(p->ev_ctx, KV_EV_CACHE_HIT, ids[i], req_id, b->ref_cnt);
    }
}

void kv_pool_free_blocks(kv_pool *p, const int32_t *ordered, int32_t n, int64_t req_id)
{
    int32_t after = -1; /* fresh blocks go to the head, keeping their order */
    for (int32_t i = 0; i < n; i++) {
        if (i + 4 < n) /* a block table is scattered over the pool */
            __builtin_prefetch(&p->blocks[ordered[i + 4]]);
        kv_block *b = &p->blocks[ordered[i]];
        if (b->is_null)
            continue;
        b->ref_cnt--;
        if (p->ev)
            p->ev(p->ev_ctx, KV_EV_FREE, b->block_id, req_id, b->ref_cnt);
        if (b->ref_cnt > 0)
            continue;
        p->stats.frees++;
        if (b->has_hash || p->free_to_tail) {
            kv_pool_fq_append(&p->fq, b->block_id);
        } else {
            kv_pool_fq_insert_after(&p->fq, after, b->block_id);
            after = b->block_id;
        }
    }
}

int kv_pool_cache_block(kv_pool *p, int32_t id, kv_hash hash, int64_t req_id)
{
    if (!p->enable_caching)
        return 0;
    kv_block *b = &p->blocks[id];
    if (b->is_null)
        return 0;
    if (b->has_hash)
        return kv_hash_eq(b->hash, hash) ? 0 : 1;
    b->hash = hash;
    b->has_hash = 1;
    p->num_hashed++;
    map_insert(p, b);
    if (p->ev)
        p->ev(p->ev_ctx, KV_EV_CACHE_STORE, id, req_id, 0);
    return 0;
}

void kv_pool_prefetch_hash(const kv_pool *p, kv_hash hash)
{
    __builtin_prefetch(&p->map[hash.lo & p->map_mask]);
}

int32_t kv_pool_get_cached(const kv_pool *p, kv_hash hash)
{
    return p->map[map_find(p, hash)].id;
}

int kv_pool_reset_prefix_cache(kv_pool *p, int32_t *held)
{
    int32_t h = (p->num_blocks - 1) - p->fq.num_free;
    if (held)
        *held = h;
    if (h != 0)
        return 0;
    memset(p->map, 0xff, (size_t)(p->map_mask + 1) * sizeof(map_slot));
    for (int32_t i = 0; i < p->num_blocks; i++) {
        kv_block *b = &p->blocks[i];
        b->has_hash = b->in_map = 0;
        b->dup_next = -1;
        memset(&b->hash, 0, sizeof b->hash);
    }
    p->num_hashed = 0;
    return 1;
}

void kv_pool_get_stats(const kv_pool *p, kv_pool_stats *out) { *out = p->stats; }

kv_block *kv_pool_restore_begin(kv_pool *p)
{
    memset(p->map, 0xff, (size_t)(p->map_mask + 1) * sizeof(map_slot));
    kv_pool_fq_init(&p->fq, p->blocks, p->num_blocks);
    for (int32_t i = 0; i < p->num_blocks; i++) {
        kv_block *b = &p->blocks[i];
        b->prev_free = b->next_free = -1;
        b->in_free = 0;
    }
    p->blocks[FQ_HEAD(&p->fq)].next_free = FQ_TAIL(&p->fq);
    p->blocks[FQ_TAIL(&p->fq)].prev_free = FQ_HEAD(&p->fq);
    p->fq.num_free = 0;
    p->blocks[0].is_null = 1;
    p->num_hashed = 0;
    return p->blocks;
}

int kv_pool_restore_end(kv_pool *p, const int32_t *free_ids, int32_t nfree, const kv_pool_stats *stats, char *err,
                        size_t errlen)
{
    for (int32_t k = 0; k < nfree; k++)
        if (free_ids[k] <= 0 || kv_pool_fq_append(&p->fq, free_ids[k]) != 0)
            return kv_errf(err, errlen, -1, "free queue entry %d: block %d cannot be linked", (int)k,
                           (int)free_ids[k]);
    p->stats = *stats;
    for (int32_t i = 0; i < p->num_blocks; i++) {
        kv_block *b = &p->blocks[i];
        if (!b->has_hash)
            continue;
        p->num_hashed++;
        if (!b->in_map)
            continue;
        uint64_t slot = map_find(p, b->hash);
        if (p->map[slot].id >= 0)
            return kv_errf(err, errlen, -1, "blocks %d and %d both head the map for one hash", (int)p->map[slot].id,
                           (int)i);
        p->map[slot].id = i;
        p->map[slot].tag = tag_of(b->hash);
    }
    return 0;
}

int kv_pool_check(const kv_pool *p, char *err, size_t errlen)
{
    const kv_pool_fq *q = &p->fq;
    int32_t count = 0, prev = FQ_HEAD(q);
    for (int32_t id = p->blocks[FQ_HEAD(q)].next_free; id != FQ_TAIL(q); id = p->blocks[id].next_free) {
        if (id < 0 || id >= p->num_blocks)
            return kv_errf(err, errlen, -1, "free queue links to invalid block %d", (int)id);
        if (p->blocks[id].prev_free != prev)
            return kv_errf(err, errlen, -1, "free queue: block %d has a wrong prev link", (int)id);
        if (!p->blocks[id].in_free || p->blocks[id].ref_cnt != 0 || p->blocks[id].is_null)
            return kv_errf(err, errlen, -1, "free queue holds block %d with ref_cnt %d", (int)id,
                           (int)p->blocks[id].ref_cnt);
        prev = id;
        if (++count > p->num_blocks)
            return kv_errf(err, errlen, -1, "free queue has a cycle");
    }
    if (count != q->num_free)
        return kv_errf(err, errlen, -1, "free queue length %d but num_free %d", (int)count, (int)q->num_free);
    int32_t hashed = 0, reachable = 0;
    for (int32_t i = 0; i < p->num_blocks; i++) {
        const kv_block *b = &p->blocks[i];
        if (b->is_null && (b->in_free || i != 0))
            return kv_errf(err, errlen, -1, "null block %d misplaced", (int)i);
        if (!b->is_null && (b->ref_cnt == 0) != (b->in_free != 0))
            return kv_errf(err, errlen, -1, "block %d: ref_cnt %d but in_free %d", (int)i, (int)b->ref_cnt,
                           (int)b->in_free);
        if (b->ref_cnt < 0)
            return kv_errf(err, errlen, -1, "block %d: negative ref_cnt", (int)i);
        if (b->has_hash)
            hashed++;
    }
    if (hashed != p->num_hashed)
        return kv_errf(err, errlen, -1, "%d blocks carry a hash but num_hashed is %d", (int)hashed,
                       (int)p->num_hashed);
    /* every hashed block reachable exactly once: map entries plus dup chains */
    for (uint64_t i = 0; i <= p->map_mask; i++) {
        int32_t first = p->map[i].id;
        if (first < 0)
            continue;
        if (first >= p->num_blocks || !p->blocks[first].in_map)
            return kv_errf(err, errlen, -1, "map slot %llu holds block %d, which is not a map entry",
                           (unsigned long long)i, (int)first);
        if (map_find(p, p->blocks[first].hash) != i)
            return kv_errf(err, errlen, -1, "hash of block %d maps elsewhere", (int)first);
        for (int32_t id = first; id >= 0; id = p->blocks[id].dup_next) {
            if (!p->blocks[id].has_hash || !kv_hash_eq(p->blocks[id].hash, p->blocks[first].hash))
                return kv_errf(err, errlen, -1, "block %d in the map under a hash it does not carry", (int)id);
            if (++reachable > hashed)
                return kv_errf(err, errlen, -1, "a hashed block is in the map twice");
        }
    }
    if (reachable != hashed)
        return kv_errf(err, errlen, -1, "%d hashed blocks but %d reachable from the map", (int)hashed,
                       (int)reachable);
    return 0;
}
