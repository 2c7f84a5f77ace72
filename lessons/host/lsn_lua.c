/* lsn_lua: the one file that knows the Lua C API (lsn_vm.h is its plain-C
 * face). A lesson is untrusted code: each gets a fresh Lua state with a
 * capped heap, a count hook, strict globals and no way to reach files or
 * the process; run(lab) is a coroutine; everything the runner hands over
 * (conditions, callbacks) is a registry reference. Every entry from C runs
 * inside one protected call, so an error or a limit always comes back as a
 * message with file:line and a traceback, never as an abort.
 *
 * The second half is the `lab` table (lessons/API.md): one
 * `static int f_<name>(lua_State *L)` per entry. Bindings check their
 * arguments, make one call into the runner's pieces or the engine, and push
 * plain tables; waits record what they wait for and yield. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <lauxlib.h>
#include <lualib.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "kv_disagg.h"
#include "kv_plan_fields.h"
#include "kv_timemodel.h"
#include "kv_util.h"
#include "lsn_lever.h"
#include "lsn_figures.h"
#include "lsn_quote.h"
#include "lsn_server.h"
#include "lsn_vm.h"

#define DEFAULT_HEAP ((size_t)256 << 20)   /* bytes of Lua heap per lesson */
#define DEFAULT_INSTRUCTIONS 200000000L    /* per call into the lesson */
#define LESSON_MAX_BYTES (8u << 20)        /* a lesson or helper file */

struct lsn_vm {
    lsn_lab_env env;
    lua_State *L;            /* main thread: conditions, callbacks, loading */
    lua_State *co;           /* run(lab) */
    int co_ref, lab_ref;
    int started;             /* run(lab) was entered */
    int fn_ref[LSN_FN_COUNT];
    lsn_wait_req req;        /* set by the waits, read after a yield */
    size_t mem_used, mem_cap, mem_limit;
    int mem_hit;             /* the heap cap was reached */
    int str_hit;             /* a string longer than STRING_MAX was refused */
    size_t alloc_pending;    /* bytes allocated since the limits were last checked (charged as work) */
    lua_State *volatile running; /* the thread running the lesson's code now (the timer's target), NULL outside */
    int hook_every;          /* instructions between two checks of the limits */
    double work, work_limit; /* instruction-equivalents this call, and the budget */
    double pattern_work, pattern_limit; /* matcher steps this call, and the budget */
    double deadline, seconds; /* wall clock (monotonic) where this call ends, its length */
    int depth;               /* nested entries (only the outer one starts the budgets) */
    int trip;                /* TRIP_*: a limit was hit; the lesson is over */
    char trip_msg[768];
    int dead;                /* the state panicked: never touch it again */
    jmp_buf jmp;
    int jmp_armed;
    int expect_reads;        /* engine figures an expect formula read (none: a literal, no proof) */
    int said;                /* lab.say since the app last got control (kvlab check: text a lab.page
                                would throw away unseen) */
    char said_where[96];     /* file:line of that lab.say */
    lsn_strbuf error;
};

static lsn_vm *V(lua_State *L)
{
    return *(lsn_vm **)lua_getextraspace(L);
}

static void set_errf(lsn_vm *vm, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_errf(lsn_vm *vm, const char *fmt, ...)
{
    char tmp[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    lsn_sb_clear(&vm->error);
    lsn_sb_add(&vm->error, tmp, strlen(tmp));
}

static void set_err_text(lsn_vm *vm, const char *s, size_t n)
{
    lsn_sb_clear(&vm->error);
    if (s)
        lsn_sb_add(&vm->error, s, n);
    else
        lsn_sb_add(&vm->error, "error", 5);
}

const char *lsn_vm_error(const lsn_vm *vm)
{
    return vm && vm->error.s ? vm->error.s : "";
}

const char *lsn_lua_version(void)
{
    return LUA_RELEASE;
}

/* ---- the limits ---------------------------------------------------------------
 *
 * Every call from C into the lesson (loading it, resuming run(lab), a
 * condition, a callback) gets a budget of work and of wall time, and the
 * whole state a cap on its heap. Work is counted in Lua instructions: the
 * count hook adds HOOK_EVERY each time it runs, and what runs in C on the
 * lesson's behalf is charged as instructions too (string patterns by an
 * upper bound of the matcher's steps, sorting and copying by their size,
 * each coroutine resume, each lab call by what it does). Hitting a limit
 * "trips" the state: from then on the hook, every pcall, xpcall and
 * coroutine.resume re-raise the limit's message, so no Lua code can catch it
 * and carry on, and the lesson ends with the message naming the limit and
 * file:line. Finalizers (__gc) are refused: they run where no hook does. */

#define HOOK_EVERY 1000                    /* instructions per hook call (lsn_limits.hook_every) */
#define STRING_MAX ((size_t)1 << 20)       /* bytes of one string: `..`, `==`, `<`, string.rep/format/sub and
                                              table.concat each touch at most this much per instruction */
#define ALLOC_CHARGE 16.0                  /* bytes allocated per instruction charged */
#define ALLOC_CHECK ((size_t)1 << 20)      /* bytes allocated between two checks of the limits */
#define DEFAULT_SECONDS 3.0                /* wall time per call into the lesson */
#define DEFAULT_PATTERN 1e8                /* pattern matcher steps per call */
#define HEAP_RESERVE ((size_t)8 << 20)     /* heap opened once the cap is hit: room for the message */

enum { TRIP_NONE = 0, TRIP_WORK, TRIP_TIME, TRIP_MEMORY, TRIP_PATTERN, TRIP_STOP };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* "lessons/x.lua:12:" of the innermost Lua function running on L (C
 * functions have no line), or "" when none. Allocates nothing. */
static void lua_where(lua_State *L, char *out, size_t outl)
{
    lua_Debug ar;
    out[0] = '\0';
    for (int level = 0; level < 64 && lua_getstack(L, level, &ar); level++) {
        if (lua_getinfo(L, "Sl", &ar) && ar.currentline > 0) {
            snprintf(out, outl, "%s:%d:", ar.short_src, ar.currentline);
            return;
        }
    }
}

/* Trip the state with a message located on L. The first trip stands. */
static void trip(lsn_vm *vm, lua_State *L, int kind, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void trip(lsn_vm *vm, lua_State *L, int kind, const char *fmt, ...)
{
    if (vm->trip)
        return;
    char where[300], msg[400];
    lua_where(L, where, sizeof where);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(vm->trip_msg, sizeof vm->trip_msg, "%.299s%s%.399s", where, where[0] ? " " : "", msg);
    vm->trip = kind;
    /* make the hook come back soon in this thread (other threads re-raise at their next hook) */
    lua_sethook(L, lua_gethook(L), LUA_MASKCOUNT, 100);
}

/* A memory failure seen on L: name it as a limit. */
static void trip_memory(lsn_vm *vm, lua_State *L)
{
    if (vm->str_hit && !vm->trip)
        trip(vm, L, TRIP_MEMORY, "a string longer than %zu MiB (a lesson's strings are capped, so that no "
             "single `..`, comparison or string function can hold the app still)", STRING_MAX >> 20);
    if (vm->mem_hit && !vm->trip)
        trip(vm, L, TRIP_MEMORY, "the lesson used all of its %zu MiB of Lua memory (a table or string that "
             "keeps growing?)", vm->mem_limit >> 20);
}

/* Raise the trip's message (when tripped). */
static void reraise(lsn_vm *vm, lua_State *L)
{
    trip_memory(vm, L);
    if (vm->trip) {
        lua_pushstring(L, vm->trip_msg);
        lua_error(L);
    }
}

/* Check the budgets after `work` more instruction-equivalents. */
static void spend(lsn_vm *vm, lua_State *L, double work)
{
    vm->work += work + (double)vm->alloc_pending / ALLOC_CHARGE;
    vm->alloc_pending = 0;
    if (!vm->trip) {
        if (vm->work > vm->work_limit)
            trip(vm, L, TRIP_WORK, "the lesson ran too long without waiting (an endless loop?): more than %.0f "
                 "million Lua instructions", vm->work_limit / 1e6);
        else if (vm->env.interrupt && *vm->env.interrupt)
            trip(vm, L, TRIP_STOP, "stopped: the program is closing");
        else if (now_s() > vm->deadline)
            trip(vm, L, TRIP_TIME, "the lesson ran too long without waiting (an endless loop?): more than %g s",
                 vm->seconds);
    }
    reraise(vm, L);
}

static void hook(lua_State *L, lua_Debug *ar);

/* Make the thread running the lesson check its limits after its current
 * instruction: a one-instruction count hook (lua_sethook may be called
 * asynchronously, as from a signal handler; the hook puts the period back). */
static void poke(lsn_vm *vm)
{
    lua_State *L = vm->running;
    if (L)
        lua_sethook(L, hook, LUA_MASKCOUNT, 1);
}

static void *l_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    lsn_vm *vm = ud;
    /* a new object: osize is its type; one string is capped */
    if (!ptr && osize == LUA_TSTRING && nsize > STRING_MAX + 64) {
        vm->str_hit = 1;
        return NULL;
    }
    if (!ptr)
        osize = 0;
    if (nsize == 0) {
        free(ptr);
        vm->mem_used -= osize;
        return NULL;
    }
    if (nsize > osize && vm->mem_used + (nsize - osize) > vm->mem_cap) {
        if (!vm->mem_hit) { /* once: room to build the message and unwind */
            vm->mem_hit = 1;
            vm->mem_cap += HEAP_RESERVE;
        }
        return NULL;
    }
    void *p = realloc(ptr, nsize);
    if (p) {
        vm->mem_used = vm->mem_used - osize + nsize;
        /* copying is work: charged by size, and checked soon after a lot of it */
        if (nsize > osize && (vm->alloc_pending += nsize - osize) >= ALLOC_CHECK)
            poke(vm);
    }
    return p;
}

static void hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    lsn_vm *vm = V(L);
    int n = lua_gethookcount(L);
    if (n != vm->hook_every && !vm->trip) /* a poke (or a trip's short period): back to the usual period */
        lua_sethook(L, hook, LUA_MASKCOUNT, vm->hook_every);
    spend(vm, L, n);
}

/* ---- the wall-time watchdog ------------------------------------------------------
 *
 * The hook only runs between instructions, every hook_every of them, so on
 * its own it sees the clock late when instructions are slow. A watchdog
 * thread (one per process) sleeps until the deadline of the call into the
 * lesson that is running (or a stop request, SIGTERM) and then signals the
 * lesson's thread; the handler pokes a one-instruction hook, which trips the
 * limit. Armed only while Lua code of the lesson runs: a lab call's own time
 * is not the lesson's, so it is disarmed meanwhile. */

#define WATCHDOG_POLL_NS 50000000LL        /* how often it looks at a stop request, and repeats a signal */

static struct {
    pthread_once_t once;
    int ok;                                /* the thread and the handler are in place */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long long deadline;                    /* CLOCK_MONOTONIC ns; 0 = disarmed */
    pthread_t target;                      /* the thread running the lesson */
    const volatile sig_atomic_t *interrupt;
} g_wd = {.once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER};

static lsn_vm *volatile g_live_vm;         /* the VM whose call is armed (the signal handler's) */

static int wd_signal(void) { return SIGRTMIN + 5; }

static long long mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void on_watchdog(int sig)
{
    (void)sig;
    int saved = errno;
    lsn_vm *vm = g_live_vm;
    if (vm)
        poke(vm);
    errno = saved;
}

static void *watchdog(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&g_wd.mu);
    for (;;) {
        while (!g_wd.deadline)
            pthread_cond_wait(&g_wd.cv, &g_wd.mu);
        long long now = mono_ns(), wake = g_wd.deadline;
        int stop = g_wd.interrupt && *g_wd.interrupt;
        if (now >= g_wd.deadline || stop) {
            pthread_kill(g_wd.target, wd_signal());
            wake = now + WATCHDOG_POLL_NS; /* again, in case it came between two instructions' checks */
        } else if (g_wd.interrupt && wake > now + WATCHDOG_POLL_NS) {
            wake = now + WATCHDOG_POLL_NS;
        }
        struct timespec ts = {.tv_sec = (time_t)(wake / 1000000000LL), .tv_nsec = (long)(wake % 1000000000LL)};
        pthread_cond_timedwait(&g_wd.cv, &g_wd.mu, &ts);
    }
    return NULL;
}

static void wd_init(void)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g_wd.cv, &ca);
    pthread_condattr_destroy(&ca);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_watchdog;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(wd_signal(), &sa, NULL) != 0)
        return;
    /* the watchdog blocks every signal: the program's (SIGINT, SIGTERM ...) go to its own threads */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    int rc = pthread_create(&t, NULL, watchdog, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0) {
        pthread_detach(t);
        g_wd.ok = 1;
    }
}

/* Arm the watchdog for vm's call on this thread until vm->deadline, or
 * disarm it (vm NULL). */
static void wd_arm(lsn_vm *vm)
{
    pthread_once(&g_wd.once, wd_init);
    if (!g_wd.ok)
        return;
    pthread_mutex_lock(&g_wd.mu);
    g_live_vm = vm;
    if (vm) {
        g_wd.deadline = (long long)(vm->deadline * 1e9);
        if (g_wd.deadline <= 0)
            g_wd.deadline = 1;
        g_wd.target = pthread_self();
        g_wd.interrupt = vm->env.interrupt;
    } else {
        g_wd.deadline = 0;
    }
    pthread_cond_signal(&g_wd.cv);
    pthread_mutex_unlock(&g_wd.mu);
}

/* Message handler of every protected call: the error (or the limit that
 * tripped) with a traceback. */
static int msgh(lua_State *L)
{
    lsn_vm *vm = V(L);
    trip_memory(vm, L);
    const char *m = vm->trip ? vm->trip_msg : lua_tostring(L, 1);
    if (!m) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
            m = lua_tostring(L, -1);
        else
            m = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, m, 1);
    return 1;
}

/* Nothing calls Lua unprotected, so a panic means a bug here; even then
 * the program must not abort with the terminal in raw mode: jump back to
 * the entry, which gives the lesson up. */
static int at_panic(lua_State *L)
{
    lsn_vm *vm = V(L);
    const char *m = lua_tostring(L, -1);
    snprintf(vm->trip_msg, sizeof vm->trip_msg, "the lesson's Lua state failed: %s", m ? m : "?");
    vm->dead = 1;
    if (vm->jmp_armed)
        longjmp(vm->jmp, 1);
    return 0;
}

/* ---- what the sandbox puts in front of the standard library ---------------- */

/* pcall and xpcall as Lua's own (lbaselib.c), but a tripped limit is raised
 * again instead of handed back as a result. */
static void wd_arm(lsn_vm *vm);
static lsn_vm *volatile g_live_vm;

static int finish_pcall(lua_State *L, int status, lua_KContext extra)
{
    lsn_vm *vm = V(L);
    reraise(vm, L);
    if (status != LUA_OK && status != LUA_YIELD) {
        /* an error out of a lab call (which disarms the watchdog while it runs) was caught: the
         * lesson's code goes on, so its wall time is watched again */
        if (vm->depth > 0 && g_live_vm != vm)
            wd_arm(vm);
        lua_pushboolean(L, 0);
        lua_pushvalue(L, -2);
        return 2;
    }
    return lua_gettop(L) - (int)extra;
}

