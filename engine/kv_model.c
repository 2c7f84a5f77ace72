#include "kv_model.h"
#include "kv_util.h"
#include <string.h>
int kv_model_parse(const char *json, size_t len, const char *path, kv_model *out, char *err, size_t errlen)
{ (void)json; (void)len; memset(out, 0, sizeof *out); return kv_errf(err, errlen, KV_MODEL_EPARSE, "%s: loader not built yet", path ? path : "?"); }
int kv_model_load(const char *n, const char *a, kv_model *out, char *err, size_t errlen)
{ (void)a; memset(out, 0, sizeof *out); return kv_errf(err, errlen, KV_MODEL_ENOTFOUND, "%s: loader not built yet", n); }
const char *kv_model_attention_kind(const kv_model *m) { (void)m; return "?"; }
int kv_model_catalog_list(const char *a, char ***ids, char *err, size_t errlen) { (void)a; *ids = NULL; return kv_errf(err, errlen, KV_MODEL_ENOTFOUND, "not built yet"); }
void kv_model_catalog_free(char **ids, int count) { (void)ids; (void)count; }
