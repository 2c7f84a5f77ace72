/* kvlab explain [FILE|-] [--json] [--model NAME] [--gpu NAME] [vLLM flags]:
 * read a vLLM start-up or failure log as pasted and say, term by term, what
 * it states beside kvlab's plan for the same release, flags and card; name
 * each difference and, for a failure, its kind and the fixes re-planned.
 * Exit 0 read, 2 not a vLLM log / bad input (one line on stderr). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "explain_plan.h"
#include "kv_args.h"
#include "kv_plan.h"
#include "kv_vllm_flags.h"
#include "kv_util.h"
#include "paths.h"

#define EXPLAIN_MAX_BYTES (64u << 20)

static void explain_usage(FILE *f)
{
    fprintf(f,
            "usage: kvlab explain [FILE|-] [--json] [--model NAME] [--gpu NAME] [vLLM flags]\n"
            "  FILE is the first argument that is no flag's value (before or after the flags);\n"
            "  without one, the log is read from standard input.\n"
            "  reads a vLLM log (start-up or failure; V0 and V1; 0.6.4 to 0.33) as pasted: process\n"
            "  prefixes, docker and journald timestamps, colours, CRLF, interleaved ranks, cut-off tails.\n"
            "  Prints what the log states (release, flags, model, card, weights, profile peak, non-torch,\n"
            "  CUDA graphs, KV memory, KV tokens, concurrency, the error) beside kvlab's plan for the\n"
            "  same release, flags and card, each difference named with the knob behind the term;\n"
            "  for a failure, its kind and the fixes, each re-planned.\n"
            "  FILE: the log (- or nothing: standard input)\n"
            "  --json            one object: vllm_version, logged, predicted (kvlab serve --json's\n"
            "                    schema), differences, fixes\n"
            "  --model NAME, --gpu NAME, --vllm-version X, vLLM flags: what the log does not say,\n"
            "                    or an override of what it does\n"
            "exit 0: read; 2: not a vLLM log, or bad input (one line on stderr)\n");
}

static int read_stdin(char **out, size_t *len, char *err, size_t errlen)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf)
        return kv_errf(err, errlen, -1, "out of memory");
    for (;;) {
        if (n == cap) {
            if (cap >= EXPLAIN_MAX_BYTES) {
                free(buf);
                return kv_errf(err, errlen, -1, "standard input is larger than %u MiB", EXPLAIN_MAX_BYTES >> 20);
            }
            cap *= 2;
            char *nb = realloc(buf, cap + 1);
            if (!nb) {
                free(buf);
                return kv_errf(err, errlen, -1, "out of memory");
            }
            buf = nb;
        }
        ssize_t r = read(0, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            free(buf);
            return kv_errf(err, errlen, -1, "standard input: %s", strerror(errno));
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

static const char *how_name(kv_logread_how h)
{
    static const char *const n[] = {"none", "banner", "engine_line", "source_lines", "wording"};
    return (int)h >= 0 && (int)h < 5 ? n[h] : "none";
}

static void print_lines(const char *prefix, const char *s)
{
    while (s && *s) {
        const char *nl = strchr(s, '\n');
        int n = nl ? (int)(nl - s) : (int)strlen(s);
        printf("%s%.*s\n", prefix, n, s);
        s = nl ? nl + 1 : s + n;
    }
}

static void fmt_val(char *buf, size_t len, const explain_diff *d, double v)
{
    if (d->unit_tokens) {
        kv_fmt_thousands(buf, len, (long long)llround(v));
    } else if (!strcmp(d->key, "max_concurrency")) {
        snprintf(buf, len, "%.2fx", v);
    } else {
        snprintf(buf, len, "%.2f", v);
    }
}

static const kv_plan *fix_plan(const explain_result *r)
{
    if (!r->planned)
        return NULL;
    if (!r->plan.starts)
        return &r->plan;
    if (r->replanned && !r->calibrated.starts)
        return &r->calibrated;
    return NULL;
}

static void print_text(const char *src, const explain_result *r)
{
    const kv_logread *lr = &r->lr;
    char buf[256], a[32], b[32];
    printf("kvlab explain: %s (%d lines, %d of them vLLM's%s)\n", src, lr->lines, lr->vllm_lines,
           lr->truncated ? "; the last line is cut off" : "");
    printf("release: %s", kv_logread_release_how(lr, buf, sizeof buf));
    printf("; %s engine%s\n", lr->engine_v1 == 0 ? "V0" : lr->engine_v1 == 1 ? "V1" : "unknown",
           lr->v0_fallback ? " (V1 fell back to V0 on this card)" : "");
    printf("model: %s\n", lr->model[0] ? lr->model : r->args.model[0] ? r->args.model : "not in the log");
    if (lr->have & KV_LR_GPU_TOTAL)
        printf("card total: %.2f GiB (logged)%s%s\n", lr->gpu_total_gib, lr->gpu_name[0] ? ", " : "", lr->gpu_name);
    else if (lr->gpu_name[0])
        printf("card: %s (logged)\n", lr->gpu_name);
    if (lr->compile_cache)
        printf("torch.compile cache: %s\n", lr->compile_cache == 1 ? "cold (the log compiles its graphs)"
                                                                   : "warm (the log loads compiled graphs)");
    print_lines("", r->notes);
    if (r->unread[0]) {
        printf("args kvlab does not plan with:\n");
        print_lines("  ", r->unread);
    }
    if (!r->planned) {
        printf("\nLogged (per GPU):\n");
        if (lr->have & KV_LR_WEIGHTS) printf("  weights                %8.2f GiB\n", lr->weights_gib);
        if (lr->have & KV_LR_ACTIVATION) printf("  activation peak        %8.2f GiB\n", lr->activation_gib);
        if (lr->have & KV_LR_NON_TORCH) printf("  non-torch              %8.2f GiB\n", lr->non_torch_gib);
        if (lr->have & KV_LR_CUDAGRAPH) printf("  CUDA graphs (estimate) %8.2f GiB\n", lr->cudagraph_gib);
        if (lr->have & KV_LR_KV_GIB) printf("  KV cache               %8.2f GiB\n", lr->kv_cache_gib);
        if (lr->have & KV_LR_KV_TOKENS)
            printf("  KV cache tokens        %8s\n", (kv_fmt_thousands(a, sizeof a, lr->kv_cache_tokens), a));
        if (lr->have & KV_LR_BLOCKS)
            printf("  GPU blocks             %8s\n", (kv_fmt_thousands(a, sizeof a, lr->gpu_blocks), a));
        if (lr->have & KV_LR_CONCURRENCY)
            printf("  max concurrency        %8.2fx at %s tokens\n", lr->max_concurrency,
                   (kv_fmt_thousands(a, sizeof a, lr->concurrency_len), a));
        if (lr->error_kind)
            printf("\nFailed (%s): %s\n", kv_logread_error_name(lr->error_kind), lr->error);
        printf("\n%s\n", r->missing);
        return;
    }
    const kv_plan *p = &r->plan;
    printf("kvlab plans: vLLM %s accounting, %s, %s x%d, %s\n", p->vllm_version, p->engine_v1 ? "V1" : "V0", p->gpu_id,
           p->tensor_parallel_size, r->flags[0] ? r->flags : "(defaults)");
    printf("\nPer GPU                                  logged       kvlab  difference  knob\n");
    if (lr->have & KV_LR_BUDGET)
        snprintf(a, sizeof a, "%.2f", lr->budget_gib);
    else if ((lr->have & KV_LR_GPU_TOTAL) && (lr->have & KV_LR_UTIL))
        snprintf(a, sizeof a, "%.2f", lr->gpu_total_gib * lr->gpu_memory_utilization); /* total x utilization */
    else
        snprintf(a, sizeof a, "-");
    printf("  %-36s %9s %11.2f  %10s  --gpu-memory-utilization x the card's total\n", "budget", a,
           p->budget_bytes / KV_GIB, "");
    for (int i = 0; i < r->num_diffs; i++) {
        const explain_diff *d = &r->diffs[i];
        char dv[32];
        fmt_val(a, sizeof a, d, d->logged);
        fmt_val(b, sizeof b, d, d->predicted);
        if (d->unit_tokens)
            snprintf(dv, sizeof dv, "%+.1f%%", d->logged ? 100.0 * (d->predicted - d->logged) / d->logged : 0.0);
        else if (!strcmp(d->key, "max_concurrency"))
            snprintf(dv, sizeof dv, "%+.2f", d->predicted - d->logged);
        else
            snprintf(dv, sizeof dv, "%+.2f", d->predicted - d->logged);
        printf("  %-36s %9s %11s  %10s  %s\n", d->term, a, b, d->differs ? dv : "same", d->knob);
    }
    printf("  (GiB; tokens as counts; difference = kvlab - logged, 'same' within 0.05 GiB or 1%%)\n");
    int nd = 0;
    for (int i = 0; i < r->num_diffs; i++)
        nd += r->diffs[i].differs;
    if (nd) {
        printf("\nDifferences:\n");
        for (int i = 0; i < r->num_diffs; i++)
            if (r->diffs[i].differs)
                printf("  %s: %s\n", r->diffs[i].term, r->diffs[i].cause);
    } else {
        printf("\nEvery figure the log states agrees with kvlab's plan.\n");
    }
    if (lr->error_kind) {
        printf("\nThe log failed (%s): %s\n", kv_logread_error_name(lr->error_kind), lr->error);
        printf("kvlab's plan: %s\n", p->starts ? "starts" : kv_plan_error_name(p->error_kind));
    } else {
        printf("\nThe log started; kvlab's plan: %s\n", p->starts ? "starts" : kv_plan_error_name(p->error_kind));
    }
    const kv_plan *fp = fix_plan(r);
    if (lr->error_kind && fp) {
        printf("Fixes, cheapest first%s:\n", fp == &r->calibrated ? " (re-planned with the log's own terms typed in)" : "");
        if (fp->num_fixes == 0)
            printf("  none of kvlab's fixes makes it start on this card\n");
        for (int i = 0; i < fp->num_fixes; i++) {
            const kv_plan_fix *f = &fp->fixes[i];
            kv_fmt_thousands(a, sizeof a, f->kv_cache_tokens);
            if (f->starts)
                printf("  %d. %-34s %-40s starts: %s tokens, %.2fx\n", i + 1, f->what, f->flags, a, f->max_concurrency);
            else
                printf("  %d. %-34s %-40s still fails (%s)\n", i + 1, f->what, f->flags,
                       kv_plan_error_name(f->error_kind));
        }
    } else if (lr->error_kind) {
        printf("kvlab has no memory fix for this failure: it is not about the memory plan, or kvlab's plan starts "
               "even with the log's own terms.\n");
    }
}

