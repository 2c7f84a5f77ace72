#include "kv_sched.h"

#include <stdlib.h>
#include <string.h>

#include "kv_engine.h"
#include "kv_offload.h"
#include "kv_util.h"

/* Waiting queue: FCFS is a ring deque (append, popleft, appendleft for
 * preempted requests); PRIORITY is a binary min-heap on (priority, arrival,
 * id) where "prepend" is just a push, as in request_queue.py. */
typedef struct wqueue {
    kv_req **a;
    int32_t cap, head, n;
    int heap;
} wqueue;

struct kv_sched {
    kv_sched_config cfg;
    kv_kvcm *kvcm;
    kv_req **running;
    int32_t num_running;
    wqueue waiting;
    kv_req **scheduled;
    int32_t num_scheduled;
    kv_req **finished;
    kv_req **preempted;           /* this step's victims (max_num_seqs) */
    int32_t num_preempted_step;
    kv_req **skipped;             /* skip_unchunkable: requests skipped this step (waiting capacity) */
    int32_t *hit;                 /* prefix-hit scratch, num_blocks */
    int64_t num_preemptions;
    int64_t remote_tokens;        /* prompt tokens loaded from a prefill instance (remote_prefill) */
    kv_pool_event_fn ev;
    void *ev_ctx;
};

static int prio_less(const kv_req *a, const kv_req *b)
{
    if (a->priority != b->priority)
        return a->priority < b->priority;
    if (a->arrival_s != b->arrival_s)
        return a->arrival_s < b->arrival_s;
    return a->id < b->id;
}

static int wq_grow(wqueue *q, kv_req ***side)
{
    int32_t ncap = q->cap ? q->cap * 2 : 64;
    kv_req **na = malloc((size_t)ncap * sizeof *na);
    if (!na)
        return -1;
    for (int32_t i = 0; i < q->n; i++)
        na[i] = q->a[(q->head + i) % (q->cap ? q->cap : 1)];
    if (side) {
        kv_req **ns = realloc(*side, (size_t)ncap * sizeof *ns);
        if (!ns) {
            free(na);
            return -1;
        }
        *side = ns;
    }
    free(q->a);
    q->a = na;
    q->cap = ncap;
    q->head = 0;
    return 0;
}

static void heap_up(wqueue *q, int32_t i)
{
    while (i > 0) {
        int32_t p = (i - 1) / 2;
        if (!prio_less(q->a[i], q->a[p]))
            break;
        kv_req *t = q->a[i]; q->a[i] = q->a[p]; q->a[p] = t;
        i = p;
    }
}

static void heap_down(wqueue *q, int32_t i)
{
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < q->n && prio_less(q->a[l], q->a[m])) m = l;
        if (r < q->n && prio_less(q->a[r], q->a[m])) m = r;
        if (m == i)
            break;
        kv_req *t = q->a[i]; q->a[i] = q->a[m]; q->a[m] = t;
        i = m;
    }
}

static int wq_push(wqueue *q, kv_req *r, int front, kv_req ***side)
{
    if (q->n == q->cap && wq_grow(q, side) != 0)
        return -1;
    if (q->heap) {
        q->a[q->n++] = r;
        heap_up(q, q->n - 1);
    } else if (front) {
        q->head = (q->head + q->cap - 1) % q->cap;
        q->a[q->head] = r;
        q->n++;
    } else {
        q->a[(q->head + q->n) % q->cap] = r;
        q->n++;
    }
    return 0;
}

static kv_req *wq_peek(const wqueue *q)
{
    if (!q->n)
        return NULL;
    return q->heap ? q->a[0] : q->a[q->head];
}

static void wq_pop(wqueue *q)
{
    if (!q->n)
        return;
    if (q->heap) {
        q->a[0] = q->a[--q->n];
        heap_down(q, 0);
    } else {
        q->head = (q->head + 1) % q->cap;
        q->n--;
    }
}

