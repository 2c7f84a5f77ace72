/* Backend selection: the GPU backend when built and a device answers, else host. */
#include "backend.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "kv_device_host.h"
#include "kv_util.h"

int kvlab_backend_cuda_built(void) { return kv_device_gpu_driver() != NULL; }

static int said; /* the backend line is printed once per process */

/* "cuda" -> "CUDA" for messages. */
static const char *label(const kv_device_driver *g)
{
    return g && !strcmp(g->name, "cuda") ? "CUDA" : g ? g->name : "GPU";
}

static kv_device *open_backend(int num_ranks, int placeholders, int say_shared, int *failed, char *err,
                               size_t errlen)
{
    if (failed) *failed = 0;
    const char *want = getenv("KVLAB_DEVICE");
    int force_gpu = want && !strcmp(want, "cuda");
    if (want && !strcmp(want, "host")) return NULL; /* the user's own choice: nothing to say */
    const kv_device_driver *g = kv_device_gpu_driver();
    if (!g) {
        if (force_gpu) {
            if (failed) *failed = 1;
            kv_errf(err, errlen, -1, "KVLAB_DEVICE=cuda but this build has no CUDA backend");
        }
        return NULL; /* no backend built: the host backend is the only one, nothing to say */
    }
    char why[256];
    kv_device *d = kv_device_driver_open(g, num_ranks, why, sizeof why);
    if (!d) {
        if (force_gpu) {
            if (failed) *failed = 1;
            kv_errf(err, errlen, -1, "KVLAB_DEVICE=cuda but %s", why);
            return NULL;
        }
        if (!said) fprintf(stderr, "kvlab: %s; using the host backend\n", why);
        said = 1;
        return NULL;
    }
    d->ops->set_placeholders(d, placeholders);
    kv_device_info info;
    if (d->ops->info(d, 0, &info, why, sizeof why) != 0) {
        d->ops->destroy(d);
        if (failed) *failed = force_gpu;
        kv_errf(err, errlen, -1, "%s", why);
        return NULL;
    }
    if (!said) {
        said = 1;
        fprintf(stderr, "kvlab: %s backend on %s (%.2f GiB)%s\n", label(g), info.name,
                kv_gib((double)info.total_bytes), placeholders ? "" : ", no placeholders");
        if (say_shared && info.ranks_on_card > 1)
            fprintf(stderr, "kvlab: %d tensor-parallel ranks on fewer GPUs: ranks sharing a GPU split it and put "
                            "their KV pools side by side on it\n", num_ranks);
    }
    return d;
}

kv_device *kvlab_backend_open(int num_ranks, int placeholders, int *failed, char *err, size_t errlen)
{
    return open_backend(num_ranks, placeholders, 1, failed, err, errlen);
}

kv_device *kvlab_backend_open_app(int max_ranks)
{
    return open_backend(max_ranks, 1, 0, NULL, NULL, 0);
}

/* Card 0 of the GPU backend as a catalogue entry named "this": the
 * catalogue's figures (bandwidth, FLOPs) when the card matches one, with the
 * total CUDA reports. Returns 0 and the match (or NULL) in *match. */
static int describe_this_gpu(const kv_gpu_catalog *cat, kv_device_info *info, kv_gpu *out, const kv_gpu **match,
                             char *err, size_t errlen)
{
    const kv_device_driver *g = kv_device_gpu_driver();
    if (!g)
        return kv_errf(err, errlen, -1, "this build has no CUDA backend (configured without a CUDA toolkit or with "
                                        "KVLAB_CUDA=OFF)");
    if (kv_device_driver_card(g, 0, info, err, errlen) != 0) return -1;
    memset(out, 0, sizeof *out);
    *match = kv_device_match_catalog(cat, info);
    if (*match) *out = **match;
    snprintf(out->id, sizeof out->id, "this");
    snprintf(out->name, sizeof out->name, "%.100s (this GPU)", info->name);
    snprintf(out->device_name, sizeof out->device_name, "%.63s", info->name);
    out->reported_total_bytes = (double)info->total_bytes;
    out->reported_total_gib = kv_gib((double)info->total_bytes);
    if (!*match && info->peak_gbps > 0) out->hbm_bandwidth_gbps = info->peak_gbps;
    out->is_custom = 0;
    return 0;
}

