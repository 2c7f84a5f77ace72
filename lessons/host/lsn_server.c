#include "lsn_server.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv_args.h"

#define MAX_SET 64

typedef struct set_flag {
    char name[64];
    char value[512];
} set_flag;

struct lsn_server {
    char assets[PATH_MAX];
    kv_device *dev;
    int headless;
    kv_gpu_catalog cat;
    kv_args args;
    set_flag set[MAX_SET];   /* flags given, in order, so "" can restore a default */
    int nset;
    int no_cache, contiguous;
    int kv_heads;            /* kv-heads: hypothetical KV heads (0 = the model's own) */
    double request_rate;     /* request-rate: for the lesson's traffic (0 = the lesson's default) */
    kv_model model;
    int have_model;
    kv_gpu gpu;
    int have_gpu;
    kv_plan plan;
    int have_plan;
    kv_engine *engine;
    int starts;
    char command[2048];      /* lsn_server_command */
};

/* kvlab's own switches, on top of kv_args' flags. */
static const struct { const char *name, *help, *choices; } own_flags[] = {
    {"kv-cache", "off: keep no KV cache, so every new token recomputes the whole sequence", "on|off"},
    {"contiguous", "on: reserve a max-model-len slab per request instead of blocks on demand", "on|off"},
    {"kv-heads", "what if the model had this many KV heads (num_key_value_heads)? Weights stay as they are", NULL},
    {"request-rate", "requests per second the lesson's traffic sends (as vllm bench serve --request-rate)", NULL},
    /* Request lengths for the playground's traffic: the lesson reads them. */
    {"traffic-prompt", "prompt tokens per generated request", NULL},
    {"traffic-output", "output tokens per generated request", NULL},
};

static const char *traffic_default(const char *name)
{
    return !strcmp(name, "traffic-prompt") ? "512" : "128";
}

static void canon(const char *name, char *out, size_t outl)
{
    while (*name == '-')
        name++;
    size_t i = 0;
    for (; name[i] && i + 1 < outl; i++)
        out[i] = name[i] == '_' ? '-' : name[i];
    out[i] = '\0';
}

static int parse_onoff(const char *v, int *out)
{
    if (!v || !v[0])
        return -1;
    if (!strcasecmp(v, "on") || !strcasecmp(v, "true") || !strcmp(v, "1") || !strcasecmp(v, "yes")) {
        *out = 1;
        return 0;
    }
    if (!strcasecmp(v, "off") || !strcasecmp(v, "false") || !strcmp(v, "0") || !strcasecmp(v, "no")) {
        *out = 0;
        return 0;
    }
    return -1;
}

lsn_server *lsn_server_new(const char *assets_dir, kv_device *dev, int headless, char *err, size_t errlen)
{
    lsn_server *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    snprintf(s->assets, sizeof s->assets, "%s", assets_dir);
    s->dev = dev;
    s->headless = headless;
    if (kv_gpu_catalog_load(assets_dir, &s->cat, err, errlen) != KV_GPU_OK) {
        free(s);
        return NULL;
    }
    lsn_server_reset_args(s);
    return s;
}

void lsn_server_free(lsn_server *s)
{
    if (!s)
        return;
    lsn_server_stop(s);
    kv_gpu_catalog_free(&s->cat);
    free(s);
}

void lsn_server_reset_args(lsn_server *s)
{
    kv_args_init(&s->args);
    s->nset = 0;
    s->no_cache = 0;
    s->contiguous = 0;
    s->kv_heads = 0;
    s->request_rate = 0;
}

/* Apply one flag to a, or to the kvlab switches. */
/* kvlab's numeric switches: kv-heads (a whole number >= 1) and request-rate (> 0). */
static int apply_own_number(const char *name, const char *value, int *kv_heads, double *rate, char *err,
                            size_t errlen)
{
    char *end = NULL;
    double v = value ? strtod(value, &end) : 0;
    if (!value || end == value || *end || !(v > 0) || v > 1e6) {
        snprintf(err, errlen, "--%s takes a positive number, not '%s'", name, value ? value : "");
        return -1;
    }
    if (!strcmp(name, "kv-heads")) {
        if (v != (double)(int)v) {
            snprintf(err, errlen, "--kv-heads takes a whole number of heads, not '%s'", value);
            return -1;
        }
        *kv_heads = (int)v;
    } else {
        *rate = v;
    }
    return 0;
}

