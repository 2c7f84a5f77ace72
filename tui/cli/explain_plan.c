/* explain_plan: a read vLLM log beside kvlab's plan for it (explain_plan.h). */
#include "explain_plan.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv_release.h"
#include "kv_util.h"
#include "plan_inputs.h"

/* The catalogue card a log's name or total points at; NULL if neither does. */
static const kv_gpu *card_for_log(const kv_gpu_catalog *cat, const kv_logread *lr, char *how, size_t howlen)
{
    if (lr->gpu_name[0]) {
        const char *name = lr->gpu_name;
        static const char *const drop[] = {"NVIDIA ", "Tesla ", "GeForce "};
        char buf[128];
        snprintf(buf, sizeof buf, "%s", name);
        for (int pass = 0; pass < 4; pass++) {
            const kv_gpu *g = kv_gpu_find(cat, buf, NULL, 0);
            if (g) {
                snprintf(how, howlen, "the log names the card (%s)", lr->gpu_name);
                return g;
            }
            if (pass < 3 && !strncasecmp(buf, drop[pass], strlen(drop[pass])))
                memmove(buf, buf + strlen(drop[pass]), strlen(buf + strlen(drop[pass])) + 1);
        }
        /* A catalogue name holding the logged one ("T4" in "NVIDIA T4 16GB"). */
        for (int i = 0; i < cat->count; i++)
            if (strstr(cat->gpus[i].name, buf) || strstr(buf, cat->gpus[i].id)) {
                snprintf(how, howlen, "the log names the card (%s)", lr->gpu_name);
                return &cat->gpus[i];
            }
    }
    if (lr->have & KV_LR_GPU_TOTAL) {
        const kv_gpu *best = NULL;
        double bd = 0.35;
        for (int i = 0; i < cat->count; i++) {
            double d = fabs(cat->gpus[i].reported_total_gib - lr->gpu_total_gib);
            if (d <= bd) {
                best = &cat->gpus[i];
                bd = d;
            }
        }
        if (best) {
            snprintf(how, howlen, "the catalogue card whose total is nearest the logged %.2f GiB", lr->gpu_total_gib);
            return best;
        }
    }
    return NULL;
}

/* The flags kvlab plans with, as a command line (every flag set). */
static void flags_line(const kv_args *a, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < kv_args_flag_count() && off < len; i++) {
        const kv_args_flag *f = kv_args_flag_at(i);
        if (!kv_args_is_set(a, f->name) || !strcmp(f->name, "vllm-version") || !strcmp(f->name, "gpu") ||
            f->kind == KV_ARG_NOTE || f->kind == KV_ARG_NOTE_BOOL)
            continue;
        char v[128];
        if (kv_args_get(a, f->name, v, sizeof v) != 0)
            continue;
        if (f->kind == KV_ARG_BOOL)
            off += (size_t)snprintf(buf + off, len - off, "%s--%s%s", off ? " " : "", strcmp(v, "true") ? "no-" : "",
                                    f->name);
        else
            off += (size_t)snprintf(buf + off, len - off, "%s--%s %s", off ? " " : "", f->name, v);
    }
}

static void add_note(explain_result *r, const char *fmt, const char *a, const char *b)
{
    size_t n = strlen(r->notes);
    snprintf(r->notes + n, sizeof r->notes - n, fmt, a, b);
}

static explain_diff *diff_add(explain_result *r, const char *term, const char *key, int tokens, double logged,
                              double predicted, const char *knob)
{
    if (r->num_diffs >= EXPLAIN_MAX_DIFFS)
        return NULL;
    explain_diff *d = &r->diffs[r->num_diffs++];
    memset(d, 0, sizeof *d);
    d->term = term;
    d->key = key;
    d->unit_tokens = tokens;
    d->logged = logged;
    d->predicted = predicted;
    d->knob = knob;
    double delta = fabs(logged - predicted);
    d->differs = tokens ? delta > 0.01 * fabs(logged) + 16 : delta > 0.05 && delta > 0.01 * fabs(logged);
    return d;
}

/* The first flag the args had that kvlab does not model ("" if none). */
static void first_unread(const explain_result *r, char *buf, size_t len)
{
    buf[0] = '\0';
    for (const char *s = r->unread; *s;) {
        const char *nl = strchr(s, '\n');
        size_t n = nl ? (size_t)(nl - s) : strlen(s);
        if (strstr(s, "not modelled") && (size_t)(strstr(s, "not modelled") - s) < n) {
            const char *eq = memchr(s, '=', n);
            snprintf(buf, len, "--%.*s", (int)(eq ? eq - s : (long)n), s);
            for (char *c = buf; *c; c++)
                if (*c == '_')
                    *c = '-';
            return;
        }
        s = nl ? nl + 1 : s + n;
    }
}

