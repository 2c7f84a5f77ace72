#include "lsn_answer.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv_util.h"

static const lsn_unit units[] = {
    {"", LSN_DIM_NONE, 1},
    {"x", LSN_DIM_NONE, 1},
    {"%", LSN_DIM_NONE, 0.01},
    {"bytes", LSN_DIM_BYTES, 1},
    {"KiB", LSN_DIM_BYTES, 1024.0},
    {"MiB", LSN_DIM_BYTES, 1024.0 * 1024},
    {"GiB", LSN_DIM_BYTES, 1024.0 * 1024 * 1024},
    {"TiB", LSN_DIM_BYTES, 1024.0 * 1024 * 1024 * 1024},
    {"KB", LSN_DIM_BYTES, 1e3},
    {"MB", LSN_DIM_BYTES, 1e6},
    {"GB", LSN_DIM_BYTES, 1e9},
    {"TB", LSN_DIM_BYTES, 1e12},
    {"tokens", LSN_DIM_TOKENS, 1},
    {"blocks", LSN_DIM_BLOCKS, 1},
    {"vectors", LSN_DIM_VECTORS, 1},
    {"requests", LSN_DIM_REQUESTS, 1},
    {"s", LSN_DIM_SECONDS, 1},
    {"ms", LSN_DIM_SECONDS, 1e-3},
    {"us", LSN_DIM_SECONDS, 1e-6},
    {"min", LSN_DIM_SECONDS, 60},
    {"FLOPs", LSN_DIM_FLOPS, 1},
    {"GFLOPs", LSN_DIM_FLOPS, 1e9},
    {"TFLOPs", LSN_DIM_FLOPS, 1e12},
    {"PFLOPs", LSN_DIM_FLOPS, 1e15},
};

/* Other spellings -> canonical name. Compared case-insensitively. */
static const struct { const char *alias, *name; } aliases[] = {
    {"times", "x"}, {"percent", "%"},
    {"b", "bytes"}, {"byte", "bytes"},
    {"kibibytes", "KiB"}, {"mebibytes", "MiB"}, {"gibibytes", "GiB"}, {"tebibytes", "TiB"},
    {"kilobytes", "KB"}, {"megabytes", "MB"}, {"gigabytes", "GB"}, {"terabytes", "TB"},
    {"token", "tokens"}, {"tok", "tokens"}, {"toks", "tokens"},
    {"block", "blocks"}, {"blk", "blocks"},
    {"vector", "vectors"}, {"vec", "vectors"}, {"vecs", "vectors"},
    {"request", "requests"}, {"req", "requests"}, {"reqs", "requests"},
    {"seq", "requests"}, {"seqs", "requests"}, {"sequence", "requests"},
    {"sequences", "requests"}, {"conversation", "requests"}, {"conversations", "requests"},
    {"sec", "s"}, {"secs", "s"}, {"second", "s"}, {"seconds", "s"},
    {"µs", "us"}, {"mins", "min"}, {"minute", "min"}, {"minutes", "min"},
    {"flop", "FLOPs"}, {"gflop", "GFLOPs"}, {"tflop", "TFLOPs"}, {"pflop", "PFLOPs"},
};

static const char *dim_name(lsn_dim d)
{
    switch (d) {
    case LSN_DIM_NONE: return "a plain number";
    case LSN_DIM_BYTES: return "an amount of memory";
    case LSN_DIM_TOKENS: return "a number of tokens";
    case LSN_DIM_BLOCKS: return "a number of blocks";
    case LSN_DIM_VECTORS: return "a number of vectors";
    case LSN_DIM_REQUESTS: return "a number of requests";
    case LSN_DIM_SECONDS: return "a time";
    case LSN_DIM_FLOPS: return "an amount of compute";
    }
    return "?";
}

const lsn_unit *lsn_unit_find(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcasecmp(units[i].name, name))
            return &units[i];
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (!strcasecmp(aliases[i].alias, name))
            return lsn_unit_find(aliases[i].name);
    return NULL;
}

static const char *skip_space(const char *s)
{
    while (*s && isspace((unsigned char)*s))
        s++;
    return s;
}

