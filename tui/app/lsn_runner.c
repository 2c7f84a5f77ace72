/* lsn_runner: the lesson host. One Lua state per loaded lesson, sandboxed;
 * run(lab) is a coroutine resumed from here; every call into Lua is
 * protected and an error becomes text with file:line and a traceback. */
#include <lauxlib.h>
#include <lualib.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "lsn_int.h"
#include "paths.h"

#define LSN_MEM_LIMIT ((size_t)256 << 20) /* bytes of Lua heap per lesson */
#define HOOK_EVERY 100000                  /* instructions per hook call */
#define HOOK_LIMIT 2000L                   /* hook calls without waiting: 2e8 instructions */
#define DEFAULT_SPEED 20.0                 /* engine steps per second while animating */
#define DEFAULT_MAX_STEPS 10000
#define MAX_STEPS_PER_TICK 1000

const char *const lsn_view_names[LSN_NVIEWS] = {"text", "pool", "memory", "flags", "metrics",
                                                "log", "tp", "plot", "requests"};

/* ---- small helpers ------------------------------------------------------ */

void lsn_sb_clear(lsn_strbuf *b)
{
    b->len = 0;
    if (b->s)
        b->s[0] = '\0';
}

void lsn_sb_add(lsn_strbuf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *ns = realloc(b->s, cap);
        if (!ns)
            return;
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void lsn_sb_free(lsn_strbuf *b)
{
    free(b->s);
    memset(b, 0, sizeof *b);
}

static char *xstrdup(const char *s)
{
    return s ? strdup(s) : NULL;
}

static void free_strv(char **v, int n)
{
    if (!v)
        return;
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void lsn_logf(lsn_runner *r, const char *fmt, ...)
{
    if (!r->log)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(r->log, fmt, ap);
    va_end(ap);
}

double lsn_random(lsn_runner *r)
{
    /* xorshift64*: deterministic per lesson, so a replay sees the same numbers */
    uint64_t x = r->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->rng = x;
    return (double)((x * 0x2545F4914F6CDD1Dull) >> 11) / 9007199254740992.0;
}

lsn_runner *lsn_from_L(lua_State *L)
{
    return *(lsn_runner **)lua_getextraspace(L);
}

static void set_error(lsn_runner *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_error(lsn_runner *r, const char *fmt, ...)
{
    char tmp[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    lsn_sb_clear(&r->error);
    lsn_sb_add(&r->error, tmp, strlen(tmp));
    r->has_error = 1;
    r->wait = W_ERROR;
    r->q.active = 0;
    r->g.active = 0;
    r->changes |= LSN_CH_STATE | LSN_CH_TEXT | LSN_CH_QUESTION | LSN_CH_GOAL;
}

static void ahead_clear(lsn_runner *r);
static void say_line(lsn_runner *r, const char *s);

/* ---- views and plot ------------------------------------------------------ */

lsn_view_int *lsn_view_get(lsn_runner *r, const char *name)
{
    for (int i = 0; i < LSN_NVIEWS; i++)
        if (name && !strcmp(lsn_view_names[i], name))
            return &r->views[i];
    return NULL;
}

static void view_sync(lsn_view_int *v)
{
    v->pub.highlights = v->hl;
    v->pub.nhighlights = v->nhl;
    v->pub.option_keys = (const char *const *)v->keys;
    v->pub.option_values = (const char *const *)v->vals;
    v->pub.noptions = v->nopt;
}

void lsn_view_set_option(lsn_view_int *v, const char *k, const char *val)
{
    for (int i = 0; i < v->nopt; i++) {
        if (!strcmp(v->keys[i], k)) {
            free(v->vals[i]);
            v->vals[i] = xstrdup(val);
            return;
        }
    }
    char **nk = realloc(v->keys, (size_t)(v->nopt + 1) * sizeof *nk);
    if (!nk)
        return;
    v->keys = nk;
    char **nv = realloc(v->vals, (size_t)(v->nopt + 1) * sizeof *nv);
    if (!nv)
        return;
    v->vals = nv;
    v->keys[v->nopt] = xstrdup(k);
    v->vals[v->nopt] = xstrdup(val);
    v->nopt++;
    view_sync(v);
}

void lsn_view_add_highlight(lsn_view_int *v, const char *target, const int64_t *ids, int nids, const char *note)
{
    if (v->nhl == v->caphl) {
        int cap = v->caphl ? v->caphl * 2 : 4;
        lsn_highlight *nh = realloc(v->hl, (size_t)cap * sizeof *nh);
        if (!nh)
            return;
        v->hl = nh;
        v->caphl = cap;
    }
    lsn_highlight *h = &v->hl[v->nhl++];
    h->target = xstrdup(target ? target : "");
    h->note = xstrdup(note ? note : "");
    h->nids = 0;
    h->ids = NULL;
    if (nids > 0) {
        int64_t *c = malloc((size_t)nids * sizeof *c);
        if (c) {
            memcpy(c, ids, (size_t)nids * sizeof *c);
            h->ids = c;
            h->nids = nids;
        }
    }
    view_sync(v);
}

void lsn_view_clear_highlights(lsn_view_int *v)
{
    for (int i = 0; i < v->nhl; i++) {
        free((char *)v->hl[i].target);
        free((char *)v->hl[i].note);
        free((int64_t *)v->hl[i].ids);
    }
    v->nhl = 0;
    view_sync(v);
}

static void views_reset(lsn_runner *r)
{
    for (int i = 0; i < LSN_NVIEWS; i++) {
        lsn_view_int *v = &r->views[i];
        lsn_view_clear_highlights(v);
        free(v->hl);
        free_strv(v->keys, v->nopt);
        free_strv(v->vals, v->nopt);
        memset(v, 0, sizeof *v);
        v->pub.name = lsn_view_names[i];
        v->pub.shown = i == 0; /* text is always shown */
        view_sync(v);
    }
}

void lsn_plot_reset(lsn_runner *r)
{
    for (int i = 0; i < r->nseries; i++) {
        free(r->series[i].name);
        free(r->series[i].x);
        free(r->series[i].y);
    }
    free(r->series);
    free(r->pub_series);
    r->series = NULL;
    r->pub_series = NULL;
    r->nseries = 0;
    free(r->plot_title);
    free(r->plot_xlabel);
    free(r->plot_ylabel);
    r->plot_title = r->plot_xlabel = r->plot_ylabel = NULL;
    r->plot_logy = 0;
    r->plot_on = 0;
    r->changes |= LSN_CH_PLOT;
}

int lsn_plot_series(lsn_runner *r, const char *name)
{
    for (int i = 0; i < r->nseries; i++)
        if (!strcmp(r->series[i].name, name))
            return i;
    lsn_series_int *ns = realloc(r->series, (size_t)(r->nseries + 1) * sizeof *ns);
    if (!ns)
        return -1;
    r->series = ns;
    lsn_series *np = realloc(r->pub_series, (size_t)(r->nseries + 1) * sizeof *np);
    if (!np)
        return -1;
    r->pub_series = np;
    memset(&r->series[r->nseries], 0, sizeof r->series[0]);
    r->series[r->nseries].name = xstrdup(name);
    r->plot_on = 1;
    return r->nseries++;
}

void lsn_plot_add(lsn_runner *r, int si, double x, double y)
{
    if (si < 0 || si >= r->nseries)
        return;
    lsn_series_int *s = &r->series[si];
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 64;
        double *nx = realloc(s->x, (size_t)cap * sizeof *nx);
        if (!nx)
            return;
        s->x = nx;
        double *ny = realloc(s->y, (size_t)cap * sizeof *ny);
        if (!ny)
            return;
        s->y = ny;
        s->cap = cap;
    }
    s->x[s->n] = x;
    s->y[s->n] = y;
    s->n++;
    r->changes |= LSN_CH_PLOT;
}

/* ---- questions and goals --------------------------------------------------- */

void lsn_question_clear(lsn_question_int *q)
{
    free(q->prompt);
    free(q->unit);
    free_strv(q->choices, q->nchoices);
    free_strv(q->why, q->nchoices);
    for (int i = 0; i < q->nnear; i++)
        free((char *)q->near[i].why);
    free(q->near);
    free_strv(q->hints, q->nhints);
    free(q->script);
    free_strv(q->wrong, q->nwrong);
    free(q->explain);
    memset(q, 0, sizeof *q);
}

void lsn_goal_clear(lsn_runner *r)
{
    lsn_goal_int *g = &r->g;
    free(g->text);
    free_strv(g->hints, g->nhints);
    free_strv(g->script_names, g->nscript);
    free_strv(g->script_values, g->nscript);
    if (r->L && g->check_ref != LUA_NOREF && g->check_ref != 0)
        luaL_unref(r->L, LUA_REGISTRYINDEX, g->check_ref);
    memset(g, 0, sizeof *g);
    g->check_ref = LUA_NOREF;
}

/* ---- progress -------------------------------------------------------------- */

static void sync_infos(lsn_runner *r)
{
    for (int i = 0; i < r->course.nlessons; i++) {
        lsn_info *l = &r->course.lessons[i];
        if (l->number <= LSN_MAX_LESSONS) {
            l->done = r->progress.lessons[l->number].done;
            l->step = r->progress.lessons[l->number].step;
        }
    }
}

static void save_progress(lsn_runner *r)
{
    sync_infos(r);
    if (!r->save || r->checking || r->replaying)
        return;
    char err[512];
    if (lsn_progress_save(&r->progress, r->progress_path, err, sizeof err) < 0) {
        snprintf(r->notice, sizeof r->notice, "Progress not saved: %s", err);
        r->save = 0; /* say it once, not at every step */
    }
}

static void record(lsn_runner *r, lsn_input_kind kind, const char *name, const char *value)
{
    if (r->replaying || r->checking || !r->number)
        return;
    lsn_progress_add_input(&r->progress, r->number, r->step, kind, name, value);
}

extern int lsn_cmd_verbose;

static void complete_step(lsn_runner *r)
{
    if (r->checking && lsn_cmd_verbose) /* kvlab check -v: show the page as the learner would see it */
        lsn_logf(r, "    --- step %d, page %d \"%s\":\n%s\n", r->step + 1, r->page_no, r->page_title,
                 r->text.s ? r->text.s : "");
    r->step++;
    if (r->replaying || r->checking)
        return;
    lsn_lesson_progress *p = &r->progress.lessons[r->number];
    p->step = r->step;
    r->progress.current = r->number;
    save_progress(r);
}

/* ---- Lua state ------------------------------------------------------------- */

static void *l_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    lsn_runner *r = ud;
    if (!ptr)
        osize = 0;
    if (nsize == 0) {
        free(ptr);
        r->mem_used -= osize;
        return NULL;
    }
    if (nsize > osize && r->mem_used + (nsize - osize) > LSN_MEM_LIMIT)
        return NULL;
    void *p = realloc(ptr, nsize);
    if (p)
        r->mem_used = r->mem_used - osize + nsize;
    return p;
}

static void hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    lsn_runner *r = lsn_from_L(L);
    if (++r->hook_ticks > HOOK_LIMIT) {
        r->hook_ticks = 0;
        luaL_where(L, 0); /* the running Lua function: where the loop is */
        lua_pushstring(L, "the lesson ran too long without waiting (an endless loop?)");
        lua_concat(L, 2);
        lua_error(L);
    }
}

static int msgh(lua_State *L)
{
    const char *m = lua_tostring(L, 1);
    if (!m) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
            m = lua_tostring(L, -1);
        else
            m = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, m, 1);
    return 1;
}