static void compare(explain_result *r)
{
    const kv_logread *lr = &r->lr;
    const kv_plan *p = &r->plan;
    char unm[64];
    first_unread(r, unm, sizeof unm);
    double ctx = p->terms[KV_PLAN_TERM_CUDA_CONTEXT].counted ? p->cuda_context_bytes : 0;
    double pred_rest = (p->activation_bytes + p->non_torch_bytes + p->nccl_bytes + ctx) / KV_GIB;
    int cg_counted = p->terms[KV_PLAN_TERM_CUDAGRAPH].counted;
    explain_diff *d;
    int upstream = 0; /* a term before the KV cache differs */

    if (lr->have & KV_LR_WEIGHTS) {
        d = diff_add(r, "weights", "weights_gib", 0, lr->weights_gib, p->weights_bytes / KV_GIB,
                     "the checkpoint, --quantization, --dtype, --tensor-parallel-size, --cpu-offload-gb");
        if (d && d->differs) {
            upstream = 1;
            snprintf(d->cause, sizeof d->cause,
                     "the checkpoint as loaded is not what its config.json counts (its format, or tensors kvlab "
                     "does not size)");
        }
    }
    if (lr->have & KV_LR_ACTIVATION) {
        d = diff_add(r, "activation peak", "activation_gib", 0, lr->activation_gib, p->activation_bytes / KV_GIB,
                     "--max-num-batched-tokens, --max-num-seqs (the profile's sampler pass)");
        if (d && d->differs) {
            upstream = 1;
            snprintf(d->cause, sizeof d->cause, "%s",
                     lr->compile_cache == 1 && d->logged > d->predicted
                         ? "a cold compile cache: torch.compile's first start peaks higher than a warm one"
                         : "the profile run peaks otherwise for this model than kvlab's forward + sampler model");
        }
    }
    if (lr->have & KV_LR_NON_TORCH) {
        double nt = (p->non_torch_bytes + p->nccl_bytes + ctx) / KV_GIB;
        d = diff_add(r, "non-torch", "non_torch_gib", 0, lr->non_torch_gib, nt,
                     "--tensor-parallel-size (NCCL buffers); other processes on the card");
        if (d && d->differs) {
            upstream = 1;
            snprintf(d->cause, sizeof d->cause, "%s",
                     d->logged > d->predicted ? "another process on the card, or a cold compile cache's workspaces"
                                              : "less non-torch memory than kvlab assumes for this card");
        }
    }
    /* V1 logs no activation: what the budget leaves besides weights, graphs and KV. */
    double budget = (lr->have & KV_LR_BUDGET) ? lr->budget_gib
                    : (lr->have & KV_LR_GPU_TOTAL) && (lr->have & KV_LR_UTIL) ? lr->gpu_total_gib * lr->gpu_memory_utilization
                                                                              : p->budget_bytes / KV_GIB;
    if (!(lr->have & KV_LR_ACTIVATION) && (lr->have & KV_LR_WEIGHTS) && (lr->have & KV_LR_KV_GIB) &&
        p->budget_bytes > 0) {
        double cg = cg_counted ? ((lr->have & KV_LR_CUDAGRAPH) ? lr->cudagraph_gib : p->cudagraph_bytes / KV_GIB) : 0;
        double rest = budget - lr->weights_gib - lr->kv_cache_gib - cg;
        d = diff_add(r, "activation + non-torch (derived)", "activation_non_torch_gib", 0, rest, pred_rest,
                     "--max-num-batched-tokens, --max-num-seqs; --tensor-parallel-size (NCCL)");
        if (d && d->differs) {
            upstream = 1;
            if (lr->compile_cache == 1 && rest > pred_rest)
                snprintf(d->cause, sizeof d->cause,
                         "a cold compile cache: torch.compile's first start peaks higher (the log compiled its "
                         "graphs); a warm start logs less");
            else if (unm[0])
                snprintf(d->cause, sizeof d->cause, "an unmodelled flag: %s changes memory kvlab does not size", unm);
            else
                snprintf(d->cause, sizeof d->cause, "%s",
                         rest > pred_rest ? "the profile run peaks higher than kvlab's model of it for this model"
                                          : "the profile run peaks lower than kvlab's model of it for this model");
        }
    }
    if (lr->have & (KV_LR_CUDAGRAPH | KV_LR_CUDAGRAPH_ACTUAL)) {
        double g = (lr->have & KV_LR_CUDAGRAPH) ? lr->cudagraph_gib : lr->cudagraph_actual_gib;
        d = diff_add(r, (lr->have & KV_LR_CUDAGRAPH) ? "CUDA graphs (estimate)" : "CUDA graphs (captured)",
                     "cudagraph_gib", 0, g, p->cudagraph_bytes / KV_GIB,
                     "--enforce-eager, -O, --max-cudagraph-capture-size, --max-num-seqs");
        if (d && d->differs) {
            if (cg_counted)
                upstream = 1;
            snprintf(d->cause, sizeof d->cause, "%s", unm[0] ? "an unmodelled flag changes the captures"
                                                              : "the capture sizes or the graphs' cost per layer");
        }
    }
    if (lr->have & KV_LR_KV_GIB) {
        d = diff_add(r, "KV cache", "kv_cache_gib", 0, lr->kv_cache_gib, p->available_kv_bytes / KV_GIB,
                     "what is left: --gpu-memory-utilization, --kv-cache-memory-bytes");
        if (d && d->differs) {
            double used = (lr->have & KV_LR_FREE) ? lr->gpu_total_gib - lr->free_gib : 0;
            if (upstream)
                snprintf(d->cause, sizeof d->cause, "follows the terms above");
            else if (used > 1.0)
                snprintf(d->cause, sizeof d->cause,
                         "another process on the card: %.2f GiB were in use at start-up", used);
            else if (unm[0])
                snprintf(d->cause, sizeof d->cause, "an unmodelled flag: %s", unm);
            else
                snprintf(d->cause, sizeof d->cause, "%s",
                         d->logged < d->predicted
                             ? "memory kvlab does not see: another process on the card, or a cold compile cache"
                             : "the budget: the card's total or the utilization differs");
        }
    }
    int64_t tokens = (lr->have & KV_LR_KV_TOKENS) ? lr->kv_cache_tokens
                     : (lr->have & KV_LR_BLOCKS)  ? lr->gpu_blocks * p->block_size
                                                  : -1;
    if (tokens >= 0) {
        d = diff_add(r, (lr->have & KV_LR_KV_TOKENS) ? "KV cache tokens" : "KV cache tokens (blocks x block size)",
                     "kv_cache_tokens", 1, (double)tokens, (double)p->kv_cache_tokens,
                     "--kv-cache-dtype, --block-size (bytes per token), and the KV memory");
        if (d && d->differs)
            snprintf(d->cause, sizeof d->cause, "%s",
                     (lr->have & KV_LR_KV_GIB) && !r->diffs[r->num_diffs - 2].differs
                         ? "bytes per token differ: the KV dtype, block size or layers kvlab counts"
                         : "follows the KV memory");
    }
    if (lr->have & KV_LR_CONCURRENCY) {
        d = diff_add(r, "max concurrency", "max_concurrency", 0, lr->max_concurrency, p->max_concurrency,
                     "--max-model-len (requests of that length at once)");
        if (d) {
            d->differs = fabs(d->logged - d->predicted) > 0.01 * fabs(d->logged) + 0.01;
            if (d->differs)
                snprintf(d->cause, sizeof d->cause, "follows the KV tokens");
        }
    }
}