/* Skip words that mean "roughly" before the number. */
static const char *skip_approx(const char *s)
{
    static const char *const words[] = {"about ", "approx ", "approximately ", "around ", "roughly ", "~",
                                        "\xe2\x89\x88" /* ≈ */};
    for (int again = 1; again;) {
        again = 0;
        s = skip_space(s);
        for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
            size_t n = strlen(words[i]);
            if (!strncasecmp(s, words[i], n)) {
                s += n;
                again = 1;
            }
        }
    }
    return s;
}

/* Read one word of unit characters (letters, %, µ) into w. */
static const char *read_word(const char *s, char *w, size_t wl)
{
    size_t n = 0;
    s = skip_space(s);
    if (*s == '%') {
        if (wl > 1) { w[0] = '%'; n = 1; }
        s++;
    } else {
        while (*s && (isalpha((unsigned char)*s) || (unsigned char)*s >= 0x80)) {
            if (n + 1 < wl)
                w[n++] = *s;
            s++;
        }
    }
    w[n] = '\0';
    return s;
}

static double multiplier_of(const char *w)
{
    if (!strcmp(w, "k") || !strcmp(w, "K") || !strcasecmp(w, "thousand"))
        return 1e3;
    if (!strcmp(w, "M") || !strcmp(w, "m") || !strcasecmp(w, "million") || !strcasecmp(w, "mn"))
        return 1e6;
    if (!strcasecmp(w, "billion") || !strcasecmp(w, "bn"))
        return 1e9;
    return 0;
}

int lsn_answer_parse(const char *text, lsn_quantity *q, char *msg, size_t msglen)
{
    memset(q, 0, sizeof *q);
    if (msg && msglen)
        msg[0] = '\0';
    const char *s = skip_approx(text ? text : "");
    char num[128];
    size_t n = 0;
    if (*s == '-' || *s == '+')
        num[n++] = *s++;
    int digits = 0;
    for (; *s && n + 3 < sizeof num; s++) { /* room for an exponent's two chars and the NUL */
        if (isdigit((unsigned char)*s)) {
            num[n++] = *s;
            digits++;
        } else if (*s == '.') {
            num[n++] = *s;
        } else if ((*s == ',' || *s == '_' || *s == '\'') && digits && isdigit((unsigned char)s[1])) {
            continue; /* thousands separator */
        } else if ((*s == 'e' || *s == 'E') && digits &&
                   (isdigit((unsigned char)s[1]) ||
                    ((s[1] == '-' || s[1] == '+') && isdigit((unsigned char)s[2])))) {
            num[n++] = *s++;
            num[n++] = *s;
        } else {
            break;
        }
    }
    num[n] = '\0';
    if (!digits) {
        snprintf(msg, msglen, "I could not read a number in '%s'.", text ? text : "");
        return -1;
    }
    char *end;
    double v = strtod(num, &end);
    if (*end || !isfinite(v)) {
        snprintf(msg, msglen, "'%s' is not a number I can read.", num);
        return -1;
    }
    char w[32];
    const char *after = read_word(s, w, sizeof w);
    double mult = w[0] ? multiplier_of(w) : 0;
    /* "23.2k tokens" or "407k": a multiplier, then perhaps a unit. But "m"
     * followed by nothing could be minutes... we read it as million, the
     * common case for token counts. */
    if (mult > 0) {
        v *= mult;
        s = after;
        after = read_word(s, w, sizeof w);
    }
    const lsn_unit *u = NULL;
    if (w[0]) {
        u = lsn_unit_find(w);
        if (!u) {
            snprintf(msg, msglen, "I don't know the unit '%s' (try bytes, KiB, GiB, GB, tokens, blocks, %%, x).", w);
            return -1;
        }
        s = after;
    }
    /* Allow a trailing "/token", "per token", "per request" and final dots. */
    s = skip_space(s);
    if (*s == '/' || !strncasecmp(s, "per ", 4)) {
        s += (*s == '/') ? 1 : 4;
        char w2[32];
        s = read_word(s, w2, sizeof w2);
        if (!w2[0]) {
            snprintf(msg, msglen, "Per what? I could not read '%s'.", text);
            return -1;
        }
    }
    s = skip_space(s);
    while (*s == '.' || *s == '!')
        s = skip_space(s + 1);
    if (*s) {
        snprintf(msg, msglen, "I read %g but not the rest: '%s'.", v, s);
        return -1;
    }
    q->number = v;
    q->unit = u;
    q->base = u ? v * u->scale : v;
    return 0;
}

static int close_to(double v, double target, double rel, double abs_tol)
{
    double tol = fmax(rel * fabs(target), abs_tol);
    return fabs(v - target) <= tol;
}

