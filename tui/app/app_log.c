/* kvlab --log FILE: the app on a vLLM log (app_log.h). What `kvlab explain`
 * reads from the log (tui/cli/explain_plan.h) becomes a one-lesson course
 * in a private folder: the lesson starts kvlab's server with the log's
 * release, flags and card, shows the memory bar, the start-up log and the
 * flags, and keeps a page of the log's figures beside the plan's, which it
 * rewrites after every flag the learner changes. The lesson runtime and the
 * views are the course's own; nothing else in the app knows about logs. */
#include "app_log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "explain_plan.h"
#include "kv_util.h"
#include "paths.h"
#include "ui_mem.h"

#define LOG_MAX_BYTES (64u << 20)

static char g_dir[512];
static kv_plan g_log_plan;  /* the log's own figures (app_log_plan) */
static unsigned g_log_stated; /* UI_MEM_T_* bits the log states; 0: no plan */

/* explain_logged_plan's figures as the memory view's terms. */
#define T(x) (1u << UI_MEM_T_##x)
static const struct {
    unsigned lp, ui;
} STATED[] = {
    {EXPLAIN_LP_WEIGHTS, T(WEIGHTS)},       {EXPLAIN_LP_ACTIVATION, T(ACTIVATION)},
    {EXPLAIN_LP_NON_TORCH, T(CONTEXT) | T(NCCL)}, {EXPLAIN_LP_CUDAGRAPH, T(CUDAGRAPH)},
    {EXPLAIN_LP_KV, T(KV)},                 {EXPLAIN_LP_TOKENS, UI_MEM_VS_TOKENS},
};
#undef T

/* A Lua string literal of s: printable ASCII kept, quotes and backslashes
 * escaped, anything else a space (log text is untrusted). */
static void lua_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c >= 0x20 && c < 0x7f)
            fputc(c, f);
        else
            fputc(' ', f);
    }
    fputc('"', f);
}

