/* kv_engine_step.c: one engine step (schedule, write the K/V, advance the
 * virtual clock by the time model, sample, finish), and what it decided. */
#include "kv_engine_int.h"
#include "kv_offload.h"

#include <stdlib.h>
#include <string.h>

#include "kv_util.h"

/* ---- stepping ---------------------------------------------------------- */

void kv_eng_accumulate_time(kv_engine *e, double dt, double usage)
{
    if (dt <= 0)
        return;
    e->total_time += dt;
    e->usage_time += usage * dt;
    e->waiting_time += kv_sched_num_waiting(e->sched) * dt;
    e->running_time += kv_sched_num_running(e->sched) * dt;
}

void kv_engine_advance_clock(kv_engine *e, double t)
{
    if (t <= e->clock)
        return;
    kv_eng_journal(e, &(kv_engine_input){.type = KV_IN_ADVANCE_CLOCK, .t = t});
    kv_eng_accumulate_time(e, t - e->clock, kv_pool_usage(e->pool));
    e->clock = t;
}

static int flush_writes(kv_engine *e, int32_t n, char *err, size_t errlen)
{
    char derr[256];
    for (int32_t r = 0; r < e->cfg.tensor_parallel_size; r++) {
        int rc = e->dev->ops->write_kv(e->dev, r, e->writes, (size_t)n, derr, sizeof derr);
        if (rc)
            return kv_errf(err, errlen, KV_ENGINE_EDEVICE, "%s", derr);
    }
    return 0;
}

static void mark_dirty(kv_engine *e, int32_t block, int64_t req_id)
{
    if (block < 0 || block >= e->cfg.num_blocks)
        return;
    if (!e->dirty[block]) {
        e->dirty[block] = req_id + 1;
        e->dirty_list[e->num_dirty++] = block;
    } else if (e->dirty[block] != req_id + 1) {
        e->dirty[block] = -1;
    }
}

static void clear_dirty(kv_engine *e)
{
    for (int32_t i = 0; i < e->num_dirty; i++)
        e->dirty[e->dirty_list[i]] = 0;
    e->num_dirty = 0;
}

static int write_step_kv(kv_engine *e, const kv_sched_output *o, char *err, size_t errlen)
{
    int32_t bs = e->cfg.block_size, n = 0;
    for (int32_t k = 0; k < o->num_scheduled; k++) {
        kv_req *r = o->scheduled[k];
        if (r->status != KV_REQ_RUNNING)
            continue; /* a priority victim that kept its place (vLLM 0.11.0): no blocks to write */
        /* such a victim, admitted again, counts tokens as computed that no block
         * holds (vLLM 0.11.0 left them so): write them too, so the read-back holds */
        int32_t from = r->kv_lost ? 0 : r->num_computed - r->scheduled;
        r->kv_lost = 0;
        for (int32_t pos = from; pos < r->num_computed; pos++) {
            kv_slot_write *w = &e->writes[n++];
            w->slot = (int64_t)r->table[pos / bs] * bs + pos % bs;
            w->token_id = kv_req_token(r, pos);
            w->position = pos;
            w->parent = kv_eng_block_key(e, r, pos / bs);
            mark_dirty(e, r->table[pos / bs], r->id);
            if (n == WRITE_BATCH) {
                int rc = flush_writes(e, n, err, errlen);
                if (rc)
                    return rc;
                n = 0;
            }
        }
    }
    return n ? flush_writes(e, n, err, errlen) : 0;
}

static void sample_timeline(kv_engine *e, const kv_sched_output *o, double dur, double usage)
{
    kv_timeline_sample *s = &e->tl[e->tl_n % e->tl_cap];
    s->step = e->step;
    s->clock_s = e->clock;
    s->kv_usage = usage;
    s->num_running = kv_sched_num_running(e->sched);
    s->num_waiting = kv_sched_num_waiting(e->sched);
    s->num_scheduled_tokens = o->num_tokens;
    s->num_preempted = o->num_preempted;
    s->num_preemptions_total = kv_sched_num_preemptions(e->sched);
    s->prefix_hit_rate = e->kvcm.queries ? (double)e->kvcm.hits / (double)e->kvcm.queries : 0.0;
    kv_offload_stats ost;
    kv_offload_get_stats(e->kvcm.offload, &ost);
    s->external_hit_rate = ost.queries ? (double)ost.hits / (double)ost.queries : 0.0;
    s->tokens_per_s = dur > 0 ? o->num_tokens / dur : 0.0;
    s->work_with_cache = e->m.work_tokens_with_cache;
    s->work_without_cache = e->m.work_tokens_without_cache;
    s->generation_tokens_total = e->m.generation_tokens_total;
    s->prompt_tokens_total = e->m.prompt_tokens_total;
    s->prompt_computed_total = e->m.prompt_computed_total;
    e->tl_n++;
}