int kvlab_backend_this_gpu(const kv_gpu_catalog *cat, kv_gpu *out, double *context_bytes, char *err,
                           size_t errlen)
{
    kv_device_info info;
    const kv_gpu *match = NULL;
    char why[256];
    if (describe_this_gpu(cat, &info, out, &match, why, sizeof why) != 0)
        return kv_errf(err, errlen, -1, "--gpu this: %s", why);
    if (context_bytes) *context_bytes = (double)info.context_bytes;
    return 0;
}

/* ---- serve --allocate ---------------------------------------------------- */

double kvlab_parse_hold(const char *v, char *err, size_t errlen)
{
    if (!v || !*v)
        return kv_errf(err, errlen, -1, "--hold needs a number of seconds (>= 0, or inf), got ''");
    int hex = 0;
    for (const char *c = v; *c; c++)
        hex |= *c == 'x' || *c == 'X' || *c == 'p' || *c == 'P';
    char *end = NULL;
    errno = 0;
    double x = strtod(v, &end);
    if (hex || end == v || *end || isnan(x) || x < 0 || isspace((unsigned char)v[0]))
        return kv_errf(err, errlen, -1, "--hold needs a number of seconds (>= 0, or inf), got '%.60s'", v);
    return x; /* a huge finite value (ERANGE gives HUGE_VAL = inf) just means a long hold */
}

int kvlab_serve_dev_flags(int argc, char **argv, kvlab_serve_dev *o, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    o->placeholders = 1;
    o->hold_s = -1;
    o->context_bytes = -1;
    int n = 0;
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        if (!strcmp(s, "--allocate")) {
            o->allocate = 1;
        } else if (!strcmp(s, "--no-placeholders")) {
            o->placeholders = 0;
        } else if (!strcmp(s, "--hold") || !strncmp(s, "--hold=", 7)) {
            const char *v = s[6] == '=' ? s + 7 : (i + 1 < argc ? argv[++i] : NULL);
            double x = kvlab_parse_hold(v, err, errlen);
            if (x < 0) return -1;
            o->hold_s = x;
        } else {
            argv[n++] = argv[i];
        }
    }
    return n;
}

static void add_note(kvlab_serve_dev *o, const char *line)
{
    size_t l = strlen(o->note);
    snprintf(o->note + l, sizeof o->note - l, "%s\n", line);
}

int kvlab_serve_pick_gpu(kv_args *a, const kv_gpu_catalog *cat, kvlab_serve_dev *o, kv_gpu *out,
                         char *err, size_t errlen)
{
    const int asked = !strcmp(a->gpu, "this");
    if (!asked && (a->gpu[0] || a->gpu_memory_gib >= 0)) return 0;
    const char *want = getenv("KVLAB_DEVICE");
    if (!asked && want && !strcmp(want, "host")) return 0;
    kv_device_info info;
    const kv_gpu *match = NULL;
    char why[256];
    if (describe_this_gpu(cat, &info, out, &match, why, sizeof why) != 0) {
        if (asked) return kv_errf(err, errlen, -1, "--gpu this: %s", why);
        return 0;
    }
    o->on_this_gpu = 1;
    o->context_bytes = info.context_bytes;
    char line[1024];
    snprintf(line, sizeof line, "note: %s: planning on this machine's %.120s (%.2f GiB reported by cudaMemGetInfo%s%s%s)",
             asked ? "--gpu this" : "no --gpu given", info.name, kv_gib((double)info.total_bytes),
             match ? "; catalogue entry " : "", match ? match->id : "",
             info.mig[0] ? "; a MIG slice: no catalogue entry, bandwidth from the slice's share" : "");
    add_note(o, line);
    if (info.context_bytes >= 0 && a->cuda_context_gib < 0) {
        a->cuda_context_gib = kv_gib((double)info.context_bytes);
        snprintf(line, sizeof line, "note: CUDA context measured on this GPU: %.2f GiB (%s)",
                 kv_gib((double)info.context_bytes), info.context_how);
        add_note(o, line);
    }
    /* What other processes hold now is what vLLM's free-memory check sees. */
    double others = (double)info.total_bytes - (double)info.free_bytes -
                    (info.context_bytes > 0 ? (double)info.context_bytes : 0);
    if (others > kv_bytes_of_gib(0.25) && a->gpu_used_gib <= 0) {
        a->gpu_used_gib = kv_gib(others);
        snprintf(line, sizeof line, "note: other processes hold %.2f GiB of this GPU (counted as --gpu-used-gib)",
                 kv_gib(others));
        add_note(o, line);
    }
    return 1;
}

