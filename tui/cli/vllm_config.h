/* vllm_config: vLLM's `--config FILE.yaml` for kvlab serve and simulate.
 *
 * vLLM reads the YAML file (FlexibleArgumentParser.load_config_file in
 * vllm/utils/argparse_utils.py, vllm/utils.py before 0.10) and turns each
 * key into command-line arguments that go after the subcommand and the
 * positional model and before the rest of the line, so the line wins over
 * the file: `key: value` -> --key value, `key: true` -> --key, `key: false`
 * -> --no-key (nothing when the flag has no --no- form), a list -> --key v1
 * v2 ..., a mapping -> --key '<the mapping as JSON>'. Only .yaml / .yml
 * files, as vLLM. Read with libyaml; the file through kv_read_file. */
#ifndef KVLAB_VLLM_CONFIG_H
#define KVLAB_VLLM_CONFIG_H

#include <stddef.h>

/* The expanded command line of argv[0..argc) (no program name): the flags of
 * the --config file put in vLLM's place and `--config FILE` taken out.
 * Returns the new argc (>= 0) with *out (caller frees with
 * kvlab_vllm_config_free), or -1 with one line in err (no file, not YAML, not
 * a mapping, more than one --config, a build without libyaml). Without
 * --config, *out is a copy of argv. */
int kvlab_vllm_config_expand(int argc, char **argv, char ***out, char *err, size_t errlen);

void kvlab_vllm_config_free(char **argv, int argc);

struct kv_args;
/* The VLLM_* variables of the environment that change memory or checks, as
 * vllm/envs.py reads them: VLLM_ALLOW_LONG_MAX_MODEL_LEN (1/true: a length
 * above the model's maximum is a warning) and VLLM_USE_FLASHINFER_SAMPLER
 * (int: the profile's sampler, unless --flashinfer-sampler is given). Adds a
 * note per variable used; 0, or KV_ARGS_EVALUE with err for a value vLLM
 * would crash on. */
int kvlab_vllm_env_apply(struct kv_args *a, char *notes, size_t noteslen, char *err, size_t errlen);

/* kv_args_parse (engine/kv_args.h) of the line with its --config file
 * expanded, then kvlab_vllm_env_apply: what kvlab serve, simulate and fit
 * parse a `vllm serve` line with. Returns kv_args_parse's code (KV_ARGS_EVALUE for a bad --config). */
int kvlab_vllm_args_parse(struct kv_args *a, int argc, char **argv, char *notes, size_t noteslen, char *err,
                          size_t errlen);

#endif
