/* kvlab simulate MODEL --trace FILE|gen:... [vLLM flags] [--gpu NAME]
 * [--json] [--metrics]: plan the server as `kvlab serve` does, then run the
 * engine headless on a request trace and print what happened on the virtual
 * clock. Exit 0 ran, 1 the server would not start (vLLM's error printed),
 * 2 bad input (one clear line). Trace format: docs/trace-format.md. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "commands.h"
#include "events_out.h"
#include "kv_args.h"
#include "kv_disagg.h"
#include "kv_engine.h"
#include "kv_gpu.h"
#include "kv_model.h"
#include "kv_plan.h"
#include "kv_trace.h"
#include "kv_util.h"
#include "paths.h"
#include "plan_inputs.h"

#define DEFAULT_GPU "h100-80gb"

static void sim_usage(FILE *f)
{
    fprintf(f,
            "usage: kvlab simulate MODEL --trace FILE.jsonl|gen:KEY=V,... [vLLM flags] [--gpu NAME]\n"
            "                      [--json] [--metrics] [--mode paged|contiguous|no-cache] [--seed N] [--verify]\n"
            "  --trace FILE      JSONL, one request per line: arrival_s, output_tokens, prompt_tokens or\n"
            "                    prompt_token_ids; optional prefix_id + prefix_tokens, priority, cache_salt\n"
            "  --trace gen:...   seeded generator, e.g. gen:requests=1000,rate=20,prompt=1024,output=256,\n"
            "                    shared=0.3,prefix=2048,prefixes=4,seed=1 (see docs/trace-format.md)\n"
            "  --json            print the summary as one JSON object (notes in \"notes\")\n"
            "  --metrics         print the metrics in Prometheus text format (vLLM's names); with\n"
            "                    --json, as the object's \"prometheus\" string\n"
            "  --mode M          paged (vLLM, default), contiguous (max_model_len slabs), no-cache\n"
            "  --seed N          seed for generated token ids (default 0)\n"
            "  --verify          write K/V to the device and read every running request back each step\n"
            "  --device          use the CUDA backend when one answers (default: host backend)\n"
            "  --steps-out FILE  write every step's decisions (JSONL: requests with their token ids, then per\n"
            "                    step the arrivals, scheduled tokens, admissions with prefix hits, preemptions,\n"
            "                    finishes and counters), for tests/vllm/ to replay on vLLM's own scheduler\n"
            "  --events FILE     write the engine's event stream (JSONL: block allocations, frees, prefix-cache\n"
            "                    hits, evictions, admissions, preemptions, finishes, log lines; docs/events.md)\n"
            "  --scheduling-policy fcfs|priority   (vLLM's flag; priority: smaller runs sooner)\n"
            "  --kv-offloading-size GIB   (vLLM 0.11.1+) a CPU tier behind the GPU pool, as vLLM's\n"
            "                    OffloadingConnector: full blocks stored, loaded back on a prefix hit over the\n"
            "                    card's PCIe link; --json adds external_prefix_cache_queries/_hits (also from\n"
            "                    --kv-transfer-config '{\"kv_connector\":\"OffloadingConnector\",...}')\n"
            "  --disaggregate P:D  also run the trace split over P prefill and D decode instances of the same\n"
            "                    plan (vLLM's NixlConnector with a proxy): each prompt's KV crosses a link once;\n"
            "                    prints TTFT, inter-token latency and kv_transfer_bytes next to the one-instance run\n"
            "  --kv-transfer-link rdma|nvlink|pcie   the split's link: 400 Gb/s NIC per GPU (default), the\n"
            "                    card's NVLink or its PCIe link, one direction\n"
            "vLLM flags as in `kvlab serve` (--max-model-len, --kv-cache-dtype, --max-num-seqs, ...);\n"
            "--gpu defaults to %s; --gpu this plans for this machine's CUDA device.\n",
            DEFAULT_GPU);
}

/* The notes a run carries (one per line in `notes`, as kv_args_parse and
 * the plan write them), without their "note: " prefix: to stderr with the
 * command's name, or as the JSON object's "notes" list. */
static void add_note(char *notes, size_t cap, const char *text)
{
    if (!text || !*text)
        return;
    if (!strncmp(text, "note: ", 6))
        text += 6;
    size_t n = strlen(text);
    while (n && (text[n - 1] == ' ' || text[n - 1] == '\n'))
        n--;
    size_t l = strlen(notes);
    snprintf(notes + l, cap - l, "%.*s\n", (int)n, text);
}

static void print_notes(const char *notes, cJSON *json_list)
{
    for (const char *s = notes; s && *s;) {
        const char *nl = strchr(s, '\n');
        int len = (int)(nl ? (size_t)(nl - s) : strlen(s));
        if (len > 0) {
            if (json_list) {
                char line[600];
                snprintf(line, sizeof line, "%.*s", len, s);
                cJSON_AddItemToArray(json_list, cJSON_CreateString(line));
            } else {
                fprintf(stderr, "kvlab simulate: note: %.*s\n", len, s);
            }
        }
        s = nl ? nl + 1 : s + len;
    }
}

/* ---- --steps-out ---------------------------------------------------- */