char *lsn_answer_format(double value, const char *unit, char *buf, size_t buflen)
{
    char num[64];
    double av = fabs(value);
    if (!isfinite(value)) {
        snprintf(num, sizeof num, "%g", value);
    } else if (av >= 1000 || (value == floor(value) && av < 1e15)) {
        /* whole number with thousands separators */
        kv_fmt_thousands(num, sizeof num, llround(value));
    } else {
        snprintf(num, sizeof num, "%.3g", value);
    }
    const lsn_unit *u = lsn_unit_find(unit ? unit : "");
    const char *un = u ? u->name : (unit ? unit : "");
    if (!un[0])
        snprintf(buf, buflen, "%s", num);
    else if (!strcmp(un, "%") || !strcmp(un, "x"))
        snprintf(buf, buflen, "%s%s", num, un);
    else
        snprintf(buf, buflen, "%s %s", num, un);
    return buf;
}

/* How many bytes a byte unit is, as a power ("2^30", "10^9"). */
static const char *bytes_words(const lsn_unit *u)
{
    static const struct { const char *name, *words; } t[] = {
        {"bytes", "1"}, {"KiB", "2^10"}, {"MiB", "2^20"}, {"GiB", "2^30"}, {"TiB", "2^40"},
        {"KB", "10^3"}, {"MB", "10^6"}, {"GB", "10^9"}, {"TB", "10^12"}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(u->name, t[i].name))
            return t[i].words;
    return "?";
}

/* The byte unit that pairs with u across the binary/decimal divide (GB<->GiB). */
static const lsn_unit *byte_twin(const lsn_unit *u)
{
    static const char *const pairs[][2] = {{"KB", "KiB"}, {"MB", "MiB"}, {"GB", "GiB"}, {"TB", "TiB"}};
    for (size_t i = 0; i < 4; i++) {
        if (!strcmp(u->name, pairs[i][0]))
            return lsn_unit_find(pairs[i][1]);
        if (!strcmp(u->name, pairs[i][1]))
            return lsn_unit_find(pairs[i][0]);
    }
    return NULL;
}

lsn_check_result lsn_answer_check_number(const lsn_numq *q, const char *text,
                                         double *value, char *msg, size_t msglen)
{
    if (value)
        *value = NAN;
    lsn_quantity a;
    if (lsn_answer_parse(text, &a, msg, msglen) < 0)
        return LSN_CHECK_UNREADABLE;
    const lsn_unit *qu = lsn_unit_find(q->unit ? q->unit : "");
    if (!qu)
        qu = lsn_unit_find("");
    /* API.md: a relative tolerance, or an absolute one (abs) when given alone */
    double rel = q->rel_tol > 0 ? q->rel_tol : q->abs_tol > 0 ? 0.0 : 0.01;
    double abs_tol = q->abs_tol > 0 ? q->abs_tol : 0;
    const lsn_unit *typed = a.unit ? a.unit : qu;
    char got[64];

    if (typed->dim != qu->dim) {
        snprintf(msg, msglen, "The question asks for %s (in %s), but you answered in %s.",
                 dim_name(qu->dim), qu->name[0] ? qu->name : "no unit", typed->name);
        return LSN_CHECK_WRONG;
    }
    double v = a.number * typed->scale / qu->scale;
    if (value)
        *value = v;
    lsn_answer_format(v, qu->name, got, sizeof got);

    if (close_to(v, q->answer, rel, abs_tol)) {
        snprintf(msg, msglen, "Right: %s.", got);
        return LSN_CHECK_CORRECT;
    }
    for (int i = 0; i < q->nnear; i++) {
        if (close_to(v, q->near[i].value, rel, abs_tol)) {
            snprintf(msg, msglen, "%s", q->near[i].why ? q->near[i].why : "Close, but that is a known mix-up.");
            return LSN_CHECK_NEAR_MISS;
        }
    }
    if (qu->dim == LSN_DIM_BYTES) {
        /* The right digits in the wrong byte unit. The binary/decimal pair
         * first: GB vs GiB is the mix-up that is easy to make. */
        const lsn_unit *twin = byte_twin(typed);
        if (twin && close_to(a.number * twin->scale / qu->scale, q->answer, rel, abs_tol)) {
            if (a.unit)
                snprintf(msg, msglen,
                         "Your number is right in %s, but you wrote %s. 1 %s = %s bytes while 1 %s = %s bytes, "
                         "%.1f%% apart: vLLM's logs count in GiB.",
                         twin->name, typed->name, typed->name, bytes_words(typed), twin->name,
                         bytes_words(twin), 100.0 * fabs(twin->scale / typed->scale - 1));
            else
                snprintf(msg, msglen, "That number fits if read as %s (1 %s = %s bytes), but the question counts "
                         "in %s (1 %s = %s bytes).",
                         twin->name, twin->name, bytes_words(twin), qu->name, qu->name, bytes_words(qu));
            return LSN_CHECK_NEAR_MISS;
        }
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
            const lsn_unit *u = &units[i];
            if (u->dim != LSN_DIM_BYTES || u == typed)
                continue;
            if (close_to(a.number * u->scale / qu->scale, q->answer, rel, abs_tol)) {
                snprintf(msg, msglen, "The digits are right but the unit is off: %g %s would be right, not %g %s.",
                         a.number, u->name, a.number, typed->name);
                return LSN_CHECK_NEAR_MISS;
            }
        }
    }
    if (!strcmp(qu->name, "%") && !a.unit && close_to(v * 100, q->answer, rel, abs_tol)) {
        snprintf(msg, msglen, "That is the fraction; give it as a percentage (%g%%).", a.number * 100);
        return LSN_CHECK_NEAR_MISS;
    }
    if (q->answer != 0 && v != 0 && (v / q->answer > 10 || q->answer / v > 10))
        snprintf(msg, msglen, "Not quite: %s is off by more than a factor of ten.", got);
    else
        snprintf(msg, msglen, "Not quite: %s is too %s.", got, v > q->answer ? "high" : "low");
    return LSN_CHECK_WRONG;
}