static void record_step(kv_engine *e, const kv_sched_output *o)
{
    e->ls_step = e->step;
    e->ls_n = o->num_scheduled;
    e->ls_first_new = o->num_scheduled - o->num_new;
    for (int32_t k = 0; k < o->num_scheduled; k++) {
        const kv_req *r = o->scheduled[k];
        int admitted = k >= e->ls_first_new;
        e->ls_ids[k] = r->id;
        e->ls_tok[k] = r->scheduled;
        e->ls_hit[k] = admitted ? r->admit_hit : 0;
        e->ls_resumed[k] = (uint8_t)(admitted && r->num_preemptions > 0);
    }
    e->ls_npre = o->num_preempted;
    for (int32_t k = 0; k < o->num_preempted; k++)
        e->ls_pre[k] = o->preempted[k]->id;
    e->ls_nfin = 0;
}

void kv_engine_last_step(const kv_engine *e, kv_step_detail *d)
{
    d->step = e->ls_step;
    d->num_scheduled = e->ls_n;
    d->ids = e->ls_ids;
    d->num_tokens = e->ls_tok;
    d->first_admitted = e->ls_first_new;
    d->hit_tokens = e->ls_hit;
    d->resumed = e->ls_resumed;
    d->num_preempted = e->ls_npre;
    d->preempted = e->ls_pre;
    d->num_finished = e->ls_nfin;
    d->finished = e->ls_fin;
}

int32_t kv_engine_future_token(const kv_engine *e, int64_t id, int32_t pos)
{
    const kv_req *r = kv_eng_live_req(e, id);
    if (!r || pos < 0)
        return -1;
    int64_t end = (int64_t)r->prompt_len + r->max_output;
    if (end > e->cfg.max_model_len)
        end = e->cfg.max_model_len;
    return pos < end ? kv_req_token(r, pos) : -1;
}

