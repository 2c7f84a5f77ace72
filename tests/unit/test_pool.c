/* Block pool + KV cache manager scenarios (docs/engine-runtime.md), mirroring
 * vLLM's tests/v1/core/test_kv_cache_utils.py and test_prefix_caching.py,
 * with the current free-queue order (and the older one, free_to_tail). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kv_engine.h"
#include "kv_hash.h"
#include "kv_kvcm.h"
#include "kv_pool.h"
#include "kv_req.h"

#define BS 16

typedef struct fixture {
    kv_pool *pool;
    kv_kvcm m;
    kv_req reqs[8];
    int32_t hit[64];
} fixture;

static fixture *fx_new(int32_t num_blocks, int32_t bs, int caching)
{
    fixture *f = calloc(1, sizeof *f);
    f->pool = kv_pool_create(num_blocks, caching, NULL, 0);
    assert_non_null(f->pool);
    kv_kvcm_init(&f->m, f->pool, bs, 4096, KV_MODE_PAGED, caching, 0);
    return f;
}

static void fx_free(fixture *f)
{
    for (int i = 0; i < 8; i++)
        kv_req_release(&f->reqs[i]);
    kv_pool_destroy(f->pool);
    free(f);
}

/* A request with explicit token ids (like vLLM's make_request). */
static kv_req *mkreq(fixture *f, int id, const int32_t *tok, int32_t n)
{
    kv_req *r = &f->reqs[id];
    kv_req_release(r);
    memset(r, 0, sizeof *r);
    r->id = id;
    r->prompt_len = n;
    r->max_output = 64;
    r->num_cached_tokens = -1;
    r->prompt_ids = malloc((size_t)n * sizeof(int32_t));
    memcpy(r->prompt_ids, tok, (size_t)n * sizeof(int32_t));
    r->prompt_ids_cap = n;
    assert_int_equal(kv_req_reserve(r, 64), 0);
    kv_req_update_hashes(r, f->m.block_size, f->m.none_hash);
    return r;
}

/* Append output tokens with given ids: set explicit prompt ids longer. For
 * the decode scenario we extend the prompt ids (same effect on hashing). */
static void append_tokens(fixture *f, kv_req *r, const int32_t *tok, int32_t n)
{
    r->prompt_ids = realloc(r->prompt_ids, (size_t)(r->prompt_len + n) * sizeof(int32_t));
    memcpy(r->prompt_ids + r->prompt_len, tok, (size_t)n * sizeof(int32_t));
    r->prompt_len += n;
    kv_req_update_hashes(r, f->m.block_size, f->m.none_hash);
}

static void fill(int32_t *t, int32_t from, int32_t n, int32_t v)
{
    for (int32_t i = 0; i < n; i++)
        t[from + i] = v;
}

static void assert_queue(fixture *f, const int32_t *want, int32_t n)
{
    int32_t got[64];
    int32_t k = kv_pool_fq_get_all(kv_pool_queue(f->pool), got, 64);
    assert_int_equal(k, n);
    for (int32_t i = 0; i < n; i++)
        assert_int_equal(got[i], want[i]);
    char err[256];
    assert_int_equal(kv_pool_check(f->pool, err, sizeof err), 0);
}

static void assert_table(const kv_req *r, const int32_t *want, int32_t n)
{
    assert_int_equal(r->num_blocks, n);
    for (int32_t i = 0; i < n; i++)
        assert_int_equal(r->table[i], want[i]);
}

