/* kv_disagg: the prefill/decode split (kv_disagg.h): engines, a queue of
 * arrivals, the transfers in flight, and a loop that always does the
 * earliest thing due. */
#include "kv_disagg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_engine_int.h"
#include "kv_metrics.h"
#include "kv_util.h"

typedef struct handoff {
    int64_t req;     /* index into d->reqs */
    double start_s;  /* when its first byte leaves (the link was free) */
    double ready_s;  /* when the last byte has crossed */
    int64_t blocks;  /* blocks it carries */
} handoff;

typedef struct instance {
    kv_engine *e;
    int64_t *req_of; /* engine request id -> index into d->reqs (-1 none) */
    int64_t cap;
    double link_free_s; /* decode: when its link is free again */
} instance;

struct kv_disagg {
    kv_disagg_config dc;
    instance pre[KV_DISAGG_MAX_INSTANCES], dec[KV_DISAGG_MAX_INSTANCES];
    kv_request_spec *reqs;
    int64_t nreqs, reqs_cap, next; /* next: first request not yet handed to a prefill instance */
    handoff *fly;
    int64_t nfly, fly_cap;
    double kv_bytes_per_token_rank;
    int32_t tp, block_size;
    int64_t rejected, prefilled, transfers, transfer_bytes;
    double transfer_s, transfer_wait_s;
    kv_hist nixl[2]; /* KV_HIST_NIXL_XFER_TIME, KV_HIST_NIXL_BYTES */
};

static const char *const LINKS[] = {"rdma", "nvlink", "pcie"};

const char *kv_disagg_link_name(kv_disagg_link link)
{
    return (unsigned)link < sizeof LINKS / sizeof LINKS[0] ? LINKS[link] : "?";
}

int kv_disagg_link_parse(const char *s, kv_disagg_link *out, char *err, size_t errlen)
{
    for (size_t i = 0; s && i < sizeof LINKS / sizeof LINKS[0]; i++)
        if (!strcmp(s, LINKS[i])) {
            *out = (kv_disagg_link)i;
            return 0;
        }
    return kv_errf(err, errlen, -1, "--kv-transfer-link must be rdma, nvlink or pcie; got '%.40s'", s ? s : "");
}

double kv_disagg_link_bytes_per_s(kv_disagg_link link, double pcie_gbps, double nvlink_gbps, char *note,
                                  size_t notelen)
{
    if (link == KV_LINK_RDMA)
        return 50e9; /* 400 Gb/s */
    double gbps = link == KV_LINK_NVLINK ? nvlink_gbps : pcie_gbps;
    if (gbps > 0)
        return gbps / 2.0 * 1e9;
    kv_errf(note, notelen, 0, "time model: no %s figure for this card; KV transfers assume PCIe 4.0 x16 (32 GB/s each way)",
            link == KV_LINK_NVLINK ? "NVLink" : "PCIe");
    return 32e9;
}

int kv_disagg_parse_split(const char *s, int32_t *p, int32_t *d, char *err, size_t errlen)
{
    char *end;
    long a = s ? strtol(s, &end, 10) : 0;
    if (s && end != s && *end == ':' && s[0] != '-' && s[0] != '+') {
        const char *t = end + 1;
        long b = strtol(t, &end, 10);
        if (end != t && !*end && t[0] != '-' && t[0] != '+' && a >= 1 && b >= 1 && a <= KV_DISAGG_MAX_INSTANCES &&
            b <= KV_DISAGG_MAX_INSTANCES) {
            *p = (int32_t)a;
            *d = (int32_t)b;
            return 0;
        }
    }
    return kv_errf(err, errlen, -1,
                   "--disaggregate takes P:D, prefill and decode instances, each 1 to %d (e.g. 1:1); got '%.40s'",
                   KV_DISAGG_MAX_INSTANCES, s ? s : "");
}