/* Call the function below nargs arguments on r->L, protected. Returns 0, or
 * -1 after putting the error (with traceback) into the runner. */
static int pcall(lsn_runner *r, int nargs, int nres)
{
    lua_State *L = r->L;
    int base = lua_gettop(L) - nargs;
    lua_pushcfunction(L, msgh);
    lua_insert(L, base);
    r->hook_ticks = 0;
    int st = lua_pcall(L, nargs, nres, base);
    lua_remove(L, base);
    if (st != LUA_OK) {
        set_error(r, "%s", lua_tostring(L, -1) ? lua_tostring(L, -1) : "error");
        lua_pop(L, 1);
        return -1;
    }
    return 0;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (n < 0 || n > (8L << 20)) {
        fclose(f);
        return NULL;
    }
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        *len = (size_t)n;
    }
    return buf;
}

/* The short name lessons are shown by: "<lessons folder name>/<rel>". */
static void shown_name(const lsn_runner *r, const char *rel, char *out, size_t outl)
{
    const char *base = strrchr(r->lessons_dir, '/');
    base = base && base[1] ? base + 1 : r->lessons_dir;
    snprintf(out, outl, "%.255s/%.1024s", base, rel);
}

/* Load a Lua file as text only (no bytecode) with a short chunk name. */
static int load_file(lsn_runner *r, lua_State *L, const char *path, const char *shown)
{
    size_t len = 0;
    char *buf = slurp(path, &len);
    if (!buf) {
        lua_pushfstring(L, "cannot read %s", shown);
        return LUA_ERRFILE;
    }
    char chunk[PATH_MAX + 2];
    snprintf(chunk, sizeof chunk, "@%s", shown);
    int st = luaL_loadbufferx(L, buf, len, chunk, "t");
    free(buf);
    (void)r;
    return st;
}

static int l_require(lua_State *L)
{
    lsn_runner *r = lsn_from_L(L);
    const char *name = luaL_checkstring(L, 1);
    int ok = !strncmp(name, "lib.", 4) && name[4];
    for (const char *p = name + 4; ok && *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
            ok = 0;
    if (!ok)
        return luaL_error(L, "require(\"%s\"): lessons can only load their helpers, as require(\"lib.NAME\") "
                             "for lessons/lib/NAME.lua",
                          name);
    lua_getfield(L, LUA_REGISTRYINDEX, "lsn.loaded");
    lua_getfield(L, -1, name);
    if (lua_toboolean(L, -1))
        return 1;
    if (lua_type(L, -1) == LUA_TBOOLEAN)
        return luaL_error(L, "require(\"%s\"): the helper requires itself (a loop)", name);
    lua_pop(L, 1);
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, name);
    char rel[128], path[PATH_MAX + 160], shown[PATH_MAX + 160];
    snprintf(rel, sizeof rel, "lib/%s.lua", name + 4);
    snprintf(path, sizeof path, "%s/%s", r->lessons_dir, rel);
    shown_name(r, rel, shown, sizeof shown);
    if (load_file(r, L, path, shown) != LUA_OK)
        return lua_error(L);
    lua_call(L, 0, 1);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_pushboolean(L, 1);
    }
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, name);
    return 1;
}

static int l_print(lua_State *L)
{
    lsn_runner *r = lsn_from_L(L);
    if (!lsn_cmd_verbose)
        return 0;
    int n = lua_gettop(L);
    lsn_strbuf b = {0};
    for (int i = 1; i <= n; i++) {
        size_t len;
        const char *s = luaL_tolstring(L, i, &len);
        if (i > 1)
            lsn_sb_add(&b, "\t", 1);
        lsn_sb_add(&b, s, len);
        lua_pop(L, 1);
    }
    lsn_logf(r, "    [%s] %s\n", r->shown_path, b.s ? b.s : "");
    lsn_sb_free(&b);
    return 0;
}

static const char prelude[] =
    "local error, tostring = error, tostring\n"
    "setmetatable(_G, {\n"
    "  __newindex = function(_, k)\n"
    "    error(\"assignment to undeclared global '\" .. tostring(k) .. \"' (declare it with local)\", 2)\n"
    "  end,\n"
    "  __index = function(_, k)\n"
    "    error(\"undeclared global '\" .. tostring(k) .. \"'\", 2)\n"
    "  end,\n"
    "})\n";

/* A fresh sandboxed state: base, string, table, math, utf8, coroutine;
 * os.clock and os.time only; require of lessons/lib; strict globals. */
static lua_State *new_state(lsn_runner *r)
{
    lua_State *L = lua_newstate(l_alloc, r);
    if (!L)
        return NULL;
    *(lsn_runner **)lua_getextraspace(L) = r;
    static const luaL_Reg libs[] = {
        {LUA_GNAME, luaopen_base},        {LUA_COLIBNAME, luaopen_coroutine}, {LUA_TABLIBNAME, luaopen_table},
        {LUA_STRLIBNAME, luaopen_string}, {LUA_MATHLIBNAME, luaopen_math},    {LUA_UTF8LIBNAME, luaopen_utf8},
    };
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
        luaL_requiref(L, libs[i].name, libs[i].func, 1);
        lua_pop(L, 1);
    }
    /* os: only the clocks */
    luaL_requiref(L, LUA_OSLIBNAME, luaopen_os, 0);
    lua_newtable(L);
    lua_getfield(L, -2, "clock");
    lua_setfield(L, -2, "clock");
    lua_getfield(L, -2, "time");
    lua_setfield(L, -2, "time");
    lua_setglobal(L, "os");
    lua_pop(L, 1);
    lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_pushnil(L);
    lua_setfield(L, -2, LUA_OSLIBNAME);
    lua_pop(L, 1);
    /* no loading of code from files or strings, no bytecode */
    static const char *const gone[] = {"dofile", "loadfile", "load"};
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++) {
        lua_pushnil(L);
        lua_setglobal(L, gone[i]);
    }
    lua_getglobal(L, "string");
    lua_pushnil(L);
    lua_setfield(L, -2, "dump");
    lua_pop(L, 1);
    /* deterministic math.random for replays */
    lua_getglobal(L, "math");
    lua_getfield(L, -1, "randomseed");
    lua_pushinteger(L, 42);
    lua_call(L, 1, 0);
    lua_pop(L, 1);
    lua_newtable(L);
    lua_setfield(L, LUA_REGISTRYINDEX, "lsn.loaded");
    lua_pushcfunction(L, l_require);
    lua_setglobal(L, "require");
    lua_pushcfunction(L, l_print);
    lua_setglobal(L, "print");
    if (luaL_loadbufferx(L, prelude, sizeof prelude - 1, "=prelude", "t") != LUA_OK || lua_pcall(L, 0, 0, 0)) {
        lua_close(L);
        return NULL;
    }
    lua_sethook(L, hook, LUA_MASKCOUNT, HOOK_EVERY);
    return L;
}