/* 1. free-queue operations */
static void test_free_queue_ops(void **state)
{
    (void)state;
    kv_block blocks[7];
    kv_pool_fq q;
    char err[128];
    kv_pool_fq_init(&q, blocks, 5);
    assert_int_equal(q.num_free, 5);
    assert_int_equal(kv_pool_fq_head(&q), 0);
    assert_int_equal(kv_pool_fq_tail(&q), 4);
    assert_int_equal(kv_pool_fq_popleft(&q, err, sizeof err), 0);
    assert_int_equal(q.num_free, 4);
    assert_int_equal(kv_pool_fq_head(&q), 1);
    assert_int_equal(kv_pool_fq_remove(&q, 2, err, sizeof err), 0);
    assert_int_equal(q.num_free, 3);
    assert_int_equal(blocks[1].next_free, 3);
    assert_int_equal(blocks[3].prev_free, 1);
    assert_int_equal(kv_pool_fq_append(&q, 2), 0);
    assert_int_equal(q.num_free, 4);
    assert_int_equal(kv_pool_fq_tail(&q), 2);
    assert_int_equal(blocks[2].prev_free, 4);
    assert_int_equal(kv_pool_fq_remove(&q, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "remove() called on an invalid block"));
    for (int i = 0; i < 4; i++)
        assert_true(kv_pool_fq_popleft(&q, err, sizeof err) >= 0);
    assert_int_equal(kv_pool_fq_popleft(&q, err, sizeof err), -1);
    assert_string_equal(err, "No free blocks available");
}

/* vLLM's test_cache_key_salting (tests/v1/core/test_prefix_caching.py): the
 * salt enters the first block's hash only, requests with the same salt share
 * the prefix, the same tokens under another salt share nothing. */
static kv_req *mkreq_salted(fixture *f, int id, const int32_t *tok, int32_t n, const char *salt)
{
    kv_req *r = &f->reqs[id];
    kv_req_release(r);
    memset(r, 0, sizeof *r);
    r->id = id;
    r->prompt_len = n;
    r->max_output = 64;
    r->num_cached_tokens = -1;
    r->prompt_ids = malloc((size_t)n * sizeof(int32_t));
    memcpy(r->prompt_ids, tok, (size_t)n * sizeof(int32_t));
    r->prompt_ids_cap = n;
    r->has_salt = 1;
    r->salt = kv_hash_str(salt);
    assert_int_equal(kv_req_reserve(r, 64), 0);
    kv_req_update_hashes(r, f->m.block_size, f->m.none_hash);
    return r;
}

static void test_cache_key_salting(void **state)
{
    (void)state;
    fixture *f = fx_new(11, BS, 1);
    /* 3 complete blocks and an incomplete block with 11 tokens */
    int32_t t[128];
    for (int i = 0; i < 3; i++)
        fill(t, i * BS, BS, i);
    fill(t, 3 * BS, 11, 3);
    kv_req *r0 = mkreq_salted(f, 0, t, 59, "salt1");
    assert_int_equal(kv_kvcm_get_computed_blocks(&f->m, r0, f->hit), 0);
    assert_int_equal(r0->num_hashes, 3);
    kv_hash h0 = kv_hash_block(f->m.none_hash, t, BS, 1, kv_hash_str("salt1"));
    assert_true(kv_hash_eq(r0->hashes[0], h0));
    assert_true(kv_hash_eq(r0->hashes[1], kv_hash_block(r0->hashes[0], t + BS, BS, 0, 0)));
    assert_true(kv_hash_eq(r0->hashes[2], kv_hash_block(r0->hashes[1], t + 2 * BS, BS, 0, 0)));
    assert_int_equal(kv_kvcm_allocate_slots(&f->m, r0, 59, NULL, 0), 4);
    assert_table(r0, (int32_t[]){1, 2, 3, 4}, 4);
    r0->num_computed = 59;
    /* append slots without allocating a new block */
    int32_t eight[5] = {8, 8, 8, 8, 8};
    append_tokens(f, r0, eight, 5);
    assert_int_equal(kv_kvcm_allocate_slots(&f->m, r0, 5, NULL, 0), 0);
    assert_int_equal(r0->num_hashes, 4);
    int32_t last[16];
    memcpy(last, t + 3 * BS, 11 * sizeof(int32_t));
    memcpy(last + 11, eight, sizeof eight);
    assert_true(kv_hash_eq(r0->hashes[3], kv_hash_block(r0->hashes[2], last, BS, 0, 0)));
    /* cache hit with a new request that has the same salt: only the 3-block prefix */
    fill(t, 3 * BS, 11, 4);
    kv_req *r1 = mkreq_salted(f, 1, t, 59, "salt1");
    assert_int_equal(kv_kvcm_get_computed_blocks(&f->m, r1, f->hit), 3);
    /* cache miss with the same content but a different salt */
    kv_req *r2 = mkreq_salted(f, 2, t, 59, "salt2");
    assert_int_equal(kv_kvcm_get_computed_blocks(&f->m, r2, f->hit), 0);
    assert_int_equal(r2->num_hashes, 3);
    assert_true(kv_hash_eq(r2->hashes[0], kv_hash_block(f->m.none_hash, t, BS, 1, kv_hash_str("salt2"))));
    assert_true(kv_hash_eq(r2->hashes[1], kv_hash_block(r2->hashes[0], t + BS, BS, 0, 0)));
    assert_true(kv_hash_eq(r2->hashes[2], kv_hash_block(r2->hashes[1], t + 2 * BS, BS, 0, 0)));
    fx_free(f);
}