static int wq_remove(wqueue *q, kv_req *r)
{
    for (int32_t i = 0; i < q->n; i++) {
        int32_t idx = q->heap ? i : (q->head + i) % q->cap;
        if (q->a[idx] != r)
            continue;
        if (q->heap) {
            q->a[i] = q->a[--q->n];
            if (i < q->n) {
                heap_down(q, i);
                heap_up(q, i);
            }
        } else {
            for (int32_t k = i; k < q->n - 1; k++)
                q->a[(q->head + k) % q->cap] = q->a[(q->head + k + 1) % q->cap];
            q->n--;
        }
        return 0;
    }
    return -1;
}

static int cmp_prio(const void *a, const void *b)
{
    const kv_req *x = *(kv_req *const *)a, *y = *(kv_req *const *)b;
    return prio_less(x, y) ? -1 : prio_less(y, x) ? 1 : 0;
}

/* ---- scheduler ------------------------------------------------------ */

void kv_sched_rules_default(kv_sched_rules *r)
{
    memset(r, 0, sizeof *r);
    r->reserve_full_prompt = 1;
    r->watermark = 0.0;
    r->priority_self_continue = 1;
    r->priority_unschedule_victim = 1;
    r->free_uncached_first = 1;
    r->stats_at_admission = 1;
    r->stats_split_preempted = 1;
    r->skip_unchunkable = 0;
    r->long_prefill_needs_two = 1;
}

kv_sched *kv_sched_create(const kv_sched_config *cfg, kv_kvcm *kvcm, int32_t num_blocks,
                          kv_pool_event_fn ev, void *ev_ctx, char *err, size_t errlen)
{
    if (cfg->max_num_seqs < 1 || cfg->max_num_batched_tokens < 1 || cfg->max_model_len < 1) {
        kv_errf(err, errlen, -1, "max_num_seqs, max_num_batched_tokens and max_model_len must be positive");
        return NULL;
    }
    kv_sched *s = calloc(1, sizeof *s);
    if (!s)
        goto oom;
    s->cfg = *cfg;
    s->kvcm = kvcm;
    s->ev = ev;
    s->ev_ctx = ev_ctx;
    s->waiting.heap = cfg->policy == KV_POLICY_PRIORITY;
    size_t n = (size_t)cfg->max_num_seqs;
    s->running = calloc(n + 1, sizeof *s->running);
    s->scheduled = calloc(n + 1, sizeof *s->scheduled);
    s->finished = calloc(n + 1, sizeof *s->finished);
    s->preempted = calloc(n + 1, sizeof *s->preempted);
    s->hit = calloc((size_t)(num_blocks > 0 ? num_blocks : 1), sizeof *s->hit);
    if (!s->running || !s->scheduled || !s->finished || !s->preempted || !s->hit || wq_grow(&s->waiting, &s->skipped) != 0) {
        kv_sched_destroy(s);
        goto oom;
    }
    return s;
oom:
    kv_errf(err, errlen, -1, "out of memory creating the scheduler");
    return NULL;
}

void kv_sched_destroy(kv_sched *s)
{
    if (!s)
        return;
    free(s->running);
    free(s->scheduled);
    free(s->finished);
    free(s->preempted);
    free(s->hit);
    free(s->skipped);
    free(s->waiting.a);
    free(s);
}

int kv_sched_add(kv_sched *s, kv_req *r)
{
    r->status = KV_REQ_WAITING;
    r->sched_index = -1;
    return wq_push(&s->waiting, r, 0, &s->skipped);
}

static void emit(kv_sched *s, int type, kv_req *r, int64_t value)
{
    if (s->ev)
        s->ev(s->ev_ctx, type, -1, r->id, value);
}

static void unschedule(kv_sched *s, kv_req *r)
{
    int32_t i = r->sched_index;
    if (i < 0)
        return;
    for (int32_t k = i; k < s->num_scheduled - 1; k++) {
        s->scheduled[k] = s->scheduled[k + 1];
        s->scheduled[k]->sched_index = k;
    }
    s->num_scheduled--;
    r->sched_index = -1;
    r->scheduled = 0;
}

