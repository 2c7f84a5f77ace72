/* kv_frame: see kv_frame.h. Only kv_engine.h accessors; buffers grow by
 * doubling and are never shrunk, so a frame at a steady size allocates
 * nothing. */
#include "kv_frame.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_metrics.h"
#include "kv_util.h"

#define EVENTS_PER_READ 1024

static const kv_frame_opts no_opts = { .blocks_prefix = 0, .extra_req = -1 };

void kv_frame_init(kv_frame *f)
{
    memset(f, 0, sizeof *f);
    f->stats_k = -1;
}

void kv_frame_free(kv_frame *f)
{
    free(f->blocks);
    free(f->reqs);
    free(f->tables);
    free(f->ids);
    free(f->events);
    free(f->tl_all);
    kv_frame_init(f);
}

void kv_frame_forget(kv_frame *f)
{
    f->captured = 0;
    f->src = NULL;
    f->nlog = 0;
    f->log_seq = 0;
    f->blocks_seq = 0;
    f->blocks_step = -1;
    f->blocks_total = 0;
    f->nblocks = 0;
    f->stats_k = -1;
    f->stats_rm = NULL;
    f->stats_line[0] = f->stats_hits[0] = 0;
}

/* Grow *buf to hold at least need elements of size sz (doubling). */
static int grow(void **buf, int32_t *cap, int64_t need, size_t sz)
{
    if (need <= *cap) return 1;
    int64_t n = *cap > 0 ? *cap : 16;
    while (n < need) n *= 2;
    if (n > INT32_MAX) n = INT32_MAX;
    if (n < need) return 0;
    void *p = realloc(*buf, (size_t)n * sz);
    if (!p) return 0;
    *buf = p;
    *cap = (int32_t)n;
    return 1;
}

/* The summary and lists of an engine-less frame (buffers and log kept). */
static void clear_live(kv_frame *f)
{
    f->has_engine = 0;
    memset(&f->info, 0, sizeof f->info);
    memset(&f->metrics, 0, sizeof f->metrics);
    f->num_kv_heads = f->tensor_parallel_size = f->max_model_len = 0;
    f->max_num_seqs = f->max_num_batched_tokens = 0;
    f->enable_prefix_caching = 0;
    f->device_name[0] = 0;
    f->last_event_seq = 0;
    f->ntimeline = 0;
    f->nblocks = 0;
    f->nrunning = f->nwaiting = f->nextra = 0;
    f->ntables = 0;
    f->nranks = 0;
    f->stats_line[0] = f->stats_hits[0] = 0;
}

/* The stats line of the newest interval that ended, worked out from the
 * engine's whole timeline once per interval. Returns 0, or -1 out of memory. */
static int read_stats(kv_frame *f, const kv_engine *e, const kv_engine_config *cfg)
{
    if (!f->has_plan || f->ntimeline <= 0) {
        f->stats_line[0] = f->stats_hits[0] = 0;
        f->stats_k = -1;
        return 0;
    }
    const kv_release_metrics *rm = kv_release_metrics_of(f->plan.release, f->plan.engine_v1);
    int64_t k = (int64_t)(f->timeline[f->ntimeline - 1].clock_s / rm->interval_s + 1e-9);
    if (k == f->stats_k && (const void *)rm == f->stats_rm) return 0;
    int32_t cap = (int32_t)(cfg->timeline_capacity ? cfg->timeline_capacity : KV_FRAME_TIMELINE);
    if (!grow((void **)&f->tl_all, &f->cap_tl_all, cap, sizeof *f->tl_all)) return -1;
    int32_t n = kv_engine_timeline(e, f->tl_all, cap);
    kv_metrics_stats_line(rm, f->tl_all, n, cfg->enable_prefix_caching, f->stats_line, sizeof f->stats_line,
                          f->stats_hits, sizeof f->stats_hits);
    f->stats_k = k;
    f->stats_rm = rm;
    return 0;
}