static int write_course(const char *dir, const char *file, const explain_result *r, char *err, size_t errlen)
{
    char path[640];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return kv_errf(err, errlen, -1, "%s: %s", path, strerror(errno));
    fprintf(f, "{\"format_version\": 1, \"about\": \"kvlab --log: one vLLM log beside kvlab's plan (made by "
               "tui/app/app_log.c)\",\n \"chapters\": [{\"number\": 1, \"title\": \"Your vLLM log\"}],\n"
               " \"lessons\": [{\"number\": 1, \"chapter\": 1, \"file\": \"01-log.lua\", \"title\": \"A vLLM log "
               "beside kvlab's plan\"}]}\n");
    fclose(f);

    snprintf(path, sizeof path, "%s/01-log.lua", dir);
    f = fopen(path, "w");
    if (!f)
        return kv_errf(err, errlen, -1, "%s: %s", path, strerror(errno));
    const kv_logread *lr = &r->lr;
    char buf[1200];
    fprintf(f, "-- Made by kvlab --log from a vLLM log (tui/app/app_log.c): the log's figures\n"
               "-- are data here; kvlab's are read from the running plan.\n");
    fprintf(f, "local L = {\n  source = ");
    lua_str(f, file);
    fprintf(f, ",\n  release = ");
    lua_str(f, kv_logread_release_how(lr, buf, sizeof buf));
    fprintf(f, ",\n  model = ");
    lua_str(f, r->args.model);
    fprintf(f, ",\n  gpu = ");
    lua_str(f, r->planned ? r->gpu.id : "");
    fprintf(f, ",\n  flags = ");
    lua_str(f, r->flags);
    fprintf(f, ",\n  missing = ");
    lua_str(f, r->missing);
    fprintf(f, ",\n  error = ");
    lua_str(f, lr->error);
    fprintf(f, ",\n  error_kind = ");
    lua_str(f, kv_logread_error_name(lr->error_kind));
    fprintf(f, ",\n  bars = %s", g_log_stated ? "true" : "false");
    fprintf(f, ",\n  rows = {\n");
    for (int i = 0; i < r->num_diffs; i++) {
        const explain_diff *d = &r->diffs[i];
        /* the text view is narrow: a short name per term */
        const char *term = !strcmp(d->key, "activation_non_torch_gib") ? "act. + non-torch (derived)"
                           : !strcmp(d->key, "kv_cache_tokens")         ? "KV cache tokens"
                                                                        : d->term;
        fprintf(f, "    {term = ");
        lua_str(f, term);
        fprintf(f, ", key = ");
        lua_str(f, d->key);
        fprintf(f, ", logged = %.17g, tokens = %s},\n", d->logged, d->unit_tokens ? "true" : "false");
    }
    if (!r->planned) { /* no plan to set beside: the figures the log states, kvlab's side empty */
        static const struct { unsigned bit; const char *term, *key; int tokens; } K[] = {
            {KV_LR_WEIGHTS, "weights", "weights_gib", 0},
            {KV_LR_ACTIVATION, "activation peak", "activation_gib", 0},
            {KV_LR_NON_TORCH, "non-torch", "non_torch_gib", 0},
            {KV_LR_CUDAGRAPH, "CUDA graphs (estimate)", "cudagraph_gib", 0},
            {KV_LR_KV_GIB, "KV cache", "kv_cache_gib", 0},
            {KV_LR_KV_TOKENS, "KV cache tokens", "kv_cache_tokens", 1},
            {KV_LR_CONCURRENCY, "max concurrency", "max_concurrency", 0},
        };
        const double v[] = {lr->weights_gib, lr->activation_gib, lr->non_torch_gib, lr->cudagraph_gib,
                            lr->kv_cache_gib, (double)lr->kv_cache_tokens, lr->max_concurrency};
        for (size_t i = 0; i < sizeof K / sizeof K[0]; i++)
            if (lr->have & K[i].bit)
                fprintf(f, "    {term = \"%s\", key = \"%s\", logged = %.17g, tokens = %s},\n", K[i].term, K[i].key,
                        v[i], K[i].tokens ? "true" : "false");
    }
    fprintf(f, "  },\n}\n\n");
    /* The command kvlab plans with: the model, the card, then the flags. */
    fprintf(f, "local CMD = ");
    /* the log's own release, whatever the learner's course follows (lab.start
     * takes the learner's release only where the lesson names no accounting) */
    snprintf(buf, sizeof buf, "%s --gpu %s --accounting release%s%s ", r->args.model,
             r->planned ? r->gpu.id : "h100-80gb", r->args.vllm_version[0] ? " --vllm-version " : "",
             r->args.vllm_version);
    char cmd[2400];
    snprintf(cmd, sizeof cmd, "%s%s", buf, r->flags);
    lua_str(f, cmd);
    fprintf(f, "\n\n");
    fputs("local function now(p, key)\n"
          "  if not p then return nil end\n"
          "  -- as kvlab explain sums them: the CUDA context counts where the release takes it off\n"
          "  local ctx = 0\n"
          "  for _, t in ipairs(p.terms or {}) do\n"
          "    if t.name == \"cuda_context\" and t.counted then ctx = t.gib end\n"
          "  end\n"
          "  if key == \"activation_non_torch_gib\" then\n"
          "    return p.activation_gib + p.non_torch_gib + p.nccl_gib + ctx\n"
          "  end\n"
          "  if key == \"non_torch_gib\" then return p.non_torch_gib + p.nccl_gib + ctx end\n"
          "  return p[key]\n"
          "end\n\n"
          "local function fmt(v, tokens)\n"
          "  if v == nil then return \"-\" end\n"
          "  if tokens then\n"
          "    local s = string.format(\"%d\", math.floor(v + 0.5))\n"
          "    return (s:reverse():gsub(\"(%d%d%d)\", \"%1,\"):reverse():gsub(\"^,\", \"\"))\n"
          "  end\n"
          "  return string.format(\"%.2f\", v)\n"
          "end\n\n"
          "local function page(lab, ok, err)\n"
          "  lab.page(\"Your log beside kvlab's plan\")\n"
          "  lab.say(\"Read from %s. Release: %s.\", L.source, L.release)\n"
          "  if L.missing ~= \"\" then\n"
          "    lab.say(\"%s\", L.missing)\n"
          "  end\n"
          "  local p = lab.plan()\n"
          "  local lines = {}\n"
          "  for _, r in ipairs(L.rows) do\n"
          "    lines[#lines + 1] = string.format(\"%s: %s in your log, %s in kvlab's plan.\", r.term,\n"
          "                                      fmt(r.logged, r.tokens), fmt(now(p, r.key), r.tokens))\n"
          "  end\n"
          "  lab.say(\"Per GPU (GiB; tokens as counts):\\n%s\", table.concat(lines, \"\\n\"))\n"
          "  if L.error ~= \"\" then\n"
          "    lab.say(\"Your log failed (%s):\\n\\n  %s\", L.error_kind, L.error)\n"
          "  end\n"
          "  if p then\n"
          "    lab.say(\"kvlab's plan now: %s.\", p.starts and \"it starts\" or (\"it would not start (\" .. p.error_kind .. \")\"))\n"
          "  end\n"
          "  lab.say(\"The left column is what your log says and stays; the right one is kvlab's plan \"\n"
          "          .. \"for the flags in the flags view. Press f to change one: kvlab re-plans at once, \"\n"
          "          .. \"as rerunning vllm serve would, and the memory bar and the start-up log follow.\")\n"
          "  if L.bars then\n"
          "    lab.say(\"The memory view draws both: the top bar (log) is your log's figures, the one \"\n"
          "            .. \"under it (kvlab) kvlab's plan; a term that differs shows the log's figure in \"\n"
          "            .. \"brackets. v keeps kvlab's plan of the moment as the top bar instead, to set \"\n"
          "            .. \"the next flag change beside it; v again brings your log back.\")\n"
          "  end\n"
          "end\n\n"
          "return {\n"
          "  id = 1,\n"
          "  title = \"A vLLM log beside kvlab's plan\",\n"
          "  flags = \"*\",\n"
          "  run = function(lab)\n"
          "    lab.show(\"memory\")\n"
          "    lab.show(\"log\")\n"
          "    lab.show(\"flags\")\n"
          "    local ok, err = false, L.missing\n"
          "    if L.missing == \"\" then ok, err = lab.start(CMD) end\n"
          "    page(lab, ok, err)\n"
          "    lab.on_flag(function() page(lab) end)\n"
          "    while true do lab.pause() end\n"
          "  end,\n"
          "}\n",
          f);
    fclose(f);
    return 0;
}

