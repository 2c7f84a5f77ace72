#include "lsn_traffic.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

double lsn_rng_next(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return (double)((x * 0x2545F4914F6CDD1Dull) >> 11) / 9007199254740992.0;
}

void lsn_traffic_stop(lsn_traffic *t)
{
    kv_trace_free(&t->chunk);
    memset(t, 0, sizeof *t);
}

void lsn_traffic_start_fn(lsn_traffic *t)
{
    lsn_traffic_stop(t);
    t->fn = 1;
    t->active = 1;
}

/* One length as kv_trace generator keys ("prompt=512,prompt_sigma=0"). */
static int length_keys(const char *what, const lsn_length *l, char *out, size_t outl, char *err, size_t errlen)
{
    int bad = 0;
    switch (l->kind) {
    case LSN_LEN_FIXED:
        bad = !(l->a >= 1 && l->a <= 1e7);
        snprintf(out, outl, "%s=%.0f,%s_sigma=0,max_%s=1e7", what, l->a, what, what);
        break;
    case LSN_LEN_RANGE:
        bad = !(l->a >= 1 && l->b >= l->a && l->b <= 1e7);
        snprintf(out, outl, "%s_min=%.0f,%s_max=%.0f,max_%s=1e7", what, l->a, what, l->b, what);
        break;
    case LSN_LEN_MEAN_P99:
        bad = !(l->a >= 1 && l->b >= l->a && l->b <= 1e7);
        snprintf(out, outl, "%s_mean=%.17g,%s_p99=%.17g,max_%s=1e7", what, l->a, what, l->b, what);
        break;
    }
    if (bad) {
        snprintf(err, errlen, "lab.traffic: %s_tokens must be whole numbers from 1 to 10,000,000 (and min <= max, "
                 "mean <= p99)", what);
        return -1;
    }
    return 0;
}

/* Generate chunk number k (its own seed, arrivals from 0). */
static int gen_chunk(lsn_traffic *t, int64_t k, char *err, size_t errlen)
{
    kv_trace_free(&t->chunk);
    t->next = 0;
    int64_t n = LSN_TRAFFIC_CHUNK;
    if (t->count > 0 && t->count - t->sent < n)
        n = t->count - t->sent;
    if (n < 1)
        return 0;
    char spec[512];
    snprintf(spec, sizeof spec, "gen:%s,requests=%lld,seed=%llu", t->gen, (long long)n,
             (unsigned long long)((t->seed + (uint64_t)k) % 1000000000000000000ull));
    char e[256];
    if (kv_trace_generate(spec, &t->chunk, e, sizeof e) < 0) {
        snprintf(err, errlen, "lab.traffic: %s", e);
        return -1;
    }
    return 0;
}

int lsn_traffic_start(lsn_traffic *t, const lsn_traffic_spec *s, double clock_s, char *err, size_t errlen)
{
    lsn_traffic_stop(t);
    if (!(s->rate > 0 && s->rate <= LSN_TRAFFIC_MAX_RATE)) {
        snprintf(err, errlen, "lab.traffic: rate must be > 0 and at most %.0f requests per second",
                 LSN_TRAFFIC_MAX_RATE);
        return -1;
    }
    if (s->count < 0) {
        snprintf(err, errlen, "lab.traffic: count must be >= 0 (0 = no end)");
        return -1;
    }
    if (s->prefix_tokens < 0 || s->prefix_tokens > 10000000) {
        snprintf(err, errlen, "lab.traffic: prefix_tokens must be from 0 to 10,000,000");
        return -1;
    }
    char p[160], o[160];
    if (length_keys("prompt", &s->prompt, p, sizeof p, err, errlen) < 0 ||
        length_keys("output", &s->output, o, sizeof o, err, errlen) < 0)
        return -1;
    snprintf(t->gen, sizeof t->gen, "rate=%.17g,%s,%s", s->rate, p, o);
    t->seed = s->seed;
    t->count = s->count;
    snprintf(t->prefix_id, sizeof t->prefix_id, "%s", s->prefix_id ? s->prefix_id : "");
    t->prefix_tokens = t->prefix_id[0] ? s->prefix_tokens : 0;
    if (gen_chunk(t, 0, err, errlen) < 0) {
        lsn_traffic_stop(t);
        return -1;
    }
    t->start_s = t->chunk_start_s = clock_s;
    t->active = 1;
    return 0;
}

