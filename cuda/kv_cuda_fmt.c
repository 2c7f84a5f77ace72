/* kv_cuda_fmt: the CUDA backend's pure helpers (messages, rank mapping).
 * No CUDA here, so the unit tests build it on machines without a toolkit. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kv_cuda.h"
#include "kv_gpu.h"

const char *kv_cuda_format_size(char *buf, size_t len, uint64_t bytes)
{
    /* Same thresholds as PyTorch: a unit is used up to and including 1024 of it. */
    if (bytes <= 1024ull)
        snprintf(buf, len, "%llu bytes", (unsigned long long)bytes);
    else if (bytes <= 1048576ull)
        snprintf(buf, len, "%.2f KiB", (double)bytes / 1024.0);
    else if (bytes <= 1073741824ull)
        snprintf(buf, len, "%.2f MiB", (double)bytes / 1048576.0);
    else
        snprintf(buf, len, "%.2f GiB", (double)bytes / 1073741824.0);
    return buf;
}

const char *kv_cuda_format_oom(char *buf, size_t len, const kv_cuda_oom *o)
{
    /* Kept under 256 characters: callers pass one-line buffers of that size. */
    char tried[32], total[32], free_s[32], held[32], ctx[32];
    kv_cuda_format_size(tried, sizeof tried, o->tried);
    kv_cuda_format_size(total, sizeof total, o->total);
    kv_cuda_format_size(free_s, sizeof free_s, o->free);
    kv_cuda_format_size(held, sizeof held, o->held);
    if (o->context >= 0)
        kv_cuda_format_size(ctx, sizeof ctx, (uint64_t)o->context);
    snprintf(buf, len,
             "CUDA out of memory. Tried to allocate %s (%s, rank %d). GPU %d has a total capacity "
             "of %s of which %s is free. kvlab holds %s there%s%s%s.",
             tried, o->what ? o->what : "allocation", o->rank, o->gpu, total, free_s, held,
             o->context >= 0 ? " plus a " : "", o->context >= 0 ? ctx : "",
             o->context >= 0 ? " CUDA context" : "");
    return buf;
}

int kv_cuda_map_ranks(int num_ranks, int num_gpus, int *gpu_of_rank)
{
    if (num_ranks < 1 || num_gpus < 1) return -1;
    for (int r = 0; r < num_ranks; r++)
        gpu_of_rank[r] = r % num_gpus;
    return num_gpus < num_ranks;
}

/* Lower-case letters and digits of s, without spaces, dashes or the vendor
 * words that catalogue ids leave out. */
static void squash(const char *s, char *out, size_t len)
{
    size_t n = 0;
    for (; *s && n + 1 < len; s++)
        if (isalnum((unsigned char)*s)) out[n++] = (char)tolower((unsigned char)*s);
    out[n] = 0;
    static const char *drop[] = {"nvidia", "geforce", "tesla"};
    for (size_t i = 0; i < sizeof drop / sizeof *drop; i++) {
        char *p;
        size_t dl = strlen(drop[i]);
        while ((p = strstr(out, drop[i])) != NULL) memmove(p, p + dl, strlen(p + dl) + 1);
    }
}

/* A word like "80gb" or "141gb": a size, not part of the card's name. */
static int is_size_word(const char *w)
{
    size_t n = strlen(w);
    if (n < 3 || strcmp(w + n - 2, "gb")) return 0;
    for (size_t i = 0; i + 2 < n; i++)
        if (!isdigit((unsigned char)w[i])) return 0;
    return 1;
}

const struct kv_gpu *kv_cuda_match_catalog(const struct kv_gpu_catalog *cat, const char *device_name,
                                           double total_bytes)
{
    if (!cat || !device_name) return NULL;
    char dev[256];
    squash(device_name, dev, sizeof dev);
    const kv_gpu *best = NULL;
    long best_score = -1;
    double best_diff = 0;
    for (int i = 0; i < cat->count; i++) {
        const kv_gpu *g = &cat->gpus[i];
        char id[sizeof g->id];
        snprintf(id, sizeof id, "%s", g->id);
        long score = -1;
        int word = 0;
        for (char *save = NULL, *w = strtok_r(id, "-_", &save); w; w = strtok_r(NULL, "-_", &save)) {
            char sw[64];
            squash(w, sw, sizeof sw);
            if (!*sw || is_size_word(sw)) continue;
            int found = strstr(dev, sw) != NULL;
            if (word++ == 0) {
                if (!found) break;
                score = 100L * (long)strlen(sw);
            } else if (found) {
                score += 1;
            }
        }
        if (score < 0) continue;
        double diff = g->reported_total_bytes > 0 ? fabs(g->reported_total_bytes - total_bytes) : 1e30;
        if (score > best_score || (score == best_score && diff < best_diff)) {
            best = g;
            best_score = score;
            best_diff = diff;
        }
    }
    return best;
}
