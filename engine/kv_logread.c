/* kv_logread: reading a pasted vLLM log (kv_logread.h). The lines vLLM
 * prints are rows of RULES below, in the wording of the releases that print
 * them (engine/kv_release.c keeps the same wording for kvlab's own log). */
#include "kv_logread.h"
#include "kv_logread_int.h"
#include "kv_release.h"
#include "kv_util.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Longest line looked at (a longer one is cut: vLLM's longest, the engine
 * config line, is about 4 KB). */
#define LR_LINE_MAX 8192

/* ------------------------------------------------------------ the rules */

/* Where a number or text of a rule goes. */
typedef enum lr_field {
    F_SKIP = 0, F_WEIGHTS, F_ACT, F_NONTORCH, F_CG, F_CG_ACT, F_KV, F_TOKENS, F_BLOCKS, F_CONC_LEN, F_CONC,
    F_TOTAL, F_UTIL, F_BUDGET, F_PEAK, F_FREE, F_ERR_NEEDED, F_ERR_LEN, F_ERR_EST, F_ERR_TOKENS, F_ERR_REQS,
    F_CC, F_GPU_NAME, F_VERSION_BANNER, F_VERSION_ENGINE, F_MODEL, F_MAX_LEN,
} lr_field;

/* What else a rule means. */
enum {
    R_V0 = 1 << 0,        /* only the V0 engine prints it */
    R_V1 = 1 << 1,        /* only V1 */
    R_FALLBACK = 1 << 2,  /* "Falling back to V0" */
    R_ARGS = 1 << 3,      /* the rest of the message is the non-default args dict */
    R_NAMESPACE = 1 << 4, /* the rest is V0's args Namespace(...) */
    R_ENGINE = 1 << 5,    /* the rest is the engine config */
    R_OOM = 1 << 6,       /* a CUDA out-of-memory whose stage says which kind */
    R_ERROR_LINE = 1 << 7,/* record the line as the error text */
    R_COLD = 1 << 8,      /* torch.compile compiled: a cold compile cache */
    R_WARM = 1 << 9,      /* torch.compile loaded its graphs from the cache */
    R_MORE = 1 << 10,     /* other rules may match the same line too (V0's profile packs four figures in one) */
};

/* One line vLLM prints. pat: literal text with {f} (a number; commas
 * skipped), {i} (an integer; commas skipped), {w} (a word up to a space,
 * comma, quote or bracket), {s} (text up to the next literal) and {*}
 * (anything up to the next literal). The pattern may start anywhere in the
 * message. fields: where each conversion goes, in order. lo/hi: the releases
 * that print it in these words (NULL: no bound). */
typedef struct lr_rule {
    const char *pat;
    lr_field fields[8];
    const char *lo, *hi;
    kv_logread_error error;
    unsigned flags;
    const char *what;     /* tag of kv_logread_lines.c, for the line-number evidence */
} lr_rule;