static void ids_json(FILE *f, const int64_t *ids, int32_t n)
{
    fputc('[', f);
    for (int32_t i = 0; i < n; i++)
        fprintf(f, i ? ",%lld" : "%lld", (long long)ids[i]);
    fputc(']', f);
}

static void steps_config(FILE *f, const kv_engine *e)
{
    const kv_engine_config *c = kv_engine_get_config(e);
    const kv_sched_rules *r = &c->sched_rules;
    static const char *modes[] = {"paged", "contiguous", "no-cache"};
    fprintf(f,
            "{\"type\":\"config\",\"num_blocks\":%d,\"block_size\":%d,\"max_model_len\":%d,\"max_num_seqs\":%d,"
            "\"max_num_batched_tokens\":%d,\"long_prefill_token_threshold\":%d,\"enable_prefix_caching\":%d,"
            "\"enable_chunked_prefill\":%d,\"policy\":\"%s\",\"mode\":\"%s\",\"rules\":{\"reserve_full_prompt\":%d,"
            "\"watermark\":%.17g,\"priority_self_continue\":%d,\"priority_unschedule_victim\":%d,"
            "\"free_uncached_first\":%d,\"stats_at_admission\":%d,\"stats_split_preempted\":%d,"
            "\"skip_unchunkable\":%d,\"long_prefill_needs_two\":%d}}\n",
            (int)c->num_blocks, (int)c->block_size, (int)c->max_model_len, (int)c->max_num_seqs,
            (int)c->max_num_batched_tokens, (int)c->long_prefill_token_threshold, c->enable_prefix_caching,
            c->enable_chunked_prefill, c->scheduling_policy == KV_POLICY_PRIORITY ? "priority" : "fcfs",
            modes[c->mode], r->reserve_full_prompt, r->watermark, r->priority_self_continue,
            r->priority_unschedule_victim, r->free_uncached_first, r->stats_at_admission, r->stats_split_preempted,
            r->skip_unchunkable, r->long_prefill_needs_two);
}

static void steps_request(FILE *f, const kv_engine *e, int64_t id, const kv_request_spec *sp)
{
    kv_request_view v;
    if (kv_engine_request(e, id, &v) != 0)
        return;
    fprintf(f, "{\"type\":\"request\",\"id\":%lld,\"arrival_s\":%.17g,\"priority\":%d,\"cache_salt\":", (long long)id,
            v.arrival_s, (int)v.priority);
    if (sp->cache_salt && sp->cache_salt[0]) {
        fputc('"', f);
        for (const char *c = sp->cache_salt; *c; c++) {
            if (*c == '"' || *c == '\\')
                fputc('\\', f);
            if ((unsigned char)*c < 0x20)
                fprintf(f, "\\u%04x", (unsigned char)*c);
            else
                fputc(*c, f);
        }
        fputc('"', f);
    } else {
        fputs("null", f);
    }
    fprintf(f, ",\"max_tokens\":%d,\"prompt_token_ids\":[", (int)v.output_tokens);
    for (int32_t p = 0; p < v.prompt_tokens; p++)
        fprintf(f, p ? ",%d" : "%d", (int)kv_engine_future_token(e, id, p));
    fputs("],\"output_token_ids\":[", f);
    for (int32_t p = v.prompt_tokens, k = 0;; p++, k++) {
        int32_t t = kv_engine_future_token(e, id, p);
        if (t < 0)
            break;
        fprintf(f, k ? ",%d" : "%d", (int)t);
    }
    fputs("]}\n", f);
}

static void steps_step(FILE *f, const kv_engine *e, const int64_t *arrived, int32_t narrived)
{
    kv_step_detail d;
    kv_engine_last_step(e, &d);
    kv_engine_metrics m;
    kv_engine_get_metrics(e, &m);
    kv_engine_info info;
    kv_engine_get_info(e, &info);
    fprintf(f, "{\"type\":\"step\",\"step\":%lld,\"arrived\":", (long long)d.step);
    ids_json(f, arrived, narrived);
    fputs(",\"scheduled\":[", f);
    for (int32_t k = 0; k < d.num_scheduled; k++)
        fprintf(f, k ? ",[%lld,%d]" : "[%lld,%d]", (long long)d.ids[k], (int)d.num_tokens[k]);
    fputs("],\"admitted\":[", f);
    for (int32_t k = d.first_admitted; k < d.num_scheduled; k++)
        fprintf(f, k > d.first_admitted ? ",[%lld,%d,%d]" : "[%lld,%d,%d]", (long long)d.ids[k], (int)d.hit_tokens[k],
                (int)d.resumed[k]);
    fputs("],\"preempted\":", f);
    ids_json(f, d.preempted, d.num_preempted);
    fputs(",\"finished\":", f);
    ids_json(f, d.finished, d.num_finished);
    fprintf(f,
            ",\"num_running\":%d,\"num_waiting\":%d,\"num_free_blocks\":%d,\"prefix_cache_queries\":%lld,"
            "\"prefix_cache_hits\":%lld,\"preempted_prefix_cache_queries\":%lld,\"preempted_prefix_cache_hits\":%lld,"
            "\"block_allocations\":%lld,\"block_frees\":%lld,\"block_evictions\":%lld,\"num_preemptions_total\":%lld}\n",
            (int)info.num_running, (int)info.num_waiting, (int)info.num_free_blocks, (long long)m.prefix_cache_queries,
            (long long)m.prefix_cache_hits, (long long)m.preempted_prefix_cache_queries,
            (long long)m.preempted_prefix_cache_hits, (long long)m.block_allocations, (long long)m.block_frees,
            (long long)m.block_evictions, (long long)m.num_preemptions_total);
}