void kvlab_serve_mark_plan(kv_plan *p, const kvlab_serve_dev *o)
{
    if (!o->on_this_gpu || o->context_bytes < 0) return;
    kv_plan_term *t = &p->terms[KV_PLAN_TERM_CUDA_CONTEXT];
    if (fabs(t->bytes - (double)o->context_bytes) > 1048576.0)
        return; /* the user typed their own --cuda-context-gib */
    snprintf(t->how, sizeof t->how, "measured on this GPU (NVML, before/after the context)");
    t->overridden = 0;
}

static kv_device *alloc_fail(kv_device *d, kvlab_alloc_result *r, int rc, const char *err)
{
    r->oom = rc == KV_DEV_ENOMEM;
    snprintf(r->error, sizeof r->error, "%s", err);
    d->ops->destroy(d);
    return NULL;
}

kv_device *kvlab_serve_allocate(const kv_plan *p, const kvlab_serve_dev *o, kvlab_alloc_result *r)
{
    memset(r, 0, sizeof *r);
    r->attempted = 1;
    r->scale = 1;
    r->context_bytes = -1;
    r->used_bytes = -1;
    r->host_bytes = -1;
    r->mismatches = -1;
    r->pid = (long)getpid();
    r->num_ranks = p->num_ranks > 0 ? p->num_ranks : 1;
    if (!p->starts) {
        snprintf(r->error, sizeof r->error, "nothing allocated: vLLM would not start with this plan");
        return NULL;
    }
    char err[512] = "";
    int failed = 0;
    kv_device *d = open_backend(r->num_ranks, o->placeholders, 0, &failed, err, sizeof err);
    if (!d && failed) {
        snprintf(r->error, sizeof r->error, "%s", err);
        return NULL;
    }
    if (!d) { /* no GPU: the host backend, simulating the plan's card */
        d = kv_device_host_open(r->num_ranks, (uint64_t)p->gpu_total_bytes, err, sizeof err);
        if (!d) {
            snprintf(r->error, sizeof r->error, "%s", err);
            return NULL;
        }
        d->ops->set_placeholders(d, o->placeholders);
    }
    kv_device_info info;
    int rc = d->ops->info(d, 0, &info, err, sizeof err);
    if (rc) return alloc_fail(d, r, rc, err);
    snprintf(r->backend, sizeof r->backend, "%s", info.backend);
    snprintf(r->device_name, sizeof r->device_name, "%s", info.name);
    r->shared_card = info.ranks_on_card > 1;
    r->context_bytes = (double)info.context_bytes;
    r->card_bytes = (double)info.total_bytes;
    r->host_bytes = -1;

    /* The pool layout vLLM would build from the plan (one tensor per layer of a
     * KV cache group; block ids shared by the group's layers). */
    const int dtb = p->kv_dtype_bytes > 0 ? p->kv_dtype_bytes : 2;
    kv_pool_layout l;
    memset(&l, 0, sizeof l);
    l.block_size = p->block_size;
    l.num_layers = p->group_size > 0 ? p->group_size : p->num_layers;
    l.num_kv_heads = p->kv_heads_per_gpu > 0 ? p->kv_heads_per_gpu : 1;
    l.kv_factor = p->kv_factor > 0 ? p->kv_factor : 2;
    l.cache_dtype = kv_dtype_from_name(p->kv_cache_dtype, dtb);
    if (l.cache_dtype < 0 || kv_dtype_bytes(l.cache_dtype) != dtb) l.cache_dtype = dtb == 1 ? KV_DTYPE_FP8_E4M3 : dtb == 4 ? KV_DTYPE_FP32 : KV_DTYPE_BF16;
    l.head_size = (int32_t)(p->page_size_bytes / ((int64_t)l.kv_factor * l.block_size * l.num_kv_heads * dtb));
    if (l.head_size < 1) l.head_size = p->head_size > 0 ? p->head_size : 1;

    /* A planned card bigger than this one, or ranks sharing it: scale down. */
    r->scale = kv_device_fit_scale(d, r->num_ranks, p->gpu_total_bytes, KV_FIT_SHARED | KV_FIT_SMALLER);
    const double terms[4] = {p->weights_bytes, p->activation_bytes, p->cudagraph_bytes, p->nccl_bytes};
    static const char *names[4] = {"weights", "activation", "cudagraph", "nccl"};
    int64_t blocks = (int64_t)((double)p->num_blocks * r->scale);
    if (blocks > INT32_MAX) blocks = INT32_MAX;
    if (blocks < 2) blocks = 2;
    l.num_blocks = (int32_t)blocks;
    r->num_blocks = blocks;

    for (int rank = 0; rank < r->num_ranks; rank++) {
        for (int t = 0; t < 4; t++) {
            uint64_t b = (uint64_t)(terms[t] * r->scale);
            if (!b) continue;
            if ((rc = d->ops->reserve(d, rank, names[t], b, NULL, err, sizeof err))) return alloc_fail(d, r, rc, err);
        }
        l.first_kv_head = rank * l.num_kv_heads; /* the rank's own heads: ranks store different bytes */
        if ((rc = d->ops->alloc_pool(d, rank, &l, NULL, err, sizeof err))) return alloc_fail(d, r, rc, err);
    }
    r->held_bytes = 0;
    for (int rank = 0; rank < r->num_ranks; rank++) {
        kv_device_info ri;
        if (d->ops->info(d, rank, &ri, NULL, 0) == 0 && ri.card == info.card) r->held_bytes += (double)d->ops->held(d, rank);
    }
    kv_device_info after;
    if (d->ops->info(d, 0, &after, NULL, 0) == 0) r->pool_alloc_ms = after.pool_alloc_ms;
    if (!strcmp(info.backend, "host")) {
        r->host_bytes = 0;
        for (int rank = 0; rank < r->num_ranks; rank++) r->host_bytes += (double)kv_device_host_mapped_bytes(d, rank);
    }

    /* K/V bytes really land in the blocks: write tokens into every block (up
     * to 4M tokens) and read them back through a shuffled block table. */
    int64_t ntok = (blocks - 1) * l.block_size;
    if (ntok > 4 * 1024 * 1024) ntok = 4 * 1024 * 1024;
    r->mismatches = 0;
    for (int rank = 0; rank < r->num_ranks; rank++) {
        kv_bench_req q = {KV_BENCH_WRITE, (int32_t)ntok, 1};
        kv_bench_result br;
        if ((rc = d->ops->bench(d, rank, &q, &br, err, sizeof err))) return alloc_fail(d, r, rc, err);
        if (rank == 0) {
            r->write_gbps = br.best_gbps;
            r->write_gib = kv_gib((double)br.bytes);
            r->write_tokens = ntok;
        }
        r->mismatches += br.mismatches > 0 ? br.mismatches : 0;
    }
    /* What the card shows this process using (nvidia-smi's view), from CUDA itself. */
    uint64_t fr = 0, tot = 0;
    if (info.total_bytes && d->ops->mem_info(d, 0, &fr, &tot, NULL, 0) == 0 && !strcmp(info.backend, "cuda"))
        r->used_bytes = (info.context_bytes > 0 ? (double)info.context_bytes : 0) +
                        ((double)info.free_bytes - (double)fr);
    r->ok = r->mismatches == 0;
    if (!r->ok) snprintf(r->error, sizeof r->error, "%lld K/V rows read back wrong", (long long)r->mismatches);
    return d;
}