static const lr_rule RULES[] = {
    /* Release and model. */
    {"vLLM API server version {w}", {F_VERSION_BANNER}, NULL, NULL, 0, 0, NULL},
    {"\xe2\x96\x88  version {w}", {F_VERSION_BANNER}, NULL, NULL, 0, 0, NULL},   /* the banner: "█  version X" */
    {"\xe2\x96\x88  model   {w}", {F_MODEL}, NULL, NULL, 0, 0, NULL},
    {"Initializing a V1 LLM engine (v{w}) with config: ", {F_VERSION_ENGINE}, "0.8.0", NULL, 0, R_V1 | R_ENGINE, NULL},
    {"Initializing an LLM engine (v{w}) with config: ", {F_VERSION_ENGINE}, NULL, "0.10.1.99", 0, R_V0 | R_ENGINE, NULL},
    {"Initializing a V0 LLM engine (v{w}) with config: ", {F_VERSION_ENGINE}, "0.8.0", "0.10.1.99", 0, R_V0 | R_ENGINE,
     NULL},
    {"non-default args: {", {0}, "0.8.0", NULL, 0, R_ARGS, NULL},
    {"args: Namespace(", {0}, NULL, NULL, 0, R_NAMESPACE, NULL},
    {"Using max model len {i}", {F_MAX_LEN}, NULL, NULL, 0, 0, NULL},
    {"Compute Capability < 8.0 is not supported by the V1 Engine. Falling back to V0", {0}, "0.8.0", "0.10.1.99", 0,
     R_FALLBACK, NULL},
    {"Your device '{s}' (with compute capability {f}) doesn't support torch.bfloat16", {F_GPU_NAME, F_CC}, "0.9.1",
     NULL, 0, 0, NULL},

    {"Compiling a graph for", {0}, "0.7.0", NULL, 0, R_COLD, NULL},
    {"Directly load the compiled graph", {0}, "0.7.0", NULL, 0, R_WARM, NULL},

    /* Weights. */
    {"Loading model weights took {f} GB", {F_WEIGHTS}, NULL, "0.10.1.99", 0, R_V0, "v0_weights"},
    {"Model loading took {f} GiB memory", {F_WEIGHTS}, "0.11.1", NULL, 0, 0, "weights"},
    {"Model loading took {f} GiB and", {F_WEIGHTS}, "0.8.3", "0.27.99", 0, 0, "weights"},
    {"Model loading took {f} GiB", {F_WEIGHTS}, "0.8.3", NULL, 0, 0, "weights"},
    {"Model loading took {f} GB", {F_WEIGHTS}, "0.8.0", "0.10.1.99", 0, 0, "weights"},

    /* V0's profile: 0.6.4 in one line, 0.6.5 on over several. */
    {"Memory profiling results: total_gpu_memory={f}GiB{*}peak_torch_memory={f}GiB{*}non_torch_memory={f}GiB "
     "kv_cache_size={f}GiB gpu_memory_utilization={f}",
     {F_TOTAL, F_PEAK, F_NONTORCH, F_KV, F_UTIL}, NULL, "0.6.4.99", 0, R_V0, "v0_profile"},
    {"total_gpu_memory ({f}GiB) x gpu_memory_utilization ({f}) = {f}GiB", {F_TOTAL, F_UTIL, F_BUDGET}, "0.6.5",
     "0.10.1.99", 0, R_V0 | R_MORE, NULL},
    {"model weights take {f}GiB", {F_WEIGHTS}, "0.6.5", "0.10.1.99", 0, R_V0 | R_MORE, NULL},
    {"non_torch_memory takes {f}GiB", {F_NONTORCH}, "0.6.5", "0.10.1.99", 0, R_V0 | R_MORE, NULL},
    {"PyTorch activation peak memory takes {f}GiB", {F_ACT}, "0.6.5", "0.10.1.99", 0, R_V0 | R_MORE, NULL},
    {"the rest of the memory reserved for KV Cache is {f}GiB", {F_KV}, "0.6.5", "0.10.1.99", 0, R_V0, NULL},

    /* CUDA graphs. */
    {"Estimated CUDA graph memory: {f} GiB total", {F_CG}, "0.18.0", NULL, 0, R_V1, "cg_estimate"},
    {"CUDA graph pool memory: {f} GiB (actual), {f} GiB (estimated)", {F_CG_ACT, F_CG}, "0.18.0", NULL, 0, R_V1, NULL},
    {"Graph capturing finished in {i} secs, took {f} GiB", {F_SKIP, F_CG_ACT}, NULL, NULL, 0, 0, NULL},
    {"In v0.19, CUDA graph memory profiling will be enabled by default", {0}, "0.18.0", "0.19.99", 0, R_V1, NULL},
    {"CUDA graph memory profiling is enabled (default since v0.21.0)", {0}, "0.20.0", NULL, 0, R_V1, NULL},

    /* The pool. */
    {"Available KV cache memory: {f} GiB", {F_KV}, "0.9.1", NULL, 0, R_V1, "available_kv"},
    {"GPU KV cache size: {i} tokens, Maximum concurrency for {i} tokens per request: {f}x",
     {F_TOKENS, F_CONC_LEN, F_CONC}, "0.28.0", NULL, 0, R_V1, "kv_size"},
    {"GPU KV cache size: {i} tokens", {F_TOKENS}, "0.7.3", NULL, 0, R_V1, "kv_size"},
    {"Maximum concurrency for {i} tokens per request: {f}x", {F_CONC_LEN, F_CONC}, NULL, "0.27.99", 0, 0,
     "concurrency"},
    {"# CUDA blocks: {i}, # CPU blocks:", {F_BLOCKS}, "0.7.0", "0.7.2", 0, R_V0, "v0_blocks"},
    {"# cuda blocks: {i}, # CPU blocks:", {F_BLOCKS}, "0.7.3", "0.10.1.99", 0, R_V0, "v0_blocks"},
    {"GPU blocks: {i}, # CPU blocks:", {F_BLOCKS}, NULL, "0.6.6.99", 0, R_V0, "v0_blocks"},
    {"# GPU blocks: {i}", {F_BLOCKS}, NULL, "0.8.0", 0, 0, "gpu_blocks"},

    /* The card. */
    /* torch's OOM text carries the total too: R_MORE lets "CUDA out of memory" see it. */
    {"GPU {i} has a total capacity of {f} GiB", {F_SKIP, F_TOTAL}, NULL, NULL, 0, R_MORE, NULL},
    {"total_memory={f}GiB", {F_TOTAL}, NULL, NULL, 0, 0, NULL},

    /* Errors. */
    {"Free memory on device {*}({f}/{f} GiB) on startup is less than desired GPU memory utilization ({f},",
     {F_FREE, F_TOTAL, F_UTIL}, "0.9.1", NULL, KV_LR_ERR_FREE_MEMORY, R_ERROR_LINE, NULL},
    {"No available memory for the cache blocks", {0}, NULL, NULL, KV_LR_ERR_NO_KV_MEMORY, R_ERROR_LINE, NULL},
    /* V1's length error is one line holding three figures (the needed, the
     * available KV memory, from 0.9.1 the estimated length): R_MORE. */
    {"with the models's max seq len ({i}), ({f} G", {F_ERR_LEN, F_ERR_NEEDED}, "0.8.0", "0.21.99",
     KV_LR_ERR_MAX_MODEL_LEN, R_V1 | R_ERROR_LINE | R_MORE, NULL},
    {"with the model's max seq len ({i}), ({f} G", {F_ERR_LEN, F_ERR_NEEDED}, "0.22.0", NULL, KV_LR_ERR_MAX_MODEL_LEN,
     R_V1 | R_ERROR_LINE | R_MORE, NULL},
    {"larger than the available KV cache memory ({f} G", {F_KV}, "0.8.0", NULL, KV_LR_ERR_MAX_MODEL_LEN,
     R_V1 | R_MORE, NULL},
    {"the estimated maximum model length is {i}", {F_ERR_EST}, "0.9.1", NULL, KV_LR_ERR_MAX_MODEL_LEN, R_V1, NULL},
    {"The model's max seq len ({i}) is larger than the maximum number of tokens that can be stored in KV cache ({i})",
     {F_ERR_LEN, F_ERR_TOKENS}, NULL, "0.10.1.99", KV_LR_ERR_MAX_MODEL_LEN, R_V0 | R_ERROR_LINE, NULL},
    {"Cannot auto-fit max_model_len", {0}, "0.14.0", NULL, KV_LR_ERR_AUTO_FIT, R_ERROR_LINE, NULL},
    {"CUDA out of memory occurred when warming up sampler with {i} dummy requests", {F_ERR_REQS}, "0.8.0", NULL,
     KV_LR_ERR_SAMPLER_OOM, R_V1 | R_ERROR_LINE, NULL},
    {"CUDA out of memory", {0}, NULL, NULL, KV_LR_ERR_OOM, R_OOM | R_ERROR_LINE, NULL},
    {"Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your {s} GPU has compute capability "
     "{f}", {F_GPU_NAME, F_CC}, NULL, NULL, KV_LR_ERR_BF16, R_ERROR_LINE, NULL},
    {"User-specified max_model_len ({i}) is greater than the derived max_model_len", {F_ERR_LEN}, NULL, NULL,
     KV_LR_ERR_MODEL_LEN_CONFIG, R_ERROR_LINE, NULL},
    {"is not divisible by", {0}, NULL, NULL, KV_LR_ERR_CONFIG, R_ERROR_LINE, NULL},
    {"must be divisible by", {0}, NULL, NULL, KV_LR_ERR_CONFIG, R_ERROR_LINE, NULL},
};
#define NUM_RULES ((int)(sizeof RULES / sizeof RULES[0]))