/* {ttft,itl,e2e_latency,queue_time}_{mean,p50,p99,max}_s into o, as the
 * summary and its prefill/decode split both print them. */
static void add_latencies(cJSON *o, const kv_latency_stats *ttft, const kv_latency_stats *itl,
                          const kv_latency_stats *e2e, const kv_latency_stats *queue)
{
    const struct { const char *k; const kv_latency_stats *s; } lat[] = {
        {"ttft", ttft}, {"itl", itl}, {"e2e_latency", e2e}, {"queue_time", queue}};
    char key[48];
    for (size_t i = 0; i < sizeof lat / sizeof lat[0]; i++) {
        const struct { const char *suffix; double v; } f[] = {
            {"mean", lat[i].s->mean}, {"p50", lat[i].s->p50}, {"p99", lat[i].s->p99}, {"max", lat[i].s->max}};
        for (size_t j = 0; j < sizeof f / sizeof f[0]; j++) {
            snprintf(key, sizeof key, "%s_%s_s", lat[i].k, f[j].suffix);
            cJSON_AddNumberToObject(o, key, f[j].v);
        }
    }
}

static void summary_json(const kv_engine *e, const kv_plan *p, const kv_model *m, const char *trace_name,
                         int64_t submitted, int64_t rejected, const char *first_reject, const kv_engine_info *info,
                         const char *notes, const char *prometheus, const kv_disagg_stats *ds,
                         const char *link_name, const char *dprom)
{
    kv_engine_metrics mt;
    kv_engine_get_metrics(e, &mt);
    double dur = info->clock_s;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "schema_version", KV_JSON_SCHEMA_VERSION);
    cJSON_AddStringToObject(o, "model", m->id);
    cJSON_AddStringToObject(o, "gpu", p->gpu_id);
    cJSON_AddStringToObject(o, "device_name", p->device_name);
    cJSON_AddStringToObject(o, "trace", trace_name);
    static const char *modes[] = {"paged", "contiguous", "no-cache"};
    cJSON_AddStringToObject(o, "mode", modes[info->mode]);
    cJSON_AddNumberToObject(o, "tensor_parallel_size", info->tensor_parallel_size);
    cJSON_AddNumberToObject(o, "num_blocks", info->num_blocks);
    cJSON_AddNumberToObject(o, "block_size", info->block_size);
    /* The pool the run used. The engine runs every layer as full attention
     * (one KV cache group, as vLLM with --disable-hybrid-kv-cache-manager),
     * so its blocks hold num_blocks x block_size tokens; serve's figure for
     * the hybrid plan is plan_kv_cache_tokens. */
    cJSON_AddNumberToObject(o, "kv_cache_tokens", (double)info->num_blocks * info->block_size);
    cJSON_AddNumberToObject(o, "num_kv_cache_groups", 1);
    cJSON_AddNumberToObject(o, "plan_kv_cache_tokens", (double)p->kv_cache_tokens_logged);
    cJSON_AddNumberToObject(o, "max_model_len", (double)p->max_model_len);
    cJSON_AddNumberToObject(o, "requests_submitted", (double)submitted);
    cJSON_AddNumberToObject(o, "requests_rejected", (double)rejected);
    if (first_reject)
        cJSON_AddStringToObject(o, "first_rejection", first_reject);
    else
        cJSON_AddNullToObject(o, "first_rejection");
    cJSON_AddNumberToObject(o, "requests_finished", (double)mt.request_success_total);
    cJSON_AddNumberToObject(o, "prompt_tokens", (double)mt.prompt_tokens_total);
    cJSON_AddNumberToObject(o, "generation_tokens", (double)mt.generation_tokens_total);
    cJSON_AddNumberToObject(o, "preemptions", (double)mt.num_preemptions_total);
    cJSON_AddNumberToObject(o, "recomputed_tokens", (double)mt.recomputed_tokens);
    cJSON_AddNumberToObject(o, "peak_kv_usage", mt.peak_kv_usage);
    cJSON_AddNumberToObject(o, "mean_kv_usage", mt.mean_kv_usage);
    cJSON_AddNumberToObject(o, "prefix_cache_queries", (double)mt.prefix_cache_queries);
    cJSON_AddNumberToObject(o, "prefix_cache_hits", (double)mt.prefix_cache_hits);
    cJSON_AddNumberToObject(o, "prefix_cache_hit_rate",
                            mt.prefix_cache_queries ? (double)mt.prefix_cache_hits / (double)mt.prefix_cache_queries : 0.0);
    /* the host tier (--kv-offloading-size; 0 without one): vLLM's connector prefix-cache counters */
    cJSON_AddNumberToObject(o, "external_prefix_cache_queries", (double)mt.external_prefix_cache_queries);
    cJSON_AddNumberToObject(o, "external_prefix_cache_hits", (double)mt.external_prefix_cache_hits);
    cJSON_AddNumberToObject(o, "reused_tokens", (double)(mt.prefix_cache_hits + mt.preempted_prefix_cache_hits +
                                                         mt.external_prefix_cache_hits));
    if (mt.offload_capacity_blocks > 0) {
        cJSON_AddNumberToObject(o, "offload_capacity_blocks", (double)mt.offload_capacity_blocks);
        cJSON_AddNumberToObject(o, "offload_stored_blocks", (double)mt.offload_stored_blocks);
        cJSON_AddNumberToObject(o, "offload_loaded_blocks", (double)mt.offload_loaded_blocks);
        cJSON_AddNumberToObject(o, "offload_evicted_blocks", (double)mt.offload_evicted_blocks);
        cJSON_AddNumberToObject(o, "offload_load_s", mt.offload_load_s);
    }
    cJSON_AddNumberToObject(o, "mean_num_requests_waiting", mt.mean_num_requests_waiting);
    cJSON_AddNumberToObject(o, "mean_num_requests_running", mt.mean_num_requests_running);
    cJSON_AddNumberToObject(o, "steps", (double)info->step);
    cJSON_AddNumberToObject(o, "duration_s", dur);
    cJSON_AddNumberToObject(o, "throughput_tokens_per_s",
                            dur > 0 ? (double)(mt.prompt_tokens_total + mt.generation_tokens_total) / dur : 0.0);
    cJSON_AddNumberToObject(o, "output_throughput_tokens_per_s",
                            dur > 0 ? (double)mt.generation_tokens_total / dur : 0.0);
    cJSON_AddNumberToObject(o, "requests_per_s", dur > 0 ? (double)mt.request_success_total / dur : 0.0);
    add_latencies(o, &mt.ttft, &mt.itl, &mt.e2e, &mt.queue);
    cJSON_AddNumberToObject(o, "block_allocations", (double)mt.block_allocations);
    cJSON_AddNumberToObject(o, "block_frees", (double)mt.block_frees);
    cJSON_AddNumberToObject(o, "block_evictions", (double)mt.block_evictions);
    cJSON_AddNumberToObject(o, "work_tokens_with_cache", (double)mt.work_tokens_with_cache);
    cJSON_AddNumberToObject(o, "work_tokens_without_cache", (double)mt.work_tokens_without_cache);
    if (ds) {
        /* the same trace over a prefill/decode split (kv_disagg.h) */
        cJSON *x = cJSON_AddObjectToObject(o, "disaggregated");
        cJSON_AddNumberToObject(x, "prefill_instances", ds->num_prefill);
        cJSON_AddNumberToObject(x, "decode_instances", ds->num_decode);
        cJSON_AddStringToObject(x, "kv_transfer_link", link_name);
        cJSON_AddNumberToObject(x, "kv_transfer_link_bytes_per_s", ds->link_bytes_per_s);
        cJSON_AddNumberToObject(x, "requests_submitted", (double)ds->requests_added);
        cJSON_AddNumberToObject(x, "requests_rejected", (double)ds->requests_rejected);
        cJSON_AddNumberToObject(x, "requests_prefilled", (double)ds->requests_prefilled);
        cJSON_AddNumberToObject(x, "requests_finished", (double)ds->requests_finished);
        cJSON_AddNumberToObject(x, "kv_transfers", (double)ds->kv_transfers);
        cJSON_AddNumberToObject(x, "kv_transfer_bytes", (double)ds->kv_transfer_bytes);
        cJSON_AddNumberToObject(x, "kv_transfer_s", ds->kv_transfer_s);
        cJSON_AddNumberToObject(x, "kv_transfer_wait_s", ds->kv_transfer_wait_s);
        cJSON_AddNumberToObject(x, "prefill_peak_kv_usage", ds->prefill_peak_kv_usage);
        cJSON_AddNumberToObject(x, "decode_peak_kv_usage", ds->decode_peak_kv_usage);
        cJSON_AddNumberToObject(x, "prefill_mean_kv_usage", ds->prefill_mean_kv_usage);
        cJSON_AddNumberToObject(x, "decode_mean_kv_usage", ds->decode_mean_kv_usage);
        cJSON_AddNumberToObject(x, "remote_prefill_tokens", (double)ds->remote_prefill_tokens);
        cJSON_AddNumberToObject(x, "prompt_tokens", (double)ds->prompt_tokens);
        cJSON_AddNumberToObject(x, "generation_tokens", (double)ds->generation_tokens);
        cJSON_AddNumberToObject(x, "preemptions", (double)ds->preemptions);
        cJSON_AddNumberToObject(x, "duration_s", ds->duration_s);
        cJSON_AddNumberToObject(x, "output_throughput_tokens_per_s",
                                ds->duration_s > 0 ? (double)ds->generation_tokens / ds->duration_s : 0.0);
        add_latencies(x, &ds->ttft, &ds->itl, &ds->e2e, &ds->queue);
        if (dprom)
            cJSON_AddStringToObject(x, "prometheus", dprom);
    }
    print_notes(notes, cJSON_AddArrayToObject(o, "notes"));
    if (prometheus)
        cJSON_AddStringToObject(o, "prometheus", prometheus);
    char *s = cJSON_Print(o);
    if (s)
        printf("%s\n", s);
    free(s);
    cJSON_Delete(o);
}