/* 2. prefill, sharing, free order */
static void test_prefill(void **state)
{
    (void)state;
    fixture *f = fx_new(11, BS, 1);
    int32_t t[200];
    for (int i = 0; i < 3; i++)
        fill(t, i * 16, 16, i);
    fill(t, 48, 7, 3);
    kv_req *a = mkreq(f, 0, t, 55);
    assert_int_equal(kv_kvcm_get_computed_blocks(&f->m, a, f->hit), 0);
    assert_int_equal(kv_kvcm_allocate_slots(&f->m, a, 55, NULL, 0), 4);
    assert_table(a, (int32_t[]){1, 2, 3, 4}, 4);
    for (int b = 1; b <= 3; b++) {
        assert_true(kv_pool_block(f->pool, b)->has_hash);
        assert_int_equal(kv_pool_block(f->pool, b)->ref_cnt, 1);
    }
    assert_false(kv_pool_block(f->pool, 4)->has_hash);

    fill(t, 48, 5, 4);
    kv_req *b = mkreq(f, 1, t, 53);
    int32_t nh = kv_kvcm_get_computed_blocks(&f->m, b, f->hit);
    assert_int_equal(nh, 3);
    assert_int_equal(f->hit[0], 1);
    assert_int_equal(f->hit[2], 3);
    assert_int_equal(kv_kvcm_allocate_slots(&f->m, b, 5, f->hit, nh), 1);
    assert_table(b, (int32_t[]){1, 2, 3, 5}, 4);
    for (int k = 1; k <= 3; k++)
        assert_int_equal(kv_pool_block(f->pool, k)->ref_cnt, 2);
    assert_int_equal(kv_pool_num_free(f->pool), 5);

    kv_kvcm_free(&f->m, a);
    kv_kvcm_free(&f->m, b);
    assert_int_equal(kv_pool_num_free(f->pool), 10);
    assert_queue(f, (int32_t[]){5, 4, 6, 7, 8, 9, 10, 3, 2, 1}, 10);

    fill(t, 48, 6, 5);
    kv_req *c = mkreq(f, 2, t, 54);
    nh = kv_kvcm_get_computed_blocks(&f->m, c, f->hit);
    assert_int_equal(nh, 3);
    assert_int_equal(kv_kvcm_allocate_slots(&f->m, c, 6, f->hit, nh), 1);
    assert_table(c, (int32_t[]){1, 2, 3, 5}, 4);
    assert_int_equal(kv_pool_num_free(f->pool), 6);
    kv_kvcm_free(&f->m, c);

    for (int i = 0; i < 160; i++)
        t[i] = 1000 + i;
    kv_req *d = mkreq(f, 3, t, 160);
    assert_int_equal(kv_kvcm_get_computed_blocks(&f->m, d, f->hit), 0);
    assert_int_equal(kv_kvcm_allocate_slots(&f->m, d, 160, NULL, 0), 10);
    assert_table(d, (int32_t[]){5, 4, 6, 7, 8, 9, 10, 3, 2, 1}, 10);
    assert_int_equal(kv_pool_num_free(f->pool), 0);
    /* evicted blocks lost their hashes; the new full blocks got new ones */
    assert_int_equal(kv_pool_num_hashed(f->pool), 10);
    fx_free(f);
}