/* How sure each error kind is: a later line replaces the kind only with a
 * surer one (the sampler's RuntimeError after torch's OutOfMemoryError). */
static int error_rank(kv_logread_error e)
{
    switch (e) {
    case KV_LR_ERR_NONE: return 0;
    case KV_LR_ERR_OTHER: return 1;
    case KV_LR_ERR_OOM: case KV_LR_ERR_WEIGHTS_OOM: case KV_LR_ERR_PROFILE_OOM: return 2;
    default: return 3;
    }
}

const char *kv_logread_error_name(kv_logread_error e)
{
    static const char *const names[] = {"", "free_memory", "no_memory_for_cache_blocks", "max_model_len", "auto_fit",
                                        "weights_oom", "profile_oom", "sampler_oom", "oom", "bf16_unsupported",
                                        "max_model_len_config", "config", "other"};
    return (int)e >= 0 && (int)e < (int)(sizeof names / sizeof names[0]) ? names[e] : "other";
}

/* --------------------------------------------------------- the matcher */

typedef struct lr_val {
    double num;
    char text[128];
} lr_val;

/* A number at s (commas between digits skipped): its value and length, 0 if none. */
static size_t scan_number(const char *s, int integer, double *out)
{
    char buf[64];
    size_t n = 0, i = 0;
    if (s[i] == '-' && isdigit((unsigned char)s[i + 1]))
        buf[n++] = s[i++];
    if (!isdigit((unsigned char)s[i]))
        return 0;
    while (n < sizeof buf - 1) {
        if (isdigit((unsigned char)s[i]))
            buf[n++] = s[i++];
        else if (s[i] == ',' && isdigit((unsigned char)s[i + 1]) && isdigit((unsigned char)s[i - 1]))
            i++;
        else if (!integer && s[i] == '.' && isdigit((unsigned char)s[i + 1]) && !memchr(buf, '.', n))
            buf[n++] = s[i++];
        else
            break;
    }
    buf[n] = '\0';
    *out = strtod(buf, NULL);
    return i;
}

/* Match pat at exactly s (conversions as lr_rule says). Returns 1 and the
 * values (at most maxv) on a match. */
static int match_at(const char *s, const char *pat, lr_val *v, int maxv, int nv)
{
    while (*pat) {
        if (pat[0] == '{' && pat[1] && pat[2] == '}') {
            char c = pat[1];
            pat += 3;
            if (c == 'f' || c == 'i') {
                double d;
                size_t n = scan_number(s, c == 'i', &d);
                if (!n)
                    return 0;
                if (nv < maxv)
                    v[nv].num = d;
                nv++;
                s += n;
            } else if (c == 'w') {
                size_t n = 0;
                while (s[n] && !isspace((unsigned char)s[n]) && !strchr(",'\")]}", s[n]))
                    n++;
                if (!n)
                    return 0;
                if (nv < maxv)
                    snprintf(v[nv].text, sizeof v[nv].text, "%.*s", (int)(n < 127 ? n : 127), s);
                nv++;
                s += n;
            } else { /* {s} and {*}: the shortest text before the rest matches */
                const char *lit_end = strchr(pat, '{');
                size_t litlen = lit_end ? (size_t)(lit_end - pat) : strlen(pat);
                if (litlen == 0)
                    return 0; /* two conversions in a row: not used by the table */
                char lit[128];
                snprintf(lit, sizeof lit, "%.*s", (int)(litlen < 127 ? litlen : 127), pat);
                for (const char *t = strstr(s, lit); t; t = strstr(t + 1, lit)) {
                    if (c == 's' && nv < maxv)
                        snprintf(v[nv].text, sizeof v[nv].text, "%.*s", (int)(t - s < 127 ? t - s : 127), s);
                    if (match_at(t, pat, v, maxv, nv + (c == 's')))
                        return 1;
                }
                return 0;
            }
        } else {
            if (*s != *pat)
                return 0;
            s++;
            pat++;
        }
    }
    return 1;
}

/* Match pat anywhere in msg; *rest (may be NULL) gets the text after the match. */
static int match_rule(const char *msg, const char *pat, lr_val *v, int maxv)
{
    const char *brace = strchr(pat, '{');
    size_t litlen = brace && brace[1] && brace[2] == '}' ? (size_t)(brace - pat) : strlen(pat);
    char lit[160];
    snprintf(lit, sizeof lit, "%.*s", (int)(litlen < 159 ? litlen : 159), pat);
    for (const char *t = strstr(msg, lit); t; t = strstr(t + 1, lit))
        if (match_at(t, pat, v, maxv, 0))
            return 1;
    return 0;
}

/* The text right after the first literal run of pat in msg (for R_ARGS and friends). */
static const char *after_literal(const char *msg, const char *pat)
{
    const char *t = strstr(msg, pat);
    return t ? t + strlen(pat) : NULL;
}

/* ------------------------------------------------ cleaning a pasted line */

/* Drop ANSI escapes and carriage returns in place. */
static void strip_ansi(char *s)
{
    char *w = s;
    for (char *r = s; *r;) {
        if (*r == '\x1b') {
            r++;
            if (*r == '[') {
                r++;
                while (*r && !(*r >= '@' && *r <= '~'))
                    r++;
                if (*r)
                    r++;
            } else if (*r == ']') {
                while (*r && *r != '\a' && !(r[0] == '\x1b' && r[1] == '\\'))
                    r++;
                r += *r == '\a' ? 1 : *r ? 2 : 0;
            } else if (*r) {
                r++;
            }
        } else if (*r == '\r') {
            r++;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
}

static int digits(const char *s, int n)
{
    for (int i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i]))
            return 0;
    return 1;
}

/* Length of one leading prefix a log collector or vLLM's process wrapper
 * adds, 0 if none. */
