#include "kv_history.h"

#include <stdlib.h>
#include <string.h>

#include "kv_engine_int.h"
#include "kv_snapshot.h"
#include "kv_util.h"

/* Journal entries: a tag byte, then the input's fields. A run of steps
 * with no input between them is one entry whose 4-byte count grows. */
enum { J_STEP = 0, J_SUBMIT, J_ABORT, J_RESET, J_MODE, J_CLOCK, J_LOG };
enum { JS_IDS = 1, JS_PREFIX = 2, JS_SALT = 4, JS_REMOTE = 8 };

typedef struct ckpt {
    int64_t step;              /* the engine's step: this is position `step` of the segment */
    size_t joff;               /* journal entries from here on come after it */
    kv_snapshot img;
} ckpt;

typedef struct segment {
    kv_engine_config cfg;      /* the live engine's, device dropped */
    int64_t run;               /* run number: attach order over the history's life */
    void *note;                /* the caller's bytes for this run (kv_history_set_note), or NULL */
    size_t note_len;
    int64_t base;              /* global position of step s0 */
    int64_t s0;                /* first kept step */
    int64_t anchor;            /* step at attach: checkpoints fall at anchor + i x K */
    int64_t last_step;         /* newest step (positions s0..last_step) */
    uint8_t *j;
    size_t jlen, jcap;
    size_t run_at;             /* offset of the open step run */
    int run_open;
    ckpt *ck;
    int32_t nck, capck;
} segment;

struct kv_history {
    uint64_t max_bytes;
    int32_t every;
    segment *segs;
    int32_t nseg, capseg;
    int64_t runs;              /* segments attached so far (the next run's number) */
    /* live engine */
    kv_engine *live;
    int32_t live_seg;
    int64_t noted_step, noted_evictions;
    int evicting;              /* the last noted step evicted (a burst is marked once, where it starts) */
    /* marks, in position order */
    kv_history_mark *marks;
    int64_t nmarks, capmarks;
    int64_t forgotten;
    /* replay */
    kv_engine *replay;
    int32_t replay_seg;
    int64_t replay_pos;        /* -1: cursor unknown (load a checkpoint) */
    size_t cur_off;
    uint32_t cur_done;         /* steps of the run at cur_off already replayed */
    int32_t *ids;
    int32_t ids_cap;
    int64_t last_seek_steps;
};

static int64_t seg_positions(const segment *s) { return s->last_step - s->s0 + 1; }

/* ---- bytes ------------------------------------------------------------ */

static int jgrow(segment *s, size_t more)
{
    if (s->jlen + more <= s->jcap)
        return 0;
    /* grow by an eighth: one input never jumps far past the memory bound */
    size_t ncap = s->jlen + more + (s->jcap / 8 > 4096 ? s->jcap / 8 : 4096);
    uint8_t *n = realloc(s->j, ncap);
    if (!n)
        return -1;
    s->j = n;
    s->jcap = ncap;
    return 0;
}

static void jput(segment *s, const void *p, size_t n)
{
    memcpy(s->j + s->jlen, p, n);
    s->jlen += n;
}

static void juv(segment *s, uint64_t v)
{
    while (v >= 0x80) {
        s->j[s->jlen++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    s->j[s->jlen++] = (uint8_t)v;
}

static void jsv(segment *s, int64_t v) { juv(s, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63)); }

static uint64_t ruv(const uint8_t *j, size_t *off)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        uint8_t b = j[(*off)++];
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            break;
    }
    return v;
}