/* The same frees under block_pool.py before 0.24: every block reaching
 * ref_cnt 0 goes to the tail, in the order given (last block first). */
static void test_free_to_tail(void **state)
{
    (void)state;
    fixture *f = fx_new(11, BS, 1);
    kv_pool_set_free_to_tail(f->pool, 1);
    int32_t t[64];
    for (int i = 0; i < 3; i++)
        fill(t, i * 16, 16, i);
    fill(t, 48, 7, 3);
    kv_req *a = mkreq(f, 0, t, 55);
    assert_int_equal(kv_kvcm_allocate_slots(&f->m, a, 55, NULL, 0), 4);
    fill(t, 48, 5, 4);
    kv_req *b = mkreq(f, 1, t, 53);
    int32_t nh = kv_kvcm_get_computed_blocks(&f->m, b, f->hit);
    assert_int_equal(kv_kvcm_allocate_slots(&f->m, b, 5, f->hit, nh), 1);
    kv_kvcm_free(&f->m, a);
    kv_kvcm_free(&f->m, b);
    assert_queue(f, (int32_t[]){6, 7, 8, 9, 10, 4, 5, 3, 2, 1}, 10);
    fx_free(f);
}

/* 3. evict + touch */
static void test_evict(void **state)
{
    (void)state;
    fixture *f = fx_new(11, BS, 1);
    int32_t t[200];
    for (int i = 0; i < 200; i++)
        t[i] = i;
    kv_req *r0 = mkreq(f, 0, t, 87);
    assert_int_equal(kv_kvcm_allocate_slots(&f->m, r0, 87, NULL, 0), 6);
    kv_req *r1 = mkreq(f, 1, t + 87, 48);
    assert_int_equal(kv_kvcm_allocate_slots(&f->m, r1, 48, NULL, 0), 3);
    assert_table(r1, (int32_t[]){7, 8, 9}, 3);
    assert_int_equal(kv_pool_num_free(f->pool), 1);
    kv_kvcm_free(&f->m, r0);
    assert_queue(f, (int32_t[]){6, 10, 5, 4, 3, 2, 1}, 7);
    kv_kvcm_free(&f->m, r1);
    assert_queue(f, (int32_t[]){6, 10, 5, 4, 3, 2, 1, 9, 8, 7}, 10);
    kv_req *r2 = mkreq(f, 2, t, 35);
    int32_t nh = kv_kvcm_get_computed_blocks(&f->m, r2, f->hit);
    assert_int_equal(nh, 2);
    assert_int_equal(f->hit[0], 1);
    assert_int_equal(f->hit[1], 2);
    assert_int_equal(kv_kvcm_allocate_slots(&f->m, r2, 3, f->hit, nh), 1);
    assert_table(r2, (int32_t[]){1, 2, 6}, 3);
    assert_int_equal(kv_pool_num_free(f->pool), 7);
    fx_free(f);
}

