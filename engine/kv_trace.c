#include "kv_trace.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "kv_hash.h"
#include "kv_util.h"

#undef uthash_fatal
#define uthash_fatal(msg) abort() /* only a bucket-table growth can fail this way */

/* One interned string: the key is the string itself, stored after the
 * handle (one allocation per distinct string). */
typedef struct kv_trace_str {
    UT_hash_handle hh;
    char s[];
} kv_trace_str;

void kv_trace_free(kv_trace *t)
{
    if (!t)
        return;
    for (int64_t i = 0; i < t->count; i++)
        free(t->reqs[i].prompt_token_ids);
    kv_trace_str *it, *tmp;
    HASH_ITER(hh, t->index, it, tmp) {
        HASH_DELETE(hh, t->index, it);
        free(it);
    }
    free(t->reqs);
    free(t->strings);
    memset(t, 0, sizeof *t);
}

static const char *intern(kv_trace *t, const char *s)
{
    kv_trace_str *f = NULL;
    size_t n = strlen(s);
    HASH_FIND(hh, t->index, s, n, f);
    if (f)
        return f->s;
    if (t->num_strings == t->cap_strings) {
        int32_t nc = t->cap_strings ? t->cap_strings * 2 : 16;
        char **na = realloc(t->strings, (size_t)nc * sizeof *na);
        if (!na)
            return NULL;
        t->strings = na;
        t->cap_strings = nc;
    }
    f = malloc(sizeof *f + n + 1);
    if (!f)
        return NULL;
    memcpy(f->s, s, n + 1);
    HASH_ADD_KEYPTR(hh, t->index, f->s, n, f);
    t->strings[t->num_strings++] = f->s;
    return f->s;
}

static kv_trace_req *push(kv_trace *t)
{
    if (t->count == t->cap) {
        int64_t nc = t->cap ? t->cap * 2 : 256;
        kv_trace_req *n = realloc(t->reqs, (size_t)nc * sizeof *n);
        if (!n)
            return NULL;
        t->reqs = n;
        t->cap = nc;
    }
    kv_trace_req *r = &t->reqs[t->count++];
    memset(r, 0, sizeof *r);
    return r;
}

/* an integer-valued JSON number in [lo, hi] */
static int get_int(const cJSON *v, double lo, double hi, int32_t *out)
{
    if (!cJSON_IsNumber(v))
        return -1;
    double d = v->valuedouble;
    if (!(d >= lo && d <= hi) || d != floor(d))
        return -1;
    *out = (int32_t)d;
    return 0;
}

#define MAX_TOKENS 100000000.0
#define MAX_TOKENS_TEXT "100,000,000" /* MAX_TOKENS as the messages name it */