static cJSON *logged_json(const kv_logread *lr)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
#define NUM(bit, key, v) if (lr->have & (bit)) cJSON_AddNumberToObject(o, key, v)
    NUM(KV_LR_KV_GIB, "kv_cache_gib", lr->kv_cache_gib);
    NUM(KV_LR_KV_TOKENS, "kv_cache_tokens", (double)lr->kv_cache_tokens);
    NUM(KV_LR_BLOCKS, "gpu_blocks", (double)lr->gpu_blocks);
    NUM(KV_LR_WEIGHTS, "weights_gib", lr->weights_gib);
    NUM(KV_LR_ACTIVATION, "activation_gib", round(lr->activation_gib * 1e4) / 1e4);
    NUM(KV_LR_NON_TORCH, "non_torch_gib", lr->non_torch_gib);
    NUM(KV_LR_CUDAGRAPH, "cudagraph_gib", lr->cudagraph_gib);
    NUM(KV_LR_CUDAGRAPH_ACTUAL, "cudagraph_captured_gib", lr->cudagraph_actual_gib);
    NUM(KV_LR_GPU_TOTAL, "gpu_total_gib", lr->gpu_total_gib);
    NUM(KV_LR_FREE, "free_gib", lr->free_gib);
    NUM(KV_LR_UTIL, "gpu_memory_utilization", lr->gpu_memory_utilization);
    NUM(KV_LR_BUDGET, "budget_gib", lr->budget_gib);
    NUM(KV_LR_CONCURRENCY, "max_concurrency", lr->max_concurrency);
    if (lr->have & KV_LR_CONCURRENCY)
        cJSON_AddNumberToObject(o, "max_concurrency_tokens_per_request", (double)lr->concurrency_len);