static size_t prefix_len(const char *s)
{
    size_t i = 0;
    /* RFC 3339 / docker --timestamps: 2025-01-02T03:04:05.123456789Z */
    if (digits(s, 4) && s[4] == '-' && digits(s + 5, 2) && s[7] == '-' && digits(s + 8, 2) &&
        (s[10] == 'T' || s[10] == ' ') && digits(s + 11, 2) && s[13] == ':') {
        i = 11;
        while (s[i] && !isspace((unsigned char)s[i]))
            i++;
        while (s[i] == ' ' || s[i] == '\t')
            i++;
        return i;
    }
    /* journald: "Dec 01 12:00:00 host unit[123]: " */
    if (isupper((unsigned char)s[0]) && islower((unsigned char)s[1]) && islower((unsigned char)s[2]) && s[3] == ' ' &&
        (isdigit((unsigned char)s[4]) || s[4] == ' ') && isdigit((unsigned char)s[5]) && s[6] == ' ' &&
        digits(s + 7, 2) && s[9] == ':' && digits(s + 10, 2) && s[12] == ':' && digits(s + 13, 2) && s[15] == ' ') {
        const char *colon = strstr(s + 16, ": ");
        const char *sp = strchr(s + 16, ' ');
        if (colon && sp && colon > sp && !memchr(sp + 1, ' ', (size_t)(colon - sp - 1)))
            return (size_t)(colon - s) + 2;
    }
    /* vLLM's process prefix: "(EngineCore_DP0 pid=123) " */
    if (s[0] == '(') {
        const char *p = strstr(s, " pid=");
        const char *close = strchr(s, ')');
        if (p && close && p < close && close - s < 64) {
            i = (size_t)(close - s) + 1;
            while (s[i] == ' ')
                i++;
            return i;
        }
    }
    /* torch.distributed's "[rank0]: " */
    if (!strncmp(s, "[rank", 5)) {
        const char *e = strstr(s, "]:");
        if (e && e - s < 16)
            return (size_t)(e - s) + 2 + (e[2] == ' ');
    }
    /* docker compose: "vllm-1  | " */
    {
        size_t n = 0;
        while (s[n] && (isalnum((unsigned char)s[n]) || strchr("-_.", s[n])))
            n++;
        size_t m = n;
        while (s[m] == ' ')
            m++;
        if (n > 0 && n < 64 && s[m] == '|' && (s[m + 1] == ' ' || !s[m + 1]))
            return m + 1 + (s[m + 1] == ' ');
    }
    return 0;
}

/* vLLM's record: "INFO 04-22 01:47:15 [file.py:123] message" (the bracket
 * before the file only from 0.8). Sets level, file and line; returns the
 * message, or NULL when the line is not such a record. */
static const char *parse_record(const char *s, char *level, size_t levellen, char *file, size_t filelen, int *line)
{
    static const char *const levels[] = {"DEBUG", "INFO", "WARNING", "WARN", "ERROR", "CRITICAL"};
    for (size_t k = 0; k < sizeof levels / sizeof levels[0]; k++) {
        size_t n = strlen(levels[k]);
        if (strncmp(s, levels[k], n) || s[n] != ' ')
            continue;
        const char *p = s + n + 1;
        /* The date and time, which some collectors strip ("INFO [file.py:N] msg"). */
        if (*p != '[') {
            if (!(digits(p, 2) && p[2] == '-' && digits(p + 3, 2) && p[5] == ' ' && digits(p + 6, 2) && p[8] == ':'))
                return NULL;
            p += 6;
            while (*p && *p != ' ')
                p++;
            while (*p == ' ')
                p++;
        }
        if (*p == '[')
            p++;
        const char *colon = NULL;
        const char *q = p;
        while (*q && *q != ']' && *q != ' ')
            q++;
        if (*q != ']')
            return NULL;
        for (const char *c = q - 1; c > p; c--)
            if (*c == ':') {
                colon = c;
                break;
            }
        if (!colon)
            return NULL;
        snprintf(level, levellen, "%s", levels[k]);
        const char *base = p;
        for (const char *c = p; c < colon; c++)
            if (*c == '/')
                base = c + 1;
        snprintf(file, filelen, "%.*s", (int)(colon - base), base);
        *line = atoi(colon + 1);
        q++;
        while (*q == ' ')
            q++;
        return q;
    }
    return NULL;
}

/* --------------------------------------------------- Python-ish key/values */

/* One value at s: a quoted string, a bracketed group (nested, strings
 * respected) or a bare token, up to sep_end (',' or the closer). Returns its length. */
static size_t value_len(const char *s, char closer)
{
    size_t i = 0;
    int depth = 0;
    char quote = 0;
    for (; s[i]; i++) {
        char c = s[i];
        if (quote) {
            if (c == '\\' && s[i + 1])
                i++;
            else if (c == quote)
                quote = 0;
            continue;
        }
        if (c == '\'' || c == '"')
            quote = c;
        else if (c == '(' || c == '[' || c == '{' || c == '<')
            depth++;
        else if ((c == ')' || c == ']' || c == '}' || c == '>') && depth > 0)
            depth--;
        else if (depth == 0 && (c == ',' || c == closer))
            break;
    }
    return i;
}

/* Parse "key: value, key: value}" (dict, sep ':') or "key=value, ...)"
 * (Namespace or the engine line, sep '='). Keys may be quoted. Returns the
 * number of pairs stored. */
static int parse_pairs(const char *s, char sep, char closer, kv_logread_arg *out, int max)
{
    int n = 0;
    while (*s && *s != closer) {
        while (*s == ' ' || *s == ',')
            s++;
        if (!*s || *s == closer)
            break;
        char q = (*s == '\'' || *s == '"') ? *s : 0;
        const char *k = s + (q != 0);
        const char *ke = k;
        while (*ke && (q ? *ke != q : (*ke != sep && *ke != ',' && *ke != closer && *ke != ' ')))
            ke++;
        const char *p = ke + (q && *ke == q);
        while (*p == ' ')
            p++;
        if (*p != sep)
            break; /* not key-value text: stop */
        p++;
        while (*p == ' ')
            p++;
        size_t vl = value_len(p, closer);
        if (n < max && ke > k) {
            snprintf(out[n].key, sizeof out[n].key, "%.*s", (int)(ke - k < 47 ? ke - k : 47), k);
            snprintf(out[n].value, sizeof out[n].value, "%.*s", (int)(vl < 95 ? vl : 95), p);
            n++;
        }
        s = p + vl;
    }
    return n;
}

/* The value without Python's quotes ('text' -> text). */
static void unquote(const char *v, char *buf, size_t len)
{
    size_t n = strlen(v);
    if (n >= 2 && (v[0] == '\'' || v[0] == '"') && v[n - 1] == v[0])
        snprintf(buf, len, "%.*s", (int)(n - 2), v + 1);
    else
        snprintf(buf, len, "%s", v);
}