static void remove_running_at(kv_sched *s, int32_t i)
{
    for (int32_t k = i; k < s->num_running - 1; k++)
        s->running[k] = s->running[k + 1];
    s->num_running--;
}

/* _preempt_request: free blocks, recompute from scratch later. */
static void preempt(kv_sched *s, kv_req *r)
{
    kv_kvcm_free(s->kvcm, r);
    r->status = KV_REQ_PREEMPTED;
    r->num_computed = 0;
    r->num_preemptions++;
    s->num_preemptions++;
    wq_push(&s->waiting, r, 1, &s->skipped);
    emit(s, KV_EV_PREEMPT, r, r->num_preemptions);
}

static void add_scheduled(kv_sched *s, kv_req *r, int32_t n)
{
    r->scheduled = n;
    r->sched_index = s->num_scheduled;
    s->scheduled[s->num_scheduled++] = r;
}

/* The running request to preempt: FCFS the last; priority the largest
 * (priority, arrival), the first such in running order (Python's max()). */
static int32_t pick_victim(const kv_sched *s)
{
    if (s->cfg.policy != KV_POLICY_PRIORITY)
        return s->num_running - 1;
    int32_t vi = 0;
    for (int32_t k = 1; k < s->num_running; k++) {
        const kv_req *c = s->running[k], *v = s->running[vi];
        if (c->priority > v->priority || (c->priority == v->priority && c->arrival_s > v->arrival_s))
            vi = k;
    }
    return vi;
}

/* Phase 1: running requests, in order. Returns the number preempted. */
static int32_t schedule_running(kv_sched *s, int32_t *budget, int32_t lpt)
{
    const kv_sched_rules *ru = &s->cfg.rules;
    int prio = s->cfg.policy == KV_POLICY_PRIORITY;
    int32_t preempted = 0, i = 0;
    while (i < s->num_running && *budget > 0) {
        kv_req *r = s->running[i];
        int32_t n = kv_req_num_tokens(r) - r->num_computed;
        if (lpt > 0 && n > lpt)
            n = lpt;
        if (n > *budget)
            n = *budget;
        int32_t cap = s->cfg.max_model_len - 1 - r->num_computed;
        if (s->cfg.mode != KV_MODE_NO_CACHE && n > cap)
            n = cap;
        if (n <= 0) {
            i++;
            continue;
        }
        int self = 0;
        while (!kv_kvcm_fits_held(s->kvcm, r, n) && kv_kvcm_allocate_slots(s->kvcm, r, n, NULL, 0) < 0) {
            int32_t vi = pick_victim(s);
            kv_req *victim = s->running[vi];
            remove_running_at(s, vi);
            if (prio && ru->priority_unschedule_victim) {
                if (victim->sched_index >= 0) {
                    *budget += victim->scheduled;
                    unschedule(s, victim);
                }
                if (vi < i)
                    i--;
            }
            /* (before 0.11.2 a scheduled victim keeps its place in the step) */
            preempt(s, victim);
            s->preempted[s->num_preempted_step++] = victim; /* one per running request at most */
            preempted++;
            if (victim == r) {
                self = 1;
                break;
            }
        }
        if (self) {
            if (prio && ru->priority_self_continue)
                continue; /* r left running: i already points at the next one */
            break;
        }
        add_scheduled(s, r, n);
        *budget -= n;
        i++;
    }
    return preempted;
}

/* Put the requests skipped this step back at the head of the waiting
 * queue, in vLLM's order (a stack of skips prepended as a block). */
static void unskip(kv_sched *s, int32_t nskip)
{
    /* skipped[] is in skip order; vLLM's temporary queue holds them newest
     * first and prepend_requests keeps that order at the head */
    for (int32_t k = 0; k < nskip; k++)
        wq_push(&s->waiting, s->skipped[k], 1, NULL); /* room: they came out of this queue */
}

