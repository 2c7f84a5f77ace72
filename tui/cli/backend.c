/* Backend selection: CUDA when built and a device answers, else host. */
#include "backend.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "kv_util.h"
#ifdef KVLAB_HAVE_CUDA
#include "kv_cuda.h"
#endif

int kvlab_backend_cuda_built(void)
{
#ifdef KVLAB_HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}

#ifdef KVLAB_HAVE_CUDA
static int said; /* the backend line is printed once per process */
#endif


static kv_device *open_backend(int num_ranks, int placeholders, int say_shared, int *failed, char *err,
                               size_t errlen)
{
    if (failed) *failed = 0;
    const char *want = getenv("KVLAB_DEVICE");
    int force_cuda = want && !strcmp(want, "cuda");
    if (want && !strcmp(want, "host")) return NULL; /* the user's own choice: nothing to say */
#ifdef KVLAB_HAVE_CUDA
    char why[256];
    kv_device *d = kv_cuda_open(num_ranks, why, sizeof why);
    if (!d) {
        if (force_cuda) {
            if (failed) *failed = 1;
            kv_errf(err, errlen, -1, "KVLAB_DEVICE=cuda but %s", why);
            return NULL;
        }
        if (!said) fprintf(stderr, "kvlab: %s; using the host backend\n", why);
        said = 1;
        return NULL;
    }
    kv_cuda_set_placeholders(d, placeholders);
    kv_cuda_gpu_info info;
    kv_cuda_info(d, 0, &info, NULL, 0);
    if (!said) {
        said = 1;
        fprintf(stderr, "kvlab: CUDA backend on %s (%.2f GiB)%s\n", info.name, kv_gib((double)info.total_bytes),
                placeholders ? "" : ", no placeholders");
        if (say_shared && kv_cuda_ranks_share_card(d))
            fprintf(stderr, "kvlab: %d tensor-parallel ranks on fewer GPUs: ranks sharing a GPU put their KV "
                            "pools side by side on it\n", num_ranks);
    }
    return d;
#else
    (void)num_ranks;
    (void)placeholders;
    (void)say_shared;
    if (force_cuda) {
        if (failed) *failed = 1;
        kv_errf(err, errlen, -1, "KVLAB_DEVICE=cuda but this build has no CUDA backend");
        return NULL;
    }
    return NULL; /* no backend built: the host backend is the only one, nothing to say */
#endif
}

kv_device *kvlab_backend_open(int num_ranks, int placeholders, int *failed, char *err, size_t errlen)
{
    return open_backend(num_ranks, placeholders, 1, failed, err, errlen);
}

kv_device *kvlab_backend_open_app(int max_ranks)
{
    return open_backend(max_ranks, 1, 0, NULL, NULL, 0);
}

#ifdef KVLAB_HAVE_CUDA
/* The GPU of device d as a catalogue entry named "this": the catalogue's
 * figures (bandwidth, FLOPs) when the card matches one, with the total CUDA
 * reports. Returns the catalogue match or NULL. */
static const kv_gpu *describe_this_gpu(kv_device *d, const kv_gpu_catalog *cat, kv_cuda_gpu_info *info,
                                       kv_gpu *out)
{
    kv_cuda_info(d, 0, info, NULL, 0);
    memset(out, 0, sizeof *out);
    const kv_gpu *match = kv_cuda_match_catalog(cat, info->name, (double)info->total_bytes);
    if (match) *out = *match;
    snprintf(out->id, sizeof out->id, "this");
    snprintf(out->name, sizeof out->name, "%.100s (this GPU)", info->name);
    out->reported_total_bytes = (double)info->total_bytes;
    out->reported_total_gib = kv_gib((double)info->total_bytes);
    out->is_custom = 0;
    return match;
}
#endif

int kvlab_backend_this_gpu(const kv_gpu_catalog *cat, kv_gpu *out, double *context_bytes, char *err,
                           size_t errlen)
{
#ifdef KVLAB_HAVE_CUDA
    char why[256];
    kv_device *d = kv_cuda_open(1, why, sizeof why);
    if (!d) return kv_errf(err, errlen, -1, "--gpu this: %s", why);
    kv_cuda_gpu_info info;
    describe_this_gpu(d, cat, &info, out);
    d->ops->destroy(d);
    if (context_bytes) *context_bytes = (double)info.context_bytes;
    return 0;
#else
    (void)cat;
    (void)out;
    (void)context_bytes;
    return kv_errf(err, errlen, -1, "--gpu this: this build has no CUDA backend (configured without a CUDA toolkit or with KVLAB_CUDA=OFF)");
#endif
}

/* ---- serve --allocate ---------------------------------------------------- */

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
            char *end = NULL;
            double x = v ? strtod(v, &end) : -1;
            if (!v || !end || *end || x < 0)
                return kv_errf(err, errlen, -1, "--hold needs a number of seconds (>= 0), got '%s'", v ? v : "");
            o->hold_s = x;
        } else {
            argv[n++] = argv[i];
        }
    }
    return n;
}

