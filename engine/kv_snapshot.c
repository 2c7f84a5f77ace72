#include "kv_snapshot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kv_engine_int.h"
#include "kv_offload.h"
#include "kv_util.h"

#define MAGIC 0x3153564Bu /* "KVS1" */

/* ---- byte writer / reader ---------------------------------------------- */

typedef struct wbuf {
    kv_snapshot *s;
    int oom;
} wbuf;

static int wgrow(wbuf *w, size_t more)
{
    kv_snapshot *s = w->s;
    if (w->oom)
        return -1;
    if (s->len + more <= s->cap)
        return 0;
    size_t ncap = s->cap ? s->cap : 4096;
    while (ncap < s->len + more)
        ncap *= 2;
    uint8_t *n = realloc(s->data, ncap);
    if (!n) {
        w->oom = 1;
        return -1;
    }
    s->data = n;
    s->cap = ncap;
    return 0;
}

static void put_bytes(wbuf *w, const void *p, size_t n)
{
    if (n && wgrow(w, n) == 0) {
        memcpy(w->s->data + w->s->len, p, n);
        w->s->len += n;
    }
}

static void put_u8(wbuf *w, uint8_t v) { put_bytes(w, &v, 1); }

static void put_uv(wbuf *w, uint64_t v)
{
    uint8_t b[10];
    int n = 0;
    while (v >= 0x80) {
        b[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b[n++] = (uint8_t)v;
    put_bytes(w, b, (size_t)n);
}

static void put_sv(wbuf *w, int64_t v) { put_uv(w, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63)); }

/* doubles: the common -1 and 0 in one byte, else the 8 raw bytes */
static void put_f64(wbuf *w, double v)
{
    if (v == -1.0) {
        put_u8(w, 1);
    } else if (v == 0.0 && !signbit(v)) {
        put_u8(w, 0);
    } else {
        put_u8(w, 2);
        put_bytes(w, &v, sizeof v);
    }
}

typedef struct rbuf {
    const uint8_t *p, *end;
    int bad;
} rbuf;

static void get_bytes(rbuf *r, void *out, size_t n)
{
    if (r->bad || (size_t)(r->end - r->p) < n) {
        r->bad = 1;
        memset(out, 0, n);
        return;
    }
    memcpy(out, r->p, n);
    r->p += n;
}

static uint8_t get_u8(rbuf *r)
{
    uint8_t v;
    get_bytes(r, &v, 1);
    return v;
}

static uint64_t get_uv(rbuf *r)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        uint8_t b = get_u8(r);
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
    }
    r->bad = 1;
    return 0;
}