void kvlab_serve_print_alloc(FILE *f, const kvlab_alloc_result *r)
{
    if (!r->attempted) return;
    const int host = !strcmp(r->backend, "host");
    fprintf(f, "\nOn the %s (--allocate):\n", host ? "host backend: no GPU here, so the card is simulated" : "GPU");
    if (r->scale < 1)
        fprintf(f, "  the planned card is larger than this one%s: every term and the pool scaled by %.3f\n",
                r->shared_card ? " (with the ranks side by side on it)" : "", r->scale);
    if (r->shared_card)
        fprintf(f, "  %d ranks on fewer GPUs: ranks that share a GPU hold their pools side by side on it\n",
                r->num_ranks);
    if (!r->ok && !r->num_blocks) {
        fprintf(f, "  %s\n", r->error);
        return;
    }
    if (r->oom || (r->error[0] && r->mismatches < 0)) {
        fprintf(f, "  %s\n", r->error);
        fprintf(f, "  the engine stopped cleanly: everything it held was released\n");
        return;
    }
    if (host) {
        /* The held GiB are a count on the simulated card; the host stores one
         * 8-byte fingerprint per KV slot (engine/kv_device_host.h), no more. */
        char hb[32];
        double mib = r->host_bytes / (1024.0 * 1024.0);
        if (mib >= 1024) snprintf(hb, sizeof hb, "%.2f GiB", mib / 1024);
        else snprintf(hb, sizeof hb, "%.2f MiB", mib);
        fprintf(f, "  the simulated %.2f GiB card%s counts %.2f GiB as held (placeholders and KV pool)\n",
                kv_gib(r->card_bytes), r->num_ranks > 1 ? " of each rank" : "", kv_gib(r->held_bytes));
        fprintf(f, "  host memory keeps only the K/V fingerprints: %s (8 bytes per KV slot%s), nothing on a GPU\n",
                hb, r->num_ranks > 1 ? ", every rank" : "");
    }
    else if (r->context_bytes >= 0)
        fprintf(f, "  kvlab holds %.2f GiB (placeholders and KV pool) plus a %.2f GiB CUDA context\n",
                kv_gib(r->held_bytes), kv_gib(r->context_bytes));
    else
        fprintf(f, "  kvlab holds %.2f GiB (placeholders and KV pool) plus a CUDA context it could not measure\n",
                kv_gib(r->held_bytes));
    fprintf(f, "  KV pool: %lld blocks per rank in one %s (%.2f ms)\n", (long long)r->num_blocks,
            host ? "mapping" : "cudaMalloc", r->pool_alloc_ms);
    if (host)
        fprintf(f, "  wrote the K/V fingerprints of %lld tokens into the blocks; read back: %lld mismatches\n",
                (long long)r->write_tokens, (long long)r->mismatches);
    else
        fprintf(f, "  wrote K/V into %.2f GiB of blocks at %.0f GB/s; read back: %lld mismatches\n", r->write_gib,
                r->write_gbps, (long long)r->mismatches);
}

