/* kvlab serve MODEL [vLLM flags] [--gpu NAME] [--json]: would this `vllm
 * serve` start, and with how many KV-cache tokens? Prints vLLM's start-up
 * lines, the per-GPU subtraction and, when it would not start, the fixes
 * cheapest first. Exit 0 starts, 1 would not start, 2 bad input. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "commands.h"
#include "kv_args.h"
#include "kv_disagg.h"
#include "kv_gpu.h"
#include "kv_model.h"
#include "kv_plan.h"
#include "kv_release.h"
#include "kv_util.h"
#include "paths.h"
#include "plan_inputs.h"

#define DEFAULT_GPU "h100-80gb"

static void serve_usage(FILE *f)
{
    fprintf(f,
            "usage: kvlab serve MODEL [vLLM flags] [--gpu NAME] [--json] [--disaggregate P:D]\n"
            "  MODEL: a catalogue id (kvlab models), a config.json, a folder holding one,\n"
            "         or a model in the local Hugging Face cache\n"
            "  --gpu NAME        the card (kvlab gpus); default %s, or this machine's GPU\n"
            "                    when a CUDA device answers (--gpu this asks for it)\n"
            "  --json            print one JSON object instead of the report (docs/json-schema.md:\n"
            "                    schema_version %d first; byte counts as whole *_bytes, GiB as *_gib;\n"
            "                    kv_cache_tokens is the \"GPU KV cache size\" line's figure, the\n"
            "                    per-group one is kv_cache_tokens_per_group; device_name as torch\n"
            "                    names the card; terms, log, fixes, notes as lists)\n"
            "  --vs FLAGS        a second line: the flags after --vs change or add to the first's;\n"
            "                    both plans side by side, term by term (exit: the second's)\n"
            "  --allocate        hold the plan on the GPU: placeholders for weights, activation\n"
            "                    peak, CUDA graphs and NCCL, and the KV pool with K/V written\n"
            "  --no-placeholders with --allocate: the KV pool only (a shared card)\n"
            "  --hold S          with --allocate: keep it S seconds (default: until Enter);\n"
            "                    --hold or --no-placeholders without --allocate exit 2\n"
            "  --disaggregate P:D  a prefill/decode split (vLLM's NixlConnector): P prefill and D\n"
            "                    decode instances of this plan; adds the GPUs and the prompt KV\n"
            "                    each request moves (--kv-transfer-link rdma|nvlink|pcie, default\n"
            "                    rdma: 400 Gb/s per GPU); kvlab simulate --disaggregate runs it\n"
            "which rules:\n"
            "  --vllm-version X.Y[.Z]  the vLLM release to follow, %s to %s (default %s): its\n"
            "                    budget, defaults, activation peak and the wording of its log\n"
            "  --accounting release|textbook  release (default): what that release subtracts;\n"
            "                    textbook: the course's arithmetic (0.60 GiB graphs, 0.60 GiB\n"
            "                    context, 1 GiB NCCL at tp > 1, all off the budget)\n"
            "terms by release: V0 <= 0.6.4 and V1 0.8.0-0.9.0 take the peak torch memory plus\n"
            "  all non-torch memory (CUDA context inside); V0 0.6.5-0.7 and V1 from 0.9.1\n"
            "  measure from a snapshot taken after the context (outside); the profile also\n"
            "  samples max_num_seqs sequences (x vocab: PyTorch's sort, from 0.17 a Triton\n"
            "  kernel); CUDA graphs follow the release's capture sizes and the model's\n"
            "  layers, taken before the pool from 0.20, else only off the sampler warm-up\n"
            "  after it; cards below compute capability 8.0 run V0 in 0.8.0-0.10.1.x.\n"
            "  --compile-cache cold (the default: a first start, or a container without a\n"
            "  kept ~/.cache/vllm) adds what torch.compile takes in the profile run from\n"
            "  0.20 (and as non-torch memory from 0.27); warm is a later start. The report\n"
            "  gives both figures when they differ; --json follows the flag.\n"
            "load checks (release accounting), in vLLM's words: the quantization method\n"
            "  against the card's compute capability (fp8 8.0 until 0.13, 7.5 from 0.14),\n"
            "  FP8 weight blocks and AWQ/GPTQ groups against tensor parallelism.\n"
            "  A checkpoint folder with safetensors is sized from the shard headers.\n"
            "  README.md (Which vLLM release) has the table.\n"
            "flags (vLLM's names; 32k = 32000, 128K = 131072 where vLLM takes them: --max-model-len\n"
            "from 0.8.4, --max-num-batched-tokens from 0.9.1, --kv-cache-memory-bytes):\n",
            DEFAULT_GPU, KV_JSON_SCHEMA_VERSION, kv_release_at(0)->first, kv_release_newest()->first, kv_release_newest()->first);
    for (int i = 0; i < kv_args_flag_count(); i++) {
        const kv_args_flag *fl = kv_args_flag_at(i);
        if (fl->kind == KV_ARG_NOTE || fl->kind == KV_ARG_NOTE_BOOL || fl->kind == KV_ARG_REFUSED)
            continue;
        fprintf(f, "  --%-26s %s (default %s)\n", fl->name, fl->help, fl->deflt);
    }
    fprintf(f, "every other option of the release's `vllm serve` is accepted with a note (the\n"
               "table engine/kv_vllm_flags_data.c is generated from each release's own parser,\n"
               "short forms such as -tp, -dp, -asc, -q, -O included, and argparse's unique\n"
               "prefixes): --port, --host, --lora-modules, --api-server-count, ... do not change\n"
               "memory; --speculative-config, --enable-sleep-mode, --kv-offloading-size,\n"
               "--compilation-config, ... are not modelled (the note says what they change);\n"
               "--limit-mm-per-prompt, --mm-processor-kwargs max_pixels, --skip-mm-profiling\n"
               "size the multimodal encoder profile (Qwen2.5-VL).\n"
               "A flag the --vllm-version lacks, a --quantization method or --kv-cache-dtype it\n"
               "does not list exit 2 in vLLM's words (\"vllm serve: error: unrecognized\n"
               "arguments: ...\", \"invalid choice\", \"Unknown quantization method\");\n"
               "--config FILE.yaml is read as vLLM reads it (keys are flag names; the line wins);\n"
               "--hf-overrides JSON is applied to config.json before planning.\n"
               "environment: VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (a length past the model's maximum\n"
               "warns instead of failing), VLLM_USE_FLASHINFER_SAMPLER=0/1 (the profile's sampler),\n"
               "VLLM_USE_V2_MODEL_RUNNER=0/1 (the model runner), VLLM_USE_V1=0 (the V0 engine,\n"
               "0.8.0-0.10.1.x), VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0/1 (the graph estimate\n"
               "off the budget).\n");
}

static const char *term_label(int i)
{
    static const char *const labels[] = {"budget", "weights", "activation", "CUDA graphs", "CUDA context", "NCCL",
                                         "non-torch", "KV cache"};
    return i >= 0 && i < KV_PLAN_NUM_TERMS ? labels[i] : "?";
}

/* One state of the compile cache: "KV 18.86 GiB, 176,192 tokens" or "would not start". */
static void compile_state(char *out, size_t n, int starts, double kv_bytes, int64_t tokens)
{
    char t[32];
    kv_fmt_thousands(t, sizeof t, tokens);
    if (starts)
        snprintf(out, n, "KV %.2f GiB, %s tokens", kv_bytes / KV_GIB, t);
    else
        snprintf(out, n, "would not start (KV %.2f GiB)", kv_bytes / KV_GIB);
}