static int64_t rsv(const uint8_t *j, size_t *off)
{
    uint64_t u = ruv(j, off);
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

static uint64_t history_bytes(const kv_history *h, uint64_t *ck, uint64_t *jb, uint64_t *mb)
{
    uint64_t c = 0, jj = 0;
    for (int32_t i = 0; i < h->nseg; i++) {
        const segment *s = &h->segs[i];
        jj += s->jcap + sizeof *s + s->note_len;
        c += (uint64_t)s->capck * sizeof(ckpt);
        for (int32_t k = 0; k < s->nck; k++)
            c += s->ck[k].img.cap;
    }
    uint64_t m = (uint64_t)h->capmarks * sizeof(kv_history_mark) + (uint64_t)h->ids_cap * sizeof(int32_t) +
                 sizeof *h;
    if (ck)
        *ck = c;
    if (jb)
        *jb = jj;
    if (mb)
        *mb = m;
    return c + jj + m;
}

/* ---- lifetime ---------------------------------------------------------- */

kv_history *kv_history_create(const kv_history_opts *o, char *err, size_t errlen)
{
    uint64_t max = o && o->max_bytes ? o->max_bytes : KV_HISTORY_DEFAULT_BYTES;
    int32_t every = o && o->every > 0 ? o->every : KV_HISTORY_DEFAULT_EVERY;
    if (max < (64u << 10)) {
        kv_errf(err, errlen, KV_ENGINE_EINVAL, "a history needs at least 64 KiB, got %llu bytes",
                (unsigned long long)max);
        return NULL;
    }
    kv_history *h = calloc(1, sizeof *h);
    if (!h) {
        kv_errf(err, errlen, KV_ENGINE_ENOMEM, "out of memory creating the history");
        return NULL;
    }
    h->max_bytes = max;
    h->every = every;
    h->live_seg = -1;
    h->replay_seg = -1;
    h->replay_pos = -1;
    return h;
}

static void seg_free(segment *s)
{
    for (int32_t k = 0; k < s->nck; k++)
        kv_snapshot_free(&s->ck[k].img);
    free(s->ck);
    free(s->j);
    free(s->note);
}

void kv_history_destroy(kv_history *h)
{
    if (!h)
        return;
    kv_history_detach(h);
    for (int32_t i = 0; i < h->nseg; i++)
        seg_free(&h->segs[i]);
    free(h->segs);
    free(h->marks);
    free(h->ids);
    kv_engine_destroy(h->replay);
    free(h);
}

kv_engine *kv_history_live(const kv_history *h) { return h->live; }

/* ---- marks ------------------------------------------------------------- */

static void add_mark(kv_history *h, int64_t pos, uint32_t kinds, int32_t count, int64_t req)
{
    if (h->nmarks && h->marks[h->nmarks - 1].pos == pos) {
        kv_history_mark *m = &h->marks[h->nmarks - 1];
        m->kinds |= kinds;
        return;
    }
    if (h->nmarks == h->capmarks) {
        int64_t ncap = h->capmarks + 256 + h->capmarks / 8;
        kv_history_mark *n = realloc(h->marks, (size_t)ncap * sizeof *n);
        if (!n)
            return; /* a mark less, nothing worse */
        h->marks = n;
        h->capmarks = ncap;
    }
    h->marks[h->nmarks++] = (kv_history_mark){pos, kinds, count, req};
}

static int64_t global_pos(const segment *s, int64_t step) { return s->base + (step - s->s0); }

void kv_history_sync(kv_history *h)
{
    kv_engine *e = h->live;
    if (!e || e->step == h->noted_step)
        return;
    segment *s = &h->segs[h->live_seg];
    kv_engine_metrics m;
    kv_engine_get_metrics(e, &m);
    kv_step_detail d;
    kv_engine_last_step(e, &d);
    if (d.step == e->step - 1 && e->step <= s->last_step) {
        uint32_t kinds = 0;
        int32_t count = 1;
        int64_t req = -1;
        if (d.num_preempted > 0) {
            kinds |= KV_MARK_PREEMPT;
            count = d.num_preempted;
            req = d.preempted[0];
        }
        int evicted = m.block_evictions > h->noted_evictions;
        if (evicted && !h->evicting)
            kinds |= KV_MARK_EVICT;
        h->evicting = evicted;
        if (d.num_finished > 0) {
            kinds |= KV_MARK_FINISH;
            if (req < 0) {
                req = d.finished[0];
                count = d.num_finished;
            }
        }
        for (int32_t k = d.first_admitted; k < d.num_scheduled; k++)
            if (d.hit_tokens[k] > 0) {
                kinds |= KV_MARK_HIT;
                if (req < 0)
                    req = d.ids[k];
                break;
            }
        if (kinds)
            add_mark(h, global_pos(s, e->step), kinds, count, req);
    }
    h->noted_step = e->step;
    h->noted_evictions = m.block_evictions;
}

int kv_history_next_mark(const kv_history *h, int64_t pos, int dir, uint32_t kinds, kv_history_mark *out)
{
    /* first mark with pos > given (binary search), then walk */
    int64_t lo = 0, hi = h->nmarks;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (h->marks[mid].pos <= pos)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (dir > 0) {
        for (int64_t i = lo; i < h->nmarks; i++)
            if (h->marks[i].kinds & kinds) {
                *out = h->marks[i];
                return 0;
            }
    } else {
        for (int64_t i = lo - 1; i >= 0; i--)
            if (h->marks[i].pos < pos && (h->marks[i].kinds & kinds)) {
                *out = h->marks[i];
                return 0;
            }
    }
    return -1;
}

uint32_t kv_history_marks_between(const kv_history *h, int64_t from, int64_t to)
{
    int64_t lo = 0, hi = h->nmarks;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (h->marks[mid].pos < from)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint32_t k = 0;
    for (int64_t i = lo; i < h->nmarks && h->marks[i].pos < to; i++)
        k |= h->marks[i].kinds;
    return k;
}

/* ---- checkpoints and the memory bound --------------------------------- */

static int add_ckpt(segment *s, const kv_engine *e, char *err, size_t errlen)
{
    if (s->nck == s->capck) {
        int32_t ncap = s->capck ? s->capck * 2 : 16;
        ckpt *n = realloc(s->ck, (size_t)ncap * sizeof *n);
        if (!n)
            return kv_errf(err, errlen, KV_ENGINE_ENOMEM, "out of memory for a checkpoint");
        s->ck = n;
        s->capck = ncap;
    }
    ckpt *c = &s->ck[s->nck];
    kv_snapshot_init(&c->img);
    int rc = kv_snapshot_save(e, &c->img, err, errlen);
    if (rc) {
        kv_snapshot_free(&c->img);
        return rc;
    }
    if (c->img.cap > c->img.len + 256) { /* checkpoints are kept long: no slack */
        uint8_t *n = realloc(c->img.data, c->img.len);
        if (n) {
            c->img.data = n;
            c->img.cap = c->img.len;
        }
    }
    c->step = e->step;
    c->joff = s->jlen;
    s->run_open = 0; /* steps after the checkpoint start a new run */
    s->nck++;
    return 0;
}

static void drop_ckpt(segment *s, int32_t k)
{
    kv_snapshot_free(&s->ck[k].img);
    memmove(&s->ck[k], &s->ck[k + 1], (size_t)(s->nck - k - 1) * sizeof *s->ck);
    s->nck--;
}

/* Keep every segment's first checkpoint and those at anchor + i x every. */
static int thin(kv_history *h)
{
    int dropped = 0;
    for (int32_t i = 0; i < h->nseg; i++) {
        segment *s = &h->segs[i];
        for (int32_t k = s->nck - 1; k >= 1; k--)
            if ((s->ck[k].step - s->anchor) % h->every != 0) {
                drop_ckpt(s, k);
                dropped = 1;
            }
    }
    return dropped;
}

static void drop_marks_before(kv_history *h, int64_t pos)
{
    int64_t k = 0;
    while (k < h->nmarks && h->marks[k].pos < pos)
        k++;
    if (k)
        memmove(h->marks, h->marks + k, (size_t)(h->nmarks - k) * sizeof *h->marks);
    h->nmarks -= k;
    if (h->nmarks < h->capmarks / 2) {
        int64_t ncap = h->nmarks + 256;
        kv_history_mark *n = realloc(h->marks, (size_t)ncap * sizeof *n);
        if (n) {
            h->marks = n;
            h->capmarks = ncap;
        }
    }
}

static void shrink_journal(segment *s)
{
    if (s->jlen + 4096 < s->jcap / 2) {
        uint8_t *n = realloc(s->j, s->jlen + 4096);
        if (n) {
            s->j = n;
            s->jcap = s->jlen + 4096;
        }
    }
}

/* Forget the oldest checkpoint's span (or the oldest segment). 0 when
 * something went, -1 when only the live segment's one checkpoint is left. */
static int forget_oldest(kv_history *h)
{
    if (!h->nseg)
        return -1;
    segment *s = &h->segs[0];
    if (s->nck >= 2) {
        size_t cut = s->ck[1].joff;
        int64_t delta = s->ck[1].step - s->s0;
        drop_ckpt(s, 0);
        memmove(s->j, s->j + cut, s->jlen - cut);
        s->jlen -= cut;
        shrink_journal(s);
        for (int32_t k = 0; k < s->nck; k++)
            s->ck[k].joff -= cut;
        if (s->run_open) {
            if (s->run_at >= cut)
                s->run_at -= cut;
            else
                s->run_open = 0;
        }
        s->s0 += delta;
        s->base += delta;
        h->forgotten += delta;
        if (h->replay_seg == 0)
            h->replay_pos = -1; /* its cursor pointed into the cut journal */
        drop_marks_before(h, s->base);
        return 0;
    }
    if (h->nseg >= 2 && h->live_seg != 0) {
        h->forgotten += seg_positions(s);
        seg_free(s);
        memmove(&h->segs[0], &h->segs[1], (size_t)(h->nseg - 1) * sizeof *h->segs);
        h->nseg--;
        if (h->live_seg > 0)
            h->live_seg--;
        if (h->replay_seg == 0) {
            kv_engine_destroy(h->replay);
            h->replay = NULL;
            h->replay_seg = -1;
            h->replay_pos = -1;
        } else if (h->replay_seg > 0) {
            h->replay_seg--;
        }
        drop_marks_before(h, h->segs[0].base);
        return 0;
    }
    return -1;
}

/* Room kept below max_bytes for what one input adds before the next check. */
static uint64_t target(const kv_history *h) { return h->max_bytes - h->max_bytes / 8; }

/* Thin, then forget, until under the target. With rebase (only before an
 * input is journaled: the live engine's state is then the journal's end),
 * a live segment down to one checkpoint takes a new one now and drops
 * everything before it. */
static void enforce(kv_history *h, int rebase)
{
    while (history_bytes(h, NULL, NULL, NULL) > target(h)) {
        int extra = 0;
        for (int32_t i = 0; i < h->nseg; i++)
            extra += h->segs[i].nck > 1;
        if (extra && h->every < (1 << 30)) {
            h->every *= 2;
            thin(h);
            continue;
        }
        if (forget_oldest(h) == 0)
            continue;
        if (!rebase || !h->live)
            break;
        segment *s = &h->segs[h->live_seg];
        if (add_ckpt(s, h->live, NULL, 0) != 0)
            break;
        while (!(h->live_seg == 0 && h->segs[0].nck == 1) && forget_oldest(h) == 0)
            ;
        break;
    }
}

/* ---- journal ------------------------------------------------------------ */

static int journal_input(segment *s, const kv_engine_input *in)
{
    switch (in->type) {
    case KV_IN_STEP:
        if (s->run_open) {
            uint32_t n;
            memcpy(&n, s->j + s->run_at + 1, sizeof n);
            n++;
            memcpy(s->j + s->run_at + 1, &n, sizeof n);
            return 0;
        } else {
            if (jgrow(s, 5))
                return -1;
            s->run_at = s->jlen;
            s->run_open = 1;
            uint32_t one = 1;
            s->j[s->jlen++] = J_STEP;
            jput(s, &one, sizeof one);
            return 0;
        }
    case KV_IN_SUBMIT: {
        const kv_request_spec *sp = in->spec;
        size_t lp = sp->prefix_id ? strlen(sp->prefix_id) : 0, ls = sp->cache_salt ? strlen(sp->cache_salt) : 0;
        int32_t nids = sp->prompt_token_ids ? sp->num_prompt_token_ids : 0;
        if (nids < 0)
            nids = 0;
        if (jgrow(s, 64 + lp + ls + (size_t)nids * 5))
            return -1;
        uint8_t f = (uint8_t)((sp->prompt_token_ids ? JS_IDS : 0) | (sp->prefix_id ? JS_PREFIX : 0) |
                              (sp->cache_salt ? JS_SALT : 0) | (sp->remote_prefill ? JS_REMOTE : 0));
        s->j[s->jlen++] = J_SUBMIT;
        s->j[s->jlen++] = f;
        jsv(s, sp->prompt_tokens);
        if (f & JS_IDS) {
            jsv(s, sp->num_prompt_token_ids);
            for (int32_t i = 0; i < nids; i++)
                jsv(s, sp->prompt_token_ids[i]);
        }
        jsv(s, sp->output_tokens);
        if (f & JS_PREFIX) {
            juv(s, lp);
            jput(s, sp->prefix_id, lp + 1);
        }
        jsv(s, sp->prefix_tokens);
        jsv(s, sp->priority);
        if (f & JS_SALT) {
            juv(s, ls);
            jput(s, sp->cache_salt, ls + 1);
        }
        jput(s, &sp->arrival_s, sizeof sp->arrival_s);
        break;
    }
    case KV_IN_ABORT:
        if (jgrow(s, 12))
            return -1;
        s->j[s->jlen++] = J_ABORT;
        jsv(s, in->req_id);
        break;
    case KV_IN_RESET_PREFIX_CACHE:
        if (jgrow(s, 1))
            return -1;
        s->j[s->jlen++] = J_RESET;
        break;
    case KV_IN_SET_MODE:
        if (jgrow(s, 2))
            return -1;
        s->j[s->jlen++] = J_MODE;
        s->j[s->jlen++] = (uint8_t)in->mode;
        break;
    case KV_IN_ADVANCE_CLOCK:
        if (jgrow(s, 9))
            return -1;
        s->j[s->jlen++] = J_CLOCK;
        jput(s, &in->t, sizeof in->t);
        break;
    case KV_IN_LOG: {
        size_t n = in->text ? strlen(in->text) : 0;
        if (jgrow(s, 12 + n))
            return -1;
        s->j[s->jlen++] = J_LOG;
        s->j[s->jlen++] = (uint8_t)in->level;
        juv(s, n);
        jput(s, in->text ? in->text : "", n + 1);
        break;
    }
    default:
        return 0;
    }
    s->run_open = 0;
    return 0;
}

static void end_live(kv_history *h)
{
    if (h->live)
        kv_engine_set_journal(h->live, NULL, NULL);
    h->live = NULL;
    h->live_seg = -1;
}

static void on_input(void *ctx, const kv_engine *ce, const kv_engine_input *in)
{
    kv_history *h = ctx;
    if (!h->live || ce != h->live)
        return;
    kv_history_sync(h);
    segment *s = &h->segs[h->live_seg];
    if (ce->step != s->last_step) {
        /* a step failed on the device half-way: the live engine left the
         * recorded path; what was recorded up to here stays seekable */
        s->last_step = ce->step < s->last_step ? ce->step : s->last_step;
        end_live(h);
        return;
    }
    if (in->type == KV_IN_DESTROY) {
        end_live(h);
        return;
    }
    if (history_bytes(h, NULL, NULL, NULL) > target(h)) {
        enforce(h, 1);
        s = &h->segs[h->live_seg];
    }
    if (in->type == KV_IN_STEP && (ce->step - s->anchor) % h->every == 0 &&
        !(s->nck && s->ck[s->nck - 1].step == ce->step))
        add_ckpt(s, ce, NULL, 0); /* out of memory: a checkpoint less */
    if (journal_input(s, in) != 0) {
        end_live(h); /* out of memory: stop recording rather than record wrong */
        return;
    }
    if (in->type == KV_IN_STEP)
        s->last_step++;
    if (history_bytes(h, NULL, NULL, NULL) > target(h))
        enforce(h, 0);
}

int kv_history_attach(kv_history *h, kv_engine *e, char *err, size_t errlen)
{
    kv_history_sync(h);
    end_live(h);
    if (h->nseg == h->capseg) {
        int32_t ncap = h->capseg ? h->capseg * 2 : 8;
        segment *n = realloc(h->segs, (size_t)ncap * sizeof *n);
        if (!n)
            return kv_errf(err, errlen, KV_ENGINE_ENOMEM, "out of memory for the history");
        h->segs = n;
        h->capseg = ncap;
    }
    segment *s = &h->segs[h->nseg];
    memset(s, 0, sizeof *s);
    s->cfg = *kv_engine_get_config(e);
    s->cfg.device = NULL;
    s->base = h->nseg ? kv_history_present(h) + 1 : h->forgotten;
    s->s0 = s->anchor = s->last_step = e->step;
    int rc = add_ckpt(s, e, err, errlen);
    if (rc) {
        seg_free(s);
        return rc;
    }
    if (h->runs)
        add_mark(h, s->base, KV_MARK_RESTART, 1, -1);
    s->run = h->runs++;
    h->nseg++;
    h->live = e;
    h->live_seg = h->nseg - 1;
    h->noted_step = e->step;
    kv_engine_metrics m;
    kv_engine_get_metrics(e, &m);
    h->noted_evictions = m.block_evictions;
    h->evicting = 0;
    kv_engine_set_journal(e, on_input, h);
    enforce(h, 0);
    return 0;
}

void kv_history_detach(kv_history *h)
{
    kv_history_sync(h);
    end_live(h);
}

/* ---- positions ----------------------------------------------------------- */

int64_t kv_history_first(const kv_history *h) { return h->nseg ? h->segs[0].base : -1; }

int64_t kv_history_present(const kv_history *h)
{
    if (!h->nseg)
        return -1;
    const segment *s = &h->segs[h->nseg - 1];
    return s->base + seg_positions(s) - 1;
}

int kv_history_locate(const kv_history *h, int64_t pos, int32_t *segment_out, int64_t *step)
{
    int32_t lo = 0, hi = h->nseg - 1;
    if (hi < 0 || pos < h->segs[0].base || pos > kv_history_present(h))
        return -1;
    while (lo < hi) { /* last segment with base <= pos */
        int32_t mid = (lo + hi + 1) / 2;
        if (h->segs[mid].base <= pos)
            lo = mid;
        else
            hi = mid - 1;
    }
    const segment *s = &h->segs[lo];
    if (pos - s->base >= seg_positions(s))
        return -1;
    if (segment_out)
        *segment_out = lo;
    if (step)
        *step = s->s0 + (pos - s->base);
    return 0;
}

/* ---- runs ------------------------------------------------------------------- */

int64_t kv_history_runs(const kv_history *h) { return h->runs; }

int64_t kv_history_run_at(const kv_history *h, int64_t pos)
{
    int32_t si;
    return kv_history_locate(h, pos, &si, NULL) == 0 ? h->segs[si].run : -1;
}

/* The kept segment of run `run`, or NULL (runs are numbered in segment order). */
static const segment *run_seg(const kv_history *h, int64_t run)
{
    int32_t lo = 0, hi = h->nseg - 1;
    while (lo <= hi) {
        int32_t mid = (lo + hi) / 2;
        if (h->segs[mid].run == run)
            return &h->segs[mid];
        if (h->segs[mid].run < run)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

int64_t kv_history_position_of(const kv_history *h, int64_t run, int64_t step)
{
    const segment *s = run_seg(h, run);
    if (!s || step < s->s0 || step > s->last_step)
        return -1;
    return global_pos(s, step);
}

int kv_history_run_span(const kv_history *h, int64_t run, int64_t *first, int64_t *last)
{
    const segment *s = run_seg(h, run);
    if (!s)
        return -1;
    if (first)
        *first = s->base;
    if (last)
        *last = s->base + seg_positions(s) - 1;
    return 0;
}

int kv_history_set_note(kv_history *h, const void *data, size_t len, char *err, size_t errlen)
{
    if (!h->live)
        return kv_errf(err, errlen, KV_ENGINE_EINVAL, "no run is being recorded");
    segment *s = &h->segs[h->live_seg];
    void *n = NULL;
    if (len) {
        if (len > h->max_bytes / 16)
            return kv_errf(err, errlen, KV_ENGINE_EINVAL, "a note of %zu bytes is over a sixteenth of the bound",
                           len);
        if (!(n = malloc(len)))
            return kv_errf(err, errlen, KV_ENGINE_ENOMEM, "out of memory for the run's note");
        memcpy(n, data, len);
    }
    free(s->note);
    s->note = n;
    s->note_len = len;
    if (history_bytes(h, NULL, NULL, NULL) > target(h))
        enforce(h, 0);
    return 0;
}

const void *kv_history_note(const kv_history *h, int64_t pos, size_t *len)
{
    int32_t si;
    if (kv_history_locate(h, pos, &si, NULL) != 0 || !h->segs[si].note) {
        if (len)
            *len = 0;
        return NULL;
    }
    if (len)
        *len = h->segs[si].note_len;
    return h->segs[si].note;
}

/* ---- replay ---------------------------------------------------------------- */

static int replay_engine_for(kv_history *h, int32_t si, char *err, size_t errlen)
{
    if (h->replay && h->replay_seg == si)
        return 0;
    kv_engine_destroy(h->replay);
    h->replay = NULL;
    h->replay_seg = -1;
    h->replay_pos = -1;
    kv_engine_config c = h->segs[si].cfg;
    c.device = NULL;
    c.verify = 0;
    c.write_kv = 0;
    char e1[256];
    h->replay = kv_engine_create(&c, e1, sizeof e1);
    if (!h->replay) {
        /* the simulated card may refuse what another backend held: drop it */
        c.gpu_total_bytes = 0;
        h->replay = kv_engine_create(&c, err, errlen);
        if (!h->replay)
            return KV_ENGINE_ENOMEM;
    }
    h->replay_seg = si;
    return 0;
}

/* Apply the non-step journal entry at *off to e. */
static int apply_entry(kv_history *h, const segment *s, size_t *off, kv_engine *e)
{
    const uint8_t *j = s->j;
    uint8_t tag = j[(*off)++];
    switch (tag) {
    case J_SUBMIT: {
        kv_request_spec sp;
        memset(&sp, 0, sizeof sp);
        uint8_t f = j[(*off)++];
        sp.prompt_tokens = (int32_t)rsv(j, off);
        if (f & JS_IDS) {
            int32_t n = (int32_t)rsv(j, off);
            int32_t m = n > 0 ? n : 0;
            if (m > h->ids_cap) {
                int32_t *nb = realloc(h->ids, (size_t)m * sizeof *nb);
                if (!nb)
                    return KV_ENGINE_ENOMEM;
                h->ids = nb;
                h->ids_cap = m;
            }
            for (int32_t i = 0; i < m; i++)
                h->ids[i] = (int32_t)rsv(j, off);
            static const int32_t none[1] = {0};
            sp.prompt_token_ids = h->ids ? h->ids : none; /* an explicit empty prompt stays explicit */
            sp.num_prompt_token_ids = n;
        }
        sp.output_tokens = (int32_t)rsv(j, off);
        if (f & JS_PREFIX) {
            size_t n = (size_t)ruv(j, off);
            sp.prefix_id = (const char *)j + *off;
            *off += n + 1;
        }
        sp.prefix_tokens = (int32_t)rsv(j, off);
        sp.priority = (int32_t)rsv(j, off);
        if (f & JS_SALT) {
            size_t n = (size_t)ruv(j, off);
            sp.cache_salt = (const char *)j + *off;
            *off += n + 1;
        }
        memcpy(&sp.arrival_s, j + *off, sizeof sp.arrival_s);
        *off += sizeof sp.arrival_s;
        sp.remote_prefill = (f & JS_REMOTE) != 0;
        kv_engine_submit(e, &sp, NULL, 0); /* a refusal is replayed as the refusal it was */
        return 0;
    }
    case J_ABORT:
        kv_engine_abort(e, rsv(j, off), NULL, 0);
        return 0;
    case J_RESET:
        kv_engine_reset_prefix_cache(e);
        return 0;
    case J_MODE:
        kv_engine_set_mode(e, (kv_engine_mode)j[(*off)++], NULL, 0);
        return 0;
    case J_CLOCK: {
        double t;
        memcpy(&t, j + *off, sizeof t);
        *off += sizeof t;
        kv_engine_advance_clock(e, t);
        return 0;
    }
    case J_LOG: {
        int level = j[(*off)++];
        size_t n = (size_t)ruv(j, off);
        kv_engine_log(e, level, "%s", (const char *)j + *off);
        *off += n + 1;
        return 0;
    }
    default:
        return KV_ENGINE_EINVAL;
    }
}

/* Replay the journal from the cursor until the replay engine stands at
 * step `step` (before that step's run) or the journal ends. */
static int run_to(kv_history *h, const segment *s, int64_t step, char *err, size_t errlen)
{
    kv_engine *e = h->replay;
    while (h->cur_off < s->jlen) {
        const uint8_t *j = s->j;
        if (j[h->cur_off] == J_STEP) {
            uint32_t count;
            memcpy(&count, j + h->cur_off + 1, sizeof count);
            if (h->cur_done >= count) {
                if (s->run_open && h->cur_off == s->run_at)
                    break; /* the live run may grow: stay on it */
                h->cur_off += 5;
                h->cur_done = 0;
                continue;
            }
            if (e->step >= step)
                break;
            int rc = kv_engine_step(e, NULL, NULL, 0);
            if (rc == KV_ENGINE_EDEVICE || rc == KV_ENGINE_EVERIFY || rc == KV_ENGINE_ENOMEM)
                return kv_errf(err, errlen, rc, "replaying step %lld failed", (long long)e->step);
            h->cur_done++;
            continue;
        }
        size_t off = h->cur_off;
        int rc = apply_entry(h, s, &off, e);
        if (rc)
            return kv_errf(err, errlen, rc, "replaying the journal failed at byte %zu", h->cur_off);
        h->cur_off = off;
        h->cur_done = 0;
    }
    return 0;
}

int kv_history_seek(kv_history *h, int64_t pos, char *err, size_t errlen)
{
    int32_t si;
    int64_t step;
    kv_history_sync(h);
    if (kv_history_locate(h, pos, &si, &step) != 0)
        return kv_errf(err, errlen, KV_ENGINE_EINVAL, "step %lld is not in the history (%lld..%lld)", (long long)pos,
                       (long long)kv_history_first(h), (long long)kv_history_present(h));
    int rc = replay_engine_for(h, si, err, errlen);
    if (rc)
        return rc;
    const segment *s = &h->segs[si];
    /* the newest checkpoint before step (one at step exactly only when it is
     * the first: replaying at least one step leaves that step's events in
     * the replay engine's ring, as the live engine had them) */
    int32_t k = s->nck - 1;
    while (k > 0 && s->ck[k].step >= step)
        k--;
    int64_t cur = h->replay_pos >= 0 ? h->replay->step : -1;
    int reuse = h->replay_pos >= 0 && cur <= step && cur > s->ck[k].step;
    if (!reuse) {
        rc = kv_snapshot_load(h->replay, &s->ck[k].img, err, errlen);
        if (rc) {
            h->replay_pos = -1;
            return rc;
        }
        h->cur_off = s->ck[k].joff;
        h->cur_done = 0;
    }
    h->replay_pos = -1;
    int64_t from = h->replay->step;
    rc = run_to(h, s, step, err, errlen);
    h->last_seek_steps = h->replay->step - from;
    if (rc)
        return rc;
    if (h->replay->step != step)
        return kv_errf(err, errlen, KV_ENGINE_EINVAL, "the replay reached step %lld, not %lld",
                       (long long)h->replay->step, (long long)step);
    h->replay_pos = pos;
    return 0;
}

const kv_engine *kv_history_engine(const kv_history *h) { return h->replay_pos >= 0 ? h->replay : NULL; }

int64_t kv_history_position(const kv_history *h) { return h->replay_pos; }

void kv_history_get_stats(const kv_history *h, kv_history_stats *o)
{
    memset(o, 0, sizeof *o);
    o->bytes = history_bytes(h, &o->checkpoint_bytes, &o->journal_bytes, &o->mark_bytes);
    o->max_bytes = h->max_bytes;
    o->replay_engine_bytes = h->replay ? kv_engine_host_bytes(kv_engine_get_config(h->replay)) : 0;
    for (int32_t i = 0; i < h->nseg; i++)
        o->checkpoints += h->segs[i].nck;
    o->segments = h->nseg;
    o->every = h->every;
    o->marks = h->nmarks;
    o->forgotten = h->forgotten;
    o->last_seek_steps = h->last_seek_steps;
}