static const char *find_arg(const kv_logread_arg *a, int n, const char *key)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(a[i].key, key))
            return a[i].value;
    return NULL;
}

/* ------------------------------------------------------------- parsing */

static void narrow(kv_logread *lr, const char *lo, const char *hi)
{
    /* Keep the intersection; a rule that would leave nothing is ignored
     * (two logs pasted together, or a patched build). */
    const char *nlo = lr->version_lo[0] && (!lo || kv_release_compare(lr->version_lo, lo) > 0) ? lr->version_lo : lo;
    const char *nhi = lr->version_hi[0] && (!hi || kv_release_compare(lr->version_hi, hi) < 0) ? lr->version_hi : hi;
    if (nlo && nhi && kv_release_compare(nlo, nhi) > 0)
        return;
    char a[16], b[16];
    snprintf(a, sizeof a, "%s", nlo ? nlo : "");
    snprintf(b, sizeof b, "%s", nhi ? nhi : "");
    snprintf(lr->version_lo, sizeof lr->version_lo, "%s", a);
    snprintf(lr->version_hi, sizeof lr->version_hi, "%s", b);
}

static void set_num(kv_logread *lr, unsigned bit, double *dst, double v)
{
    if (lr->have & bit)
        return; /* first rank wins */
    *dst = v;
    lr->have |= bit;
}

static void set_version(kv_logread *lr, const char *v, kv_logread_how how)
{
    const char *s = v[0] == 'v' ? v + 1 : v;
    if (!isdigit((unsigned char)s[0]))
        return;
    if (lr->version_how != KV_LOGREAD_VER_NONE && lr->version_how <= how)
        return;
    snprintf(lr->vllm_version, sizeof lr->vllm_version, "%s", s);
    lr->version_how = how;
    snprintf(lr->version_evidence, sizeof lr->version_evidence, "%s",
             how == KV_LOGREAD_VER_BANNER ? "the banner" : "the engine line");
}

static void apply(kv_logread *lr, const lr_rule *r, const lr_val *v, int nv)
{
    for (int i = 0; i < nv && i < 8; i++) {
        double d = v[i].num;
        switch (r->fields[i]) {
        case F_WEIGHTS: set_num(lr, KV_LR_WEIGHTS, &lr->weights_gib, d); break;
        case F_ACT: set_num(lr, KV_LR_ACTIVATION, &lr->activation_gib, d); break;
        case F_PEAK: /* 0.6.4: the peak torch memory holds the weights */
            if (!(lr->have & KV_LR_ACTIVATION) && (lr->have & KV_LR_WEIGHTS))
                set_num(lr, KV_LR_ACTIVATION, &lr->activation_gib, d - lr->weights_gib);
            break;
        case F_NONTORCH: set_num(lr, KV_LR_NON_TORCH, &lr->non_torch_gib, d); break;
        case F_CG: set_num(lr, KV_LR_CUDAGRAPH, &lr->cudagraph_gib, d); break;
        case F_CG_ACT: set_num(lr, KV_LR_CUDAGRAPH_ACTUAL, &lr->cudagraph_actual_gib, d); break;
        case F_KV: set_num(lr, KV_LR_KV_GIB, &lr->kv_cache_gib, d); break;
        case F_TOTAL: set_num(lr, KV_LR_GPU_TOTAL, &lr->gpu_total_gib, d); break;
        case F_UTIL: set_num(lr, KV_LR_UTIL, &lr->gpu_memory_utilization, d); break;
        case F_BUDGET: set_num(lr, KV_LR_BUDGET, &lr->budget_gib, d); break;
        case F_FREE: set_num(lr, KV_LR_FREE, &lr->free_gib, d); break;
        case F_CONC: set_num(lr, KV_LR_CONCURRENCY, &lr->max_concurrency, d); break;
        case F_TOKENS:
            if (!(lr->have & KV_LR_KV_TOKENS)) {
                lr->kv_cache_tokens = (int64_t)d;
                lr->have |= KV_LR_KV_TOKENS;
            }
            break;
        case F_BLOCKS:
            if (!(lr->have & KV_LR_BLOCKS)) {
                lr->gpu_blocks = (int64_t)d;
                lr->have |= KV_LR_BLOCKS;
            }
            break;
        case F_CONC_LEN: if (!lr->concurrency_len) lr->concurrency_len = (int64_t)d; break;
        case F_ERR_NEEDED: if (lr->error_needed_gib == 0) lr->error_needed_gib = d; break;
        case F_ERR_LEN: if (!lr->error_max_model_len) lr->error_max_model_len = (int64_t)d; break;
        case F_ERR_EST: if (!lr->error_estimated_max_model_len) lr->error_estimated_max_model_len = (int64_t)d; break;
        case F_ERR_TOKENS: if (!lr->error_kv_tokens) lr->error_kv_tokens = (int64_t)d; break;
        case F_ERR_REQS: if (!lr->error_num_reqs) lr->error_num_reqs = (int64_t)d; break;
        case F_MAX_LEN: if (!lr->max_model_len) lr->max_model_len = (int64_t)d; break;
        case F_CC: if (lr->cc == 0) lr->cc = d; break;
        case F_GPU_NAME:
            if (!lr->gpu_name[0])
                snprintf(lr->gpu_name, sizeof lr->gpu_name, "%s", v[i].text);
            break;
        case F_VERSION_BANNER: set_version(lr, v[i].text, KV_LOGREAD_VER_BANNER); break;
        case F_VERSION_ENGINE: set_version(lr, v[i].text, KV_LOGREAD_VER_ENGINE); break;
        case F_MODEL:
            if (!lr->model[0]) {
                snprintf(lr->model, sizeof lr->model, "%s", v[i].text);
                lr->have |= KV_LR_MODEL;
            }
            break;
        default: break;
        }
    }
}

