#include "kv_sched.h"

#include <stdlib.h>
#include <string.h>

#include "kv_engine.h"
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
    int32_t *hit;                 /* prefix-hit scratch, num_blocks */
    int64_t num_preemptions;
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

static int wq_grow(wqueue *q)
{
    int32_t ncap = q->cap ? q->cap * 2 : 64;
    kv_req **na = malloc((size_t)ncap * sizeof *na);
    if (!na)
        return -1;
    for (int32_t i = 0; i < q->n; i++)
        na[i] = q->a[(q->head + i) % (q->cap ? q->cap : 1)];
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

static int wq_push(wqueue *q, kv_req *r, int front)
{
    if (q->n == q->cap && wq_grow(q) != 0)
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
    s->hit = calloc((size_t)(num_blocks > 0 ? num_blocks : 1), sizeof *s->hit);
    if (!s->running || !s->scheduled || !s->finished || !s->hit || wq_grow(&s->waiting) != 0) {
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
    free(s->hit);
    free(s->waiting.a);
    free(s);
}

int kv_sched_add(kv_sched *s, kv_req *r)
{
    r->status = KV_REQ_WAITING;
    r->sched_index = -1;
    return wq_push(&s->waiting, r, 0);
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
    wq_push(&s->waiting, r, 1);
    emit(s, KV_EV_PREEMPT, r, r->num_preemptions);
}

static int32_t clip_new_tokens(const kv_sched *s, int32_t n, int32_t budget)
{
    if (s->cfg.long_prefill_token_threshold > 0 && n > s->cfg.long_prefill_token_threshold)
        n = s->cfg.long_prefill_token_threshold;
    return n < budget ? n : budget;
}

static void add_scheduled(kv_sched *s, kv_req *r, int32_t n)
{
    r->scheduled = n;
    r->sched_index = s->num_scheduled;
    s->scheduled[s->num_scheduled++] = r;
}

void kv_sched_schedule(kv_sched *s, kv_sched_output *out)
{
    memset(out, 0, sizeof *out);
    int32_t budget = s->cfg.max_num_batched_tokens;
    int32_t preempted = 0;
    s->num_scheduled = 0;

    /* Phase 1: running requests, in order. */
    int32_t i = 0;
    while (i < s->num_running && budget > 0) {
        kv_req *r = s->running[i];
        int32_t n = clip_new_tokens(s, kv_req_num_tokens(r) - r->num_computed, budget);
        int32_t cap = s->cfg.max_model_len - 1 - r->num_computed;
        if (s->cfg.mode != KV_MODE_NO_CACHE && n > cap)
            n = cap;
        if (n <= 0) {
            i++;
            continue;
        }
        int ok = 1;
        while (kv_kvcm_allocate_slots(s->kvcm, r, n, NULL, 0) < 0) {
            kv_req *victim;
            if (s->cfg.policy == KV_POLICY_PRIORITY) {
                int32_t vi = 0;
                for (int32_t k = 1; k < s->num_running; k++) {
                    kv_req *c = s->running[k], *v = s->running[vi];
                    if (c->priority > v->priority ||
                        (c->priority == v->priority && c->arrival_s > v->arrival_s))
                        vi = k;
                }
                victim = s->running[vi];
                remove_running_at(s, vi);
                if (victim->sched_index >= 0) {
                    budget += victim->scheduled;
                    unschedule(s, victim);
                }
                if (vi < i)
                    i--;
            } else {
                victim = s->running[--s->num_running];
            }
            preempt(s, victim);
            preempted++;
            if (victim == r) {
                ok = 0;
                break;
            }
        }
        if (!ok)
            break;
        add_scheduled(s, r, n);
        budget -= n;
        i++;
    }

    /* Phase 2: waiting requests, only if nothing was preempted. */
    if (!preempted) {
        while (s->waiting.n > 0 && budget > 0) {
            if (s->num_running >= s->cfg.max_num_seqs)
                break;
            kv_req *r = wq_peek(&s->waiting);
            int32_t n_hit = 0;
            if (r->num_computed == 0)
                n_hit = kv_kvcm_get_computed_blocks(s->kvcm, r, s->hit);
            int32_t hit_tokens = n_hit * s->kvcm->block_size;
            int32_t n = kv_req_num_tokens(r) - r->num_computed - hit_tokens;
            if (s->cfg.long_prefill_token_threshold > 0 && n > s->cfg.long_prefill_token_threshold)
                n = s->cfg.long_prefill_token_threshold;
            if (!s->cfg.enable_chunked_prefill && n > budget)
                break;
            if (n > budget)
                n = budget;
            if (kv_kvcm_allocate_slots(s->kvcm, r, n, s->hit, n_hit) < 0)
                break;
            if (r->num_computed == 0)
                kv_kvcm_record_stats(s->kvcm, r, hit_tokens);
            wq_pop(&s->waiting);
            s->running[s->num_running++] = r;
            int resumed = r->status == KV_REQ_PREEMPTED;
            r->status = KV_REQ_RUNNING;
            r->num_computed += hit_tokens;
            if (r->num_cached_tokens < 0)
                r->num_cached_tokens = hit_tokens;
            emit(s, resumed ? KV_EV_RESUME : KV_EV_ADMIT, r, hit_tokens);
            add_scheduled(s, r, n);
            budget -= n;
            out->num_new++;
        }
    }

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
    out->finished = s->finished;
}

int kv_sched_append_token(kv_sched *s, kv_req *r, double now_s)
{
    r->num_output++;
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
        if (r->num_computed < kv_req_num_tokens(r))
            continue; /* a chunk of a prefill: no token yet */
        if (kv_sched_append_token(s, r, now_s)) {
            kv_kvcm_free(s->kvcm, r);
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
            r->status = KV_REQ_ABORTED;
            emit(s, KV_EV_ABORT, r, r->num_output);
            return 0;
        }
    }
    if (wq_remove(&s->waiting, r) == 0) {
        kv_kvcm_free(s->kvcm, r);
        r->status = KV_REQ_ABORTED;
        emit(s, KV_EV_ABORT, r, r->num_output);
        return 0;
    }
    return -1;
}

int32_t kv_sched_num_running(const kv_sched *s) { return s->num_running; }
int32_t kv_sched_num_waiting(const kv_sched *s) { return s->waiting.n; }
int64_t kv_sched_num_preemptions(const kv_sched *s) { return s->num_preemptions; }

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