/* 4. decode allocation */
static void test_decode(void **state)
{
    (void)state;
    fixture *f = fx_new(11, BS, 1);
    int32_t t[200];
    for (int i = 0; i < 3; i++)
        fill(t, i * 16, 16, i);
    fill(t, 48, 7, 3);
    kv_req *r = mkreq(f, 0, t, 55);
    assert_int_equal(kv_kvcm_allocate_slots(&f->m, r, 55, NULL, 0), 4);
    r->num_computed = 55;
    int32_t more[19];
    fill(more, 0, 19, 8);
    append_tokens(f, r, more, 4);
    assert_int_equal(kv_kvcm_allocate_slots(&f->m, r, 4, NULL, 0), 0);
    assert_false(kv_pool_block(f->pool, r->table[3])->has_hash);
    r->num_computed = 59;
    append_tokens(f, r, more, 19);
    assert_int_equal(kv_kvcm_allocate_slots(&f->m, r, 19, NULL, 0), 1);
    assert_int_equal(r->num_blocks, 5);
    assert_true(kv_pool_block(f->pool, r->table[3])->has_hash);
    assert_false(kv_pool_block(f->pool, r->table[4])->has_hash);
    fx_free(f);
}

/* 5. last-token rule: a fully cached 48-token prompt hits 2 blocks (32 tokens) */
static void test_last_token_rule(void **state)
{
    (void)state;
    fixture *f = fx_new(10, BS, 1);
    int32_t t[64];
    for (int i = 0; i < 64; i++)
        t[i] = i;
    kv_req *r0 = mkreq(f, 0, t, 48);
    assert_int_equal(kv_kvcm_allocate_slots(&f->m, r0, 48, NULL, 0), 3);
    kv_kvcm_free(&f->m, r0);
    kv_req *r1 = mkreq(f, 1, t, 48);
    assert_int_equal(kv_kvcm_get_computed_blocks(&f->m, r1, f->hit), 2);
    kv_kvcm_record_stats(&f->m, r1, 2 * BS);
    assert_int_equal(f->m.hits, 32);
    assert_int_equal(f->m.queries, 48); /* tokens asked, tokens found */
    kv_req *r2 = mkreq(f, 2, t, 37); /* 2 full blocks + 5: both hit */
    assert_int_equal(kv_kvcm_get_computed_blocks(&f->m, r2, f->hit), 2);
    fx_free(f);
}

/* 6. hash cleared on reuse */
static void test_hash_cleared_on_reuse(void **state)
{
    (void)state;
    fixture *f = fx_new(2, BS, 1);
    int32_t t[16];
    for (int i = 0; i < 16; i++)
        t[i] = i;
    kv_req *r0 = mkreq(f, 0, t, 16);
    assert_int_equal(kv_kvcm_allocate_slots(&f->m, r0, 16, NULL, 0), 1);
    assert_int_equal(r0->table[0], 1);
    assert_true(kv_pool_block(f->pool, 1)->has_hash);
    kv_kvcm_free(&f->m, r0);
    kv_req *r1 = mkreq(f, 1, t, 15);
    assert_int_equal(kv_kvcm_get_computed_blocks(&f->m, r1, f->hit), 0);
    assert_int_equal(kv_kvcm_allocate_slots(&f->m, r1, 15, NULL, 0), 1);
    assert_int_equal(r1->table[0], 1);
    assert_false(kv_pool_block(f->pool, 1)->has_hash);
    assert_int_equal(kv_pool_get_cached(f->pool, r0->hashes[0]), -1);
    fx_free(f);
}

/* 7. hit blocks are protected from eviction by the same allocation */
static void test_computed_blocks_not_evicted(void **state)
{
    (void)state;
    fixture *f = fx_new(3, BS, 1);
    int32_t t[32];
    for (int i = 0; i < 32; i++)
        t[i] = i;
    kv_req *r0 = mkreq(f, 0, t, 16);
    assert_int_equal(kv_kvcm_allocate_slots(&f->m, r0, 16, NULL, 0), 1);
    assert_int_equal(r0->table[0], 1);
    kv_req *r1 = mkreq(f, 1, t + 16, 16);
    assert_int_equal(kv_kvcm_allocate_slots(&f->m, r1, 16, NULL, 0), 1);
    assert_int_equal(r1->table[0], 2);
    kv_kvcm_free(&f->m, r0);
    kv_kvcm_free(&f->m, r1);
    kv_req *r2 = mkreq(f, 2, t, 32);
    int32_t nh = kv_kvcm_get_computed_blocks(&f->m, r2, f->hit);
    assert_int_equal(nh, 1);
    assert_int_equal(f->hit[0], 1);
    assert_int_equal(kv_kvcm_allocate_slots(&f->m, r2, 16, f->hit, nh), 1);
    assert_table(r2, (int32_t[]){1, 2}, 2);
    fx_free(f);
}

