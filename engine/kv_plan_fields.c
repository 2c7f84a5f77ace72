/* kv_plan_fields: the table of the plan's scalar fields (kv_plan_fields.h). */
#include "kv_plan_fields.h"
#include "kv_util.h"

#include <math.h>
#include <string.h>

static void v_bool(kv_plan_value *v, int b) { v->kind = KV_PLAN_VALUE_BOOL; v->b = b != 0; }
static void v_int(kv_plan_value *v, int64_t i) { v->kind = KV_PLAN_VALUE_INT; v->i = i; }
static void v_num(kv_plan_value *v, double d) { v->kind = KV_PLAN_VALUE_NUM; v->d = d; }
static void v_str(kv_plan_value *v, const char *s) { v->kind = KV_PLAN_VALUE_STR; v->s = s ? s : ""; }

/* One getter per field, generated: G_NUM(name, expr) reads a double, etc. */
#define G_BOOL(n, e) static void get_##n(const kv_plan *p, kv_plan_value *v) { v_bool(v, (e)); }
#define G_INT(n, e) static void get_##n(const kv_plan *p, kv_plan_value *v) { v_int(v, (int64_t)(e)); }
#define G_NUM(n, e) static void get_##n(const kv_plan *p, kv_plan_value *v) { v_num(v, (double)(e)); }
#define G_STR(n, e) static void get_##n(const kv_plan *p, kv_plan_value *v) { v_str(v, (e)); }
/* Bytes are whole numbers (rounded to the nearest byte); GiB are rounded by
 * kv_plan_field_get to the field's precision. */
#define G_BYTES(t, e) G_NUM(t##_gib, (e) / KV_GIB) G_INT(t##_bytes, llround((double)(e)))

G_BOOL(starts, p->starts)
G_STR(accounting, p->accounting == KV_ACCOUNTING_TEXTBOOK ? "textbook" : "release")
static void get_vllm_version(const kv_plan *p, kv_plan_value *v)
{
    if (p->accounting == KV_ACCOUNTING_TEXTBOOK)
        v->kind = KV_PLAN_VALUE_NULL;
    else
        v_str(v, p->vllm_version);
}
static void get_release_rules(const kv_plan *p, kv_plan_value *v)
{
    static char buf[64];
    v_str(v, kv_release_label(p->release, buf, sizeof buf));
}
G_STR(engine, p->engine_v1 ? "V1" : "V0")
G_STR(model_runner, !p->engine_v1 ? "V0" : p->model_runner_v2 ? "V2" : "V1")
static void get_error(const kv_plan *p, kv_plan_value *v)
{
    if (p->starts)
        v->kind = KV_PLAN_VALUE_NULL;
    else
        v_str(v, p->error);
}
G_STR(error_kind, kv_plan_error_name(p->error_kind))
G_STR(gpu, p->gpu_id)
G_STR(gpu_name, p->gpu_name)
G_STR(device_name, p->device_name)
G_BYTES(gpu_total, p->gpu_total_bytes)
G_BYTES(gpu_used, p->gpu_used_bytes)
G_BYTES(free_at_start, p->free_at_start_bytes)
G_NUM(gpu_memory_utilization, p->gpu_memory_utilization)
G_BYTES(budget, p->budget_bytes)
G_BYTES(weights, p->weights_bytes)
G_BYTES(cpu_offload, p->cpu_offload_bytes)
G_BYTES(activation, p->activation_bytes)
G_BYTES(forward, p->forward_bytes)
G_BYTES(sampler, p->sampler_bytes)
G_BYTES(cudagraph, p->cudagraph_bytes)
G_BYTES(cuda_context, p->cuda_context_bytes)
G_BYTES(nccl, p->nccl_bytes)
G_BYTES(non_torch, p->non_torch_bytes)
G_BYTES(kv_cache, p->available_kv_bytes)
G_BYTES(kv_pool, p->kv_pool_bytes)
G_BYTES(needed, (double)p->needed_bytes)
G_INT(kv_bytes_per_token, p->kv_bytes_per_token)
G_INT(block_size, p->block_size)
G_INT(page_size_bytes, p->page_size_bytes)
G_INT(num_layers, p->num_layers)
G_INT(head_size, p->head_size)
G_INT(kv_heads_per_gpu, p->kv_heads_per_gpu)
G_INT(kv_factor, p->kv_factor)
G_INT(kv_dtype_bytes, p->kv_dtype_bytes)
G_STR(kv_cache_dtype, p->kv_cache_dtype)
G_STR(weights_dtype, p->weights_dtype)
G_INT(num_blocks, p->num_blocks)
G_INT(kv_cache_tokens, p->kv_cache_tokens_logged)
G_INT(kv_cache_tokens_per_group, p->kv_cache_tokens)
G_INT(num_kv_cache_groups, p->num_kv_groups)
G_INT(kv_cache_group_layers, p->group_size)
G_INT(max_model_len, p->max_model_len)
G_INT(model_max_model_len, p->model_max_model_len)
G_BOOL(max_model_len_default, p->max_model_len_default)
G_NUM(max_concurrency, p->max_concurrency)
static void get_estimated_max_model_len(const kv_plan *p, kv_plan_value *v)
{
    if (p->error_kind == KV_PLAN_ERR_MAX_MODEL_LEN)
        v_int(v, p->estimated_max_model_len);
    else
        v->kind = KV_PLAN_VALUE_NULL;
}
G_INT(blocks_per_request, p->blocks_per_request)
G_INT(max_num_batched_tokens, p->max_num_batched_tokens)
G_INT(max_num_seqs, p->max_num_seqs)
G_INT(tensor_parallel_size, p->tensor_parallel_size)
G_BOOL(enforce_eager, p->enforce_eager)
G_BOOL(enable_prefix_caching, p->enable_prefix_caching)
G_BOOL(chunked_prefill, p->chunked_prefill)
G_BOOL(flashinfer_sampler, p->flashinfer_sampler)
G_STR(compile_cache, p->compile_cache_warm ? "warm" : "cold")
G_BYTES(compile_cold, p->compile_cold_bytes)
G_BYTES(compile_cold_non_torch, p->compile_cold_non_torch_bytes)
static void get_other_compile_cache_starts(const kv_plan *p, kv_plan_value *v)
{
    if (p->other_valid)
        v_bool(v, p->other_starts);
    else
        v->kind = KV_PLAN_VALUE_NULL;
}
static void get_other_compile_cache_kv_cache_gib(const kv_plan *p, kv_plan_value *v)
{
    if (p->other_valid)
        v_num(v, p->other_available_kv_bytes / KV_GIB);
    else
        v->kind = KV_PLAN_VALUE_NULL;
}
static void get_other_compile_cache_kv_cache_bytes(const kv_plan *p, kv_plan_value *v)
{
    if (p->other_valid) /* bytes are whole numbers (docs/json-schema.md) */
        v_int(v, llround(p->other_available_kv_bytes));
    else
        v->kind = KV_PLAN_VALUE_NULL;
}
static void get_other_compile_cache_kv_cache_tokens(const kv_plan *p, kv_plan_value *v)
{
    if (p->other_valid && p->other_starts)
        v_int(v, p->other_kv_cache_tokens);
    else
        v->kind = KV_PLAN_VALUE_NULL;
}