#undef NUM
    if (lr->max_model_len)
        cJSON_AddNumberToObject(o, "max_model_len", (double)lr->max_model_len);
    if (lr->tensor_parallel_size)
        cJSON_AddNumberToObject(o, "tensor_parallel_size", lr->tensor_parallel_size);
    if (lr->gpu_name[0])
        cJSON_AddStringToObject(o, "gpu_name", lr->gpu_name);
    if (lr->compile_cache)
        cJSON_AddStringToObject(o, "compile_cache", lr->compile_cache == 1 ? "cold" : "warm");
    if (lr->error_kind) {
        cJSON_AddStringToObject(o, "error", lr->error);
        cJSON_AddStringToObject(o, "error_kind", kv_logread_error_name(lr->error_kind));
        if (lr->error_estimated_max_model_len)
            cJSON_AddNumberToObject(o, "estimated_max_model_len", (double)lr->error_estimated_max_model_len);
        if (lr->error_needed_gib > 0)
            cJSON_AddNumberToObject(o, "needed_gib", lr->error_needed_gib);
    }
    return o;
}

static void print_json(const char *src, const explain_result *r)
{
    const kv_logread *lr = &r->lr;
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return;
    char buf[256];
    cJSON_AddStringToObject(o, "source", src);
    if (lr->version_how == KV_LOGREAD_VER_BANNER || lr->version_how == KV_LOGREAD_VER_ENGINE ||
        lr->version_how == KV_LOGREAD_VER_LINES)
        cJSON_AddStringToObject(o, "vllm_version", lr->vllm_version);
    else
        cJSON_AddNullToObject(o, "vllm_version");
    cJSON_AddStringToObject(o, "version_from", how_name(lr->version_how));
    cJSON_AddStringToObject(o, "version_note", kv_logread_release_how(lr, buf, sizeof buf));
    cJSON_AddStringToObject(o, "release_followed", kv_logread_release(lr, buf, sizeof buf));
    cJSON_AddStringToObject(o, "engine", lr->engine_v1 == 0 ? "V0" : lr->engine_v1 == 1 ? "V1" : "unknown");
    if (lr->model[0] || r->args.model[0])
        cJSON_AddStringToObject(o, "model", lr->model[0] ? lr->model : r->args.model);
    else
        cJSON_AddNullToObject(o, "model");
    cJSON_AddStringToObject(o, "flags", r->flags);
    cJSON *unread = cJSON_AddArrayToObject(o, "unread_args");
    for (const char *s = r->unread; unread && *s;) {
        const char *nl = strchr(s, '\n');
        int n = nl ? (int)(nl - s) : (int)strlen(s);
        snprintf(buf, sizeof buf, "%.*s", n, s);
        cJSON_AddItemToArray(unread, cJSON_CreateString(buf));
        s = nl ? nl + 1 : s + n;
    }
    cJSON_AddItemToObject(o, "logged", logged_json(lr));
    if (r->planned) {
        cJSON_AddItemToObject(o, "predicted", kv_plan_to_json(&r->plan));
    } else {
        cJSON_AddNullToObject(o, "predicted");
        cJSON_AddStringToObject(o, "missing", r->missing);
    }
    cJSON *diffs = cJSON_AddArrayToObject(o, "differences");
    for (int i = 0; diffs && i < r->num_diffs; i++) {
        const explain_diff *d = &r->diffs[i];
        cJSON *x = cJSON_CreateObject();
        if (!x)
            break;
        cJSON_AddStringToObject(x, "term", d->term);
        cJSON_AddStringToObject(x, "key", d->key);
        cJSON_AddNumberToObject(x, "logged", d->logged);
        cJSON_AddNumberToObject(x, "predicted", d->unit_tokens ? d->predicted : round(d->predicted * 1e4) / 1e4);
        cJSON_AddBoolToObject(x, "differs", d->differs);
        if (d->differs)
            cJSON_AddStringToObject(x, "cause", d->cause);
        cJSON_AddStringToObject(x, "knob", d->knob);
        cJSON_AddItemToArray(diffs, x);
    }
    cJSON *fixes = cJSON_AddArrayToObject(o, "fixes");
    const kv_plan *fp = lr->error_kind ? fix_plan(r) : NULL;
    for (int i = 0; fixes && fp && i < fp->num_fixes; i++) {
        const kv_plan_fix *f = &fp->fixes[i];
        cJSON *x = cJSON_CreateObject();
        if (!x)
            break;
        cJSON_AddNumberToObject(x, "rank", i + 1);
        cJSON_AddStringToObject(x, "what", f->what);
        cJSON_AddStringToObject(x, "flags", f->flags);
        cJSON_AddBoolToObject(x, "starts", f->starts);
        cJSON_AddStringToObject(x, "error_kind", kv_plan_error_name(f->error_kind));
        cJSON_AddNumberToObject(x, "kv_cache_tokens", (double)f->kv_cache_tokens);
        cJSON_AddNumberToObject(x, "max_concurrency", round(f->max_concurrency * 100) / 100);
        cJSON_AddBoolToObject(x, "from_logged_terms", fp == &r->calibrated);
        cJSON_AddItemToArray(fixes, x);
    }
    char *s = cJSON_Print(o);
    if (s)
        printf("%s\n", s);
    free(s);
    cJSON_Delete(o);
}

