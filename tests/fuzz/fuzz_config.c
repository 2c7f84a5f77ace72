/* libFuzzer target: the config.json loader (kv_model_parse), then the memory
 * plan on whatever shape loaded, at tp 1 and 2. Must never crash, leak or
 * hit undefined behaviour; a bad config is a return code and a message. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kv_args.h"
#include "kv_gpu.h"
#include "kv_model.h"
#include "kv_plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static kv_model m;
    static kv_plan p;
    char err[512];
    int rc = kv_model_parse((const char *)data, size, "fuzz/config.json", &m, err, sizeof err);
    if (rc != KV_MODEL_OK) {
        if (!err[0] || !memchr(err, '\0', sizeof err))
            __builtin_trap(); /* every failure says why */
        return 0;
    }
    (void)kv_model_attention_kind(&m);
    kv_gpu g;
    kv_gpu_custom(80.0, &g);
    for (int tp = 1; tp <= 2; tp++) {
        kv_args a;
        kv_args_init(&a);
        a.tensor_parallel_size = tp;
        a.max_model_len = tp == 2 ? KV_MAX_MODEL_LEN_AUTO : 0;
        if (kv_plan_compute(&m, &g, &a, &p, err, sizeof err) == KV_PLAN_OK) {
            char *s = kv_plan_json_string(&p);
            __builtin_free(s);
        }
    }
    return 0;
}