static void take_engine_line(kv_logread *lr, const char *rest)
{
    kv_logread_arg pairs[KV_LOGREAD_MAX_ARGS * 2];
    int n = parse_pairs(rest, '=', '\0', pairs, KV_LOGREAD_MAX_ARGS * 2);
    if (lr->have & KV_LR_ENGINE)
        return;
    lr->have |= KV_LR_ENGINE;
    static const char *const keep[] = {"model", "dtype", "max_seq_len", "tensor_parallel_size",
                                       "pipeline_parallel_size", "quantization", "enforce_eager", "kv_cache_dtype",
                                       "enable_prefix_caching", "enable_chunked_prefill"};
    for (int i = 0; i < n; i++)
        for (size_t k = 0; k < sizeof keep / sizeof keep[0]; k++)
            if (!strcmp(pairs[i].key, keep[k]) && lr->num_engine < KV_LOGREAD_MAX_ARGS)
                lr->engine[lr->num_engine++] = pairs[i];
    const char *v;
    char buf[256];
    if ((v = find_arg(lr->engine, lr->num_engine, "model")) && !lr->model[0]) {
        unquote(v, buf, sizeof buf);
        snprintf(lr->model, sizeof lr->model, "%s", buf);
        lr->have |= KV_LR_MODEL;
    }
    if ((v = find_arg(lr->engine, lr->num_engine, "max_seq_len")) && !lr->max_model_len)
        lr->max_model_len = atoll(v);
    if ((v = find_arg(lr->engine, lr->num_engine, "tensor_parallel_size")))
        lr->tensor_parallel_size = atoi(v);
    if ((v = find_arg(lr->engine, lr->num_engine, "pipeline_parallel_size")))
        lr->pipeline_parallel_size = atoi(v);
}

static void take_args(kv_logread *lr, const char *rest, char sep, char closer)
{
    if (lr->have & KV_LR_ARGS)
        return;
    /* V0's Namespace lists every arg (150 and more), defaults included: keep
     * the model and the flags kv_args knows that change memory, none = None. */
    enum { ALL = 256 };
    kv_logread_arg *all = malloc(ALL * sizeof *all);
    if (!all)
        return;
    int n = parse_pairs(rest, sep, closer, all, ALL);
    int every = closer == ')';
    lr->num_args = 0;
    for (int i = 0; i < n && lr->num_args < KV_LOGREAD_MAX_ARGS; i++) {
        if (every) {
            char dashed[48];
            snprintf(dashed, sizeof dashed, "%s", all[i].key);
            for (char *c = dashed; *c; c++)
                if (*c == '_')
                    *c = '-';
            const kv_args_flag *fl = kv_args_flag_find(dashed);
            int model = !strcmp(all[i].key, "model") || !strcmp(all[i].key, "model_tag");
            if (!model && (!fl || !fl->memory || !strcmp(all[i].value, "None")))
                continue;
        }
        lr->args[lr->num_args++] = all[i];
    }
    free(all);
    lr->have |= KV_LR_ARGS;
    char buf[256];
    const char *v = find_arg(lr->args, lr->num_args, "model");
    if (!v)
        v = find_arg(lr->args, lr->num_args, "model_tag");
    if (v && strcmp(v, "None")) {
        unquote(v, buf, sizeof buf);
        snprintf(lr->model, sizeof lr->model, "%s", buf);
        lr->have |= KV_LR_MODEL;
    }
    if ((v = find_arg(lr->args, lr->num_args, "gpu_memory_utilization")) && !(lr->have & KV_LR_UTIL)) {
        lr->gpu_memory_utilization = atof(v);
        lr->have |= KV_LR_UTIL;
    }
    if ((v = find_arg(lr->args, lr->num_args, "tensor_parallel_size")) && strcmp(v, "None"))
        lr->tensor_parallel_size = atoi(v);
}

static void add_evidence(kv_logread *lr, const char *file, int line, const char *what)
{
    for (int i = 0; i < lr->num_evidence; i++)
        if (!strcmp(lr->evidence[i].what, what))
            return;
    if (lr->num_evidence >= KV_LOGREAD_MAX_EVIDENCE || !file[0] || line <= 0)
        return;
    snprintf(lr->evidence[lr->num_evidence].file, sizeof lr->evidence[0].file, "%s", file);
    lr->evidence[lr->num_evidence].line = line;
    snprintf(lr->evidence[lr->num_evidence].what, sizeof lr->evidence[0].what, "%s", what);
    lr->num_evidence++;
}

static void one_line(kv_logread *lr, char *line)
{
    strip_ansi(line);
    const char *s = line;
    for (int k = 0; k < 8; k++) {
        size_t n = prefix_len(s);
        if (!n)
            break;
        s += n;
    }
    while (*s == ' ' || *s == '\t')
        s++;
    char level[12] = "", file[64] = "";
    int srcline = 0;
    const char *msg = parse_record(s, level, sizeof level, file, sizeof file, &srcline);
    /* A wrapper kvlab has no rule for ("vLLM STDOUT: INFO ...", "pod/x "):
     * the record a little further in. */
    for (const char *t = s; !msg && *t && t - s < 48; t++)
        if (t > s && t[-1] == ' ' && isupper((unsigned char)*t))
            msg = parse_record(t, level, sizeof level, file, sizeof file, &srcline);
    if (msg) {
        lr->vllm_lines++;
        lr->records++;
    } else
        msg = s;
    int hit = 0;
    for (int i = 0; i < NUM_RULES; i++) {
        const lr_rule *r = &RULES[i];
        lr_val v[8];
        memset(v, 0, sizeof v);
        if (!match_rule(msg, r->pat, v, 8))
            continue;
        int nv = 0;
        for (const char *p = r->pat; (p = strchr(p, '{')) != NULL; p++)
            if (p[1] && p[2] == '}' && p[1] != '*')
                nv++;
        hit = 1;
        apply(lr, r, v, nv);
        if (r->lo || r->hi)
            narrow(lr, r->lo, r->hi);
        if (r->flags & R_V0)
            lr->engine_v1 = lr->engine_v1 == 1 ? 1 : 0;
        if (r->flags & R_V1)
            lr->engine_v1 = 1;
        if (r->flags & R_FALLBACK) {
            lr->v0_fallback = 1;
            lr->engine_v1 = 0;
        }
        if ((r->flags & R_COLD) && !lr->compile_cache)
            lr->compile_cache = 1;
        if (r->flags & R_WARM)
            lr->compile_cache = 2;
        if (r->what && msg != s)
            add_evidence(lr, file, srcline, r->what);
        if (r->flags & R_ARGS) {
            const char *rest = after_literal(msg, "non-default args: {");
            if (rest)
                take_args(lr, rest, ':', '}');
        }
        if (r->flags & R_NAMESPACE) {
            const char *rest = after_literal(msg, "args: Namespace(");
            if (rest)
                take_args(lr, rest, '=', ')');
        }
        if (r->flags & R_ENGINE) {
            const char *rest = after_literal(msg, "with config: ");
            if (rest)
                take_engine_line(lr, rest);
        }
        if (r->error) {
            kv_logread_error e = r->error;
            if (r->flags & R_OOM)
                e = !(lr->have & KV_LR_WEIGHTS) ? KV_LR_ERR_WEIGHTS_OOM
                    : !(lr->have & (KV_LR_KV_GIB | KV_LR_KV_TOKENS | KV_LR_BLOCKS)) ? KV_LR_ERR_PROFILE_OOM
                    : KV_LR_ERR_OOM;
            if (error_rank(e) > error_rank(lr->error_kind)) {
                lr->error_kind = e;
                lr->have |= KV_LR_ERROR;
                if (r->flags & R_ERROR_LINE)
                    snprintf(lr->error, sizeof lr->error, "%s", msg);
            }
        }
        if (!(r->flags & R_MORE))
            break; /* one rule per line: the table lists the more specific wording first */
    }
    /* An error line kvlab has no rule for: "ValueError: ...", or an ERROR record. */
    if (!hit && lr->error_kind == KV_LR_ERR_NONE) {
        const char *colon = strstr(msg, "Error: ");
        int exc = colon && colon - msg < 48 && !memchr(msg, ' ', (size_t)(colon - msg));
        if (exc || (!strcmp(level, "ERROR") && strstr(msg, "Error"))) {
            lr->error_kind = KV_LR_ERR_OTHER;
            lr->have |= KV_LR_ERROR;
            snprintf(lr->error, sizeof lr->error, "%s", msg);
        }
    }
    if (hit) {
        lr->matched++;
        if (msg == s)
            lr->vllm_lines++; /* a known message pasted without its record prefix */
    }
}