/* Both figures when a cold torch.compile cache changes them (--compile-cache). */
static void print_compile_cache(const kv_plan *p)
{
    if (!p->other_valid)
        return;
    char here[96], other[96];
    compile_state(here, sizeof here, p->starts, p->available_kv_bytes, p->kv_cache_tokens);
    compile_state(other, sizeof other, p->other_starts, p->other_available_kv_bytes, p->other_kv_cache_tokens);
    const char *cold = p->compile_cache_warm ? other : here, *warm = p->compile_cache_warm ? here : other;
    printf("\ntorch.compile cache (--compile-cache %s):\n", p->compile_cache_warm ? "warm" : "cold");
    printf("  cold (first start, or a container without a kept ~/.cache/vllm): %s\n", cold);
    printf("  warm (a later start that reuses it):                            %s\n", warm);
}

static void print_report(const kv_model *m, const kv_plan *p, const char *notes)
{
    char a[32], b[32], c[32], rules[64];
    if (p->accounting == KV_ACCOUNTING_TEXTBOOK)
        snprintf(rules, sizeof rules, "textbook accounting");
    else
        snprintf(rules, sizeof rules, "vLLM %s accounting, %s%s", p->vllm_version, p->engine_v1 ? "V1" : "V0",
                 p->model_runner_v2 ? " runner V2" : "");
    printf("kvlab serve (%s): %s on %s (%.2f GiB reported)", rules, m->id, p->gpu_id, p->gpu_total_bytes / KV_GIB);
    if (p->tensor_parallel_size > 1)
        printf(" x %d, tensor_parallel_size %d", p->tensor_parallel_size, p->tensor_parallel_size);
    printf(", gpu_memory_utilization %g\n", p->gpu_memory_utilization);
    printf("model: %d layers, %s, %d KV heads x %d head_dim, %s weights, max_model_len %s%s\n", m->num_hidden_layers,
           kv_model_attention_kind(m), m->is_mla ? 1 : m->num_key_value_heads, p->head_size, p->weights_dtype,
           (kv_fmt_thousands(a, sizeof a, p->max_model_len), a), p->max_model_len_default ? " (the model's default)" : "");
    for (const char *s = notes; s && *s;) {
        const char *nl = strchr(s, '\n');
        int len = nl ? (int)(nl - s) : (int)strlen(s);
        printf("%.*s\n", len, s);
        s = nl ? nl + 1 : s + len;
    }
    for (int i = 0; i < p->num_notes; i++)
        printf("note: %s\n", p->notes[i]);

    printf("\nvLLM start-up log:\n");
    for (int i = 0; i < p->num_log; i++)
        printf("  %s\n", p->log[i]);

    printf("\nMemory per GPU (GiB):\n");
    for (int i = 0; i < KV_PLAN_NUM_TERMS; i++) {
        const kv_plan_term *t = &p->terms[i];
        if (!t->counted && t->bytes == 0)
            continue; /* not a term of this accounting */
        const char *sign = i == KV_PLAN_TERM_BUDGET ? " " : i == KV_PLAN_TERM_KV_CACHE ? "=" : t->counted ? "-" : " ";
        if (t->counted) {
            printf("  %s %-13s %-62s %8.2f\n", sign, term_label(i), t->how, t->bytes / KV_GIB);
        } else {
            char v[24];
            snprintf(v, sizeof v, "(%.2f)", t->bytes / KV_GIB);
            printf("  %s %-13s %-62s %9s\n", sign, term_label(i), t->how, v);
        }
    }

    print_compile_cache(p);

    kv_fmt_thousands(a, sizeof a, p->kv_bytes_per_token);
    if (p->kv_factor == 1)
        printf("\nKV cache per GPU: %s bytes per token = %d layers x one latent of %d values x %d bytes (%s, MLA)\n", a,
               p->num_layers, p->head_size, p->kv_dtype_bytes, p->kv_cache_dtype);
    else
        printf("\nKV cache per GPU: %s bytes per token = 2 (K,V) x %d layers x %d KV heads x %d x %d bytes (%s)\n", a,
               p->num_layers, p->kv_heads_per_gpu, p->head_size, p->kv_dtype_bytes, p->kv_cache_dtype);
    if (p->num_sliding_layers)
        printf("  %d layers slide over %d tokens: a request needs at most the window there\n", p->num_sliding_layers,
               p->sliding_window);
    if (p->starts && p->num_kv_groups > 1) {
        kv_fmt_thousands(a, sizeof a, p->num_blocks);
        kv_fmt_thousands(b, sizeof b, p->max_model_len);
        kv_fmt_thousands(c, sizeof c, p->blocks_per_request);
        printf("  num_blocks %s (block 0 is the null block), shared by %d KV cache groups of %d layers\n", a,
               p->num_kv_groups, p->group_size);
        printf("  one %s-token request takes %s blocks across the groups\n", b, c);
        double toks = p->max_concurrency * (double)p->max_model_len;
        kv_fmt_thousands(a, sizeof a, toks < 9e18 ? (long long)toks : (long long)9e18);
        printf("  %.2f requests of %s tokens fit at once (%s tokens)\n", p->max_concurrency, b, a);
        return;
    }
    if (p->starts) {
        kv_fmt_thousands(a, sizeof a, p->num_blocks);
        kv_fmt_thousands(b, sizeof b, p->kv_cache_tokens);
        kv_fmt_thousands(c, sizeof c, p->max_model_len);
        printf("  num_blocks %s (block 0 is the null block) x %d tokens = %s tokens\n", a, p->block_size, b);
        printf("  %.2f requests of %s tokens fit at once\n", p->max_concurrency, c);
        return;
    }
    if (p->error_kind == KV_PLAN_ERR_MAX_MODEL_LEN) {
        kv_fmt_thousands(a, sizeof a, p->max_model_len);
        kv_fmt_thousands(b, sizeof b, p->estimated_max_model_len);
        /* Say where the length came from: without --max-model-len vLLM takes
         * the model's own maximum, often far more than the card can hold. */
        printf("  max_model_len %s%s: one request that long needs %.2f GiB; %.2f GiB fits %s tokens\n", a,
               p->max_model_len_default ? " (the model's default: no --max-model-len given)" : "",
               (double)p->needed_bytes / KV_GIB, p->available_kv_bytes / KV_GIB, b);
    }
    printf("\nWould not start (%s). Fixes, cheapest first:\n", kv_plan_error_name(p->error_kind));
    if (p->num_fixes == 0)
        printf("  none of kvlab's fixes makes it start on this card\n");
    int ww = 0, fw = 0;
    for (int i = 0; i < p->num_fixes; i++) {
        int lw = (int)strlen(p->fixes[i].what), lf = (int)strlen(p->fixes[i].flags);
        ww = lw > ww ? lw : ww;
        fw = lf > fw ? lf : fw;
    }
    for (int i = 0; i < p->num_fixes; i++) {
        const kv_plan_fix *f = &p->fixes[i];
        printf("  %d. %-*s  %-*s  ", i + 1, ww, f->what, fw, f->flags);
        if (f->starts && f->lowers_max_model_len) {
            kv_fmt_thousands(a, sizeof a, f->kv_cache_tokens);
            printf("starts at that length: %s tokens\n", a);
        } else if (f->starts) {
            kv_fmt_thousands(a, sizeof a, f->kv_cache_tokens);
            kv_fmt_thousands(b, sizeof b, f->max_model_len);
            printf("starts: %s tokens, %.2fx at %s\n", a, f->max_concurrency, b);
        } else if (f->max_model_len > 0) {
            kv_fmt_thousands(b, sizeof b, f->max_model_len);
            printf("still fails (%s): KV %.2f GiB fits %s tokens\n", kv_plan_error_name(f->error_kind),
                   f->kv_cache_bytes / KV_GIB, b);
        } else {
            printf("still fails (%s): KV %.2f GiB\n", kv_plan_error_name(f->error_kind), f->kv_cache_bytes / KV_GIB);
        }
    }
}

