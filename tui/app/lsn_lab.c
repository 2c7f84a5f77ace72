/* lsn_lab: the whole `lab` API lessons see (lessons/API.md), one
 * `static int f_<name>(lua_State *L)` per entry. Bindings check their
 * arguments, make one call into the runner or the engine, and push plain
 * tables; waits set the runner's wait and yield to the host. */
#include <cjson/cJSON.h>
#include <lauxlib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kv_timemodel.h"
#include "kv_util.h"
#include "lsn_int.h"

#define R(L) lsn_from_L(L)

/* ---- helpers ---------------------------------------------------------------- */

static void setnum(lua_State *L, const char *k, double v)
{
    lua_pushnumber(L, v);
    lua_setfield(L, -2, k);
}

static void setint(lua_State *L, const char *k, int64_t v)
{
    lua_pushinteger(L, (lua_Integer)v);
    lua_setfield(L, -2, k);
}

static void setstr(lua_State *L, const char *k, const char *v)
{
    lua_pushstring(L, v ? v : "");
    lua_setfield(L, -2, k);
}

static void setbool(lua_State *L, const char *k, int v)
{
    lua_pushboolean(L, v);
    lua_setfield(L, -2, k);
}

/* Waits may only come from the lesson's own coroutine. */
static void need_coroutine(lua_State *L, lsn_runner *r, const char *what)
{
    if (L != r->co)
        luaL_error(L, "%s can only be called from the lesson's run function "
                      "(not from a condition, a callback or another coroutine)",
                   what);
}

/* A Lua value as flag text: integers without ".0", booleans as true/false. */
static const char *flag_text(lua_State *L, int idx, char *buf, size_t buflen)
{
    if (lua_type(L, idx) == LUA_TBOOLEAN) {
        snprintf(buf, buflen, "%s", lua_toboolean(L, idx) ? "true" : "false");
    } else if (lua_type(L, idx) == LUA_TNUMBER) {
        double d = lua_tonumber(L, idx);
        if (lua_isinteger(L, idx) || (d == floor(d) && fabs(d) < 1e15))
            snprintf(buf, buflen, "%lld", (long long)d);
        else
            snprintf(buf, buflen, "%.10g", d);
    } else if (lua_type(L, idx) == LUA_TSTRING) {
        snprintf(buf, buflen, "%s", lua_tostring(L, idx));
    } else {
        return NULL;
    }
    return buf;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Apply a table of flags ({model=..., ["max-model-len"]=8192}) in sorted key
 * order, so errors are reported the same way every run. */
static void apply_flag_table(lua_State *L, lsn_runner *r, int idx)
{
    int n = 0;
    const char *keys[256];
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_error(L, "server flags are given by name (got a %s key)", luaL_typename(L, -1));
        if (n < 256)
            keys[n++] = lua_tostring(L, -1);
    }
    qsort(keys, (size_t)n, sizeof keys[0], cmp_str);
    for (int i = 0; i < n; i++) {
        lua_getfield(L, idx, keys[i]);
        char val[512], err[512];
        if (!flag_text(L, -1, val, sizeof val))
            luaL_error(L, "flag '%s' must be a string, number or boolean", keys[i]);
        lua_pop(L, 1);
        if (lsn_server_set(r->server, keys[i], val, err, sizeof err) < 0)
            luaL_error(L, "%s", err);
    }
}

/* Apply a command line: "MODEL --flag value --flag=value --bool --no-bool". */
static void apply_flag_line(lua_State *L, lsn_runner *r, const char *line)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", line);
    char *tok[256];
    int n = 0;
    for (char *s = strtok(buf, " \t\n\\"); s && n < 256; s = strtok(NULL, " \t\n\\"))
        tok[n++] = s;
    int i = 0;
    if (i < n && !strcmp(tok[i], "vllm"))
        i++;
    if (i < n && !strcmp(tok[i], "serve"))
        i++;
    char err[512];
    for (; i < n; i++) {
        const char *t = tok[i];
        if (t[0] != '-') {
            if (lsn_server_set(r->server, "model", t, err, sizeof err) < 0)
                luaL_error(L, "%s", err);
            continue;
        }
        while (*t == '-')
            t++;
        char name[128];
        const char *eq = strchr(t, '=');
        const char *value;
        if (eq) {
            snprintf(name, sizeof name, "%.*s", (int)(eq - t), t);
            value = eq + 1;
        } else if (i + 1 < n && tok[i + 1][0] != '-') {
            snprintf(name, sizeof name, "%s", t);
            value = tok[++i];
        } else if (!strncmp(t, "no-", 3)) {
            snprintf(name, sizeof name, "%s", t + 3);
            value = "false";
        } else {
            snprintf(name, sizeof name, "%s", t);
            value = "true";
        }
        if (lsn_server_set(r->server, name, value, err, sizeof err) < 0)
            luaL_error(L, "%s", err);
    }
}

static int push_start_result(lua_State *L, lsn_runner *r)
{
    int rc = lsn_start_server(r);
    if (rc == 1) {
        lua_pushboolean(L, 1);
        return 1;
    }
    lua_pushboolean(L, 0);
    lua_pushstring(L, r->server_err);
    lua_pushstring(L, rc == 0 ? "refused" : "invalid");
    return 3;
}

static kv_engine *engine_or_nil(lua_State *L)
{
    return lsn_server_engine(R(L)->server);
}

/* ---- narration -------------------------------------------------------------- */

static int f_page(lua_State *L)
{
    lsn_runner *r = R(L);
    lsn_sb_clear(&r->text);
    snprintf(r->page_title, sizeof r->page_title, "%s", luaL_optstring(L, 1, ""));
    r->page_no++;
    r->changes |= LSN_CH_TEXT;
    return 0;
}

static int f_say(lua_State *L)
{
    lsn_runner *r = R(L);
    int n = lua_gettop(L);
    luaL_checkstring(L, 1);
    if (n > 1) {
        lua_getglobal(L, "string");
        lua_getfield(L, -1, "format");
        lua_remove(L, -2);
        lua_insert(L, 1);
        if (lua_pcall(L, n, 1, 0) != LUA_OK) {
            /* say where in the lesson, not inside string.format */
            luaL_where(L, 1);
            lua_pushstring(L, "lab.say: ");
            lua_rotate(L, -3, -1);
            lua_concat(L, 3);
            return lua_error(L);
        }
    }
    size_t len;
    const char *s = lua_tolstring(L, -1, &len);
    if (r->text.len)
        lsn_sb_add(&r->text, "\n\n", 2);
    lsn_sb_add(&r->text, s, len);
    r->changes |= LSN_CH_TEXT;
    return 0;
}

static int f_pause(lua_State *L)
{
    lsn_runner *r = R(L);
    need_coroutine(L, r, "lab.pause");
    r->wait = W_NEXT;
    return lua_yield(L, 0);
}

/* ---- the server ---------------------------------------------------------- */

static int f_start(lua_State *L)
{
    lsn_runner *r = R(L);
    lsn_server_reset_args(r->server);
    if (lua_istable(L, 1))
        apply_flag_table(L, r, 1);
    else
        apply_flag_line(L, r, luaL_checkstring(L, 1));
    return push_start_result(L, r);
}