/* A start-up line of the plan, copied into the engine's log: whole, or cut
 * where the engine's log cuts a line (kv_engine_log keeps 255 bytes: vLLM
 * 0.21+'s CUDA-graph note is longer, and its cut copy showed a second time
 * under the whole one in the log view). */
static int is_plan_line(const kv_frame *f, const char *text)
{
    if (!f->has_plan) return 0;
    size_t n = strlen(text);
    for (int i = 0; i < f->plan.num_log && i < KV_PLAN_MAX_LOG; i++)
        if (!strcmp(f->plan.log[i], text) || (n >= KV_FRAME_PLAN_CUT && !strncmp(f->plan.log[i], text, n)))
            return 1;
    return 0;
}

static void add_log(kv_frame *f, const char *text, int level)
{
    if (f->nlog == KV_FRAME_LOG_LINES) {
        memmove(f->log[0], f->log[1], sizeof f->log[0] * (KV_FRAME_LOG_LINES - 1));
        memmove(f->log_level, f->log_level + 1, KV_FRAME_LOG_LINES - 1);
        f->nlog = KV_FRAME_LOG_LINES - 1;
    }
    snprintf(f->log[f->nlog], sizeof f->log[0], "%s", text);
    f->log_level[f->nlog] = (uint8_t)(level < 0 ? 0 : level > 2 ? 2 : level);
    f->nlog++;
}

/* Log lines of the events since the last capture (all the ring still holds
 * for a new engine). */
static void read_log(kv_frame *f, const kv_engine *e)
{
    for (;;) {
        int32_t n = kv_engine_events_since(e, f->log_seq, f->events, EVENTS_PER_READ);
        if (n <= 0) break;
        for (int32_t i = 0; i < n; i++) {
            const kv_event *ev = &f->events[i];
            if (ev->type == KV_EV_LOG && ev->text && !is_plan_line(f, ev->text)) add_log(f, ev->text, ev->level);
        }
        f->log_seq = f->events[n - 1].seq;
        if (n < EVENTS_PER_READ) break;
    }
}

/* The block copy: a prefix when asked for and enough, else the whole pool. */
static void read_blocks(kv_frame *f, const kv_engine *e, int32_t prefix)
{
    int32_t n = f->info.num_blocks;
    int32_t want = prefix > 0 && prefix < n ? prefix : n;
    if (f->src == e && f->blocks_seq == f->last_event_seq && f->blocks_step == f->info.step &&
        f->blocks_total == n && want <= f->nblocks)
        return;
    f->nblocks = kv_engine_blocks_brief(e, f->blocks, want);
    f->blocks_seq = f->last_event_seq;
    f->blocks_step = f->info.step;
    f->blocks_total = n;
    if (f->nblocks >= n) return;
    /* The prefix must hold every used and every hashed block (the engine's
     * counts say how many there are), with a quarter to spare. */
    int32_t act = 0, used = 0, hashed = 0;
    for (int32_t i = 0; i < f->nblocks; i++) {
        const kv_block_view *b = &f->blocks[i];
        if (b->is_null) continue;
        if (!b->is_free) used++;
        if (b->has_hash) hashed++;
        if (!b->is_free || b->cached_free) act = i + 1;
    }
    if ((int64_t)act + act / 4 + 1 >= f->nblocks || used != n - 1 - f->info.num_free_blocks ||
        hashed != f->info.num_cached_blocks)
        f->nblocks = kv_engine_blocks_brief(e, f->blocks, n);
}

/* Append request id (its view and block table); 0 when it is not found. */
static int add_req(kv_frame *f, const kv_engine *e, int64_t id, int32_t at)
{
    kv_request_view rv;
    if (kv_engine_request(e, id, &rv) != 0) return 0;
    if (rv.num_blocks < 0) rv.num_blocks = 0;
    if (!grow((void **)&f->tables, &f->cap_tables, (int64_t)f->ntables + rv.num_blocks, sizeof *f->tables))
        return -1;
    int32_t len = kv_engine_block_table(e, id, f->tables + f->ntables, rv.num_blocks);
    if (len < 0) len = 0;
    if (len > rv.num_blocks) len = rv.num_blocks;
    rv.num_blocks = len;
    f->reqs[at].req = rv;
    f->reqs[at].table_off = f->ntables;
    f->ntables += len;
    return 1;
}

