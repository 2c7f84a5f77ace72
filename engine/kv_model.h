/* kv_model: a model's shape, read from a Hugging Face config.json (cJSON),
 * and the parameter counts derived from that shape.
 *
 * Field names follow the HF config (num_hidden_layers, hidden_size, ...).
 * Nested text_config (Gemma 3 and other multimodal wrappers) is read for the
 * language model; MoE (num_local_experts / num_experts / n_routed_experts,
 * moe_intermediate_size, shared experts), MLA (kv_lora_rank,
 * qk_rope_head_dim), sliding window (sliding_window + layer_types, Gemma's
 * interleave pattern, Qwen's use_sliding_window) and quantization_config are
 * understood. Geometry rules mirror vllm/config/model.py (get_head_size,
 * get_total_num_kv_heads, _get_and_verify_max_len). */
#ifndef KV_MODEL_H
#define KV_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "kv_safetensors.h"

#define KV_MODEL_MAX_LAYERS 512

/* Error codes returned by kv_model_* (0 = success). */
enum {
    KV_MODEL_OK = 0,
    KV_MODEL_ENOTFOUND = -1, /* no catalogue id, file, folder or HF cache entry by that name */
    KV_MODEL_EPARSE = -2,    /* the file is not JSON */
    KV_MODEL_EFIELD = -3,    /* a required field is missing or has a bad value (message names file + field) */
};

/* How a checkpoint's own weights are stored (quantization_config.quant_method). */
typedef enum kv_quant {
    KV_QUANT_NONE = 0,        /* 16/32-bit weights as torch_dtype says */
    KV_QUANT_FP8,             /* 1 byte per linear weight (+ per-block/per-channel scales) */
    KV_QUANT_AWQ,             /* 4-bit + fp16 scale + 4-bit zero per group (128) */
    KV_QUANT_GPTQ,            /* bits-bit + fp16 scale + packed zero per group + int32 g_idx per input row */
    KV_QUANT_COMPRESSED_TENSORS, /* sized from config_groups (num_bits, group_size) */
    KV_QUANT_MXFP4,           /* 4-bit + one 8-bit scale per 32 weights (gpt-oss experts) */
    KV_QUANT_BITSANDBYTES,    /* nf4: 4-bit + fp32 absmax per 64; int8: 1 byte + fp32 per row */
    KV_QUANT_NVFP4,           /* 4-bit e2m1 + one fp8 scale per 16 weights (ModelOpt NVFP4, compressed-tensors
                                 nvfp4): 4.5 bits per linear weight */
    KV_QUANT_UNKNOWN,         /* a quant_method kvlab cannot size (said, not guessed) */
} kv_quant;