static int apply(lsn_server *s, kv_args *a, int *no_cache, int *contiguous, const char *name, const char *value,
                 char *err, size_t errlen)
{
    if (!strcmp(name, "kv-heads") || !strcmp(name, "request-rate"))
        return apply_own_number(name, value, &s->kv_heads, &s->request_rate, err, errlen);
    if (!strcmp(name, "kv-cache") || !strcmp(name, "contiguous")) {
        int on;
        if (parse_onoff(value, &on) < 0) {
            snprintf(err, errlen, "--%s takes on or off, not '%s'", name, value ? value : "");
            return -1;
        }
        if (!strcmp(name, "kv-cache"))
            *no_cache = !on;
        else
            *contiguous = on;
        return 0;
    }
    if (!strncmp(name, "traffic-", 8)) {
        char *end;
        double v = value ? strtod(value, &end) : -1;
        if (!value || end == value || *end || !(v >= 1) || v > 1e7) {
            snprintf(err, errlen, "--%s takes a number of tokens >= 1, not '%s'", name, value ? value : "");
            return -1;
        }
        return 0;
    }
    (void)s;
    const char *v = value;
    if (v && (!strcasecmp(v, "on") || !strcasecmp(v, "yes")))
        v = "true";
    else if (v && (!strcasecmp(v, "off") || !strcasecmp(v, "no")))
        v = "false";
    int rc = kv_args_set(a, name, v, err, errlen);
    if (rc < 0)
        return -1;
    if (rc == KV_ARGS_IGNORED && err && errlen)
        err[0] = '\0';
    return 0;
}

static int rebuild(lsn_server *s, char *err, size_t errlen)
{
    kv_args a;
    kv_args_init(&a);
    int nc = 0, ct = 0;
    s->kv_heads = 0;
    s->request_rate = 0;
    for (int i = 0; i < s->nset; i++)
        if (apply(s, &a, &nc, &ct, s->set[i].name, s->set[i].value, err, errlen) < 0)
            return -1;
    s->args = a;
    s->no_cache = nc;
    s->contiguous = ct;
    return 0;
}

/* Whether flag n (canonical) may take value: applied to a scratch copy, so
 * a bad value changes nothing, then the whole line checked against the
 * release the server follows, as `vllm serve` would refuse it ("--max-model-len
 * 32k" before 0.8.4, a flag it lacks, a --no- form). */
static int validate(lsn_server *s, const char *n, const char *value, char *err, size_t errlen)
{
    kv_args scratch = s->args;
    int nc = s->no_cache, ct = s->contiguous, kh = s->kv_heads;
    double rr = s->request_rate;
    int bad = apply(s, &scratch, &nc, &ct, n, value, err, errlen) < 0;
    if (!bad && kv_args_check_release(&scratch, err, errlen) != 0)
        bad = 1;
    s->kv_heads = kh;
    s->request_rate = rr;
    return bad ? -1 : 0;
}

int lsn_server_accepts(lsn_server *s, const char *name, const char *value, char *err, size_t errlen)
{
    char n[64];
    canon(name ? name : "", n, sizeof n);
    if (!n[0] || !lsn_server_flag_info(n, NULL, NULL, NULL)) {
        snprintf(err, errlen, "unknown flag --%s", n);
        return -1;
    }
    return value && value[0] ? validate(s, n, value, err, errlen) : 0;
}

