/* Every figure an engine shows through kv_engine.h, written out as text, so
 * two engines can be compared whole (doubles in %a: exact). Header-only,
 * for the history and snapshot tests. */
#ifndef KVLAB_ENGINE_DESCRIBE_H
#define KVLAB_ENGINE_DESCRIBE_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_engine.h"

typedef struct desc {
    char *s;
    size_t n, cap;
} desc;

static void dputf(desc *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void dputf(desc *d, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(d->s ? d->s + d->n : NULL, d->s ? d->cap - d->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0)
            abort();
        if (d->s && d->n + (size_t)k < d->cap) {
            d->n += (size_t)k;
            return;
        }
        size_t ncap = d->cap ? d->cap * 2 : 1 << 16;
        while (ncap < d->n + (size_t)k + 1)
            ncap *= 2;
        d->s = realloc(d->s, ncap);
        if (!d->s)
            abort();
        d->cap = ncap;
    }
}

static void describe_lat(desc *d, const char *name, const kv_latency_stats *l)
{
    dputf(d, "%s %lld %a %a %a %a %a %a %a\n", name, (long long)l->count, l->sum, l->mean, l->min, l->max, l->p50,
          l->p90, l->p99);
}

/* The whole public state of e into d (d->n reset). */
static void describe_engine(const kv_engine *e, desc *d)
{
    d->n = 0;
    if (d->s)
        d->s[0] = '\0';
    kv_engine_info in;
    kv_engine_get_info(e, &in);
    dputf(d, "info mode %d blocks %d bs %d tp %d free %d cached %d run %d wait %d sub %lld fin %lld step %lld clock %a use %a\n",
          in.mode, in.num_blocks, in.block_size, in.tensor_parallel_size, in.num_free_blocks, in.num_cached_blocks,
          in.num_running, in.num_waiting, (long long)in.num_submitted, (long long)in.num_finished, (long long)in.step,
          in.clock_s, in.kv_usage);
    kv_engine_metrics m;
    kv_engine_get_metrics(e, &m);
    dputf(d, "tier %lld %lld %lld %lld %lld %lld %lld %lld remote %lld\n", (long long)m.external_prefix_cache_queries,
          (long long)m.external_prefix_cache_hits, (long long)m.offload_stored_blocks,
          (long long)m.offload_loaded_blocks, (long long)m.offload_evicted_blocks, (long long)m.offload_capacity_blocks,
          (long long)m.offload_used_blocks, (long long)m.offload_skipped_stores, (long long)m.remote_prefill_tokens);
    dputf(d,
          "metrics %a %d %d %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld "
          "%lld %a %a %a %a %a %a\n",
          m.kv_cache_usage_perc, m.num_requests_running, m.num_requests_waiting, (long long)m.num_preemptions_total,
          (long long)m.prefix_cache_queries, (long long)m.prefix_cache_hits, (long long)m.preempted_prefix_cache_queries,
          (long long)m.preempted_prefix_cache_hits, (long long)m.prompt_tokens_total,
          (long long)m.generation_tokens_total, (long long)m.request_success_total, (long long)m.requests_aborted,
          (long long)m.requests_rejected, (long long)m.block_allocations, (long long)m.block_frees,
          (long long)m.block_evictions, (long long)m.computed_tokens, (long long)m.recomputed_tokens,
          (long long)m.work_tokens_with_cache, (long long)m.work_tokens_without_cache, (long long)m.reserved_tokens,
          (long long)m.used_tokens, m.internal_fragmentation, m.peak_kv_usage, m.mean_kv_usage,
          m.mean_num_requests_waiting, m.mean_num_requests_running, m.busy_s);
    describe_lat(d, "ttft", &m.ttft);
    describe_lat(d, "itl", &m.itl);
    describe_lat(d, "e2e", &m.e2e);
    describe_lat(d, "queue", &m.queue);
    /* blocks with their free-queue positions, and the queue itself */
    kv_block_view *bv = calloc((size_t)in.num_blocks, sizeof *bv);
    int32_t nb = kv_engine_blocks(e, bv, in.num_blocks);
    for (int32_t i = 0; i < nb; i++)
        dputf(d, "b%d r%d n%d h%d f%d c%d p%d o%lld k%d %llx\n", bv[i].block_id, bv[i].ref_cnt, bv[i].is_null,
              bv[i].has_hash, bv[i].is_free, bv[i].cached_free, bv[i].free_pos, (long long)bv[i].owner,
              bv[i].num_owners, (unsigned long long)bv[i].hash_lo);
    free(bv);
    int32_t *q = calloc((size_t)in.num_blocks + 1, sizeof *q);
    int32_t nq = kv_engine_free_queue(e, q, in.num_blocks);
    dputf(d, "fq %d:", nq);
    for (int32_t i = 0; i < nq; i++)
        dputf(d, " %d", q[i]);
    dputf(d, "\n");
    free(q);
    /* every request still readable, with its block table and tokens */
    int32_t *tab = calloc(65536, sizeof *tab);
    for (int64_t id = 0; id < in.num_submitted; id++) {
        kv_request_view r;
        if (kv_engine_request(e, id, &r) != 0)
            continue;
        dputf(d, "req %lld st %d pre %d pr %d out %d nout %d ntok %d comp %d cach %d nb %d npre %d prio %d arr %a ft %a fin %a res %d:",
              (long long)r.id, r.status, r.prefix_tokens, r.prompt_tokens, r.output_tokens, r.num_output_tokens,
              r.num_tokens, r.num_computed_tokens, r.num_cached_tokens, r.num_blocks, r.num_preemptions, r.priority,
              r.arrival_s, r.first_token_s, r.finish_s, r.reserved_tokens);
        int32_t nt = kv_engine_block_table(e, id, tab, 65536);
        for (int32_t i = 0; i < nt && i < 65536; i++)
            dputf(d, " %d", tab[i]);
        dputf(d, " |");
        for (int32_t p = 0; p < r.num_tokens + 2; p++)
            dputf(d, " %d", kv_engine_future_token(e, id, p));
        dputf(d, "\n");
    }
    free(tab);
    int64_t ids[4096];
    int32_t nr = kv_engine_running(e, ids, 4096);
    dputf(d, "running %d:", nr);
    for (int32_t i = 0; i < nr && i < 4096; i++)
        dputf(d, " %lld", (long long)ids[i]);
    int32_t nw = kv_engine_waiting(e, ids, 4096);
    dputf(d, "\nwaiting %d:", nw);
    for (int32_t i = 0; i < nw && i < 4096; i++)
        dputf(d, " %lld", (long long)ids[i]);
    dputf(d, "\n");
    kv_step_detail sd;
    kv_engine_last_step(e, &sd);
    dputf(d, "last %lld n%d first%d:", (long long)sd.step, sd.num_scheduled, sd.first_admitted);
    for (int32_t i = 0; i < sd.num_scheduled; i++)
        dputf(d, " %lld/%d/%d/%d", (long long)sd.ids[i], sd.num_tokens[i], sd.hit_tokens[i], sd.resumed[i]);
    dputf(d, " pre");
    for (int32_t i = 0; i < sd.num_preempted; i++)
        dputf(d, " %lld", (long long)sd.preempted[i]);
    dputf(d, " fin");
    for (int32_t i = 0; i < sd.num_finished; i++)
        dputf(d, " %lld", (long long)sd.finished[i]);
    dputf(d, "\n");
    /* the newest 512 timeline samples (what a snapshot keeps) */
    static kv_timeline_sample tl[512];
    int32_t nt = kv_engine_timeline(e, tl, 512);
    for (int32_t i = 0; i < nt; i++)
        dputf(d, "tl %lld %a %a %d %d %d %d %lld %a %a %lld %lld %lld\n", (long long)tl[i].step, tl[i].clock_s,
              tl[i].kv_usage, tl[i].num_running, tl[i].num_waiting, tl[i].num_scheduled_tokens, tl[i].num_preempted,
              (long long)tl[i].num_preemptions_total, tl[i].prefix_hit_rate, tl[i].tokens_per_s,
              (long long)tl[i].work_with_cache, (long long)tl[i].work_without_cache,
              (long long)tl[i].generation_tokens_total);
    /* events: the newest 256, and every log line whose text is kept */
    static kv_event ev[4096];
    uint64_t last = kv_engine_last_event_seq(e);
    dputf(d, "events last %llu\n", (unsigned long long)last);
    int32_t ne = kv_engine_events_since(e, last > 256 ? last - 256 : 0, ev, 4096);
    for (int32_t i = 0; i < ne; i++)
        dputf(d, "ev %llu %s b%d r%lld v%lld s%lld %a %s\n", (unsigned long long)ev[i].seq,
              kv_event_type_name(ev[i].type), ev[i].block_id, (long long)ev[i].req_id, (long long)ev[i].value,
              (long long)ev[i].step, ev[i].clock_s, ev[i].text ? ev[i].text : "");
    for (uint64_t since = 0;;) {
        int32_t n = kv_engine_events_since(e, since, ev, 4096);
        if (n <= 0)
            break;
        for (int32_t i = 0; i < n; i++)
            if (ev[i].type == KV_EV_LOG && strcmp(ev[i].text, "(log line dropped)"))
                dputf(d, "log %llu %d s%lld %s\n", (unsigned long long)ev[i].seq, ev[i].level, (long long)ev[i].step,
                      ev[i].text);
        since = ev[n - 1].seq;
    }
    size_t need = kv_engine_prometheus(e, "m", NULL, 0) + 1;
    char *prom = malloc(need);
    kv_engine_prometheus(e, "m", prom, need);
    dputf(d, "%s", prom);
    free(prom);
}

/* Index of the first line where a and b differ, with both lines in msg. */
static int describe_diff(const char *a, const char *b, char *msg, size_t n)
{
    if (!strcmp(a, b))
        return 0;
    int line = 1;
    const char *la = a, *lb = b;
    while (*a && *a == *b) {
        if (*a == '\n') {
            line++;
            la = a + 1;
            lb = b + 1;
        }
        a++;
        b++;
    }
    const char *ea = strchr(la, '\n'), *eb = strchr(lb, '\n');
    snprintf(msg, n, "line %d:\n  < %.*s\n  > %.*s", line, (int)(ea ? ea - la : (long)strlen(la)), la,
             (int)(eb ? eb - lb : (long)strlen(lb)), lb);
    return line;
}

#endif