static void add_notes_json(cJSON *o, const char *notes)
{
    cJSON *arr = cJSON_GetObjectItemCaseSensitive(o, "notes");
    if (!arr)
        return;
    int pos = 0;
    for (const char *s = notes; s && *s;) {
        const char *nl = strchr(s, '\n');
        size_t len = nl ? (size_t)(nl - s) : strlen(s);
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)len, s);
        cJSON_InsertItemInArray(arr, pos++, cJSON_CreateString(line));
        s = nl ? nl + 1 : s + len;
    }
}

/* --disaggregate P:D: what the split costs per request (kv_disagg.h): the
 * instances and GPUs, and the prompt KV that crosses the link. */
static double split_token_bytes_rank(const kv_plan *p)
{
    return p->block_size > 0 ? (double)p->page_size_bytes * (double)p->num_layers / (double)p->block_size : 0.0;
}

static void split_json(cJSON *o, const kv_plan *p, const kv_disagg_config *dc, kv_disagg_link link)
{
    int32_t tp = p->tensor_parallel_size > 0 ? p->tensor_parallel_size : 1;
    double tok = split_token_bytes_rank(p);
    cJSON *x = cJSON_AddObjectToObject(o, "disaggregated");
    cJSON_AddNumberToObject(x, "prefill_instances", dc->num_prefill);
    cJSON_AddNumberToObject(x, "decode_instances", dc->num_decode);
    cJSON_AddNumberToObject(x, "gpus", (double)(dc->num_prefill + dc->num_decode) * tp);
    cJSON_AddStringToObject(x, "kv_transfer_link", kv_disagg_link_name(link));
    cJSON_AddNumberToObject(x, "kv_transfer_link_bytes_per_s", dc->link_bytes_per_s);
    cJSON_AddNumberToObject(x, "kv_transfer_bytes_per_token", tok * tp);
    cJSON_AddNumberToObject(x, "kv_transfer_bytes_per_block", tok * tp * p->block_size);
    cJSON_AddNumberToObject(x, "kv_transfer_s_per_1k_tokens", 1000.0 * tok / dc->link_bytes_per_s);
}