void kvlab_serve_json_alloc(void *json_object, const kvlab_alloc_result *r)
{
    if (!r->attempted || !json_object) return;
    cJSON *o = cJSON_AddObjectToObject((cJSON *)json_object, "device");
    cJSON_AddBoolToObject(o, "allocated", r->ok);
    cJSON_AddBoolToObject(o, "oom", r->oom);
    cJSON_AddStringToObject(o, "error", r->error);
    cJSON_AddStringToObject(o, "backend", r->backend);
    cJSON_AddStringToObject(o, "device_name", r->device_name);
    cJSON_AddNumberToObject(o, "pid", (double)r->pid);
    cJSON_AddNumberToObject(o, "num_ranks", r->num_ranks);
    cJSON_AddBoolToObject(o, "shared_card", r->shared_card);
    cJSON_AddNumberToObject(o, "scale", r->scale);
    cJSON_AddNumberToObject(o, "num_blocks", (double)r->num_blocks);
    cJSON_AddNumberToObject(o, "held_bytes", (double)(int64_t)r->held_bytes);
    cJSON_AddNumberToObject(o, "held_gib", kv_gib(r->held_bytes));
    if (r->host_bytes >= 0) cJSON_AddNumberToObject(o, "host_memory_bytes", r->host_bytes);
    else cJSON_AddNullToObject(o, "host_memory_bytes");
    if (r->context_bytes >= 0) cJSON_AddNumberToObject(o, "cuda_context_gib", kv_gib(r->context_bytes));
    else cJSON_AddNullToObject(o, "cuda_context_gib");
    if (r->used_bytes >= 0) cJSON_AddNumberToObject(o, "device_used_gib", kv_gib(r->used_bytes));
    else cJSON_AddNullToObject(o, "device_used_gib");
    cJSON_AddNumberToObject(o, "pool_alloc_ms", r->pool_alloc_ms);
    cJSON_AddNumberToObject(o, "write_gbps", r->write_gbps);
    cJSON_AddNumberToObject(o, "mismatches", (double)r->mismatches);
}