kv_disagg *kv_disagg_create(const kv_engine_config *cfg, const kv_disagg_config *dc, char *err, size_t errlen)
{
    if (!dc || dc->num_prefill < 1 || dc->num_decode < 1 || dc->num_prefill > KV_DISAGG_MAX_INSTANCES ||
        dc->num_decode > KV_DISAGG_MAX_INSTANCES || !(dc->link_bytes_per_s > 0) || cfg->device) {
        kv_errf(err, errlen, KV_ENGINE_EINVAL, "a prefill/decode split needs 1 to %d instances of each kind, a link "
                "with bandwidth and host backends", KV_DISAGG_MAX_INSTANCES);
        return NULL;
    }
    kv_disagg *d = calloc(1, sizeof *d);
    if (!d) {
        kv_errf(err, errlen, KV_ENGINE_ENOMEM, "out of memory");
        return NULL;
    }
    d->dc = *dc;
    kv_hist_init(&d->nixl[0], KV_HIST_NIXL_XFER_TIME);
    kv_hist_init(&d->nixl[1], KV_HIST_NIXL_BYTES);
    kv_engine_config c = *cfg;
    c.verify = 0;
    c.write_kv = 0;
    for (int k = 0; k < 2; k++) {
        instance *in = k ? d->dec : d->pre;
        int32_t n = k ? dc->num_decode : dc->num_prefill;
        for (int32_t i = 0; i < n; i++) {
            in[i].e = kv_engine_create(&c, err, errlen);
            if (!in[i].e) {
                kv_disagg_destroy(d);
                return NULL;
            }
        }
    }
    d->kv_bytes_per_token_rank = d->pre[0].e->tparams.kv_bytes_per_token;
    d->tp = kv_engine_get_config(d->pre[0].e)->tensor_parallel_size;
    d->block_size = kv_engine_get_config(d->pre[0].e)->block_size;
    return d;
}

void kv_disagg_destroy(kv_disagg *d)
{
    if (!d)
        return;
    for (int32_t i = 0; i < KV_DISAGG_MAX_INSTANCES; i++) {
        kv_engine_destroy(d->pre[i].e);
        kv_engine_destroy(d->dec[i].e);
        free(d->pre[i].req_of);
        free(d->dec[i].req_of);
    }
    free(d->reqs);
    free(d->fly);
    free(d);
}

kv_engine *kv_disagg_engine(const kv_disagg *d, int decode, int32_t i)
{
    if (!d || i < 0 || i >= (decode ? d->dc.num_decode : d->dc.num_prefill))
        return NULL;
    return decode ? d->dec[i].e : d->pre[i].e;
}

static int grow(void **p, int64_t *cap, int64_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    int64_t nc = *cap ? *cap * 2 : 64;
    while (nc < need)
        nc *= 2;
    void *np = realloc(*p, (size_t)nc * elem);
    if (!np)
        return -1;
    *p = np;
    *cap = nc;
    return 0;
}

int kv_disagg_add(kv_disagg *d, const kv_request_spec *spec, char *err, size_t errlen)
{
    if (!(spec->arrival_s >= 0) || (d->nreqs && spec->arrival_s < d->reqs[d->nreqs - 1].arrival_s))
        return kv_errf(err, errlen, KV_ENGINE_EINVAL, "a request of a split needs an arrival time >= 0, in order");
    if (grow((void **)&d->reqs, &d->reqs_cap, d->nreqs + 1, sizeof *d->reqs))
        return kv_errf(err, errlen, KV_ENGINE_ENOMEM, "out of memory");
    d->reqs[d->nreqs++] = *spec;
    return 0;
}

/* Submit request k to instance in at time t (its clock moves up to t when
 * it is idle). 0, or -1 when the instance refused it. */
static int hand(kv_disagg *d, instance *in, int64_t k, const kv_request_spec *sp, double t)
{
    kv_engine_info info;
    kv_engine_get_info(in->e, &info);
    if (info.num_running == 0 && info.num_waiting == 0)
        kv_engine_advance_clock(in->e, t);
    int64_t id = kv_engine_submit(in->e, sp, NULL, 0);
    if (id < 0) {
        d->rejected++;
        return -1;
    }
    if (grow((void **)&in->req_of, &in->cap, id + 1, sizeof *in->req_of))
        return -1;
    in->req_of[id] = k;
    return 0;
}