/* ---- creation -------------------------------------------------------------- */

lsn_runner *lsn_new(const lsn_config *cfg, char *err, size_t errlen)
{
    lsn_runner *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    const char *ld = cfg && cfg->lessons_dir ? cfg->lessons_dir : NULL;
    if (!ld) {
        const char *env = getenv("KVLAB_LESSONS_DIR");
        ld = env && env[0] ? env : kvlab_lessons_dir();
    }
    snprintf(r->lessons_dir, sizeof r->lessons_dir, "%s", ld);
    size_t n = strlen(r->lessons_dir);
    while (n > 1 && r->lessons_dir[n - 1] == '/')
        r->lessons_dir[--n] = '\0';
    snprintf(r->assets_dir, sizeof r->assets_dir, "%s",
             cfg && cfg->assets_dir ? cfg->assets_dir : kvlab_assets_dir());
    r->headless = cfg ? cfg->headless : 0;
    r->device = cfg ? cfg->device : NULL;
    r->speed = DEFAULT_SPEED;
    r->speed_factor = 1;
    r->g.check_ref = LUA_NOREF;
    r->cond_ref = LUA_NOREF;
    r->on_flag_ref = LUA_NOREF;
    r->on_step_ref = LUA_NOREF;
    r->traffic.fn_ref = LUA_NOREF;
    views_reset(r);
    if (lsn_course_load(&r->course, r->lessons_dir, err, errlen) < 0) {
        free(r);
        return NULL;
    }
    r->server = lsn_server_new(r->assets_dir, r->device, r->headless, err, errlen);
    if (!r->server) {
        lsn_course_free(&r->course);
        free(r);
        return NULL;
    }
    lsn_progress_init(&r->progress);
    const char *sd = cfg ? cfg->state_dir : NULL;
    if (sd && !sd[0]) {
        r->save = 0;
    } else if (lsn_progress_path(sd, r->progress_path, sizeof r->progress_path) == 0) {
        r->save = 1;
        int rc = lsn_progress_load(&r->progress, r->progress_path, r->notice, sizeof r->notice);
        if (rc < 0)
            r->save = 0;
    } else {
        snprintf(r->notice, sizeof r->notice, "Neither XDG_STATE_HOME nor HOME is set: progress will not be saved.");
    }
    sync_infos(r);
    return r;
}

static void unload(lsn_runner *r)
{
    lsn_question_clear(&r->q);
    lsn_goal_clear(r);
    if (r->L)
        lua_close(r->L);
    r->L = NULL;
    r->co = NULL;
    r->co_ref = r->lab_ref = 0;
    r->cond_ref = LUA_NOREF;
    r->on_flag_ref = LUA_NOREF;
    r->on_step_ref = LUA_NOREF;
    memset(&r->traffic, 0, sizeof r->traffic);
    r->traffic.fn_ref = LUA_NOREF;
    r->mem_used = 0;
    r->wait = W_NONE;
    r->step = 0;
    r->number = 0;
    r->title[0] = '\0';
    r->page_title[0] = '\0';
    r->page_no = 0;
    lsn_sb_clear(&r->text);
    lsn_sb_clear(&r->error);
    r->has_error = 0;
    views_reset(r);
    lsn_plot_reset(r);
    free_strv(r->allowed, r->nallowed);
    r->allowed = NULL;
    r->nallowed = 0;
    r->allow_all = 0;
    for (int i = 0; i < r->npub_flags; i++)
        free(r->flag_values[i]);
    free(r->flag_values);
    for (int i = 0; i < r->npub_flags; i++)
        free_strv((char **)r->pub_flags[i].choices, r->pub_flags[i].nchoices);
    free(r->pub_flags);
    r->pub_flags = NULL;
    r->flag_values = NULL;
    r->npub_flags = 0;
    lsn_server_stop(r->server);
    lsn_server_reset_args(r->server);
    r->server_started = 0;
    r->has_server_err = 0;
    r->server_err[0] = '\0';
    r->autorun = 0;
    r->speed = DEFAULT_SPEED;
    r->accum = 0;
    r->steps_left = r->steps_done = r->max_steps = 0;
}

void lsn_free(lsn_runner *r)
{
    if (!r)
        return;
    unload(r);
    ahead_clear(r);
    views_reset(r);
    lsn_sb_free(&r->text);
    lsn_sb_free(&r->error);
    lsn_server_free(r->server);
    lsn_course_free(&r->course);
    lsn_progress_clear(&r->progress);
    free(r);
}

const char *lsn_notice(const lsn_runner *r) { return r->notice[0] ? r->notice : NULL; }
void lsn_notice_clear(lsn_runner *r) { r->notice[0] = '\0'; }

int lsn_count(const lsn_runner *r) { return r->course.nlessons; }

const lsn_info *lsn_info_at(const lsn_runner *r, int index)
{
    return index >= 0 && index < r->course.nlessons ? &r->course.lessons[index] : NULL;
}

const lsn_info *lsn_info_of(const lsn_runner *r, int number) { return lsn_info_at(r, number - 1); }

int lsn_resume_lesson(const lsn_runner *r)
{
    const lsn_info *cur = lsn_info_of(r, r->progress.current);
    if (cur && cur->available)
        return cur->number;
    for (int i = 0; i < r->course.nlessons; i++)
        if (r->course.lessons[i].available && !r->course.lessons[i].done)
            return r->course.lessons[i].number;
    return 1;
}

/* ---- flags offered by the lesson ------------------------------------------ */

static int allowed(const lsn_runner *r, const char *name)
{
    const char *canon = NULL;
    if (!lsn_server_flag_info(name, &canon, NULL, NULL))
        return 0;
    if (r->allow_all)
        return 1;
    for (int i = 0; i < r->nallowed; i++)
        if (!strcmp(r->allowed[i], canon))
            return 1;
    return 0;
}

static void sync_flags(lsn_runner *r)
{
    for (int i = 0; i < r->npub_flags; i++) {
        char buf[512];
        lsn_server_get(r->server, r->pub_flags[i].name, buf, sizeof buf);
        if (!r->flag_values[i] || strcmp(r->flag_values[i], buf)) {
            free(r->flag_values[i]);
            r->flag_values[i] = xstrdup(buf);
            r->pub_flags[i].value = r->flag_values[i];
            r->changes |= LSN_CH_FLAGS;
        }
    }
}

static void add_pub_flag(lsn_runner *r, const char *name)
{
    const char *canon = NULL, *help = NULL, *choices = NULL;
    if (!lsn_server_flag_info(name, &canon, &help, &choices))
        return;
    for (int i = 0; i < r->npub_flags; i++)
        if (!strcmp(r->pub_flags[i].name, canon))
            return;
    lsn_flag *nf = realloc(r->pub_flags, (size_t)(r->npub_flags + 1) * sizeof *nf);
    if (!nf)
        return;
    r->pub_flags = nf;
    char **nv = realloc(r->flag_values, (size_t)(r->npub_flags + 1) * sizeof *nv);
    if (!nv)
        return;
    r->flag_values = nv;
    lsn_flag *f = &r->pub_flags[r->npub_flags];
    memset(f, 0, sizeof *f);
    f->name = canon;
    f->help = help ? help : "";
    f->value = "";
    r->flag_values[r->npub_flags] = NULL;
    if (choices && choices[0]) {
        int n = 1;
        for (const char *p = choices; *p; p++)
            n += *p == '|';
        char **cv = calloc((size_t)n, sizeof *cv);
        if (cv) {
            const char *p = choices;
            for (int i = 0; i < n; i++) {
                const char *e = strchr(p, '|');
                size_t len = e ? (size_t)(e - p) : strlen(p);
                cv[i] = strndup(p, len);
                p = e ? e + 1 : p + len;
            }
            f->choices = (const char *const *)cv;
            f->nchoices = n;
        }
    }
    r->npub_flags++;
}

