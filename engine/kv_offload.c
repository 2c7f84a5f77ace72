/* kv_offload: the host tier (kv_offload.h): a hash -> entry map (uthash)
 * and a recency list, least recently used at the head. */
#include "kv_offload.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

typedef struct entry {
    kv_hash key;
    uint64_t epoch;            /* the offer that last named it (protected from eviction in that offer) */
    struct entry *prev, *next; /* recency list */
    UT_hash_handle hh;
} entry;

struct kv_offload {
    int64_t capacity, used;
    entry *map;
    entry *lru, *mru;
    uint64_t epoch;
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

kv_offload *kv_offload_create(int64_t capacity)
{
    if (capacity < 1)
        return NULL;
    kv_offload *o = calloc(1, sizeof *o);
    if (o)
        o->capacity = o->st.capacity = capacity;
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

int32_t kv_offload_store(kv_offload *o, const kv_hash *keys, int32_t n)
{
    if (!o || n <= 0)
        return 0;
    uint64_t ep = ++o->epoch;
    int64_t held = 0, fresh = 0;
    for (int32_t i = 0; i < n; i++) {
        entry *e = find(o, keys[i]);
        if (e) {
            if (e->epoch != ep)
                held++;
            e->epoch = ep;
        } else
            fresh++; /* a key repeated in one offer counts twice: room to spare */
    }
    if (!fresh)
        return 0;
    int64_t evict = fresh - (o->capacity - o->used);
    if (evict > o->used - held) {
        o->st.skipped_stores++;
        return 0;
    }
    for (entry *e = o->lru; evict > 0 && e;) {
        entry *nx = e->next;
        if (e->epoch != ep) {
            unlink_entry(o, e);
            HASH_DEL(o->map, e);
            free(e);
            o->used--;
            o->st.evicted_blocks++;
            evict--;
        }
        e = nx;
    }
    int32_t stored = 0;
    for (int32_t i = n - 1; i >= 0; i--) { /* tails first: the head ends most recent */
        if (find(o, keys[i]))
            continue;
        entry *e = calloc(1, sizeof *e);
        if (!e)
            break;
        e->key = keys[i];
        e->epoch = ep;
        HASH_ADD(hh, o->map, key, sizeof e->key, e);
        push_mru(o, e);
        o->used++;
        stored++;
    }
    o->st.stored_blocks += stored;
    return stored;
}

int32_t kv_offload_lookup(kv_offload *o, const kv_hash *keys, int32_t start, int32_t max_blocks)
{
    if (!o || start < 0 || start >= max_blocks)
        return 0;
    int32_t n = 0;
    while (start + n < max_blocks && find(o, keys[start + n]))
        n++;
    for (int32_t i = start + n - 1; i >= start; i--) { /* reversed: the first hit ends most recent */
        entry *e = find(o, keys[i]);
        unlink_entry(o, e);
        push_mru(o, e);
    }
    return n;
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