static void trim_copy(const char *s, char *out, size_t outl)
{
    s = skip_space(s ? s : "");
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    while (n && (s[n - 1] == '.' || s[n - 1] == ')'))
        n--;
    if (n >= outl)
        n = outl - 1;
    memcpy(out, s, n);
    out[n] = '\0';
}

lsn_check_result lsn_answer_check_choice(int nchoices, const char *const *choices,
                                         int correct, const char *const *why,
                                         const char *text, int *picked,
                                         char *msg, size_t msglen)
{
    char t[256];
    trim_copy(text, t, sizeof t);
    int pick = 0;
    if (picked)
        *picked = 0;
    if (!t[0]) {
        snprintf(msg, msglen, "Type a letter (a-%c), a number or the choice itself.", 'a' + nchoices - 1);
        return LSN_CHECK_UNREADABLE;
    }
    if (t[1] == '\0' && isalpha((unsigned char)t[0])) {
        int k = tolower((unsigned char)t[0]) - 'a' + 1;
        if (k >= 1 && k <= nchoices)
            pick = k;
    } else {
        char *end;
        long k = strtol(t, &end, 10);
        if (*end == '\0' && k >= 1 && k <= nchoices)
            pick = (int)k;
    }
    if (!pick) {
        int prefix_hits = 0, prefix_pick = 0;
        size_t tl = strlen(t);
        for (int i = 0; i < nchoices; i++) {
            if (!strcasecmp(choices[i], t)) {
                pick = i + 1;
                break;
            }
            if (tl >= 2 && !strncasecmp(choices[i], t, tl)) {
                prefix_hits++;
                prefix_pick = i + 1;
            }
        }
        if (!pick && prefix_hits == 1)
            pick = prefix_pick;
        if (!pick) {
            snprintf(msg, msglen, "%s'%s' is not one of the choices: type a letter (a-%c) or a number (1-%d).",
                     prefix_hits > 1 ? "Several choices start like that. " : "", t, 'a' + nchoices - 1, nchoices);
            return LSN_CHECK_UNREADABLE;
        }
    }
    if (picked)
        *picked = pick;
    if (pick == correct) {
        snprintf(msg, msglen, "Right: %s.", choices[pick - 1]);
        return LSN_CHECK_CORRECT;
    }
    if (why && why[pick - 1] && why[pick - 1][0]) {
        snprintf(msg, msglen, "%s", why[pick - 1]);
        return LSN_CHECK_NEAR_MISS;
    }
    snprintf(msg, msglen, "Not %s.", choices[pick - 1]);
    return LSN_CHECK_WRONG;
}
