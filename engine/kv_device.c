/* kv_device: dtype names, the per-process card cache and fitting a plan to
 * the cards (see kv_device.h). */
#include "kv_device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_util.h"

#define MAX_DRIVERS 8
#define MAX_CARDS 64
#define MAX_RANKS 64

const char *kv_dtype_name(int dtype)
{
    static const char *names[KV_DTYPE_COUNT] = {"bfloat16", "float16", "fp8_e4m3", "float32", "fp8_e5m2", "int8"};
    return dtype >= 0 && dtype < KV_DTYPE_COUNT ? names[dtype] : "?";
}

int kv_dtype_from_name(const char *name, int value_bytes)
{
    static const struct {
        const char *name;
        int dtype;
    } rows[] = {
        {"bfloat16", KV_DTYPE_BF16},        {"bf16", KV_DTYPE_BF16},
        {"float16", KV_DTYPE_FP16},         {"fp16", KV_DTYPE_FP16},
        {"half", KV_DTYPE_FP16},            {"float32", KV_DTYPE_FP32},
        {"fp32", KV_DTYPE_FP32},            {"fp8", KV_DTYPE_FP8_E4M3},
        {"fp8_e4m3", KV_DTYPE_FP8_E4M3},    {"fp8_inc", KV_DTYPE_FP8_E4M3},
        {"fp8_ds_mla", KV_DTYPE_FP8_E4M3},  {"fp8_per_token_head", KV_DTYPE_FP8_E4M3},
        {"fp8_e5m2", KV_DTYPE_FP8_E5M2},    {"int8_per_token_head", KV_DTYPE_INT8},
        {"int8", KV_DTYPE_INT8},
    };
    for (size_t i = 0; name && i < sizeof rows / sizeof rows[0]; i++)
        if (!strcmp(name, rows[i].name))
            return rows[i].dtype;
    return value_bytes == 1 ? KV_DTYPE_FP8_E4M3 : value_bytes == 4 ? KV_DTYPE_FP32 : value_bytes == 2 ? KV_DTYPE_BF16 : -1;
}

const char *kv_device_alloc_line(char *buf, size_t len, uint64_t bytes)
{
    snprintf(buf, len, "allocating %.1f GiB on the GPU...", (double)bytes / (double)(1u << 30));
    return buf;
}

void kv_device_progress(kv_device *d, uint64_t bytes)
{
    if (!d || !d->progress || bytes < KV_DEVICE_PROGRESS_MIN_BYTES)
        return;
    char line[64];
    d->progress(d->progress_ctx, kv_device_alloc_line(line, sizeof line, bytes));
}

/* ---- the card cache ------------------------------------------------------ */

typedef struct card_entry {
    int measured;
    int rc;
    kv_device_info info;
    char err[256];
} card_entry;

typedef struct driver_entry {
    const kv_device_driver *drv;
    int counted;
    int count;            /* >= 1, or the negative code */
    char err[256];
    card_entry cards[MAX_CARDS];
} driver_entry;

static driver_entry g_drivers[MAX_DRIVERS];

static driver_entry *entry_of(const kv_device_driver *drv)
{
    driver_entry *free_slot = NULL;
    for (int i = 0; i < MAX_DRIVERS; i++) {
        if (g_drivers[i].drv == drv)
            return &g_drivers[i];
        if (!g_drivers[i].drv && !free_slot)
            free_slot = &g_drivers[i];
    }
    if (free_slot) {
        memset(free_slot, 0, sizeof *free_slot);
        free_slot->drv = drv;
    }
    return free_slot;
}

int kv_device_driver_count(const kv_device_driver *drv, char *err, size_t errlen)
{
    if (!drv || !drv->count)
        return kv_errf(err, errlen, KV_DEV_EDEVICE, "no device driver");
    driver_entry *d = entry_of(drv);
    if (!d)
        return kv_errf(err, errlen, KV_DEV_EDEVICE, "too many device drivers");
    if (!d->counted) {
        d->err[0] = '\0';
        int n = drv->count(d->err, sizeof d->err);
        if (n == 0)
            n = kv_errf(d->err, sizeof d->err, KV_DEV_EDEVICE, "no %s device: none found", drv->name);
        if (n > MAX_CARDS)
            n = MAX_CARDS;
        d->count = n;
        d->counted = 1;
    }
    if (d->count < 0)
        return kv_errf(err, errlen, d->count, "%s", d->err);
    return d->count;
}

int kv_device_driver_card(const kv_device_driver *drv, int card, kv_device_info *out, char *err, size_t errlen)
{
    int n = kv_device_driver_count(drv, err, errlen);
    if (n < 0)
        return n;
    if (card < 0 || card >= n)
        return kv_errf(err, errlen, KV_DEV_EINVAL, "%s card %d out of range (0..%d)", drv->name, card, n - 1);
    card_entry *c = &entry_of(drv)->cards[card];
    if (!c->measured) {
        memset(&c->info, 0, sizeof c->info);
        c->info.context_bytes = -1;
        c->info.pool_alloc_ms = -1;
        c->err[0] = '\0';
        c->rc = drv->measure(card, &c->info, c->err, sizeof c->err);
        c->info.card = card;
        c->info.ranks_on_card = 1;
        c->measured = 1;
    }
    if (c->rc)
        return kv_errf(err, errlen, c->rc, "%s", c->err);
    if (out)
        *out = c->info;
    return 0;
}

void kv_device_driver_forget(const kv_device_driver *drv)
{
    for (int i = 0; i < MAX_DRIVERS; i++)
        if (g_drivers[i].drv == drv)
            memset(&g_drivers[i], 0, sizeof g_drivers[i]);
}

