/* kv_gpu: GPU catalogue (assets/gpus.json) and aliases. */
#include "kv_gpu.h"
#include "kv_util.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Short names users type -> catalogue ids. */
static const char *const aliases[][2] = {
    {"rtx-4090", "rtx4090-24gb"},   {"4090", "rtx4090-24gb"},
    {"rtx-3090", "rtx3090-24gb"},   {"3090", "rtx3090-24gb"},
    {"rtx-5090", "rtx5090-32gb"},   {"5090", "rtx5090-32gb"},
    {"rtx-a6000", "rtx-a6000-48gb"}, {"a6000", "rtx-a6000-48gb"},
    {"rtx-6000-ada", "rtx6000-ada-48gb"}, {"6000-ada", "rtx6000-ada-48gb"},
    {"rtx-pro-6000", "rtxpro6000-96gb"}, {"pro-6000", "rtxpro6000-96gb"},
    {"gb10", "gb10-128gb"},         {"dgx-spark", "gb10-128gb"},
    {"t4", "t4-16gb"},              {"a10g", "a10g-24gb"},
    {"a10", "a10-24gb"},            {"l4", "l4-24gb"},
    {"l40s", "l40s-48gb"},
    {"a100", "a100-80gb-sxm"},      {"a100-80gb", "a100-80gb-sxm"},
    {"a100-40gb", "a100-40gb-sxm"}, {"a100-pcie", "a100-80gb-pcie"},
    {"h100", "h100-80gb-sxm"},      {"h100-80gb", "h100-80gb-sxm"},
    {"h100-sxm", "h100-80gb-sxm"},  {"h100-pcie", "h100-80gb-pcie"},
    {"h100-nvl", "h100-nvl-94gb"},
    {"h200", "h200-141gb-sxm"},     {"h200-141gb", "h200-141gb-sxm"},
    {"gh200", "gh200-96gb"},        {"b200", "b200-180gb"},
    {"mi300x", "mi300x-192gb"},     {"mi325x", "mi325x-256gb"},
};
#define NUM_ALIASES ((int)(sizeof aliases / sizeof aliases[0]))

int kv_gpu_alias_count(void) { return NUM_ALIASES; }

void kv_gpu_alias_at(int i, const char **alias, const char **id)
{
    if (i < 0 || i >= NUM_ALIASES) {
        *alias = *id = NULL;
        return;
    }
    *alias = aliases[i][0];
    *id = aliases[i][1];
}

static double num_or(const cJSON *o, const char *k, double d)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) ? v->valuedouble : d;
}

int kv_gpu_catalog_parse(const char *json, size_t len, kv_gpu_catalog *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root)
        return kv_errf(err, errlen, KV_GPU_EPARSE, "gpus.json: not valid JSON");
    int rc = KV_GPU_OK;
    if (!cJSON_IsArray(root)) {
        rc = kv_errf(err, errlen, KV_GPU_EPARSE, "gpus.json: expected an array of GPUs");
        goto done;
    }
    int n = cJSON_GetArraySize(root);
    out->gpus = calloc(n ? (size_t)n : 1, sizeof *out->gpus);
    if (!out->gpus) {
        rc = kv_errf(err, errlen, KV_GPU_EPARSE, "gpus.json: out of memory");
        goto done;
    }
    const cJSON *e;
    int i = 0;
    cJSON_ArrayForEach(e, root) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        if (!cJSON_IsString(id) || !*id->valuestring) {
            rc = kv_errf(err, errlen, KV_GPU_EPARSE, "gpus.json: entry %d: field \"id\" is missing", i);
            goto done;
        }
        kv_gpu *g = &out->gpus[out->count];
        snprintf(g->id, sizeof g->id, "%s", id->valuestring);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        snprintf(g->name, sizeof g->name, "%s", cJSON_IsString(name) ? name->valuestring : g->id);
        const cJSON *dname = cJSON_GetObjectItemCaseSensitive(e, "device_name");
        snprintf(g->device_name, sizeof g->device_name, "%.63s", cJSON_IsString(dname) ? dname->valuestring : g->name);
        double bytes = num_or(e, "reported_total_bytes", 0), gib = num_or(e, "reported_total_gib", 0);
        if (bytes <= 0 && gib > 0)
            bytes = gib * KV_GIB;
        if (gib <= 0 && bytes > 0)
            gib = bytes / KV_GIB;
        if (bytes <= 0 || bytes > 1e15) {
            rc = kv_errf(err, errlen, KV_GPU_EPARSE, "gpus.json: entry \"%s\": field \"reported_total_gib\" is missing or invalid",
                         g->id);
            goto done;
        }
        g->reported_total_bytes = bytes;
        g->reported_total_gib = gib;
        g->hbm_bandwidth_gbps = num_or(e, "hbm_bandwidth_gbps", 0);
        g->bf16_dense_tflops = num_or(e, "bf16_dense_tflops", 0);
        g->pcie_gbps = num_or(e, "pcie_gbps", 0);
        g->nvlink_gbps = num_or(e, "nvlink_gbps", 0);
        g->fp8 = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "fp8"));
        g->unified_memory = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "unified_memory"));
        g->nvml_memory_info = !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(e, "nvml_memory_info"));
        double cc = num_or(e, "compute_capability", 0);
        g->compute_capability = cc > 0 && cc < 100 ? (int32_t)(cc * 10.0 + 0.5) : 0;
        out->count++;
        i++;
    }