#define F(n, unit, prec, help) {#n, unit, prec, get_##n, help}
#define FB(t, help) F(t##_gib, "GiB", 4, help), F(t##_bytes, "bytes", -1, help)

static const kv_plan_field FIELDS[] = {
    F(starts, "", -1, "vLLM would start"),
    F(accounting, "", -1, "release (a vLLM release's rules) or textbook (the course's arithmetic)"),
    F(vllm_version, "", -1, "the release whose rules apply (null under textbook)"),
    F(release_rules, "", -1, "the row of the release table used"),
    F(engine, "", -1, "V0 or V1"),
    F(model_runner, "", -1, "V0, V1 or V2 (model runner V2)"),
    F(error, "", -1, "vLLM's error text (null when it starts)"),
    F(error_kind, "", -1, "why it would not start (\"\" when it starts)"),
    F(gpu, "", -1, "catalogue id of the card"),
    F(gpu_name, "", -1, "the card's long name (the catalogue's description)"),
    F(device_name, "", -1, "the card's name as torch.cuda.get_device_name() returns it and vLLM logs it"),
    FB(gpu_total, "the card's reported total"),
    FB(gpu_used, "memory other processes hold at start-up"),
    FB(free_at_start, "free memory the start-up check sees"),
    F(gpu_memory_utilization, "", -1, "fraction of the total vLLM may use"),
    FB(budget, "total x gpu_memory_utilization"),
    FB(weights, "weights per GPU"),
    FB(cpu_offload, "weights per GPU kept in CPU memory (--cpu-offload-gb)"),
    FB(activation, "the profile run's activation peak"),
    FB(forward, "its forward-pass part"),
    FB(sampler, "its dummy-sampler part (V1)"),
    FB(cudagraph, "CUDA graphs"),
    FB(cuda_context, "CUDA context"),
    FB(nccl, "NCCL and all-reduce buffers (tp > 1)"),
    FB(non_torch, "non-torch memory the profile adds (release accounting)"),
    FB(kv_cache, "available KV cache memory (may be negative)"),
    FB(kv_pool, "what the pool's blocks take"),
    FB(needed, "KV memory one max_model_len request needs"),
    F(kv_bytes_per_token, "bytes", -1, "KV bytes per token on one GPU"),
    F(block_size, "tokens", -1, "tokens per block"),
    F(page_size_bytes, "bytes", -1, "one block of one layer"),
    F(num_layers, "layers", -1, "layers holding KV"),
    F(head_size, "values", -1, "head size (MLA: latent + rope)"),
    F(kv_heads_per_gpu, "heads", -1, "KV heads on one GPU"),
    F(kv_factor, "", -1, "2 (K and V), 1 for MLA"),
    F(kv_dtype_bytes, "bytes", -1, "bytes per KV value"),
    F(kv_cache_dtype, "", -1, "KV cache element type"),
    F(weights_dtype, "", -1, "weight format"),
    F(num_blocks, "blocks", -1, "blocks in the pool (block 0 is the null block)"),
    F(kv_cache_tokens, "tokens", -1, "vLLM's \"GPU KV cache size: N tokens\" line (from 0.21 max_concurrency x max_model_len)"),
    F(kv_cache_tokens_per_group, "tokens", -1, "num_blocks // KV cache groups x block_size: the tokens each group's blocks hold"),
    F(num_kv_cache_groups, "groups", -1, "KV cache groups sharing the pool (1 unless full and sliding-window layers mix)"),
    F(kv_cache_group_layers, "layers", -1, "layers in one KV cache group"),
    F(max_model_len, "tokens", -1, "the length the check used"),
    F(model_max_model_len, "tokens", -1, "the model's own maximum"),
    F(max_model_len_default, "", -1, "no --max-model-len: the model's maximum"),
    F(max_concurrency, "", 2, "max_model_len requests that fit at once"),
    F(estimated_max_model_len, "tokens", -1, "longest length that fits (null unless the length check failed)"),
    F(blocks_per_request, "blocks", -1, "blocks one max_model_len request takes"),
    F(max_num_batched_tokens, "tokens", -1, "tokens per step (and the profile run's)"),
    F(max_num_seqs, "", -1, "requests per step"),
    F(tensor_parallel_size, "", -1, "GPUs the model is split across"),
    F(enforce_eager, "", -1, "no CUDA graphs"),
    F(enable_prefix_caching, "", -1, "prefix caching on"),
    F(chunked_prefill, "", -1, "chunked prefill on"),
    F(flashinfer_sampler, "", -1, "the profile's sampler is FlashInfer's"),
    F(compile_cache, "", -1, "cold (first start: torch.compile runs in the profile) or warm (--compile-cache)"),
    FB(compile_cold, "what a cold compile adds to the activation peak's forward part (0 when warm)"),
    FB(compile_cold_non_torch, "what a cold compile leaves as non-torch memory (0.27 on; 0 when warm)"),
    F(other_compile_cache_starts, "", -1, "starts under the other compile-cache state (null: no difference)"),
    F(other_compile_cache_kv_cache_gib, "GiB", 4, "available KV memory under the other compile-cache state"),
    F(other_compile_cache_kv_cache_bytes, "bytes", -1, "the same in bytes"),
    F(other_compile_cache_kv_cache_tokens, "tokens", -1, "the pool in tokens under the other state (null unless it starts)"),
};
#define NUM_FIELDS ((int)(sizeof FIELDS / sizeof FIELDS[0]))

int kv_plan_field_count(void) { return NUM_FIELDS; }

const kv_plan_field *kv_plan_field_at(int i) { return i >= 0 && i < NUM_FIELDS ? &FIELDS[i] : NULL; }

const kv_plan_field *kv_plan_field_find(const char *name)
{
    for (int i = 0; name && i < NUM_FIELDS; i++)
        if (!strcmp(FIELDS[i].name, name))
            return &FIELDS[i];
    return NULL;
}

kv_plan_value kv_plan_field_get(const kv_plan_field *f, const kv_plan *p)
{
    kv_plan_value v;
    memset(&v, 0, sizeof v);
    if (!f || !p)
        return v;
    f->get(p, &v);
    if (v.kind == KV_PLAN_VALUE_NUM && f->precision >= 0) {
        double s = pow(10.0, f->precision);
        v.d = round(v.d * s) / s;
    }
    return v;
}
