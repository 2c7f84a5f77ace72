/* kv_device_match: which catalogue entry (engine/kv_gpu.h) a real card is. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kv_device.h"
#include "kv_gpu.h"

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

const kv_gpu *kv_device_match_catalog(const kv_gpu_catalog *cat, const kv_device_info *info)
{
    if (!cat || !info || !info->name[0] || strcmp(info->backend, "host") == 0)
        return NULL;
    if (info->mig[0] || strstr(info->name, " MIG "))
        return NULL; /* a slice has a share of the card's memory and bandwidth: no entry is it */
    const char *device_name = info->name;
    const double total_bytes = (double)info->total_bytes;
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