static int f_restart(lua_State *L)
{
    lsn_runner *r = R(L);
    if (lua_istable(L, 1))
        apply_flag_table(L, r, 1);
    else if (lua_isstring(L, 1))
        apply_flag_line(L, r, lua_tostring(L, 1));
    return push_start_result(L, r);
}

static int f_stop(lua_State *L)
{
    lsn_runner *r = R(L);
    lsn_server_stop(r->server);
    r->server_started = 0;
    r->changes |= LSN_CH_SERVER;
    return 0;
}

static int f_flag(lua_State *L)
{
    lsn_runner *r = R(L);
    char buf[512];
    if (lsn_server_get(r->server, luaL_checkstring(L, 1), buf, sizeof buf) < 0)
        return luaL_error(L, "lab.flag: unknown flag '%s'", lua_tostring(L, 1));
    lua_pushstring(L, buf);
    return 1;
}

static int f_running(lua_State *L)
{
    lua_pushboolean(L, engine_or_nil(L) != NULL);
    return 1;
}

/* ---- figures -------------------------------------------------------------- */

static int push_plan(lua_State *L, const kv_plan *p)
{
    if (!p) {
        lua_pushnil(L);
        return 1;
    }
    lua_createtable(L, 0, 64);
    setbool(L, "starts", p->starts);
    setstr(L, "error", p->error);
    setstr(L, "error_kind", kv_plan_error_name(p->error_kind));
    setstr(L, "gpu_id", p->gpu_id);
    setstr(L, "gpu_name", p->gpu_name);
    setnum(L, "gpu_total_gib", kv_gib(p->gpu_total_bytes));
    setnum(L, "gpu_total_bytes", p->gpu_total_bytes);
    setnum(L, "gpu_used_gib", kv_gib(p->gpu_used_bytes));
    setnum(L, "free_at_start_gib", kv_gib(p->free_at_start_bytes));
    setnum(L, "gpu_memory_utilization", p->gpu_memory_utilization);
    setint(L, "tensor_parallel_size", p->tensor_parallel_size);
    setnum(L, "budget_gib", kv_gib(p->budget_bytes));
    setnum(L, "weights_gib", kv_gib(p->weights_bytes));
    setnum(L, "activation_gib", kv_gib(p->activation_bytes));
    setnum(L, "cudagraph_gib", kv_gib(p->cudagraph_bytes));
    setnum(L, "cuda_context_gib", kv_gib(p->cuda_context_bytes));
    setnum(L, "nccl_gib", kv_gib(p->nccl_bytes));
    setnum(L, "kv_cache_gib", kv_gib(p->available_kv_bytes));
    setnum(L, "kv_pool_gib", kv_gib(p->kv_pool_bytes));
    setnum(L, "budget_bytes", p->budget_bytes);
    setnum(L, "weights_bytes", p->weights_bytes);
    setnum(L, "activation_bytes", p->activation_bytes);
    setnum(L, "cudagraph_bytes", p->cudagraph_bytes);
    setnum(L, "cuda_context_bytes", p->cuda_context_bytes);
    setnum(L, "nccl_bytes", p->nccl_bytes);
    setnum(L, "kv_cache_bytes", p->available_kv_bytes);
    setint(L, "num_layers", p->num_layers);
    setint(L, "kv_heads_per_gpu", p->kv_heads_per_gpu);
    setint(L, "head_size", p->head_size);
    setint(L, "kv_factor", p->kv_factor);
    setint(L, "kv_dtype_bytes", p->kv_dtype_bytes);
    setint(L, "block_size", p->block_size);
    setint(L, "page_size_bytes", p->page_size_bytes);
    setint(L, "kv_bytes_per_token", p->kv_bytes_per_token);
    setint(L, "num_blocks", p->num_blocks);
    setint(L, "kv_cache_tokens", p->kv_cache_tokens);
    setint(L, "max_model_len", p->max_model_len);
    setint(L, "model_max_model_len", p->model_max_model_len);
    setnum(L, "needed_gib", kv_gib((double)p->needed_bytes));
    setint(L, "estimated_max_model_len", p->estimated_max_model_len);
    setint(L, "blocks_per_request", p->blocks_per_request);
    setnum(L, "max_concurrency", p->max_concurrency);
    setint(L, "max_num_batched_tokens", p->max_num_batched_tokens);
    setint(L, "max_num_seqs", p->max_num_seqs);
    setbool(L, "enforce_eager", p->enforce_eager);
    setbool(L, "enable_prefix_caching", p->enable_prefix_caching);
    setstr(L, "weights_dtype", p->weights_dtype);
    setstr(L, "kv_cache_dtype", p->kv_cache_dtype);
    lua_createtable(L, KV_PLAN_NUM_TERMS, 0);
    for (int i = 0; i < KV_PLAN_NUM_TERMS; i++) {
        lua_createtable(L, 0, 5);
        setstr(L, "name", p->terms[i].name);
        setstr(L, "how", p->terms[i].how);
        setnum(L, "bytes", p->terms[i].bytes);
        setnum(L, "gib", kv_gib(p->terms[i].bytes));
        setbool(L, "overridden", p->terms[i].overridden);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "terms");
    lua_createtable(L, p->num_log, 0);
    for (int i = 0; i < p->num_log; i++) {
        lua_pushstring(L, p->log[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "log");
    lua_createtable(L, p->num_fixes, 0);
    for (int i = 0; i < p->num_fixes; i++) {
        const kv_plan_fix *f = &p->fixes[i];
        lua_createtable(L, 0, 9);
        setstr(L, "flags", f->flags);
        setstr(L, "what", f->what);
        setbool(L, "starts", f->starts);
        setbool(L, "lowers_max_model_len", f->lowers_max_model_len);
        setstr(L, "error_kind", kv_plan_error_name(f->error_kind));
        setnum(L, "kv_cache_gib", kv_gib(f->kv_cache_bytes));
        setint(L, "kv_cache_tokens", f->kv_cache_tokens);
        setint(L, "max_model_len", f->max_model_len);
        setnum(L, "max_concurrency", f->max_concurrency);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "fixes");
    return 1;
}

static int f_plan(lua_State *L)
{
    return push_plan(L, lsn_server_plan(R(L)->server));
}

static int f_what_if(lua_State *L)
{
    lsn_runner *r = R(L);
    luaL_checktype(L, 1, LUA_TTABLE);
    const char *keys[64];
    char vals[64][256];
    const char *vp[64];
    int n = 0;
    lua_pushnil(L);
    while (lua_next(L, 1) && n < 64) {
        if (lua_type(L, -2) != LUA_TSTRING || !flag_text(L, -1, vals[n], sizeof vals[n]))
            return luaL_error(L, "lab.what_if: give flags by name with string, number or boolean values");
        keys[n] = lua_tostring(L, -2);
        vp[n] = vals[n];
        n++;
        lua_pop(L, 1);
    }
    kv_plan *p = malloc(sizeof *p);
    char err[1024];
    if (!p)
        return luaL_error(L, "out of memory");
    if (lsn_server_plan_with(r->server, n, keys, vp, p, err, sizeof err) < 0) {
        free(p);
        lua_pushnil(L);
        lua_pushstring(L, err);
        return 2;
    }
    push_plan(L, p);
    free(p);
    return 1;
}

static int push_model(lua_State *L, const kv_model *m)
{
    if (!m) {
        lua_pushnil(L);
        return 1;
    }
    lua_createtable(L, 0, 24);
    setstr(L, "id", m->id);
    setstr(L, "model_type", m->model_type);
    setstr(L, "attention", kv_model_attention_kind(m));
    setint(L, "layers", m->num_hidden_layers);
    setint(L, "hidden_size", m->hidden_size);
    setint(L, "heads", m->num_attention_heads);
    setint(L, "kv_heads", m->num_key_value_heads);
    setint(L, "head_dim", m->head_dim);
    setint(L, "intermediate_size", m->intermediate_size);
    setint(L, "vocab_size", m->vocab_size);
    setint(L, "max_position_embeddings", m->max_position_embeddings);
    setstr(L, "torch_dtype", m->torch_dtype);
    setint(L, "dtype_bytes", m->dtype_bytes);
    setint(L, "params", m->params_total);
    setint(L, "params_active", m->params_active);
    setint(L, "params_linear", m->params_linear);
    setint(L, "params_embedding", m->params_embedding);
    setint(L, "num_experts", m->num_experts);
    setbool(L, "is_mla", m->is_mla);
    setint(L, "kv_lora_rank", m->kv_lora_rank);
    setint(L, "qk_rope_head_dim", m->qk_rope_head_dim);
    setint(L, "sliding_window", m->sliding_window);
    setint(L, "num_sliding_layers", m->num_sliding_layers);
    setstr(L, "quant_method", m->quant_method);
    return 1;
}

static int f_model(lua_State *L)
{
    lsn_runner *r = R(L);
    if (lua_isstring(L, 1)) { /* any catalogue model or config.json, without starting */
        kv_model m;
        char err[512];
        if (kv_model_load(lua_tostring(L, 1), lsn_server_assets(r->server), &m, err, sizeof err) != KV_MODEL_OK) {
            lua_pushnil(L);
            lua_pushstring(L, err);
            return 2;
        }
        return push_model(L, &m);
    }
    return push_model(L, lsn_server_model(r->server));
}

/* A JSON value as a Lua value (objects -> tables, arrays -> lists, null -> nil). */
static void push_json(lua_State *L, const cJSON *j, int depth)
{
    if (depth > 32) {
        lua_pushnil(L);
    } else if (cJSON_IsObject(j) || cJSON_IsArray(j)) {
        lua_newtable(L);
        lua_Integer i = 1;
        for (const cJSON *c = j->child; c; c = c->next) {
            if (cJSON_IsNull(c))
                continue;
            push_json(L, c, depth + 1);
            if (cJSON_IsArray(j))
                lua_rawseti(L, -2, i++);
            else
                lua_setfield(L, -2, c->string ? c->string : "");
        }
    } else if (cJSON_IsBool(j)) {
        lua_pushboolean(L, cJSON_IsTrue(j));
    } else if (cJSON_IsNumber(j)) {
        double v = j->valuedouble;
        if (v == floor(v) && fabs(v) < 9e15)
            lua_pushinteger(L, (lua_Integer)v);
        else
            lua_pushnumber(L, v);
    } else if (cJSON_IsString(j)) {
        lua_pushstring(L, j->valuestring);
    } else {
        lua_pushnil(L);
    }
}

/* lab.config(): the config.json the running model was read from, as a table
 * (the file as written: absent fields stay absent), and its path. */
static int f_config(lua_State *L)
{
    const kv_model *m = lsn_server_model(R(L)->server);
    if (!m || !m->path[0]) {
        lua_pushnil(L);
        return 1;
    }
    FILE *f = fopen(m->path, "rb");
    if (!f)
        return luaL_error(L, "lab.config: cannot read %s", m->path);
    char *text = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 16384;
            char *t = cap <= (8u << 20) ? realloc(text, cap) : NULL;
            if (!t) {
                free(text);
                fclose(f);
                return luaL_error(L, "lab.config: %s is too big", m->path);
            }
            text = t;
        }
        size_t n = fread(text + len, 1, 4096, f);
        len += n;
        if (n < 4096)
            break;
    }
    fclose(f);
    text[len] = '\0';
    cJSON *j = cJSON_Parse(text);
    free(text);
    if (!j)
        return luaL_error(L, "lab.config: %s is not JSON", m->path);
    push_json(L, j, 0);
    cJSON_Delete(j);
    lua_pushstring(L, m->path);
    return 2;
}