static void summary_text(const kv_engine *e, const kv_plan *p, const kv_model *m, const char *trace_name,
                         int64_t submitted, int64_t rejected, const char *first_reject, const kv_engine_info *info)
{
    kv_engine_metrics mt;
    kv_engine_get_metrics(e, &mt);
    double dur = info->clock_s;
    printf("kvlab simulate: %s on %s", m->id, p->gpu_id);
    if (info->tensor_parallel_size > 1)
        printf(" x %d (tensor_parallel_size %d)", info->tensor_parallel_size, info->tensor_parallel_size);
    printf(", trace %s\n", trace_name);
    printf("  pool                  %d blocks x %d tokens = %lld tokens (block 0 is the null block), max_model_len %lld\n",
           info->num_blocks, info->block_size, (long long)info->num_blocks * info->block_size, (long long)p->max_model_len);
    printf("  requests finished     %lld of %lld submitted", (long long)mt.request_success_total, (long long)submitted);
    if (rejected)
        printf(" (%lld rejected: %s)", (long long)rejected, first_reject ? first_reject : "");
    printf("\n");
    printf("  prompt tokens         %lld\n", (long long)mt.prompt_tokens_total);
    printf("  generation tokens     %lld\n", (long long)mt.generation_tokens_total);
    printf("  preemptions           %lld (%lld tokens recomputed)\n", (long long)mt.num_preemptions_total,
           (long long)mt.recomputed_tokens);
    printf("  KV cache usage        peak %.1f%%, mean %.1f%%\n", 100 * mt.peak_kv_usage, 100 * mt.mean_kv_usage);
    printf("  prefix cache          %lld hit of %lld queried tokens (%.1f%%)\n", (long long)mt.prefix_cache_hits,
           (long long)mt.prefix_cache_queries,
           mt.prefix_cache_queries ? 100.0 * (double)mt.prefix_cache_hits / (double)mt.prefix_cache_queries : 0.0);
    if (mt.offload_capacity_blocks > 0)
        printf("  CPU offload tier      %lld external hit of %lld queried tokens; %lld of %lld blocks stored, %lld "
               "loaded (%.3f s on the host link), %lld evicted\n",
               (long long)mt.external_prefix_cache_hits, (long long)mt.external_prefix_cache_queries,
               (long long)mt.offload_stored_blocks, (long long)mt.offload_capacity_blocks,
               (long long)mt.offload_loaded_blocks, mt.offload_load_s, (long long)mt.offload_evicted_blocks);
    printf("  mean queue length     %.2f waiting, %.2f running\n", mt.mean_num_requests_waiting,
           mt.mean_num_requests_running);
    printf("  duration              %.3f s on the virtual clock, %lld steps\n", dur, (long long)info->step);
    printf("  throughput            %.0f tokens/s (output %.0f tokens/s)\n",
           dur > 0 ? (double)(mt.prompt_tokens_total + mt.generation_tokens_total) / dur : 0.0,
           dur > 0 ? (double)mt.generation_tokens_total / dur : 0.0);
    printf("  time to first token   mean %.4f s, p50 %.4f s, p99 %.4f s\n", mt.ttft.mean, mt.ttft.p50, mt.ttft.p99);
    printf("  inter-token latency   mean %.4f s, p50 %.4f s, p99 %.4f s\n", mt.itl.mean, mt.itl.p50, mt.itl.p99);
    printf("  request latency       mean %.3f s, p50 %.3f s, p99 %.3f s\n", mt.e2e.mean, mt.e2e.p50, mt.e2e.p99);
    printf("  queue time            mean %.3f s, p99 %.3f s\n", mt.queue.mean, mt.queue.p99);
}

