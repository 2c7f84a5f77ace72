/* plan_inputs: what every planning command reads before it plans: the
 * `vllm serve` line, the model it names (config.json with --hf-overrides)
 * and the GPU catalogue. kvlab serve, serve --vs, simulate and fit start
 * here; explain (explain_plan.c) loads through kvlab_inputs_load after it
 * has turned the log into flags. */
#ifndef KVLAB_PLAN_INPUTS_H
#define KVLAB_PLAN_INPUTS_H

#include <stddef.h>

#include "kv_args.h"
#include "kv_gpu.h"
#include "kv_model.h"

/* Which step failed. */
typedef enum kvlab_inputs_step {
    KVLAB_INPUTS_OK = 0,
    KVLAB_INPUTS_ARGS,     /* the line: kvlab_vllm_args_parse refused it */
    KVLAB_INPUTS_NO_MODEL, /* no MODEL on the line */
    KVLAB_INPUTS_MODEL,    /* kv_model_load_overrides: unknown id, bad config.json or --hf-overrides */
    KVLAB_INPUTS_CATALOG,  /* kv_gpu_catalog_load: assets/gpus.json */
} kvlab_inputs_step;

/* The model a->model names (an id of the catalogue in assets, or a folder
 * or config.json), with a->hf_overrides applied, into *m; then, when cat is
 * not NULL, the GPU catalogue assets/gpus.json into *cat (the caller frees
 * it with kv_gpu_catalog_free; nothing to free on failure).
 * Returns KVLAB_INPUTS_OK, or the step that failed with one line in err
 * (KVLAB_INPUTS_NO_MODEL: err names nothing, the caller says what to type). */
kvlab_inputs_step kvlab_inputs_load(const kv_args *a, const char *assets, kv_model *m, kv_gpu_catalog *cat,
                                    char *err, size_t errlen);

/* The one-shot commands' start: kvlab_vllm_args_parse (vllm_config.h) of
 * argv[0..argc) into *a (kv_args_init'ed, maybe with flags set already;
 * notes as that function's), then kvlab_inputs_load from
 * kvlab_assets_dir(). On failure prints one line to stderr, "kvlab CMD:
 * <what>", for no model "kvlab CMD: no MODEL given (USAGE; see kvlab
 * models)", and returns 2 (bad input); 0 when *a and *m (and *cat when not
 * NULL) hold the inputs. */
int kvlab_inputs_cli(const char *cmd, const char *usage, kv_args *a, int argc, char **argv, char *notes,
                     size_t noteslen, kv_model *m, kv_gpu_catalog *cat);

#endif