int lsn_server_set(lsn_server *s, const char *name, const char *value, char *err, size_t errlen)
{
    char n[64];
    canon(name ? name : "", n, sizeof n);
    if (!n[0]) {
        snprintf(err, errlen, "empty flag name");
        return -1;
    }
    if (!lsn_server_flag_info(n, NULL, NULL, NULL)) {
        snprintf(err, errlen, "unknown flag --%s", n);
        return -1;
    }
    if (value && strlen(value) >= sizeof s->set[0].value) {
        snprintf(err, errlen, "value of --%s is too long", n);
        return -1;
    }
    if (value && value[0] && validate(s, n, value, err, errlen) < 0)
        return -1;
    int k = -1;
    for (int i = 0; i < s->nset; i++)
        if (!strcmp(s->set[i].name, n))
            k = i;
    if (!value || !value[0]) {
        if (k >= 0) {
            memmove(&s->set[k], &s->set[k + 1], (size_t)(s->nset - k - 1) * sizeof s->set[0]);
            s->nset--;
        }
    } else {
        if (k < 0) {
            if (s->nset == MAX_SET) {
                snprintf(err, errlen, "too many flags");
                return -1;
            }
            k = s->nset++;
            snprintf(s->set[k].name, sizeof s->set[k].name, "%s", n);
        }
        snprintf(s->set[k].value, sizeof s->set[k].value, "%s", value);
    }
    return rebuild(s, err, errlen);
}

int lsn_server_get(const lsn_server *s, const char *name, char *buf, size_t buflen)
{
    char n[64];
    canon(name ? name : "", n, sizeof n);
    if (!strcmp(n, "kv-cache")) {
        snprintf(buf, buflen, "%s", s->no_cache ? "off" : "on");
        return 0;
    }
    if (!strcmp(n, "contiguous")) {
        snprintf(buf, buflen, "%s", s->contiguous ? "on" : "off");
        return 0;
    }
    if (!strcmp(n, "kv-heads")) {
        if (s->kv_heads > 0)
            snprintf(buf, buflen, "%d", s->kv_heads);
        else if (buflen)
            buf[0] = '\0';
        return 0;
    }
    if (!strcmp(n, "request-rate")) {
        if (s->request_rate > 0)
            snprintf(buf, buflen, "%g", s->request_rate);
        else if (buflen)
            buf[0] = '\0';
        return 0;
    }
    if (!strncmp(n, "traffic-", 8) && lsn_server_flag_info(n, NULL, NULL, NULL)) {
        snprintf(buf, buflen, "%s", traffic_default(n));
        for (int i = 0; i < s->nset; i++)
            if (!strcmp(s->set[i].name, n))
                snprintf(buf, buflen, "%s", s->set[i].value);
        return 0;
    }
    if (kv_args_get(&s->args, n, buf, buflen) < 0) {
        if (buflen)
            buf[0] = '\0';
        return -1;
    }
    return 0;
}

int lsn_server_flag_info(const char *name, const char **canonical, const char **help, const char **choices)
{
    char n[64];
    canon(name ? name : "", n, sizeof n);
    for (size_t i = 0; i < sizeof own_flags / sizeof own_flags[0]; i++) {
        if (!strcmp(n, own_flags[i].name)) {
            if (canonical)
                *canonical = own_flags[i].name;
            if (help)
                *help = own_flags[i].help;
            if (choices)
                *choices = own_flags[i].choices;
            return 1;
        }
    }
    const kv_args_flag *f = kv_args_flag_find(n);
    if (!f)
        return 0;
    if (canonical)
        *canonical = f->name;
    if (help)
        *help = f->help;
    if (choices)
        *choices = f->kind == KV_ARG_BOOL ? "true|false" : f->choices;
    return 1;
}

void lsn_server_stop(lsn_server *s)
{
    if (s->engine) {
        kv_engine_destroy(s->engine);
        s->engine = NULL;
    }
}