done:
    cJSON_Delete(root);
    if (rc) {
        free(out->gpus);
        memset(out, 0, sizeof *out);
    }
    return rc;
}

int kv_gpu_catalog_load(const char *assets_dir, kv_gpu_catalog *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    char path[2048];
    snprintf(path, sizeof path, "%s/gpus.json", assets_dir);
    FILE *f = fopen(path, "rb");
    if (!f)
        return kv_errf(err, errlen, KV_GPU_ENOTFOUND, "%s: cannot open the GPU catalogue", path);
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 65536;
            char *nb = cap <= (16u << 20) ? realloc(buf, cap) : NULL;
            if (!nb) {
                free(buf);
                fclose(f);
                return kv_errf(err, errlen, KV_GPU_EPARSE, "%s: too large", path);
            }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    fclose(f);
    int rc = kv_gpu_catalog_parse(buf, len, out, err, errlen);
    free(buf);
    return rc;
}

void kv_gpu_catalog_free(kv_gpu_catalog *cat)
{
    if (!cat)
        return;
    free(cat->gpus);
    cat->gpus = NULL;
    cat->count = 0;
}

/* Lower-case, without '-', '_', ' '. */
static void norm(const char *s, char *o, size_t n)
{
    size_t j = 0;
    for (; *s && j + 1 < n; s++)
        if (*s != '-' && *s != '_' && *s != ' ')
            o[j++] = (char)tolower((unsigned char)*s);
    o[j] = '\0';
}

const kv_gpu *kv_gpu_find(const kv_gpu_catalog *cat, const char *name, char *err, size_t errlen)
{
    char q[64], t[64];
    if (!name || !*name) {
        kv_errf(err, errlen, -1, "no GPU name given (see kvlab gpus)");
        return NULL;
    }
    norm(name, q, sizeof q);
    for (int i = 0; i < cat->count; i++) {
        norm(cat->gpus[i].id, t, sizeof t);
        if (!strcmp(q, t))
            return &cat->gpus[i];
    }
    for (int a = 0; a < NUM_ALIASES; a++) {
        norm(aliases[a][0], t, sizeof t);
        if (strcmp(q, t))
            continue;
        for (int i = 0; i < cat->count; i++)
            if (!strcmp(cat->gpus[i].id, aliases[a][1]))
                return &cat->gpus[i];
    }
    /* Near matches, closest first: an id or alias containing the query (or
     * contained in it) scores 0, else the smallest edit distance (<= 3). */
    int score[256];
    int n = cat->count < 256 ? cat->count : 256;
    for (int i = 0; i < n; i++) {
        norm(cat->gpus[i].id, t, sizeof t);
        int best = (*q && (strstr(t, q) || strstr(q, t))) ? 0 : kv_edit_distance(q, t);
        for (int a = 0; a < NUM_ALIASES; a++) {
            if (strcmp(aliases[a][1], cat->gpus[i].id))
                continue;
            char al[64];
            norm(aliases[a][0], al, sizeof al);
            int d = (*q && strlen(al) >= 4 && strlen(q) >= 3 && (strstr(al, q) || strstr(q, al))) ? 0
                                                                                               : kv_edit_distance(q, al);
            if (d < best)
                best = d;
        }
        score[i] = best;
    }
    char list[512] = "";
    int shown = 0;
    int lo = 99;
    for (int i = 0; i < n; i++)
        if (score[i] < lo)
            lo = score[i];
    for (int d = lo; d <= 3 && d <= lo + 1 && shown < 4; d++)
        for (int i = 0; i < n && shown < 4; i++)
            if (score[i] == d) {
                size_t l = strlen(list);
                snprintf(list + l, sizeof list - l, "%s%s", shown ? ", " : "", cat->gpus[i].id);
                shown++;
            }
    if (shown)
        kv_errf(err, errlen, KV_GPU_ENOTFOUND, "unknown GPU '%s' (did you mean: %s?); see kvlab gpus", name, list);
    else
        kv_errf(err, errlen, KV_GPU_ENOTFOUND,
                "unknown GPU '%s'; see kvlab gpus for the ids, or describe the card with --gpu-memory-gib", name);
    return NULL;
}

void kv_gpu_custom(double total_gib, kv_gpu *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->id, sizeof out->id, "custom");
    snprintf(out->name, sizeof out->name, "custom card, %.2f GiB reported", total_gib);
    snprintf(out->device_name, sizeof out->device_name, "custom card");
    out->reported_total_gib = total_gib;
    out->reported_total_bytes = total_gib * KV_GIB;
    out->is_custom = 1;
}