static int l_pcall(lua_State *L)
{
    luaL_checkany(L, 1);
    lua_pushboolean(L, 1);
    lua_insert(L, 1);
    int status = lua_pcallk(L, lua_gettop(L) - 2, LUA_MULTRET, 0, 0, finish_pcall);
    return finish_pcall(L, status, 0);
}

/* xpcall's message handler, in front of the lesson's. An error raised by
 * the hook (a tripped limit) calls the handler from inside the hook, where
 * hooks are off: the lesson's handler must not run then, or an endless
 * loop in it could never be stopped. */
static int xpcall_handler(lua_State *L)
{
    lsn_vm *vm = V(L);
    if (vm->trip || vm->mem_hit)
        return 1; /* the error as it is; finish_pcall raises the limit */
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
}

static int l_xpcall(lua_State *L)
{
    int n = lua_gettop(L);
    luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_pushvalue(L, 2);
    lua_pushcclosure(L, xpcall_handler, 1);
    lua_replace(L, 2);
    lua_pushboolean(L, 1);
    lua_pushvalue(L, 1);
    lua_rotate(L, 3, 2);
    int status = lua_pcallk(L, n - 2, LUA_MULTRET, 2, 2, finish_pcall);
    return finish_pcall(L, status, 2);
}

/* coroutine.resume / coroutine.close: the library's, charged and re-raising. */
static int l_co_call(lua_State *L)
{
    lsn_vm *vm = V(L);
    spend(vm, L, HOOK_EVERY); /* a resumed thread may run less than a hook period: count one */
    int n = lua_gettop(L);
    lua_State *co = lua_tothread(L, 1), *was = vm->running;
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    if (co) /* the timer's target while it runs (resume catches its errors, so this comes back) */
        vm->running = co;
    lua_call(L, n, LUA_MULTRET);
    vm->running = was;
    reraise(vm, L);
    return lua_gettop(L);
}

/* coroutine.wrap, on the wrapped resume above (the library's own wrap
 * resumes without passing through it). */
static int l_wrap_call(lua_State *L)
{
    lsn_vm *vm = V(L);
    int n = lua_gettop(L);
    lua_pushvalue(L, lua_upvalueindex(1)); /* resume */
    lua_pushvalue(L, lua_upvalueindex(2)); /* the thread */
    lua_rotate(L, 1, 2);
    lua_call(L, n + 1, LUA_MULTRET);
    reraise(vm, L);
    if (!lua_toboolean(L, 1)) { /* the coroutine failed: its error goes on, as wrap's does */
        lua_settop(L, 2);
        return lua_error(L);
    }
    return lua_gettop(L) - 1;
}

static int l_co_wrap(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TFUNCTION);
    lua_getglobal(L, "coroutine");
    lua_getfield(L, -1, "create");
    lua_pushvalue(L, 1);
    lua_call(L, 1, 1);
    lua_getfield(L, -2, "resume"); /* the wrapped resume */
    lua_insert(L, -2);
    lua_pushcclosure(L, l_wrap_call, 2);
    return 1;
}

/* setmetatable, refusing finalizers: a __gc runs inside the collector,
 * where no hook counts or stops it (at lesson switch and quit too). */
static int l_setmetatable(lua_State *L)
{
    if (lua_istable(L, 2)) {
        lua_pushliteral(L, "__gc");
        if (lua_rawget(L, 2) != LUA_TNIL)
            return luaL_error(L, "setmetatable: lessons cannot use __gc finalizers (they run where no limit "
                                 "can stop them)");
        lua_pop(L, 1);
    }
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
}

/* An upper bound on the steps Lua's matcher (lstrlib.c) takes for pattern p
 * on a subject of n bytes: each repeated item (*, +, -) may retry the rest
 * of the pattern once per position, an optional one (?) twice, a balance
 * (%b) or back-reference (%1) scans the subject; the whole is tried from
 * every start unless anchored. Plain text is a naive search. */
static double pattern_bound(const char *p, size_t plen, size_t n, int plain)
{
    double dn = (double)n + 1;
    if (plain || !strpbrk(p, "^$*+?.([%-") || strlen(p) != plen)
        return dn * ((double)plen + 1);
    int anchored = p[0] == '^';
    size_t i = anchored;
    double items[512];
    int kinds[512], k = 0;
    while (i < plen && k < 512) {
        size_t start = i;
        int kind = 0; /* 0 single, 1 repeat, 2 optional, 3 scan */
        if (p[i] == '(' || p[i] == ')') {
            i++;
        } else if (p[i] == '$' && i + 1 == plen) {
            i++;
        } else if (p[i] == '%' && i + 1 < plen) {
            if (p[i + 1] == 'b') {
                i += 4;
                kind = 3;
            } else if (p[i + 1] == 'f') {
                i += 2;
                if (i < plen && p[i] == '[')
                    goto set;
            } else {
                kind = p[i + 1] >= '0' && p[i + 1] <= '9' ? 3 : 0;
                i += 2;
            }
        } else if (p[i] == '[') {
        set:
            i++;
            if (i < plen && p[i] == '^')
                i++;
            do { /* the first ']' is a member */
                if (i < plen && p[i] == '%')
                    i++;
                i++;
            } while (i < plen && p[i] != ']');
            i++;
        } else {
            i++;
        }
        if (kind == 0 && i < plen && (p[i] == '*' || p[i] == '+' || p[i] == '-')) {
            kind = 1;
            i++;
        } else if (kind == 0 && i < plen && p[i] == '?') {
            kind = 2;
            i++;
        }
        items[k] = (double)(i - start);
        kinds[k++] = kind;
    }
    if (k == 512)
        return INFINITY;
    double rest = 1;
    for (int j = k - 1; j >= 0; j--) {
        double unit = items[j];
        switch (kinds[j]) {
        case 1: rest = dn * (unit + rest); break;
        case 2: rest = 2 * (unit + rest); break;
        case 3: rest = dn + rest; break;
        default: rest = unit + rest; break;
        }
    }
    return (anchored ? 1 : dn) * rest;
}

enum { CHARGE_FIND, CHARGE_MATCH, CHARGE_GMATCH, CHARGE_GSUB, CHARGE_LEN1, CHARGE_REP, CHARGE_SORT,
       CHARGE_RANGE23, CHARGE_RANGE34, CHARGE_TLEN };

static double arg_len(lua_State *L, int i)
{
    size_t n = 0;
    if (lua_type(L, i) == LUA_TSTRING)
        lua_tolstring(L, i, &n);
    return (double)n;
}

/* n from #t of a table argument, without metamethods. */
static double arg_rawlen(lua_State *L, int i)
{
    return lua_istable(L, i) ? (double)lua_rawlen(L, i) : 0;
}

/* The size of a range [i, j] given at arguments a and b (defaults 1 and
 * #t of argument 1). */
static double arg_range(lua_State *L, int a, int b)
{
    double lo = lua_isnumber(L, a) ? lua_tonumber(L, a) : 1;
    double hi = lua_isnumber(L, b) ? lua_tonumber(L, b) : arg_rawlen(L, 1);
    return hi >= lo ? hi - lo + 1 : 0;
}

/* A library function with its work charged first (upvalue 1: the function,
 * 2: its kind, 3: its name). */
