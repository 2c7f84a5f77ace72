/* kv_plan_lora: the GPU memory vLLM's LoRA slots take (kv_plan.h,
 * kv_plan_lora_bytes). */
#include "kv_plan.h"

#include <stdio.h>

/* vLLM 0.33 vllm/lora/layers/: every LoRA-wrapped module holds, per slot,
 * an A and a B matrix of max_lora_rank (create_lora_weights):
 *   column-parallel (qkv_proj: 3 slices, gate_up_proj: 2): A [r, input] per
 *     slice, B [output_per_partition, r] per slice;
 *   row-parallel (o_proj, down_proj): A [r, input_per_partition], B [output, r];
 *   embed_tokens (vocab_parallel_embedding.py): A [vocab, r], B [hidden, r];
 *   lm_head (logits_processor.py): A [r, hidden], B [vocab, r] (not sharded);
 * each stacked over max_loras slots (LoRAModelManager.lora_slots), in the
 * LoRA dtype (auto: the model's). The punica wrapper's index tensors
 * (punica_wrapper/punica_gpu.py, a few int64 per batched token) are under
 * a MiB and left out. */
double kv_plan_lora_bytes(const kv_model *m, const kv_args *a, int tp, int dtype_bytes, char *how, size_t howlen)
{
    if (!a->enable_lora)
        return 0;
    if (tp < 1)
        tp = 1;
    double L = a->max_loras > 0 ? (double)a->max_loras : 1.0;
    double r = a->max_lora_rank > 0 ? (double)a->max_lora_rank : 16.0;
    double H = m->hidden_size, V = m->vocab_size;
    double hd = m->head_dim > 0 ? m->head_dim : (m->num_attention_heads ? (double)m->hidden_size / m->num_attention_heads : 0);
    double q = (double)m->num_attention_heads * hd / tp;
    int kvh = m->num_key_value_heads / tp;
    double kv = (kvh > 0 ? kvh : 1) * hd;
    double I = (double)(m->num_experts > 0 ? 0 : m->intermediate_size) / tp;
    double per_layer = 3 * r * H + r * (q + 2 * kv)   /* qkv_proj */
                       + r * q + H * r                /* o_proj */
                       + (I > 0 ? 2 * r * H + r * 2 * I + r * I + H * r : 0); /* gate_up_proj, down_proj */
    double total = L * (per_layer * m->num_hidden_layers + V * r + H * r /* embed_tokens */ +
                        r * H + V * r /* lm_head */) * dtype_bytes;
    if (how && howlen)
        snprintf(how, howlen, "LoRA slots (max_loras %d x rank %d%s)", (int)L, (int)r,
                 m->num_experts > 0 ? "; the routed experts' LoRA not counted" : "");
    return total;
}