#ifdef KVLAB_HAVE_CUDA
static void add_note(kvlab_serve_dev *o, const char *line)
{
    size_t l = strlen(o->note);
    snprintf(o->note + l, sizeof o->note - l, "%s\n", line);
}
#endif

int kvlab_serve_pick_gpu(kv_args *a, const kv_gpu_catalog *cat, kvlab_serve_dev *o, kv_gpu *out,
                         char *err, size_t errlen)
{
    const int asked = !strcmp(a->gpu, "this");
    if (!asked && (a->gpu[0] || a->gpu_memory_gib >= 0)) return 0;
    const char *want = getenv("KVLAB_DEVICE");
    if (!asked && want && !strcmp(want, "host")) return 0;
#ifdef KVLAB_HAVE_CUDA
    char why[256];
    kv_device *d = kv_cuda_open(1, why, sizeof why);
    if (!d) {
        if (asked) return kv_errf(err, errlen, -1, "--gpu this: %s", why);
        return 0;
    }
    kv_cuda_gpu_info info;
    const kv_gpu *match = describe_this_gpu(d, cat, &info, out);
    d->ops->destroy(d);
    o->on_this_gpu = 1;
    o->context_bytes = info.context_bytes;
    char line[1024];
    snprintf(line, sizeof line, "note: %s: planning on this machine's %.120s (%.2f GiB reported by cudaMemGetInfo%s%s)",
             asked ? "--gpu this" : "no --gpu given", info.name, kv_gib((double)info.total_bytes),
             match ? "; catalogue entry " : "", match ? match->id : "");
    add_note(o, line);
    if (info.context_bytes >= 0 && a->cuda_context_gib < 0) {
        a->cuda_context_gib = kv_gib((double)info.context_bytes);
        snprintf(line, sizeof line, "note: CUDA context measured on this GPU: %.2f GiB (%s)",
                 kv_gib((double)info.context_bytes), info.context_how);
        add_note(o, line);
    }
    /* What other processes hold now is what vLLM's free-memory check sees. */
    double others = (double)info.total_bytes - (double)info.free_at_open -
                    (info.context_bytes > 0 ? (double)info.context_bytes : 0);
    if (others > kv_bytes_of_gib(0.25) && a->gpu_used_gib <= 0) {
        a->gpu_used_gib = kv_gib(others);
        snprintf(line, sizeof line, "note: other processes hold %.2f GiB of this GPU (counted as --gpu-used-gib)",
                 kv_gib(others));
        add_note(o, line);
    }
    return 1;
#else
    (void)cat;
    (void)o;
    (void)out;
    if (asked) return kv_errf(err, errlen, -1, "--gpu this: this build has no CUDA backend");
    return 0;
#endif
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

kv_device *kvlab_serve_allocate(const kv_plan *p, const kvlab_serve_dev *o, kvlab_alloc_result *r)
{
    memset(r, 0, sizeof *r);
    r->attempted = 1;
    r->scale = 1;
    r->context_bytes = -1;
    r->mismatches = -1;
    r->num_ranks = p->num_ranks > 0 ? p->num_ranks : 1;
    if (!p->starts) {
        snprintf(r->error, sizeof r->error, "nothing allocated: vLLM would not start with this plan");
        return NULL;
    }
#ifdef KVLAB_HAVE_CUDA
    char err[512];
    kv_device *d = kv_cuda_open(r->num_ranks, err, sizeof err);
    if (!d) {
        snprintf(r->error, sizeof r->error, "%s", err);
        return NULL;
    }
    kv_cuda_set_placeholders(d, o->placeholders);
    r->shared_card = kv_cuda_ranks_share_card(d);
    kv_cuda_gpu_info info;
    kv_cuda_info(d, 0, &info, NULL, 0);
    r->context_bytes = (double)info.context_bytes;

    /* The pool layout vLLM would build from the plan (one tensor per layer of a
     * KV cache group; block ids shared by the group's layers). */
    const int dtb = p->kv_dtype_bytes > 0 ? p->kv_dtype_bytes : 2;
    kv_pool_layout l;
    l.block_size = p->block_size;
    l.num_layers = p->group_size > 0 ? p->group_size : p->num_layers;
    l.num_kv_heads = p->kv_heads_per_gpu > 0 ? p->kv_heads_per_gpu : 1;
    l.kv_factor = p->kv_factor > 0 ? p->kv_factor : 2;
    l.cache_dtype = dtb == 1 ? KV_DTYPE_FP8_E4M3 : dtb == 4 ? KV_DTYPE_FP32
                  : !strcmp(p->kv_cache_dtype, "float16") || !strcmp(p->kv_cache_dtype, "fp16") ? KV_DTYPE_FP16
                                                                                               : KV_DTYPE_BF16;
    l.head_size = (int32_t)(p->page_size_bytes / ((int64_t)l.kv_factor * l.block_size * l.num_kv_heads * dtb));
    if (l.head_size < 1) l.head_size = p->head_size > 0 ? p->head_size : 1;

    /* A simulated card bigger than this one (or ranks sharing it): scale down. */
    int per_card = 0;
    for (int rank = 0; rank < r->num_ranks; rank++)
        per_card += kv_cuda_rank_gpu(d, rank) == kv_cuda_rank_gpu(d, 0);
    const double plan_total = p->gpu_total_bytes * per_card;
    if (plan_total > (double)info.total_bytes) r->scale = (double)info.total_bytes / plan_total;
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
            int rc = d->ops->reserve(d, rank, names[t], b, err, sizeof err);
            if (rc) {
                r->oom = rc == KV_DEV_ENOMEM;
                snprintf(r->error, sizeof r->error, "%s", err);
                d->ops->destroy(d);
                return NULL;
            }
        }
        int rc = d->ops->alloc_pool(d, rank, &l, err, sizeof err);
        if (rc) {
            r->oom = rc == KV_DEV_ENOMEM;
            snprintf(r->error, sizeof r->error, "%s", err);
            d->ops->destroy(d);
            return NULL;
        }
    }
    r->held_bytes = 0;
    for (int rank = 0; rank < r->num_ranks; rank++)
        if (kv_cuda_rank_gpu(d, rank) == kv_cuda_rank_gpu(d, 0)) r->held_bytes += (double)kv_cuda_held_bytes(d, rank);
    r->pool_alloc_ms = kv_cuda_pool_alloc_ms(d, 0);

    /* K/V bytes really land in the blocks: write tokens into every block (up
     * to 4M tokens) and read them back through a shuffled block table. */
    int64_t ntok = (blocks - 1) * l.block_size;
    if (ntok > 4 * 1024 * 1024) ntok = 4 * 1024 * 1024;
    r->mismatches = 0;
    for (int rank = 0; rank < r->num_ranks; rank++) {
        double gbps = 0, ms = 0;
        uint64_t bytes = 0;
        int64_t bad = 0;
        int rc = kv_cuda_bench_write(d, rank, (int32_t)ntok, 1, &gbps, &ms, &bytes, err, sizeof err);
        if (!rc) rc = kv_cuda_bench_gather(d, rank, (int32_t)ntok, 1, NULL, NULL, NULL, &bad, err, sizeof err);
        if (rc) {
            snprintf(r->error, sizeof r->error, "%s", err);
            d->ops->destroy(d);
            return NULL;
        }
        if (rank == 0) {
            r->write_gbps = gbps;
            r->write_gib = kv_gib((double)bytes);
        }
        r->mismatches += bad;
    }
    r->ok = r->mismatches == 0;
    if (!r->ok) snprintf(r->error, sizeof r->error, "%lld K/V rows read back wrong", (long long)r->mismatches);
    return d;