static volatile sig_atomic_t g_hold_signal;

static void on_hold_signal(int sig) { g_hold_signal = sig; }

int kvlab_serve_hold(const kvlab_serve_dev *o, const kvlab_alloc_result *r)
{
    if (!r->ok) return 0;
    const int timed = o->hold_s > 0, forever = timed && isinf(o->hold_s);
    if (!timed && !(o->hold_s < 0 && isatty(0))) return 0;
    /* Our own handlers for the hold only: a signal ends it, the caller frees. */
    static const int sigs[3] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction sa, old[3];
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_hold_signal;
    sigemptyset(&sa.sa_mask);
    g_hold_signal = 0;
    for (int i = 0; i < 3; i++) sigaction(sigs[i], &sa, &old[i]);
    if (timed) {
        if (forever)
            fprintf(stderr, "kvlab: holding the memory until interrupted (watch nvidia-smi; Ctrl-C releases it)\n");
        else
            fprintf(stderr, "kvlab: holding the memory for %g s (watch nvidia-smi; Ctrl-C releases it)\n", o->hold_s);
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        const double start = (double)t0.tv_sec + (double)t0.tv_nsec / 1e9;
        while (!g_hold_signal) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            const double left = forever ? 3600.0 : o->hold_s - ((double)now.tv_sec + (double)now.tv_nsec / 1e9 - start);
            if (left <= 0) break;
            const double step = left < 3600.0 ? left : 3600.0; /* bounded: any finite hold fits a timespec */
            struct timespec ts = {(time_t)step, (long)((step - (double)(time_t)step) * 1e9)};
            if (ts.tv_nsec >= 1000000000L) ts.tv_nsec = 999999999L;
            nanosleep(&ts, NULL); /* EINTR: the loop looks at the clock and the flag again */
        }
    } else {
        fprintf(stderr, "kvlab: holding the memory (watch nvidia-smi); press Enter to release it\n");
        int c;
        while (!g_hold_signal && (c = getchar()) != EOF && c != '\n') {}
    }
    for (int i = 0; i < 3; i++) sigaction(sigs[i], &old[i], NULL);
    if (g_hold_signal)
        fprintf(stderr, "kvlab: %s: releasing the memory\n", strsignal(g_hold_signal));
    return g_hold_signal;
}