static int parse_line(kv_trace *t, const char *line, size_t len, int64_t lineno, char *err, size_t errlen)
{
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(line, len, &end, 0);
    if (!o)
        return kv_errf(err, errlen, -1, "line %lld: not valid JSON", (long long)lineno);
    if (end && end < line + len) { /* the line comes trimmed: anything left is a second value */
        cJSON_Delete(o);
        return kv_errf(err, errlen, -1, "line %lld: text after the JSON object (one request per line)",
                       (long long)lineno);
    }
    int rc = -1;
    kv_trace_req *r = NULL;
    if (!cJSON_IsObject(o)) {
        kv_errf(err, errlen, -1, "line %lld: expected a JSON object, one request per line", (long long)lineno);
        goto out;
    }
    if (t->count >= KV_TRACE_MAX_REQUESTS) {
        kv_errf(err, errlen, -1, "line %lld: more than the %d requests one run simulates; a sample of them "
                "shows the same rates", (long long)lineno, KV_TRACE_MAX_REQUESTS);
        goto out;
    }
    r = push(t);
    if (!r) {
        kv_errf(err, errlen, -1, "line %lld: out of memory", (long long)lineno);
        goto out;
    }
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "arrival_s");
    if (!v) {
        kv_errf(err, errlen, -1, "line %lld: field 'arrival_s': missing (seconds, required)", (long long)lineno);
        goto bad;
    }
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || !isfinite(v->valuedouble)) {
        kv_errf(err, errlen, -1, "line %lld: field 'arrival_s': must be a number >= 0", (long long)lineno);
        goto bad;
    }
    if (v->valuedouble > KV_TRACE_MAX_ARRIVAL_S) {
        kv_errf(err, errlen, -1, "line %lld: field 'arrival_s': at most %.0e s (the virtual clock's range), got %g",
                (long long)lineno, KV_TRACE_MAX_ARRIVAL_S, v->valuedouble);
        goto bad;
    }
    r->arrival_s = v->valuedouble;
    v = cJSON_GetObjectItemCaseSensitive(o, "output_tokens");
    if (!v) {
        kv_errf(err, errlen, -1, "line %lld: field 'output_tokens': missing (required)", (long long)lineno);
        goto bad;
    }
    if (get_int(v, 1, MAX_TOKENS, &r->output_tokens)) {
        kv_errf(err, errlen, -1, "line %lld: field 'output_tokens': must be a whole number from 1 to " MAX_TOKENS_TEXT,
                (long long)lineno);
        goto bad;
    }
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(o, "prompt_tokens");
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(o, "prompt_token_ids");
    if (pt && ids) {
        kv_errf(err, errlen, -1, "line %lld: field 'prompt_token_ids': give either prompt_tokens or "
                "prompt_token_ids, not both", (long long)lineno);
        goto bad;
    }
    if (!pt && !ids) {
        kv_errf(err, errlen, -1, "line %lld: field 'prompt_tokens': missing (give prompt_tokens or prompt_token_ids)",
                (long long)lineno);
        goto bad;
    }
    if (pt && get_int(pt, 0, MAX_TOKENS, &r->prompt_tokens)) {
        kv_errf(err, errlen, -1, "line %lld: field 'prompt_tokens': must be a whole number from 0 to " MAX_TOKENS_TEXT,
                (long long)lineno);
        goto bad;
    }
    if (ids) {
        if (!cJSON_IsArray(ids)) {
            kv_errf(err, errlen, -1, "line %lld: field 'prompt_token_ids': must be a list of integers",
                    (long long)lineno);
            goto bad;
        }
        int n = cJSON_GetArraySize(ids);
        r->prompt_token_ids = malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t));
        if (!r->prompt_token_ids) {
            kv_errf(err, errlen, -1, "line %lld: out of memory", (long long)lineno);
            goto bad;
        }
        int k = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, ids)
        {
            if (get_int(it, 0, 2147483647.0, &r->prompt_token_ids[k])) {
                kv_errf(err, errlen, -1, "line %lld: field 'prompt_token_ids': item %d is not an integer token id >= 0",
                        (long long)lineno, k);
                goto bad;
            }
            k++;
        }
        r->num_ids = n;
        r->prompt_tokens = n;
    }
    const cJSON *pid = cJSON_GetObjectItemCaseSensitive(o, "prefix_id");
    const cJSON *ptok = cJSON_GetObjectItemCaseSensitive(o, "prefix_tokens");
    if (pid && !cJSON_IsNull(pid)) {
        char buf[64];
        const char *s;
        if (cJSON_IsString(pid)) {
            s = pid->valuestring;
        } else if (cJSON_IsNumber(pid)) {
            snprintf(buf, sizeof buf, "%.17g", pid->valuedouble);
            s = buf;
        } else {
            kv_errf(err, errlen, -1, "line %lld: field 'prefix_id': must be a string or a number", (long long)lineno);
            goto bad;
        }
        if (!ptok) {
            kv_errf(err, errlen, -1, "line %lld: field 'prefix_tokens': missing (prefix_id needs prefix_tokens)",
                    (long long)lineno);
            goto bad;
        }
        if (get_int(ptok, 1, MAX_TOKENS, &r->prefix_tokens)) {
            kv_errf(err, errlen, -1,
                    "line %lld: field 'prefix_tokens': must be a whole number from 1 to " MAX_TOKENS_TEXT,
                    (long long)lineno);
            goto bad;
        }
        if (!(r->prefix_id = intern(t, s))) {
            kv_errf(err, errlen, -1, "line %lld: out of memory", (long long)lineno);
            goto bad;
        }
    } else if (ptok) {
        kv_errf(err, errlen, -1, "line %lld: field 'prefix_id': missing (prefix_tokens needs a prefix_id)",
                (long long)lineno);
        goto bad;
    }
    if (r->prompt_tokens + r->prefix_tokens < 1) {
        kv_errf(err, errlen, -1, "line %lld: field 'prompt_tokens': the prompt is empty (need at least 1 token)",
                (long long)lineno);
        goto bad;
    }
    v = cJSON_GetObjectItemCaseSensitive(o, "priority");
    if (v && !cJSON_IsNull(v) && get_int(v, -1e9, 1e9, &r->priority)) {
        kv_errf(err, errlen, -1, "line %lld: field 'priority': must be an integer", (long long)lineno);
        goto bad;
    }
    v = cJSON_GetObjectItemCaseSensitive(o, "cache_salt");
    if (v && !cJSON_IsNull(v)) {
        if (!cJSON_IsString(v)) {
            kv_errf(err, errlen, -1, "line %lld: field 'cache_salt': must be a string", (long long)lineno);
            goto bad;
        }
        if (v->valuestring[0] && !(r->cache_salt = intern(t, v->valuestring))) {
            kv_errf(err, errlen, -1, "line %lld: out of memory", (long long)lineno);
            goto bad;
        }
    }
    rc = 0;
    goto out;