/* Phase 2: waiting requests (only in a step that preempted nobody). */
static void schedule_waiting(kv_sched *s, int32_t *budget, int32_t lpt, kv_sched_output *out)
{
    const kv_sched_rules *ru = &s->cfg.rules;
    int32_t bs = s->kvcm->block_size, nskip = 0;
    int32_t wm = (int32_t)(ru->watermark * (double)s->cfg.num_blocks);
    while (s->waiting.n > 0 && *budget > 0) {
        if (s->num_running >= s->cfg.max_num_seqs)
            break;
        kv_req *r = wq_peek(&s->waiting);
        int32_t n_hit = 0;
        int looked = r->num_computed == 0;
        if (looked) {
            n_hit = kv_kvcm_get_computed_blocks(s->kvcm, r, s->hit);
            if (!ru->stats_at_admission)
                kv_kvcm_record_stats_split(s->kvcm, r, n_hit * bs, ru->stats_split_preempted);
        }
        int32_t hit_tokens = n_hit * bs;
        /* the host tier: blocks held there right after the GPU hit, loaded
         * into fresh GPU blocks (kv_offload.h; the connector's
         * get_num_new_matched_tokens), the last prompt token kept to compute */
        int32_t ext = 0;
        if (looked && s->kvcm->offload) {
            /* get_num_new_matched_tokens: touch every full block, then look up
             * after the GPU hit (the last prompt token is kept to compute) */
            int32_t full = kv_req_num_tokens(r) / bs, maxb = (kv_req_num_tokens(r) - 1) / bs;
            if (full > r->num_hashes)
                full = r->num_hashes;
            if (maxb > r->num_hashes)
                maxb = r->num_hashes;
            kv_offload_scheduler_touch(s->kvcm->offload, r->hashes, full);
            if (maxb > n_hit)
                ext = kv_offload_lookup(s->kvcm->offload, r->hashes + n_hit, maxb - n_hit);
        }
        int32_t ext_tokens = ext * bs;
        /* a decode instance's request: the prefill instance computed the
         * prompt; what the GPU hit lacks is loaded (NixlConnector
         * get_num_new_matched_tokens: len(prompt) - num_computed), and the
         * scheduler recomputes the last prompt token to sample from
         * (scheduler.py _update_waiting_for_remote_kv) */
        int32_t remote = 0;
        if (looked && r->remote_prefill) {
            remote = kv_req_num_tokens(r) - 1 - hit_tokens - ext_tokens;
            if (remote < 0)
                remote = 0;
            ext_tokens += remote;
        }
        int32_t n = kv_req_num_tokens(r) - r->num_computed - hit_tokens - ext_tokens;
        if (lpt > 0 && n > lpt)
            n = lpt;
        if (!s->cfg.enable_chunked_prefill && n > *budget) {
            if (!ru->skip_unchunkable)
                break;
            wq_pop(&s->waiting);
            s->skipped[nskip++] = r;
            continue;
        }
        if (n > *budget)
            n = *budget;
        /* the watermark holds only while something else runs */
        int32_t keep = s->num_running > 0 ? wm : 0;
        if (ru->reserve_full_prompt && !kv_kvcm_full_sequence_fits(s->kvcm, r, s->hit, n_hit, keep))
            break;
        if (kv_kvcm_allocate_slots_keep(s->kvcm, r, ext_tokens + n, s->hit, n_hit, keep) < 0)
            break;
        if (looked && s->kvcm->offload) { /* connector_prefix_cache_stats.record; the loads' prepare_load */
            kv_offload_record(s->kvcm->offload, kv_req_num_tokens(r) - hit_tokens, ext_tokens, ext);
            if (ext > 0)
                kv_offload_prepare_load(s->kvcm->offload, r->id, r->hashes + n_hit, n_hit, ext);
        }
        if (!looked || ext_tokens > 0)
            r->kv_lost = 1; /* computed tokens whose K/V this device does not hold yet: no blocks behind them,
                               or blocks loaded from the host tier or the prefill instance (the copy writes them) */
        if (looked && r->remote_prefill) { /* once: a resumed request recomputes (do_remote_prefill = False) */
            r->remote_prefill = 0;
            s->remote_tokens += remote;
        }
        if (looked && ru->stats_at_admission)
            kv_kvcm_record_stats_split(s->kvcm, r, hit_tokens, ru->stats_split_preempted);
        wq_pop(&s->waiting);
        s->running[s->num_running++] = r;
        int resumed = r->status == KV_REQ_PREEMPTED;
        r->status = KV_REQ_RUNNING;
        r->num_computed += hit_tokens + ext_tokens;
        if (r->num_cached_tokens < 0)
            r->num_cached_tokens = hit_tokens + ext_tokens;
        r->admit_hit = hit_tokens + ext_tokens;
        emit(s, resumed ? KV_EV_RESUME : KV_EV_ADMIT, r, hit_tokens + ext_tokens);
        add_scheduled(s, r, n);
        *budget -= n;
        out->num_new++;
    }
    unskip(s, nskip);
}