/* 8. a failed allocation leaves ref counts untouched */
static void test_not_enough_blocks_with_hits(void **state)
{
    (void)state;
    fixture *f = fx_new(11, BS, 1);
    int32_t common[48], t[200];
    for (int i = 0; i < 48; i++)
        common[i] = i;
    kv_req *r0 = mkreq(f, 0, common, 48);
    assert_int_equal(kv_kvcm_allocate_slots(&f->m, r0, 48, NULL, 0), 3);
    for (int k = 0; k < 2; k++)
        memcpy(t + 48 * k, common, sizeof common);
    kv_req *r1 = mkreq(f, 1, t, 96);
    int32_t nh = kv_kvcm_get_computed_blocks(&f->m, r1, f->hit);
    assert_int_equal(nh, 3);
    assert_int_equal(kv_kvcm_allocate_slots(&f->m, r1, 48, f->hit, nh), 3);
    kv_kvcm_free(&f->m, r1);
    int32_t sevens[32];
    fill(sevens, 0, 32, 7);
    kv_req *r2 = mkreq(f, 2, sevens, 32);
    assert_int_equal(kv_kvcm_allocate_slots(&f->m, r2, 32, NULL, 0), 2);
    assert_int_equal(kv_pool_num_free(f->pool), 5);
    for (int k = 0; k < 3; k++)
        memcpy(t + 48 * k, common, sizeof common);
    kv_req *r3 = mkreq(f, 3, t, 144);
    nh = kv_kvcm_get_computed_blocks(&f->m, r3, f->hit);
    assert_int_equal(nh, 6);
    assert_int_equal(kv_kvcm_allocate_slots(&f->m, r3, 48, f->hit, nh), -1);
    int want[6] = {1, 1, 1, 0, 0, 0};
    for (int i = 0; i < 6; i++)
        assert_int_equal(kv_pool_block(f->pool, f->hit[i])->ref_cnt, want[i]);
    assert_int_equal(r3->num_blocks, 0);
    assert_int_equal(kv_pool_num_free(f->pool), 5);
    fx_free(f);
}

/* 9. prefix caching disabled */
static void test_caching_disabled(void **state)
{
    (void)state;
    fixture *f = fx_new(5, 4, 0);
    int32_t t[16];
    for (int i = 0; i < 16; i++)
        t[i] = i;
    kv_req *r0 = mkreq(f, 0, t, 10);
    assert_int_equal(kv_kvcm_allocate_slots(&f->m, r0, 10, NULL, 0), 3);
    kv_kvcm_free(&f->m, r0);
    kv_req *r1 = mkreq(f, 1, t, 16);
    assert_int_equal(kv_kvcm_get_computed_blocks(&f->m, r1, f->hit), 0);
    assert_int_equal(kv_kvcm_allocate_slots(&f->m, r1, 16, NULL, 0), 4);
    kv_req *r2 = mkreq(f, 2, t, 4);
    assert_int_equal(kv_kvcm_allocate_slots(&f->m, r2, 4, NULL, 0), -1);
    assert_int_equal(kv_pool_num_hashed(f->pool), 0);
    fx_free(f);
}