typedef struct kv_model {
    char id[256];             /* catalogue id ("meta-llama/Llama-3.1-8B-Instruct") or the name given */
    char path[1024];          /* the config.json that was read */
    char model_type[64];      /* HF model_type (of text_config when nested) */
    char architecture[96];    /* architectures[0], "" if absent */

    /* Attention geometry. */
    int32_t num_hidden_layers;
    int32_t hidden_size;
    int32_t num_attention_heads;
    int32_t num_key_value_heads; /* total KV heads (MHA: = attention heads); MLA: as in config */
    int32_t head_dim;            /* head_dim if given, else hidden_size / num_attention_heads */
    int32_t intermediate_size;   /* dense MLP width */
    int32_t vocab_size;
    int32_t tie_word_embeddings; /* 1: lm_head shares the embedding table (HF default when absent) */
    int32_t attention_bias;      /* q/k/v (and o for gpt-oss) carry biases; Qwen2 always has qkv bias */
    int64_t max_position_embeddings; /* vLLM's derived max_model_len (rope scaling applied as vLLM does) */
    char max_len_key[32];        /* the config key it comes from ("max_position_embeddings", "sliding_window") */
    char torch_dtype[16];        /* "bfloat16", "float16", "float32" ("bfloat16" when absent) */
    int32_t dtype_bytes;         /* bytes per value of torch_dtype (2 or 4) */

    /* Mixture of experts (num_experts == 0: dense). */
    int32_t num_experts;          /* routed experts per MoE layer */
    int32_t num_experts_per_tok;  /* experts active per token */
    int32_t moe_intermediate_size; /* width of one routed expert (Mixtral: intermediate_size) */
    int32_t num_shared_experts;   /* DeepSeek n_shared_experts (each moe_intermediate_size wide) */
    int32_t shared_expert_intermediate_size; /* Qwen2-MoE style single shared expert width, 0 if none */
    int32_t first_k_dense_replace; /* leading layers that stay dense (DeepSeek) */
    int32_t num_moe_layers;       /* layers with routed experts */
    int32_t num_nextn_predict_layers; /* DeepSeek MTP layers: in the checkpoint, not loaded by vLLM */

    /* Multi-head latent attention (kv_lora_rank > 0). */
    int32_t is_mla;
    int32_t kv_lora_rank;
    int32_t qk_rope_head_dim;
    int32_t qk_nope_head_dim;
    int32_t v_head_dim;
    int32_t q_lora_rank;          /* 0 when null */

    /* Sliding-window attention. */
    int32_t sliding_window;       /* window in tokens, 0 if no layer slides */
    int32_t num_sliding_layers;   /* how many layers use the window */
    uint8_t layer_is_sliding[KV_MODEL_MAX_LAYERS];

    /* The checkpoint's own quantization_config (no flag needed). */
    kv_quant quant;
    char quant_method[32];        /* as written in the config ("modelopt" / "modelopt_fp4" when read from
                                     hf_quant_config.json), "" if none */
    int64_t quant_unconverted_params; /* linear weights the format leaves 16-bit (fbgemm_fp8
                                         modules_to_not_convert, ModelOpt exclude_modules): sized at the dtype */
    int32_t quant_bits;           /* weight bits (awq/gptq/compressed-tensors), 8 for fp8 */
    int32_t quant_group_size;     /* weights per scale group; 0 = per channel / per tensor */
    int32_t quant_block[2];       /* fp8 weight_block_size, {0,0} if none */
    int32_t quant_double;         /* bitsandbytes bnb_4bit_use_double_quant: the absmax quantized too */
    int32_t has_quantize_config;  /* the folder beside config.json holds quantize_config.json or
                                     quant_config.json (AutoAWQ / AutoGPTQ checkpoints; kv_model_load only) */

    /* Parameter counts derived from the shape (not typed in). All in parameters. */
    int64_t params_linear;        /* weights of linear layers in the loaded model (every expert counted) */
    int64_t params_embedding;     /* embed_tokens + lm_head (lm_head only if untied) */
    int64_t params_other;         /* norms, biases, router biases, attention sinks */
    int64_t params_total;         /* linear + embedding + other: what vLLM loads */
    int64_t params_checkpoint;    /* params_total plus MTP layers: the figure a safetensors tally shows */
    int64_t params_active;        /* per-token active: only num_experts_per_tok routed experts counted */
    int64_t params_expert_linear; /* the routed experts' share of params_linear (mxfp4 applies here) */
    int64_t params_vision;        /* multimodal: the vision tower up to vision_feature_layer plus the projector
                                     (kept 16-bit; not in params_total, which counts the language model) */
    /* The vision encoder's shape, for the encoder-cache profile run (kv_plan
     * mm_encoder_*): set for the towers kvlab models (kv_model.c
     * MM_TOWERS: Qwen2.5-VL), else vision_depth 0. Widths in elements. */
    int32_t vision_depth, vision_hidden, vision_intermediate, vision_heads;
    int32_t vision_patch, vision_temporal_patch, vision_merge, vision_in_chans, vision_out_hidden;
    int64_t vision_max_pixels;    /* the image processor's longest_edge (max_pixels) */
    int32_t vision_max_frames;    /* frames of the longest dummy video (qwen2_vl.py _MAX_FRAMES_PER_VIDEO) */
    /* The checkpoint's safetensors beside config.json, from their headers
     * (kv_safetensors.h): disk.shards 0 when there are none. disk_error: why
     * they could not be read ("" if they could or there are none). */
    kv_st_summary disk;
    char disk_error[192];
} kv_model;

/* Load a model by name, offline. name_or_path may be:
 *   - a catalogue id: <assets_dir>/models/<org>/<name>/config.json
 *   - a path to a config.json, or a folder holding one
 *   - an HF id present in the local Hugging Face cache:
 *     $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub,
 *     models--ORG--NAME/snapshots/<any>/config.json
 * Fills *out (zeroed first) and returns KV_MODEL_OK, or a negative code with
 * one line in err naming the file and field at fault. Not found: a path
 * (leading / . ~, a .json name, or 2+ slashes) gives "no such file or folder:
 * PATH"; an id gives "unknown model" with up to 3 near catalogue ids (a
 * catalogue id holding the typed name, else a small edit distance). */
int kv_model_load(const char *name_or_path, const char *assets_dir, kv_model *out,
                  char *err, size_t errlen);

/* vLLM's --disable-sliding-window (config/model.py _get_and_verify_max_len,
 * every release): the derived max_model_len is capped at the window (its
 * key then "sliding_window") and the config's sliding_window is cleared, so
 * every layer attends to the whole context. Nothing for a model without
 * one. */
void kv_model_disable_sliding_window(kv_model *m);

/* kv_model_load with vLLM's --hf-overrides applied to the config before it
 * is read (overrides: a JSON object, NULL or "" for none; each key replaces
 * the config's, an object is merged into a sub-config such as text_config,
 * as vllm/config/model.py applies hf_overrides). A non-object gives
 * KV_MODEL_EPARSE with one line. */
int kv_model_load_overrides(const char *name_or_path, const char *assets_dir, const char *overrides, kv_model *out,
                            char *err, size_t errlen);

/* Parse config.json text already in memory (len bytes, need not be
 * NUL-terminated). `path` is only used in messages. Same codes as above. */
int kv_model_parse(const char *json, size_t len, const char *path, kv_model *out,
                   char *err, size_t errlen);

/* Attention-layer kind for a human ("MHA", "GQA", "MQA", "MLA"). */
const char *kv_model_attention_kind(const kv_model *m);

/* The catalogue's model ids (org/name), sorted. *ids is malloc'd (free with
 * kv_model_catalog_free). Returns the count, or a negative code + err. */
int kv_model_catalog_list(const char *assets_dir, char ***ids, char *err, size_t errlen);
void kv_model_catalog_free(char **ids, int count);

#endif