void kv_sched_schedule(kv_sched *s, kv_sched_output *out)
{
    memset(out, 0, sizeof *out);
    int32_t budget = s->cfg.max_num_batched_tokens;
    s->num_scheduled = 0;
    s->num_preempted_step = 0;
    /* long_prefill_token_threshold, off for a lone request (0.31 and later) */
    int32_t lpt = s->cfg.long_prefill_token_threshold;
    if (s->cfg.rules.long_prefill_needs_two && s->num_running + s->waiting.n <= 1)
        lpt = 0;
    int32_t preempted = schedule_running(s, &budget, lpt);
    if (!preempted)
        schedule_waiting(s, &budget, lpt, out);

    /* _update_after_schedule: scheduled tokens count as computed now. */
    for (int32_t k = 0; k < s->num_scheduled; k++) {
        kv_req *r = s->scheduled[k];
        if (r->scheduled == 1 && r->num_computed >= r->prompt_len)
            out->num_decode_tokens += 1;
        else
            out->num_prefill_tokens += r->scheduled;
        r->num_computed += r->scheduled;
        out->num_tokens += r->scheduled;
    }
    out->scheduled = s->scheduled;
    out->num_scheduled = s->num_scheduled;
    out->num_preempted = preempted;
    out->preempted = s->preempted;
    out->finished = s->finished;
}

int kv_sched_append_token(kv_sched *s, kv_req *r, double now_s)
{
    r->num_output++;
    if (kv_req_num_tokens(r) / s->kvcm->block_size > r->num_hashes) /* a block filled up */
        kv_req_update_hashes(r, s->kvcm->block_size, s->kvcm->none_hash);
    if (r->first_token_s < 0)
        r->first_token_s = now_s;
    r->last_token_s = now_s;
    if (s->cfg.mode == KV_MODE_NO_CACHE)
        r->num_computed = 0; /* nothing kept: the next token redoes the sequence */
    return r->num_output >= r->max_output || kv_req_num_tokens(r) >= s->cfg.max_model_len;
}

void kv_sched_update(kv_sched *s, kv_sched_output *out, double now_s)
{
    int32_t nf = 0;
    for (int32_t k = 0; k < s->num_scheduled; k++) {
        kv_req *r = s->scheduled[k];
        r->sched_index = -1;
        if (r->status != KV_REQ_RUNNING || r->num_computed < kv_req_num_tokens(r))
            continue; /* a chunk of a prefill (or a victim that kept its place): no token */
        if (kv_sched_append_token(s, r, now_s)) {
            kv_kvcm_free(s->kvcm, r);
            kv_offload_request_finished(s->kvcm->offload, r->id, r->hashes, r->num_hashes);
            r->status = KV_REQ_FINISHED;
            r->finish_s = now_s;
            s->finished[nf++] = r;
            emit(s, KV_EV_FINISH, r, r->num_output);
        }
    }
    if (nf) {
        int32_t w = 0;
        for (int32_t k = 0; k < s->num_running; k++)
            if (s->running[k]->status == KV_REQ_RUNNING)
                s->running[w++] = s->running[k];
        s->num_running = w;
    }
    s->num_scheduled = 0;
    out->num_finished = nf;
    out->finished = s->finished;
}