/* Does flag argument s take the next argument as its value (argparse's
 * reading of a vLLM flag or a kvlab one)? "--flag=value", switches and
 * flags no parser has take none. */
static int takes_value(const char *s)
{
    if (strchr(s, '=') || !strcmp(s, "--json"))
        return 0;
    if (!strncmp(s, "-O", 2))
        return !s[2];
    const kv_args_flag *f = kv_args_flag_find(s);
    if (f)
        return f->kind != KV_ARG_BOOL && f->kind != KV_ARG_NOTE_BOOL && strncmp(s, "--no-", 5);
    int neg = 0;
    const kv_vllm_flag *vf = kv_vllm_flag_find(s, &neg);
    if (!vf && s[1] == '-')
        vf = kv_vllm_flag_prefix(s, NULL, 0);
    return vf && !neg && vf->nargs != KV_VLLM_NARGS_NONE;
}

int cmd_explain(int argc, char **argv)
{
    int json = 0;
    const char *file = NULL;
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    if (!rest)
        return 2;
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            explain_usage(stdout);
            free(rest);
            return 0;
        } else if (!file && (argv[i][0] != '-' || !strcmp(argv[i], "-")) &&
                   (i == 1 || argv[i - 1][0] != '-' || !takes_value(argv[i - 1]))) {
            /* the log is the first argument that is no flag's value, also
             * after flags (kvlab explain --json FILE) */
            file = argv[i];
        } else {
            rest[n++] = argv[i];
        }
    }
    char err[512];
    char *text = NULL;
    size_t len = 0;
    const char *src = file && strcmp(file, "-") ? file : "standard input";
    if (!file || !strcmp(file, "-")) {
        if (!file && isatty(0)) {
            fprintf(stderr, "kvlab explain: no log given (kvlab explain FILE, or paste it on standard input)\n");
            free(rest);
            return 2;
        }
        if (read_stdin(&text, &len, err, sizeof err) != 0) {
            fprintf(stderr, "kvlab explain: %s\n", err);
            free(rest);
            return 2;
        }
    } else if (kv_read_file(file, EXPLAIN_MAX_BYTES, &text, &len, err, sizeof err) != 0) {
        fprintf(stderr, "kvlab explain: %s\n", err);
        free(rest);
        return 2;
    }
    explain_result *r = malloc(sizeof *r);
    if (!r) {
        free(text);
        free(rest);
        return 2;
    }
    int rc = explain_run(text, len, n, rest, kvlab_assets_dir(), r, err, sizeof err);
    free(text);
    free(rest);
    if (rc != 0) {
        fprintf(stderr, "kvlab explain: %s: %s\n", src, err);
        free(r);
        return 2;
    }
    if (json)
        print_json(src, r);
    else
        print_text(src, r);
    free(r);
    return 0;
}