static void remove_course(void)
{
    if (!g_dir[0])
        return;
    char path[640];
    snprintf(path, sizeof path, "%s/manifest.json", g_dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/01-log.lua", g_dir);
    unlink(path);
    rmdir(g_dir);
    g_dir[0] = '\0';
}

const kv_plan *app_log_plan(unsigned *stated)
{
    *stated = g_log_stated;
    return g_log_stated ? &g_log_plan : NULL;
}

const char *app_log_course(const char *file, int argc, char **argv, char *err, size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    if (kv_read_file(file, LOG_MAX_BYTES, &text, &len, err, errlen) != 0)
        return NULL;
    explain_result *r = malloc(sizeof *r);
    if (!r) {
        free(text);
        kv_errf(err, errlen, -1, "out of memory");
        return NULL;
    }
    char e[512];
    int rc = explain_run(text, len, argc, argv, kvlab_assets_dir(), r, e, sizeof e);
    free(text);
    if (rc != 0) {
        kv_errf(err, errlen, -1, "--log %s: %s", file, e);
        free(r);
        return NULL;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/kvlab-log-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) {
        kv_errf(err, errlen, -1, "--log: cannot make a folder under %s: %s", tmp && *tmp ? tmp : "/tmp",
                strerror(errno));
        g_dir[0] = '\0';
        free(r);
        return NULL;
    }
    atexit(remove_course);
    unsigned lp = explain_logged_plan(r, &g_log_plan);
    for (size_t i = 0; i < sizeof STATED / sizeof STATED[0]; i++)
        if (lp & STATED[i].lp)
            g_log_stated |= STATED[i].ui;
    rc = write_course(g_dir, file, r, err, errlen);
    free(r);
    if (rc != 0) {
        remove_course();
        return NULL;
    }
    return g_dir;
}