static void build_flags(lsn_runner *r)
{
    static const char *const first[] = {"model", "gpu", "gpu-memory-utilization", "max-model-len",
                                        "max-num-seqs", "max-num-batched-tokens", "tensor-parallel-size",
                                        "request-rate", "traffic-prompt", "traffic-output",
                                        "kv-cache-dtype", "quantization", "block-size", "enable-prefix-caching",
                                        "enforce-eager", "kv-cache", "contiguous", "kv-heads"};
    if (r->allow_all) {
        for (size_t i = 0; i < sizeof first / sizeof first[0]; i++)
            add_pub_flag(r, first[i]);
        for (int i = 0; i < kv_args_flag_count(); i++) {
            const kv_args_flag *f = kv_args_flag_at(i);
            if (f && f->kind != KV_ARG_NOTE && f->kind != KV_ARG_NOTE_BOOL)
                add_pub_flag(r, f->name);
        }
    } else {
        for (int i = 0; i < r->nallowed; i++)
            add_pub_flag(r, r->allowed[i]);
    }
    sync_flags(r);
}

/* ---- the coroutine ---------------------------------------------------------- */

static void lesson_done(lsn_runner *r)
{
    lsn_question_clear(&r->q);
    lsn_goal_clear(r);
    if (r->replaying || r->checking)
        return;
    lsn_lesson_progress *p = &r->progress.lessons[r->number];
    p->done = 1;
    p->step = r->step;
    r->progress.current = r->number;
    save_progress(r);
}

static int apply_remembered(lsn_runner *r);

/* Resume the lesson with nargs values already pushed on r->co. */
static void resume(lsn_runner *r, int nargs)
{
    if (!r->co || r->wait == W_ERROR || r->wait == W_DONE)
        return;
    r->wait = W_NONE;
    r->hook_ticks = 0;
    int nres = 0;
    int st = lua_resume(r->co, r->L, nargs, &nres);
    r->changes |= LSN_CH_STATE;
    if (st == LUA_YIELD) {
        lua_pop(r->co, nres);
        if (r->wait == W_NONE)
            set_error(r, "%s: the lesson yielded without saying what it waits for "
                         "(use lab.pause, lab.step, lab.ask ... rather than coroutine.yield)",
                      r->shown_path);
        else
            apply_remembered(r); /* forward again onto a step answered before */
    } else if (st == LUA_OK) {
        lua_pop(r->co, nres);
        r->wait = W_DONE;
        lesson_done(r);
    } else {
        const char *m = lua_tostring(r->co, -1);
        luaL_traceback(r->L, r->co, m ? m : "(error object is not a string)", 0);
        set_error(r, "%s", lua_tostring(r->L, -1));
        lua_pop(r->L, 1);
    }
}

static int eval_ref(lsn_runner *r, int ref)
{
    if (ref == LUA_NOREF || ref == 0)
        return 1;
    lua_rawgeti(r->L, LUA_REGISTRYINDEX, ref);
    if (pcall(r, 0, 1) < 0)
        return -1;
    int v = lua_toboolean(r->L, -1);
    lua_pop(r->L, 1);
    return v;
}

static void drop_cond(lsn_runner *r)
{
    if (r->cond_ref != LUA_NOREF && r->L)
        luaL_unref(r->L, LUA_REGISTRYINDEX, r->cond_ref);
    r->cond_ref = LUA_NOREF;
}

static void resume_bool(lsn_runner *r, int v)
{
    drop_cond(r);
    lua_pushboolean(r->co, v);
    resume(r, 1);
}

/* Goal reached: count the step and resume with the number of flag changes. */
static void finish_goal(lsn_runner *r)
{
    int changes = r->g.changes;
    lsn_goal_clear(r);
    r->changes |= LSN_CH_GOAL;
    complete_step(r);
    lua_pushinteger(r->co, changes);
    resume(r, 1);
}

static void check_goal(lsn_runner *r)
{
    if (r->wait != W_GOAL || !r->g.active || r->g.met)
        return;
    int v = eval_ref(r, r->g.check_ref);
    if (v > 0) {
        r->g.met = 1;
        r->g.pub.met = 1;
        r->changes |= LSN_CH_GOAL;
    }
}

int lsn_engine_step(lsn_runner *r)
{
    kv_engine *e = lsn_server_engine(r->server);
    if (!e)
        return 0;
    kv_engine_info info;
    kv_engine_get_info(e, &info);
    lsn_traffic *t = &r->traffic;
    if (t->active && t->fn_ref != LUA_NOREF) {
        lua_rawgeti(r->L, LUA_REGISTRYINDEX, t->fn_ref);
        lua_pushinteger(r->L, info.step);
        lua_pushnumber(r->L, info.clock_s);
        if (pcall(r, 2, 1) < 0)
            return -1;
        if (lua_istable(r->L, -1)) {
            lua_Integer n = luaL_len(r->L, -1);
            for (lua_Integer i = 1; i <= n; i++) {
                lua_rawgeti(r->L, -1, i);
                char err[256];
                if (lua_istable(r->L, -1))
                    lsn_lab_submit_table(r, r->L, lua_gettop(r->L), err, sizeof err);
                lua_pop(r->L, 1);
            }
        }
        lua_pop(r->L, 1);
    } else if (t->active && t->rate > 0) {
        while (t->next_s <= info.clock_s && (t->count == 0 || t->sent < t->count)) {
            kv_request_spec spec = {0};
            spec.prompt_tokens = t->prompt_min + (int32_t)(lsn_random(r) * (t->prompt_max - t->prompt_min + 1));
            spec.output_tokens = t->output_min + (int32_t)(lsn_random(r) * (t->output_max - t->output_min + 1));
            if (spec.prompt_tokens > t->prompt_max)
                spec.prompt_tokens = t->prompt_max;
            if (spec.output_tokens > t->output_max)
                spec.output_tokens = t->output_max;
            spec.prefix_id = t->prefix_id[0] ? t->prefix_id : NULL;
            spec.prefix_tokens = t->prefix_tokens;
            spec.arrival_s = -1;
            kv_engine_submit(e, &spec, NULL, 0);
            t->sent++;
            t->next_s += -log(1 - lsn_random(r)) / t->rate;
        }
    }
    char err[512];
    kv_step_result res;
    int n = kv_engine_step(e, &res, err, sizeof err);
    if (n >= 0)
        r->last_step = res;
    if (n < 0) {
        set_error(r, "the engine stopped: %s", err);
        return -1;
    }
    if (n == 0 && t->active && t->rate > 0 && (t->count == 0 || t->sent < t->count)) {
        /* idle: jump to the next arrival */
        kv_engine_advance_clock(e, t->next_s > info.clock_s ? t->next_s : info.clock_s + 1e-3);
    } else if (n == 0 && t->active && t->fn_ref != LUA_NOREF) {
        /* idle with a function generator: let time pass (10 ms a step) so a
         * generator that sends by the clock gets to its next arrival */
        kv_engine_advance_clock(e, info.clock_s + 0.01);
    }
    r->changes |= LSN_CH_ENGINE;
    if (r->on_step_ref != LUA_NOREF) {
        lua_rawgeti(r->L, LUA_REGISTRYINDEX, r->on_step_ref);
        lua_pushinteger(r->L, n);
        if (pcall(r, 1, 0) < 0)
            return -1;
    }
    return n;
}

int lsn_start_server(lsn_runner *r)
{
    r->server_started = 1;
    int rc = lsn_server_start(r->server, r->server_err, sizeof r->server_err);
    r->has_server_err = rc != 1;
    r->changes |= LSN_CH_SERVER | LSN_CH_ENGINE | LSN_CH_FLAGS;
    sync_flags(r);
    return rc;
}

/* Finish a step wait at once (headless, replay, or "next" while animating). */
static void finish_steps(lsn_runner *r)
{
    while (r->wait == W_STEPS && r->steps_left > 0) {
        if (lsn_engine_step(r) < 0)
            return;
        r->steps_left--;
    }
    if (r->wait == W_STEPS)
        resume(r, 0);
}

static void finish_run_until(lsn_runner *r)
{
    while (r->wait == W_RUN_UNTIL) {
        if (lsn_engine_step(r) < 0)
            return;
        r->steps_done++;
        int c = eval_ref(r, r->cond_ref);
        if (c < 0)
            return;
        if (c || r->steps_done >= r->max_steps) {
            resume_bool(r, c);
            return;
        }
    }
}