bad:
    free(r->prompt_token_ids);
    r->prompt_token_ids = NULL;
    t->count--;
out:
    cJSON_Delete(o);
    return rc;
}

typedef struct sort_item {
    kv_trace_req r;
    int64_t i;
} sort_item;

static int cmp_item(const void *a, const void *b)
{
    const sort_item *x = a, *y = b;
    if (x->r.arrival_s != y->r.arrival_s)
        return x->r.arrival_s < y->r.arrival_s ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* stable sort by arrival (ties keep file order) */
static int sort_trace(kv_trace *t)
{
    int sorted = 1;
    for (int64_t i = 1; i < t->count && sorted; i++)
        sorted = t->reqs[i - 1].arrival_s <= t->reqs[i].arrival_s;
    if (sorted)
        return 0;
    sort_item *tmp = malloc((size_t)t->count * sizeof *tmp);
    if (!tmp)
        return -1;
    for (int64_t i = 0; i < t->count; i++) {
        tmp[i].r = t->reqs[i];
        tmp[i].i = i;
    }
    qsort(tmp, (size_t)t->count, sizeof *tmp, cmp_item);
    for (int64_t i = 0; i < t->count; i++)
        t->reqs[i] = tmp[i].r;
    free(tmp);
    return 0;
}

int kv_trace_parse(const char *text, size_t len, kv_trace *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    size_t pos = 0;
    int64_t lineno = 0;
    while (pos < len) {
        size_t end = pos;
        while (end < len && text[end] != '\n')
            end++;
        lineno++;
        size_t a = pos, b = end;
        while (a < b && (text[a] == ' ' || text[a] == '\t' || text[a] == '\r'))
            a++;
        while (b > a && (text[b - 1] == ' ' || text[b - 1] == '\t' || text[b - 1] == '\r'))
            b--;
        if (b > a && parse_line(out, text + a, b - a, lineno, err, errlen) != 0) {
            kv_trace_free(out);
            return -1;
        }
        pos = end + 1;
    }
    if (out->count == 0) {
        kv_trace_free(out);
        return kv_errf(err, errlen, -1, "the trace has no requests");
    }
    if (sort_trace(out) != 0) {
        kv_trace_free(out);
        return kv_errf(err, errlen, -1, "out of memory sorting the trace");
    }
    return 0;
}

int kv_trace_load(const char *path, kv_trace *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    char *buf;
    size_t n;
    char rerr[512];
    if (kv_read_file(path, KV_TRACE_MAX_BYTES, &buf, &n, rerr, sizeof rerr) != 0)
        return kv_errf(err, errlen, -1, "%s", rerr);
    char perr[512];
    int rc = kv_trace_parse(buf, n, out, perr, sizeof perr);
    free(buf);
    if (rc)
        return kv_errf(err, errlen, -1, "%s: %s", path, perr);
    return 0;
}

/* ---- generator --------------------------------------------------------- */

typedef struct rng {
    uint64_t s;
} rng;

static double rng_u01(rng *g)
{
    g->s += 0x9E3779B97F4A7C15ull;
    uint64_t x = kv_hash_mix(g->s, 0);
    return ((double)(x >> 11) + 0.5) / 9007199254740992.0; /* (0, 1) */
}

static double rng_normal(rng *g)
{
    double u = rng_u01(g), v = rng_u01(g);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static int32_t lognormal_len(rng *g, double median, double sigma, double cap)
{
    double x = median * exp(sigma * rng_normal(g));
    if (x < 1)
        x = 1;
    if (x > cap)
        x = cap;
    return (int32_t)llround(x);
}

/* A drawn length: log-normal by median and sigma (the default), the same
 * from a mean and a 99th percentile, or uniform in [min, max]. */
typedef struct len_dist {
    double median, sigma, cap;
    double mean, p99;            /* both > 0: log-normal fitted to them */
    double min, max;             /* both > 0: uniform */
} len_dist;

/* Turn {mean, p99} into the log-normal's median and sigma: with sigma s,
 * p99 / mean = exp(2.3263 s - s^2 / 2); the smaller root is the one with
 * the mean above the median. */
static int len_setup(len_dist *d, const char *what, char *err, size_t errlen)
{
    if ((d->mean > 0) != (d->p99 > 0))
        return kv_errf(err, errlen, -1, "gen: %s_mean and %s_p99 go together", what, what);
    if ((d->min > 0) != (d->max > 0))
        return kv_errf(err, errlen, -1, "gen: %s_min and %s_max go together", what, what);
    if (d->min > 0 && d->min > d->max)
        return kv_errf(err, errlen, -1, "gen: %s_min is above %s_max", what, what);
    if (d->mean > 0) {
        const double z = 2.3263478740408408; /* standard normal 99th percentile */
        double r = log(d->p99 / d->mean), disc = z * z - 2 * r;
        if (r < 0 || disc < 0)
            return kv_errf(err, errlen, -1,
                           "gen: %s_p99 must lie between %s_mean and %.1fx it (a log-normal cannot have that tail)",
                           what, what, exp(z * z / 2));
        d->sigma = z - sqrt(disc);
        d->median = d->mean * exp(-d->sigma * d->sigma / 2);
    }
    return 0;
}

static int32_t len_draw(rng *g, const len_dist *d)
{
    if (d->min > 0) {
        double x = d->min + floor(rng_u01(g) * (d->max - d->min + 1));
        return (int32_t)(x > d->max ? d->max : x);
    }
    return lognormal_len(g, d->median, d->sigma, d->cap);
}

int kv_trace_generate(const char *spec, kv_trace *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!strncmp(spec, "gen:", 4))
        spec += 4;
    double n = 1000, rate = 10, shared = 0, prefix = 1024, prefixes = 1, prios = 0, seed = 1;
    len_dist pd = {512, 0.8, 32768, 0, 0, 0, 0}, od = {128, 0.6, 8192, 0, 0, 0, 0};
    struct { const char *k; double *v; double lo, hi; } keys[] = {
        {"requests", &n, 1, 1e18}, {"n", &n, 1, 1e18}, {"rate", &rate, 1e-9, 1e9},
        {"prompt", &pd.median, 0, 1e8}, {"prompt_sigma", &pd.sigma, 0, 10}, {"output", &od.median, 1, 1e8},
        {"output_sigma", &od.sigma, 0, 10}, {"max_prompt", &pd.cap, 1, 1e8}, {"max_output", &od.cap, 1, 1e8},
        {"prompt_mean", &pd.mean, 1, 1e8}, {"prompt_p99", &pd.p99, 1, 1e8},
        {"output_mean", &od.mean, 1, 1e8}, {"output_p99", &od.p99, 1, 1e8},
        {"prompt_min", &pd.min, 1, 1e8}, {"prompt_max", &pd.max, 1, 1e8},
        {"output_min", &od.min, 1, 1e8}, {"output_max", &od.max, 1, 1e8},
        {"shared", &shared, 0, 1}, {"prefix", &prefix, 1, 1e8}, {"prefixes", &prefixes, 1, 1e6},
        {"priorities", &prios, 0, 1e6}, {"seed", &seed, 0, 1.8e19},
    };
    const char *p = spec;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[128];
        if (len >= sizeof item)
            return kv_errf(err, errlen, -1, "gen: item '%.*s...' too long", 20, p);
        memcpy(item, p, len);
        item[len] = '\0';
        p += len + (comma ? 1 : 0);
        if (!len)
            continue;
        char *eq = strchr(item, '=');
        if (!eq)
            return kv_errf(err, errlen, -1, "gen: '%s' is not key=value", item);
        *eq = '\0';
        const char *val = eq + 1;
        int found = 0;
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            if (strcmp(item, keys[k].k))
                continue;
            char *endp;
            double d = strtod(val, &endp);
            if (endp == val || *endp || !(d >= keys[k].lo && d <= keys[k].hi))
                return kv_errf(err, errlen, -1, "gen: key '%s': '%s' is not a number in [%g, %g]", item, val,
                               keys[k].lo, keys[k].hi);
            *keys[k].v = d;
            found = 1;
        }
        if (!found)
            return kv_errf(err, errlen, -1,
                           "gen: unknown key '%s' (keys: requests, rate, prompt, prompt_sigma, output, output_sigma, "
                           "max_prompt, max_output, prompt_mean, prompt_p99, output_mean, output_p99, prompt_min, "
                           "prompt_max, output_min, output_max, shared, prefix, prefixes, priorities, seed)", item);
    }
    if (len_setup(&pd, "prompt", err, errlen) < 0 || len_setup(&od, "output", err, errlen) < 0)
        return -1;
    if (n > KV_TRACE_MAX_REQUESTS)
        return kv_errf(err, errlen, -1, "gen: requests=%.0f is more than the %d requests one run simulates; "
                       "a sample of them shows the same rates", n, KV_TRACE_MAX_REQUESTS);
    int64_t count = (int64_t)n;
    out->reqs = malloc((size_t)count * sizeof *out->reqs);
    if (!out->reqs)
        return kv_errf(err, errlen, -1, "gen: out of memory for %lld requests", (long long)count);
    out->cap = count;
    char name[32];
    for (int i = 0; i < (int)prefixes; i++) {
        snprintf(name, sizeof name, "gen-prefix-%d", i);
        if (!intern(out, name)) {
            kv_trace_free(out);
            return kv_errf(err, errlen, -1, "gen: out of memory");
        }
    }
    rng g = {(uint64_t)seed * 0x2545F4914F6CDD1Dull + 1};
    double t = 0;
    for (int64_t i = 0; i < count; i++) {
        kv_trace_req *r = &out->reqs[out->count++];
        memset(r, 0, sizeof *r);
        t += -log(rng_u01(&g)) / rate;
        if (t > KV_TRACE_MAX_ARRIVAL_S) {
            kv_trace_free(out);
            return kv_errf(err, errlen, -1,
                           "gen: request %lld arrives at %.3g s, past the virtual clock's range (%.0e s); raise rate "
                           "or lower requests", (long long)i, t, KV_TRACE_MAX_ARRIVAL_S);
        }
        r->arrival_s = t;
        r->prompt_tokens = pd.median > 0 || pd.min > 0 ? len_draw(&g, &pd) : 0;
        r->output_tokens = len_draw(&g, &od);
        if (shared > 0 && rng_u01(&g) < shared) {
            int k = (int)(rng_u01(&g) * prefixes);
            if (k >= (int)prefixes)
                k = (int)prefixes - 1;
            r->prefix_id = out->strings[k];
            r->prefix_tokens = (int32_t)prefix;
        }
        if (r->prompt_tokens + r->prefix_tokens < 1)
            r->prompt_tokens = 1;
        if (prios >= 1)
            r->priority = (int32_t)(rng_u01(&g) * prios);
    }
    return 0;
}

int kv_trace_open(const char *path_or_spec, kv_trace *out, char *err, size_t errlen)
{
    if (!strncmp(path_or_spec, "gen:", 4))
        return kv_trace_generate(path_or_spec, out, err, errlen);
    return kv_trace_load(path_or_spec, out, err, errlen);
}

void kv_trace_spec(const kv_trace *t, int64_t i, kv_request_spec *s)
{
    const kv_trace_req *r = &t->reqs[i];
    memset(s, 0, sizeof *s);
    s->prompt_tokens = r->prompt_tokens;
    s->prompt_token_ids = r->prompt_token_ids;
    s->num_prompt_token_ids = r->num_ids;
    s->output_tokens = r->output_tokens;
    s->prefix_id = r->prefix_id;
    s->prefix_tokens = r->prefix_tokens;
    s->priority = r->priority;
    s->cache_salt = r->cache_salt;
    s->arrival_s = r->arrival_s;
}
