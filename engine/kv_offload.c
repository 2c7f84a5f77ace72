/* kv_offload: the host tier (kv_offload.h): a hash -> entry map (uthash)
 * and a list sorted by rank, the lowest (least recently used) at the head;
 * from 0.31 a record per running request of the block positions it
 * accessed. */
#include "kv_offload.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

/* A rank: (major, minor), compared major first (policies/lru.py _ranks:
 * an int before 0.33, a (rank, -position) pair from 0.33; before 0.31 the
 * list order alone, every change making a key the newest). */
typedef struct rank {
    int64_t major, minor;
} rank;

typedef struct entry {
    kv_hash key;
    uint64_t offer;            /* the last prepare_store that named it */
    rank rk;
    struct entry *prev, *next; /* the list, by rank */
    UT_hash_handle hh;
} entry;

/* One request's record (cpu/manager.py _RequestCacheAccess, lru.py
 * _RequestRank): the block positions it accessed, its provisional rank. */
typedef struct req_rec {
    int64_t id;
    int64_t rank;              /* 0.33: 0 until its first access */
    uint8_t *seen;             /* seen[pos]: position pos accessed */
    int32_t cap;
    UT_hash_handle hh;
} req_rec;

struct kv_offload {
    int64_t capacity, used;
    entry *map;
    entry *lru, *mru;
    int protect_offer;
    kv_offload_lru mode;
    int64_t next_rank;         /* lru.py _next_rank */
    uint64_t offer;
    req_rec *reqs;
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

kv_offload *kv_offload_create(int64_t capacity, int protect_offer, kv_offload_lru lru)
{
    if (capacity < 1 || lru < KV_OFFLOAD_LRU_TOUCH || lru > KV_OFFLOAD_LRU_PROVISIONAL)
        return NULL;
    kv_offload *o = calloc(1, sizeof *o);
    if (o) {
        o->capacity = o->st.capacity = capacity;
        o->protect_offer = protect_offer != 0;
        o->mode = lru;
    }
    return o;
}

static void drop_rec(kv_offload *o, req_rec *q)
{
    HASH_DEL(o->reqs, q);
    free(q->seen);
    free(q);
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

static int rank_less(rank a, rank b)
{
    return a.major < b.major || (a.major == b.major && a.minor < b.minor);
}

/* Link e (unlinked) in by its rank: walked from the newest end, where new
 * ranks land. */
static void place(kv_offload *o, entry *e)
{
    entry *p = o->mru;
    while (p && rank_less(e->rk, p->rk))
        p = p->prev;
    e->prev = p;
    e->next = p ? p->next : o->lru;
    if (e->next)
        e->next->prev = e;
    else
        o->mru = e;
    if (p)
        p->next = e;
    else
        o->lru = e;
}

/* Give e the newest rank of all (lru.py _assign_new_rank; before 0.31
 * OrderedDict.move_to_end). */
static void make_newest(kv_offload *o, entry *e)
{
    e->rk = (rank){++o->next_rank, 0};
    unlink_entry(o, e);
    push_mru(o, e);
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

static req_rec *rec_get(kv_offload *o, int64_t id)
{
    req_rec *q = NULL;
    HASH_FIND(hh, o->reqs, &id, sizeof id, q);
    if (!q && (q = calloc(1, sizeof *q)) != NULL) {
        q->id = id;
        HASH_ADD(hh, o->reqs, id, sizeof q->id, q);
    }
    return q;
}

/* The request's provisional rank, taken from the counter at its first use
 * (lru.py _get_request_rank). */
static int64_t req_rank(kv_offload *o, req_rec *q)
{
    if (!q->rank)
        q->rank = ++o->next_rank;
    return q->rank;
}

/* _record_request_cache_access of keys[0..n) at positions first.. for
 * request q: the positions it had not accessed yet are marked; from 0.33
 * (on_request_access) those held rise to (its rank, -position) unless
 * already higher. -1 when out of memory. */
static int record_access(kv_offload *o, req_rec *q, const kv_hash *keys, int32_t first, int32_t n)
{
    if (first < 0 || n > INT32_MAX - first)
        return -1;
    if (first + n > q->cap) {
        int32_t cap = q->cap ? q->cap : 16;
        while (cap < first + n)
            cap = cap > INT32_MAX / 2 ? first + n : cap * 2;
        uint8_t *g = realloc(q->seen, (size_t)cap);
        if (!g)
            return -1;
        memset(g + q->cap, 0, (size_t)(cap - q->cap));
        q->seen = g;
        q->cap = cap;
    }
    int any = 0;
    for (int32_t i = 0; i < n; i++) {
        if (q->seen[first + i])
            continue;
        q->seen[first + i] = 1;
        any = 1;
    }
    if (!any || o->mode != KV_OFFLOAD_LRU_PROVISIONAL)
        return 0;
    int64_t r = req_rank(o, q);
    for (int32_t i = 0; i < n; i++) {
        entry *e = find(o, keys[i]);
        rank want = {r, -(int64_t)(first + i)};
        if (e && rank_less(e->rk, want)) {
            e->rk = want;
            unlink_entry(o, e);
            place(o, e);
        }
    }
    return 0;
}

int32_t kv_offload_prepare_store(kv_offload *o, int64_t req_id, const kv_hash *keys, int32_t first, int32_t n)
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
    /* from 0.31 the whole offer is the request's access, recorded before
     * any allocation can fail */
    req_rec *q = NULL;
    if (o->mode != KV_OFFLOAD_LRU_TOUCH) {
        q = rec_get(o, req_id);
        if (!q || record_access(o, q, keys, first, n) < 0) {
            free(fresh);
            return -1;
        }
    }
    int64_t evict = nfresh - (o->capacity - o->used);
    if (evict > o->used - (o->protect_offer ? held : 0)) {
        free(fresh);
        o->st.skipped_stores++;
        return -1; /* "we could not evict enough blocks" */
    }
    /* lowest rank first: before 0.18 whichever they are (an offered key
     * that is held can go too: it was not among the keys to store), from
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
        if (o->mode == KV_OFFLOAD_LRU_PROVISIONAL) { /* lru.py insert: (request rank, -position) */
            e->rk = (rank){req_rank(o, q), -(int64_t)(first + i)};
            place(o, e);
        } else {
            e->rk = (rank){++o->next_rank, 0};
            push_mru(o, e);
        }
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
    for (int32_t i = n - 1; o && i >= 0; i--) { /* reversed: the first key ends newest */
        entry *e = find(o, keys[i]);
        if (e)
            make_newest(o, e);
    }
}

void kv_offload_scheduler_touch(kv_offload *o, const kv_hash *keys, int32_t n)
{
    if (o && o->mode == KV_OFFLOAD_LRU_TOUCH)
        kv_offload_touch(o, keys, n);
}

void kv_offload_prepare_load(kv_offload *o, int64_t req_id, const kv_hash *keys, int32_t first, int32_t n)
{
    if (!o || n <= 0 || o->mode == KV_OFFLOAD_LRU_TOUCH)
        return;
    req_rec *q = rec_get(o, req_id);
    if (q)
        (void)record_access(o, q, keys, first, n); /* out of memory: the ranks stay as they were */
}

void kv_offload_request_finished(kv_offload *o, int64_t req_id, const kv_hash *keys, int32_t n)
{
    req_rec *q = NULL;
    if (o)
        HASH_FIND(hh, o->reqs, &req_id, sizeof req_id, q);
    if (!q)
        return;
    /* order_request_keys, then _update_recency(reversed(...)): tail first,
     * so the head ends newest */
    for (int32_t i = (n < q->cap ? n : q->cap) - 1; i >= 0; i--) {
        entry *e = q->seen[i] ? find(o, keys[i]) : NULL;
        if (e)
            make_newest(o, e);
    }
    drop_rec(o, q);
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

int64_t kv_offload_entries(const kv_offload *o, kv_offload_entry *out, int64_t max, int64_t *next_rank)
{
    int64_t k = 0;
    for (const entry *e = o ? o->lru : NULL; e; e = e->next, k++)
        if (k < max)
            out[k] = (kv_offload_entry){e->key, e->rk.major, e->rk.minor};
    if (next_rank)
        *next_rank = o ? o->next_rank : 0;
    return k;
}

int64_t kv_offload_recs(const kv_offload *o, kv_offload_rec *out, int64_t max)
{
    int64_t k = 0;
    for (const req_rec *q = o ? o->reqs : NULL; q; q = q->hh.next, k++)
        if (k < max)
            out[k] = (kv_offload_rec){q->id, q->rank, q->cap, q->seen};
    return k;
}

/* Drop every key and record; the counters stay. */
static void clear_all(kv_offload *o)
{
    entry *e, *t;
    HASH_ITER(hh, o->map, e, t) {
        HASH_DEL(o->map, e);
        free(e);
    }
    req_rec *q, *qt;
    HASH_ITER(hh, o->reqs, q, qt)
        drop_rec(o, q);
    o->lru = o->mru = NULL;
    o->used = 0;
    o->next_rank = 0;
}

void kv_offload_destroy(kv_offload *o)
{
    if (!o)
        return;
    clear_all(o);
    free(o);
}

int kv_offload_restore(kv_offload *o, const kv_offload_entry *e, int64_t n, int64_t next_rank,
                       const kv_offload_rec *r, int64_t nr, const kv_offload_stats *st)
{
    clear_all(o);
    if (n < 0 || n > o->capacity || nr < 0)
        return -1;
    for (int64_t i = 0; i < n; i++) {
        rank rk = {e[i].rank_major, e[i].rank_minor};
        if (find(o, e[i].key) || (o->mru && !rank_less(o->mru->rk, rk)) || rk.major > next_rank)
            goto bad;
        entry *x = calloc(1, sizeof *x);
        if (!x)
            goto bad;
        x->key = e[i].key;
        x->rk = rk;
        HASH_ADD(hh, o->map, key, sizeof x->key, x);
        push_mru(o, x);
        o->used++;
    }
    o->next_rank = next_rank;
    for (int64_t i = 0; i < nr; i++) {
        req_rec *q = NULL;
        HASH_FIND(hh, o->reqs, &r[i].req_id, sizeof r[i].req_id, q);
        if (q || r[i].nseen < 0 || r[i].rank < 0 || r[i].rank > next_rank || (r[i].nseen && !r[i].seen) ||
            !(q = rec_get(o, r[i].req_id)))
            goto bad;
        q->rank = r[i].rank;
        if (r[i].nseen) {
            if (!(q->seen = malloc((size_t)r[i].nseen)))
                goto bad;
            memcpy(q->seen, r[i].seen, (size_t)r[i].nseen);
            q->cap = r[i].nseen;
        }
    }
    if (st) {
        int64_t cap = o->st.capacity;
        o->st = *st;
        o->st.capacity = cap;
    }
    o->offer = 0; /* any value: an entry's offer is only ever compared with the current one */
    return 0;
bad:
    clear_all(o);
    return -1;
}