static void disagg_text(const kv_disagg_stats *ds, const char *link_name)
{
    printf("prefill/decode split: %d prefill + %d decode instances of the plan above, KV over %s (%.0f GB/s each "
           "way per GPU)\n",
           ds->num_prefill, ds->num_decode, link_name, ds->link_bytes_per_s / 1e9);
    printf("  requests finished     %lld of %lld submitted", (long long)ds->requests_finished,
           (long long)ds->requests_added);
    if (ds->requests_rejected)
        printf(" (%lld rejected)", (long long)ds->requests_rejected);
    printf("\n");
    printf("  KV transfers          %lld, %.2f GiB moved (kv_transfer_bytes %lld), %.3f s on the link, %.3f s "
           "waiting for it\n",
           (long long)ds->kv_transfers, (double)ds->kv_transfer_bytes / 1073741824.0, (long long)ds->kv_transfer_bytes,
           ds->kv_transfer_s, ds->kv_transfer_wait_s);
    printf("  duration              %.3f s on the virtual clock\n", ds->duration_s);
    printf("  time to first token   mean %.4f s, p50 %.4f s, p99 %.4f s\n", ds->ttft.mean, ds->ttft.p50, ds->ttft.p99);
    printf("  inter-token latency   mean %.4f s, p50 %.4f s, p99 %.4f s\n", ds->itl.mean, ds->itl.p50, ds->itl.p99);
    printf("  request latency       mean %.3f s, p50 %.3f s, p99 %.3f s\n", ds->e2e.mean, ds->e2e.p50, ds->e2e.p99);
}