int kv_engine_step(kv_engine *e, kv_step_result *out, char *err, size_t errlen)
{
    kv_step_result res;
    memset(&res, 0, sizeof res);
    res.step = e->step;
    res.clock_s = e->clock;
    if (out)
        *out = res;
    if (kv_sched_num_running(e->sched) == 0 && kv_sched_num_waiting(e->sched) == 0)
        return 0;
    kv_eng_journal(e, &(kv_engine_input){.type = KV_IN_STEP});
    kv_sched_output o;
    double start = e->clock;
    kv_offload_stats os0, os1;
    kv_offload_get_stats(e->kvcm.offload, &os0);
    kv_sched_schedule(e->sched, &o);
    record_step(e, &o);
    res.num_preempted = o.num_preempted;
    res.num_new_reqs = o.num_new;
    e->m.num_preemptions_total += o.num_preempted;
    if (o.num_tokens == 0) {
        e->step++;
        if (out)
            *out = res;
        if (o.num_preempted == 0)
            /* requests exist yet none could run: without this a caller's
             * "step until done" loop would spin forever */
            return kv_errf(err, errlen, KV_ENGINE_EINVAL,
                           "no request can make progress: %d running, %d waiting, %d of %d blocks free",
                           (int)kv_sched_num_running(e->sched), (int)kv_sched_num_waiting(e->sched),
                           (int)kv_pool_num_free(e->pool), (int)(e->cfg.num_blocks - 1));
        return 0;
    }
    /* model execution: write the K/V of every scheduled token */
    if (e->write_kv && e->cfg.mode != KV_MODE_NO_CACHE) {
        int rc = write_step_kv(e, &o, err, errlen);
        if (rc)
            return rc;
    }
    /* the step's work (kv_timemodel_add_chunk), summed in integers: exact,
     * and no chain of dependent floating-point adds through memory */
    int64_t w_tokens = 0, w_pairs = 0, w_read = 0;
    for (int32_t k = 0; k < o.num_scheduled; k++) {
        kv_req *r = o.scheduled[k];
        int32_t s0 = r->num_computed - r->scheduled;
        int64_t n = r->scheduled;
        w_tokens += n;
        w_pairs += n * s0 + n * (n + 1) / 2; /* token at position p attends to p + 1 positions */
        w_read += s0 + n;
        if (r->first_sched_s < 0) {
            r->first_sched_s = start;
            kv_hist_observe(&e->hist[KV_HIST_QUEUE], start - r->arrival_s);
        }
        if (r->high_water > s0) {
            /* tokens this request had computed before it was preempted */
            int32_t redo = (r->high_water < r->num_computed ? r->high_water : r->num_computed) - s0;
            e->m.recomputed_tokens += redo;
        }
        if (r->num_computed > r->high_water && e->cfg.mode != KV_MODE_NO_CACHE)
            r->high_water = r->num_computed;
    }
    kv_step_work w = {(double)w_tokens, (double)w_pairs, (double)w_read};
    if (e->cfg.mode == KV_MODE_NO_CACHE)
        w.kv_tokens_read = 0; /* nothing cached to read: the work is all in the recompute */
    double usage = kv_pool_usage(e->pool);
    double dur = kv_timemodel_step(&e->tparams, &w, NULL);
    /* host-tier loads this step: each rank copies its share of the blocks
     * over its own host link before the step's forward can read them */
    kv_offload_get_stats(e->kvcm.offload, &os1);
    if (os1.loaded_blocks > os0.loaded_blocks && e->cfg.offload_link_bytes_per_s > 0) {
        double load_s = (double)(os1.loaded_blocks - os0.loaded_blocks) * e->cfg.block_size *
                        e->tparams.kv_bytes_per_token / e->cfg.offload_link_bytes_per_s;
        e->m.offload_load_s += load_s;
        dur += load_s;
    }
    kv_eng_accumulate_time(e, dur, usage);
    e->clock += dur;
    if (usage > e->m.peak_kv_usage)
        e->m.peak_kv_usage = usage;
    e->m.computed_tokens += o.num_tokens;

    /* sampling: which requests produce a token this step, before update() */
    int64_t same_itl = 0; /* requests whose previous token came at the end of the previous step */
    for (int32_t k = 0; k < o.num_scheduled; k++) {
        kv_req *r = o.scheduled[k];
        if (r->status != KV_REQ_RUNNING || r->num_computed < kv_req_num_tokens(r))
            continue;
        int32_t seq = kv_req_num_tokens(r);
        if (r->first_token_s < 0) {
            kv_hist_observe(&e->hist[KV_HIST_TTFT], e->clock - r->arrival_s);
            e->m.prompt_tokens_total += r->prompt_len;
            e->m.prompt_computed_total += r->prompt_len - (r->admit_hit < r->prompt_len ? r->admit_hit : r->prompt_len);
            e->m.work_tokens_with_cache += r->prompt_len;
        } else {
            if (r->last_token_s == start)
                same_itl++;
            else
                kv_hist_observe(&e->hist[KV_HIST_ITL], e->clock - r->last_token_s);
            e->m.work_tokens_with_cache += 1;
        }
        e->m.work_tokens_without_cache += seq;
        e->m.generation_tokens_total++;
    }
    kv_hist_observe_n(&e->hist[KV_HIST_ITL], e->clock - start, same_itl);
    kv_sched_update(e->sched, &o, e->clock);
    e->ls_nfin = o.num_finished;
    for (int32_t k = 0; k < o.num_finished; k++) {
        kv_req *r = o.finished[k];
        e->ls_fin[k] = r->id;
        kv_hist_observe(&e->hist[KV_HIST_E2E], r->finish_s - r->arrival_s);
        e->m.request_success_total++;
        kv_eng_retire(e, r);
    }
    res.num_scheduled_reqs = o.num_scheduled;
    res.num_scheduled_tokens = o.num_tokens;
    res.num_prefill_tokens = o.num_prefill_tokens;
    res.num_decode_tokens = o.num_decode_tokens;
    res.num_finished = o.num_finished;
    res.duration_s = dur;
    res.clock_s = e->clock;
    sample_timeline(e, &o, dur, usage);
    e->step++;
    if (out)
        *out = res;
    if (e->verify && e->cfg.mode != KV_MODE_NO_CACHE) {
        int rc = kv_eng_verify_changed(e, err, errlen);
        if (rc)
            return rc;
    }
    clear_dirty(e);
    return o.num_tokens;
}