static int f_gpu(lua_State *L)
{
    const kv_gpu *g = lsn_server_gpu(R(L)->server);
    if (!g) {
        lua_pushnil(L);
        return 1;
    }
    lua_createtable(L, 0, 8);
    setstr(L, "id", g->id);
    setstr(L, "name", g->name);
    setnum(L, "total_gib", kv_gib(g->reported_total_bytes));
    setnum(L, "total_bytes", g->reported_total_bytes);
    setnum(L, "hbm_gbps", g->hbm_bandwidth_gbps);
    setnum(L, "bf16_tflops", g->bf16_dense_tflops);
    setnum(L, "pcie_gbps", g->pcie_gbps);
    setnum(L, "nvlink_gbps", g->nvlink_gbps);
    setbool(L, "fp8", g->fp8);
    return 1;
}

/* lab.step_time{{start=, n=}, ...}: the engine's time model (kv_timemodel.h)
 * for one step of the running server that computes each chunk: n tokens of
 * some sequence at positions [start, start + n). Returns seconds and the
 * roofline breakdown, per GPU. Lesson 19 prices a recompute with it. */
static int f_step_time(lua_State *L)
{
    kv_engine *e = engine_or_nil(L);
    const kv_plan *p = lsn_server_plan(R(L)->server);
    luaL_checktype(L, 1, LUA_TTABLE);
    if (!e || !p)
        return luaL_error(L, "lab.step_time: no server is running");
    const kv_engine_config *c = kv_engine_get_config(e);
    kv_time_params tp = {
        .active_params = c->active_params, .weight_bytes = c->weight_bytes,
        .kv_bytes_per_token = (double)p->kv_bytes_per_token, .peak_flops = c->peak_flops,
        .hbm_bytes_per_s = c->hbm_bytes_per_s, .link_bytes_per_s = c->link_bytes_per_s,
        .tp = c->tensor_parallel_size, .num_layers = c->num_layers, .hidden_size = c->hidden_size,
    };
    kv_step_work w = {0};
    lua_Integer n = luaL_len(L, 1);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, 1, i);
        if (!lua_istable(L, -1))
            return luaL_error(L, "lab.step_time: chunk %d must be {start = , n = }", (int)i);
        lua_getfield(L, -1, "start");
        lua_getfield(L, -2, "n");
        if (!lua_isinteger(L, -2) || !lua_isinteger(L, -1) || lua_tointeger(L, -2) < 0 || lua_tointeger(L, -1) < 0)
            return luaL_error(L, "lab.step_time: chunk %d needs whole start >= 0 and n >= 0", (int)i);
        kv_timemodel_add_chunk(&w, (int64_t)lua_tointeger(L, -2), (int64_t)lua_tointeger(L, -1));
        lua_pop(L, 3);
    }
    kv_step_time t;
    kv_timemodel_step(&tp, &w, &t);
    lua_createtable(L, 0, 7);
    setnum(L, "total_s", t.total_s);
    setnum(L, "compute_s", t.compute_s);
    setnum(L, "memory_s", t.memory_s);
    setnum(L, "comm_s", t.comm_s);
    setnum(L, "flops", t.flops);
    setnum(L, "bytes", t.bytes);
    setbool(L, "memory_bound", t.memory_bound);
    return 1;
}