/* After a prefill instance's step: its finished requests start their
 * transfers. */
static int start_transfers(kv_disagg *d, instance *in)
{
    kv_step_detail sd;
    kv_engine_last_step(in->e, &sd);
    double now = in->e->clock;
    for (int32_t f = 0; f < sd.num_finished; f++) {
        int64_t k = in->req_of[sd.finished[f]];
        kv_request_view v;
        int32_t prompt = kv_engine_request(in->e, sd.finished[f], &v) == 0 ? v.prompt_tokens : 1;
        int64_t blocks = (prompt + d->block_size - 1) / d->block_size;
        double rank_bytes = (double)blocks * d->block_size * d->kv_bytes_per_token_rank;
        double xfer = rank_bytes / d->dc.link_bytes_per_s;
        instance *dst = &d->dec[k % d->dc.num_decode];
        double start = now > dst->link_free_s ? now : dst->link_free_s;
        dst->link_free_s = start + xfer;
        d->prefilled++;
        d->transfer_bytes += (int64_t)(rank_bytes * d->tp + 0.5);
        d->transfer_s += xfer;
        kv_hist_observe(&d->nixl[0], xfer);
        kv_hist_observe(&d->nixl[1], rank_bytes * d->tp);
        d->transfer_wait_s += start - now;
        if (grow((void **)&d->fly, &d->fly_cap, d->nfly + 1, sizeof *d->fly))
            return KV_ENGINE_ENOMEM;
        d->fly[d->nfly++] = (handoff){k, start, start + xfer, blocks};
    }
    return 0;
}

int kv_disagg_step(kv_disagg *d, char *err, size_t errlen)
{
    /* the earliest due: an arrival, a transfer done, or an instance's step */
    double t_arr = d->next < d->nreqs ? d->reqs[d->next].arrival_s : -1;
    int64_t fi = -1;
    for (int64_t i = 0; i < d->nfly; i++)
        if (fi < 0 || d->fly[i].ready_s < d->fly[fi].ready_s ||
            (d->fly[i].ready_s == d->fly[fi].ready_s && d->fly[i].req < d->fly[fi].req))
            fi = i;
    instance *busy = NULL;
    int busy_dec = 0;
    double t_busy = 0;
    for (int k = 0; k < 2; k++) {
        instance *in = k ? d->dec : d->pre;
        int32_t n = k ? d->dc.num_decode : d->dc.num_prefill;
        for (int32_t i = 0; i < n; i++) {
            kv_engine_info info;
            kv_engine_get_info(in[i].e, &info);
            if ((info.num_running || info.num_waiting) && (!busy || info.clock_s < t_busy)) {
                busy = &in[i];
                busy_dec = k;
                t_busy = info.clock_s;
            }
        }
    }
    int has_arr = t_arr >= 0, has_fly = fi >= 0;
    if (!has_arr && !has_fly && !busy)
        return 0;
    if (has_arr && (!has_fly || t_arr <= d->fly[fi].ready_s) && (!busy || t_arr <= t_busy)) {
        int64_t k = d->next++;
        kv_request_spec sp = d->reqs[k];
        sp.output_tokens = 1; /* the proxy's prefill request: max_tokens 1 */
        sp.remote_prefill = 0;
        hand(d, &d->pre[k % d->dc.num_prefill], k, &sp, sp.arrival_s);
        return 1;
    }
    if (has_fly && (!busy || d->fly[fi].ready_s <= t_busy)) {
        handoff h = d->fly[fi];
        d->fly[fi] = d->fly[--d->nfly];
        kv_request_spec sp = d->reqs[h.req];
        sp.remote_prefill = 1;
        d->transfers++;
        hand(d, &d->dec[h.req % d->dc.num_decode], h.req, &sp, h.ready_s);
        return 1;
    }
    kv_step_result res;
    int rc = kv_engine_step(busy->e, &res, err, errlen);
    if (rc < 0)
        return rc;
    if (!busy_dec && (rc = start_transfers(d, busy)) < 0)
        return kv_errf(err, errlen, rc, "out of memory");
    return 1;
}