int cmd_simulate(int argc, char **argv)
{
    int json = 0, metrics = 0, verify = 0, use_device = 0;
    const char *trace_arg = NULL, *mode_arg = NULL, *steps_arg = NULL, *events_arg = NULL, *split_arg = NULL,
               *link_arg = NULL;
    unsigned long long seed = 0;
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    if (!rest)
        return 2;
    int n = 0;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (!strcmp(s, "--json"))
            json = 1;
        else if (!strcmp(s, "--metrics"))
            metrics = 1;
        else if (!strcmp(s, "--verify"))
            verify = 1;
        else if (!strcmp(s, "--device"))
            use_device = 1;
        else if (!strcmp(s, "--help") || !strcmp(s, "-h")) {
            sim_usage(stdout);
            free(rest);
            return 0;
        } else if (!strcmp(s, "--trace") || !strcmp(s, "--mode") || !strcmp(s, "--seed") || !strcmp(s, "--steps-out") ||
                   !strcmp(s, "--events") || !strcmp(s, "--disaggregate") || !strcmp(s, "--kv-transfer-link")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "kvlab simulate: %s needs a value\n", s);
                free(rest);
                return 2;
            }
            const char *v = argv[++i];
            if (!strcmp(s, "--trace"))
                trace_arg = v;
            else if (!strcmp(s, "--steps-out"))
                steps_arg = v;
            else if (!strcmp(s, "--events"))
                events_arg = v;
            else if (!strcmp(s, "--disaggregate"))
                split_arg = v;
            else if (!strcmp(s, "--kv-transfer-link"))
                link_arg = v;
            else if (!strcmp(s, "--mode"))
                mode_arg = v;
            else {
                char *end;
                seed = strtoull(v, &end, 10);
                if (*end || end == v || v[0] == '-') {
                    fprintf(stderr, "kvlab simulate: --seed: '%s' is not a whole number >= 0\n", v);
                    free(rest);
                    return 2;
                }
            }
        } else if (!strncmp(s, "--trace=", 8))
            trace_arg = s + 8;
        else if (!strncmp(s, "--mode=", 7))
            mode_arg = s + 7;
        else if (!strncmp(s, "--steps-out=", 12))
            steps_arg = s + 12;
        else if (!strncmp(s, "--events=", 9))
            events_arg = s + 9;
        else if (!strncmp(s, "--disaggregate=", 15))
            split_arg = s + 15;
        else if (!strncmp(s, "--kv-transfer-link=", 19))
            link_arg = s + 19;
        else
            rest[n++] = argv[i];
    }
    int mode = KV_MODE_PAGED;
    if (mode_arg) {
        if (!strcmp(mode_arg, "paged"))
            mode = KV_MODE_PAGED;
        else if (!strcmp(mode_arg, "contiguous"))
            mode = KV_MODE_CONTIGUOUS;
        else if (!strcmp(mode_arg, "no-cache") || !strcmp(mode_arg, "no_cache"))
            mode = KV_MODE_NO_CACHE;
        else {
            fprintf(stderr, "kvlab simulate: --mode: '%s' is not one of paged, contiguous, no-cache\n", mode_arg);
            free(rest);
            return 2;
        }
    }
    kv_disagg_config dcfg = {0};
    kv_disagg_link link = KV_LINK_RDMA;
    {
        char derr[200];
        if ((split_arg && kv_disagg_parse_split(split_arg, &dcfg.num_prefill, &dcfg.num_decode, derr, sizeof derr)) ||
            (link_arg && kv_disagg_link_parse(link_arg, &link, derr, sizeof derr))) {
            fprintf(stderr, "kvlab simulate: %s\n", derr);
            free(rest);
            return 2;
        }
        if (link_arg && !split_arg) {
            fprintf(stderr, "kvlab simulate: --kv-transfer-link needs --disaggregate P:D\n");
            free(rest);
            return 2;
        }
        if (split_arg && (verify || use_device || steps_arg || events_arg || mode != KV_MODE_PAGED)) {
            fprintf(stderr, "kvlab simulate: --disaggregate runs paged host-backend engines; it does not combine "
                            "with --verify, --device, --steps-out, --events or --mode\n");
            free(rest);
            return 2;
        }
    }
    kv_args a;
    kv_args_init(&a);
    char err[1024] = "", args_notes[2048] = "", notes[4096] = "";
    kv_model m;
    int rc = kvlab_inputs_cli("simulate", "kvlab simulate MODEL --trace FILE", &a, n, rest, args_notes,
                              sizeof args_notes, &m, NULL);
    free(rest);
    if (rc)
        return rc;
    for (char *line = strtok(args_notes, "\n"); line; line = strtok(NULL, "\n"))
        add_note(notes, sizeof notes, line);
    if (!trace_arg) {
        fprintf(stderr, "kvlab simulate: no --trace given (a JSONL file or gen:...; see kvlab simulate --help)\n");
        return 2;
    }
    kv_trace tr;
    if (kv_trace_open(trace_arg, &tr, err, sizeof err) != 0) {
        fprintf(stderr, "kvlab simulate: trace %s\n", err);
        return 2;
    }
    const char *assets = kvlab_assets_dir();
    kv_gpu_catalog cat = {0};
    const kv_gpu *gpu = NULL;
    kv_gpu this_gpu;
    if (a.gpu[0] || a.gpu_memory_gib < 0) {
        if (kv_gpu_catalog_load(assets, &cat, err, sizeof err) != KV_GPU_OK) {
            fprintf(stderr, "kvlab simulate: %s\n", err);
            kv_trace_free(&tr);
            return 2;
        }
        if (!strcmp(a.gpu, "this")) {
            /* the real card, measured (as `kvlab serve --gpu this`) */
            kvlab_serve_dev sd;
            memset(&sd, 0, sizeof sd);
            sd.placeholders = 1;
            sd.context_bytes = -1;
            if (kvlab_serve_pick_gpu(&a, &cat, &sd, &this_gpu, err, sizeof err) == 1)
                gpu = &this_gpu;
        } else {
            gpu = kv_gpu_find(&cat, a.gpu[0] ? a.gpu : DEFAULT_GPU, err, sizeof err);
            if (!a.gpu[0])
                add_note(notes, sizeof notes, "no --gpu given; assuming " DEFAULT_GPU);
        }
        if (!gpu) {
            fprintf(stderr, "kvlab simulate: %s\n", err);
            kv_gpu_catalog_free(&cat);
            kv_trace_free(&tr);
            return 2;
        }
    }
    kv_plan *plan = malloc(sizeof *plan);
    if (!plan) {
        kv_gpu_catalog_free(&cat);
        kv_trace_free(&tr);
        return 2;
    }
    memset(plan, 0, sizeof *plan);
    int code = 0;
    kv_engine *e = NULL;
    char *dprom = NULL; /* the split's NIXL metrics (--metrics) */
    FILE *steps = NULL;
    kvlab_events_out evo = {0};
    int64_t *arrived = NULL;
    int32_t narrived = 0;
    kv_device *dev = NULL;
    if (use_device)
        dev = kvlab_backend_open(a.tensor_parallel_size > 0 ? a.tensor_parallel_size : 1, 0, NULL, NULL, 0);
    if (kv_plan_compute_nofix(&m, gpu, &a, plan, err, sizeof err) != KV_PLAN_OK) {
        fprintf(stderr, "kvlab simulate: %s\n", err);
        code = 2;
        goto done;
    }
    if (!plan->starts) {
        fprintf(stderr, "kvlab simulate: the server would not start:\n%s\n", plan->error);
        code = 1;
        goto done;
    }
    kv_engine_config cfg;
    char note[512];
    rc = kv_engine_config_from_plan(plan, &m, gpu, &a, &cfg, note, sizeof note, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "kvlab simulate: %s\n", err);
        code = rc == KV_ENGINE_ERANGE ? 2 : 1; /* past an engine limit: bad input */
        goto done;
    }
    for (int i = 0; i < plan->num_notes; i++)
        add_note(notes, sizeof notes, plan->notes[i]);
    add_note(notes, sizeof notes, note);
    cfg.mode = mode;
    cfg.seed = seed;
    cfg.verify = verify;
    cfg.write_kv = verify || use_device;
    cfg.block_events = events_arg != NULL; /* else nobody watches: request events and logs only */
    if (events_arg)
        cfg.event_capacity = kvlab_events_capacity(cfg.num_blocks, cfg.max_num_seqs);
    cfg.device = dev;
    if (kv_engine_config_check(&cfg, err, sizeof err) != 0) {
        fprintf(stderr, "kvlab simulate: %s\n", err);
        code = 2;
        goto done;
    }
    e = kv_engine_create(&cfg, err, sizeof err);
    if (!e) {
        fprintf(stderr, "kvlab simulate: %s\n", err);
        code = 1;
        goto done;
    }
    if (kv_engine_device_scale(e) < 1.0) {
        char sc[300];
        snprintf(sc, sizeof sc, "the ranks share %s cards: every term and the pool scaled by %.3f to fit (%d blocks)",
                 kv_engine_device_name(e), kv_engine_device_scale(e), (int)kv_engine_get_config(e)->num_blocks);
        add_note(notes, sizeof notes, sc);
    }
    if (!json)
        print_notes(notes, NULL);
    /* outputs are regular files and never one of the inputs (kv_open_output) */
    const char *inputs[2] = {trace_arg, steps_arg};
    if (steps_arg) {
        char oerr[600];
        steps = kv_open_output(steps_arg, "w", inputs, 1, oerr, sizeof oerr);
        arrived = malloc((size_t)(tr.count > 0 ? tr.count : 1) * sizeof *arrived);
        if (!steps || !arrived) {
            fprintf(stderr, "kvlab simulate: --steps-out %s\n", steps ? "out of memory" : oerr);
            code = 2;
            goto done;
        }
        steps_config(steps, e);
    }
    if (events_arg) {
        char oerr[600];
        if (!(evo.f = kv_open_output(events_arg, "w", inputs, 2, oerr, sizeof oerr))) {
            fprintf(stderr, "kvlab simulate: --events %s\n", oerr);
            code = 2;
            goto done;
        }
    }
    int64_t next = 0, rejected = 0;
    char first_reject[700] = "";
    kv_engine_info info;
    for (;;) {
        kv_engine_get_info(e, &info);
        while (next < tr.count && tr.reqs[next].arrival_s <= info.clock_s) {
            kv_request_spec sp;
            kv_trace_spec(&tr, next, &sp);
            char rerr[512];
            int64_t id = kv_engine_submit(e, &sp, rerr, sizeof rerr);
            if (id < 0) {
                if (!rejected)
                    snprintf(first_reject, sizeof first_reject, "request %lld: %s", (long long)next, rerr);
                rejected++;
            } else if (steps) {
                steps_request(steps, e, id, &sp);
                arrived[narrived++] = id;
            }
            next++;
        }
        if (evo.f)
            kvlab_events_drain(&evo, e);
        kv_engine_get_info(e, &info);
        if (info.num_running == 0 && info.num_waiting == 0) {
            if (next >= tr.count)
                break;
            kv_engine_advance_clock(e, tr.reqs[next].arrival_s);
            continue;
        }
        kv_step_result res;
        rc = kv_engine_step(e, &res, err, sizeof err);
        if (steps && rc >= 0) {
            steps_step(steps, e, arrived, narrived);
            narrived = 0;
        }
        if (rc < 0) {
            fprintf(stderr, "kvlab simulate: step %lld: %s\n", (long long)res.step, err);
            code = 1;
            goto done;
        }
        if (rc == 0 && res.num_preempted == 0) {
            fprintf(stderr, "kvlab simulate: stuck at step %lld: nothing could be scheduled\n", (long long)res.step);
            code = 1;
            goto done;
        }
    }
    kv_engine_get_info(e, &info);
    if (rejected == tr.count) {
        fprintf(stderr, "kvlab simulate: no request of the trace could be served; the first: %s\n", first_reject);
        code = 1;
        goto done;
    }
    const char *fr = rejected ? first_reject : NULL;
    kv_disagg_stats dstats;
    if (split_arg) {
        kv_engine_config dc = cfg;
        dc.device = NULL;
        dc.block_events = 0;
        char lnote[200] = "";
        dcfg.link_bytes_per_s =
            kv_disagg_link_bytes_per_s(link, gpu ? gpu->pcie_gbps : 0, gpu ? gpu->nvlink_gbps : 0, lnote, sizeof lnote);
        add_note(notes, sizeof notes, lnote);
        if (lnote[0] && !json)
            fprintf(stderr, "kvlab simulate: note: %s\n", lnote);
        kv_disagg *dg = kv_disagg_create(&dc, &dcfg, err, sizeof err);
        if (!dg) {
            fprintf(stderr, "kvlab simulate: --disaggregate: %s\n", err);
            code = 1;
            goto done;
        }
        rc = 0;
        for (int64_t i = 0; i < tr.count && rc >= 0; i++) {
            kv_request_spec sp;
            kv_trace_spec(&tr, i, &sp);
            rc = kv_disagg_add(dg, &sp, err, sizeof err);
        }
        while (rc >= 0 && (rc = kv_disagg_step(dg, err, sizeof err)) > 0)
            ;
        if (rc < 0) {
            fprintf(stderr, "kvlab simulate: --disaggregate: %s\n", err);
            kv_disagg_destroy(dg);
            code = 1;
            goto done;
        }
        kv_disagg_get_stats(dg, &dstats);
        if (metrics) {
            size_t need = kv_disagg_prometheus(dg, m.id, NULL, 0) + 1;
            if ((dprom = malloc(need)))
                kv_disagg_prometheus(dg, m.id, dprom, need);
        }
        kv_disagg_destroy(dg);
    }
    char *prom = NULL;
    if (metrics) {
        size_t need = kv_engine_prometheus(e, m.id, NULL, 0) + 1;
        prom = malloc(need);
        if (prom)
            kv_engine_prometheus(e, m.id, prom, need);
    }
    /* --json stays one object: the Prometheus text goes inside it. */
    if (json) {
        summary_json(e, plan, &m, trace_arg, tr.count, rejected, fr, &info, notes, prom, split_arg ? &dstats : NULL,
                     kv_disagg_link_name(link), dprom);
    } else {
        summary_text(e, plan, &m, trace_arg, tr.count, rejected, fr, &info);
        if (prom)
            fputs(prom, stdout);
        if (split_arg)
            disagg_text(&dstats, kv_disagg_link_name(link));
        if (dprom)
            fputs(dprom, stdout);
    }
    free(prom);
done:
    if (evo.f) {
        if (e)
            kvlab_events_drain(&evo, e);
        if (evo.lost && code == 0)
            fprintf(stderr, "kvlab simulate: --events: %llu events were dropped before they were written\n",
                    (unsigned long long)evo.lost);
        if (fclose(evo.f) != 0 && code == 0) {
            fprintf(stderr, "kvlab simulate: --events %s: write failed\n", events_arg);
            code = 1;
        }
    }
    if (steps && fclose(steps) != 0 && code == 0) {
        fprintf(stderr, "kvlab simulate: --steps-out %s: write failed\n", steps_arg);
        code = 1;
    }
    free(arrived);
    free(dprom);
    kv_engine_destroy(e);
    if (dev) {
        dev->ops->release(dev);
        dev->ops->destroy(dev);
    }
    free(plan);
    kv_gpu_catalog_free(&cat);
    kv_trace_free(&tr);
    return code;
}