/* Ids from one of the engine's lists into f->ids (growing it); the count. */
static int32_t read_ids(kv_frame *f, const kv_engine *e, int waiting, int32_t limit)
{
    int32_t n = waiting ? kv_engine_waiting(e, f->ids, f->cap_ids) : kv_engine_running(e, f->ids, f->cap_ids);
    if (n > limit) n = limit;
    if (n > f->cap_ids) {
        if (!grow((void **)&f->ids, &f->cap_ids, n, sizeof *f->ids)) return -1;
        int32_t m = waiting ? kv_engine_waiting(e, f->ids, f->cap_ids) : kv_engine_running(e, f->ids, f->cap_ids);
        if (m < n) n = m;
    }
    return n;
}

static int read_reqs(kv_frame *f, const kv_engine *e, int64_t extra)
{
    f->ntables = 0;
    int32_t nr = read_ids(f, e, 0, INT32_MAX - 1);
    if (nr < 0 || !grow((void **)&f->reqs, &f->cap_reqs, (int64_t)nr + 1, sizeof *f->reqs)) return -1;
    int32_t k = 0;
    for (int32_t i = 0; i < nr; i++) {
        int r = add_req(f, e, f->ids[i], k);
        if (r < 0) return -1;
        k += r;
    }
    f->nrunning = k;
    int32_t nw = read_ids(f, e, 1, KV_FRAME_MAX_WAITING);
    if (nw < 0 || !grow((void **)&f->reqs, &f->cap_reqs, (int64_t)k + nw + 1, sizeof *f->reqs)) return -1;
    for (int32_t i = 0; i < nw; i++) {
        int r = add_req(f, e, f->ids[i], k);
        if (r < 0) return -1;
        k += r;
    }
    f->nwaiting = k - f->nrunning;
    f->nextra = 0;
    if (extra >= 0 && !kv_frame_find_req(f, extra)) {
        int r = add_req(f, e, extra, k);
        if (r < 0) return -1;
        f->nextra = r;
    }
    return 0;
}

int kv_frame_capture(kv_frame *f, const kv_engine *e, const kv_plan *plan, const kv_frame_opts *opts,
                     char *err, size_t errlen)
{
    if (!opts) opts = &no_opts;
    f->has_plan = plan != NULL;
    if (plan) memcpy(&f->plan, plan, sizeof f->plan);
    if (!e) {
        clear_live(f);
        kv_frame_forget(f);
        f->captured = 1;
        f->opts = *opts;
        return 0;
    }
    f->has_engine = 1;
    kv_engine_get_info(e, &f->info);
    kv_engine_get_metrics(e, &f->metrics);
    const kv_engine_config *cfg = kv_engine_get_config(e);
    f->num_kv_heads = cfg->num_kv_heads;
    f->tensor_parallel_size = cfg->tensor_parallel_size;
    f->max_model_len = cfg->max_model_len;
    f->max_num_seqs = cfg->max_num_seqs;
    f->max_num_batched_tokens = cfg->max_num_batched_tokens;
    f->enable_prefix_caching = cfg->enable_prefix_caching;
    snprintf(f->device_name, sizeof f->device_name, "%s", kv_engine_device_name(e));
    f->last_event_seq = kv_engine_last_event_seq(e);
    /* Another engine, or this one started over (its events restarted). */
    if (e != f->src || f->last_event_seq < f->log_seq) kv_frame_forget(f);
    if (!f->events) {
        f->events = malloc(EVENTS_PER_READ * sizeof *f->events);
        if (!f->events) goto nomem;
    }
    read_log(f, e);
    if (opts->blocks_prefix < 0) {
        f->nblocks = 0;
        f->blocks_total = 0;   /* the next copy is a fresh one */
    } else {
        if (!grow((void **)&f->blocks, &f->cap_blocks, f->info.num_blocks, sizeof *f->blocks)) goto nomem;
        read_blocks(f, e, opts->blocks_prefix);
    }
    f->src = e;
    if (read_reqs(f, e, opts->extra_req) != 0) goto nomem;
    f->ntimeline = kv_engine_timeline(e, f->timeline, KV_FRAME_TIMELINE);
    if (read_stats(f, e, cfg) != 0) goto nomem;
    int32_t tp = f->tensor_parallel_size;
    if (tp > KV_ENGINE_MAX_RANKS) tp = KV_ENGINE_MAX_RANKS;
    f->nranks = 0;
    for (int32_t r = 0; r < tp; r++)
        if (kv_engine_rank(e, r, &f->ranks[f->nranks]) == 0) f->nranks++;
    f->captured = 1;
    f->opts = *opts;
    return 0;
nomem:
    {
        int32_t n = f->info.num_blocks;
        clear_live(f);
        kv_frame_forget(f);
        return kv_errf(err, errlen, KV_ENGINE_ENOMEM, "out of memory taking a frame of a %d-block pool", (int)n);
    }
}