static void finish_cond_headless(lsn_runner *r)
{
    int c = eval_ref(r, r->cond_ref);
    for (int64_t i = 0; c == 0 && i < r->max_steps && lsn_server_engine(r->server); i++) {
        if (lsn_engine_step(r) < 0)
            return;
        c = eval_ref(r, r->cond_ref);
    }
    if (c < 0)
        return;
    if (c)
        resume_bool(r, 1);
    else
        set_error(r, "%s: lab.wait_until: the condition never held within %lld engine steps in headless mode "
                     "(for something the learner must do, use lab.goal with a script)",
                  r->shown_path, (long long)r->max_steps);
}

/* ---- loading ---------------------------------------------------------------- */

static int start_lesson(lsn_runner *r, int number)
{
    const lsn_info *info = lsn_info_of(r, number);
    if (!info) {
        r->number = 0;
        set_error(r, "There is no lesson %d (the course has %d).", number, r->course.nlessons);
        return -1;
    }
    r->number = number;
    snprintf(r->title, sizeof r->title, "%s", info->title);
    lsn_course_path(&r->course, number, r->path, sizeof r->path);
    shown_name(r, info->file, r->shown_path, sizeof r->shown_path);
    r->rng = 0x9E3779B97F4A7C15ull ^ (uint64_t)number * 0xBF58476D1CE4E5B9ull;
    if (!info->available) {
        set_error(r, "Lesson %d (%s) is not written yet: %s is missing.", number, info->title, r->shown_path);
        return -1;
    }
    r->L = new_state(r);
    if (!r->L) {
        set_error(r, "Could not create a Lua state for lesson %d.", number);
        return -1;
    }
    lua_State *L = r->L;
    lsn_lab_push(L, r);
    r->lab_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    int st = load_file(r, L, r->path, r->shown_path);
    if (st != LUA_OK) {
        set_error(r, "%s", lua_tostring(L, -1));
        lua_pop(L, 1);
        return -1;
    }
    if (pcall(r, 0, 1) < 0)
        return -1;
    if (!lua_istable(L, -1)) {
        set_error(r, "%s: a lesson must return a table {id = %d, title = ..., run = function(lab) ... end}",
                  r->shown_path, number);
        lua_pop(L, 1);
        return -1;
    }
    int t = lua_gettop(L);
    lua_getfield(L, t, "id");
    int isnum = 0;
    lua_Integer id = lua_tointegerx(L, -1, &isnum);
    lua_pop(L, 1);
    if (!isnum || id != number) {
        set_error(r, "%s: the lesson's id must be %d (its number in manifest.json)", r->shown_path, number);
        return -1;
    }
    lua_getfield(L, t, "title");
    if (lua_isstring(L, -1))
        snprintf(r->title, sizeof r->title, "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
    lua_getfield(L, t, "flags");
    if (lua_isstring(L, -1) && !strcmp(lua_tostring(L, -1), "*")) {
        r->allow_all = 1;
    } else if (lua_istable(L, -1)) {
        lua_Integer n = luaL_len(L, -1);
        r->allowed = calloc((size_t)n + 1, sizeof *r->allowed);
        for (lua_Integer i = 1; i <= n; i++) {
            lua_rawgeti(L, -1, i);
            const char *f = lua_tostring(L, -1);
            const char *canon = NULL;
            if (f && !strcmp(f, "*")) {
                r->allow_all = 1;
            } else if (!f || !lsn_server_flag_info(f, &canon, NULL, NULL)) {
                set_error(r, "%s: flags[%lld] = '%s' is not a flag kvlab knows", r->shown_path, (long long)i,
                          f ? f : "?");
                lua_pop(L, 2);
                return -1;
            } else {
                r->allowed[r->nallowed++] = xstrdup(canon);
            }
            lua_pop(L, 1);
        }
    } else if (!lua_isnil(L, -1)) {
        set_error(r, "%s: flags must be a list of flag names or \"*\"", r->shown_path);
        lua_pop(L, 1);
        return -1;
    }
    lua_pop(L, 1);
    lua_getfield(L, t, "run");
    if (!lua_isfunction(L, -1)) {
        set_error(r, "%s: the lesson table needs run = function(lab) ... end", r->shown_path);
        lua_pop(L, 2);
        return -1;
    }
    r->co = lua_newthread(L);
    r->co_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_xmove(L, r->co, 1); /* run */
    lua_pop(L, 1);          /* lesson table */
    build_flags(r);
    lua_rawgeti(r->co, LUA_REGISTRYINDEX, r->lab_ref);
    r->changes |= LSN_CH_TEXT | LSN_CH_VIEWS | LSN_CH_STATE | LSN_CH_FLAGS | LSN_CH_SERVER;
    resume(r, 1);
    return r->wait == W_ERROR ? -1 : 0;
}

/* Apply the recorded flag changes made at wait w (replay). */
static void replay_flags(lsn_runner *r, int w)
{
    const lsn_lesson_progress *p = &r->progress.lessons[r->number];
    for (int i = 0; i < p->ninputs && r->wait != W_ERROR; i++) {
        const lsn_input *in = &p->inputs[i];
        if (in->wait == w && in->kind == LSN_IN_FLAG) {
            char err[256];
            lsn_set_flag(r, in->name, in->value, err, sizeof err);
        }
    }
}

static const lsn_input *recorded_answer(lsn_runner *r, int w)
{
    const lsn_lesson_progress *p = &r->progress.lessons[r->number];
    const lsn_input *found = NULL;
    for (int i = 0; i < p->ninputs; i++)
        if (p->inputs[i].wait == w && p->inputs[i].kind != LSN_IN_FLAG)
            found = &p->inputs[i];
    return found;
}

static void check_question(lsn_runner *r);
static void check_goal_headless(lsn_runner *r);

/* Run the lesson without the learner: to step `target` (replay) or to its
 * end (check). Returns when it reaches a wait it cannot pass. */
static void drive(lsn_runner *r, int target)
{
    for (long guard = 0; guard < 1000000; guard++) {
        switch (r->wait) {
        case W_STEPS:
            finish_steps(r);
            break;
        case W_RUN_UNTIL:
            finish_run_until(r);
            break;
        case W_COND:
            finish_cond_headless(r);
            break;
        case W_NEXT:
            if (r->replaying) {
                replay_flags(r, r->step);
                if (r->step >= target)
                    return;
            }
            complete_step(r);
            resume(r, 0);
            break;
        case W_ANSWER:
            if (r->checking) {
                check_question(r);
                if (r->check_failed)
                    return;
            } else {
                replay_flags(r, r->step);
                if (r->step >= target)
                    return;
                const lsn_input *in = recorded_answer(r, r->step);
                lsn_verdict v;
                if (!in)
                    return;
                if (in->kind == LSN_IN_REVEAL)
                    lsn_reveal(r);
                else if (lsn_answer(r, in->value, &v), v.kind != LSN_V_CORRECT)
                    return;
            }
            break;
        case W_GOAL:
            if (r->checking) {
                check_goal_headless(r);
                if (r->check_failed)
                    return;
            } else {
                replay_flags(r, r->step);
                if (r->step >= target)
                    return;
                check_goal(r);
                /* a goal reached by running a while (lab.goal{steps=}) */
                for (int64_t k = 0; k < r->g.steps && !r->g.met && r->wait == W_GOAL; k++) {
                    if (lsn_engine_step(r) < 0)
                        return;
                    if (k % 8 == 7 || k == r->g.steps - 1)
                        check_goal(r);
                }
                if (r->wait != W_GOAL || !r->g.met)
                    return;
                finish_goal(r);
            }
            break;
        default:
            return;
        }
    }
}

int lsn_load(lsn_runner *r, int number, int resume_saved)
{
    unload(r);
    ahead_clear(r); /* lsn_back hands its own over after loading */
    r->changes = 0;
    if (start_lesson(r, number) < 0)
        return -1;
    if (resume_saved && !r->checking && number <= LSN_MAX_LESSONS) {
        int target = r->progress.lessons[number].step;
        if (target > 0) {
            r->replaying = 1;
            drive(r, target);
            r->replaying = 0;
        }
    }
    if (!r->checking) {
        r->progress.current = number;
        save_progress(r);
    }
    return r->wait == W_ERROR ? -1 : 0;
}

int lsn_current(const lsn_runner *r) { return r->number; }
const char *lsn_title(const lsn_runner *r) { return r->number ? r->title : ""; }

lsn_state lsn_get_state(const lsn_runner *r)
{
    switch (r->wait) {
    case W_NONE: return r->L ? LSN_RUNNING : (r->has_error ? LSN_ERROR : LSN_IDLE);
    case W_STEPS:
    case W_RUN_UNTIL: return LSN_RUNNING;
    case W_COND: return LSN_WAIT_COND;
    case W_NEXT: return LSN_WAIT_NEXT;
    case W_ANSWER: return LSN_WAIT_ANSWER;
    case W_GOAL: return LSN_WAIT_GOAL;
    case W_DONE: return LSN_DONE;
    case W_ERROR: return LSN_ERROR;
    }
    return LSN_IDLE;
}

const char *lsn_state_name(lsn_state s)
{
    static const char *const names[] = {"idle", "running", "wait-cond", "wait-next",
                                        "wait-answer", "wait-goal", "done", "error"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "?";
}

unsigned lsn_tick(lsn_runner *r, double dt)
{
    r->changes = 0;
    if (!r->L || r->wait == W_ERROR)
        return 0;
    if (r->wait == W_GOAL && r->g.met) {
        finish_goal(r);
        return r->changes;
    }
    int animating = r->wait == W_STEPS || r->wait == W_RUN_UNTIL;
    if ((animating || (r->autorun && lsn_server_engine(r->server))) && dt > 0) {
        r->accum += dt * r->speed * r->speed_factor;
        long k = (long)r->accum;
        r->accum -= (double)k;
        if (k > MAX_STEPS_PER_TICK)
            k = MAX_STEPS_PER_TICK;
        for (long i = 0; i < k && r->wait != W_ERROR; i++) {
            if (r->wait == W_STEPS) {
                if (lsn_engine_step(r) < 0)
                    break;
                if (--r->steps_left <= 0) {
                    resume(r, 0);
                    break;
                }
            } else if (r->wait == W_RUN_UNTIL) {
                if (lsn_engine_step(r) < 0)
                    break;
                r->steps_done++;
                int c = eval_ref(r, r->cond_ref);
                if (c < 0)
                    break;
                if (c || r->steps_done >= r->max_steps) {
                    resume_bool(r, c);
                    break;
                }
            } else if (r->autorun && lsn_server_engine(r->server)) {
                if (lsn_engine_step(r) < 0)
                    break;
            } else {
                break;
            }
        }
    }
    if (r->wait == W_COND) {
        int c = eval_ref(r, r->cond_ref);
        if (c > 0)
            resume_bool(r, 1);
    }
    if (r->wait == W_GOAL && r->g.active && !r->g.met)
        check_goal(r);
    return r->changes;
}

static void ahead_free(lsn_input *v, int n)
{
    for (int i = 0; i < n; i++) {
        free(v[i].name);
        free(v[i].value);
    }
    free(v);
}

static void ahead_clear(lsn_runner *r)
{
    ahead_free(r->ahead, r->nahead);
    r->ahead = NULL;
    r->nahead = r->capahead = 0;
}

/* Append a copy of `in` to r->ahead; an input that cannot be copied (out of
 * memory) is just not remembered: the learner is asked again. */
static void ahead_add(lsn_runner *r, const lsn_input *in)
{
    if (r->nahead == r->capahead) {
        int cap = r->capahead ? r->capahead * 2 : 8;
        lsn_input *nv = realloc(r->ahead, (size_t)cap * sizeof *nv);
        if (!nv)
            return;
        r->ahead = nv;
        r->capahead = cap;
    }
    lsn_input *d = &r->ahead[r->nahead];
    d->wait = in->wait;
    d->kind = in->kind;
    d->name = in->name ? strdup(in->name) : NULL;
    d->value = in->value ? strdup(in->value) : NULL;
    if ((in->name && !d->name) || (in->value && !d->value)) {
        free(d->name);
        free(d->value);
        return;
    }
    r->nahead++;
}

/* The learner is (again) at a question or goal they went back over: feed the
 * answer or the flag changes remembered for this step, as a replay does. A
 * remembered answer that no longer checks (flags changed since) leaves the
 * question asked; a reveal is not repeated. Returns 1 when something was
 * applied. The remembered inputs of the step are used up either way. */
static int apply_remembered(lsn_runner *r)
{
    if (r->replaying || r->checking || r->nahead == 0 || !r->L)
        return 0;
    if (!(r->wait == W_ANSWER && r->q.active) && !(r->wait == W_GOAL && r->g.active))
        return 0;
    int w = r->step, k = 0, nmine = 0;
    lsn_input *mine = malloc((size_t)r->nahead * sizeof *mine);
    if (!mine)
        return 0;
    for (int i = 0; i < r->nahead; i++) {
        if (r->ahead[i].wait == w)
            mine[nmine++] = r->ahead[i];
        else
            r->ahead[k++] = r->ahead[i];
    }
    r->nahead = k;
    unsigned saved = r->changes; /* lsn_answer / lsn_set_flag start from 0 */
    int did = 0;
    if (r->wait == W_ANSWER) {
        const lsn_input *ans = NULL;
        for (int i = 0; i < nmine; i++)
            if (mine[i].kind != LSN_IN_FLAG)
                ans = &mine[i];
        if (ans && ans->kind == LSN_IN_ANSWER && ans->value) {
            lsn_verdict v;
            int tries = r->q.tries, hints = r->q.hints_shown;
            r->from_before = 1;
            lsn_answer(r, ans->value, &v);
            r->from_before = 0;
            did = v.kind == LSN_V_CORRECT;
            if (!did && r->wait == W_ANSWER && r->q.active) {
                /* not the learner's try: no count, no hint used up */
                r->q.tries = tries;
                r->q.hints_shown = hints;
            }
            if (did && !r->notice[0]) /* the lesson may turn the page at once */
                snprintf(r->notice, sizeof r->notice, "Your answer: %.700s (from before).", ans->value);
        }
    } else {
        for (int i = 0; i < nmine && r->wait == W_GOAL; i++) {
            if (mine[i].kind != LSN_IN_FLAG)
                continue;
            char err[256];
            if (lsn_set_flag(r, mine[i].name, mine[i].value, err, sizeof err))
                did = 1;
        }
        if (did && r->wait == W_GOAL && r->g.met)
            say_line(r, "You reached this goal before: your flag changes were made again.");
    }
    ahead_free(mine, nmine);
    r->changes |= saved;
    return did;
}

unsigned lsn_next(lsn_runner *r)
{
    r->changes = 0;
    switch (r->wait) {
    case W_ANSWER:
    case W_GOAL:
        /* back onto a step answered before: n takes the answer from then */
        apply_remembered(r);
        break;
    case W_NEXT:
        complete_step(r);
        resume(r, 0);
        break;
    case W_STEPS:
        finish_steps(r);
        break;
    case W_RUN_UNTIL:
        finish_run_until(r);
        break;
    default:
        break;
    }
    return r->changes;
}

unsigned lsn_back(lsn_runner *r)
{
    if (!r->number || r->step == 0)
        return 0;
    int n = r->number, target = r->step - 1, from = r->step;
    if (r->wait == W_DONE || r->wait == W_ERROR)
        target = r->step > 0 ? r->step - 1 : 0;
    /* Remember what is about to be forgotten: what was remembered from an
     * earlier back for the step the learner is at and beyond (the steps
     * before it were lived again), then the inputs of the steps gone back
     * over. Within one step the older inputs come first: replay order. */
    lsn_input *old = r->ahead;
    int nold = r->nahead;
    r->ahead = NULL;
    r->nahead = r->capahead = 0;
    for (int i = 0; i < nold; i++)
        if (old[i].wait >= from)
            ahead_add(r, &old[i]);
    ahead_free(old, nold);
    const lsn_lesson_progress *p = &r->progress.lessons[n];
    for (int i = 0; i < p->ninputs; i++)
        if (p->inputs[i].wait >= target)
            ahead_add(r, &p->inputs[i]);
    lsn_input *keep = r->ahead;
    int nkeep = r->nahead, capkeep = r->capahead;
    r->ahead = NULL;
    r->nahead = r->capahead = 0;
    lsn_progress_truncate(&r->progress, n, target);
    r->progress.lessons[n].step = target;
    save_progress(r);
    lsn_load(r, n, 1);
    ahead_clear(r);
    r->ahead = keep;
    r->nahead = nkeep;
    r->capahead = capkeep;
    return r->changes | LSN_CH_TEXT | LSN_CH_VIEWS | LSN_CH_STATE | LSN_CH_SERVER;
}

unsigned lsn_reset(lsn_runner *r)
{
    int n = r->number;
    if (!n)
        return 0;
    lsn_progress_truncate(&r->progress, n, 0);
    r->progress.lessons[n].step = 0;
    save_progress(r);
    lsn_load(r, n, 0);
    return r->changes | LSN_CH_TEXT | LSN_CH_VIEWS | LSN_CH_STATE | LSN_CH_SERVER | LSN_CH_PLOT;
}

void lsn_set_speed(lsn_runner *r, double factor)
{
    r->speed_factor = factor > 0 ? factor : 1;
}

int lsn_step(const lsn_runner *r) { return r->step; }

const char *lsn_text(const lsn_runner *r) { return r->text.s ? r->text.s : ""; }
const char *lsn_page_title(const lsn_runner *r) { return r->page_title; }
int lsn_page_number(const lsn_runner *r) { return r->page_no; }
const char *lsn_error(const lsn_runner *r) { return r->wait == W_ERROR && r->has_error ? r->error.s : NULL; }

int lsn_view_count(const lsn_runner *r)
{
    (void)r;
    return LSN_NVIEWS;
}

const lsn_view *lsn_view_at(const lsn_runner *r, int index)
{
    return index >= 0 && index < LSN_NVIEWS ? &r->views[index].pub : NULL;
}

const lsn_view *lsn_view_find(const lsn_runner *r, const char *name)
{
    for (int i = 0; i < LSN_NVIEWS; i++)
        if (name && !strcmp(lsn_view_names[i], name))
            return &r->views[i].pub;
    return NULL;
}

const char *lsn_view_option(const lsn_runner *r, const char *view, const char *key)
{
    const lsn_view *v = lsn_view_find(r, view);
    if (!v)
        return NULL;
    for (int i = 0; i < v->noptions; i++)
        if (!strcmp(v->option_keys[i], key))
            return v->option_values[i];
    return NULL;
}

const lsn_plot *lsn_get_plot(const lsn_runner *r)
{
    if (!r->plot_on)
        return NULL;
    lsn_runner *w = (lsn_runner *)r; /* refresh the public view of the series */
    for (int i = 0; i < w->nseries; i++) {
        w->pub_series[i].name = w->series[i].name;
        w->pub_series[i].npoints = w->series[i].n;
        w->pub_series[i].x = w->series[i].x;
        w->pub_series[i].y = w->series[i].y;
    }
    w->pub_plot.title = w->plot_title ? w->plot_title : "";
    w->pub_plot.xlabel = w->plot_xlabel ? w->plot_xlabel : "";
    w->pub_plot.ylabel = w->plot_ylabel ? w->plot_ylabel : "";
    w->pub_plot.logy = w->plot_logy;
    w->pub_plot.nseries = w->nseries;
    w->pub_plot.series = w->pub_series;
    return &w->pub_plot;
}

/* ---- questions -------------------------------------------------------------- */

const lsn_question *lsn_get_question(const lsn_runner *r)
{
    if (r->wait != W_ANSWER || !r->q.active)
        return NULL;
    lsn_question_int *q = (lsn_question_int *)&r->q;
    q->pub.prompt = q->prompt ? q->prompt : "";
    q->pub.unit = q->unit ? q->unit : "";
    q->pub.kind = q->nchoices ? LSN_Q_CHOICE : LSN_Q_NUMBER;
    q->pub.nchoices = q->nchoices;
    q->pub.choices = (const char *const *)q->choices;
    q->pub.tries = q->tries;
    q->pub.hints_total = q->nhints;
    q->pub.hints_shown = q->hints_shown;
    return &q->pub;
}

static void say_line(lsn_runner *r, const char *s)
{
    if (r->text.len)
        lsn_sb_add(&r->text, "\n\n", 2);
    lsn_sb_add(&r->text, s, strlen(s));
    r->changes |= LSN_CH_TEXT;
}

unsigned lsn_answer(lsn_runner *r, const char *text, lsn_verdict *v)
{
    r->changes = 0;
    lsn_verdict dummy;
    if (!v)
        v = &dummy;
    v->message[0] = '\0';
    if (r->wait != W_ANSWER || !r->q.active) {
        v->kind = LSN_V_NO_QUESTION;
        snprintf(v->message, sizeof v->message, "Nothing is being asked right now.");
        return 0;
    }
    lsn_question_int *q = &r->q;
    lsn_check_result res;
    double value = NAN;
    int picked = 0;
    if (q->nchoices) {
        res = lsn_answer_check_choice(q->nchoices, (const char *const *)q->choices, q->correct,
                                      (const char *const *)q->why, text, &picked, v->message, sizeof v->message);
    } else {
        lsn_numq nq = {q->answer, q->unit, q->rel, q->abs, q->nnear, q->near};
        res = lsn_answer_check_number(&nq, text, &value, v->message, sizeof v->message);
    }
    v->kind = res == LSN_CHECK_CORRECT ? LSN_V_CORRECT
            : res == LSN_CHECK_NEAR_MISS ? LSN_V_NEAR_MISS
            : res == LSN_CHECK_WRONG ? LSN_V_WRONG : LSN_V_UNREADABLE;
    r->changes |= LSN_CH_QUESTION;
    if (res == LSN_CHECK_CORRECT) {
        record(r, LSN_IN_ANSWER, NULL, text);
        char line[1024];
        snprintf(line, sizeof line, r->from_before ? "Your answer: %s (from before). That's right."
                                                   : "Your answer: %s. That's right.", text);
        say_line(r, line);
        if (q->explain && q->explain[0]) {
            say_line(r, q->explain);
            size_t l = strlen(v->message);
            snprintf(v->message + l, sizeof v->message - l, " %s", q->explain);
        }
        int tries = q->tries;
        lsn_question_clear(q);
        complete_step(r);
        if (picked)
            lua_pushinteger(r->co, picked);
        else
            lua_pushnumber(r->co, value);
        lua_pushinteger(r->co, tries);
        resume(r, 2);
        return r->changes;
    }
    if (res != LSN_CHECK_UNREADABLE) {
        q->tries++;
        if (q->hints_shown < q->nhints) {
            size_t l = strlen(v->message);
            snprintf(v->message + l, sizeof v->message - l, " Hint: %s", q->hints[q->hints_shown++]);
        }
    }
    return r->changes;
}

const char *lsn_hint(lsn_runner *r)
{
    if (r->wait == W_ANSWER && r->q.active && r->q.hints_shown < r->q.nhints) {
        r->changes |= LSN_CH_QUESTION;
        return r->q.hints[r->q.hints_shown++];
    }
    if (r->wait == W_GOAL && r->g.active && r->g.hints_shown < r->g.nhints) {
        r->g.pub.hints_shown = r->g.hints_shown + 1;
        r->changes |= LSN_CH_GOAL;
        return r->g.hints[r->g.hints_shown++];
    }
    return NULL;
}

static char reveal_buf[512];

const char *lsn_reveal(lsn_runner *r)
{
    if (r->wait != W_ANSWER || !r->q.active)
        return NULL;
    lsn_question_int *q = &r->q;
    double value = q->answer;
    int picked = 0;
    if (q->nchoices) {
        picked = q->correct;
        snprintf(reveal_buf, sizeof reveal_buf, "%c) %s", 'a' + q->correct - 1, q->choices[q->correct - 1]);
    } else {
        lsn_answer_format(q->answer, q->unit, reveal_buf, sizeof reveal_buf);
    }
    record(r, LSN_IN_REVEAL, NULL, NULL);
    char line[1024];
    snprintf(line, sizeof line, "The answer: %s.", reveal_buf);
    say_line(r, line);
    if (q->explain && q->explain[0])
        say_line(r, q->explain);
    int tries = q->tries;
    lsn_question_clear(q);
    complete_step(r);
    r->changes |= LSN_CH_QUESTION;
    if (picked)
        lua_pushinteger(r->co, picked);
    else
        lua_pushnumber(r->co, value);
    lua_pushinteger(r->co, tries);
    resume(r, 2);
    return reveal_buf;
}

/* ---- flags and goals -------------------------------------------------------- */

int lsn_flag_count(const lsn_runner *r) { return r->npub_flags; }

const lsn_flag *lsn_flag_at(const lsn_runner *r, int index)
{
    return index >= 0 && index < r->npub_flags ? &r->pub_flags[index] : NULL;
}

unsigned lsn_set_flag(lsn_runner *r, const char *name, const char *value, char *err, size_t errlen)
{
    r->changes = 0;
    if (!r->L || r->wait == W_ERROR) {
        snprintf(err, errlen, "no lesson is running");
        return 0;
    }
    if (!allowed(r, name)) {
        const char *canon = NULL;
        if (!lsn_server_flag_info(name, &canon, NULL, NULL))
            snprintf(err, errlen, "unknown flag --%s", name);
        else
            snprintf(err, errlen, "this lesson does not let you change --%s", canon);
        return 0;
    }
    if (lsn_server_set(r->server, name, value ? value : "", err, errlen) < 0)
        return 0;
    const char *canon = name;
    lsn_server_flag_info(name, &canon, NULL, NULL);
    record(r, LSN_IN_FLAG, canon, value ? value : "");
    save_progress(r);
    r->changes |= LSN_CH_FLAGS;
    if (r->server_started)
        lsn_start_server(r);
    sync_flags(r);
    if (r->on_flag_ref != LUA_NOREF) {
        lua_rawgeti(r->L, LUA_REGISTRYINDEX, r->on_flag_ref);
        lua_pushstring(r->L, canon);
        lua_pushstring(r->L, value ? value : "");
        if (pcall(r, 2, 0) < 0)
            return r->changes;
    }
    if (r->wait == W_GOAL && r->g.active) {
        r->g.changes++;
        check_goal(r);
    }
    return r->changes ? r->changes : LSN_CH_FLAGS;
}

const lsn_goal *lsn_get_goal(const lsn_runner *r)
{
    if (r->wait != W_GOAL || !r->g.active)
        return NULL;
    lsn_goal_int *g = (lsn_goal_int *)&r->g;
    g->pub.text = g->text ? g->text : "";
    g->pub.met = g->met;
    g->pub.hints_total = g->nhints;
    g->pub.hints_shown = g->hints_shown;
    return &g->pub;
}

struct kv_engine *lsn_engine(const lsn_runner *r) { return lsn_server_engine(r->server); }

const struct kv_plan *lsn_plan(const lsn_runner *r) { return lsn_server_plan(r->server); }

const char *lsn_server_error(const lsn_runner *r) { return r->has_server_err ? r->server_err : NULL; }

/* ---- kvlab check ------------------------------------------------------------ */

static void check_fail(lsn_runner *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check_fail(lsn_runner *r, const char *fmt, ...)
{
    char tmp[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    r->check_failed = 1;
    lsn_logf(r, "  FAIL %s\n", tmp);
}

static void check_question(lsn_runner *r)
{
    lsn_question_int *q = &r->q;
    r->n_questions++;
    char prompt[96];
    snprintf(prompt, sizeof prompt, "%.90s", q->prompt ? q->prompt : "");
    for (char *p = prompt; *p; p++)
        if (*p == '\n')
            *p = ' ';
    /* Wrong answers: the lesson's, every near-miss, ten times the answer,
     * every wrong choice. Each must be refused. */
    int nw = 0;
    char wrong[64][128];
    for (int i = 0; i < q->nwrong && nw < 64; i++)
        snprintf(wrong[nw++], sizeof wrong[0], "%s", q->wrong[i]);
    if (q->nchoices) {
        for (int i = 1; i <= q->nchoices && nw < 64; i++)
            if (i != q->correct)
                snprintf(wrong[nw++], sizeof wrong[0], "%d", i);
    } else {
        for (int i = 0; i < q->nnear && nw < 64; i++)
            lsn_answer_format(q->near[i].value, q->unit, wrong[nw++], sizeof wrong[0]);
        /* a check that takes half, double or ten times the answer is too lax */
        static const double factors[] = {0.5, 2, 10};
        for (int i = 0; i < 3 && q->answer != 0 && nw < 64; i++)
            lsn_answer_format(q->answer * factors[i], q->unit, wrong[nw++], sizeof wrong[0]);
    }
    char script[256];
    if (q->script)
        snprintf(script, sizeof script, "%s", q->script);
    else if (q->nchoices)
        snprintf(script, sizeof script, "%c", 'a' + q->correct - 1);
    else
        lsn_answer_format(q->answer, q->unit, script, sizeof script);
    lsn_logf(r, "  question %d: %s\n", r->n_questions, prompt);
    for (int i = 0; i < nw; i++) {
        lsn_verdict v;
        lsn_answer(r, wrong[i], &v);
        if (v.kind == LSN_V_CORRECT) {
            check_fail(r, "question %d (\"%s\") accepted the wrong answer '%s'", r->n_questions, prompt, wrong[i]);
            return;
        }
        lsn_logf(r, "    refused '%s': %s\n", wrong[i], v.message);
    }
    lsn_verdict v;
    lsn_answer(r, script, &v);
    if (v.kind != LSN_V_CORRECT) {
        check_fail(r, "question %d (\"%s\") refused the scripted answer '%s': %s", r->n_questions, prompt, script,
                   v.message);
        return;
    }
    lsn_logf(r, "    accepted '%s'\n", script);
}

static void check_goal_headless(lsn_runner *r)
{
    lsn_goal_int *g = &r->g;
    r->n_goals++;
    char text[96];
    snprintf(text, sizeof text, "%.90s", g->text ? g->text : "");
    lsn_logf(r, "  goal %d: %s\n", r->n_goals, text);
    int v = eval_ref(r, g->check_ref);
    if (v < 0)
        return;
    if (v) {
        check_fail(r, "goal %d (\"%s\") already holds before any flag change", r->n_goals, text);
        return;
    }
    if (g->nscript == 0) {
        check_fail(r, "goal %d (\"%s\") has no script for kvlab check", r->n_goals, text);
        return;
    }
    int n = g->nscript;
    char **names = g->script_names, **values = g->script_values;
    int64_t steps = g->steps;
    for (int i = 0; i < n && r->wait == W_GOAL; i++) {
        char err[512];
        if (!lsn_set_flag(r, names[i], values[i], err, sizeof err)) {
            check_fail(r, "goal %d: the scripted change --%s %s was refused: %s", r->n_goals, names[i], values[i],
                       err);
            return;
        }
        if (r->wait != W_GOAL)
            return;
        lsn_logf(r, "    set --%s %s%s%s\n", names[i], values[i], r->has_server_err ? ": " : "",
                 r->has_server_err ? r->server_err : "");
        for (int64_t k = 0; k < steps && !g->met && r->wait == W_GOAL; k++) {
            if (lsn_engine_step(r) < 0)
                return;
            if (k % 8 == 7 || k == steps - 1)
                check_goal(r);
        }
        if (g->met) {
            lsn_logf(r, "    reached after %d change%s\n", i + 1, i ? "s" : "");
            finish_goal(r);
            return;
        }
    }
    if (r->wait == W_GOAL)
        check_fail(r, "goal %d (\"%s\") not reached after its scripted changes", r->n_goals, text);
}

int lsn_check(lsn_runner *r, int number, FILE *log)
{
    FILE *old = r->log;
    r->log = log;
    r->checking = 1;
    r->check_failed = 0;
    r->n_questions = r->n_goals = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const lsn_info *info = lsn_info_of(r, number);
    lsn_logf(r, "lesson %d: %s\n", number, info ? info->title : "?");
    int starts0 = lsn_server_starts(r->server);
    lsn_load(r, number, 0);
    drive(r, 1 << 30);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    int ok = 0;
    if (r->wait == W_ERROR) {
        lsn_logf(r, "  ERROR %s\n", r->error.s ? r->error.s : "");
    } else if (r->check_failed) {
        /* logged already */
    } else if (r->wait != W_DONE) {
        lsn_logf(r, "  FAIL the lesson stopped while %s\n", lsn_state_name(lsn_get_state(r)));
    } else {
        ok = 1;
    }
    lsn_logf(r, "%s lesson %d (%d steps, %d question%s, %d goal%s, %d server start%s, %.2f s)\n",
             ok ? "PASS" : "FAIL", number, r->step, r->n_questions, r->n_questions == 1 ? "" : "s", r->n_goals,
             r->n_goals == 1 ? "" : "s", lsn_server_starts(r->server) - starts0,
             lsn_server_starts(r->server) - starts0 == 1 ? "" : "s", secs);
    unload(r);
    r->checking = 0;
    r->log = old;
    return ok ? 0 : 1;
}

int lsn_catalog_step(const lsn_runner *r, const char *flag, const char *cur, int dir, char *out, size_t len)
{
    if (!r || !r->server || !flag || !out || len == 0)
        return 0;
    const char *v = cur ? cur : "";
    if (!strcmp(flag, "gpu")) {
        const kv_gpu_catalog *c = lsn_server_catalog(r->server);
        if (!c || c->count <= 0)
            return 0;
        int at = -1;
        for (int i = 0; i < c->count; i++)
            if (!strcmp(c->gpus[i].id, v))
                at = i;
        int next = at < 0 ? (dir > 0 ? 0 : c->count - 1) : (at + (dir > 0 ? 1 : c->count - 1)) % c->count;
        snprintf(out, len, "%s", c->gpus[next].id);
        return 1;
    }
    if (!strcmp(flag, "model")) {
        char **ids = NULL;
        char err[256];
        int n = kv_model_catalog_list(lsn_server_assets(r->server), &ids, err, sizeof err);
        if (n <= 0)
            return 0;
        int at = -1;
        for (int i = 0; i < n; i++)
            if (!strcmp(ids[i], v))
                at = i;
        int next = at < 0 ? (dir > 0 ? 0 : n - 1) : (at + (dir > 0 ? 1 : n - 1)) % n;
        snprintf(out, len, "%s", ids[next]);
        kv_model_catalog_free(ids, n);
        return 1;
    }
    return 0;
}
