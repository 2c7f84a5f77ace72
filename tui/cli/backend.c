/* Backend selection: CUDA when built and a device answers, else host. */
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static int said; /* the backend line is printed once per process */


kv_device *kvlab_backend_open(int num_ranks, int placeholders, int *failed, char *err, size_t errlen)
{
    if (failed) *failed = 0;
    const char *want = getenv("KVLAB_DEVICE");
    int force_cuda = want && !strcmp(want, "cuda");
    if (want && !strcmp(want, "host")) {
        if (!said) fprintf(stderr, "kvlab: KVLAB_DEVICE=host: using the host backend\n");
        said = 1;
        return NULL;
    }
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
        if (kv_cuda_ranks_share_card(d))
            fprintf(stderr, "kvlab: %d tensor-parallel ranks share GPU %d: their KV pools sit side by side on it\n",
                    num_ranks, info.device);
    }
    return d;
#else
    (void)num_ranks;
    (void)placeholders;
    if (force_cuda) {
        if (failed) *failed = 1;
        kv_errf(err, errlen, -1, "KVLAB_DEVICE=cuda but this build has no CUDA backend");
        return NULL;
    }
    return NULL; /* no backend built: the host backend is the only one, nothing to say */
#endif
}

int kvlab_backend_this_gpu(const kv_gpu_catalog *cat, kv_gpu *out, double *context_bytes, char *err,
                           size_t errlen)
{
#ifdef KVLAB_HAVE_CUDA
    char why[256];
    kv_device *d = kv_cuda_open(1, why, sizeof why);
    if (!d) return kv_errf(err, errlen, -1, "--gpu this: %s", why);
    kv_cuda_gpu_info info;
    kv_cuda_info(d, 0, &info, NULL, 0);
    d->ops->destroy(d);
    memset(out, 0, sizeof *out);
    const kv_gpu *match = kv_cuda_match_catalog(cat, info.name, (double)info.total_bytes);
    if (match) *out = *match;
    snprintf(out->id, sizeof out->id, "this");
    snprintf(out->name, sizeof out->name, "%.100s (this GPU)", info.name);
    out->reported_total_bytes = (double)info.total_bytes;
    out->reported_total_gib = kv_gib((double)info.total_bytes);
    out->is_custom = 0;
    if (context_bytes) *context_bytes = (double)info.context_bytes;
    return 0;
#else
    (void)cat;
    (void)out;
    (void)context_bytes;
    return kv_errf(err, errlen, -1, "--gpu this: this build has no CUDA backend (configured without a CUDA toolkit or with KVLAB_CUDA=OFF)");
#endif
}
