/* lsn_server: a lesson's "vllm serve": engine args, the model and card they
 * name, the start-up memory plan (kv_plan) and the running engine
 * (kv_engine). lab.start / lab.restart and the flags view go through here.
 *
 * Besides vLLM's flags (kv_args) it takes kvlab's teaching switches:
 * "kv-cache" on|off (off = KV_MODE_NO_CACHE: every token recomputes the whole
 * sequence), "contiguous" on|off (KV_MODE_CONTIGUOUS: a max_model_len slab
 * per request), "kv-heads" N (a what-if model with N KV heads and the same
 * weights) and "request-rate" R (stored for the lesson's traffic; no effect
 * on the server), plus the playground's "traffic-prompt" and
 * "traffic-output" (tokens per generated request), which also only hold
 * values for the lesson to read with lab.flag. */
#ifndef LSN_SERVER_H
#define LSN_SERVER_H

/* Tokens the app reads back per frame from a lesson engine on a GPU
 * (kv_engine_verify_sample): such engines write K/V every step and are
 * checked a bounded sample at a time instead of in full after every step. */
#define LSN_VERIFY_SAMPLE_TOKENS 4096

#include <stddef.h>

#include "kv_engine.h"
#include "kv_gpu.h"
#include "kv_model.h"
#include "kv_plan.h"

typedef struct lsn_server lsn_server;

/* assets_dir holds gpus.json and models/. dev (may be NULL = host backend)
 * is borrowed. headless turns the engine's device read-back off for speed.
 * NULL with err if the GPU catalogue cannot be read. */
lsn_server *lsn_server_new(const char *assets_dir, kv_device *dev, int headless, char *err, size_t errlen);
void lsn_server_free(lsn_server *s);

/* Back to vLLM's defaults (and kvlab's switches off); does not stop the engine. */
void lsn_server_reset_args(lsn_server *s);

/* Set one flag by name (dashed or underscored; "model", "gpu", vLLM flags,
 * "kv-cache", "contiguous"). value "" restores the default. Returns 0, or -1
 * with one line in err, also when the release the server follows would
 * refuse the command line it makes (kv_args_check_release: a flag that
 * release lacks, "32k" where it reads a plain int, a --no- form it has
 * not). Takes effect at the next lsn_server_start. */
int lsn_server_set(lsn_server *s, const char *name, const char *value, char *err, size_t errlen);
/* Whether lsn_server_set(s, name, value) would take the value, changing
 * nothing: 0, or -1 with its one line in err. */
int lsn_server_accepts(lsn_server *s, const char *name, const char *value, char *err, size_t errlen);

/* Current value of a flag as text ("" = default/unset). -1 if unknown. */
int lsn_server_get(const lsn_server *s, const char *name, char *buf, size_t buflen);

/* Is name a flag lsn_server_set accepts? Fills help/choices (may be NULL). */
int lsn_server_flag_info(const char *name, const char **canonical, const char **help, const char **choices);

/* Stop any engine, compute the plan and, if vLLM would start, create the
 * engine. Returns 1 started; 0 vLLM would refuse (err = vLLM's error, the
 * plan is kept for reading); -1 bad input (unknown model or GPU, impossible
 * configuration, engine creation failed: err says which). */
int lsn_server_start(lsn_server *s, char *err, size_t errlen);
void lsn_server_stop(lsn_server *s);

/* The plan the current flags plus n changes (names[i] = values[i]) would
 * give, without touching the running server or the flags: for "what if"
 * comparisons. Returns 0 with *out filled, or -1 with one line in err (bad
 * flag, unknown model or GPU, impossible configuration). */
int lsn_server_plan_with(lsn_server *s, int n, const char *const *names, const char *const *values, kv_plan *out,
                         char *err, size_t errlen);

kv_engine *lsn_server_engine(const lsn_server *s);   /* NULL when not running */
const kv_plan *lsn_server_plan(const lsn_server *s); /* last computed plan, NULL if none */
const kv_model *lsn_server_model(const lsn_server *s); /* model of the last start, NULL if none */
const kv_gpu *lsn_server_gpu(const lsn_server *s);   /* card of the last start, NULL if none */
const kv_gpu_catalog *lsn_server_catalog(const lsn_server *s);
const char *lsn_server_assets(const lsn_server *s);
int lsn_server_starts(const lsn_server *s);          /* lsn_server_start calls so far */
/* The `vllm serve` command line of the flags as they stand, as an operator
 * would type it (kv_args_command: kvlab's own switches left out). Valid
 * until the next call on s. */
const char *lsn_server_command(lsn_server *s);

/* Start-up phase of a plan log line: "init", "load", "profile",
 * "cudagraph", "kv", "check", "allocate", "ready" (by vLLM's wording). */
const char *lsn_server_log_phase(const char *line);

#endif