static int f_log(lua_State *L)
{
    const kv_plan *p = lsn_server_plan(R(L)->server);
    lua_newtable(L);
    for (int i = 0; p && i < p->num_log; i++) {
        const char *line = p->log[i];
        lua_createtable(L, 0, 3);
        setstr(L, "level", strstr(line, "ERROR") ? "ERROR" : strstr(line, "WARNING") ? "WARNING" : "INFO");
        setstr(L, "text", line);
        setstr(L, "phase", lsn_server_log_phase(line));
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static int f_metrics(lua_State *L)
{
    lsn_runner *r = R(L);
    kv_engine *e = engine_or_nil(L);
    if (!e) {
        lua_pushnil(L);
        return 1;
    }
    kv_engine_metrics m;
    kv_engine_info info;
    kv_engine_get_metrics(e, &m);
    kv_engine_get_info(e, &info);
    lua_createtable(L, 0, 40);
    setnum(L, "kv_cache_usage_perc", m.kv_cache_usage_perc);
    setint(L, "num_requests_running", m.num_requests_running);
    setint(L, "num_requests_waiting", m.num_requests_waiting);
    setint(L, "num_preemptions", m.num_preemptions_total);
    setint(L, "prefix_cache_queries", m.prefix_cache_queries);
    setint(L, "prefix_cache_hits", m.prefix_cache_hits);
    setint(L, "prompt_tokens", m.prompt_tokens_total);
    setint(L, "generation_tokens", m.generation_tokens_total);
    setint(L, "request_success", m.request_success_total);
    setint(L, "requests_rejected", m.requests_rejected);
    setint(L, "requests_aborted", m.requests_aborted);
    setint(L, "block_allocations", m.block_allocations);
    setint(L, "block_frees", m.block_frees);
    setint(L, "block_evictions", m.block_evictions);
    setint(L, "computed_tokens", m.computed_tokens);
    setint(L, "recomputed_tokens", m.recomputed_tokens);
    setint(L, "work_tokens_with_cache", m.work_tokens_with_cache);
    setint(L, "work_tokens_without_cache", m.work_tokens_without_cache);
    setint(L, "reserved_tokens", m.reserved_tokens);
    setint(L, "used_tokens", m.used_tokens);
    setnum(L, "internal_fragmentation", m.internal_fragmentation);
    setnum(L, "peak_kv_usage", m.peak_kv_usage);
    setnum(L, "mean_kv_usage", m.mean_kv_usage);
    setnum(L, "mean_num_requests_waiting", m.mean_num_requests_waiting);
    setnum(L, "mean_num_requests_running", m.mean_num_requests_running);
    setnum(L, "busy_s", m.busy_s);
    setnum(L, "ttft_mean_s", m.ttft.mean);
    setnum(L, "itl_mean_s", m.itl.mean);
    setnum(L, "e2e_mean_s", m.e2e.mean);
    setnum(L, "queue_mean_s", m.queue.mean);
    setint(L, "step", info.step);
    setnum(L, "time_s", info.clock_s);
    setint(L, "last_step_tokens", r->last_step.num_scheduled_tokens);
    setint(L, "last_step_prefill_tokens", r->last_step.num_prefill_tokens);
    setint(L, "last_step_decode_tokens", r->last_step.num_decode_tokens);
    setint(L, "last_step_requests", r->last_step.num_scheduled_reqs);
    setint(L, "last_step_preempted", r->last_step.num_preempted);
    setnum(L, "last_step_duration_s", r->last_step.duration_s);
    return 1;
}

static int f_blocks(lua_State *L)
{
    kv_engine *e = engine_or_nil(L);
    if (!e) {
        lua_pushnil(L);
        return 1;
    }
    kv_engine_info info;
    kv_engine_get_info(e, &info);
    lua_createtable(L, 0, 8);
    setint(L, "total", info.num_blocks);
    setint(L, "usable", info.num_blocks - 1);
    setint(L, "free", info.num_free_blocks);
    setint(L, "used", info.num_blocks - 1 - info.num_free_blocks);
    setint(L, "cached", info.num_cached_blocks);
    setint(L, "null", 1);
    setint(L, "block_size", info.block_size);
    setstr(L, "mode", info.mode == KV_MODE_NO_CACHE ? "no-cache" : info.mode == KV_MODE_CONTIGUOUS ? "contiguous"
                                                                                                  : "paged");
    return 1;
}

static int f_block(lua_State *L)
{
    kv_engine *e = engine_or_nil(L);
    lua_Integer id = luaL_checkinteger(L, 1);
    kv_block_view b;
    if (!e || id < 0 || id > INT32_MAX || kv_engine_block(e, (int32_t)id, &b) < 0) {
        lua_pushnil(L);
        return 1;
    }
    lua_createtable(L, 0, 6);
    setint(L, "id", b.block_id);
    setstr(L, "state", b.is_null ? "null" : b.cached_free ? "cached" : b.is_free ? "free" : "used");
    setint(L, "ref_cnt", b.ref_cnt);
    setbool(L, "has_hash", b.has_hash);
    setint(L, "owner", b.owner);
    setint(L, "owners", b.num_owners);
    return 1;
}

static const char *status_name(kv_req_status s)
{
    switch (s) {
    case KV_REQ_WAITING: return "waiting";
    case KV_REQ_RUNNING: return "running";
    case KV_REQ_PREEMPTED: return "preempted";
    case KV_REQ_FINISHED: return "finished";
    case KV_REQ_ABORTED: return "aborted";
    }
    return "?";
}

static int push_request(lua_State *L, kv_engine *e, int64_t id)
{
    kv_request_view v;
    if (kv_engine_request(e, id, &v) < 0)
        return 0;
    lua_createtable(L, 0, 18);
    setint(L, "id", v.id);
    setstr(L, "state", status_name(v.status));
    setint(L, "prefix_tokens", v.prefix_tokens);
    setint(L, "prompt_tokens", v.prompt_tokens);
    setint(L, "output_tokens", v.output_tokens);
    setint(L, "num_output_tokens", v.num_output_tokens);
    setint(L, "num_tokens", v.num_tokens);
    setint(L, "num_computed_tokens", v.num_computed_tokens);
    setint(L, "num_cached_tokens", v.num_cached_tokens);
    setint(L, "num_blocks", v.num_blocks);
    setint(L, "num_preemptions", v.num_preemptions);
    setint(L, "reserved_tokens", v.reserved_tokens);
    setnum(L, "arrival_s", v.arrival_s);
    setnum(L, "first_token_s", v.first_token_s);
    setnum(L, "finish_s", v.finish_s);
    int32_t tbl[4096];
    int32_t n = kv_engine_block_table(e, id, tbl, 4096);
    lua_createtable(L, n > 0 ? n : 0, 0);
    for (int32_t i = 0; i < n && i < 4096; i++) {
        lua_pushinteger(L, tbl[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "blocks");
    return 1;
}

static int f_requests(lua_State *L)
{
    kv_engine *e = engine_or_nil(L);
    lua_newtable(L);
    if (!e)
        return 1;
    kv_engine_info info;
    kv_engine_get_info(e, &info);
    int k = 0;
    int64_t from = info.num_submitted > 20000 ? info.num_submitted - 20000 : 0;
    for (int64_t id = from; id < info.num_submitted; id++)
        if (push_request(L, e, id))
            lua_rawseti(L, -2, ++k);
    return 1;
}

static int f_request(lua_State *L)
{
    kv_engine *e = engine_or_nil(L);
    if (!e || !push_request(L, e, luaL_checkinteger(L, 1)))
        lua_pushnil(L);
    return 1;
}

static int f_ranks(lua_State *L)
{
    kv_engine *e = engine_or_nil(L);
    lua_newtable(L);
    if (!e)
        return 1;
    kv_engine_info info;
    kv_engine_get_info(e, &info);
    for (int32_t i = 0; i < info.tensor_parallel_size; i++) {
        kv_rank_view v;
        if (kv_engine_rank(e, i, &v) < 0)
            break;
        lua_createtable(L, 0, 10);
        setint(L, "rank", v.rank);
        setint(L, "num_kv_heads", v.num_kv_heads);
        setint(L, "first_kv_head", v.first_kv_head);
        setbool(L, "replicated", v.replicated);
        lua_createtable(L, v.num_kv_heads, 0);
        for (int32_t h = 0; h < v.num_kv_heads; h++) {
            lua_pushinteger(L, v.first_kv_head + h);
            lua_rawseti(L, -2, h + 1);
        }
        lua_setfield(L, -2, "kv_heads");
        setint(L, "bytes_per_block", (int64_t)v.bytes_per_block);
        setnum(L, "kv_cache_gib", kv_gib((double)v.pool_bytes));
        lua_createtable(L, 0, KV_TERM_COUNT);
        for (int t = 0; t < KV_TERM_COUNT; t++)
            setnum(L, kv_engine_term_name(t), v.terms[t]);
        lua_setfield(L, -2, "terms");
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static int f_events(lua_State *L)
{
    kv_engine *e = engine_or_nil(L);
    uint64_t since = (uint64_t)luaL_optinteger(L, 1, 0);
    lua_newtable(L);
    if (!e)
        return 1;
    static kv_event ev[4096];
    int32_t n = kv_engine_events_since(e, since, ev, 4096);
    for (int32_t i = 0; i < n; i++) {
        lua_createtable(L, 0, 7);
        setint(L, "seq", (int64_t)ev[i].seq);
        setstr(L, "kind", kv_event_type_name(ev[i].type));
        setint(L, "block", ev[i].block_id);
        setint(L, "request", ev[i].req_id);
        setint(L, "value", ev[i].value);
        setint(L, "step", ev[i].step);
        if (ev[i].text)
            setstr(L, "text", ev[i].text);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static int f_timeline(lua_State *L)
{
    kv_engine *e = engine_or_nil(L);
    lua_Integer want = luaL_optinteger(L, 1, 4096);
    lua_newtable(L);
    if (!e)
        return 1;
    if (want < 1)
        return 1;
    if (want > 4096)
        want = 4096;
    kv_timeline_sample *tl = malloc((size_t)want * sizeof *tl);
    if (!tl)
        return luaL_error(L, "out of memory");
    int32_t n = kv_engine_timeline(e, tl, (int32_t)want);
    /* the newest `want` samples, oldest first */
    for (int32_t i = 0; i < n; i++) {
        const kv_timeline_sample *t = &tl[i];
        lua_createtable(L, 0, 11);
        setint(L, "step", t->step);
        setnum(L, "time_s", t->clock_s);
        setnum(L, "kv_usage", t->kv_usage);
        setint(L, "running", t->num_running);
        setint(L, "waiting", t->num_waiting);
        setint(L, "tokens", t->num_scheduled_tokens);
        setint(L, "preempted", t->num_preempted);
        setint(L, "num_preemptions", t->num_preemptions_total);
        setnum(L, "prefix_hit_rate", t->prefix_hit_rate);
        setnum(L, "tokens_per_s", t->tokens_per_s);
        lua_rawseti(L, -2, i + 1);
    }
    free(tl);
    return 1;
}

static int f_last_event(lua_State *L)
{
    kv_engine *e = engine_or_nil(L);
    lua_pushinteger(L, e ? (lua_Integer)kv_engine_last_event_seq(e) : 0);
    return 1;
}

static int f_figure(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    lua_CFunction sources[] = {f_plan, f_metrics, f_blocks, f_model, f_gpu};
    for (size_t i = 0; i < sizeof sources / sizeof sources[0]; i++) {
        lua_settop(L, 1);
        lua_pushcfunction(L, sources[i]);
        lua_call(L, 0, 1);
        if (lua_istable(L, -1)) {
            lua_getfield(L, -1, name);
            if (!lua_isnil(L, -1))
                return 1;
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    lua_pushnil(L);
    return 1;
}

static int f_catalog(lua_State *L)
{
    lsn_runner *r = R(L);
    lua_createtable(L, 0, 2);
    char **ids = NULL;
    char err[256];
    int n = kv_model_catalog_list(lsn_server_assets(r->server), &ids, err, sizeof err);
    lua_createtable(L, n > 0 ? n : 0, 0);
    for (int i = 0; i < n; i++) {
        lua_pushstring(L, ids[i]);
        lua_rawseti(L, -2, i + 1);
    }
    if (n > 0)
        kv_model_catalog_free(ids, n);
    lua_setfield(L, -2, "models");
    const kv_gpu_catalog *c = lsn_server_catalog(r->server);
    lua_createtable(L, c->count, 0);
    for (int i = 0; i < c->count; i++) {
        lua_pushstring(L, c->gpus[i].id);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "gpus");
    return 1;
}

/* ---- traffic and time ------------------------------------------------------ */

static int32_t opt_int_field(lua_State *L, int idx, const char *k, int32_t dflt)
{
    lua_getfield(L, idx, k);
    int32_t v = lua_isnil(L, -1) ? dflt : (int32_t)luaL_checkinteger(L, -1);
    lua_pop(L, 1);
    return v;
}

int64_t lsn_lab_submit_table(lsn_runner *r, lua_State *L, int idx, char *err, size_t errlen)
{
    kv_engine *e = lsn_server_engine(r->server);
    if (!e) {
        snprintf(err, errlen, "no server is running (lab.start first)");
        return -1;
    }
    kv_request_spec spec = {0};
    spec.prompt_tokens = opt_int_field(L, idx, "prompt_tokens", 0);
    spec.output_tokens = opt_int_field(L, idx, "output_tokens", 1);
    spec.prefix_tokens = opt_int_field(L, idx, "prefix_tokens", 0);
    spec.priority = opt_int_field(L, idx, "priority", 0);
    lua_getfield(L, idx, "prefix_id");
    char prefix[128] = "";
    if (lua_isstring(L, -1))
        snprintf(prefix, sizeof prefix, "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
    spec.prefix_id = prefix[0] ? prefix : NULL;
    lua_getfield(L, idx, "arrival_s");
    spec.arrival_s = lua_isnumber(L, -1) ? lua_tonumber(L, -1) : -1;
    lua_pop(L, 1);
    int64_t id = kv_engine_submit(e, &spec, err, errlen);
    r->changes |= LSN_CH_ENGINE;
    return id;
}

static int f_submit(lua_State *L)
{
    lsn_runner *r = R(L);
    luaL_checktype(L, 1, LUA_TTABLE);
    char err[512];
    int64_t id = lsn_lab_submit_table(r, L, 1, err, sizeof err);
    if (id < 0) {
        lua_pushnil(L);
        lua_pushstring(L, err);
        return 2;
    }
    lua_pushinteger(L, id);
    return 1;
}

/* A length field: a number, or {min=, max=}. */
static void range_field(lua_State *L, int idx, const char *k, int32_t dflt, int32_t *lo, int32_t *hi)
{
    lua_getfield(L, idx, k);
    if (lua_isnil(L, -1)) {
        *lo = *hi = dflt;
    } else if (lua_isnumber(L, -1)) {
        *lo = *hi = (int32_t)lua_tointeger(L, -1);
    } else if (lua_istable(L, -1)) {
        *lo = opt_int_field(L, lua_gettop(L), "min", dflt);
        *hi = opt_int_field(L, lua_gettop(L), "max", *lo);
    } else {
        luaL_error(L, "lab.traffic: %s must be a number or {min=, max=}", k);
    }
    lua_pop(L, 1);
    if (*lo < 1 || *hi < *lo)
        luaL_error(L, "lab.traffic: %s must be >= 1 (and min <= max)", k);
}

static int f_traffic(lua_State *L)
{
    lsn_runner *r = R(L);
    lsn_traffic *t = &r->traffic;
    if (t->fn_ref != LUA_NOREF)
        luaL_unref(L, LUA_REGISTRYINDEX, t->fn_ref);
    memset(t, 0, sizeof *t);
    t->fn_ref = LUA_NOREF;
    if (lua_isnoneornil(L, 1))
        return 0;
    if (lua_isfunction(L, 1)) {
        lua_pushvalue(L, 1);
        t->fn_ref = luaL_ref(L, LUA_REGISTRYINDEX);
        t->active = 1;
        return 0;
    }
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_getfield(L, 1, "rate");
    t->rate = luaL_checknumber(L, -1);
    lua_pop(L, 1);
    if (!(t->rate > 0))
        return luaL_error(L, "lab.traffic: rate must be > 0 requests per second");
    range_field(L, 1, "prompt_tokens", 512, &t->prompt_min, &t->prompt_max);
    range_field(L, 1, "output_tokens", 128, &t->output_min, &t->output_max);
    t->prefix_tokens = opt_int_field(L, 1, "prefix_tokens", 0);
    lua_getfield(L, 1, "prefix_id");
    if (lua_isstring(L, -1))
        snprintf(t->prefix_id, sizeof t->prefix_id, "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
    lua_getfield(L, 1, "count");
    t->count = lua_isnil(L, -1) ? 0 : luaL_checkinteger(L, -1);
    lua_pop(L, 1);
    lua_getfield(L, 1, "seed");
    if (lua_isinteger(L, -1))
        r->rng = 0x9E3779B97F4A7C15ull ^ ((uint64_t)lua_tointeger(L, -1) * 0xBF58476D1CE4E5B9ull);
    lua_pop(L, 1);
    kv_engine *e = engine_or_nil(L);
    kv_engine_info info = {0};
    if (e)
        kv_engine_get_info(e, &info);
    t->next_s = info.clock_s;
    t->active = 1;
    return 0;
}

static int f_step(lua_State *L)
{
    lsn_runner *r = R(L);
    need_coroutine(L, r, "lab.step");
    lua_Integer n = luaL_optinteger(L, 1, 1);
    if (n < 1)
        return 0;
    r->steps_left = n;
    r->wait = W_STEPS;
    return lua_yield(L, 0);
}

static int wait_cond(lua_State *L, lsn_wait kind, const char *what)
{
    lsn_runner *r = R(L);
    need_coroutine(L, r, what);
    luaL_checktype(L, 1, LUA_TFUNCTION);
    lua_Integer max = luaL_optinteger(L, 2, 10000);
    if (max < 1)
        return luaL_error(L, "%s: max_steps must be >= 1", what);
    lua_pushvalue(L, 1);
    if (r->cond_ref != LUA_NOREF)
        luaL_unref(L, LUA_REGISTRYINDEX, r->cond_ref);
    r->cond_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    r->max_steps = max;
    r->steps_done = 0;
    r->wait = kind;
    return lua_yield(L, 0);
}

static int f_run_until(lua_State *L) { return wait_cond(L, W_RUN_UNTIL, "lab.run_until"); }
static int f_wait_until(lua_State *L) { return wait_cond(L, W_COND, "lab.wait_until"); }

static int f_autorun(lua_State *L)
{
    R(L)->autorun = lua_isnone(L, 1) ? 1 : lua_toboolean(L, 1);
    return 0;
}

static int f_speed(lua_State *L)
{
    double v = luaL_checknumber(L, 1);
    if (!(v > 0) || v > 100000)
        return luaL_error(L, "lab.speed: steps per second must be in (0, 100000]");
    R(L)->speed = v;
    return 0;
}

static int f_random(lua_State *L)
{
    lsn_runner *r = R(L);
    double u = lsn_random(r);
    if (lua_isnone(L, 1)) {
        lua_pushnumber(L, u);
        return 1;
    }
    lua_Integer lo = 1, hi = luaL_checkinteger(L, 1);
    if (!lua_isnone(L, 2)) {
        lo = hi;
        hi = luaL_checkinteger(L, 2);
    }
    if (hi < lo)
        return luaL_error(L, "lab.random: interval is empty");
    lua_pushinteger(L, lo + (lua_Integer)(u * (double)(hi - lo + 1)));
    return 1;
}

/* ---- views ---------------------------------------------------------------- */

static lsn_view_int *check_view(lua_State *L, int idx)
{
    const char *name = luaL_checkstring(L, idx);
    lsn_view_int *v = lsn_view_get(R(L), name);
    if (!v)
        luaL_error(L, "unknown view '%s' (views: text, pool, memory, flags, metrics, log, tp, plot, requests)", name);
    return v;
}

static int f_show(lua_State *L)
{
    lsn_view_int *v = check_view(L, 1);
    v->pub.shown = 1;
    if (lua_istable(L, 2)) {
        lua_pushnil(L);
        while (lua_next(L, 2)) {
            char val[256];
            if (lua_type(L, -2) == LUA_TSTRING && flag_text(L, -1, val, sizeof val))
                lsn_view_set_option(v, lua_tostring(L, -2), val);
            lua_pop(L, 1);
        }
    }
    R(L)->changes |= LSN_CH_VIEWS;
    return 0;
}

static int f_hide(lua_State *L)
{
    lsn_view_int *v = check_view(L, 1);
    if (strcmp(v->pub.name, "text"))
        v->pub.shown = 0;
    v->pub.focus = 0;
    R(L)->changes |= LSN_CH_VIEWS;
    return 0;
}

static int f_focus(lua_State *L)
{
    lsn_runner *r = R(L);
    lsn_view_int *v = check_view(L, 1);
    for (int i = 0; i < LSN_NVIEWS; i++)
        r->views[i].pub.focus = 0;
    v->pub.focus = 1;
    v->pub.shown = 1;
    r->changes |= LSN_CH_VIEWS;
    return 0;
}

static int f_highlight(lua_State *L)
{
    lsn_view_int *v = check_view(L, 1);
    const char *target = luaL_checkstring(L, 2);
    int64_t ids[1024];
    int n = 0;
    if (lua_istable(L, 3)) {
        lua_Integer len = luaL_len(L, 3);
        for (lua_Integer i = 1; i <= len && n < 1024; i++) {
            lua_rawgeti(L, 3, i);
            ids[n++] = luaL_checkinteger(L, -1);
            lua_pop(L, 1);
        }
    } else if (lua_isinteger(L, 3)) {
        ids[n++] = lua_tointeger(L, 3);
    }
    lsn_view_add_highlight(v, target, ids, n, luaL_optstring(L, 4, ""));
    R(L)->changes |= LSN_CH_VIEWS;
    return 0;
}

static int f_unhighlight(lua_State *L)
{
    lsn_runner *r = R(L);
    if (lua_isnoneornil(L, 1)) {
        for (int i = 0; i < LSN_NVIEWS; i++)
            lsn_view_clear_highlights(&r->views[i]);
    } else {
        lsn_view_clear_highlights(check_view(L, 1));
    }
    r->changes |= LSN_CH_VIEWS;
    return 0;
}

static char *opt_dup(lua_State *L, int idx, const char *k)
{
    lua_getfield(L, idx, k);
    char *s = lua_isstring(L, -1) ? strdup(lua_tostring(L, -1)) : NULL;
    lua_pop(L, 1);
    return s;
}

static int f_plot(lua_State *L)
{
    lsn_runner *r = R(L);
    luaL_checktype(L, 1, LUA_TTABLE);
    lsn_plot_reset(r);
    r->plot_title = opt_dup(L, 1, "title");
    r->plot_xlabel = opt_dup(L, 1, "xlabel");
    r->plot_ylabel = opt_dup(L, 1, "ylabel");
    lua_getfield(L, 1, "logy");
    r->plot_logy = lua_toboolean(L, -1);
    lua_pop(L, 1);
    lua_getfield(L, 1, "series");
    if (lua_istable(L, -1)) {
        lua_Integer n = luaL_len(L, -1);
        for (lua_Integer i = 1; i <= n; i++) {
            lua_rawgeti(L, -1, i);
            lsn_plot_series(r, luaL_checkstring(L, -1));
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
    r->plot_on = 1;
    lsn_view_get(r, "plot")->pub.shown = 1;
    r->changes |= LSN_CH_PLOT | LSN_CH_VIEWS;
    return 0;
}

static int f_plot_add(lua_State *L)
{
    lsn_runner *r = R(L);
    int si;
    if (lua_isinteger(L, 1)) {
        si = (int)lua_tointeger(L, 1) - 1;
        if (si < 0 || si >= r->nseries)
            return luaL_error(L, "lab.plot_add: there is no series %d", si + 1);
    } else {
        si = lsn_plot_series(r, luaL_checkstring(L, 1));
    }
    lsn_plot_add(r, si, luaL_checknumber(L, 2), luaL_checknumber(L, 3));
    return 0;
}

/* ---- questions and goals -------------------------------------------------- */

/* A list of strings (or numbers) at t[k], copied. */
static char **str_list(lua_State *L, int idx, const char *k, int *n, int numbers_as_answers)
{
    *n = 0;
    lua_getfield(L, idx, k);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return NULL;
    }
    if (!lua_istable(L, -1))
        luaL_error(L, "'%s' must be a list", k);
    lua_Integer len = luaL_len(L, -1);
    char **v = calloc((size_t)len + 1, sizeof *v);
    for (lua_Integer i = 1; i <= len; i++) {
        lua_rawgeti(L, -1, i);
        char buf[256];
        if (numbers_as_answers && lua_type(L, -1) == LUA_TNUMBER)
            snprintf(buf, sizeof buf, "%.10g", lua_tonumber(L, -1));
        else if (lua_type(L, -1) == LUA_TSTRING)
            snprintf(buf, sizeof buf, "%s", lua_tostring(L, -1));
        else {
            for (int j = 0; j < *n; j++)
                free(v[j]);
            free(v);
            luaL_error(L, "'%s'[%d] must be a string", k, (int)i);
            return NULL;
        }
        v[(*n)++] = strdup(buf);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return v;
}

static int f_ask(lua_State *L)
{
    lsn_runner *r = R(L);
    need_coroutine(L, r, "lab.ask");
    luaL_checktype(L, 1, LUA_TTABLE);
    lsn_question_int *q = &r->q;
    lsn_question_clear(q);
    lua_getfield(L, 1, "prompt");
    if (!lua_isstring(L, -1))
        return luaL_error(L, "lab.ask: needs a prompt");
    q->prompt = strdup(lua_tostring(L, -1));
    lua_pop(L, 1);
    lua_getfield(L, 1, "choices");
    int is_choice = lua_istable(L, -1);
    lua_pop(L, 1);
    if (is_choice) {
        q->choices = str_list(L, 1, "choices", &q->nchoices, 0);
        if (q->nchoices < 2 || q->nchoices > 26)
            return luaL_error(L, "lab.ask: choices must list 2 to 26 answers");
        lua_getfield(L, 1, "correct");
        q->correct = lua_isinteger(L, -1) ? (int)lua_tointeger(L, -1) : 0;
        lua_pop(L, 1);
        if (q->correct < 1 || q->correct > q->nchoices)
            return luaL_error(L, "lab.ask: correct must be the number (1..%d) of the right choice", q->nchoices);
        q->why = calloc((size_t)q->nchoices, sizeof *q->why);
        lua_getfield(L, 1, "why");
        if (lua_istable(L, -1)) {
            for (int i = 1; i <= q->nchoices; i++) {
                lua_rawgeti(L, -1, i);
                if (lua_isstring(L, -1))
                    q->why[i - 1] = strdup(lua_tostring(L, -1));
                lua_pop(L, 1);
            }
        }
        lua_pop(L, 1);
    } else {
        lua_getfield(L, 1, "answer");
        if (!lua_isnumber(L, -1))
            return luaL_error(L, "lab.ask: a numeric question needs answer = <number> (or choices = {...})");
        q->answer = lua_tonumber(L, -1);
        lua_pop(L, 1);
        if (!isfinite(q->answer))
            return luaL_error(L, "lab.ask: the answer is not a finite number (did a figure come out nil or 0/0?)");
        q->unit = opt_dup(L, 1, "unit");
        if (!q->unit)
            q->unit = strdup("");
        if (!lsn_unit_find(q->unit))
            return luaL_error(L, "lab.ask: unknown unit '%s'", q->unit);
        lua_getfield(L, 1, "abs");
        q->abs = lua_isnumber(L, -1) ? lua_tonumber(L, -1) : 0;
        lua_pop(L, 1);
        /* API.md: 1% by default, but `abs` given alone is the whole tolerance. */
        lua_getfield(L, 1, "tolerance");
        q->rel = lua_isnumber(L, -1) ? lua_tonumber(L, -1) : q->abs > 0 ? 0.0 : 0.01;
        lua_pop(L, 1);
        lua_getfield(L, 1, "near");
        if (lua_istable(L, -1)) {
            lua_Integer n = luaL_len(L, -1);
            q->near = calloc((size_t)n + 1, sizeof *q->near);
            for (lua_Integer i = 1; i <= n; i++) {
                lua_rawgeti(L, -1, i);
                if (!lua_istable(L, -1))
                    return luaL_error(L, "lab.ask: near[%d] must be {value = ..., why = \"...\"}", (int)i);
                lua_getfield(L, -1, "value");
                lua_getfield(L, -2, "why");
                if (!lua_isnumber(L, -2) || !lua_isstring(L, -1))
                    return luaL_error(L, "lab.ask: near[%d] must be {value = <number>, why = \"...\"}", (int)i);
                q->near[q->nnear].value = lua_tonumber(L, -2);
                q->near[q->nnear].why = strdup(lua_tostring(L, -1));
                q->nnear++;
                lua_pop(L, 3);
            }
        }
        lua_pop(L, 1);
    }
    q->hints = str_list(L, 1, "hints", &q->nhints, 0);
    q->wrong = str_list(L, 1, "wrong", &q->nwrong, 1);
    lua_getfield(L, 1, "script");
    if (lua_type(L, -1) == LUA_TNUMBER) {
        char buf[128];
        q->script = strdup(lsn_answer_format(lua_tonumber(L, -1), q->unit, buf, sizeof buf));
    } else if (lua_isstring(L, -1)) {
        q->script = strdup(lua_tostring(L, -1));
    }
    lua_pop(L, 1);
    q->explain = opt_dup(L, 1, "explain");
    q->active = 1;
    r->wait = W_ANSWER;
    r->changes |= LSN_CH_QUESTION | LSN_CH_STATE;
    return lua_yield(L, 0);
}

static int f_goal(lua_State *L)
{
    lsn_runner *r = R(L);
    need_coroutine(L, r, "lab.goal");
    luaL_checktype(L, 1, LUA_TTABLE);
    lsn_goal_clear(r);
    lsn_goal_int *g = &r->g;
    g->text = opt_dup(L, 1, "text");
    if (!g->text)
        return luaL_error(L, "lab.goal: needs text = \"what the learner must make happen\"");
    lua_getfield(L, 1, "check");
    if (!lua_isfunction(L, -1))
        return luaL_error(L, "lab.goal: needs check = function() return <true when reached> end");
    g->check_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    g->hints = str_list(L, 1, "hints", &g->nhints, 0);
    lua_getfield(L, 1, "script");
    if (lua_istable(L, -1)) {
        lua_Integer n = luaL_len(L, -1);
        g->script_names = calloc((size_t)n + 1, sizeof *g->script_names);
        g->script_values = calloc((size_t)n + 1, sizeof *g->script_values);
        for (lua_Integer i = 1; i <= n; i++) {
            lua_rawgeti(L, -1, i);
            if (!lua_istable(L, -1))
                return luaL_error(L, "lab.goal: script[%d] must be {\"flag-name\", value}", (int)i);
            lua_rawgeti(L, -1, 1);
            lua_rawgeti(L, -2, 2);
            char val[512];
            if (!lua_isstring(L, -2) || !flag_text(L, -1, val, sizeof val))
                return luaL_error(L, "lab.goal: script[%d] must be {\"flag-name\", value}", (int)i);
            g->script_names[g->nscript] = strdup(lua_tostring(L, -2));
            g->script_values[g->nscript] = strdup(val);
            g->nscript++;
            lua_pop(L, 3);
        }
    }
    lua_pop(L, 1);
    lua_getfield(L, 1, "steps");
    g->steps = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 0;
    lua_pop(L, 1);
    g->active = 1;
    r->wait = W_GOAL;
    r->changes |= LSN_CH_GOAL | LSN_CH_STATE;
    return lua_yield(L, 0);
}

static int f_on_flag(lua_State *L)
{
    lsn_runner *r = R(L);
    if (r->on_flag_ref != LUA_NOREF)
        luaL_unref(L, LUA_REGISTRYINDEX, r->on_flag_ref);
    r->on_flag_ref = LUA_NOREF;
    if (lua_isfunction(L, 1)) {
        lua_pushvalue(L, 1);
        r->on_flag_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    return 0;
}

static int f_on_step(lua_State *L)
{
    lsn_runner *r = R(L);
    if (r->on_step_ref != LUA_NOREF)
        luaL_unref(L, LUA_REGISTRYINDEX, r->on_step_ref);
    r->on_step_ref = LUA_NOREF;
    if (lua_isfunction(L, 1)) {
        lua_pushvalue(L, 1);
        r->on_step_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    return 0;
}

/* ---- the table ------------------------------------------------------------ */

static const luaL_Reg lab_funcs[] = {
    {"page", f_page},         {"say", f_say},           {"pause", f_pause},
    {"start", f_start},       {"restart", f_restart},   {"stop", f_stop},
    {"flag", f_flag},         {"running", f_running},   {"plan", f_plan}, {"what_if", f_what_if},
    {"model", f_model},       {"config", f_config},     {"gpu", f_gpu},           {"log", f_log},
    {"step_time", f_step_time},
    {"metrics", f_metrics},   {"blocks", f_blocks},     {"block", f_block},
    {"requests", f_requests}, {"request", f_request},   {"ranks", f_ranks},
    {"events", f_events},     {"last_event", f_last_event}, {"timeline", f_timeline}, {"figure", f_figure},
    {"catalog", f_catalog},   {"submit", f_submit},     {"traffic", f_traffic},
    {"step", f_step},         {"run_until", f_run_until}, {"wait_until", f_wait_until},
    {"autorun", f_autorun},   {"speed", f_speed},       {"random", f_random},
    {"show", f_show},         {"hide", f_hide},         {"focus", f_focus},
    {"highlight", f_highlight}, {"unhighlight", f_unhighlight}, {"plot", f_plot},
    {"plot_add", f_plot_add}, {"ask", f_ask},           {"goal", f_goal},
    {"on_flag", f_on_flag},   {"on_step", f_on_step},   {NULL, NULL},
};

void lsn_lab_push(lua_State *L, lsn_runner *r)
{
    luaL_newlib(L, lab_funcs);
    lua_pushboolean(L, r->headless);
    lua_setfield(L, -2, "headless");
    lua_createtable(L, 0, 3);
    setint(L, "id", r->number);
    setstr(L, "title", r->title);
    setstr(L, "file", r->shown_path);
    lua_setfield(L, -2, "lesson");
}