void lsn_traffic_rewind(lsn_traffic *t, double clock_s)
{
    if (!t->active || t->fn)
        return;
    char err[256];
    t->sent = 0;
    t->chunk_no = 0;
    if (gen_chunk(t, 0, err, sizeof err) < 0) /* generated before: cannot fail but for memory */
        t->chunk.count = 0;
    t->start_s = t->chunk_start_s = clock_s;
}

void lsn_traffic_get_pos(const lsn_traffic *t, lsn_traffic_pos *out)
{
    out->chunk_no = t->chunk_no;
    out->next = t->next;
    out->sent = t->sent;
    out->chunk_start_s = t->chunk_start_s;
    out->start_s = t->start_s;
}

int lsn_traffic_set_pos(lsn_traffic *t, const lsn_traffic_pos *pos, char *err, size_t errlen)
{
    if (!t->active || t->fn) {
        snprintf(err, errlen, "no table-form traffic to move");
        return -1;
    }
    if (pos->chunk_no < 0 || pos->chunk_no > INT64_MAX / LSN_TRAFFIC_CHUNK || pos->next < 0 ||
        pos->next > LSN_TRAFFIC_CHUNK || pos->sent != pos->chunk_no * LSN_TRAFFIC_CHUNK + pos->next ||
        (t->count > 0 && pos->sent > t->count) || !isfinite(pos->chunk_start_s) || !isfinite(pos->start_s)) {
        snprintf(err, errlen, "not a place of this traffic (chunk %lld, request %lld, %lld sent)",
                 (long long)pos->chunk_no, (long long)pos->next, (long long)pos->sent);
        return -1;
    }
    if (pos->chunk_no != t->chunk_no) {
        char e[256];
        int64_t keep = t->sent;
        t->sent = pos->chunk_no * LSN_TRAFFIC_CHUNK; /* gen_chunk sizes the last chunk by what is left */
        if (gen_chunk(t, pos->chunk_no, e, sizeof e) < 0) {
            t->sent = keep;
            lsn_traffic_rewind(t, t->start_s); /* back to a valid place: the first chunk */
            snprintf(err, errlen, "%s", e);
            return -1;
        }
        t->chunk_no = pos->chunk_no;
    }
    if (pos->next > t->chunk.count) {
        snprintf(err, errlen, "request %lld of a chunk of %lld", (long long)pos->next, (long long)t->chunk.count);
        return -1;
    }
    t->next = pos->next;
    t->sent = pos->sent;
    t->chunk_start_s = pos->chunk_start_s;
    t->start_s = pos->start_s;
    return 0;
}

int lsn_traffic_pending(const lsn_traffic *t)
{
    return t->active && !t->fn && t->next < t->chunk.count;
}

double lsn_traffic_next_s(const lsn_traffic *t)
{
    return lsn_traffic_pending(t) ? t->chunk_start_s + t->chunk.reqs[t->next].arrival_s : INFINITY;
}

void lsn_traffic_feed(lsn_traffic *t, kv_engine *e, double clock_s)
{
    kv_engine_info info;
    kv_engine_get_info(e, &info);
    int64_t live = (int64_t)info.num_running + info.num_waiting;
    for (int k = 0; k < LSN_TRAFFIC_MAX_PER_STEP && live < LSN_MAX_LIVE_REQUESTS; k++) {
        if (!lsn_traffic_pending(t) || lsn_traffic_next_s(t) > clock_s)
            break;
        kv_request_spec spec;
        kv_trace_spec(&t->chunk, t->next, &spec);
        spec.arrival_s = -1; /* now: the engine's clock is the generator's */
        spec.prefix_id = t->prefix_id[0] ? t->prefix_id : NULL;
        spec.prefix_tokens = t->prefix_tokens;
        kv_engine_submit(e, &spec, NULL, 0);
        live++;
        t->sent++;
        if (++t->next == t->chunk.count && (t->count == 0 || t->sent < t->count)) {
            /* the next chunk starts where this one's last request arrived */
            double end = t->chunk_start_s + t->chunk.reqs[t->chunk.count - 1].arrival_s;
            char err[256];
            if (gen_chunk(t, ++t->chunk_no, err, sizeof err) == 0)
                t->chunk_start_s = end;
        }
    }
}
