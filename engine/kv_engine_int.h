/* kv_engine_int.h: the engine's state, shared by its modules (not a public
 * header): kv_engine.c (configuration, creation, requests, modes),
 * kv_engine_step.c (the step loop), kv_engine_read.c (accessors, snapshots,
 * checks) and kv_engine_plan.c (memory plan -> engine config). kv_snapshot.c
 * saves and restores it for the history (kv_history.h): a field added here is
 * state a snapshot must carry (test_history compares every public figure
 * after a round trip). */
#ifndef KV_ENGINE_INT_H
#define KV_ENGINE_INT_H

#include <uthash.h>

#include "kv_engine.h"
#include "kv_events.h"
#include "kv_kvcm.h"
#include "kv_metrics.h"
#include "kv_pool.h"
#include "kv_req.h"
#include "kv_sched.h"
#include "kv_timemodel.h"

#define DONE_KEEP 256          /* finished requests kept readable before recycling */
#define WRITE_BATCH 4096       /* slot writes per device call */

typedef struct rank_info {
    int32_t num_kv_heads, first_kv_head, replicated;
    kv_pool_layout layout;
    double terms[KV_TERM_COUNT];
} rank_info;

struct kv_engine {
    kv_engine_config cfg;
    kv_pool *pool;
    kv_kvcm kvcm;
    kv_sched *sched;
    kv_events *ev;
    kv_device *dev;
    int own_dev;
    double dev_scale;          /* fit to a borrowed device (kv_engine_device_scale) */
    kv_dev_handle dev_h[KV_ENGINE_MAX_RANKS][KV_TERM_COUNT]; /* what the engine holds there */
    rank_info ranks[KV_ENGINE_MAX_RANKS];
    kv_time_params tparams;
    /* requests */
    kv_req **by_id;
    int64_t num_ids, cap_ids;
    kv_req *free_reqs;
    kv_req *done[DONE_KEEP];
    int64_t num_done;
    /* clock */
    int64_t step;
    double clock;
    int verify, write_kv;
    /* metrics */
    kv_engine_metrics m;
    kv_hist hist[KV_HIST_COUNT];
    double usage_time, waiting_time, running_time, total_time;
    /* timeline */
    kv_timeline_sample *tl;
    uint32_t tl_cap;
    int64_t tl_n;
    /* scratch (sized at creation: no allocation per step) */
    kv_slot_write *writes;
    int32_t *tokbuf;
    int32_t *counts;
    int64_t *owner_buf;        /* max_num_seqs ids, for kv_engine_block_owners */
    uint64_t *keybuf;          /* a request's block keys, for device read-backs */
    int64_t *dirty;            /* per block: 0, or who wrote it this step (request id + 1; -1: several) */
    int32_t *dirty_list, num_dirty;
    int64_t sample_next;       /* kv_engine_verify_sample: the running index to start at */
    int32_t sample_pos;        /* ... and the position inside that request */
    /* the last step's decisions (kv_engine_last_step), max_num_seqs + 1 each */
    int64_t ls_step, *ls_ids, *ls_pre, *ls_fin;
    int32_t *ls_tok, *ls_hit, ls_n, ls_first_new, ls_npre, ls_nfin;
    uint8_t *ls_resumed;
    /* hashes of shared-prefix blocks, computed once per (prefix, salt) */
    struct kv_prefix_hashes *prefix_hashes;
    int32_t num_prefix_hashes;
    /* inputs are reported here before they act (kv_engine_set_journal) */
    kv_engine_journal_fn journal;
    void *journal_ctx;
};

/* Report an input to the journal, if one is set. */
static inline void kv_eng_journal(kv_engine *e, const kv_engine_input *in)
{
    if (e->journal)
        e->journal(e->journal_ctx, e, in);
}

/* The block hashes of a shared prefix's full blocks: every request naming
 * the same prefix (and salt) starts with the same chain, so it is hashed
 * once, at the first submit (KV_PREFIX_HASHES_MAX entries at most). */
#define KV_PREFIX_HASHES_MAX 4096
typedef struct kv_prefix_hashes {
    uint64_t key[3];              /* prefix seed, has salt, salt */
    UT_hash_handle hh;
    int32_t n;
    kv_hash hashes[];
} kv_prefix_hashes;

/* The live (or recently finished) request with this id, or NULL. */
kv_req *kv_eng_live_req(const kv_engine *e, int64_t id);

/* A finished or aborted request stays readable for DONE_KEEP more finishes. */
void kv_eng_retire(kv_engine *e, kv_req *r);

/* The key block b of r's table was written with (kv_slot_write.parent):
 * the hash of the block before it in r's chain, or for block 0 the chain's
 * root (NONE_HASH and the cache salt). */
uint64_t kv_eng_block_key(const kv_engine *e, const kv_req *r, int32_t b);

/* The per-step read-back of what changed (kv_engine_read.c). */
int kv_eng_verify_changed(kv_engine *e, char *err, size_t errlen);

/* Virtual time dt passed at KV usage `usage`: the time-weighted means. */
void kv_eng_accumulate_time(kv_engine *e, double dt, double usage);

#endif
