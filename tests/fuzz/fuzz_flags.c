/* libFuzzer target: `vllm serve` flag parsing. The input is split on
 * newlines into argv; the parsed args then drive kv_args_get for every flag
 * and the memory plan on a Llama-3.1-8B shape. Must never crash. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kv_args.h"
#include "kv_gpu.h"
#include "kv_model.h"
#include "kv_plan.h"

static const char llama8b[] =
    "{\"model_type\":\"llama\",\"num_hidden_layers\":32,\"hidden_size\":4096,\"num_attention_heads\":32,"
    "\"num_key_value_heads\":8,\"intermediate_size\":14336,\"vocab_size\":128256,"
    "\"max_position_embeddings\":131072,\"tie_word_embeddings\":false,\"torch_dtype\":\"bfloat16\"}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static kv_model m;
    static int loaded;
    static kv_plan p;
    char err[512], notes[1024];
    if (!loaded) {
        if (kv_model_parse(llama8b, sizeof llama8b - 1, "llama8b", &m, err, sizeof err))
            __builtin_trap();
        loaded = 1;
    }
    if (size > 4096)
        return 0;
    char *buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *argv[64];
    int argc = 0;
    for (char *s = buf; argc < 64;) {
        argv[argc++] = s;
        char *nl = memchr(s, '\n', (size_t)(buf + size - s));
        if (!nl)
            break;
        *nl = '\0';
        s = nl + 1;
    }
    kv_args a;
    kv_args_init(&a);
    int rc = kv_args_parse(&a, argc, argv, notes, sizeof notes, err, sizeof err);
    if (rc == KV_ARGS_OK) {
        char v[128];
        for (int i = 0; i < kv_args_flag_count(); i++)
            kv_args_get(&a, kv_args_flag_at(i)->name, v, sizeof v);
        kv_gpu g;
        kv_gpu_custom(a.gpu_memory_gib > 0 ? a.gpu_memory_gib : 80.0, &g);
        if (kv_plan_compute(&m, &g, &a, &p, err, sizeof err) == KV_PLAN_OK) {
            char *s = kv_plan_json_string(&p);
            free(s);
        }
    }
    /* the single-flag setter on the first two pieces */
    if (argc >= 2) {
        kv_args_init(&a);
        kv_args_set(&a, argv[0], argv[1], err, sizeof err);
    }
    free(buf);
    return 0;
}