/* How a logged failure stopped, in the plan's terms (what the memory view
 * draws of a start that stopped there: ui_mem_reached). */
static const struct {
    kv_logread_error lr;
    kv_plan_error plan;
} LOGGED_FAILURE[] = {
    {KV_LR_ERR_FREE_MEMORY, KV_PLAN_ERR_FREE_MEMORY},   {KV_LR_ERR_NO_KV_MEMORY, KV_PLAN_ERR_NO_KV_MEMORY},
    {KV_LR_ERR_MAX_MODEL_LEN, KV_PLAN_ERR_MAX_MODEL_LEN}, {KV_LR_ERR_AUTO_FIT, KV_PLAN_ERR_AUTO_FIT},
    {KV_LR_ERR_WEIGHTS_OOM, KV_PLAN_ERR_WEIGHTS_OOM},   {KV_LR_ERR_PROFILE_OOM, KV_PLAN_ERR_PROFILE_OOM},
    {KV_LR_ERR_SAMPLER_OOM, KV_PLAN_ERR_SAMPLER_OOM},   {KV_LR_ERR_OOM, KV_PLAN_ERR_SAMPLER_OOM},
};

/* The log's figure under a difference's JSON key (explain_diff.key). */
static int logged(const explain_result *r, const char *key, double *v)
{
    for (int i = 0; i < r->num_diffs; i++)
        if (!strcmp(r->diffs[i].key, key)) {
            *v = r->diffs[i].logged;
            return 1;
        }
    return 0;
}

