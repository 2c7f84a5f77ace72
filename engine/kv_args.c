#include "kv_args.h"
#include "kv_util.h"
#include <string.h>
void kv_args_init(kv_args *a) { memset(a, 0, sizeof *a); a->gpu_memory_utilization = 0.92; a->block_size = 16; a->tensor_parallel_size = 1; a->pipeline_parallel_size = 1; a->enable_prefix_caching = 1; a->enable_chunked_prefill = 1;
  a->gpu_memory_gib = a->weights_gib = a->activation_gib = a->cudagraph_gib = a->cuda_context_gib = a->nccl_gib = -1; }
int kv_args_set(kv_args *a, const char *n, const char *v, char *err, size_t errlen) { (void)a; (void)v; return kv_errf(err, errlen, KV_ARGS_EUNKNOWN, "unknown flag --%s", n); }
int kv_args_get(const kv_args *a, const char *n, char *b, size_t l) { (void)a; (void)n; if (l) b[0] = 0; return KV_ARGS_EUNKNOWN; }
int kv_args_parse(kv_args *a, int c, char **v, char *notes, size_t nl, char *err, size_t el) { (void)a; (void)c; (void)v; (void)notes; (void)nl; return kv_errf(err, el, KV_ARGS_EUNKNOWN, "not built yet"); }
int kv_args_is_set(const kv_args *a, const char *n) { (void)a; (void)n; return 0; }
int kv_args_flag_count(void) { return 0; }
const kv_args_flag *kv_args_flag_at(int i) { (void)i; return NULL; }
const kv_args_flag *kv_args_flag_find(const char *n) { (void)n; return NULL; }
int kv_args_parse_int(const char *s, int64_t *o, char *err, size_t el) { (void)s; *o = 0; return kv_errf(err, el, KV_ARGS_EVALUE, "not built yet"); }
const char *kv_args_quant_name(kv_args_quant q) { (void)q; return ""; }
const char *kv_args_kv_dtype_name(kv_args_kv_dtype d) { (void)d; return ""; }
const char *kv_args_dtype_name(kv_args_dtype d) { (void)d; return ""; }