int kv_frame_current(const kv_frame *f, const kv_engine *e, const kv_plan *plan, const kv_frame_opts *opts)
{
    if (!opts) opts = &no_opts;
    if (!f->captured || f->src != e || f->has_plan != (plan != NULL)) return 0;
    if (f->opts.blocks_prefix != opts->blocks_prefix || f->opts.extra_req != opts->extra_req) return 0;
    if (plan && memcmp(&f->plan, plan, sizeof *plan)) return 0;
    if (!e) return !f->has_engine;
    kv_engine_info i;
    kv_engine_get_info(e, &i);
    const kv_engine_info *o = &f->info;
    return kv_engine_last_event_seq(e) == f->last_event_seq && i.step == o->step &&
           i.num_submitted == o->num_submitted && i.num_finished == o->num_finished &&
           i.num_running == o->num_running && i.num_waiting == o->num_waiting &&
           i.num_free_blocks == o->num_free_blocks && i.num_cached_blocks == o->num_cached_blocks &&
           i.num_blocks == o->num_blocks && i.mode == o->mode && i.clock_s == o->clock_s;
}

const kv_frame_req *kv_frame_find_req(const kv_frame *f, int64_t id)
{
    int32_t n = f->nrunning + f->nwaiting + f->nextra;
    for (int32_t i = 0; i < n; i++)
        if (f->reqs[i].req.id == id) return &f->reqs[i];
    return NULL;
}

const int32_t *kv_frame_table(const kv_frame *f, const kv_frame_req *r) { return f->tables + r->table_off; }

int32_t kv_frame_block_owners(const kv_frame *f, int32_t block_id, int64_t *out, int32_t max)
{
    int32_t n = 0;
    /* Running requests come in scheduler order, not by id: insert sorted. */
    for (int32_t k = 0; k < f->nrunning; k++) {
        const kv_frame_req *r = &f->reqs[k];
        const int32_t *t = kv_frame_table(f, r);
        int holds = 0;
        for (int32_t i = 0; i < r->req.num_blocks && !holds; i++) holds = t[i] == block_id;
        if (!holds) continue;
        int32_t pos = n < max ? n : max;
        while (pos > 0 && out[pos - 1] > r->req.id) {
            if (pos < max) out[pos] = out[pos - 1];
            pos--;
        }
        if (pos < max) out[pos] = r->req.id;
        n++;
    }
    return n;
}

const kv_block_view *kv_frame_block(const kv_frame *f, int32_t block_id)
{
    return block_id >= 0 && block_id < f->nblocks ? &f->blocks[block_id] : NULL;
}
