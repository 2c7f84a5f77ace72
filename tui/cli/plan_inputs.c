/* plan_inputs: the line, the model and the catalogue a plan starts from
 * (plan_inputs.h). */
#include "plan_inputs.h"

#include <stdio.h>

#include "paths.h"
#include "vllm_config.h"

kvlab_inputs_step kvlab_inputs_load(const kv_args *a, const char *assets, kv_model *m, kv_gpu_catalog *cat,
                                    char *err, size_t errlen)
{
    if (!a->model[0]) {
        if (errlen)
            err[0] = '\0';
        return KVLAB_INPUTS_NO_MODEL;
    }
    if (kv_model_load_overrides(a->model, assets, a->hf_overrides, m, err, errlen) != KV_MODEL_OK)
        return KVLAB_INPUTS_MODEL;
    if (a->disable_sliding_window)
        kv_model_disable_sliding_window(m);
    if (cat && kv_gpu_catalog_load(assets, cat, err, errlen) != KV_GPU_OK)
        return KVLAB_INPUTS_CATALOG;
    return KVLAB_INPUTS_OK;
}

int kvlab_inputs_cli(const char *cmd, const char *usage, kv_args *a, int argc, char **argv, char *notes,
                     size_t noteslen, kv_model *m, kv_gpu_catalog *cat)
{
    char err[1024];
    if (kvlab_vllm_args_parse(a, argc, argv, notes, noteslen, err, sizeof err) < 0) {
        fprintf(stderr, "kvlab %s: %s\n", cmd, err);
        return 2;
    }
    switch (kvlab_inputs_load(a, kvlab_assets_dir(), m, cat, err, sizeof err)) {
    case KVLAB_INPUTS_OK:
        return 0;
    case KVLAB_INPUTS_NO_MODEL:
        fprintf(stderr, "kvlab %s: no MODEL given (%s; see kvlab models)\n", cmd, usage);
        return 2;
    default:
        fprintf(stderr, "kvlab %s: %s\n", cmd, err);
        return 2;
    }
}