int kv_sched_abort(kv_sched *s, kv_req *r)
{
    for (int32_t k = 0; k < s->num_running; k++) {
        if (s->running[k] == r) {
            remove_running_at(s, k);
            kv_kvcm_free(s->kvcm, r);
            kv_offload_request_finished(s->kvcm->offload, r->id, r->hashes, r->num_hashes);
            r->status = KV_REQ_ABORTED;
            emit(s, KV_EV_ABORT, r, r->num_output);
            return 0;
        }
    }
    if (wq_remove(&s->waiting, r) == 0) {
        kv_kvcm_free(s->kvcm, r);
        kv_offload_request_finished(s->kvcm->offload, r->id, r->hashes, r->num_hashes);
        r->status = KV_REQ_ABORTED;
        emit(s, KV_EV_ABORT, r, r->num_output);
        return 0;
    }
    return -1;
}

int32_t kv_sched_num_running(const kv_sched *s) { return s->num_running; }
int32_t kv_sched_num_waiting(const kv_sched *s) { return s->waiting.n; }
int64_t kv_sched_num_preemptions(const kv_sched *s) { return s->num_preemptions; }
int64_t kv_sched_remote_tokens(const kv_sched *s) { return s->remote_tokens; }
void kv_sched_set_remote_tokens(kv_sched *s, int64_t n) { s->remote_tokens = n; }

kv_req *kv_sched_running_at(const kv_sched *s, int32_t i)
{
    return i >= 0 && i < s->num_running ? s->running[i] : NULL;
}

kv_req *kv_sched_waiting_at(const kv_sched *s, int32_t i)
{
    const wqueue *q = &s->waiting;
    if (i < 0 || i >= q->n)
        return NULL;
    return q->heap ? q->a[i] : q->a[(q->head + i) % q->cap];
}

int32_t kv_sched_waiting(const kv_sched *s, kv_req **out, int32_t max)
{
    const wqueue *q = &s->waiting;
    int32_t n = q->n < max ? q->n : max;
    if (!q->heap) {
        for (int32_t i = 0; i < n; i++)
            out[i] = q->a[(q->head + i) % q->cap];
        return q->n;
    }
    if (n == q->n) {
        memcpy(out, q->a, (size_t)n * sizeof *out);
        qsort(out, (size_t)n, sizeof *out, cmp_prio);
        return q->n;
    }
    /* partial: sort a copy (views ask rarely) */
    kv_req **tmp = malloc((size_t)q->n * sizeof *tmp);
    if (!tmp)
        return 0;
    memcpy(tmp, q->a, (size_t)q->n * sizeof *tmp);
    qsort(tmp, (size_t)q->n, sizeof *tmp, cmp_prio);
    memcpy(out, tmp, (size_t)n * sizeof *out);
    free(tmp);
    return q->n;
}

int kv_sched_restore(kv_sched *s, kv_req *const *running, int32_t nrun, kv_req *const *waiting, int32_t nwait,
                     int64_t num_preemptions)
{
    s->num_running = 0;
    s->num_scheduled = 0;
    s->num_preempted_step = 0;
    s->waiting.n = 0;
    s->waiting.head = 0;
    s->num_preemptions = num_preemptions;
    if (nrun < 0 || nrun > s->cfg.max_num_seqs || nwait < 0)
        return -1;
    while (s->waiting.cap < nwait)
        if (wq_grow(&s->waiting, &s->skipped) != 0)
            return -1;
    if (nrun)
        memcpy(s->running, running, (size_t)nrun * sizeof *running);
    s->num_running = nrun;
    if (nwait)
        memcpy(s->waiting.a, waiting, (size_t)nwait * sizeof *waiting);
    s->waiting.n = nwait;
    return 0;
}