/* 10. reset of the prefix cache */
static void test_reset_prefix_cache(void **state)
{
    (void)state;
    fixture *f = fx_new(11, BS, 1);
    int32_t t[64];
    for (int i = 0; i < 64; i++)
        t[i] = i;
    kv_req *r0 = mkreq(f, 0, t, 40);
    assert_int_equal(kv_kvcm_allocate_slots(&f->m, r0, 40, NULL, 0), 3);
    int32_t held = 0;
    assert_int_equal(kv_pool_reset_prefix_cache(f->pool, &held), 0);
    assert_int_equal(held, 3);
    assert_int_equal(kv_pool_num_hashed(f->pool), 2);
    kv_kvcm_free(&f->m, r0);
    assert_int_equal(kv_pool_reset_prefix_cache(f->pool, &held), 1);
    assert_int_equal(kv_pool_num_hashed(f->pool), 0);
    for (int b = 0; b < 11; b++)
        assert_false(kv_pool_block(f->pool, b)->has_hash);
    assert_int_equal(kv_pool_get_cached(f->pool, r0->hashes[0]), -1);
    char err[256];
    assert_int_equal(kv_pool_check(f->pool, err, sizeof err), 0);
    fx_free(f);
}

/* No de-duplication: the same content filled twice is cached twice; the map
 * serves the first and keeps the other reachable. */
static void test_duplicate_blocks(void **state)
{
    (void)state;
    fixture *f = fx_new(11, BS, 1);
    int32_t t[40];
    for (int i = 0; i < 40; i++)
        t[i] = i;
    kv_req *a = mkreq(f, 0, t, 40);
    kv_req *b = mkreq(f, 1, t, 40);
    assert_int_equal(kv_kvcm_allocate_slots(&f->m, a, 40, NULL, 0), 3);
    assert_int_equal(kv_kvcm_allocate_slots(&f->m, b, 40, NULL, 0), 3);
    assert_int_equal(kv_pool_num_hashed(f->pool), 4);
    assert_int_equal(kv_pool_get_cached(f->pool, a->hashes[0]), a->table[0]);
    char err[256];
    assert_int_equal(kv_pool_check(f->pool, err, sizeof err), 0);
    kv_kvcm_free(&f->m, a);
    kv_kvcm_free(&f->m, b);
    /* pop everything: each eviction keeps the map consistent */
    int32_t out[10];
    assert_int_equal(kv_pool_get_new_blocks(f->pool, 10, out, 9, err, sizeof err), 0);
    assert_int_equal(kv_pool_num_hashed(f->pool), 0);
    assert_int_equal(kv_pool_check(f->pool, err, sizeof err), 0); /* all held now */
    assert_int_equal(kv_pool_num_free(f->pool), 0);
    assert_int_equal(kv_pool_get_new_blocks(f->pool, 1, out, 9, err, sizeof err), -1);
    assert_string_equal(err, "Cannot get 1 free blocks from the pool");
    fx_free(f);
}

static void test_usage(void **state)
{
    (void)state;
    fixture *f = fx_new(11, BS, 1);
    assert_true(kv_pool_usage(f->pool) == 0.0);
    int32_t out[5];
    assert_int_equal(kv_pool_get_new_blocks(f->pool, 5, out, 0, NULL, 0), 0);
    assert_true(kv_pool_usage(f->pool) > 0.499 && kv_pool_usage(f->pool) < 0.501);
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_free_queue_ops),
        cmocka_unit_test(test_prefill),
        cmocka_unit_test(test_cache_key_salting),
        cmocka_unit_test(test_free_to_tail),
        cmocka_unit_test(test_evict),
        cmocka_unit_test(test_decode),
        cmocka_unit_test(test_last_token_rule),
        cmocka_unit_test(test_hash_cleared_on_reuse),
        cmocka_unit_test(test_computed_blocks_not_evicted),
        cmocka_unit_test(test_not_enough_blocks_with_hits),
        cmocka_unit_test(test_caching_disabled),
        cmocka_unit_test(test_reset_prefix_cache),
        cmocka_unit_test(test_duplicate_blocks),
        cmocka_unit_test(test_usage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