/* The release the source line numbers name: the releases of
 * kv_logread_lines.c whose lines match the most of those seen (at least
 * one) and contradict none. One release: that one. Several of one minor
 * series (0.19.0 and 0.19.1 often share a file): the first, the range
 * narrowed to them. Several series: only the range. */
static void version_from_lines(kv_logread *lr)
{
    if (lr->version_how != KV_LOGREAD_VER_NONE || lr->num_evidence == 0)
        return;
    const char *first = NULL, *last = NULL;
    int best_n = 0, count = 0;
    for (int i = 0; i < KV_LOGREAD_NUM_LINES; i++) {
        const char *ver = KV_LOGREAD_LINES[i].version;
        if (i > 0 && !strcmp(ver, KV_LOGREAD_LINES[i - 1].version))
            continue; /* each release once, at its first row */
        int n = 0, miss = 0;
        for (int e = 0; e < lr->num_evidence; e++) {
            int known = 0, same = 0;
            for (int j = i; j < KV_LOGREAD_NUM_LINES && !strcmp(KV_LOGREAD_LINES[j].version, ver); j++)
                if (!strcmp(KV_LOGREAD_LINES[j].what, lr->evidence[e].what)) {
                    known = 1;
                    same |= !strcmp(KV_LOGREAD_LINES[j].file, lr->evidence[e].file) &&
                            KV_LOGREAD_LINES[j].line == lr->evidence[e].line;
                }
            n += same;
            miss += known && !same;
        }
        if (n == 0 || miss)
            continue;
        if (n > best_n) {
            best_n = n;
            first = last = ver;
            count = 1;
        } else if (n == best_n) {
            last = ver;
            count++;
        }
    }
    if (!first)
        return;
    /* the same minor series: "0.19." of 0.19.0 and 0.19.1 */
    const char *d1 = strchr(first, '.'), *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
    size_t series = d2 ? (size_t)(d2 - first) + 1 : strlen(first);
    if (count > 1) {
        char hi[24];
        snprintf(hi, sizeof hi, "%s", last);
        narrow(lr, first, hi);
        if (strncmp(first, last, series))
            return; /* several series: a range only */
    }
    snprintf(lr->vllm_version, sizeof lr->vllm_version, "%s", first);
    lr->version_how = KV_LOGREAD_VER_LINES;
    size_t off = 0;
    for (int e = 0; e < lr->num_evidence && off < sizeof lr->version_evidence; e++)
        off += (size_t)snprintf(lr->version_evidence + off, sizeof lr->version_evidence - off, "%s%s:%d",
                                e ? ", " : "", lr->evidence[e].file, lr->evidence[e].line);
    if (count > 1 && off < sizeof lr->version_evidence)
        snprintf(lr->version_evidence + off, sizeof lr->version_evidence - off, " (%s shares them)", last);
}

int kv_logread_parse(const char *text, size_t len, kv_logread *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->engine_v1 = -1;
    if (!text)
        len = 0;
    char *line = malloc(LR_LINE_MAX + 1);
    if (!line)
        return kv_errf(err, errlen, -1, "out of memory reading the log");
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && text[j] != '\n')
            j++;
        size_t n = j - i < LR_LINE_MAX ? j - i : LR_LINE_MAX;
        /* NUL bytes inside a line end it here (binary input). */
        size_t k = 0;
        for (; k < n; k++) {
            char c = text[i + k];
            line[k] = c ? c : ' ';
        }
        line[k] = '\0';
        out->lines++;
        if (j >= len && j > i)
            out->truncated = 1; /* no final newline: the tail may be cut */
        one_line(out, line);
        i = j + 1;
    }
    free(line);
    version_from_lines(out);
    if (out->version_how == KV_LOGREAD_VER_NONE && (out->version_lo[0] || out->version_hi[0]))
        out->version_how = KV_LOGREAD_VER_WORDING;
    if (out->vllm_lines == 0 || (out->records == 0 && out->matched * 20 < out->lines))
        return kv_errf(err, errlen, -1,
                       "not a vLLM log: no line in vLLM's format (LEVEL MM-DD HH:MM:SS [file.py:N] ...) and none of "
                       "its start-up messages");
    /* The error text of an OOM that came before any figure of the pool. */
    if (out->engine_v1 < 0 && out->version_how != KV_LOGREAD_VER_NONE) {
        const kv_release *r = kv_release_find(out->vllm_version, NULL, 0);
        if (r)
            out->engine_v1 = r->mem->engine_v1;
    }
    return 0;
}