#else
    (void)o;
    snprintf(r->error, sizeof r->error, "--allocate needs the CUDA backend; this build has none");
    return NULL;
#endif
}

void kvlab_serve_print_alloc(FILE *f, const kvlab_alloc_result *r)
{
    if (!r->attempted) return;
    fprintf(f, "\nOn the GPU (--allocate):\n");
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
    fprintf(f, "  kvlab holds %.2f GiB (placeholders and KV pool) plus a %.2f GiB CUDA context\n",
            kv_gib(r->held_bytes), r->context_bytes >= 0 ? kv_gib(r->context_bytes) : 0.0);
    fprintf(f, "  KV pool: %lld blocks per rank in one cudaMalloc (%.2f ms)\n", (long long)r->num_blocks,
            r->pool_alloc_ms);
    fprintf(f, "  wrote K/V into %.2f GiB of blocks at %.0f GB/s; gather-verify: %lld mismatches\n", r->write_gib,
            r->write_gbps, (long long)r->mismatches);
}

void kvlab_serve_json_alloc(void *json_object, const kvlab_alloc_result *r)
{
    if (!r->attempted || !json_object) return;
    cJSON *o = cJSON_AddObjectToObject((cJSON *)json_object, "device");
    cJSON_AddBoolToObject(o, "allocated", r->ok);
    cJSON_AddBoolToObject(o, "oom", r->oom);
    cJSON_AddStringToObject(o, "error", r->error);
    cJSON_AddNumberToObject(o, "num_ranks", r->num_ranks);
    cJSON_AddBoolToObject(o, "shared_card", r->shared_card);
    cJSON_AddNumberToObject(o, "scale", r->scale);
    cJSON_AddNumberToObject(o, "num_blocks", (double)r->num_blocks);
    cJSON_AddNumberToObject(o, "held_gib", kv_gib(r->held_bytes));
    if (r->context_bytes >= 0) cJSON_AddNumberToObject(o, "cuda_context_gib", kv_gib(r->context_bytes));
    else cJSON_AddNullToObject(o, "cuda_context_gib");
    cJSON_AddNumberToObject(o, "pool_alloc_ms", r->pool_alloc_ms);
    cJSON_AddNumberToObject(o, "write_gbps", r->write_gbps);
    cJSON_AddNumberToObject(o, "mismatches", (double)r->mismatches);
}

void kvlab_serve_hold(const kvlab_serve_dev *o, const kvlab_alloc_result *r)
{
    if (!r->ok) return;
    if (o->hold_s > 0) {
        fprintf(stderr, "kvlab: holding the memory for %g s (watch nvidia-smi)\n", o->hold_s);
        struct timespec ts = {(time_t)o->hold_s, (long)((o->hold_s - (double)(time_t)o->hold_s) * 1e9)};
        while (nanosleep(&ts, &ts) != 0) {}
    } else if (o->hold_s < 0 && isatty(0)) {
        fprintf(stderr, "kvlab: holding the memory (watch nvidia-smi); press Enter to release it\n");
        int c;
        while ((c = getchar()) != EOF && c != '\n') {}
    }
}
