#include "lsn_quote.h"

#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every line kind of kv_release_text, by its place in the struct. */
static const size_t KINDS[] = {
    offsetof(kv_release_text, weights),         offsetof(kv_release_text, weights_v2),
    offsetof(kv_release_text, profile),         offsetof(kv_release_text, cudagraph_estimate),
    offsetof(kv_release_text, cudagraph_estimate_v2), offsetof(kv_release_text, available_kv),
    offsetof(kv_release_text, cudagraph_util),  offsetof(kv_release_text, gpu_blocks),
    offsetof(kv_release_text, kv_cache_size),   offsetof(kv_release_text, concurrency),
    offsetof(kv_release_text, graphs),          offsetof(kv_release_text, err_free_memory),
    offsetof(kv_release_text, err_no_kv_memory), offsetof(kv_release_text, err_max_model_len),
    offsetof(kv_release_text, err_sampler_oom), offsetof(kv_release_text, warn_fi_sampler),
    offsetof(kv_release_text, err_bf16),        offsetof(kv_release_text, warn_bf16_fallback),
};
#define NKINDS (sizeof KINDS / sizeof KINDS[0])

/* Wording that is not vLLM's but that every release prints the same way:
 * PyTorch's out-of-memory error (c10/cuda/CUDACachingAllocator.cpp, torch
 * 2.5 on, the torch of every release kvlab follows). */
static const char *const EXTERNAL[] = {
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {size}. GPU {n:d} has a total capacity of "
    "{total} of which {free} is free.",
};
#define NEXTERNAL (sizeof EXTERNAL / sizeof EXTERNAL[0])

/* How many opening characters of a template mark a quote of it. */
#define ANCHOR 20

static const char *tpl_of(const kv_release *r, size_t k)
{
    return r && r->text ? *(const char *const *)((const char *)r->text + KINDS[k]) : NULL;
}

/* The text without white space (a quote wrapped by fmt.quote, even inside
 * a word, reads the same). The caller frees. */
static char *squeeze_map(const char *s, size_t **map)
{
    size_t n = strlen(s);
    char *o = malloc(n + 1);
    size_t *m = map ? malloc((n + 1) * sizeof *m) : NULL;
    if (!o || (map && !m)) {
        free(o);
        free(m);
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!isspace((unsigned char)s[i])) {
            if (m)
                m[k] = i;
            o[k++] = s[i];
        }
    if (m)
        m[k] = n;
    o[k] = '\0';
    if (map)
        *map = m;
    return o;
}

static char *squeeze(const char *s) { return squeeze_map(s, NULL); }

/* The anchor of a template: its opening literal text (white space left
 * out), when it has ANCHOR characters before the first field. */
static int anchor_of(const char *tpl, char *out)
{
    if (!tpl)
        return 0;
    size_t k = 0;
    for (const char *t = tpl; k < ANCHOR; t++) {
        if (!*t || *t == '{')
            return 0;
        if (!isspace((unsigned char)*t))
            out[k++] = *t;
    }
    out[k] = '\0';
    return 1;
}

/* Where a quote may stop short of its template. */
static int quote_ends(const char *p)
{
    return !*p || !strncmp(p, "...", 3) || !strncmp(p, "\xe2\x80\xa6", 3) || *p == '"' ||
           !strncmp(p, "\xe2\x80\x9d", 3);
}

/* Does the page at p (white space left out) follow the template from t (white
 * space left out too) as far as the quote goes? A field stands for up to 80
 * characters before the template's next literal text. */
static int follows(const char *p, const char *t)
{
    while (*t) {
        if (*t == '{') {
            const char *close = strchr(t, '}');
            if (!close)
                return 1;
            t = close + 1;
            size_t lit = strcspn(t, "{");
            if (lit == 0) {
                /* a field at the end, or two in a row: the quote's figure */
                while (*p && !quote_ends(p) && (isalnum((unsigned char)*p) || strchr(".,_-/:%", *p)))
                    p++;
                continue;
            }
            size_t want = lit < 8 ? lit : 8;
            const char *hit = NULL;
            for (int k = 0; k <= 80 && p[k]; k++)
                if (!strncmp(p + k, t, want)) {
                    hit = p + k;
                    break;
                }
            if (!hit) {
                for (int k = 0; k <= 80; k++) /* the quote may end inside the field */
                    if (quote_ends(p + k))
                        return 1;
                return 0;
            }
            p = hit;
            continue;
        }
        if (quote_ends(p))
            return 1;
        if (*p != *t)
            return 0;
        p++;
        t++;
    }
    return 1;
}