int64_t kv_disagg_get_flights(const kv_disagg *d, kv_disagg_flight *out, int64_t max)
{
    int64_t n = d->nfly < max ? d->nfly : max;
    for (int64_t i = 0; i < n; i++) { /* insertion by start time */
        kv_disagg_flight f = {d->fly[i].req, d->fly[i].start_s, d->fly[i].ready_s, d->fly[i].blocks};
        int64_t j = i;
        for (; j > 0 && out[j - 1].start_s > f.start_s; j--)
            out[j] = out[j - 1];
        out[j] = f;
    }
    return d->nfly;
}

void kv_disagg_get_stats(const kv_disagg *d, kv_disagg_stats *o)
{
    memset(o, 0, sizeof *o);
    o->num_prefill = d->dc.num_prefill;
    o->num_decode = d->dc.num_decode;
    o->link_bytes_per_s = d->dc.link_bytes_per_s;
    o->requests_added = d->nreqs;
    o->requests_rejected = d->rejected;
    o->requests_prefilled = d->prefilled;
    o->kv_transfers = d->transfers;
    o->kv_transfers_in_flight = d->nfly;
    o->kv_transfer_bytes = d->transfer_bytes;
    o->kv_transfer_s = d->transfer_s;
    o->kv_transfer_wait_s = d->transfer_wait_s;
    kv_hist h[KV_HIST_COUNT];
    for (int k = 0; k < KV_HIST_COUNT; k++)
        kv_hist_init(&h[k], k);
    for (int k = 0; k < 2; k++) {
        const instance *in = k ? d->dec : d->pre;
        int32_t n = k ? d->dc.num_decode : d->dc.num_prefill;
        for (int32_t i = 0; i < n; i++) {
            kv_engine_metrics m;
            kv_engine_get_metrics(in[i].e, &m);
            o->preemptions += m.num_preemptions_total;
            double *peak = k ? &o->decode_peak_kv_usage : &o->prefill_peak_kv_usage;
            double *mean = k ? &o->decode_mean_kv_usage : &o->prefill_mean_kv_usage;
            if (m.peak_kv_usage > *peak)
                *peak = m.peak_kv_usage;
            *mean += m.mean_kv_usage / n;
            if (in[i].e->clock > o->duration_s)
                o->duration_s = in[i].e->clock;
            if (k) {
                o->requests_finished += m.request_success_total;
                o->generation_tokens += m.generation_tokens_total;
                o->remote_prefill_tokens += m.remote_prefill_tokens;
                kv_hist_merge(&h[KV_HIST_TTFT], &in[i].e->hist[KV_HIST_TTFT]);
                kv_hist_merge(&h[KV_HIST_ITL], &in[i].e->hist[KV_HIST_ITL]);
                kv_hist_merge(&h[KV_HIST_E2E], &in[i].e->hist[KV_HIST_E2E]);
            } else {
                o->prompt_tokens += m.prompt_tokens_total;
                kv_hist_merge(&h[KV_HIST_QUEUE], &in[i].e->hist[KV_HIST_QUEUE]);
            }
        }
    }
    kv_hist_stats(&h[KV_HIST_TTFT], &o->ttft);
    kv_hist_stats(&h[KV_HIST_ITL], &o->itl);
    kv_hist_stats(&h[KV_HIST_E2E], &o->e2e);
    kv_hist_stats(&h[KV_HIST_QUEUE], &o->queue);
}

size_t kv_disagg_prometheus(const kv_disagg *d, const char *model_name, char *buf, size_t len)
{
    return kv_metrics_prometheus_hists(d->nixl, 2, model_name, buf, len);
}