static int64_t get_sv(rbuf *r)
{
    uint64_t u = get_uv(r);
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

static double get_f64(rbuf *r)
{
    uint8_t tag = get_u8(r);
    if (tag == 1)
        return -1.0;
    if (tag == 0)
        return 0.0;
    double v;
    get_bytes(r, &v, sizeof v);
    if (tag != 2)
        r->bad = 1;
    return v;
}

/* an int32 field read from an unsigned varint, out of range = damaged */
static int32_t get_u32(rbuf *r)
{
    uint64_t v = get_uv(r);
    if (v > INT32_MAX)
        r->bad = 1;
    return (int32_t)v;
}

/* an int32 field read from a signed varint, out of range = damaged */
static int32_t get_i32(rbuf *r)
{
    int64_t v = get_sv(r);
    if (v < INT32_MIN || v > INT32_MAX)
        r->bad = 1;
    return (int32_t)v;
}

/* ---- sections ------------------------------------------------------------ */

static void put_hist(wbuf *w, const kv_hist *h)
{
    put_uv(w, (uint64_t)h->count);
    put_f64(w, h->sum);
    put_f64(w, h->min);
    put_f64(w, h->max);
    for (int i = 0; i <= KV_METRICS_MAX_BUCKETS; i++)
        put_uv(w, (uint64_t)h->counts[i]);
    for (int i = 0; i <= KV_METRICS_FINE; i++)
        put_uv(w, (uint64_t)h->fine[i]);
}

static void get_hist(rbuf *r, kv_hist *h)
{
    h->count = (int64_t)get_uv(r);
    h->sum = get_f64(r);
    h->min = get_f64(r);
    h->max = get_f64(r);
    for (int i = 0; i <= KV_METRICS_MAX_BUCKETS; i++)
        h->counts[i] = (int64_t)get_uv(r);
    for (int i = 0; i <= KV_METRICS_FINE; i++)
        h->fine[i] = (int64_t)get_uv(r);
}

/* BF_REQ: the block's hash is its holder's block hash at that table index
 * (the case for every block a running request holds), so it is not stored:
 * loading takes it from the request, whose hashes it recomputes anyway. */
enum { BF_HASH = 1, BF_MAP = 2, BF_DUP = 4, BF_REF = 8, BF_REQ = 16 };

#define MARK_FROM_REQ (-2) /* prev_free of a block waiting for its hash during a load */

static void put_pool(wbuf *w, const kv_engine *e)
{
    const kv_pool *p = e->pool;
    int32_t n = kv_pool_num_blocks(p);
    /* which hashed blocks a running request's table explains (scratch: counts) */
    memset(e->counts, 0, (size_t)n * sizeof *e->counts);
    for (int32_t k = 0; k < kv_sched_num_running(e->sched); k++) {
        const kv_req *q = kv_sched_running_at(e->sched, k);
        int32_t lim = q->num_blocks < q->num_hashes ? q->num_blocks : q->num_hashes;
        for (int32_t i = 0; i < lim; i++) {
            const kv_block *b = kv_pool_block(p, q->table[i]);
            if (b->has_hash && kv_hash_eq(b->hash, q->hashes[i]))
                e->counts[q->table[i]] = 1;
        }
    }
    kv_pool_stats st;
    kv_pool_get_stats(p, &st);
    put_uv(w, (uint64_t)st.allocations);
    put_uv(w, (uint64_t)st.frees);
    put_uv(w, (uint64_t)st.evictions);
    put_uv(w, (uint64_t)st.hits);
    for (int32_t id = 1; id < n; id++) {
        const kv_block *b = kv_pool_block(p, id);
        int from_req = b->has_hash && e->counts[id];
        uint8_t f = (uint8_t)((b->has_hash ? BF_HASH : 0) | (b->in_map ? BF_MAP : 0) | (b->dup_next >= 0 ? BF_DUP : 0) |
                              (b->ref_cnt ? BF_REF : 0) | (from_req ? BF_REQ : 0));
        put_u8(w, f);
        if (f & BF_REF)
            put_uv(w, (uint64_t)b->ref_cnt);
        if ((f & BF_HASH) && !from_req)
            put_bytes(w, &b->hash, sizeof b->hash);
        if (f & BF_DUP)
            put_uv(w, (uint64_t)b->dup_next);
    }
    /* the free queue, head to tail, as id deltas (runs of neighbours cost a byte each) */
    const kv_pool_fq *q = kv_pool_queue(p);
    put_uv(w, (uint64_t)q->num_free);
    int32_t prev = 0;
    for (int32_t id = kv_pool_fq_head(q); id >= 0 && id < q->n; id = q->blocks[id].next_free) {
        put_sv(w, (int64_t)id - prev);
        prev = id;
    }
}

/* The block records and the free queue's order (into free_ids); the pool
 * is finished by finish_pool once the requests are back. */
static int get_pool(rbuf *r, kv_pool *p, kv_block **blocks_out, int32_t *free_ids, int32_t *nfree_out,
                    kv_pool_stats *st, char *err, size_t errlen)
{
    int32_t n = kv_pool_num_blocks(p);
    st->allocations = (int64_t)get_uv(r);
    st->frees = (int64_t)get_uv(r);
    st->evictions = (int64_t)get_uv(r);
    st->hits = (int64_t)get_uv(r);
    kv_block *blocks = kv_pool_restore_begin(p);
    *blocks_out = blocks;
    for (int32_t id = 1; id < n && !r->bad; id++) {
        kv_block *b = &blocks[id];
        uint8_t f = get_u8(r);
        b->ref_cnt = f & BF_REF ? get_u32(r) : 0;
        b->has_hash = (f & BF_HASH) != 0;
        b->in_map = (f & BF_MAP) != 0;
        if ((f & BF_HASH) && (f & BF_REQ))
            b->prev_free = MARK_FROM_REQ;
        else if (f & BF_HASH)
            get_bytes(r, &b->hash, sizeof b->hash);
        b->dup_next = f & BF_DUP ? get_u32(r) : -1;
        if (b->dup_next >= n || ((f & BF_REQ) && !(f & BF_HASH)))
            r->bad = 1;
    }
    uint64_t nfree = get_uv(r);
    if (nfree > (uint64_t)n)
        r->bad = 1;
    int64_t prev = 0;
    for (uint64_t k = 0; k < nfree && !r->bad; k++) {
        prev += get_sv(r);
        if (prev <= 0 || prev >= n)
            r->bad = 1;
        free_ids[k] = (int32_t)prev;
    }
    *nfree_out = (int32_t)nfree;
    if (r->bad)
        return kv_errf(err, errlen, KV_ENGINE_EINVAL, "damaged engine image (block pool)");
    return 0;
}

static int finish_pool(kv_engine *e, kv_block *blocks, const int32_t *free_ids, int32_t nfree,
                       const kv_pool_stats *st, char *err, size_t errlen)
{
    int32_t n = e->cfg.num_blocks;
    for (int32_t k = 0; k < kv_sched_num_running(e->sched); k++) {
        const kv_req *q = kv_sched_running_at(e->sched, k);
        int32_t lim = q->num_blocks < q->num_hashes ? q->num_blocks : q->num_hashes;
        for (int32_t i = 0; i < lim; i++) {
            int32_t id = q->table[i];
            if (id > 0 && id < n && blocks[id].prev_free == MARK_FROM_REQ) {
                blocks[id].hash = q->hashes[i];
                blocks[id].prev_free = -1;
            }
        }
    }
    for (int32_t id = 1; id < n; id++)
        if (blocks[id].prev_free == MARK_FROM_REQ)
            return kv_errf(err, errlen, KV_ENGINE_EINVAL, "damaged engine image (block %d has no holder)", (int)id);
    char perr[200];
    if (kv_pool_restore_end(e->pool, free_ids, nfree, st, perr, sizeof perr) != 0)
        return kv_errf(err, errlen, KV_ENGINE_EINVAL, "engine image: block pool: %s", perr);
    return 0;
}

enum { RF_IDS = 1, RF_SALT = 2, RF_PREFIX = 4, RF_OWN_SEED = 8 };

/* The host tier (kv_offload.h): a flag, its keys with their ranks from the
 * lowest, the rank counter, the running requests' records, the counters. */
static void put_tier(wbuf *w, const kv_engine *e)
{
    const kv_offload *o = e->kvcm.offload;
    put_u8(w, o != NULL);
    if (!o)
        return;
    int64_t next = 0, n = kv_offload_entries(o, NULL, 0, NULL);
    kv_offload_entry *ent = malloc((size_t)(n > 0 ? n : 1) * sizeof *ent);
    int64_t nr = kv_offload_recs(o, NULL, 0);
    kv_offload_rec *rec = malloc((size_t)(nr > 0 ? nr : 1) * sizeof *rec);
    if (!ent || !rec) {
        free(ent);
        free(rec);
        w->oom = 1;
        return;
    }
    kv_offload_entries(o, ent, n, &next);
    kv_offload_recs(o, rec, nr);
    put_uv(w, (uint64_t)n);
    put_uv(w, (uint64_t)next);
    for (int64_t i = 0; i < n; i++) {
        put_bytes(w, &ent[i].key, sizeof ent[i].key);
        put_sv(w, ent[i].rank_major);
        put_sv(w, ent[i].rank_minor);
    }
    put_uv(w, (uint64_t)nr);
    for (int64_t i = 0; i < nr; i++) {
        put_uv(w, (uint64_t)rec[i].req_id);
        put_uv(w, (uint64_t)rec[i].rank);
        put_uv(w, (uint64_t)rec[i].nseen);
        put_bytes(w, rec[i].seen, (size_t)rec[i].nseen);
    }
    kv_offload_stats st;
    kv_offload_get_stats(o, &st);
    put_bytes(w, &st, sizeof st);
    free(ent);
    free(rec);
}

static int get_tier(rbuf *r, kv_engine *e, char *err, size_t errlen)
{
    kv_offload *o = e->kvcm.offload;
    if (get_u8(r) != (o != NULL))
        return kv_errf(err, errlen, KV_ENGINE_EINVAL, "damaged engine image (host tier)");
    if (!o)
        return 0;
    kv_offload_stats cap;
    kv_offload_get_stats(o, &cap);
    uint64_t n = get_uv(r);
    int64_t next = (int64_t)get_uv(r);
    if (r->bad || n > (uint64_t)cap.capacity || next < 0)
        return kv_errf(err, errlen, KV_ENGINE_EINVAL, "damaged engine image (host tier)");
    kv_offload_entry *ent = malloc((size_t)(n ? n : 1) * sizeof *ent);
    if (!ent)
        return kv_errf(err, errlen, KV_ENGINE_ENOMEM, "out of memory loading an engine image");
    for (uint64_t i = 0; i < n && !r->bad; i++) {
        get_bytes(r, &ent[i].key, sizeof ent[i].key);
        ent[i].rank_major = get_sv(r);
        ent[i].rank_minor = get_sv(r);
    }
    uint64_t nr = get_uv(r);
    int rc = 0;
    kv_offload_rec *rec = NULL;
    uint8_t **seen = NULL;
    if (r->bad || nr > (uint64_t)e->num_ids) {
        rc = kv_errf(err, errlen, KV_ENGINE_EINVAL, "damaged engine image (host tier)");
        goto out;
    }
    rec = calloc(nr ? nr : 1, sizeof *rec);
    seen = calloc(nr ? nr : 1, sizeof *seen);
    if (!rec || !seen) {
        rc = kv_errf(err, errlen, KV_ENGINE_ENOMEM, "out of memory loading an engine image");
        goto out;
    }
    for (uint64_t i = 0; i < nr && !r->bad; i++) {
        rec[i].req_id = (int64_t)get_uv(r);
        rec[i].rank = (int64_t)get_uv(r);
        uint64_t ns = get_uv(r);
        if (r->bad || ns > (uint64_t)e->cfg.max_model_len) {
            r->bad = 1;
            break;
        }
        rec[i].nseen = (int32_t)ns;
        if (ns && !(seen[i] = malloc(ns))) {
            rc = kv_errf(err, errlen, KV_ENGINE_ENOMEM, "out of memory loading an engine image");
            goto out;
        }
        get_bytes(r, seen[i], ns);
        rec[i].seen = seen[i];
    }
    kv_offload_stats st;
    get_bytes(r, &st, sizeof st);
    if (r->bad || kv_offload_restore(o, ent, (int64_t)n, next, rec, (int64_t)nr, &st) < 0)
        rc = kv_errf(err, errlen, KV_ENGINE_EINVAL, "damaged engine image (host tier)");
out:
    for (uint64_t i = 0; seen && i < nr; i++)
        free(seen[i]);
    free(seen);
    free(rec);
    free(ent);
    return rc;
}

static void put_req(wbuf *w, const kv_engine *e, const kv_req *q)
{
    uint64_t dflt_seed = kv_hash_mix(e->cfg.seed, (uint64_t)q->id + 1);
    uint8_t f = (uint8_t)((q->prompt_ids ? RF_IDS : 0) | (q->has_salt ? RF_SALT : 0) | (q->prefix_len ? RF_PREFIX : 0) |
                          (q->tok_seed != dflt_seed ? RF_OWN_SEED : 0));
    put_uv(w, (uint64_t)q->id);
    put_u8(w, f);
    put_uv(w, (uint64_t)q->status);
    put_uv(w, (uint64_t)q->prefix_len);
    put_uv(w, (uint64_t)q->prompt_len);
    put_uv(w, (uint64_t)q->max_output);
    put_uv(w, (uint64_t)q->num_output);
    put_uv(w, (uint64_t)q->num_computed);
    put_uv(w, (uint64_t)q->high_water);
    put_sv(w, q->num_cached_tokens);
    put_uv(w, (uint64_t)q->admit_hit);
    put_uv(w, (uint64_t)q->num_preemptions);
    put_sv(w, q->priority);
    put_f64(w, q->arrival_s);
    put_f64(w, q->first_sched_s);
    put_f64(w, q->first_token_s);
    put_f64(w, q->last_token_s);
    put_f64(w, q->finish_s);
    if (f & RF_PREFIX)
        put_bytes(w, &q->prefix_seed, sizeof q->prefix_seed);
    if (f & RF_OWN_SEED)
        put_bytes(w, &q->tok_seed, sizeof q->tok_seed);
    if (f & RF_SALT)
        put_bytes(w, &q->salt, sizeof q->salt);
    if (f & RF_IDS) {
        int32_t nids = q->prompt_len - q->prefix_len;
        for (int32_t i = 0; i < nids; i++)
            put_uv(w, (uint64_t)q->prompt_ids[i]);
    }
    put_uv(w, (uint64_t)q->num_blocks);
    int32_t prev = 0;
    for (int32_t i = 0; i < q->num_blocks; i++) {
        put_sv(w, (int64_t)q->table[i] - prev);
        prev = q->table[i];
    }
    put_uv(w, (uint64_t)q->num_hashes);
    put_uv(w, (uint64_t)q->num_cached_blocks);
    put_uv(w, (uint64_t)q->reserved_blocks);
    put_uv(w, (uint64_t)q->scheduled);
    put_uv(w, (uint64_t)(q->remote_prefill != 0) | (uint64_t)(q->kv_lost != 0) << 1);
    put_uv(w, (uint64_t)q->offload_next);
}

/* A request record from the engine's free list (or a new one), arrays kept. */
static kv_req *take_req(kv_engine *e)
{
    kv_req *q = e->free_reqs;
    if (q)
        e->free_reqs = q->next_free;
    else if (!(q = calloc(1, sizeof *q)))
        return NULL;
    kv_req_clear(q);
    return q;
}

static void give_req(kv_engine *e, kv_req *q)
{
    q->next_free = e->free_reqs;
    e->free_reqs = q;
}

#define UNCLAIMED (-3) /* sched_index of a request record left from before a load */

/* A request record. The loading engine's own record of the same id is
 * reused when it holds the same tokens (same seeds, salt and prompt): its
 * block hashes are then still right, and only the new ones are computed
 * (seeking back and forth in one run recomputes almost nothing). */
static kv_req *get_req(rbuf *r, kv_engine *e, char *err, size_t errlen, int *rc)
{
    const kv_engine_config *c = &e->cfg;
    kv_req t;
    memset(&t, 0, sizeof t);
    t.id = (int64_t)get_uv(r);
    uint8_t f = get_u8(r);
    t.status = (int)get_uv(r);
    t.prefix_len = get_u32(r);
    t.prompt_len = get_u32(r);
    t.max_output = get_u32(r);
    t.num_output = get_u32(r);
    t.num_computed = get_u32(r);
    t.high_water = get_u32(r);
    t.num_cached_tokens = get_i32(r);
    t.admit_hit = get_u32(r);
    t.num_preemptions = get_u32(r);
    t.priority = get_i32(r);
    t.arrival_s = get_f64(r);
    t.first_sched_s = get_f64(r);
    t.first_token_s = get_f64(r);
    t.last_token_s = get_f64(r);
    t.finish_s = get_f64(r);
    if (f & RF_PREFIX)
        get_bytes(r, &t.prefix_seed, sizeof t.prefix_seed);
    t.tok_seed = kv_hash_mix(c->seed, (uint64_t)t.id + 1);
    if (f & RF_OWN_SEED)
        get_bytes(r, &t.tok_seed, sizeof t.tok_seed);
    t.has_salt = (f & RF_SALT) != 0;
    if (f & RF_SALT)
        get_bytes(r, &t.salt, sizeof t.salt);
    t.vocab = c->vocab_size;
    int32_t nids = t.prompt_len - t.prefix_len;
    if (r->bad || t.id < 0 || t.id >= e->num_ids || t.prefix_len < 0 || nids < 0 || t.prompt_len < 1 ||
        t.prompt_len >= c->max_model_len || t.max_output < 1 || t.num_output < 0 || t.num_output > t.max_output ||
        kv_req_num_tokens(&t) > c->max_model_len || t.num_computed < 0 || t.num_computed > kv_req_num_tokens(&t) ||
        t.high_water < 0 || t.status < KV_REQ_WAITING || t.status > KV_REQ_ABORTED) {
        *rc = kv_errf(err, errlen, KV_ENGINE_EINVAL, "damaged engine image (request)");
        return NULL;
    }
    kv_req *cand = e->by_id[t.id];
    if (cand && cand->sched_index != UNCLAIMED) {
        *rc = kv_errf(err, errlen, KV_ENGINE_EINVAL, "damaged engine image (request %lld twice)", (long long)t.id);
        return NULL;
    }
    int same = cand && cand->prefix_len == t.prefix_len && cand->prompt_len == t.prompt_len &&
               cand->prefix_seed == t.prefix_seed && cand->tok_seed == t.tok_seed && cand->has_salt == t.has_salt &&
               cand->salt == t.salt && (cand->prompt_ids != NULL) == ((f & RF_IDS) != 0);
    kv_req *q = cand;
    if (!same) {
        if (cand)
            give_req(e, cand);
        e->by_id[t.id] = NULL;
        q = take_req(e);
        if (!q) {
            *rc = kv_errf(err, errlen, KV_ENGINE_ENOMEM, "out of memory loading an engine image");
            return NULL;
        }
    }
    e->by_id[t.id] = q; /* claimed: a failure from here on leaves it for clear_requests */
    int32_t old_hashes = same ? q->num_hashes : 0;
    t.prompt_ids = q->prompt_ids;
    t.prompt_ids_cap = q->prompt_ids_cap;
    t.table = q->table;
    t.table_cap = q->table_cap;
    t.hashes = q->hashes;
    t.hashes_cap = q->hashes_cap;
    t.sched_index = -1;
    *q = t;
    if (f & RF_IDS) {
        if (q->prompt_ids_cap < nids) {
            int32_t *n = realloc(q->prompt_ids, (size_t)(nids > 0 ? nids : 1) * sizeof *n);
            if (!n)
                goto oom;
            q->prompt_ids = n;
            q->prompt_ids_cap = nids;
            same = 0;
        }
        for (int32_t i = 0; i < nids; i++) {
            int32_t v = get_u32(r);
            same &= q->prompt_ids[i] == v;
            q->prompt_ids[i] = v;
        }
    } else {
        free(q->prompt_ids); /* NULL prompt_ids means "derived from the seed" */
        q->prompt_ids = NULL;
        q->prompt_ids_cap = 0;
    }
    int32_t nblocks = get_u32(r);
    /* table room as kv_engine_submit reserves it */
    int64_t total = (int64_t)q->prompt_len + q->max_output;
    if (total > c->max_model_len)
        total = c->max_model_len;
    int64_t maxb = kv_cdiv(total > 0 ? total : 1, c->block_size);
    if (kv_kvcm_max_blocks(&e->kvcm, (int32_t)total) > maxb)
        maxb = kv_kvcm_max_blocks(&e->kvcm, (int32_t)total);
    if (nblocks > maxb)
        maxb = nblocks;
    if (r->bad || nblocks < 0 || nblocks >= c->num_blocks)
        goto bad;
    if (kv_req_reserve(q, (int32_t)maxb) != 0)
        goto oom;
    int64_t prev = 0;
    for (int32_t i = 0; i < nblocks; i++) {
        prev += get_sv(r);
        if (prev <= 0 || prev >= c->num_blocks)
            r->bad = 1;
        q->table[i] = (int32_t)prev;
    }
    q->num_blocks = nblocks;
    int32_t nh = get_u32(r);
    q->num_cached_blocks = get_u32(r);
    q->reserved_blocks = get_u32(r);
    q->scheduled = get_u32(r);
    uint64_t rf = get_uv(r);
    q->remote_prefill = (int32_t)(rf & 1);
    q->kv_lost = (int32_t)(rf >> 1 & 1);
    q->offload_next = get_u32(r);
    if (r->bad || nh < 0 || nh > q->hashes_cap || nh > kv_req_num_tokens(q) / c->block_size || rf > 3 ||
        q->offload_next < 0 || q->offload_next > nh)
        goto bad;
    /* block hashes come back from the tokens: the chain over full blocks */
    q->num_hashes = same ? (old_hashes < nh ? old_hashes : nh) : 0;
    kv_req_update_hashes(q, c->block_size, e->kvcm.none_hash);
    if (q->num_hashes != nh)
        goto bad;
    return q;
bad:
    *rc = kv_errf(err, errlen, KV_ENGINE_EINVAL, "damaged engine image (request)");
    return NULL;
oom:
    *rc = kv_errf(err, errlen, KV_ENGINE_ENOMEM, "out of memory loading an engine image");
    return NULL;
}

/* ---- events -------------------------------------------------------------- */

static void put_event(wbuf *w, const kv_event *v, uint64_t log_no, uint64_t *prev_seq)
{
    put_uv(w, v->seq - *prev_seq);
    *prev_seq = v->seq;
    put_u8(w, (uint8_t)v->type);
    put_sv(w, v->block_id);
    put_sv(w, v->req_id);
    put_sv(w, v->value);
    put_uv(w, (uint64_t)v->step);
    put_f64(w, v->clock_s);
    if (v->type == KV_EV_LOG) {
        put_uv(w, log_no);
        put_u8(w, (uint8_t)v->level);
        size_t n = v->text ? strlen(v->text) : 0;
        put_uv(w, n);
        put_bytes(w, v->text, n);
    }
}

/* The kept log lines older than the newest KV_SNAPSHOT_EVENTS events, then
 * those events, oldest first. */
static void put_events(wbuf *w, const kv_engine *e)
{
    uint64_t last = kv_events_last(e->ev), nlogs = kv_events_num_logs(e->ev);
    kv_event tail[KV_SNAPSHOT_EVENTS];
    uint64_t since = last > KV_SNAPSHOT_EVENTS ? last - KV_SNAPSHOT_EVENTS : 0;
    int32_t ntail = kv_engine_events_since(e, since, tail, KV_SNAPSHOT_EVENTS);
    uint64_t first_tail = ntail > 0 ? tail[0].seq : last + 1;
    uint64_t count = 0;
    int32_t tail_logs = 0;
    for (int32_t i = 0; i < ntail; i++)
        tail_logs += tail[i].type == KV_EV_LOG;
    uint64_t log0 = nlogs > 256 ? nlogs - 256 : 0;
    for (uint64_t no = log0; no < nlogs; no++) {
        uint64_t seq = kv_events_log_seq(e->ev, no);
        count += seq && seq < first_tail;
    }
    put_uv(w, last + 1);
    put_uv(w, nlogs);
    put_uv(w, count + (uint64_t)ntail);
    uint64_t prev = 0;
    for (uint64_t no = log0; no < nlogs; no++) {
        uint64_t seq = kv_events_log_seq(e->ev, no);
        kv_event v;
        if (seq && seq < first_tail && kv_engine_events_since(e, seq - 1, &v, 1) == 1 && v.seq == seq)
            put_event(w, &v, no, &prev);
    }
    uint64_t no = nlogs - (uint64_t)tail_logs;
    for (int32_t i = 0; i < ntail; i++)
        put_event(w, &tail[i], tail[i].type == KV_EV_LOG ? no++ : 0, &prev);
}

static int get_events(rbuf *r, kv_engine *e)
{
    uint64_t next_seq = get_uv(r), nlogs = get_uv(r), count = get_uv(r);
    if (r->bad || next_seq == 0)
        return -1;
    kv_events_clear(e->ev, next_seq, nlogs);
    uint64_t prev = 0;
    char text[256];
    for (uint64_t k = 0; k < count && !r->bad; k++) {
        kv_event v;
        uint64_t log_no = 0;
        memset(&v, 0, sizeof v);
        v.seq = prev + get_uv(r);
        prev = v.seq;
        v.type = (kv_event_type)get_u8(r);
        v.block_id = get_i32(r);
        v.req_id = get_sv(r);
        v.value = get_sv(r);
        v.step = (int64_t)get_uv(r);
        v.clock_s = get_f64(r);
        if ((unsigned)v.type >= KV_EV_COUNT || v.seq >= next_seq)
            r->bad = 1;
        if (v.type == KV_EV_LOG) {
            log_no = get_uv(r);
            v.level = get_u8(r);
            uint64_t n = get_uv(r);
            if (n >= sizeof text || log_no >= nlogs)
                r->bad = 1;
            else
                get_bytes(r, text, (size_t)n);
            text[r->bad ? 0 : n] = '\0';
            v.text = text;
        }
        if (!r->bad)
            kv_events_put(e->ev, &v, log_no);
    }
    return r->bad ? -1 : 0;
}

/* ---- timeline -------------------------------------------------------------- */

static void put_sample(wbuf *w, const kv_timeline_sample *t)
{
    put_uv(w, (uint64_t)t->step);
    put_f64(w, t->clock_s);
    put_f64(w, t->kv_usage);
    put_uv(w, (uint64_t)t->num_running);
    put_uv(w, (uint64_t)t->num_waiting);
    put_uv(w, (uint64_t)t->num_scheduled_tokens);
    put_uv(w, (uint64_t)t->num_preempted);
    put_uv(w, (uint64_t)t->num_preemptions_total);
    put_f64(w, t->prefix_hit_rate);
    put_f64(w, t->external_hit_rate);
    put_f64(w, t->tokens_per_s);
    put_uv(w, (uint64_t)t->work_with_cache);
    put_uv(w, (uint64_t)t->work_without_cache);
    put_uv(w, (uint64_t)t->generation_tokens_total);
    put_uv(w, (uint64_t)t->prompt_tokens_total);
    put_uv(w, (uint64_t)t->prompt_computed_total);
}

static void get_sample(rbuf *r, kv_timeline_sample *t)
{
    t->step = (int64_t)get_uv(r);
    t->clock_s = get_f64(r);
    t->kv_usage = get_f64(r);
    t->num_running = get_u32(r);
    t->num_waiting = get_u32(r);
    t->num_scheduled_tokens = get_u32(r);
    t->num_preempted = get_u32(r);
    t->num_preemptions_total = (int64_t)get_uv(r);
    t->prefix_hit_rate = get_f64(r);
    t->external_hit_rate = get_f64(r);
    t->tokens_per_s = get_f64(r);
    t->work_with_cache = (int64_t)get_uv(r);
    t->work_without_cache = (int64_t)get_uv(r);
    t->generation_tokens_total = (int64_t)get_uv(r);
    t->prompt_tokens_total = (int64_t)get_uv(r);
    t->prompt_computed_total = (int64_t)get_uv(r);
}

/* ---- the image ------------------------------------------------------------- */

void kv_snapshot_init(kv_snapshot *s) { memset(s, 0, sizeof *s); }

void kv_snapshot_free(kv_snapshot *s)
{
    free(s->data);
    memset(s, 0, sizeof *s);
}

static void put_config(wbuf *w, const kv_engine_config *c)
{
    put_uv(w, (uint64_t)c->num_blocks);
    put_uv(w, (uint64_t)c->block_size);
    put_uv(w, (uint64_t)c->max_num_seqs);
    put_uv(w, (uint64_t)c->max_model_len);
    put_uv(w, (uint64_t)c->tensor_parallel_size);
    put_uv(w, (uint64_t)c->scheduling_policy);
    put_uv(w, c->seed);
}

int kv_snapshot_save(const kv_engine *e, kv_snapshot *s, char *err, size_t errlen)
{
    wbuf w = {s, 0};
    s->len = 0;
    s->step = e->step;
    uint32_t magic = MAGIC;
    put_bytes(&w, &magic, sizeof magic);
    put_config(&w, &e->cfg);
    /* the mode twice (the second inverted): a damaged byte cannot pass for
     * another valid mode, under which the rest of the image would be read */
    put_u8(&w, (uint8_t)e->cfg.mode);
    put_u8(&w, (uint8_t)(0xff ^ (int)e->cfg.mode));
    put_uv(&w, (uint64_t)e->step);
    put_f64(&w, e->clock);
    put_uv(&w, (uint64_t)e->num_ids);
    put_uv(&w, (uint64_t)e->num_done);
    put_f64(&w, e->usage_time);
    put_f64(&w, e->waiting_time);
    put_f64(&w, e->running_time);
    put_f64(&w, e->total_time);
    put_bytes(&w, &e->m, sizeof e->m);
    for (int k = 0; k < KV_HIST_COUNT; k++)
        put_hist(&w, &e->hist[k]);
    put_uv(&w, (uint64_t)e->kvcm.queries);
    put_uv(&w, (uint64_t)e->kvcm.hits);
    put_uv(&w, (uint64_t)e->kvcm.preempted_queries);
    put_uv(&w, (uint64_t)e->kvcm.preempted_hits);
    put_uv(&w, (uint64_t)e->kvcm.hash_conflicts);
    put_tier(&w, e);
    put_pool(&w, e);
    /* requests: running, then waiting (storage order), then the finished
     * ones still readable (ring slot order) */
    int32_t nrun = kv_sched_num_running(e->sched), nwait = kv_sched_num_waiting(e->sched);
    int32_t ndone = e->num_done < DONE_KEEP ? (int32_t)e->num_done : DONE_KEEP;
    put_uv(&w, (uint64_t)nrun);
    put_uv(&w, (uint64_t)nwait);
    put_uv(&w, (uint64_t)ndone);
    for (int32_t k = 0; k < nrun; k++)
        put_req(&w, e, kv_sched_running_at(e->sched, k));
    for (int32_t k = 0; k < nwait; k++)
        put_req(&w, e, kv_sched_waiting_at(e->sched, k));
    for (int32_t k = 0; k < ndone; k++)
        put_req(&w, e, e->done[k]);
    put_uv(&w, (uint64_t)kv_sched_num_preemptions(e->sched));
    put_uv(&w, (uint64_t)kv_sched_remote_tokens(e->sched));
    /* the last step's decisions */
    put_sv(&w, e->ls_step);
    put_uv(&w, (uint64_t)e->ls_n);
    put_uv(&w, (uint64_t)e->ls_first_new);
    for (int32_t k = 0; k < e->ls_n; k++) {
        put_uv(&w, (uint64_t)e->ls_ids[k]);
        put_uv(&w, (uint64_t)e->ls_tok[k]);
        put_uv(&w, (uint64_t)e->ls_hit[k]);
        put_u8(&w, e->ls_resumed[k]);
    }
    put_uv(&w, (uint64_t)e->ls_npre);
    for (int32_t k = 0; k < e->ls_npre; k++)
        put_uv(&w, (uint64_t)e->ls_pre[k]);
    put_uv(&w, (uint64_t)e->ls_nfin);
    for (int32_t k = 0; k < e->ls_nfin; k++)
        put_uv(&w, (uint64_t)e->ls_fin[k]);
    /* timeline */
    int64_t have = e->tl_n < (int64_t)e->tl_cap ? e->tl_n : (int64_t)e->tl_cap;
    if (have > KV_SNAPSHOT_TIMELINE)
        have = KV_SNAPSHOT_TIMELINE;
    put_uv(&w, (uint64_t)have);
    for (int64_t i = e->tl_n - have; i < e->tl_n; i++)
        put_sample(&w, &e->tl[i % e->tl_cap]);
    put_events(&w, e);
    put_bytes(&w, &magic, sizeof magic);
    if (w.oom)
        return kv_errf(err, errlen, KV_ENGINE_ENOMEM, "out of memory saving the engine (%zu bytes)", s->len);
    return 0;
}

/* Every request record back to the free list; queues empty. */
static void clear_requests(kv_engine *e)
{
    for (int64_t i = 0; i < e->num_ids; i++)
        if (e->by_id[i]) {
            give_req(e, e->by_id[i]);
            e->by_id[i] = NULL;
        }
    memset(e->done, 0, sizeof e->done);
    kv_sched_restore(e->sched, NULL, 0, NULL, 0, 0);
    kv_sched_set_remote_tokens(e->sched, 0);
}

static int load(kv_engine *e, rbuf *r, char *err, size_t errlen)
{
    const kv_engine_config *c = &e->cfg;
    uint32_t magic;
    get_bytes(r, &magic, sizeof magic);
    if (magic != MAGIC)
        return kv_errf(err, errlen, KV_ENGINE_EINVAL, "not an engine image");
    kv_engine_config saved;
    memset(&saved, 0, sizeof saved);
    saved.num_blocks = (int32_t)get_uv(r);
    saved.block_size = (int32_t)get_uv(r);
    saved.max_num_seqs = (int32_t)get_uv(r);
    saved.max_model_len = (int32_t)get_uv(r);
    saved.tensor_parallel_size = (int32_t)get_uv(r);
    saved.scheduling_policy = (kv_sched_policy)get_uv(r);
    saved.seed = get_uv(r);
    if (saved.num_blocks != c->num_blocks || saved.block_size != c->block_size ||
        saved.max_num_seqs != c->max_num_seqs || saved.max_model_len != c->max_model_len ||
        saved.tensor_parallel_size != c->tensor_parallel_size || saved.scheduling_policy != c->scheduling_policy ||
        saved.seed != c->seed)
        return kv_errf(err, errlen, KV_ENGINE_EINVAL,
                       "the engine image is of another config (%d blocks of %d tokens, max_num_seqs %d, "
                       "max_model_len %d, tp %d)",
                       (int)saved.num_blocks, (int)saved.block_size, (int)saved.max_num_seqs,
                       (int)saved.max_model_len, (int)saved.tensor_parallel_size);
    int mode_b = get_u8(r), mode_inv = get_u8(r);
    kv_engine_mode mode = (kv_engine_mode)mode_b;
    if (r->bad || mode > KV_MODE_NO_CACHE || (mode_b ^ mode_inv) != 0xff)
        return kv_errf(err, errlen, KV_ENGINE_EINVAL, "damaged engine image (header)");
    /* the old request records stay in by_id, unclaimed, for get_req to reuse */
    int64_t old_n = e->num_ids;
    for (int64_t i = 0; i < old_n; i++)
        if (e->by_id[i])
            e->by_id[i]->sched_index = UNCLAIMED;
    memset(e->done, 0, sizeof e->done);
    kv_sched_restore(e->sched, NULL, 0, NULL, 0, 0);
    kv_sched_set_remote_tokens(e->sched, 0);
    if (mode != c->mode) {
        int rc = kv_engine_set_mode(e, mode, err, errlen); /* rebuilds pool and scheduler */
        if (rc)
            return rc;
    }
    int64_t step = (int64_t)get_uv(r);
    double clock = get_f64(r);
    int64_t num_ids = (int64_t)get_uv(r), num_done = (int64_t)get_uv(r);
    if (r->bad || num_ids < 0 || num_ids > INT64_MAX / 16 || num_done > num_ids)
        return kv_errf(err, errlen, KV_ENGINE_EINVAL, "damaged engine image (header)");
    if (num_ids > e->cap_ids) {
        kv_req **nb = realloc(e->by_id, (size_t)num_ids * sizeof *nb);
        if (!nb)
            return kv_errf(err, errlen, KV_ENGINE_ENOMEM, "out of memory loading an engine image");
        memset(nb + e->cap_ids, 0, (size_t)(num_ids - e->cap_ids) * sizeof *nb);
        e->by_id = nb;
        e->cap_ids = num_ids;
    }
    if (old_n < num_ids)
        memset(e->by_id + old_n, 0, (size_t)(num_ids - old_n) * sizeof *e->by_id);
    e->num_ids = num_ids > old_n ? num_ids : old_n; /* until the old records are sorted out */
    e->num_done = num_done;
    e->step = step;
    e->clock = clock;
    e->usage_time = get_f64(r);
    e->waiting_time = get_f64(r);
    e->running_time = get_f64(r);
    e->total_time = get_f64(r);
    get_bytes(r, &e->m, sizeof e->m);
    for (int k = 0; k < KV_HIST_COUNT; k++)
        get_hist(r, &e->hist[k]);
    e->kvcm.queries = (int64_t)get_uv(r);
    e->kvcm.hits = (int64_t)get_uv(r);
    e->kvcm.preempted_queries = (int64_t)get_uv(r);
    e->kvcm.preempted_hits = (int64_t)get_uv(r);
    e->kvcm.hash_conflicts = (int64_t)get_uv(r);
    if (r->bad)
        return kv_errf(err, errlen, KV_ENGINE_EINVAL, "damaged engine image (metrics)");
    int trc = get_tier(r, e, err, errlen);
    if (trc)
        return trc;
    int32_t nfree = 0;
    kv_pool_stats pst;
    kv_block *blocks = NULL;
    int rc = get_pool(r, e->pool, &blocks, e->counts, &nfree, &pst, err, errlen);
    if (rc)
        return rc;
    uint64_t nrun = get_uv(r), nwait = get_uv(r), ndone = get_uv(r);
    if (r->bad || nrun > (uint64_t)c->max_num_seqs || nwait > (uint64_t)num_ids || ndone > DONE_KEEP ||
        ndone > (uint64_t)num_done)
        return kv_errf(err, errlen, KV_ENGINE_EINVAL, "damaged engine image (queues)");
    /* running and waiting requests go through the scheduler's lists: build
     * them in a scratch array of pointers taken from by_id afterwards */
    uint64_t nlive = nrun + nwait;
    kv_req **live = nlive ? malloc((size_t)nlive * sizeof *live) : NULL;
    if (nlive && !live)
        return kv_errf(err, errlen, KV_ENGINE_ENOMEM, "out of memory loading an engine image");
    for (uint64_t k = 0; k < nlive + ndone; k++) {
        kv_req *q = num_ids > 0 ? get_req(r, e, err, errlen, &rc) : NULL;
        if (!q) {
            if (num_ids <= 0)
                rc = kv_errf(err, errlen, KV_ENGINE_EINVAL, "damaged engine image (requests)");
            goto fail;
        }
        if (q->id >= num_ids) {
            rc = kv_errf(err, errlen, KV_ENGINE_EINVAL, "damaged engine image (request id)");
            goto fail;
        }
        if (k < nlive)
            live[k] = q;
        else
            e->done[k - nlive] = q;
    }
    if (kv_sched_restore(e->sched, live, (int32_t)nrun, live ? live + nrun : NULL, (int32_t)nwait,
                         (int64_t)get_uv(r)) != 0) {
        rc = kv_errf(err, errlen, KV_ENGINE_ENOMEM, "out of memory loading an engine image");
        goto fail;
    }
    kv_sched_set_remote_tokens(e->sched, (int64_t)get_uv(r));
    free(live);
    live = NULL;
    /* records the image does not hold go back to the free list */
    for (int64_t i = 0; i < e->num_ids; i++)
        if (e->by_id[i] && e->by_id[i]->sched_index == UNCLAIMED) {
            give_req(e, e->by_id[i]);
            e->by_id[i] = NULL;
        }
    e->num_ids = num_ids;
    rc = finish_pool(e, blocks, e->counts, nfree, &pst, err, errlen);
    if (rc)
        goto fail;
    e->ls_step = get_sv(r);
    e->ls_n = get_u32(r);
    e->ls_first_new = get_u32(r);
    if (r->bad || e->ls_n < 0 || e->ls_n > c->max_num_seqs + 1 || e->ls_first_new < 0 || e->ls_first_new > e->ls_n) {
        e->ls_n = e->ls_first_new = 0;
        rc = kv_errf(err, errlen, KV_ENGINE_EINVAL, "damaged engine image (last step)");
        goto fail;
    }
    for (int32_t k = 0; k < e->ls_n; k++) {
        e->ls_ids[k] = (int64_t)get_uv(r);
        e->ls_tok[k] = get_u32(r);
        e->ls_hit[k] = get_u32(r);
        e->ls_resumed[k] = get_u8(r);
    }
    e->ls_npre = get_u32(r);
    if (e->ls_npre < 0 || e->ls_npre > c->max_num_seqs + 1)
        r->bad = 1;
    for (int32_t k = 0; k < e->ls_npre && !r->bad; k++)
        e->ls_pre[k] = (int64_t)get_uv(r);
    e->ls_nfin = get_u32(r);
    if (e->ls_nfin < 0 || e->ls_nfin > c->max_num_seqs + 1)
        r->bad = 1;
    for (int32_t k = 0; k < e->ls_nfin && !r->bad; k++)
        e->ls_fin[k] = (int64_t)get_uv(r);
    if (r->bad) {
        e->ls_n = e->ls_first_new = e->ls_npre = e->ls_nfin = 0;
        rc = kv_errf(err, errlen, KV_ENGINE_EINVAL, "damaged engine image (last step)");
        goto fail;
    }
    /* only the newest samples are in the image: the ring restarts with
     * them (tl_n counts samples held, nothing outside reads it) */
    uint64_t have = get_uv(r);
    if (r->bad || have > KV_SNAPSHOT_TIMELINE || have > e->tl_cap) {
        e->tl_n = 0;
        rc = kv_errf(err, errlen, KV_ENGINE_EINVAL, "damaged engine image (timeline)");
        goto fail;
    }
    for (uint64_t i = 0; i < have; i++)
        get_sample(r, &e->tl[i]);
    e->tl_n = (int64_t)have;
    if (get_events(r, e) != 0) {
        rc = kv_errf(err, errlen, KV_ENGINE_EINVAL, "damaged engine image (events)");
        goto fail;
    }
    uint32_t tail;
    get_bytes(r, &tail, sizeof tail);
    if (r->bad || tail != MAGIC || r->p != r->end) {
        rc = kv_errf(err, errlen, KV_ENGINE_EINVAL, "damaged engine image (trailer)");
        goto fail;
    }
    char cerr[200];
    if (kv_engine_check(e, cerr, sizeof cerr) != 0) {
        rc = kv_errf(err, errlen, KV_ENGINE_EINVAL, "damaged engine image: %s", cerr);
        goto fail;
    }
    return 0;
fail:
    free(live);
    return rc;
}

int kv_snapshot_load(kv_engine *e, const kv_snapshot *s, char *err, size_t errlen)
{
    rbuf r = {s->data, s->data + s->len, 0};
    int rc = load(e, &r, err, errlen);
    if (rc) {
        /* leave an empty, consistent engine rather than half an image */
        clear_requests(e);
        kv_pool_restore_begin(e->pool);
        int32_t n = e->cfg.num_blocks - 1;
        for (int32_t i = 0; i < n; i++)
            e->counts[i] = i + 1;
        kv_pool_stats st = {0, 0, 0, 0};
        kv_pool_restore_end(e->pool, e->counts, n, &st, NULL, 0);
        e->num_done = 0;
        e->ls_n = e->ls_first_new = e->ls_npre = e->ls_nfin = 0;
        e->kvcm.queries = e->kvcm.hits = e->kvcm.preempted_queries = e->kvcm.preempted_hits = 0;
        e->kvcm.hash_conflicts = 0;
        if (e->kvcm.offload) { /* an empty tier, its counters at zero */
            kv_offload_stats zero;
            memset(&zero, 0, sizeof zero);
            kv_offload_restore(e->kvcm.offload, NULL, 0, 0, NULL, 0, &zero);
        }
        memset(&e->m, 0, sizeof e->m);
        for (int k = 0; k < KV_HIST_COUNT; k++)
            kv_hist_init(&e->hist[k], k);
        e->usage_time = e->waiting_time = e->running_time = e->total_time = 0;
        e->tl_n = 0;
    }
    return rc;
}
