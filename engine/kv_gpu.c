#include "kv_gpu.h"
#include "kv_util.h"
#include <string.h>
int kv_gpu_catalog_load(const char *a, kv_gpu_catalog *out, char *err, size_t errlen) { (void)a; memset(out, 0, sizeof *out); return kv_errf(err, errlen, KV_GPU_ENOTFOUND, "not built yet"); }
int kv_gpu_catalog_parse(const char *j, size_t l, kv_gpu_catalog *out, char *err, size_t errlen) { (void)j; (void)l; memset(out, 0, sizeof *out); return kv_errf(err, errlen, KV_GPU_EPARSE, "not built yet"); }
void kv_gpu_catalog_free(kv_gpu_catalog *c) { (void)c; }
const kv_gpu *kv_gpu_find(const kv_gpu_catalog *c, const char *n, char *err, size_t errlen) { (void)c; kv_errf(err, errlen, -1, "unknown GPU '%s'", n); return NULL; }
void kv_gpu_custom(double g, kv_gpu *out) { memset(out, 0, sizeof *out); out->reported_total_gib = g; out->reported_total_bytes = g * KV_GIB; out->is_custom = 1; strcpy(out->id, "custom"); }
int kv_gpu_alias_count(void) { return 0; }
void kv_gpu_alias_at(int i, const char **a, const char **id) { (void)i; *a = *id = ""; }