static int l_charged(lua_State *L)
{
    lsn_vm *vm = V(L);
    int kind = (int)lua_tointeger(L, lua_upvalueindex(2));
    double work = 1;
    if (kind <= CHARGE_GSUB) {
        size_t n = 0, plen = 0;
        const char *s = lua_type(L, 1) == LUA_TSTRING ? lua_tolstring(L, 1, &n) : NULL;
        const char *p = lua_type(L, 2) == LUA_TSTRING ? lua_tolstring(L, 2, &plen) : NULL;
        (void)s;
        if (p) {
            int plain = kind == CHARGE_FIND && lua_toboolean(L, 4);
            double steps = pattern_bound(p, plen, n, plain);
            if (!vm->trip && (steps > vm->pattern_limit - vm->pattern_work || !isfinite(steps)))
                trip(vm, L, TRIP_PATTERN, "%s: this pattern could take up to %.3g matching steps on %zu bytes, "
                     "more than a lesson may use between waits (%.3g): simplify it or match less text",
                     lua_tostring(L, lua_upvalueindex(3)), steps, n, vm->pattern_limit);
            vm->pattern_work += steps;
            work = steps / 16;
        }
    } else if (kind == CHARGE_LEN1) {
        work = arg_len(L, 1) / 8;
    } else if (kind == CHARGE_REP) {
        double reps = lua_isnumber(L, 2) ? lua_tonumber(L, 2) : 0;
        work = reps > 0 ? reps * (arg_len(L, 1) + arg_len(L, 3)) / 8 + reps / 8 : 0;
    } else if (kind == CHARGE_SORT) {
        double n = arg_rawlen(L, 1);
        work = 4 * n * log2(n + 2);
    } else if (kind == CHARGE_RANGE23) {
        work = arg_range(L, 2, 3);
    } else if (kind == CHARGE_RANGE34) {
        work = arg_range(L, 3, 4);
    } else if (kind == CHARGE_TLEN) {
        work = arg_rawlen(L, 1);
    }
    spend(vm, L, work);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

/* Replace lib[name] (the table on top) with its charged version. */
static void charge(lua_State *L, const char *lib, const char *name, int kind)
{
    lua_getfield(L, -1, name);
    lua_pushinteger(L, kind);
    lua_pushfstring(L, "%s.%s", lib, name);
    lua_pushcclosure(L, l_charged, 3);
    lua_setfield(L, -2, name);
}

static void guard_library(lua_State *L)
{
    lua_pushcfunction(L, l_pcall);
    lua_setglobal(L, "pcall");
    lua_pushcfunction(L, l_xpcall);
    lua_setglobal(L, "xpcall");
    lua_getglobal(L, "setmetatable");
    lua_pushcclosure(L, l_setmetatable, 1);
    lua_setglobal(L, "setmetatable");
    /* the collector's work is the lesson's own: no manual collections */
    lua_pushnil(L);
    lua_setglobal(L, "collectgarbage");
    lua_getglobal(L, "coroutine");
    static const char *const co_calls[] = {"resume", "close"};
    for (size_t i = 0; i < sizeof co_calls / sizeof co_calls[0]; i++) {
        lua_getfield(L, -1, co_calls[i]);
        lua_pushcclosure(L, l_co_call, 1);
        lua_setfield(L, -2, co_calls[i]);
    }
    lua_pushcfunction(L, l_co_wrap);
    lua_setfield(L, -2, "wrap");
    lua_pop(L, 1);
    lua_getglobal(L, "string");
    charge(L, "string", "find", CHARGE_FIND);
    charge(L, "string", "match", CHARGE_MATCH);
    charge(L, "string", "gmatch", CHARGE_GMATCH);
    charge(L, "string", "gsub", CHARGE_GSUB);
    charge(L, "string", "rep", CHARGE_REP);
    static const char *const by_len[] = {"upper", "lower", "reverse", "byte"};
    for (size_t i = 0; i < sizeof by_len / sizeof by_len[0]; i++)
        charge(L, "string", by_len[i], CHARGE_LEN1);
    lua_pop(L, 1);
    lua_getglobal(L, "table");
    charge(L, "table", "sort", CHARGE_SORT);
    charge(L, "table", "concat", CHARGE_RANGE34);
    charge(L, "table", "unpack", CHARGE_RANGE23);
    charge(L, "table", "move", CHARGE_RANGE23);
    charge(L, "table", "insert", CHARGE_TLEN);
    charge(L, "table", "remove", CHARGE_TLEN);
    lua_pop(L, 1);
    lua_getglobal(L, "utf8");
    charge(L, "utf8", "len", CHARGE_LEN1);
    charge(L, "utf8", "codepoint", CHARGE_LEN1);
    lua_pop(L, 1);
}

/* One entry from C into Lua: fn runs inside lua_pcall on the main thread
 * with the fields below as its arguments and results. */
typedef struct entry {
    int (*fn)(lua_State *L, struct entry *e);
    lsn_vm *vm;
    const char *s1, *s2;
    int64_t i1;
    double d1;
    int nvals;
    const lsn_val *vals;
    lsn_offer *offer;
    char *title;
    size_t titlelen;
    kv_engine *engine;
    const lsn_ask *ask;
    int result;              /* fn's answer (-1: fn set vm->error itself) */
    lsn_wait wait;
} entry;

static int trampoline(lua_State *L)
{
    entry *e = lua_touserdata(L, 1);
    lua_settop(L, 0);
    return e->fn(L, e);
}

/* Run e->fn protected. Returns 0, or -1 with vm->error set. */
static int protect(lsn_vm *vm, entry *e)
{
    lua_State *L = vm->L;
    if (!lua_checkstack(L, 8)) {
        set_errf(vm, "%s: the lesson ran out of Lua stack", vm->env.shown_path);
        return -1;
    }
    e->vm = vm;
    if (vm->dead || vm->trip) { /* a lesson that hit a limit stays stopped */
        set_errf(vm, "%s", vm->trip_msg);
        return -1;
    }
    int base = lua_gettop(L);
    lua_State *was_running = vm->running;
    lsn_vm *was_live = g_live_vm;
    if (vm->depth++ == 0) {
        vm->work = vm->pattern_work = 0;
        vm->alloc_pending = 0;
        vm->deadline = now_s() + vm->seconds;
        vm->said = 0; /* the app drew what was said before this entry */
        vm->running = L;
        wd_arm(vm);
    }
    int outer = !vm->jmp_armed;
    if (outer) {
        vm->jmp_armed = 1;
        if (setjmp(vm->jmp)) { /* at_panic: the state is gone */
            vm->jmp_armed = 0;
            vm->depth = 0;
            vm->running = NULL;
            wd_arm(NULL);
            set_errf(vm, "%s", vm->trip_msg);
            return -1;
        }
    }
    lua_pushcfunction(L, msgh);
    lua_pushcfunction(L, trampoline);
    lua_pushlightuserdata(L, e);
    int st = lua_pcall(L, 1, 0, base + 1);
    if (outer)
        vm->jmp_armed = 0;
    if (--vm->depth == 0) {
        vm->running = was_running;
        wd_arm(was_live);
    }
    if (st != LUA_OK) {
        size_t n = 0;
        const char *m = lua_tolstring(L, -1, &n);
        /* the handler's traceback starts with the limit's message; if even it
         * failed (no memory), the message alone */
        if (vm->trip && (!m || strncmp(m, vm->trip_msg, strlen(vm->trip_msg))))
            set_errf(vm, "%s", vm->trip_msg);
        else
            set_err_text(vm, m, n);
    }
    lua_settop(L, base);
    return st == LUA_OK && e->result >= 0 ? 0 : -1;
}

/* ---- files and the sandbox ------------------------------------------------------ */

/* "<lessons folder name>/<rel>": how lessons are named in messages. */
static void shown_name(const lsn_vm *vm, const char *rel, char *out, size_t outl)
{
    snprintf(out, outl, "%.255s/%.1024s", vm->env.lessons_name, rel);
}

/* Load a Lua file as text only (no bytecode) with a short chunk name.
 * Pushes the chunk, or an error message. */
static int load_file(lua_State *L, const char *path, const char *shown)
{
    char *buf = NULL, err[512];
    size_t len = 0;
    if (kv_read_file(path, LESSON_MAX_BYTES, &buf, &len, err, sizeof err) < 0) {
        lua_pushfstring(L, "cannot read %s: %s", shown, err);
        return LUA_ERRFILE;
    }
    char chunk[PATH_MAX + 2];
    snprintf(chunk, sizeof chunk, "@%s", shown);
    int st = luaL_loadbufferx(L, buf, len, chunk, "t");
    free(buf);
    return st;
}

static int l_require(lua_State *L)
{
    lsn_vm *vm = V(L);
    const char *name = luaL_checkstring(L, 1);
    int ok = !strncmp(name, "lib.", 4) && name[4] && strlen(name) < 64;
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
    snprintf(path, sizeof path, "%s/%s", vm->env.lessons_dir, rel);
    shown_name(vm, rel, shown, sizeof shown);
    if (load_file(L, path, shown) != LUA_OK)
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
    lsn_vm *vm = V(L);
    FILE *log = vm->env.log ? *vm->env.log : NULL;
    if (!vm->env.verbose || !log)
        return 0;
    int n = lua_gettop(L);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 1; i <= n; i++) {
        if (i > 1)
            luaL_addchar(&b, '\t');
        luaL_tolstring(L, i, NULL);
        luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
    fprintf(log, "    [%s] %s\n", vm->env.shown_path, lua_tostring(L, -1));
    return 0;
}

/* The learner's release as a table: {vllm_version=, accounting=, textbook=}
 * (lab.release, and require("lib.release") for helpers loaded before run). */
static void push_release(lua_State *L, lsn_vm *vm)
{
    lua_createtable(L, 0, 4);
    /* the KV usage gauge's name on the release's own engine (a card that
     * falls back to V0 is the plan's kv_usage_metric); the textbook: the newest */
    int textbook = vm->env.accounting && !strcmp(vm->env.accounting, "textbook");
    const kv_release *r = textbook ? NULL : kv_release_find(vm->env.vllm_version, NULL, 0);
    if (!r)
        r = kv_release_newest();
    lua_pushstring(L, kv_release_metrics_of(r, r->mem->engine_v1)->usage);
    lua_setfield(L, -2, "kv_usage_metric");
    lua_pushstring(L, vm->env.vllm_version ? vm->env.vllm_version : "");
    lua_setfield(L, -2, "vllm_version");
    lua_pushstring(L, vm->env.accounting ? vm->env.accounting : "release");
    lua_setfield(L, -2, "accounting");
    lua_pushboolean(L, vm->env.accounting && !strcmp(vm->env.accounting, "textbook"));
    lua_setfield(L, -2, "textbook");
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

/* The sandbox: base, string, table, math, utf8, coroutine; os.clock and
 * os.time only; require of lessons/lib; strict globals. */
static int open_sandbox(lua_State *L, entry *e)
{
    (void)e;
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
    push_release(L, V(L)); /* require("lib.release"): no file, the runner's table */
    lua_setfield(L, -2, "lib.release");
    lua_setfield(L, LUA_REGISTRYINDEX, "lsn.loaded");
    lua_pushcfunction(L, l_require);
    lua_setglobal(L, "require");
    lua_pushcfunction(L, l_print);
    lua_setglobal(L, "print");
    guard_library(L);
    if (luaL_loadbufferx(L, prelude, sizeof prelude - 1, "=prelude", "t") != LUA_OK)
        return lua_error(L);
    lua_call(L, 0, 0);
    return 0;
}

lsn_vm *lsn_vm_new(const lsn_lab_env *env, char *err, size_t errlen)
{
    lsn_vm *vm = calloc(1, sizeof *vm);
    if (!vm) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    vm->env = *env;
    vm->mem_limit = vm->mem_cap = env->limits.heap_bytes ? env->limits.heap_bytes : DEFAULT_HEAP;
    vm->work_limit = env->limits.instructions > 0 ? (double)env->limits.instructions : (double)DEFAULT_INSTRUCTIONS;
    vm->seconds = env->limits.seconds > 0 ? env->limits.seconds : DEFAULT_SECONDS;
    vm->pattern_limit = env->limits.pattern_work > 0 ? env->limits.pattern_work : DEFAULT_PATTERN;
    vm->hook_every = env->limits.hook_every > 0 ? env->limits.hook_every : HOOK_EVERY;
    for (int i = 0; i < LSN_FN_COUNT; i++)
        vm->fn_ref[i] = LUA_NOREF;
    vm->co_ref = vm->lab_ref = LUA_NOREF;
    vm->L = lua_newstate(l_alloc, vm);
    if (!vm->L) {
        snprintf(err, errlen, "could not create a Lua state for lesson %d", env->number);
        free(vm);
        return NULL;
    }
    *(lsn_vm **)lua_getextraspace(vm->L) = vm;
    lua_atpanic(vm->L, at_panic);
    entry e = {.fn = open_sandbox};
    if (protect(vm, &e) < 0) {
        snprintf(err, errlen, "could not set up the Lua sandbox: %s", lsn_vm_error(vm));
        lsn_vm_free(vm);
        return NULL;
    }
    lua_sethook(vm->L, hook, LUA_MASKCOUNT, vm->hook_every);
    return vm;
}

void lsn_vm_free(lsn_vm *vm)
{
    if (!vm)
        return;
    /* no finalizers can run here (setmetatable refuses __gc); a state that
     * panicked is left as it is, leaked rather than touched */
    if (vm->L && !vm->dead)
        lua_close(vm->L);
    lsn_sb_free(&vm->error);
    free(vm);
}

/* ---- the lesson file and its coroutine -------------------------------------------- */

static void lab_push(lua_State *L, lsn_vm *vm);

static int load_fail(lsn_vm *vm, entry *e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int load_fail(lsn_vm *vm, entry *e, const char *fmt, ...)
{
    char tmp[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    set_errf(vm, "%s", tmp);
    e->result = -1;
    return 0;
}

static int do_load(lua_State *L, entry *e)
{
    lsn_vm *vm = e->vm;
    const char *shown = vm->env.shown_path;
    lab_push(L, vm);
    vm->lab_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    if (load_file(L, e->s1, shown) != LUA_OK) {
        size_t n = 0;
        const char *m = lua_tolstring(L, -1, &n);
        set_err_text(vm, m, n);
        e->result = -1;
        return 0;
    }
    lua_call(L, 0, 1);
    if (!lua_istable(L, -1))
        return load_fail(vm, e, "%s: a lesson must return a table {id = %d, title = ..., run = function(lab) ... end}",
                         shown, vm->env.number);
    int t = lua_gettop(L);
    lua_getfield(L, t, "id");
    int isnum = 0;
    lua_Integer id = lua_tointegerx(L, -1, &isnum);
    lua_pop(L, 1);
    if (!isnum || id != vm->env.number)
        return load_fail(vm, e, "%s: the lesson's id must be %d (its number in manifest.json)", shown,
                         vm->env.number);
    lua_getfield(L, t, "title");
    if (lua_type(L, -1) == LUA_TSTRING || lua_type(L, -1) == LUA_TNUMBER)
        snprintf(e->title, e->titlelen, "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
    lua_getfield(L, t, "flags");
    if (lua_type(L, -1) == LUA_TSTRING && !strcmp(lua_tostring(L, -1), "*")) {
        lsn_offer_allow(e->offer, "*");
    } else if (lua_istable(L, -1)) {
        lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
        for (lua_Integer i = 1; i <= n; i++) {
            lua_rawgeti(L, -1, i);
            const char *f = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
            if (!f || lsn_offer_allow(e->offer, f) < 0)
                return load_fail(vm, e, "%s: flags[%lld] = '%s' is not a flag kvlab knows", shown, (long long)i,
                                 f ? f : "?");
            lua_pop(L, 1);
        }
    } else if (!lua_isnil(L, -1)) {
        return load_fail(vm, e, "%s: flags must be a list of flag names or \"*\"", shown);
    }
    lua_pop(L, 1);
    lua_getfield(L, t, "run");
    if (!lua_isfunction(L, -1))
        return load_fail(vm, e, "%s: the lesson table needs run = function(lab) ... end", shown);
    vm->co = lua_newthread(L);
    vm->co_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_xmove(L, vm->co, 1); /* run */
    e->result = 0;
    return 0;
}

int lsn_vm_load(lsn_vm *vm, const char *path, lsn_offer *offer, char *title, size_t titlelen)
{
    entry e = {.fn = do_load, .s1 = path, .offer = offer, .title = title, .titlelen = titlelen};
    return protect(vm, &e);
}

static int do_resume(lua_State *L, entry *e)
{
    lsn_vm *vm = e->vm;
    lua_State *co = vm->co;
    if (!lua_checkstack(co, e->nvals + 2))
        return luaL_error(L, "%s: the lesson ran out of Lua stack", vm->env.shown_path);
    int nargs = e->nvals;
    if (!vm->started) {
        lua_rawgeti(co, LUA_REGISTRYINDEX, vm->lab_ref);
        nargs = 1;
        vm->started = 1;
    } else {
        for (int i = 0; i < e->nvals; i++) {
            const lsn_val *v = &e->vals[i];
            if (v->kind == LSN_VAL_NUM)
                lua_pushnumber(co, v->num);
            else if (v->kind == LSN_VAL_INT)
                lua_pushinteger(co, (lua_Integer)v->i);
            else
                lua_pushboolean(co, v->i != 0);
        }
    }
    memset(&vm->req, 0, sizeof vm->req);
    int nres = 0;
    lua_State *was = vm->running;
    vm->running = co;
    int st = lua_resume(co, L, nargs, &nres);
    vm->running = was;
    if (st == LUA_YIELD) {
        lua_pop(co, nres);
        if (vm->req.wait == W_NONE) {
            set_errf(vm, "%s: the lesson yielded without saying what it waits for "
                         "(use lab.pause, lab.step, lab.ask ... rather than coroutine.yield)",
                     vm->env.shown_path);
            e->wait = W_ERROR;
        } else {
            e->wait = vm->req.wait;
        }
    } else if (st == LUA_OK) {
        lua_pop(co, nres);
        e->wait = W_DONE;
    } else {
        trip_memory(vm, co);
        const char *m = vm->trip ? vm->trip_msg : lua_tostring(co, -1);
        luaL_traceback(L, co, m ? m : "(error object is not a string)", 0);
        size_t n = 0;
        const char *t = lua_tolstring(L, -1, &n);
        set_err_text(vm, t, n);
        e->wait = W_ERROR;
    }
    return 0;
}

lsn_wait lsn_vm_resume(lsn_vm *vm, int nvals, const lsn_val *vals, lsn_wait_req *req)
{
    memset(req, 0, sizeof *req);
    if (!vm->co)
        return W_ERROR;
    entry e = {.fn = do_resume, .nvals = nvals, .vals = vals};
    if (protect(vm, &e) < 0)
        return W_ERROR;
    *req = vm->req;
    req->wait = e.wait;
    return e.wait;
}

int lsn_vm_has(const lsn_vm *vm, lsn_fn which)
{
    return vm && vm->fn_ref[which] != LUA_NOREF;
}

static void drop_ref(lua_State *L, lsn_vm *vm, lsn_fn which)
{
    if (vm->fn_ref[which] != LUA_NOREF)
        luaL_unref(L, LUA_REGISTRYINDEX, vm->fn_ref[which]);
    vm->fn_ref[which] = LUA_NOREF;
}

/* Take the function at idx as the one of this kind (nil drops it). */
static void keep_fn(lua_State *L, lsn_vm *vm, lsn_fn which, int idx)
{
    drop_ref(L, vm, which);
    if (lua_isfunction(L, idx)) {
        lua_pushvalue(L, idx);
        vm->fn_ref[which] = luaL_ref(L, LUA_REGISTRYINDEX);
    }
}

void lsn_vm_drop(lsn_vm *vm, lsn_fn which)
{
    if (vm && vm->L && !vm->dead)
        drop_ref(vm->L, vm, which); /* luaL_unref frees a slot: no allocation */
}

static int do_test(lua_State *L, entry *e)
{
    lua_rawgeti(L, LUA_REGISTRYINDEX, e->vm->fn_ref[e->i1]);
    lua_call(L, 0, 1);
    e->result = lua_toboolean(L, -1);
    return 0;
}

int lsn_vm_test(lsn_vm *vm, lsn_fn which)
{
    if (!vm)
        return 1;
    if (vm->fn_ref[which] == LUA_NOREF)
        return 1;
    entry e = {.fn = do_test, .i1 = which};
    if (protect(vm, &e) < 0)
        return -1;
    return e.result;
}

static int do_on_flag(lua_State *L, entry *e)
{
    lua_rawgeti(L, LUA_REGISTRYINDEX, e->vm->fn_ref[LSN_FN_ON_FLAG]);
    lua_pushstring(L, e->s1);
    lua_pushstring(L, e->s2);
    lua_call(L, 2, 0);
    return 0;
}

int lsn_vm_on_flag(lsn_vm *vm, const char *name, const char *value)
{
    if (!vm)
        return 0;
    if (vm->fn_ref[LSN_FN_ON_FLAG] == LUA_NOREF)
        return 0;
    entry e = {.fn = do_on_flag, .s1 = name, .s2 = value ? value : ""};
    return protect(vm, &e);
}

static int do_on_step(lua_State *L, entry *e)
{
    lua_rawgeti(L, LUA_REGISTRYINDEX, e->vm->fn_ref[LSN_FN_ON_STEP]);
    lua_pushinteger(L, (lua_Integer)e->i1);
    lua_call(L, 1, 0);
    return 0;
}

int lsn_vm_on_step(lsn_vm *vm, int64_t tokens)
{
    if (!vm)
        return 0;
    if (vm->fn_ref[LSN_FN_ON_STEP] == LUA_NOREF)
        return 0;
    entry e = {.fn = do_on_step, .i1 = tokens};
    return protect(vm, &e);
}

static int64_t submit_table(lsn_vm *vm, lua_State *L, int idx, kv_engine *e, char *err, size_t errlen);

#define TRAFFIC_MAX_PER_STEP 10000 /* requests one call of a traffic function may add */

static int do_traffic(lua_State *L, entry *e)
{
    lsn_vm *vm = e->vm;
    lua_rawgeti(L, LUA_REGISTRYINDEX, vm->fn_ref[LSN_FN_TRAFFIC]);
    lua_pushinteger(L, (lua_Integer)e->i1);
    lua_pushnumber(L, e->d1);
    lua_call(L, 2, 1);
    if (lua_istable(L, -1)) {
        int t = lua_gettop(L);
        lua_Integer n = luaL_len(L, t);
        if (n > TRAFFIC_MAX_PER_STEP)
            return luaL_error(L, "lab.traffic: the generator returned %I requests for one step (at most %d)",
                              (LUAI_UACINT)n, TRAFFIC_MAX_PER_STEP);
        for (lua_Integer i = 1; i <= n; i++) {
            lua_rawgeti(L, t, i);
            char err[256];
            if (lua_istable(L, -1))
                submit_table(vm, L, lua_gettop(L), e->engine, err, sizeof err);
            lua_pop(L, 1);
        }
    }
    return 0;
}

int lsn_vm_traffic(lsn_vm *vm, kv_engine *eng, int64_t step, double clock_s)
{
    if (!vm)
        return 0;
    if (vm->fn_ref[LSN_FN_TRAFFIC] == LUA_NOREF)
        return 0;
    entry e = {.fn = do_traffic, .i1 = step, .d1 = clock_s, .engine = eng};
    return protect(vm, &e);
}

/* ==== the lab table ================================================================ */

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

/* t[k] as a string, or NULL (the pointer is valid while t is on the stack). */
static const char *opt_str(lua_State *L, int idx, const char *k)
{
    lua_getfield(L, idx, k);
    const char *s = lua_isstring(L, -1) ? lua_tostring(L, -1) : NULL;
    lua_pop(L, 1);
    return s;
}

static char *opt_dup(lua_State *L, int idx, const char *k)
{
    const char *s = opt_str(L, idx, k);
    return s ? strdup(s) : NULL;
}

/* Waits may only come from the lesson's own coroutine. */
static void need_coroutine(lua_State *L, lsn_vm *vm, const char *what)
{
    if (L != vm->co)
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
static void apply_flag_table(lua_State *L, lsn_vm *vm, int idx)
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
        if (lsn_server_set(vm->env.server, keys[i], val, err, sizeof err) < 0)
            luaL_error(L, "%s", err);
    }
}

/* Apply a command line: "MODEL --flag value --flag=value --bool --no-bool". */
static void apply_flag_line(lua_State *L, lsn_vm *vm, const char *line)
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
            if (lsn_server_set(vm->env.server, "model", t, err, sizeof err) < 0)
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
        if (lsn_server_set(vm->env.server, name, value, err, sizeof err) < 0)
            luaL_error(L, "%s", err);
    }
}

static int push_start_result(lua_State *L, lsn_vm *vm)
{
    char err[1024] = "";
    int rc = vm->env.start_server(vm->env.host, err, sizeof err);
    if (rc == 1) {
        lua_pushboolean(L, 1);
        return 1;
    }
    lua_pushboolean(L, 0);
    lua_pushstring(L, err);
    lua_pushstring(L, rc == 0 ? "refused" : "invalid");
    return 3;
}

static kv_engine *engine_or_nil(lua_State *L)
{
    return lsn_server_engine(V(L)->env.server);
}

/* ---- narration -------------------------------------------------------------- */

static int f_page(lua_State *L)
{
    lsn_vm *vm = V(L);
    /* Text said on this page since the app last drew would vanish unread:
     * kvlab check says where (the lesson must wait first, or put it in the
     * question's explain, which the app keeps on top of the new page). */
    if (vm->said && vm->env.headless)
        return luaL_error(L, "lab.page: the text of %s is never shown: the page is replaced before the lesson "
                             "waits (lab.pause, a question or a goal first, or make it the question's explain)",
                          vm->said_where);
    const char *title = luaL_optstring(L, 1, "");
    /* kvlab check: a title cut with ~ at 80 columns loses its end */
    if (vm->env.headless) {
        int chars = 0;
        for (const unsigned char *t = (const unsigned char *)title; *t; t++)
            chars += (*t & 0xc0) != 0x80;
        if (chars > LSN_PAGE_TITLE_MAX)
            return luaL_error(L, "lab.page: the title \"%s\" is %d characters; %d fit the page's border at 80 "
                                 "columns", title, chars, LSN_PAGE_TITLE_MAX);
    }
    lsn_stage_page(vm->env.stage, title);
    *vm->env.changes |= LSN_CH_TEXT;
    return 0;
}

/* The release row the server follows (its --vllm-version, or the textbook
 * row under --accounting textbook), for lsn_quote_check. */
static const kv_release *quote_release(lsn_vm *vm)
{
    char v[64] = "", a[32] = "", err[128];
    lsn_server_get(vm->env.server, "accounting", a, sizeof a);
    if (!strcmp(a, "textbook"))
        return kv_release_textbook();
    lsn_server_get(vm->env.server, "vllm-version", v, sizeof v);
    return kv_release_find(v, err, sizeof err);
}

static int f_say(lua_State *L)
{
    lsn_vm *vm = V(L);
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
    if (lsn_stage_say(vm->env.stage, s, len) < 0)
        return luaL_error(L, "lab.say: a page holds at most %d bytes of text (start a new one with lab.page)",
                          (int)LSN_PAGE_MAX_BYTES);
    /* kvlab check: a quoted log line or error in the words of the server's release */
    if (vm->env.headless) {
        const kv_release *rel = quote_release(vm);
        char qmsg[512];
        const char *page = vm->env.stage->text.s ? vm->env.stage->text.s : "";
        if (rel && lsn_quote_check(page, rel, qmsg, sizeof qmsg) < 0)
            return luaL_error(L, "lab.say: %s", qmsg);
        if (lsn_figures_check(page, qmsg, sizeof qmsg) < 0)
            return luaL_error(L, "lab.say: %s", qmsg);
    }
    *vm->env.changes |= LSN_CH_TEXT;
    if (!vm->said) {
        luaL_where(L, 1);
        snprintf(vm->said_where, sizeof vm->said_where, "the lab.say at %s", lua_tostring(L, -1));
        lua_pop(L, 1);
        size_t wl = strlen(vm->said_where);
        while (wl > 0 && (vm->said_where[wl - 1] == ' ' || vm->said_where[wl - 1] == ':'))
            vm->said_where[--wl] = '\0';
    }
    vm->said = 1;
    return 0;
}

static int f_pause(lua_State *L)
{
    lsn_vm *vm = V(L);
    need_coroutine(L, vm, "lab.pause");
    vm->req.wait = W_NEXT;
    return lua_yield(L, 0);
}

/* ---- the server ---------------------------------------------------------- */

static int f_start(lua_State *L)
{
    lsn_vm *vm = V(L);
    lsn_server_reset_args(vm->env.server);
    /* every server follows the learner's release (lab.release) unless the
     * lesson names another accounting or release in its flags */
    char err[256];
    const char *acc = vm->env.accounting ? vm->env.accounting : "release";
    lsn_server_set(vm->env.server, "accounting", acc, err, sizeof err);
    if (strcmp(acc, "textbook") && vm->env.vllm_version && vm->env.vllm_version[0])
        lsn_server_set(vm->env.server, "vllm-version", vm->env.vllm_version, err, sizeof err);
    if (lua_istable(L, 1))
        apply_flag_table(L, vm, 1);
    else
        apply_flag_line(L, vm, luaL_checkstring(L, 1));
    return push_start_result(L, vm);
}

static int f_restart(lua_State *L)
{
    lsn_vm *vm = V(L);
    if (lua_istable(L, 1))
        apply_flag_table(L, vm, 1);
    else if (lua_isstring(L, 1))
        apply_flag_line(L, vm, lua_tostring(L, 1));
    return push_start_result(L, vm);
}

static int f_stop(lua_State *L)
{
    lsn_vm *vm = V(L);
    vm->env.stop_server(vm->env.host);
    return 0;
}

static int f_flag(lua_State *L)
{
    lsn_vm *vm = V(L);
    char buf[512];
    if (lsn_server_get(vm->env.server, luaL_checkstring(L, 1), buf, sizeof buf) < 0)
        return luaL_error(L, "lab.flag: unknown flag '%s'", lua_tostring(L, 1));
    lua_pushstring(L, buf);
    return 1;
}

/* lab.flag_in_release(name[, value]): whether the release the server follows has the
 * vLLM flag (its own parser's table, kv_args_flag_in_release), and with a
 * value whether it takes that value (false and the refusal's line); the textbook
 * accounting follows the newest. */
static int f_flag_in_release(lua_State *L)
{
    lsn_vm *vm = V(L);
    const char *name = luaL_checkstring(L, 1);
    const kv_args_flag *f = kv_args_flag_find(name);
    if (!f)
        return luaL_error(L, "lab.flag_in_release: unknown flag '%s'", name);
    char v[64] = "";
    if (lsn_server_get(vm->env.server, "vllm-version", v, sizeof v) < 0)
        v[0] = '\0';
    if (!kv_args_flag_in_release(f, v) || lua_isnoneornil(L, 2)) {
        lua_pushboolean(L, kv_args_flag_in_release(f, v));
        return 1;
    }
    /* with a value: would that release's parser take it ("32k" before 0.8.4 is refused) */
    char err[256];
    if (lsn_server_accepts(vm->env.server, name, luaL_checkstring(L, 2), err, sizeof err) == 0) {
        lua_pushboolean(L, 1);
        return 1;
    }
    lua_pushboolean(L, 0);
    lua_pushstring(L, err);
    return 2;
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
    lua_createtable(L, 0, kv_plan_field_count() + 8);
    /* the scalars: the one table `kvlab serve --json` prints from, the same
     * keys and getters (unrounded here: lessons compute with them) */
    for (int i = 0; i < kv_plan_field_count(); i++) {
        const kv_plan_field *f = kv_plan_field_at(i);
        kv_plan_value v = {0};
        f->get(p, &v);
        switch (v.kind) {
        case KV_PLAN_VALUE_BOOL: lua_pushboolean(L, v.b); break;
        case KV_PLAN_VALUE_INT: lua_pushinteger(L, (lua_Integer)v.i); break;
        case KV_PLAN_VALUE_NUM: lua_pushnumber(L, v.d); break;
        case KV_PLAN_VALUE_STR: lua_pushstring(L, v.s ? v.s : ""); break;
        default: lua_pushnil(L); break; /* JSON null: does not apply */
        }
        lua_setfield(L, -2, f->name);
    }
    /* what lessons read as plain values where --json has null (lessons/API.md) */
    setstr(L, "error", p->error);
    setstr(L, "vllm_version", p->vllm_version);
    /* the release's name for the KV usage gauge (kv_release_metrics) */
    setstr(L, "kv_usage_metric", kv_release_metrics_of(p->release, p->engine_v1)->usage);
    setint(L, "estimated_max_model_len", p->estimated_max_model_len);
    setstr(L, "gpu_id", p->gpu_id); /* the older name of `gpu` */
    setint(L, "num_kv_groups", p->num_kv_groups); /* 2 for a hybrid full/sliding model */
    setint(L, "num_sliding_layers", p->num_sliding_layers);
    setint(L, "sliding_window", p->sliding_window);
    lua_createtable(L, KV_PLAN_NUM_TERMS, 0);
    for (int i = 0; i < KV_PLAN_NUM_TERMS; i++) {
        lua_createtable(L, 0, 5);
        setstr(L, "name", p->terms[i].name);
        setstr(L, "how", p->terms[i].how);
        setnum(L, "bytes", p->terms[i].bytes);
        setnum(L, "gib", kv_gib(p->terms[i].bytes));
        setbool(L, "overridden", p->terms[i].overridden);
        setbool(L, "counted", p->terms[i].counted);
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
    lsn_server *s = V(L)->env.server;
    push_plan(L, lsn_server_plan(s));
    const kv_model *m = lsn_server_model(s);
    if (lua_istable(L, -1) && m)
        setstr(L, "model", m->id); /* as `kvlab serve --json` adds it */
    return 1;
}

static int f_what_if(lua_State *L)
{
    lsn_vm *vm = V(L);
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
    /* a Lua userdata, not malloc: an error while pushing it (the heap cap) frees it too */
    kv_plan *p = lua_newuserdatauv(L, sizeof *p, 0);
    char err[1024];
    if (lsn_server_plan_with(vm->env.server, n, keys, vp, p, err, sizeof err) < 0) {
        lua_pushnil(L);
        lua_pushstring(L, err);
        return 2;
    }
    push_plan(L, p);
    return 1;
}

/* ---- lab.split: a prefill/decode split of the running server ------------ */

#define SPLIT_MAX_REQUESTS 4096

/* One request of lab.split's list at stack index t (a table). */
static int32_t opt_int_field(lua_State *L, int idx, const char *k, int32_t dflt);

static void split_spec(lua_State *L, int t, kv_request_spec *sp)
{
    memset(sp, 0, sizeof *sp);
    /* token counts range-checked, not cast: 2^32 + 100 is no 100-token prompt */
    sp->prompt_tokens = opt_int_field(L, t, "prompt_tokens", 1);
    sp->output_tokens = opt_int_field(L, t, "output_tokens", 1);
    sp->prefix_tokens = opt_int_field(L, t, "prefix_tokens", 0);
    lua_getfield(L, t, "arrival_s");
    sp->arrival_s = luaL_optnumber(L, -1, 0.0);
    lua_pop(L, 1);
    lua_getfield(L, t, "prefix_id"); /* the string stays reachable from the table */
    sp->prefix_id = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    lua_pop(L, 1);
    if (sp->arrival_s < 0)
        sp->arrival_s = 0;
}

static void push_latency(lua_State *L, const char *k, const kv_latency_stats *s)
{
    char key[40];
    snprintf(key, sizeof key, "%s_mean_s", k);
    setnum(L, key, s->mean);
    snprintf(key, sizeof key, "%s_p99_s", k);
    setnum(L, key, s->p99);
}

/* The requests on one engine of cfg, arrivals in order; 0 or -1 (err). */
static int split_one(const kv_engine_config *cfg, const kv_request_spec *sp, int n, kv_engine_metrics *m,
                     double *dur, char *err, size_t errlen)
{
    kv_engine *e = kv_engine_create(cfg, err, errlen);
    if (!e)
        return -1;
    int next = 0, rc = 0;
    for (;;) {
        kv_engine_info info;
        kv_engine_get_info(e, &info);
        while (next < n && sp[next].arrival_s <= info.clock_s)
            kv_engine_submit(e, &sp[next++], NULL, 0);
        kv_engine_get_info(e, &info);
        if (!info.num_running && !info.num_waiting) {
            if (next >= n)
                break;
            kv_engine_advance_clock(e, sp[next].arrival_s);
            continue;
        }
        if ((rc = kv_engine_step(e, NULL, err, errlen)) < 0)
            break;
    }
    kv_engine_get_metrics(e, m);
    kv_engine_info info;
    kv_engine_get_info(e, &info);
    *dur = info.clock_s;
    kv_engine_destroy(e);
    return rc < 0 ? -1 : 0;
}

/* Pools of one kind of a split, added up: capacity (null blocks left
 * out), blocks in use, free blocks still hashed. */
static void split_pools(const kv_disagg *d, int decode, int32_t n, int32_t *cap, int32_t *used, int32_t *cached)
{
    *cap = *used = *cached = 0;
    for (int32_t i = 0; i < n; i++) {
        kv_engine *x = kv_disagg_engine(d, decode, i);
        if (!x)
            continue;
        kv_engine_info info;
        kv_engine_get_info(x, &info);
        *cap += info.num_blocks - 1;
        *used += info.num_blocks - 1 - info.num_free_blocks;
        *cached += info.num_cached_blocks - (info.num_blocks - 1 - info.num_free_blocks);
    }
    if (*cached < 0)
        *cached = 0;
}

/* One frame of a recorded split (lsn_split_frame) at its clock now. */
static void split_frame(const kv_disagg *d, lsn_split_frame *f)
{
    kv_disagg_stats st;
    kv_disagg_get_stats(d, &st);
    memset(f, 0, sizeof *f);
    f->t_s = st.duration_s;
    int32_t cap;
    split_pools(d, 0, st.num_prefill, &cap, &f->prefill_used, &f->prefill_cached);
    split_pools(d, 1, st.num_decode, &cap, &f->decode_used, &f->decode_cached);
    kv_disagg_flight fl[LSN_SPLIT_FLIGHTS];
    int64_t n = kv_disagg_get_flights(d, fl, LSN_SPLIT_FLIGHTS);
    f->nflights = n > INT32_MAX ? INT32_MAX : (int32_t)n;
    for (int k = 0; k < LSN_SPLIT_FLIGHTS && k < n; k++) {
        double span = fl[k].ready_s - fl[k].start_s, done = span > 0 ? (f->t_s - fl[k].start_s) / span : 1.0;
        f->flight_done[k] = (float)(done < 0 ? 0 : done > 1 ? 1 : done);
    }
    f->kv_transfer_bytes = st.kv_transfer_bytes;
    f->prefilled = (int32_t)st.requests_prefilled;
    f->transfers = (int32_t)st.kv_transfers;
    f->finished = (int32_t)st.requests_finished;
    f->ttft_mean_s = st.ttft.count ? st.ttft.mean : 0;
}

static int f_split(lua_State *L)
{
    lsn_vm *vm = V(L);
    kv_engine *e = engine_or_nil(L);
    luaL_checktype(L, 1, LUA_TTABLE);
    if (!e) {
        lua_pushnil(L);
        lua_pushstring(L, "no server is running");
        return 2;
    }
    lua_getfield(L, 1, "prefill");
    lua_getfield(L, 1, "decode");
    lua_getfield(L, 1, "link");
    char spl[32], err[300];
    snprintf(spl, sizeof spl, "%lld:%lld", (long long)luaL_optinteger(L, -3, 1), (long long)luaL_optinteger(L, -2, 1));
    const char *ln = luaL_optstring(L, -1, "rdma");
    kv_disagg_config dc = {0};
    kv_disagg_link link;
    if (kv_disagg_parse_split(spl, &dc.num_prefill, &dc.num_decode, err, sizeof err) ||
        kv_disagg_link_parse(ln, &link, err, sizeof err))
        return luaL_error(L, "lab.split: %s", err);
    lua_pop(L, 3);
    lua_getfield(L, 1, "requests");
    luaL_checktype(L, -1, LUA_TTABLE);
    lua_Integer n = luaL_len(L, -1);
    if (n < 1 || n > SPLIT_MAX_REQUESTS)
        return luaL_error(L, "lab.split: give 1 to %d requests", SPLIT_MAX_REQUESTS);
    kv_request_spec *sp = lua_newuserdatauv(L, (size_t)n * sizeof *sp, 0);
    for (lua_Integer i = 0; i < n; i++) {
        lua_geti(L, -2, i + 1);
        luaL_checktype(L, -1, LUA_TTABLE);
        split_spec(L, lua_gettop(L), &sp[i]);
        lua_pop(L, 1);
        if (i && sp[i].arrival_s < sp[i - 1].arrival_s)
            return luaL_error(L, "lab.split: requests must come in arrival order");
    }
    const kv_gpu *g = lsn_server_gpu(vm->env.server);
    dc.link_bytes_per_s = kv_disagg_link_bytes_per_s(link, g ? g->pcie_gbps : 0, g ? g->nvlink_gbps : 0, NULL, 0);
    kv_engine_config cfg = *kv_engine_get_config(e);
    cfg.device = NULL;
    cfg.verify = 0;
    cfg.write_kv = 0;
    cfg.block_events = 0;
    kv_engine_metrics one;
    double one_dur = 0;
    if (split_one(&cfg, sp, (int)n, &one, &one_dur, err, sizeof err) < 0) {
        lua_pushnil(L);
        lua_pushstring(L, err);
        return 2;
    }
    kv_disagg *d = kv_disagg_create(&cfg, &dc, err, sizeof err);
    int rc = d ? 0 : -1;
    for (lua_Integer i = 0; d && i < n && rc >= 0; i++)
        rc = kv_disagg_add(d, &sp[i], err, sizeof err);
    /* show: every step's frame, kept as LSN_SPLIT_FRAMES evenly spaced in time */
    lua_getfield(L, 1, "show");
    int show = lua_toboolean(L, -1);
    lua_pop(L, 1);
    lsn_split_frame *fr = NULL;
    int64_t nfr = 0, capfr = 0;
    while (d && rc >= 0 && (rc = kv_disagg_step(d, err, sizeof err)) > 0) {
        if (!show)
            continue;
        if (nfr == capfr) {
            int64_t nc = capfr ? capfr * 2 : 1024;
            lsn_split_frame *g = nc <= 1 << 22 ? realloc(fr, (size_t)nc * sizeof *g) : NULL;
            if (!g) {
                rc = kv_errf(err, sizeof err, -1, "lab.split: out of memory for its frames");
                break;
            }
            fr = g;
            capfr = nc;
        }
        split_frame(d, &fr[nfr++]);
    }
    if (rc >= 0 && show && nfr > 0) {
        /* evenly spaced in time: for each slot the last frame at or before
         * it, with the link as the busiest frame since the slot before
         * showed it (a transfer shorter than a slot still shows) */
        lsn_split_frame keep[LSN_SPLIT_FRAMES];
        double t0 = fr[0].t_s, t1 = fr[nfr - 1].t_s;
        int nk = 0;
        for (int64_t i = 0, k = 0; k < LSN_SPLIT_FRAMES; k++) {
            double t = t0 + (t1 - t0) * (double)k / (LSN_SPLIT_FRAMES - 1);
            int64_t busy = -1;
            while (i + 1 < nfr && fr[i + 1].t_s <= t) {
                i++;
                if (busy < 0 || fr[i].nflights >= fr[busy].nflights)
                    busy = i;
            }
            keep[nk] = fr[i];
            if (busy >= 0 && fr[busy].nflights > fr[i].nflights) {
                keep[nk].nflights = fr[busy].nflights;
                memcpy(keep[nk].flight_done, fr[busy].flight_done, sizeof keep[nk].flight_done);
            }
            nk++;
        }
        keep[nk - 1] = fr[nfr - 1];
        kv_disagg_stats st0;
        kv_disagg_get_stats(d, &st0);
        lsn_split sp = {.num_prefill = st0.num_prefill, .num_decode = st0.num_decode,
                        .requests = (int32_t)n, .link = kv_disagg_link_name(link),
                        .link_bytes_per_s = st0.link_bytes_per_s, .one_ttft_mean_s = one.ttft.mean};
        int32_t u, c;
        split_pools(d, 0, st0.num_prefill, &sp.prefill_blocks, &u, &c);
        split_pools(d, 1, st0.num_decode, &sp.decode_blocks, &u, &c);
        if (lsn_stage_split(vm->env.stage, &sp, keep, nk) < 0)
            rc = kv_errf(err, sizeof err, -1, "lab.split: out of memory for its frames");
    }
    free(fr);
    if (rc < 0) {
        kv_disagg_destroy(d);
        lua_pushnil(L);
        lua_pushstring(L, err);
        return 2;
    }
    kv_disagg_stats st;
    kv_disagg_get_stats(d, &st);
    kv_disagg_destroy(d);
    lua_createtable(L, 0, 2);
    lua_createtable(L, 0, 8);
    setint(L, "requests_finished", one.request_success_total);
    setnum(L, "duration_s", one_dur);
    setnum(L, "peak_kv_usage", one.peak_kv_usage);
    setnum(L, "mean_kv_usage", one.mean_kv_usage);
    push_latency(L, "ttft", &one.ttft);
    push_latency(L, "itl", &one.itl);
    push_latency(L, "e2e", &one.e2e);
    lua_setfield(L, -2, "one");
    lua_createtable(L, 0, 16);
    setint(L, "prefill", st.num_prefill);
    setint(L, "decode", st.num_decode);
    setstr(L, "link", kv_disagg_link_name(link));
    setnum(L, "link_bytes_per_s", st.link_bytes_per_s);
    setint(L, "requests_finished", st.requests_finished);
    setint(L, "kv_transfers", st.kv_transfers);
    setnum(L, "kv_transfer_bytes", (double)st.kv_transfer_bytes);
    setnum(L, "kv_transfer_s", st.kv_transfer_s);
    setint(L, "remote_prefill_tokens", st.remote_prefill_tokens);
    setnum(L, "duration_s", st.duration_s);
    setnum(L, "prefill_peak_kv_usage", st.prefill_peak_kv_usage);
    setnum(L, "decode_peak_kv_usage", st.decode_peak_kv_usage);
    setnum(L, "prefill_mean_kv_usage", st.prefill_mean_kv_usage);
    setnum(L, "decode_mean_kv_usage", st.decode_mean_kv_usage);
    push_latency(L, "ttft", &st.ttft);
    push_latency(L, "itl", &st.itl);
    push_latency(L, "e2e", &st.e2e);
    lua_setfield(L, -2, "split");
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
    lsn_vm *vm = V(L);
    if (lua_isstring(L, 1)) { /* any catalogue model or config.json, without starting */
        kv_model m;
        char err[512];
        if (kv_model_load(lua_tostring(L, 1), lsn_server_assets(vm->env.server), &m, err, sizeof err) != KV_MODEL_OK) {
            lua_pushnil(L);
            lua_pushstring(L, err);
            return 2;
        }
        return push_model(L, &m);
    }
    return push_model(L, lsn_server_model(vm->env.server));
}

/* A JSON value as a Lua value (objects -> tables, arrays -> lists, null -> nil).
 * Each level holds its table and a child on the stack: the stack is grown
 * (or a Lua error raised) before it is used. */
static void push_json(lua_State *L, const cJSON *j, int depth)
{
    luaL_checkstack(L, 3, "lab.config: config.json nests too deep");
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

/* push_json under lua_pcall: (lightuserdata cJSON) -> the value. */
static int push_json_call(lua_State *L)
{
    const cJSON *j = lua_touserdata(L, 1);
    push_json(L, j, 0);
    return 1;
}

/* lab.config(): the config.json the running model was read from, as a table
 * (the file as written: absent fields stay absent), and its path. The file
 * is read as every input is (kv_read_file: regular files only, 8 MiB at
 * most); the parsed tree lives on the C heap, so it is built into Lua under
 * a pcall and freed before any error (the heap cap, a nesting too deep) is
 * raised again. */
static int f_config(lua_State *L)
{
    const kv_model *m = lsn_server_model(V(L)->env.server);
    if (!m || !m->path[0]) {
        lua_pushnil(L);
        return 1;
    }
    char *text = NULL, err[300];
    size_t len = 0;
    if (kv_read_file(m->path, 8u << 20, &text, &len, err, sizeof err) < 0)
        return luaL_error(L, "lab.config: %s", err);
    cJSON *j = cJSON_ParseWithLength(text, len);
    free(text);
    if (!j)
        return luaL_error(L, "lab.config: %s is not JSON", m->path);
    lua_pushcfunction(L, push_json_call);
    lua_pushlightuserdata(L, j);
    int rc = lua_pcall(L, 1, 1, 0);
    cJSON_Delete(j);
    if (rc != LUA_OK)
        return lua_error(L);
    lua_pushstring(L, m->path);
    return 2;
}

static int f_gpu(lua_State *L)
{
    const kv_gpu *g = lsn_server_gpu(V(L)->env.server);
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
#define STEP_TIME_MAX_POS ((lua_Integer)1 << 40)

static int f_step_time(lua_State *L)
{
    kv_engine *e = engine_or_nil(L);
    const kv_plan *p = lsn_server_plan(V(L)->env.server);
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
    spend(V(L), L, 10.0 * (double)n);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, 1, i);
        if (!lua_istable(L, -1))
            return luaL_error(L, "lab.step_time: chunk %I must be {start = , n = }", (LUAI_UACINT)i);
        lua_getfield(L, -1, "start");
        lua_getfield(L, -2, "n");
        if (!lua_isinteger(L, -2) || !lua_isinteger(L, -1) || lua_tointeger(L, -2) < 0 || lua_tointeger(L, -1) < 0)
            return luaL_error(L, "lab.step_time: chunk %I needs whole start >= 0 and n >= 0", (LUAI_UACINT)i);
        /* positions past 2^40 tokens are no context any model has; start + n must not overflow */
        if (lua_tointeger(L, -2) > STEP_TIME_MAX_POS || lua_tointeger(L, -1) > STEP_TIME_MAX_POS - lua_tointeger(L, -2))
            return luaL_error(L, "lab.step_time: chunk %I: start + n must be at most 2^40 tokens", (LUAI_UACINT)i);
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
    const kv_plan *p = lsn_server_plan(V(L)->env.server);
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
    lsn_vm *vm = V(L);
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
    setint(L, "external_prefix_cache_queries", m.external_prefix_cache_queries);
    setint(L, "external_prefix_cache_hits", m.external_prefix_cache_hits);
    setint(L, "offload_capacity_blocks", m.offload_capacity_blocks);
    setint(L, "offload_used_blocks", m.offload_used_blocks);
    setint(L, "offload_stored_blocks", m.offload_stored_blocks);
    setint(L, "offload_loaded_blocks", m.offload_loaded_blocks);
    setint(L, "offload_evicted_blocks", m.offload_evicted_blocks);
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
    setint(L, "last_step_tokens", vm->env.last_step->num_scheduled_tokens);
    setint(L, "last_step_prefill_tokens", vm->env.last_step->num_prefill_tokens);
    setint(L, "last_step_decode_tokens", vm->env.last_step->num_decode_tokens);
    setint(L, "last_step_requests", vm->env.last_step->num_scheduled_reqs);
    setint(L, "last_step_preempted", vm->env.last_step->num_preempted);
    setnum(L, "last_step_duration_s", vm->env.last_step->duration_s);
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
    spend(V(L), L, 20.0 * (double)(info.num_submitted - from));
    for (int64_t id = from; id < info.num_submitted; id++)
        if (push_request(L, e, id))
            lua_rawseti(L, -2, ++k);
    spend(V(L), L, 200.0 * k);
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
    spend(V(L), L, 100.0 * n);
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
    /* a Lua userdata, not malloc: a limit or the heap cap raised below frees it too */
    kv_timeline_sample *tl = lua_newuserdatauv(L, (size_t)want * sizeof *tl, 0);
    lua_insert(L, -2); /* under the result table */
    int32_t n = kv_engine_timeline(e, tl, (int32_t)want);
    spend(V(L), L, 100.0 * n);
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
    lsn_vm *vm = V(L);
    lua_createtable(L, 0, 2);
    char **ids = NULL;
    char err[256];
    int n = kv_model_catalog_list(lsn_server_assets(vm->env.server), &ids, err, sizeof err);
    lua_createtable(L, n > 0 ? n : 0, 0);
    for (int i = 0; i < n; i++) {
        lua_pushstring(L, ids[i]);
        lua_rawseti(L, -2, i + 1);
    }
    if (n > 0)
        kv_model_catalog_free(ids, n);
    lua_setfield(L, -2, "models");
    const kv_gpu_catalog *c = lsn_server_catalog(vm->env.server);
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
    lua_Integer v = lua_isnil(L, -1) ? dflt : luaL_checkinteger(L, -1);
    lua_pop(L, 1);
    if (v < INT32_MIN || v > INT32_MAX)
        return (int32_t)luaL_error(L, "'%s' = %I is out of range", k, (LUAI_UACINT)v);
    return (int32_t)v;
}

static int64_t submit_table(lsn_vm *vm, lua_State *L, int idx, kv_engine *e, char *err, size_t errlen)
{
    if (!e) {
        snprintf(err, errlen, "no server is running (lab.start first)");
        return -1;
    }
    kv_engine_info info;
    kv_engine_get_info(e, &info);
    if ((int64_t)info.num_running + info.num_waiting >= LSN_MAX_LIVE_REQUESTS) {
        snprintf(err, errlen, "%d requests are waiting or running already: let some finish first",
                 LSN_MAX_LIVE_REQUESTS);
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
    *vm->env.changes |= LSN_CH_ENGINE;
    return id;
}

static int f_submit(lua_State *L)
{
    lsn_vm *vm = V(L);
    luaL_checktype(L, 1, LUA_TTABLE);
    char err[512];
    int64_t id = submit_table(vm, L, 1, engine_or_nil(L), err, sizeof err);
    if (id < 0) {
        lua_pushnil(L);
        lua_pushstring(L, err);
        return 2;
    }
    lua_pushinteger(L, id);
    return 1;
}

/* A length field: a number, {min=, max=} or {mean=, p99=}. */
static lsn_length length_field(lua_State *L, int idx, const char *k, double dflt)
{
    lsn_length l = {LSN_LEN_FIXED, dflt, dflt};
    lua_getfield(L, idx, k);
    int t = lua_gettop(L);
    if (lua_isnil(L, t)) {
        /* the default */
    } else if (lua_type(L, t) == LUA_TNUMBER) {
        l.a = l.b = lua_tonumber(L, t);
    } else if (lua_istable(L, t)) {
        lua_getfield(L, t, "mean");
        lua_getfield(L, t, "p99");
        lua_getfield(L, t, "min");
        lua_getfield(L, t, "max");
        if (lua_isnumber(L, t + 1) && lua_isnumber(L, t + 2)) {
            l = (lsn_length){LSN_LEN_MEAN_P99, lua_tonumber(L, t + 1), lua_tonumber(L, t + 2)};
        } else if (lua_isnumber(L, t + 3)) {
            double lo = lua_tonumber(L, t + 3);
            l = (lsn_length){LSN_LEN_RANGE, lo, lua_isnumber(L, t + 4) ? lua_tonumber(L, t + 4) : lo};
        } else {
            luaL_error(L, "lab.traffic: %s must be a number, {min=, max=} or {mean=, p99=}", k);
        }
        lua_pop(L, 4);
    } else {
        luaL_error(L, "lab.traffic: %s must be a number, {min=, max=} or {mean=, p99=}", k);
    }
    lua_pop(L, 1);
    return l;
}

static int f_traffic(lua_State *L)
{
    lsn_vm *vm = V(L);
    lsn_traffic *t = vm->env.traffic;
    drop_ref(L, vm, LSN_FN_TRAFFIC);
    lsn_traffic_stop(t);
    if (lua_isnoneornil(L, 1))
        return 0;
    if (lua_isfunction(L, 1)) {
        keep_fn(L, vm, LSN_FN_TRAFFIC, 1);
        lsn_traffic_start_fn(t);
        return 0;
    }
    luaL_checktype(L, 1, LUA_TTABLE);
    lsn_traffic_spec spec = {0};
    lua_getfield(L, 1, "rate");
    spec.rate = luaL_checknumber(L, -1);
    lua_pop(L, 1);
    if (!(spec.rate > 0))
        return luaL_error(L, "lab.traffic: rate must be > 0 requests per second");
    spec.prompt = length_field(L, 1, "prompt_tokens", 512);
    spec.output = length_field(L, 1, "output_tokens", 128);
    spec.prefix_tokens = opt_int_field(L, 1, "prefix_tokens", 0);
    char prefix[64];
    const char *ps = opt_str(L, 1, "prefix_id");
    snprintf(prefix, sizeof prefix, "%s", ps ? ps : "");
    spec.prefix_id = ps ? prefix : NULL;
    lua_getfield(L, 1, "count");
    spec.count = lua_isnil(L, -1) ? 0 : luaL_checkinteger(L, -1);
    lua_pop(L, 1);
    /* Without a seed of its own the generator takes one from the lesson's
     * (seeded) generator, so a replay sends the same requests. */
    lua_getfield(L, 1, "seed");
    spec.seed = lua_isinteger(L, -1) ? (uint64_t)lua_tointeger(L, -1)
                                     : (uint64_t)(lsn_rng_next(vm->env.rng) * 1e15);
    lua_pop(L, 1);
    kv_engine *e = engine_or_nil(L);
    kv_engine_info info = {0};
    if (e)
        kv_engine_get_info(e, &info);
    char err[512];
    if (lsn_traffic_start(t, &spec, info.clock_s, err, sizeof err) < 0)
        return luaL_error(L, "%s", err);
    return 0;
}

static int f_step(lua_State *L)
{
    lsn_vm *vm = V(L);
    need_coroutine(L, vm, "lab.step");
    lua_Integer n = luaL_optinteger(L, 1, 1);
    if (n < 1)
        return 0;
    if (n > LSN_MAX_WAIT_STEPS)
        return luaL_error(L, "lab.step: at most %d engine steps at a time", LSN_MAX_WAIT_STEPS);
    vm->req.steps = n;
    vm->req.wait = W_STEPS;
    return lua_yield(L, 0);
}

static int wait_cond(lua_State *L, lsn_wait kind, const char *what)
{
    lsn_vm *vm = V(L);
    need_coroutine(L, vm, what);
    luaL_checktype(L, 1, LUA_TFUNCTION);
    lua_Integer max = luaL_optinteger(L, 2, 10000);
    if (max < 1 || max > LSN_MAX_WAIT_STEPS)
        return luaL_error(L, "%s: max_steps must be from 1 to %d", what, LSN_MAX_WAIT_STEPS);
    keep_fn(L, vm, LSN_FN_COND, 1);
    vm->req.max_steps = max;
    vm->req.wait = kind;
    return lua_yield(L, 0);
}

static int f_run_until(lua_State *L) { return wait_cond(L, W_RUN_UNTIL, "lab.run_until"); }
static int f_wait_until(lua_State *L) { return wait_cond(L, W_COND, "lab.wait_until"); }

static int f_autorun(lua_State *L)
{
    *V(L)->env.autorun = lua_isnone(L, 1) ? 1 : lua_toboolean(L, 1);
    return 0;
}

static int f_speed(lua_State *L)
{
    double v = luaL_checknumber(L, 1);
    if (!(v > 0) || v > 100000)
        return luaL_error(L, "lab.speed: steps per second must be in (0, 100000]");
    *V(L)->env.speed = v;
    return 0;
}

static int f_random(lua_State *L)
{
    lsn_vm *vm = V(L);
    double u = lsn_rng_next(vm->env.rng);
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
    /* hi - lo in unsigned arithmetic: the whole integer range has no overflow */
    lua_Unsigned span = (lua_Unsigned)hi - (lua_Unsigned)lo;
    lua_Unsigned off = (lua_Unsigned)(u * ((double)span + 1.0));
    if (off > span)
        off = span;
    lua_pushinteger(L, (lua_Integer)((lua_Unsigned)lo + off));
    return 1;
}

/* ---- views ---------------------------------------------------------------- */

static lsn_stage_view *check_view(lua_State *L, int idx)
{
    const char *name = luaL_checkstring(L, idx);
    lsn_stage_view *v = lsn_stage_view_get(V(L)->env.stage, name);
    if (!v)
        luaL_error(L, "unknown view '%s' (views: text, pool, memory, flags, metrics, log, tp, plot, requests)", name);
    return v;
}

static int f_show(lua_State *L)
{
    lsn_stage_view *v = check_view(L, 1);
    v->pub.shown = 1;
    if (lua_istable(L, 2)) {
        lua_pushnil(L);
        while (lua_next(L, 2)) {
            char val[256];
            if (lua_type(L, -2) == LUA_TSTRING && flag_text(L, -1, val, sizeof val) &&
                lsn_stage_view_option(v, lua_tostring(L, -2), val) < 0)
                return luaL_error(L, "lab.show: a view takes at most %d options", LSN_MAX_OPTIONS);
            lua_pop(L, 1);
        }
    }
    *V(L)->env.changes |= LSN_CH_VIEWS;
    return 0;
}

static int f_hide(lua_State *L)
{
    lsn_stage_view *v = check_view(L, 1);
    if (strcmp(v->pub.name, "text"))
        v->pub.shown = 0;
    v->pub.focus = 0;
    *V(L)->env.changes |= LSN_CH_VIEWS;
    return 0;
}

static int f_focus(lua_State *L)
{
    lsn_vm *vm = V(L);
    lsn_stage_focus(vm->env.stage, check_view(L, 1));
    *vm->env.changes |= LSN_CH_VIEWS;
    return 0;
}

static int f_highlight(lua_State *L)
{
    lsn_stage_view *v = check_view(L, 1);
    const char *target = luaL_checkstring(L, 2);
    int64_t ids[LSN_MAX_IDS];
    int n = 0;
    if (lua_istable(L, 3)) {
        lua_Integer len = luaL_len(L, 3);
        for (lua_Integer i = 1; i <= len && n < LSN_MAX_IDS; i++) {
            lua_rawgeti(L, 3, i);
            ids[n++] = luaL_checkinteger(L, -1);
            lua_pop(L, 1);
        }
    } else if (lua_isinteger(L, 3)) {
        ids[n++] = lua_tointeger(L, 3);
    }
    if (lsn_stage_view_highlight(v, target, ids, n, luaL_optstring(L, 4, "")) < 0)
        return luaL_error(L, "lab.highlight: a view holds at most %d highlights (lab.unhighlight clears them)",
                          LSN_MAX_HIGHLIGHTS);
    *V(L)->env.changes |= LSN_CH_VIEWS;
    return 0;
}

static int f_unhighlight(lua_State *L)
{
    lsn_vm *vm = V(L);
    if (lua_isnoneornil(L, 1)) {
        for (int i = 0; i < LSN_NVIEWS; i++)
            lsn_stage_view_unhighlight(&vm->env.stage->views[i]);
    } else {
        lsn_stage_view_unhighlight(check_view(L, 1));
    }
    *vm->env.changes |= LSN_CH_VIEWS;
    return 0;
}

static int f_plot(lua_State *L)
{
    lsn_vm *vm = V(L);
    lsn_stage *st = vm->env.stage;
    luaL_checktype(L, 1, LUA_TTABLE);
    /* the texts stay on the Lua stack (no C copy that an error in a later
     * field, a metamethod or the heap cap could leak) until the stage copies them */
    const char *txt[3];
    static const char *const keys[3] = {"title", "xlabel", "ylabel"};
    for (int i = 0; i < 3; i++) {
        lua_getfield(L, 1, keys[i]);
        txt[i] = lua_type(L, -1) == LUA_TSTRING || lua_type(L, -1) == LUA_TNUMBER ? lua_tostring(L, -1) : NULL;
    }
    lua_getfield(L, 1, "logy");
    int logy = lua_toboolean(L, -1);
    lsn_stage_plot(st, txt[0], txt[1], txt[2], logy);
    lua_pop(L, 4);
    lua_getfield(L, 1, "series");
    if (lua_istable(L, -1)) {
        lua_Integer n = luaL_len(L, -1);
        for (lua_Integer i = 1; i <= n; i++) {
            lua_rawgeti(L, -1, i);
            if (lsn_stage_series(st, luaL_checkstring(L, -1)) < 0)
                return luaL_error(L, "lab.plot: at most %d series", LSN_MAX_SERIES);
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
    lsn_stage_view_get(st, "plot")->pub.shown = 1;
    *vm->env.changes |= LSN_CH_PLOT | LSN_CH_VIEWS;
    return 0;
}

static int f_plot_add(lua_State *L)
{
    lsn_vm *vm = V(L);
    lsn_stage *st = vm->env.stage;
    int si;
    if (lua_isinteger(L, 1)) {
        lua_Integer k = lua_tointeger(L, 1);
        if (k < 1 || k > st->nseries)
            return luaL_error(L, "lab.plot_add: there is no series %I", (LUAI_UACINT)k);
        si = (int)k - 1;
    } else {
        si = lsn_stage_series(st, luaL_checkstring(L, 1));
        if (si < 0)
            return luaL_error(L, "lab.plot_add: at most %d series", LSN_MAX_SERIES);
    }
    double x = luaL_checknumber(L, 2), y = luaL_checknumber(L, 3);
    if (lsn_stage_plot_add(st, si, x, y) < 0)
        return luaL_error(L, "lab.plot_add: a series holds at most %d points", LSN_MAX_POINTS);
    *vm->env.changes |= LSN_CH_PLOT;
    return 0;
}

/* ---- questions and goals -------------------------------------------------- */

/* The list at t[k] (strings, or numbers when numbers_as_answers), copied
 * into *out as it is read, so an error half-way leaves nothing unowned. */
static void str_list(lua_State *L, int idx, const char *k, char ***out, int *n, int numbers_as_answers)
{
    *n = 0;
    lua_getfield(L, idx, k);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return;
    }
    if (!lua_istable(L, -1))
        luaL_error(L, "'%s' must be a list", k);
    lua_Integer len = luaL_len(L, -1);
    if (len < 0 || len > LSN_ASK_MAX_LIST)
        luaL_error(L, "'%s' may list at most %d entries", k, LSN_ASK_MAX_LIST);
    char **v = calloc((size_t)len + 1, sizeof *v);
    if (!v)
        luaL_error(L, "out of memory");
    *out = v;
    for (lua_Integer i = 1; i <= len; i++) {
        lua_rawgeti(L, -1, i);
        char buf[256];
        if (numbers_as_answers && lua_type(L, -1) == LUA_TNUMBER)
            snprintf(buf, sizeof buf, "%.10g", lua_tonumber(L, -1));
        else if (lua_type(L, -1) == LUA_TSTRING)
            snprintf(buf, sizeof buf, "%s", lua_tostring(L, -1));
        else
            luaL_error(L, "'%s'[%d] must be a string", k, (int)i);
        if (!(v[*n] = strdup(buf)))
            luaL_error(L, "out of memory");
        (*n)++;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
}

/* lab.ask, and (predict) the prediction lab.predict waits for: the same
 * fields, no answer and no right choice (nothing typed is wrong). */
static int ask_impl(lua_State *L, int predict)
{
    lsn_vm *vm = V(L);
    need_coroutine(L, vm, predict ? "lab.predict" : "lab.ask");
    luaL_checktype(L, 1, LUA_TTABLE);
    lsn_ask *q = vm->env.ask;
    lsn_ask_clear(q);
    q->predict = predict;
    lua_getfield(L, 1, "prompt");
    if (!lua_isstring(L, -1))
        return luaL_error(L, predict ? "lab.predict: needs a prompt" : "lab.ask: needs a prompt");
    q->prompt = strdup(lua_tostring(L, -1));
    lua_pop(L, 1);
    lua_getfield(L, 1, "choices");
    int is_choice = lua_istable(L, -1);
    lua_pop(L, 1);
    if (is_choice) {
        int nchoices = 0;
        str_list(L, 1, "choices", &q->choices, &nchoices, 0);
        q->nchoices = nchoices;
        if (q->nchoices < 2 || q->nchoices > 26)
            return luaL_error(L, "lab.ask: choices must list 2 to 26 answers");
        lua_getfield(L, 1, "correct");
        lua_Integer correct = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : predict ? 1 : 0;
        lua_pop(L, 1);
        q->correct = correct >= 1 && correct <= q->nchoices ? (int)correct : 0;
        if (!q->correct)
            return luaL_error(L, "lab.ask: correct must be the number (1..%d) of the right choice", q->nchoices);
        q->why = calloc((size_t)q->nchoices, sizeof *q->why);
        lua_getfield(L, 1, "why");
        if (lua_istable(L, -1)) {
            for (int i = 1; i <= q->nchoices && q->why; i++) {
                lua_rawgeti(L, -1, i);
                if (lua_isstring(L, -1))
                    q->why[i - 1] = strdup(lua_tostring(L, -1));
                lua_pop(L, 1);
            }
        }
        lua_pop(L, 1);
    } else {
        lua_getfield(L, 1, "answer");
        if (!lua_isnumber(L, -1) && !predict)
            return luaL_error(L, "lab.ask: a numeric question needs answer = <number> (or choices = {...})");
        q->answer = predict ? 0 : lua_tonumber(L, -1);
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
            if (n < 0 || n > LSN_ASK_MAX_LIST)
                return luaL_error(L, "lab.ask: near may list at most %d entries", LSN_ASK_MAX_LIST);
            q->near = calloc((size_t)n + 1, sizeof *q->near);
            if (!q->near)
                return luaL_error(L, "out of memory");
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
    str_list(L, 1, "hints", &q->hints, &q->nhints, 0);
    str_list(L, 1, "wrong", &q->wrong, &q->nwrong, 1);
    lua_getfield(L, 1, "script");
    if (lua_type(L, -1) == LUA_TNUMBER) {
        char buf[128];
        q->script = strdup(lsn_answer_format(lua_tonumber(L, -1), q->unit, buf, sizeof buf));
    } else if (lua_isstring(L, -1)) {
        q->script = strdup(lua_tostring(L, -1));
    }
    lua_pop(L, 1);
    q->explain = opt_dup(L, 1, "explain");
    if (!q->nchoices) {
        lua_getfield(L, 1, "expect");
        if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TSTRING)
            return luaL_error(L, "lab.ask: expect must be a formula over engine figures, as a string");
        if (lua_type(L, -1) == LUA_TSTRING) {
            if (lua_rawlen(L, -1) > 1024)
                return luaL_error(L, "lab.ask: expect is longer than 1024 bytes");
            q->expect = strdup(lua_tostring(L, -1));
        }
        lua_pop(L, 1);
        lua_getfield(L, 1, "given");
        if (lua_istable(L, -1)) {
            int t = lua_gettop(L);
            q->given_names = calloc(LSN_ASK_MAX_LIST, sizeof *q->given_names);
            q->given_values = calloc(LSN_ASK_MAX_LIST, sizeof *q->given_values);
            if (!q->given_names || !q->given_values)
                return luaL_error(L, "out of memory");
            lua_pushnil(L);
            while (lua_next(L, t)) {
                if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TNUMBER)
                    return luaL_error(L, "lab.ask: given must map names to numbers ({T = 1000})");
                if (q->ngiven == LSN_ASK_MAX_LIST)
                    return luaL_error(L, "lab.ask: given may name at most %d numbers", LSN_ASK_MAX_LIST);
                q->given_values[q->ngiven] = lua_tonumber(L, -1);
                if (!(q->given_names[q->ngiven] = strdup(lua_tostring(L, -2))))
                    return luaL_error(L, "out of memory");
                q->ngiven++;
                lua_pop(L, 1);
            }
        } else if (!lua_isnil(L, -1)) {
            return luaL_error(L, "lab.ask: given must map names to numbers ({T = 1000})");
        }
        lua_pop(L, 1);
    }
    q->active = 1;
    vm->req.wait = W_ANSWER;
    *vm->env.changes |= LSN_CH_QUESTION | LSN_CH_STATE;
    return lua_yield(L, 0);
}

static int f_ask(lua_State *L) { return ask_impl(L, 0); }
static int f_predict_ask(lua_State *L) { return ask_impl(L, 1); }

static int do_expect(lua_State *L, entry *e);

/* The second half of lab.predict, once its run played: (p, prediction,
 * outcome, why) -> says the prediction against the outcome, the gap and
 * why, and checks the outcome against the engine: p.expect, evaluated like
 * a question's (lessons/API.md "Questions"), must give the same figure
 * (within p's tolerance) and read one, or the lesson fails (so kvlab check
 * checks it for real). Returns prediction, outcome. */
/* An error of lab.predict{}, placed at the lesson's call (level 2: the
 * wrapper below calls this entry). */
static int predict_error(lua_State *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int predict_error(lua_State *L, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    luaL_where(L, 2);
    lua_pushstring(L, msg);
    lua_concat(L, 2);
    return lua_error(L);
}

static int f_predict_outcome(lua_State *L)
{
    lsn_vm *vm = V(L);
    luaL_checktype(L, 1, LUA_TTABLE);
    lsn_ask t;
    memset(&t, 0, sizeof t);
    lua_getfield(L, 1, "choices");
    int nchoices = lua_istable(L, -1) ? (int)luaL_len(L, -1) : 0;
    lua_pop(L, 1);
    const char *unit = opt_str(L, 1, "unit");
    t.unit = (char *)(unit ? unit : "");
    lua_getfield(L, 1, "abs");
    t.abs = lua_isnumber(L, -1) ? lua_tonumber(L, -1) : 0;
    lua_pop(L, 1);
    lua_getfield(L, 1, "tolerance");
    t.rel = lua_isnumber(L, -1) ? lua_tonumber(L, -1) : t.abs > 0 ? 0.0 : 0.01;
    lua_pop(L, 1);
    int isnum = 0;
    double pred = lua_tonumberx(L, 2, &isnum);
    double got = lua_tonumberx(L, 3, &isnum);
    if (!isnum || !isfinite(got))
        return predict_error(L, "lab.predict: run must return the outcome, a number%s (got %s)",
                          nchoices ? " (the choice it was, 1..n)" : "", luaL_typename(L, 3));
    if (nchoices && (got != floor(got) || got < 1 || got > nchoices))
        return predict_error(L, "lab.predict: run returned %g, not a choice 1..%d", got, nchoices);
    /* the outcome, derived again from the engine */
    lua_getfield(L, 1, "expect");
    if (lua_type(L, -1) != LUA_TSTRING)
        return predict_error(L, "lab.predict: needs expect = \"<formula over engine figures>\" (how kvlab check "
                             "derives the outcome again)");
    t.expect = (char *)lua_tostring(L, -1);
    int eidx = lua_gettop(L);
    char *names[LSN_ASK_MAX_LIST];
    double values[LSN_ASK_MAX_LIST];
    lua_getfield(L, 1, "given");
    if (lua_istable(L, -1)) {
        int gt = lua_gettop(L);
        lua_pushnil(L);
        while (lua_next(L, gt) && t.ngiven < LSN_ASK_MAX_LIST) {
            if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TNUMBER)
                return predict_error(L, "lab.predict: given must map names to numbers ({T = 1000})");
            values[t.ngiven] = lua_tonumber(L, -1);
            names[t.ngiven++] = (char *)lua_tostring(L, -2);
            lua_pop(L, 1);
        }
    }
    t.given_names = names;
    t.given_values = values;
    entry e = {.fn = do_expect, .ask = &t, .vm = vm};
    do_expect(L, &e);
    (void)eidx;
    double want = e.d1;
    if (e.result <= 0)
        return predict_error(L, "lab.predict: its expect '%s' reads no engine figure, so it proves nothing", t.expect);
    char wtxt[128], gtxt[128], ptxt[128], msg[256];
    if (nchoices) {
        if (want != got)
            return predict_error(L, "lab.predict: the run's outcome (choice %g) disagrees with the engine: %s = %g", got,
                              t.expect, want);
    } else {
        lsn_answer_format(got, t.unit, gtxt, sizeof gtxt);
        lsn_numq around = {want, t.unit, t.rel, t.abs, 0, NULL};
        double back;
        if (lsn_answer_check_number(&around, gtxt, &back, msg, sizeof msg) != LSN_CHECK_CORRECT) {
            lsn_answer_format(want, t.unit, wtxt, sizeof wtxt);
            return predict_error(L, "lab.predict: the run's outcome %s disagrees with the engine: %s = %s", gtxt,
                              t.expect, wtxt);
        }
    }
    if (vm->env.log && *vm->env.log)
        fprintf(*vm->env.log, "    outcome: engine %s = %.10g (the run gave %.10g)\n", t.expect, want, got);
    /* the page: prediction, outcome, gap, why (a follower's page names the presenter) */
    char line[1024];
    const char *who = vm->env.voice && vm->env.voice[0] ? vm->env.voice : "You";
    if (nchoices) {
        lua_getfield(L, 1, "choices");
        lua_rawgeti(L, -1, (lua_Integer)pred);
        lua_rawgeti(L, -2, (lua_Integer)got);
        const char *pc = lua_tostring(L, -2), *gc = lua_tostring(L, -1);
        if (pred == got)
            snprintf(line, sizeof line, "%s predicted %c) %s, and so it went.", who, 'a' + (int)pred - 1, pc ? pc : "?");
        else
            snprintf(line, sizeof line, "%s predicted %c) %s; the engine did %c) %s.", who, 'a' + (int)pred - 1,
                     pc ? pc : "?", 'a' + (int)got - 1, gc ? gc : "?");
        lua_pop(L, 3);
    } else {
        lsn_answer_format(pred, t.unit, ptxt, sizeof ptxt);
        lsn_answer_format(got, t.unit, gtxt, sizeof gtxt);
        double gap = got - pred;
        lsn_numq around = {got, t.unit, t.rel, t.abs, 0, NULL};
        double back;
        if (lsn_answer_check_number(&around, ptxt, &back, msg, sizeof msg) == LSN_CHECK_CORRECT) {
            snprintf(line, sizeof line, "%s predicted %s; the engine: %s. Right on.", who, ptxt, gtxt);
        } else {
            char gaptxt[128];
            /* The gap between two percentages is in percentage points; a
             * share of a share ("13% of the outcome") would only blur it. */
            const lsn_unit *gu = lsn_unit_find(t.unit ? t.unit : "");
            int points = gu && !strcmp(gu->name, "%");
            lsn_answer_format(fabs(gap), points ? "" : t.unit, gaptxt, sizeof gaptxt);
            if (points)
                snprintf(line, sizeof line, "%s predicted %s; the engine: %s. %s by %s percentage point%s.", who, ptxt,
                         gtxt, gap > 0 ? "Low" : "High", gaptxt, fabs(gap) == 1 ? "" : "s");
            else if (got != 0)
                snprintf(line, sizeof line, "%s predicted %s; the engine: %s. %s by %s (%.0f%% of the outcome).",
                         who, ptxt, gtxt, gap > 0 ? "Low" : "High", gaptxt, 100.0 * fabs(gap) / fabs(got));
            else
                snprintf(line, sizeof line, "%s predicted %s; the engine: %s. %s by %s.", who, ptxt, gtxt,
                         gap > 0 ? "Low" : "High", gaptxt);
        }
    }
    if (lsn_stage_say(vm->env.stage, line, strlen(line)) < 0)
        return predict_error(L, "lab.predict: the page is full (start a new one with lab.page)");
    if (lua_isstring(L, 4)) {
        size_t n;
        const char *why = lua_tolstring(L, 4, &n);
        if (n && lsn_stage_say(vm->env.stage, why, n) < 0)
            return predict_error(L, "lab.predict: the page is full (start a new one with lab.page)");
    }
    *vm->env.changes |= LSN_CH_TEXT;
    lua_pushvalue(L, 2);
    lua_pushvalue(L, 3);
    return 2;
}

/* lab.predict in Lua over the two halves: the prediction waits like a
 * question, then the lesson's run plays (it may step and wait), then the
 * outcome is said and checked. */
static const char predict_chunk[] =
    "local lab, ask, outcome = ...\n"
    "lab.predict = function(p)\n"
    "  if type(p) ~= 'table' then error('lab.predict needs a table {prompt = ..., run = function() ... end, "
    "expect = ...}', 2) end\n"
    "  if type(p.run) ~= 'function' then error('lab.predict: needs run = function(prediction) ... return the "
    "outcome end', 2) end\n"
    "  if type(p.expect) ~= 'string' then error('lab.predict: needs expect = \"<formula over engine figures>\"', 2) "
    "end\n"
    "  local pred = ask(p)\n"
    "  local got = p.run(pred)\n"
    "  local why = p.why\n"
    "  if type(why) == 'function' then why = why(pred, got) end\n"
    "  if why ~= nil and type(why) ~= 'string' then error('lab.predict: why must be text, or a function giving "
    "text', 2) end\n"
    "  return outcome(p, pred, got, why)\n"
    "end\n";

/* The flag changes listed in the table at the top of the stack, as
 * {"flag-name", value} pairs (a goal's script, or one wrong lever). */
static void flag_changes(lua_State *L, const char *what, char ***names, char ***values, int *count)
{
    lua_Integer n = luaL_len(L, -1);
    if (n < 0 || n > LSN_ASK_MAX_LIST)
        luaL_error(L, "lab.goal: %s may list at most %d changes", what, LSN_ASK_MAX_LIST);
    *names = calloc((size_t)n + 1, sizeof **names);
    *values = calloc((size_t)n + 1, sizeof **values);
    if (!*names || !*values)
        luaL_error(L, "out of memory");
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, -1, i);
        if (!lua_istable(L, -1))
            luaL_error(L, "lab.goal: %s[%d] must be {\"flag-name\", value}", what, (int)i);
        lua_rawgeti(L, -1, 1);
        lua_rawgeti(L, -2, 2);
        char val[512];
        if (lua_type(L, -2) != LUA_TSTRING || !flag_text(L, -1, val, sizeof val))
            luaL_error(L, "lab.goal: %s[%d] must be {\"flag-name\", value}", what, (int)i);
        (*names)[*count] = strdup(lua_tostring(L, -2));
        (*values)[*count] = strdup(val);
        if (!(*names)[*count] || !(*values)[*count])
            luaL_error(L, "out of memory");
        (*count)++;
        lua_pop(L, 3);
    }
}

static int f_goal(lua_State *L)
{
    lsn_vm *vm = V(L);
    need_coroutine(L, vm, "lab.goal");
    luaL_checktype(L, 1, LUA_TTABLE);
    lsn_goal_spec *g = vm->env.goal;
    lsn_goal_spec_clear(g);
    drop_ref(L, vm, LSN_FN_GOAL);
    g->text = opt_dup(L, 1, "text");
    if (!g->text)
        return luaL_error(L, "lab.goal: needs text = \"what the learner must make happen\"");
    lua_getfield(L, 1, "check");
    if (!lua_isfunction(L, -1))
        return luaL_error(L, "lab.goal: needs check = function() return <true when reached> end");
    keep_fn(L, vm, LSN_FN_GOAL, -1);
    lua_pop(L, 1);
    str_list(L, 1, "hints", &g->hints, &g->nhints, 0);
    lua_getfield(L, 1, "script");
    if (lua_istable(L, -1))
        flag_changes(L, "script", &g->script_names, &g->script_values, &g->nscript);
    lua_pop(L, 1);
    lua_getfield(L, 1, "wrong");
    if (lua_istable(L, -1)) {
        lua_Integer n = luaL_len(L, -1);
        if (n < 0 || n > LSN_ASK_MAX_LIST)
            return luaL_error(L, "lab.goal: wrong may list at most %d levers", LSN_ASK_MAX_LIST);
        g->wrong = calloc((size_t)n + 1, sizeof *g->wrong);
        if (!g->wrong)
            return luaL_error(L, "out of memory");
        for (lua_Integer i = 1; i <= n; i++) {
            lua_rawgeti(L, -1, i);
            lsn_goal_wrong *w = &g->wrong[g->nwrong++];
            if (!lua_istable(L, -1) || (flag_changes(L, "wrong", &w->names, &w->values, &w->n), w->n == 0))
                return luaL_error(L, "lab.goal: wrong[%d] must be { {\"flag-name\", value}, ..., says = \"...\" }",
                                  (int)i);
            w->says = opt_dup(L, -1, "says");
            if (!w->says || !w->says[0])
                return luaL_error(L, "lab.goal: wrong[%d] needs says = \"what the page says about that lever\"",
                                  (int)i);
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
    /* levers it counts besides vllm serve flags and the card: canonical
     * flag names or class names (lsn_lever.h) */
    str_list(L, 1, "levers", &g->levers, &g->nlevers, 0);
    for (int i = 0; i < g->nlevers; i++) {
        const char *canon = NULL;
        if (lsn_lever_is_class(g->levers[i]))
            continue;
        if (!lsn_server_flag_info(g->levers[i], &canon, NULL, NULL))
            return luaL_error(L, "lab.goal: levers[%d] '%s' is neither a flag nor a lever class (traffic, what-if, "
                                 "model-override, debug)", i + 1, g->levers[i]);
        char *c = strdup(canon);
        if (!c)
            return luaL_error(L, "out of memory");
        free(g->levers[i]);
        g->levers[i] = c;
    }
    lua_getfield(L, 1, "steps");
    g->steps = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 0;
    lua_pop(L, 1);
    if (g->steps < 0 || g->steps > LSN_MAX_WAIT_STEPS)
        return luaL_error(L, "lab.goal: steps must be from 0 to %d", LSN_MAX_WAIT_STEPS);
    g->active = 1;
    vm->req.wait = W_GOAL;
    *vm->env.changes |= LSN_CH_GOAL | LSN_CH_STATE;
    return lua_yield(L, 0);
}

static int f_on_flag(lua_State *L)
{
    keep_fn(L, V(L), LSN_FN_ON_FLAG, 1);
    return 0;
}

static int f_on_step(lua_State *L)
{
    keep_fn(L, V(L), LSN_FN_ON_STEP, 1);
    return 0;
}

static void push_score(lua_State *L, const lsn_score *s)
{
    lua_createtable(L, 0, 4);
    setint(L, "changes", s->changes);
    setint(L, "rank", s->rank);
    setstr(L, "lever", s->lever);
    setstr(L, "cost", s->cost);
}

/* lab.score{challenge = "challenge 1", changes = n, rank = r, lever = "gpu",
 * cost = "a smaller card"}: keep the best way the learner solved one of the
 * lesson's challenges in the progress file (fewer changes, then a lower
 * rank). Returns {best = {...}, before = {...} or nil, new_best = bool}. */
static int f_score(lua_State *L)
{
    lsn_vm *vm = V(L);
    luaL_checktype(L, 1, LUA_TTABLE);
    lsn_score s;
    memset(&s, 0, sizeof s);
    const char *key = opt_str(L, 1, "challenge");
    if (!key || !key[0] || strlen(key) >= sizeof s.key)
        return luaL_error(L, "lab.score: needs challenge = \"<name>\" (at most %d bytes)", (int)sizeof s.key - 1);
    snprintf(s.key, sizeof s.key, "%s", key);
    lua_getfield(L, 1, "changes");
    lua_getfield(L, 1, "rank");
    if (!lua_isinteger(L, -2) || lua_tointeger(L, -2) < 0 || lua_tointeger(L, -2) > LSN_MAX_STEPS ||
        (!lua_isnil(L, -1) && (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 0 || lua_tointeger(L, -1) > 100)))
        return luaL_error(L, "lab.score: changes must be a whole number >= 0, rank a whole number 0..100");
    s.changes = (int)lua_tointeger(L, -2);
    s.rank = lua_isnil(L, -1) ? 0 : (int)lua_tointeger(L, -1);
    lua_pop(L, 2);
    const char *lever = opt_str(L, 1, "lever"), *cost = opt_str(L, 1, "cost");
    snprintf(s.lever, sizeof s.lever, "%s", lever ? lever : "");
    snprintf(s.cost, sizeof s.cost, "%s", cost ? cost : "");
    lsn_score before;
    int rc = vm->env.score ? vm->env.score(vm->env.host, &s, &before) : -1;
    if (rc < 0)
        return luaL_error(L, "lab.score: at most %d challenges are scored per lesson", LSN_MAX_SCORES);
    lua_createtable(L, 0, 3);
    push_score(L, rc > 0 || !before.key[0] ? &s : &before);
    lua_setfield(L, -2, "best");
    if (before.key[0]) {
        push_score(L, &before);
        lua_setfield(L, -2, "before");
    }
    lua_pushboolean(L, rc > 0);
    lua_setfield(L, -2, "new_best");
    return 1;
}

/* lab.best("challenge 1"): the best kept for that challenge
 * ({changes, rank, lever, cost}), or nil. */
static int f_best(lua_State *L)
{
    lsn_vm *vm = V(L);
    lsn_score s, before;
    memset(&s, 0, sizeof s);
    snprintf(s.key, sizeof s.key, "%s", luaL_checkstring(L, 1));
    s.changes = -1;
    if (!vm->env.score || vm->env.score(vm->env.host, &s, &before) < 0 || !before.key[0]) {
        lua_pushnil(L);
        return 1;
    }
    push_score(L, &before);
    return 1;
}

/* ---- the table ------------------------------------------------------------ */

static const luaL_Reg lab_funcs[] = {
    {"page", f_page},         {"say", f_say},           {"pause", f_pause},
    {"start", f_start},       {"restart", f_restart},   {"stop", f_stop},
    {"flag", f_flag},         {"flag_in_release", f_flag_in_release}, {"running", f_running},
    {"plan", f_plan},         {"what_if", f_what_if},
    {"model", f_model},       {"config", f_config},     {"gpu", f_gpu},           {"log", f_log},
    {"step_time", f_step_time},
    {"metrics", f_metrics},   {"split", f_split},       {"blocks", f_blocks},     {"block", f_block},
    {"requests", f_requests}, {"request", f_request},   {"ranks", f_ranks},
    {"events", f_events},     {"last_event", f_last_event}, {"timeline", f_timeline}, {"figure", f_figure},
    {"catalog", f_catalog},   {"submit", f_submit},     {"traffic", f_traffic},
    {"step", f_step},         {"run_until", f_run_until}, {"wait_until", f_wait_until},
    {"autorun", f_autorun},   {"speed", f_speed},       {"random", f_random},
    {"show", f_show},         {"hide", f_hide},         {"focus", f_focus},
    {"highlight", f_highlight}, {"unhighlight", f_unhighlight}, {"plot", f_plot},
    {"plot_add", f_plot_add}, {"ask", f_ask},           {"goal", f_goal},
    {"on_flag", f_on_flag},   {"on_step", f_on_step},   {"score", f_score},       {"best", f_best},
    {NULL, NULL},
};

/* What a lab call costs in instruction-equivalents, charged before it runs
 * (the default is LAB_COST): starting a server creates an engine, a plan
 * computes one, the catalogue lists folders. Calls whose work grows with
 * the engine's state charge the rest themselves. */
#define LAB_COST 100
static const struct { const char *name; double cost; } lab_costs[] = {
    {"start", 1e6},   {"restart", 1e6}, {"what_if", 2e5}, {"plan", 5e3},  {"model", 2e4},
    {"config", 5e4},  {"catalog", 1e5}, {"figure", 3e4},  {"traffic", 2e4}, {"log", 2e3},
    {"submit", 500},
};

/* Every lab function runs through here: charged, and stopped once a limit
 * tripped. (Upvalue 1: the function, 2: its cost.) The function runs in
 * this same call, not a nested one, so its errors still name the lesson's
 * line and its yields are the lesson's. The wall time a call takes is not
 * the lesson's: a server start on a real GPU may take long, and its work
 * is charged by its cost. */
static int lab_entry(lua_State *L)
{
    lsn_vm *vm = V(L);
    spend(vm, L, lua_tonumber(L, lua_upvalueindex(2)));
    double t0 = now_s();
    int armed = g_live_vm == vm;
    if (armed) /* the call's own time is not the lesson's: no signals meanwhile */
        wd_arm(NULL);
    int n = lua_tocfunction(L, lua_upvalueindex(1))(L);
    vm->deadline += now_s() - t0; /* (a call that yields or raises never comes back here: protect re-arms) */
    if (armed)
        wd_arm(vm);
    return n;
}

static void lab_push(lua_State *L, lsn_vm *vm)
{
    lua_createtable(L, 0, (int)(sizeof lab_funcs / sizeof lab_funcs[0]) + 2);
    for (const luaL_Reg *f = lab_funcs; f->name; f++) {
        double cost = LAB_COST;
        for (size_t i = 0; i < sizeof lab_costs / sizeof lab_costs[0]; i++)
            if (!strcmp(lab_costs[i].name, f->name))
                cost = lab_costs[i].cost;
        lua_pushcfunction(L, f->func);
        lua_pushnumber(L, cost);
        lua_pushcclosure(L, lab_entry, 2);
        lua_setfield(L, -2, f->name);
    }
    /* lab.predict: a Lua wrapper over two entries (charged as any lab call) */
    if (luaL_loadbufferx(L, predict_chunk, sizeof predict_chunk - 1, "=lab.predict", "t") == LUA_OK) {
        lua_pushvalue(L, -2);
        lua_pushcfunction(L, f_predict_ask);
        lua_pushnumber(L, LAB_COST);
        lua_pushcclosure(L, lab_entry, 2);
        lua_pushcfunction(L, f_predict_outcome);
        lua_pushnumber(L, LAB_COST);
        lua_pushcclosure(L, lab_entry, 2);
        lua_call(L, 3, 0);
    } else {
        lua_pop(L, 1);
    }
    lua_pushboolean(L, vm->env.headless);
    lua_setfield(L, -2, "headless");
    push_release(L, vm); /* lab.release: the learner's release (lessons/API.md) */
    lua_setfield(L, -2, "release");
    lua_createtable(L, 0, 3);
    setint(L, "id", vm->env.number);
    setstr(L, "title", vm->env.title);
    setstr(L, "file", vm->env.shown_path);
    lua_setfield(L, -2, "lesson");
}

/* ==== kvlab check: a question's expect formula ======================================== */

static int expect_plan_with(lua_State *L)
{
    V(L)->expect_reads++;
    return f_what_if(L);
}

static int expect_step_time(lua_State *L)
{
    V(L)->expect_reads++;
    return f_step_time(L);
}

/* _ENV.__index of the formula: premises are plain fields; the engine's
 * figures come from here, fresh: the plan recomputed for the server's
 * flags (lab.plan()'s keys), model, gpu, metrics, blocks, plan_with{...}. */
static int expect_index(lua_State *L)
{
    lsn_vm *vm = V(L);
    const char *k = luaL_checkstring(L, 2);
    static const struct { const char *name; lua_CFunction f; } tables[] = {
        {"model", f_model}, {"gpu", f_gpu}, {"metrics", f_metrics}, {"blocks", f_blocks}, {"requests", f_requests},
    };
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        if (!strcmp(k, tables[i].name)) {
            lua_pushcfunction(L, tables[i].f);
            lua_call(L, 0, 1);
            if (lua_isnil(L, -1))
                return luaL_error(L, "expect: there is no %s now (no server is running)", k);
            V(L)->expect_reads++;
            return 1;
        }
    }
    if (!strcmp(k, "plan_with")) {
        lua_pushcfunction(L, expect_plan_with);
        return 1;
    }
    if (!strcmp(k, "step_time")) {
        lua_pushcfunction(L, expect_step_time);
        return 1;
    }
    /* the plan, recomputed from the flags (not the one lab.plan() handed out) */
    lua_getfield(L, lua_upvalueindex(1), "plan");
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        kv_plan *p = lua_newuserdatauv(L, sizeof *p, 0); /* freed by the collector, whatever raises */
        char err[512];
        int rc = lsn_server_plan_with(vm->env.server, 0, NULL, NULL, p, err, sizeof err);
        if (rc < 0)
            return luaL_error(L, "expect: no plan for the lesson's flags: %s", err);
        push_plan(L, p);
        lua_remove(L, -2);
        lua_pushvalue(L, -1);
        lua_setfield(L, lua_upvalueindex(1), "plan");
    }
    if (!strcmp(k, "plan")) {
        V(L)->expect_reads++;
        return 1;
    }
    lua_getfield(L, -1, k);
    if (lua_isnil(L, -1))
        return luaL_error(L, "expect: '%s' is neither a figure of the plan (lab.plan()'s keys), model, gpu, "
                             "metrics, blocks, requests, plan_with{...}, step_time{...}, a math function, nor one "
                             "of the question's given", k);
    V(L)->expect_reads++;
    return 1;
}

static int do_expect(lua_State *L, entry *e)
{
    const lsn_ask *q = e->ask;
    lua_newtable(L); /* _ENV */
    int env = lua_gettop(L);
    static const char *const math_names[] = {"floor", "ceil", "min", "max", "abs", "sqrt", "log", "exp"};
    lua_getglobal(L, "math");
    for (size_t i = 0; i < sizeof math_names / sizeof math_names[0]; i++) {
        lua_getfield(L, -1, math_names[i]);
        lua_setfield(L, env, math_names[i]);
    }
    lua_setfield(L, env, "math");
    static const char *const base_names[] = {"ipairs", "pairs", "table", "type", "tostring", "tonumber", "error"};
    for (size_t i = 0; i < sizeof base_names / sizeof base_names[0]; i++) {
        lua_getglobal(L, base_names[i]);
        lua_setfield(L, env, base_names[i]);
    }
    static const struct { const char *name; double v; } units[] = {
        {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
        {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        lua_pushnumber(L, units[i].v);
        lua_setfield(L, env, units[i].name);
    }
    for (int i = 0; i < q->ngiven; i++) {
        lua_pushnumber(L, q->given_values[i]);
        lua_setfield(L, env, q->given_names[i]);
    }
    lua_createtable(L, 0, 1); /* its metatable */
    lua_newtable(L);          /* the figure cache, upvalue of __index */
    lua_pushcclosure(L, expect_index, 1);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, env);
    /* an expression, or a chunk that ends in return (for a figure that takes a few lines) */
    int chunk = 0;
    for (const char *w = strstr(q->expect, "return"); w && !chunk; w = strstr(w + 1, "return"))
        chunk = (w == q->expect || !(isalnum((unsigned char)w[-1]) || w[-1] == '_')) &&
                !(isalnum((unsigned char)w[6]) || w[6] == '_');
    lua_pushfstring(L, chunk ? "%s" : "return %s", q->expect);
    size_t len;
    const char *code = lua_tolstring(L, -1, &len);
    if (luaL_loadbufferx(L, code, len, "=expect", "t") != LUA_OK)
        return lua_error(L);
    lua_pushvalue(L, env);
    lua_setupvalue(L, -2, 1);
    e->vm->expect_reads = 0;
    lua_call(L, 0, 1);
    int isnum = 0;
    e->d1 = lua_tonumberx(L, -1, &isnum);
    if (!isnum || !isfinite(e->d1))
        return luaL_error(L, "expect: the formula gives %s, not a finite number", luaL_typename(L, -1));
    e->result = e->vm->expect_reads;
    return 0;
}

int lsn_vm_expect(lsn_vm *vm, const lsn_ask *q, double *value, int *figures)
{
    entry e = {.fn = do_expect, .ask = q};
    if (!vm || !q->expect)
        return -1;
    if (protect(vm, &e) < 0)
        return -1;
    *value = e.d1;
    *figures = e.result;
    return 0;
}
