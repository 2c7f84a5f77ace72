/* kvlab models / kvlab gpus: list the catalogue. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "kv_gpu.h"
#include "kv_model.h"
#include "kv_util.h"
#include "paths.h"

static int want_json(int argc, char **argv, const char *cmd)
{
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return 2;
        else {
            fprintf(stderr, "kvlab %s: unexpected argument '%s' (usage: kvlab %s [--json])\n", cmd, argv[i], cmd);
            return -1;
        }
    }
    return json;
}

static void model_features(const kv_model *m, char *b, size_t n)
{
    b[0] = '\0';
    size_t l = 0;
    if (m->num_experts)
        l += (size_t)snprintf(b + l, n - l, "MoE %d experts, %d active; ", m->num_experts, m->num_experts_per_tok);
    if (m->is_mla && l < n)
        l += (size_t)snprintf(b + l, n - l, "MLA latent %d+%d; ", m->kv_lora_rank, m->qk_rope_head_dim);
    if (m->num_sliding_layers && l < n)
        l += (size_t)snprintf(b + l, n - l, "%d/%d layers slide over %d; ", m->num_sliding_layers, m->num_hidden_layers,
                              m->sliding_window);
    if (m->quant != KV_QUANT_NONE && l < n)
        l += (size_t)snprintf(b + l, n - l, "%s checkpoint; ", m->quant_method);
    if (m->params_vision > 0 && l < n)
        l += (size_t)snprintf(b + l, n - l, "vision tower %.2fB; ", (double)m->params_vision / 1e9);
    if (l >= 2 && l < n)
        b[l - 2] = '\0';
}

/* KV bytes per token at tp 1 in the model's own dtype. */
static long long kv_per_token(const kv_model *m)
{
    if (m->is_mla)
        return (long long)m->num_hidden_layers * (m->kv_lora_rank + m->qk_rope_head_dim) * 2;
    return 2LL * m->num_hidden_layers * m->num_key_value_heads * m->head_dim * 2;
}

int cmd_models(int argc, char **argv)
{
    int json = want_json(argc, argv, "models");
    if (json < 0)
        return 2;
    if (json == 2) {
        printf("usage: kvlab models [--json]   the model catalogue (assets/models)\n");
        return 0;
    }
    const char *assets = kvlab_assets_dir();
    char err[1024];
    char **ids = NULL;
    int n = kv_model_catalog_list(assets, &ids, err, sizeof err);
    if (n < 0) {
        fprintf(stderr, "kvlab models: %s\n", err);
        return 2;
    }
    cJSON *arr = json ? cJSON_CreateArray() : NULL;
    if (!json)
        printf("%-46s %-4s %6s %5s %5s %7s %13s %9s  %s\n", "model", "attn", "layers", "kv_h", "head", "params",
               "KV B/token", "max_len", "notes");
    int bad = 0;
    for (int i = 0; i < n; i++) {
        kv_model m;
        if (kv_model_load(ids[i], assets, &m, err, sizeof err) != KV_MODEL_OK) {
            fprintf(stderr, "kvlab models: %s\n", err);
            bad = 1;
            continue;
        }
        char feat[256];
        model_features(&m, feat, sizeof feat);
        if (json) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "id", m.id);
            cJSON_AddStringToObject(o, "attention", kv_model_attention_kind(&m));
            cJSON_AddNumberToObject(o, "num_hidden_layers", m.num_hidden_layers);
            cJSON_AddNumberToObject(o, "num_key_value_heads", m.num_key_value_heads);
            cJSON_AddNumberToObject(o, "head_dim", m.head_dim);
            cJSON_AddNumberToObject(o, "params_total", (double)m.params_total);
            cJSON_AddNumberToObject(o, "params_active", (double)m.params_active);
            cJSON_AddNumberToObject(o, "kv_bytes_per_token_bf16", (double)kv_per_token(&m));
            cJSON_AddNumberToObject(o, "max_model_len", (double)m.max_position_embeddings);
            cJSON_AddStringToObject(o, "notes", feat);
            cJSON_AddItemToArray(arr, o);
        } else {
            printf("%-46s %-4s %6d %5d %5d %6.1fB %13lld %9lld%s%s\n", m.id, kv_model_attention_kind(&m),
                   m.num_hidden_layers, m.is_mla ? 1 : m.num_key_value_heads,
                   m.is_mla ? m.kv_lora_rank + m.qk_rope_head_dim : m.head_dim, (double)m.params_total / 1e9,
                   kv_per_token(&m), (long long)m.max_position_embeddings, feat[0] ? "  " : "", feat);
        }
    }
    kv_model_catalog_free(ids, n);
    if (json) {
        char *s = cJSON_Print(arr);
        if (s)
            printf("%s\n", s);
        free(s);
        cJSON_Delete(arr);
    } else {
        printf("\nKV B/token: bytes one token costs at tp 1 in 16-bit (MLA: one latent per layer).\n"
               "Use an id with kvlab serve, or pass a config.json / folder / Hugging Face cache id.\n");
    }
    return bad ? 2 : 0;
}

int cmd_gpus(int argc, char **argv)
{
    int json = want_json(argc, argv, "gpus");
    if (json < 0)
        return 2;
    if (json == 2) {
        printf("usage: kvlab gpus [--json]   the GPU catalogue (assets/gpus.json)\n");
        return 0;
    }
    char err[1024];
    kv_gpu_catalog cat;
    if (kv_gpu_catalog_load(kvlab_assets_dir(), &cat, err, sizeof err) != KV_GPU_OK) {
        fprintf(stderr, "kvlab gpus: %s\n", err);
        return 2;
    }
    cJSON *arr = json ? cJSON_CreateArray() : NULL;
    if (!json)
        printf("%-18s %9s  %-24s %s\n", "gpu", "GiB", "aliases", "name");
    for (int i = 0; i < cat.count; i++) {
        const kv_gpu *g = &cat.gpus[i];
        char al[128] = "";
        size_t l = 0;
        for (int a = 0; a < kv_gpu_alias_count(); a++) {
            const char *alias, *id;
            kv_gpu_alias_at(a, &alias, &id);
            if (!strcmp(id, g->id) && l < sizeof al)
                l += (size_t)snprintf(al + l, sizeof al - l, "%s%s", l ? "," : "", alias);
        }
        if (json) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "id", g->id);
            cJSON_AddStringToObject(o, "name", g->name);
            cJSON_AddNumberToObject(o, "reported_total_gib", g->reported_total_gib);
            cJSON_AddNumberToObject(o, "reported_total_bytes", g->reported_total_bytes);
            cJSON_AddStringToObject(o, "aliases", al);
            cJSON_AddItemToArray(arr, o);
        } else {
            printf("%-18s %9.2f  %-24s %s\n", g->id, g->reported_total_gib, al, g->name);
        }
    }
    kv_gpu_catalog_free(&cat);
    if (json) {
        char *s = cJSON_Print(arr);
        if (s)
            printf("%s\n", s);
        free(s);
        cJSON_Delete(arr);
    } else {
        printf("\nGiB: the total CUDA reports (what vLLM multiplies by gpu_memory_utilization).\n"
               "A card not listed: kvlab serve MODEL --gpu-memory-gib X.\n");
    }
    return 0;
}