/* Load the model the flags name, with the kv-heads what-if applied. */
static int load_model(const lsn_server *s, kv_model *m, char *err, size_t errlen)
{
    if (kv_model_load(s->args.model, s->assets, m, err, errlen) != KV_MODEL_OK)
        return -1;
    if (s->kv_heads > 0) {
        /* A hypothetical variant (lessons 5 and 6): the same weights, with the
         * cache of a model that had kv_heads K/V heads. GQA groups must divide
         * the query heads evenly, as in any real checkpoint. */
        if (m->is_mla) {
            snprintf(err, errlen, "--kv-heads: %s uses multi-head latent attention, which caches one latent, "
                     "not K/V heads", m->id);
            return -1;
        }
        if (s->kv_heads > m->num_attention_heads || m->num_attention_heads % s->kv_heads) {
            snprintf(err, errlen, "--kv-heads %d: must divide the model's %d attention heads evenly", s->kv_heads,
                     m->num_attention_heads);
            return -1;
        }
        m->num_key_value_heads = s->kv_heads;
    }
    return 0;
}

int lsn_server_start(lsn_server *s, char *err, size_t errlen)
{
    lsn_server_stop(s);
    s->starts++;
    s->have_plan = 0;
    if (!s->args.model[0]) {
        snprintf(err, errlen, "no model given: set model to a catalogue id or a config.json path");
        return -1;
    }
    if (load_model(s, &s->model, err, errlen) < 0) {
        s->have_model = 0;
        return -1;
    }
    s->have_model = 1;
    const kv_gpu *g = NULL;
    s->have_gpu = 0;
    if (s->args.gpu[0]) {
        g = kv_gpu_find(&s->cat, s->args.gpu, err, errlen);
        if (!g)
            return -1;
        s->gpu = *g;
        s->have_gpu = 1;
        g = &s->gpu;
    } else if (s->args.gpu_memory_gib > 0) {
        kv_gpu_custom(s->args.gpu_memory_gib, &s->gpu);
        s->have_gpu = 1;
    } else {
        snprintf(err, errlen, "no GPU given: set gpu (e.g. h100-80gb) or gpu-memory-gib");
        return -1;
    }
    if (kv_plan_compute(&s->model, g, &s->args, &s->plan, err, errlen) != KV_PLAN_OK)
        return -1;
    s->have_plan = 1;
    if (!s->plan.starts) {
        snprintf(err, errlen, "%s", s->plan.error);
        return 0;
    }
    kv_engine_config c;
    char note[256] = "";
    if (kv_engine_config_from_plan(&s->plan, &s->model, g, &s->args, &c, note, sizeof note, err, errlen) < 0)
        return -1;
    c.mode = s->no_cache ? KV_MODE_NO_CACHE : s->contiguous ? KV_MODE_CONTIGUOUS : KV_MODE_PAGED;
    /* Headless checks must be quick; the app writes K/V and reads it back:
     * on a GPU every step, with a bounded sample read back each frame. */
    const int gpu = !s->headless && s->dev && strcmp(s->dev->name, "host") != 0;
    if (s->headless) {
        c.verify = 0;
        c.write_kv = 0;
    } else if (gpu) {
        c.verify = 0;
        c.write_kv = 1;
    }
    const int verify = c.verify, write_kv = c.write_kv;
    c.device = s->dev;
    s->engine = kv_engine_create(&c, err, errlen);
    char on_host[320] = "";
    if (!s->engine && c.device) {
        /* The real GPU cannot hold this setup (a real CUDA OOM, or more ranks
         * than the backend serves): keep its message, run on the host. */
        snprintf(on_host, sizeof on_host, "%.256s; this engine runs on the host backend", err && errlen ? err : "");
        c.device = NULL;
        c.verify = gpu ? -1 : verify; /* the host's own defaults */
        c.write_kv = gpu ? -1 : write_kv;
        s->engine = kv_engine_create(&c, err, errlen);
    }
    if (!s->engine)
        return -1;
    for (int i = 0; i < s->plan.num_log; i++) {
        const char *line = s->plan.log[i];
        int level = strstr(line, "ERROR") ? 2 : strstr(line, "WARNING") ? 1 : 0;
        kv_engine_log(s->engine, level, "%s", line);
    }
    if (note[0])
        kv_engine_log(s->engine, 1, "%s", note);
    if (on_host[0])
        kv_engine_log(s->engine, 1, "%s", on_host);
    else if (gpu)
        kv_engine_log(s->engine, 0,
                      "on the %s backend: every step writes K/V into the GPU's blocks; each frame reads up to %d "
                      "tokens back and checks them", s->dev->name, LSN_VERIFY_SAMPLE_TOKENS);
    if (err && errlen)
        err[0] = '\0';
    return 1;
}