static void split_text(const kv_plan *p, const kv_disagg_config *dc, kv_disagg_link link)
{
    int32_t tp = p->tensor_parallel_size > 0 ? p->tensor_parallel_size : 1;
    double tok = split_token_bytes_rank(p);
    printf("\nprefill/decode split (--disaggregate %d:%d): %d prefill + %d decode instances of this plan, %d GPUs.\n",
           dc->num_prefill, dc->num_decode, dc->num_prefill, dc->num_decode, (dc->num_prefill + dc->num_decode) * tp);
    printf("  Each request's prompt KV crosses %s once: %.0f KiB per token (%.2f MiB per %d-token block),\n",
           kv_disagg_link_name(link), tok * tp / 1024.0, tok * tp * p->block_size / 1048576.0, (int)p->block_size);
    printf("  %.2f ms per 1,000 prompt tokens at %.0f GB/s per GPU each way (kvlab simulate --disaggregate runs it).\n",
           1000.0 * 1000.0 * tok / dc->link_bytes_per_s, dc->link_bytes_per_s / 1e9);
}

int cmd_serve(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--vs"))
            return cmd_serve_vs(argc, argv); /* two command lines side by side */
    int json = 0;
    const char *split_arg = NULL, *link_arg = NULL;
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    if (!rest)
        return 2;
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if ((!strcmp(argv[i], "--disaggregate") || !strcmp(argv[i], "--kv-transfer-link")) && i + 1 < argc) {
            if (argv[i][2] == 'd')
                split_arg = argv[++i];
            else
                link_arg = argv[++i];
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            serve_usage(stdout);
            free(rest);
            return 0;
        } else
            rest[n++] = argv[i];
    }
    kv_disagg_config dcfg = {0};
    kv_disagg_link link = KV_LINK_RDMA;
    {
        char derr[200];
        if ((split_arg && kv_disagg_parse_split(split_arg, &dcfg.num_prefill, &dcfg.num_decode, derr, sizeof derr)) ||
            (link_arg && kv_disagg_link_parse(link_arg, &link, derr, sizeof derr)) || (link_arg && !split_arg &&
            snprintf(derr, sizeof derr, "--kv-transfer-link needs --disaggregate P:D") > 0)) {
            fprintf(stderr, "kvlab serve: %s\n", derr);
            free(rest);
            return 2;
        }
    }
    kv_args a;
    kv_args_init(&a);
    char err[1024] = "", notes[4096] = "";
    kvlab_serve_dev dev;
    n = kvlab_serve_dev_flags(n, rest, &dev, err, sizeof err);
    if (n < 0) {
        fprintf(stderr, "kvlab serve: %s\n", err);
        free(rest);
        return 2;
    }
    /* --hold and --no-placeholders say how to hold what --allocate allocates:
     * alone they would do nothing, which reads as if they had. */
    if (!dev.allocate && (dev.hold_s >= 0 || !dev.placeholders)) {
        fprintf(stderr, "kvlab serve: %s needs --allocate (it says how to hold the plan's memory on the GPU)\n",
                dev.hold_s >= 0 ? "--hold" : "--no-placeholders");
        free(rest);
        return 2;
    }
    kv_model m;
    int rc = kvlab_inputs_cli("serve", "kvlab serve MODEL [vLLM flags] [--gpu NAME]", &a, n, rest, notes, sizeof notes,
                              &m, NULL);
    free(rest);
    if (rc)
        return rc;
    const char *assets = kvlab_assets_dir();
    kv_gpu_catalog cat = {0};
    const kv_gpu *gpu = NULL;
    kv_gpu this_gpu;
    int pick = 0;
    if (a.gpu[0] || a.gpu_memory_gib < 0) {
        if (kv_gpu_catalog_load(assets, &cat, err, sizeof err) != KV_GPU_OK) {
            fprintf(stderr, "kvlab serve: %s\n", err);
            return 2;
        }
        /* The real card: --gpu this, or the default when a CUDA device answers. */
        pick = kvlab_serve_pick_gpu(&a, &cat, &dev, &this_gpu, err, sizeof err);
        if (pick < 0) {
            fprintf(stderr, "kvlab serve: %s\n", err);
            kv_gpu_catalog_free(&cat);
            return 2;
        }
        size_t nl = strlen(notes);
        snprintf(notes + nl, sizeof notes - nl, "%s", dev.note);
        if (pick) {
            gpu = &this_gpu;
        } else if (!a.gpu[0]) {
            size_t l = strlen(notes);
            snprintf(notes + l, sizeof notes - l, "note: no --gpu given; assuming %s\n", DEFAULT_GPU);
        }
        if (!pick)
            gpu = kv_gpu_find(&cat, a.gpu[0] ? a.gpu : DEFAULT_GPU, err, sizeof err);
        if (!gpu) {
            fprintf(stderr, "kvlab serve: %s\n", err);
            kv_gpu_catalog_free(&cat);
            return 2;
        }
    }
    kv_plan *p = malloc(sizeof *p);
    if (!p) {
        kv_gpu_catalog_free(&cat);
        return 2;
    }
    if (split_arg) {
        char lnote[200] = "";
        dcfg.link_bytes_per_s =
            kv_disagg_link_bytes_per_s(link, gpu ? gpu->pcie_gbps : 0, gpu ? gpu->nvlink_gbps : 0, lnote, sizeof lnote);
        if (lnote[0]) {
            size_t l = strlen(notes);
            snprintf(notes + l, sizeof notes - l, "note: %s\n", lnote);
        }
    }
    rc = kv_plan_compute(&m, gpu, &a, p, err, sizeof err);
    kv_gpu_catalog_free(&cat);
    if (rc != KV_PLAN_OK) {
        fprintf(stderr, "kvlab serve: %s\n", err);
        free(p);
        return 2;
    }
    int code = p->starts ? 0 : 1;
    kvlab_serve_mark_plan(p, &dev);
    kvlab_alloc_result alloc = {0};
    kv_device *held = dev.allocate ? kvlab_serve_allocate(p, &dev, &alloc) : NULL;
    if (dev.allocate && !alloc.ok)
        code = 1; /* a real OOM (or no device): it would not start here */
    if (json) {
        cJSON *o = kv_plan_to_json(p);
        if (o) {
            cJSON_AddStringToObject(o, "model", m.id);
            add_notes_json(o, notes);
            kvlab_serve_json_alloc(o, &alloc);
            if (split_arg)
                split_json(o, p, &dcfg, link);
            char *s = cJSON_Print(o);
            if (s)
                printf("%s\n", s);
            free(s);
            cJSON_Delete(o);
        }
    } else {
        print_report(&m, p, notes);
        kvlab_serve_print_alloc(stdout, &alloc);
        if (split_arg)
            split_text(p, &dcfg, link);
    }
    fflush(stdout);
    kvlab_serve_hold(&dev, &alloc);
    if (held)
        held->ops->destroy(held);
    free(p);
    return code;
}