/* The logged GiB figures that stand for one plan term as they are. */
static const struct {
    const char *key;
    unsigned bit;
    size_t field; /* offsetof a double in kv_plan, bytes */
} LOGGED_TERM[] = {
    {"weights_gib", EXPLAIN_LP_WEIGHTS, offsetof(kv_plan, weights_bytes)},
    {"activation_gib", EXPLAIN_LP_ACTIVATION, offsetof(kv_plan, activation_bytes)},
    {"non_torch_gib", EXPLAIN_LP_NON_TORCH, offsetof(kv_plan, cuda_context_bytes)},
    {"cudagraph_gib", EXPLAIN_LP_CUDAGRAPH, offsetof(kv_plan, cudagraph_bytes)},
    {"kv_cache_gib", EXPLAIN_LP_KV, offsetof(kv_plan, available_kv_bytes)},
};

unsigned explain_logged_plan(const explain_result *r, kv_plan *out)
{
    if (!r->planned)
        return 0;
    const kv_logread *lr = &r->lr;
    kv_plan q = r->plan;
    unsigned got = 0;
    double v;
    for (size_t i = 0; i < sizeof LOGGED_TERM / sizeof LOGGED_TERM[0]; i++)
        if (logged(r, LOGGED_TERM[i].key, &v)) {
            *(double *)((char *)&q + LOGGED_TERM[i].field) = v * KV_GIB;
            got |= LOGGED_TERM[i].bit;
        }
    if (got & EXPLAIN_LP_NON_TORCH) /* all of it in the one term */
        q.nccl_bytes = q.non_torch_bytes = 0;
    if (logged(r, "activation_non_torch_gib", &v)) {
        q.activation_bytes = fmax(0, v * KV_GIB - q.cuda_context_bytes - q.nccl_bytes - q.non_torch_bytes);
        got |= EXPLAIN_LP_ACTIVATION;
    }
    if (logged(r, "kv_cache_tokens", &v)) {
        q.kv_cache_tokens = q.kv_cache_tokens_logged = (int64_t)v;
        got |= EXPLAIN_LP_TOKENS;
    }
    if (logged(r, "max_concurrency", &v)) {
        q.max_concurrency = v;
        got |= EXPLAIN_LP_CONCURRENCY;
    }
    if (!got)
        return 0;
    if (lr->have & KV_LR_GPU_TOTAL) {
        q.gpu_total_bytes = lr->gpu_total_gib * KV_GIB;
        q.budget_bytes = q.gpu_total_bytes * q.gpu_memory_utilization;
    }
    if (lr->error_kind != KV_LR_ERR_NONE) {
        q.starts = 0;
        q.error_kind = KV_PLAN_STARTS; /* a kind the bar has no rule for: every term it states */
        for (size_t i = 0; i < sizeof LOGGED_FAILURE / sizeof LOGGED_FAILURE[0]; i++)
            if (LOGGED_FAILURE[i].lr == lr->error_kind)
                q.error_kind = LOGGED_FAILURE[i].plan;
    } else {
        q.starts = 1;
        q.error_kind = KV_PLAN_STARTS;
    }
    q.num_fixes = 0;
    *out = q;
    return got;
}