/* Does the page at p follow template tpl from any place where the quote's
 * anchor stands in it (a quote may begin inside a line: 0.28 on logs the
 * concurrency after the cache size, on one line)? */
static int follows_tpl(const char *p, const char *tpl, const char *anchor)
{
    char *t = tpl ? squeeze(tpl) : NULL;
    int ok = 0;
    for (const char *at = t ? strstr(t, anchor) : NULL; at && !ok; at = strstr(at + 1, anchor))
        ok = follows(p, at);
    free(t);
    return ok;
}

/* Is row r one the page names ("vLLM 0.33.0", "vLLM 0.11")? */
static int named(const char *page, const kv_release *r)
{
    for (const char *p = strstr(page, "vLLM "); p; p = strstr(p + 1, "vLLM ")) {
        char v[32];
        size_t n = 0;
        for (const char *q = p + 5; n + 1 < sizeof v && (isdigit((unsigned char)*q) || *q == '.'); q++)
            v[n++] = *q;
        while (n && v[n - 1] == '.')
            n--;
        v[n] = '\0';
        char err[128];
        if (n && kv_release_find(v, err, sizeof err) == r)
            return 1;
    }
    return 0;
}

static int accepted_follows(const char *p, const char *anchor, const char *page, const kv_release *chosen)
{
    const kv_release *v0 = kv_release_v0_fallback(chosen); /* an old card's V0 engine */
    for (size_t k = 0; k < NKINDS; k++)
        if (follows_tpl(p, tpl_of(chosen, k), anchor) || (v0 && follows_tpl(p, tpl_of(v0, k), anchor)))
            return 1;
    for (int i = 0; i < kv_release_count(); i++) {
        const kv_release *r = kv_release_at(i);
        if (r == chosen || !named(page, r))
            continue;
        for (size_t k = 0; k < NKINDS; k++)
            if (follows_tpl(p, tpl_of(r, k), anchor))
                return 1;
    }
    for (size_t e = 0; e < NEXTERNAL; e++)
        if (follows_tpl(p, EXTERNAL[e], anchor))
            return 1;
    return 0;
}

/* The chosen row's template that opens like the quote's kind (for the
 * message), or NULL. */
static const char *chosen_wording(const kv_release *chosen, size_t kind)
{
    return tpl_of(chosen, kind);
}

int lsn_quote_check(const char *page_in, const kv_release *chosen, char *msg, size_t msglen)
{
    const char *orig = page_in ? page_in : "";
    size_t *map = NULL;
    char *page = squeeze_map(orig, &map);
    if (!page)
        return 0;
    int rc = 0;
    char anchor[ANCHOR + 1];
    /* every anchor of every row (the textbook's too), and torch's */
    int nrows = kv_release_count() + 1;
    for (int i = 0; i <= nrows && !rc; i++) {
        const kv_release *r = i < nrows - 1 ? kv_release_at(i) : i == nrows - 1 ? kv_release_textbook() : NULL;
        size_t nk = r ? NKINDS : NEXTERNAL;
        for (size_t k = 0; k < nk && !rc; k++) {
            if (!anchor_of(r ? tpl_of(r, k) : EXTERNAL[k], anchor))
                continue;
            for (const char *p = strstr(page, anchor); p && !rc; p = strstr(p + 1, anchor)) {
                if (accepted_follows(p, anchor, orig, chosen))
                    continue;
                char label[64];
                const char *want = r ? chosen_wording(chosen, k) : NULL;
                /* the quote as the page has it, on one line */
                char shown[96];
                size_t at = map[p - page], n = 0;
                for (; orig[at] && n + 1 < sizeof shown; at++)
                    if (!(isspace((unsigned char)orig[at]) && n && shown[n - 1] == ' '))
                        shown[n++] = isspace((unsigned char)orig[at]) ? ' ' : orig[at];
                shown[n] = '\0';
                snprintf(msg, msglen, "the page quotes \"%s\", which is not how %s words it%s%.160s%s",
                         shown, kv_release_label(chosen, label, sizeof label), want ? " (its template: \"" : "",
                         want ? want : "", want ? "\")" : ": it has no such line");
                rc = -1;
            }
        }
    }
    free(page);
    free(map);
    return rc;
}