kv_device *kv_device_driver_open(const kv_device_driver *drv, int num_ranks, char *err, size_t errlen)
{
    if (num_ranks < 1 || num_ranks > MAX_RANKS) {
        kv_errf(err, errlen, KV_DEV_EINVAL, "a device serves 1..%d ranks, asked for %d", MAX_RANKS, num_ranks);
        return NULL;
    }
    int n = kv_device_driver_count(drv, err, errlen);
    if (n < 0)
        return NULL;
    kv_device_info info[MAX_RANKS];
    int per_card[MAX_CARDS] = {0};
    for (int r = 0; r < num_ranks; r++)
        per_card[r % n]++;
    for (int r = 0; r < num_ranks; r++) {
        if (kv_device_driver_card(drv, r % n, &info[r], err, errlen) != 0)
            return NULL;
        info[r].ranks_on_card = per_card[r % n];
        info[r].pool_alloc_ms = -1;
    }
    return drv->open(num_ranks, info, err, errlen);
}

double kv_device_fit_scale(kv_device *d, int num_ranks, double plan_card_bytes, int how)
{
    if (!d || !d->ops->info || plan_card_bytes <= 0)
        return 1.0;
    if (num_ranks > d->num_ranks)
        num_ranks = d->num_ranks;
    if (num_ranks > MAX_RANKS)
        num_ranks = MAX_RANKS;
    kv_device_info in[MAX_RANKS];
    int ok[MAX_RANKS];
    for (int r = 0; r < num_ranks; r++)
        ok[r] = d->ops->info(d, r, &in[r], NULL, 0) == 0 && in[r].total_bytes > 0;
    double scale = 1.0;
    for (int r = 0; r < num_ranks; r++) {
        if (!ok[r])
            continue;
        int k = 0; /* the ranks in use that share r's card */
        for (int q = 0; q < num_ranks; q++)
            k += ok[q] && in[q].card == in[r].card;
        double card = (double)in[r].total_bytes;
        if (!(how & KV_FIT_SMALLER) && card < plan_card_bytes)
            card = plan_card_bytes; /* a small card is the caller's business: its OOM says so */
        if (!(how & KV_FIT_SHARED))
            k = 1;
        double s = card / (plan_card_bytes * k);
        if (s < scale)
            scale = s;
    }
    return scale > 1.0 - 1e-6 ? 1.0 : scale; /* a total rounded to whole bytes is the same card */
}

/* ---- benchmarks ------------------------------------------------------- */

int kv_bench_request_make(const kv_pool_layout *l, int32_t n, kv_bench_request *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const int32_t bs = l->block_size;
    const int64_t usable = (int64_t)(l->num_blocks - 1) * bs;
    if (bs < 1 || n < 1 || n > usable)
        return kv_errf(err, errlen, KV_DEV_EINVAL, "bench: %d tokens but the pool has %lld usable slots", (int)n,
                       (long long)usable);
    const int32_t nb = (int32_t)((n + bs - 1) / bs);
    out->table = malloc((size_t)nb * sizeof *out->table);
    out->keys = malloc((size_t)nb * sizeof *out->keys);
    out->tokens = malloc((size_t)n * sizeof *out->tokens);
    out->writes = malloc((size_t)n * sizeof *out->writes);
    if (!out->table || !out->keys || !out->tokens || !out->writes) {
        kv_bench_request_free(out);
        return kv_errf(err, errlen, KV_DEV_ENOMEM, "bench: out of host memory for %d tokens", (int)n);
    }
    for (int32_t i = 0; i < nb; i++)
        out->table[i] = 1 + i;
    uint64_t s = 0x2545F4914F6CDD1Dull;
    for (int32_t i = nb - 1; i > 0; i--) { /* Fisher-Yates with an LCG */
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int32_t j = (int32_t)((s >> 33) % (uint64_t)(i + 1));
        int32_t t = out->table[i];
        out->table[i] = out->table[j];
        out->table[j] = t;
    }
    for (int32_t b = 0; b < nb; b++)
        out->keys[b] = kv_mix64(0xB10CB10Cull + (uint64_t)b);
    for (int32_t i = 0; i < n; i++) {
        out->tokens[i] = (int32_t)((i * 7919u + 13u) % 128256u);
        out->writes[i].slot = (int64_t)out->table[i / bs] * bs + i % bs;
        out->writes[i].token_id = out->tokens[i];
        out->writes[i].position = i;
        out->writes[i].parent = out->keys[i / bs];
    }
    out->num_tokens = n;
    out->num_blocks = nb;
    out->verify_first = n > 2 * bs ? bs + 1 : 0;
    return 0;
}

void kv_bench_request_free(kv_bench_request *r)
{
    free(r->table);
    free(r->keys);
    free(r->tokens);
    free(r->writes);
    memset(r, 0, sizeof *r);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void kv_bench_summarize(double *ms, int n, uint64_t bytes, kv_bench_result *out)
{
    out->bytes = bytes;
    out->runs = n > 0 ? n : 0;
    out->best_ms = out->median_ms = out->best_gbps = out->median_gbps = 0;
    if (n < 1)
        return;
    qsort(ms, (size_t)n, sizeof *ms, cmp_double);
    out->best_ms = ms[0];
    out->median_ms = n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
    out->best_gbps = out->best_ms > 0 ? (double)bytes / (out->best_ms * 1e6) : 0;
    out->median_gbps = out->median_ms > 0 ? (double)bytes / (out->median_ms * 1e6) : 0;
}