int explain_run(const char *text, size_t len, int extra_argc, char **extra_argv, const char *assets,
                explain_result *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    if (kv_logread_parse(text, len, &r->lr, err, errlen) != 0)
        return -1;
    kv_args_init(&r->args);
    kv_logread_to_args(&r->lr, &r->args, r->unread, sizeof r->unread);
    /* The compile cache the log started with, where kv_args knows the flag. */
    if (r->lr.compile_cache) {
        char e[128];
        kv_args_set(&r->args, "compile-cache", r->lr.compile_cache == 1 ? "cold" : "warm", e, sizeof e);
    }
    if (extra_argc > 0) {
        char notes[1024];
        int rc = kv_args_parse(&r->args, extra_argc, extra_argv, notes, sizeof notes, err, errlen);
        if (rc < 0)
            return -1;
    }
    char e[512];
    kv_gpu_catalog cat = {0};
    switch (kvlab_inputs_load(&r->args, assets, &r->model, &cat, e, sizeof e)) {
    case KVLAB_INPUTS_OK:
        break;
    case KVLAB_INPUTS_NO_MODEL:
        snprintf(r->missing, sizeof r->missing,
                 "cannot plan: the log does not name the model (no non-default args, engine line or banner); add "
                 "--model NAME");
        return 0;
    case KVLAB_INPUTS_MODEL:
        snprintf(r->missing, sizeof r->missing, "cannot plan: %s (kvlab models lists the catalogue; --model PATH "
                 "takes a config.json)", e);
        return 0;
    default:
        snprintf(r->missing, sizeof r->missing, "cannot plan: %s", e);
        return 0;
    }
    const kv_gpu *g = NULL;
    char how[160] = "";
    if (r->args.gpu[0]) {
        g = kv_gpu_find(&cat, r->args.gpu, e, sizeof e);
        if (!g) {
            kv_gpu_catalog_free(&cat);
            return kv_errf(err, errlen, -1, "%s", e);
        }
        snprintf(how, sizeof how, "--gpu %s", r->args.gpu);
    } else {
        g = card_for_log(&cat, &r->lr, how, sizeof how);
    }
    if (!g) {
        g = kv_gpu_find(&cat, "h100-80gb", NULL, 0);
        snprintf(how, sizeof how, "the log names no card and no total: an H100 80GB assumed (--gpu NAME to change)");
    }
    if (!g) {
        kv_gpu_catalog_free(&cat);
        snprintf(r->missing, sizeof r->missing, "cannot plan: no card (the catalogue has no H100)");
        return 0;
    }
    r->gpu = *g;
    kv_gpu_catalog_free(&cat);
    add_note(r, "card: %s, %s\n", r->gpu.id, how);
    if ((r->lr.have & KV_LR_GPU_TOTAL) && r->args.gpu_memory_gib < 0) {
        char v[32];
        snprintf(v, sizeof v, "%.4g", r->lr.gpu_total_gib);
        kv_args_set(&r->args, "gpu-memory-gib", v, e, sizeof e);
    }
    /* Another process on the card: what the free-memory check saw in use
     * beyond the CUDA context kvlab adds itself. */
    if ((r->lr.have & KV_LR_FREE) && (r->lr.have & KV_LR_GPU_TOTAL) && !kv_args_is_set(&r->args, "gpu-used-gib")) {
        const kv_release *rel = kv_release_find(r->args.vllm_version, NULL, 0);
        double ctx = rel ? rel->mem->cuda_context_gib[r->lr.gpu_total_gib >= 40] : 0.5;
        double used = r->lr.gpu_total_gib - r->lr.free_gib - ctx;
        if (used > 0) {
            char v[32];
            snprintf(v, sizeof v, "%.2f", used);
            kv_args_set(&r->args, "gpu-used-gib", v, e, sizeof e);
            add_note(r, "other processes: --gpu-used-gib %s (the free memory the log's check saw%s)\n", v, "");
        }
    }
    flags_line(&r->args, r->flags, sizeof r->flags);
    if (kv_plan_compute(&r->model, &r->gpu, &r->args, &r->plan, e, sizeof e) != KV_PLAN_OK) {
        snprintf(r->missing, sizeof r->missing, "cannot plan: %s", e);
        return 0;
    }
    r->planned = 1;
    compare(r);
    /* A failure kvlab's own plan does not predict: re-plan with the log's
     * terms typed in, so the fixes start from what the server measured. */
    if (r->lr.error_kind != KV_LR_ERR_NONE && r->plan.starts && (r->lr.have & KV_LR_WEIGHTS)) {
        kv_args c = r->args;
        char v[32];
        snprintf(v, sizeof v, "%.4f", r->lr.weights_gib);
        kv_args_set(&c, "weights-gib", v, e, sizeof e);
        if (r->lr.have & KV_LR_ACTIVATION) {
            snprintf(v, sizeof v, "%.4f", r->lr.activation_gib);
            kv_args_set(&c, "activation-gib", v, e, sizeof e);
        } else {
            for (int i = 0; i < r->num_diffs; i++)
                if (!strcmp(r->diffs[i].key, "activation_non_torch_gib") && r->diffs[i].logged > 0) {
                    snprintf(v, sizeof v, "%.4f", r->diffs[i].logged);
                    kv_args_set(&c, "activation-gib", v, e, sizeof e);
                }
        }
        if (r->lr.have & KV_LR_CUDAGRAPH) {
            snprintf(v, sizeof v, "%.4f", r->lr.cudagraph_gib);
            kv_args_set(&c, "cudagraph-gib", v, e, sizeof e);
        }
        if (kv_plan_compute(&r->model, &r->gpu, &c, &r->calibrated, e, sizeof e) == KV_PLAN_OK)
            r->replanned = 1;
    }
    return 0;
}