/* ----------------------------------------------------- as kvlab's flags */

int kv_logread_to_args(const kv_logread *lr, kv_args *a, char *unread, size_t unreadlen)
{
    int set = 0;
    size_t off = 0;
    if (unread && unreadlen)
        unread[0] = '\0';
    if (lr->model[0])
        snprintf(a->model, sizeof a->model, "%s", lr->model);
    for (int i = 0; i < lr->num_args; i++) {
        const kv_logread_arg *x = &lr->args[i];
        char name[64], val[128], e[256];
        if (!strcmp(x->key, "model") || !strcmp(x->key, "model_tag") || !strcmp(x->value, "None"))
            continue;
        snprintf(name, sizeof name, "%s", x->key);
        for (char *c = name; *c; c++)
            if (*c == '_')
                *c = '-';
        unquote(x->value, val, sizeof val);
        const kv_args_flag *fl = kv_args_flag_find(name);
        int rc;
        if (!fl) {
            rc = KV_ARGS_EUNKNOWN;
        } else if (!strcmp(val, "True") || !strcmp(val, "False")) {
            rc = kv_args_set(a, name, !strcmp(val, "True") ? "true" : "false", e, sizeof e);
        } else {
            rc = kv_args_set(a, name, val, e, sizeof e);
        }
        if (rc == KV_ARGS_OK) {
            set++;
        } else if (rc == KV_ARGS_IGNORED && (!strcmp(val, "False") || !strcmp(val, "0") || !val[0])) {
            continue; /* a switch left off: nothing to say */
        } else if (unread && off < unreadlen) {
            /* kv_args' own note says whether it touches memory ("not modelled: it changes ...") */
            off += (size_t)snprintf(unread + off, unreadlen - off, "%s=%.40s (%s)\n", x->key, val,
                                    rc == KV_ARGS_IGNORED ? e
                                    : rc == KV_ARGS_EUNKNOWN ? "kvlab does not know this flag"
                                                            : "kvlab cannot read this value");
        }
    }
    /* What the engine line adds where the args did not say. */
    char buf[64], e[256];
    /* The length: the engine line's, else the one the concurrency line names. */
    int64_t mml = lr->max_model_len > 0 ? lr->max_model_len : lr->concurrency_len;
    if (mml > 0 && !kv_args_is_set(a, "max-model-len")) {
        snprintf(buf, sizeof buf, "%lld", (long long)mml);
        set += kv_args_set(a, "max-model-len", buf, e, sizeof e) == KV_ARGS_OK;
    }
    if (lr->tensor_parallel_size > 1 && !kv_args_is_set(a, "tensor-parallel-size")) {
        snprintf(buf, sizeof buf, "%d", lr->tensor_parallel_size);
        set += kv_args_set(a, "tensor-parallel-size", buf, e, sizeof e) == KV_ARGS_OK;
    }
    if ((lr->have & KV_LR_UTIL) && !kv_args_is_set(a, "gpu-memory-utilization") && lr->gpu_memory_utilization > 0 &&
        lr->gpu_memory_utilization <= 1) {
        snprintf(buf, sizeof buf, "%g", lr->gpu_memory_utilization);
        set += kv_args_set(a, "gpu-memory-utilization", buf, e, sizeof e) == KV_ARGS_OK;
    }
    char rel[40];
    kv_logread_release(lr, rel, sizeof rel);
    if (rel[0] && kv_release_find(rel, NULL, 0))
        set += kv_args_set(a, "vllm-version", rel, e, sizeof e) == KV_ARGS_OK;
    return set;
}

const char *kv_logread_release(const kv_logread *lr, char *buf, size_t buflen)
{
    if (buflen)
        buf[0] = '\0';
    if (lr->version_how == KV_LOGREAD_VER_BANNER || lr->version_how == KV_LOGREAD_VER_ENGINE ||
        lr->version_how == KV_LOGREAD_VER_LINES) {
        snprintf(buf, buflen, "%s", lr->vllm_version);
        return buf;
    }
    if (!lr->version_lo[0] && !lr->version_hi[0])
        return buf;
    /* The newest row kvlab has inside the wording's range. */
    for (int i = kv_release_count() - 1; i >= 0; i--) {
        const kv_release *r = kv_release_at(i);
        if (lr->version_hi[0] && kv_release_compare(r->first, lr->version_hi) > 0)
            continue;
        if (lr->version_lo[0] && kv_release_compare(r->last, lr->version_lo) < 0)
            continue;
        const char *v = lr->version_lo[0] && kv_release_compare(r->first, lr->version_lo) < 0 ? lr->version_lo
                                                                                             : r->first;
        snprintf(buf, buflen, "%s", v);
        return buf;
    }
    return buf;
}

const char *kv_logread_release_how(const kv_logread *lr, char *buf, size_t buflen)
{
    char rel[40];
    kv_logread_release(lr, rel, sizeof rel);
    switch (lr->version_how) {
    case KV_LOGREAD_VER_BANNER:
    case KV_LOGREAD_VER_ENGINE:
        snprintf(buf, buflen, "%s (%s says so)", lr->vllm_version, lr->version_evidence);
        break;
    case KV_LOGREAD_VER_LINES:
        snprintf(buf, buflen, "%s, likely (no line names it; the source line numbers %s match that release's files)",
                 lr->vllm_version, lr->version_evidence);
        break;
    default:
        if (lr->version_lo[0] || lr->version_hi[0]) {
            char hi[24];
            snprintf(hi, sizeof hi, "%s", lr->version_hi);
            size_t n = strlen(hi);
            if (n > 3 && !strcmp(hi + n - 3, ".99"))
                snprintf(hi + n - 2, sizeof hi - (n - 2), "x");
            snprintf(buf, buflen, "%s to %s (no line names it; the wording fits that range; kvlab follows %s)",
                     lr->version_lo[0] ? lr->version_lo : "the oldest", lr->version_hi[0] ? hi : "the newest",
                     rel[0] ? rel : "the newest");
        } else {
            snprintf(buf, buflen, "unknown (no line names it; kvlab follows the newest, %s)",
                     kv_release_newest()->first);
        }
    }
    return buf;
}