int lsn_server_plan_with(lsn_server *s, int n, const char *const *names, const char *const *values, kv_plan *out,
                         char *err, size_t errlen)
{
    /* Apply the changes to a copy of the flags, plan, then put everything back. */
    set_flag saved[MAX_SET];
    int nsaved = s->nset;
    memcpy(saved, s->set, sizeof saved);
    kv_args args = s->args;
    int nc = s->no_cache, ct = s->contiguous, kh = s->kv_heads;
    double rr = s->request_rate;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        if (lsn_server_set(s, names[i], values[i], err, errlen) < 0)
            rc = -1;
    kv_model *m = NULL;
    if (rc == 0 && !s->args.model[0]) {
        snprintf(err, errlen, "no model given");
        rc = -1;
    }
    if (rc == 0 && !(m = malloc(sizeof *m))) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
    }
    if (rc == 0 && load_model(s, m, err, errlen) < 0)
        rc = -1;
    const kv_gpu *g = NULL;
    if (rc == 0 && s->args.gpu[0] && !(g = kv_gpu_find(&s->cat, s->args.gpu, err, errlen)))
        rc = -1;
    if (rc == 0 && !g && !(s->args.gpu_memory_gib > 0)) {
        snprintf(err, errlen, "no GPU given");
        rc = -1;
    }
    if (rc == 0 && kv_plan_compute(m, g, &s->args, out, err, errlen) != KV_PLAN_OK)
        rc = -1;
    free(m);
    memcpy(s->set, saved, sizeof saved);
    s->nset = nsaved;
    s->args = args;
    s->no_cache = nc;
    s->contiguous = ct;
    s->kv_heads = kh;
    s->request_rate = rr;
    return rc;
}

kv_engine *lsn_server_engine(const lsn_server *s) { return s->engine; }
const kv_plan *lsn_server_plan(const lsn_server *s) { return s->have_plan ? &s->plan : NULL; }
const kv_model *lsn_server_model(const lsn_server *s) { return s->have_model ? &s->model : NULL; }
const kv_gpu *lsn_server_gpu(const lsn_server *s) { return s->have_gpu ? &s->gpu : NULL; }
const kv_gpu_catalog *lsn_server_catalog(const lsn_server *s) { return &s->cat; }
const char *lsn_server_assets(const lsn_server *s) { return s->assets; }
int lsn_server_starts(const lsn_server *s) { return s->starts; }

const char *lsn_server_log_phase(const char *line)
{
    static const struct { const char *needle, *phase; } map[] = {
        {"Free memory on device", "init"},
        {"Model loading", "load"},
        {"Memory profiling", "profile"},
        /* 0.18+: the note on the graph estimate follows "Available KV cache
         * memory", as 0.19's "In v0.19, CUDA graph memory profiling will be ..."
         * does (v1/worker/gpu_worker.py determine_available_memory) */
        {"CUDA graph memory profiling", "kv"},
        {"profil", "profile"},
        {"weights", "load"},
        {"Graph capturing", "ready"},
        {"CUDA graph", "cudagraph"},
        {"cudagraph", "cudagraph"},
        {"Available KV cache memory", "kv"},
        {"No available memory for the cache blocks", "kv"},
        {"To serve at least one request", "check"},
        {"max seq len", "check"},
        {"auto-fit", "check"},
        {"Auto-fit", "check"},
        {"GPU KV cache size", "allocate"},
        {"Maximum concurrency", "allocate"},
        {"GPU blocks", "allocate"},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strstr(line, map[i].needle))
            return map[i].phase;
    return "init";
}

const char *lsn_server_command(lsn_server *s)
{
    if (kv_args_command(&s->args, s->command, sizeof s->command) >= sizeof s->command)
        snprintf(s->command + sizeof s->command - 5, 5, " ...");
    return s->command;
}
