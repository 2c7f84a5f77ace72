/* kv_offload: the host tier (kv_offload.h): a hash -> entry map (uthash)
 * and a recency list, least recently used at the head. */
#include "kv_offload.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

typedef struct entry {
    kv_hash key;
    uint64_t offer;            /* the last prepare_store that named it */
    struct entry *prev, *next; /* recency list */
    UT_hash_handle hh;
} entry;

struct kv_offload {
    int64_t capacity, used;
    entry *map;
    entry *lru, *mru;
    int protect_offer;
    uint64_t offer;
    kv_offload_stats st;
};

int64_t kv_offload_num_blocks(double gib, int32_t tp, double block_bytes_per_rank)
{
    if (!(gib > 0) || !(block_bytes_per_rank > 0))
        return 0;
    double per_block = block_bytes_per_rank * (double)(tp > 0 ? tp : 1);
    double n = floor(gib * 1073741824.0 / per_block);
    return n > 9.0e18 ? INT64_MAX : (int64_t)n;
}

kv_offload *kv_offload_create(int64_t capacity, int protect_offer)
{
    if (capacity < 1)
        return NULL;
    kv_offload *o = calloc(1, sizeof *o);
    if (o) {
        o->capacity = o->st.capacity = capacity;
        o->protect_offer = protect_offer != 0;
    }
    return o;
}

void kv_offload_destroy(kv_offload *o)
{
    if (!o)
        return;
    entry *e, *t;
    HASH_ITER(hh, o->map, e, t) {
        HASH_DEL(o->map, e);
        free(e);
    }
    free(o);
}

static void unlink_entry(kv_offload *o, entry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        o->lru = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        o->mru = e->prev;
    e->prev = e->next = NULL;
}

static void push_mru(kv_offload *o, entry *e)
{
    e->prev = o->mru;
    e->next = NULL;
    if (o->mru)
        o->mru->next = e;
    else
        o->lru = e;
    o->mru = e;
}

static entry *find(const kv_offload *o, kv_hash k)
{
    entry *e = NULL;
    HASH_FIND(hh, o->map, &k, sizeof k, e);
    return e;
}

/* Drop entry e from the tier. */
static void drop(kv_offload *o, entry *e)
{
    unlink_entry(o, e);
    HASH_DEL(o->map, e);
    free(e);
    o->used--;
    o->st.evicted_blocks++;
}

int32_t kv_offload_prepare_store(kv_offload *o, const kv_hash *keys, int32_t n)
{
    if (!o || n <= 0)
        return 0;
    /* the keys not held, in offer order (block_hashes_to_store), decided
     * before anything is evicted */
    int32_t *fresh = malloc((size_t)n * sizeof *fresh);
    if (!fresh)
        return -1;
    int32_t nfresh = 0;
    int64_t held = 0; /* distinct held keys of this offer */
    uint64_t offer = ++o->offer;
    for (int32_t i = 0; i < n; i++) {
        entry *e = find(o, keys[i]);
        if (!e)
            fresh[nfresh++] = i;
        else if (e->offer != offer) {
            e->offer = offer;
            held++;
        }
    }
    int64_t evict = nfresh - (o->capacity - o->used);
    if (evict > o->used - (o->protect_offer ? held : 0)) {
        free(fresh);
        o->st.skipped_stores++;
        return -1; /* "we could not evict enough blocks" */
    }
    /* least recently used first: before 0.18 whichever they are (an offered
     * key that is held can go too: it was not among the keys to store), from
     * 0.18 never one of this offer */
    for (entry *e = o->lru; evict > 0 && e;) {
        entry *nx = e->next;
        if (!o->protect_offer || e->offer != offer) {
            drop(o, e);
            evict--;
        }
        e = nx;
    }
    int32_t stored = 0;
    for (int32_t k = 0; k < nfresh; k++) {
        int32_t i = fresh[k];
        if (find(o, keys[i]))
            continue; /* repeated in this offer */
        entry *e = calloc(1, sizeof *e);
        if (!e)
            break;
        e->key = keys[i];
        HASH_ADD(hh, o->map, key, sizeof e->key, e);
        push_mru(o, e);
        o->used++;
        stored++;
    }
    free(fresh);
    o->st.stored_blocks += stored;
    return stored;
}

int32_t kv_offload_lookup(const kv_offload *o, const kv_hash *keys, int32_t n)
{
    int32_t hits = 0;
    while (o && hits < n && find(o, keys[hits]))
        hits++;
    return hits;
}

void kv_offload_touch(kv_offload *o, const kv_hash *keys, int32_t n)
{
    for (int32_t i = n - 1; o && i >= 0; i--) { /* reversed: the first key ends most recent */
        entry *e = find(o, keys[i]);
        if (e) {
            unlink_entry(o, e);
            push_mru(o, e);
        }
    }
}

int32_t kv_offload_keys(const kv_offload *o, kv_hash *out, int32_t max)
{
    int32_t k = 0;
    for (const entry *e = o ? o->lru : NULL; e; e = e->next, k++)
        if (k < max)
            out[k] = e->key;
    return k;
}

void kv_offload_record(kv_offload *o, int64_t query_tokens, int64_t hit_tokens, int32_t loaded_blocks)
{
    if (!o)
        return;
    o->st.queries += query_tokens;
    o->st.hits += hit_tokens;
    o->st.loaded_blocks += loaded_blocks;
}

void kv_offload_get_stats(const kv_offload *o, kv_offload_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!o)
        return;
    *out = o->st;
    out->used = o->used;
}
