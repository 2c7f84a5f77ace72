/* kv_vllm_flags: lookups over the generated table (kv_vllm_flags.h). */
#include "kv_vllm_flags.h"
#include "kv_release.h"

#include <stdio.h>
#include <string.h>

int kv_vllm_release_index(const char *version)
{
    if (!version || !*version)
        return kv_vllm_num_releases - 1;
    int best = -1;
    for (int i = 0; i < kv_vllm_num_releases; i++)
        if (kv_release_compare(kv_vllm_releases[i], version) <= 0)
            best = i;
    return best;
}

/* Is w one of the space-separated words of list? */
static int word_in(const char *list, const char *w)
{
    size_t n = strlen(w);
    for (const char *s = list; s && *s;) {
        size_t l = strcspn(s, " ");
        if (l == n && !strncmp(s, w, n))
            return 1;
        s += l;
        while (*s == ' ')
            s++;
    }
    return 0;
}

static const kv_vllm_flag *find_exact(const char *n)
{
    for (int i = 0; i < kv_vllm_num_flags; i++)
        if (!strcmp(kv_vllm_flags[i].name, n) || word_in(kv_vllm_flags[i].aliases, n))
            return &kv_vllm_flags[i];
    return NULL;
}

const kv_vllm_flag *kv_vllm_flag_find(const char *spelling, int *negated)
{
    char n[128];
    size_t j = 0;
    if (negated)
        *negated = 0;
    if (!spelling)
        return NULL;
    while (*spelling == '-')
        spelling++;
    for (; *spelling && *spelling != '=' && j + 1 < sizeof n; spelling++)
        n[j++] = *spelling == '_' ? '-' : *spelling;
    n[j] = '\0';
    const kv_vllm_flag *f = find_exact(n);
    if (f)
        return f;
    if (!strncmp(n, "no-", 3) && (f = find_exact(n + 3)) != NULL && kv_vllm_flag_negatable_from(f) >= 0) {
        if (negated)
            *negated = 1;
        return f;
    }
    return NULL;
}

int kv_vllm_flag_in(const kv_vllm_flag *f, int ri)
{
    if (!f || ri < 0 || ri >= kv_vllm_num_releases || ri >= 128)
        return 0;
    return (int)((f->releases[ri / 64] >> (ri % 64)) & 1u);
}

int kv_vllm_flag_shape(const kv_vllm_flag *f, int ri, int *nargs, int *negatable)
{
    if (!kv_vllm_flag_in(f, ri) || !f->shape || strlen(f->shape) <= (size_t)ri || f->shape[ri] < '0' ||
        f->shape[ri] > '7')
        return 0;
    int c = f->shape[ri] - '0';
    if (nargs)
        *nargs = c & 3;
    if (negatable)
        *negatable = c >> 2;
    return 1;
}

int kv_vllm_flag_negatable_from(const kv_vllm_flag *f)
{
    for (int i = 0; f && f->shape && f->shape[i]; i++)
        if (f->shape[i] >= '4' && f->shape[i] <= '7')
            return i;
    return -1;
}

size_t kv_vllm_flag_spans(const kv_vllm_flag *f, char *buf, size_t n)
{
    size_t len = 0;
    if (!n)
        return 0;
    buf[0] = '\0';
    int start = -1;
    for (int i = 0; i <= kv_vllm_num_releases; i++) {
        int on = i < kv_vllm_num_releases && kv_vllm_flag_in(f, i);
        if (on && start < 0)
            start = i;
        if (!on && start >= 0) {
            int w = i - 1 == start ? snprintf(buf + len, n - len, "%s%s", len ? ", " : "", kv_vllm_releases[start])
                                   : snprintf(buf + len, n - len, "%s%s-%s", len ? ", " : "", kv_vllm_releases[start],
                                              kv_vllm_releases[i - 1]);
            if (w < 0 || (size_t)w >= n - len)
                return strlen(buf);
            len += (size_t)w;
            start = -1;
        }
    }
    return len;
}

int kv_vllm_list_has(const char *list, const char *value)
{
    if (!list || !value)
        return 0;
    size_t n = strlen(value);
    for (const char *s = list; *s;) {
        size_t l = strcspn(s, "|");
        if (l == n && !strncmp(s, value, n))
            return 1;
        s += l;
        if (*s == '|')
            s++;
    }
    return 0;
}

size_t kv_vllm_list_quoted(const char *list, char *buf, size_t n)
{
    size_t len = 0;
    if (!n)
        return 0;
    buf[0] = '\0';
    for (const char *s = list ? list : ""; *s;) {
        size_t l = strcspn(s, "|");
        int w = snprintf(buf + len, n - len, "%s'%.*s'", len ? ", " : "", (int)l, s);
        if (w < 0 || (size_t)w >= n - len)
            return strlen(buf);
        len += (size_t)w;
        s += l;
        if (*s == '|')
            s++;
    }
    return len;
}

const kv_vllm_flag *kv_vllm_flag_prefix(const char *spelling, char *others, size_t n)
{
    char q[128];
    size_t j = 0;
    if (others && n)
        others[0] = '\0';
    if (!spelling)
        return NULL;
    while (*spelling == '-')
        spelling++;
    for (; *spelling && *spelling != '=' && j + 1 < sizeof q; spelling++)
        q[j++] = *spelling == '_' ? '-' : *spelling;
    q[j] = '\0';
    if (j < 2)
        return NULL;
    const kv_vllm_flag *hit = NULL;
    int count = 0;
    size_t len = 0;
    for (int i = 0; i < kv_vllm_num_flags; i++) {
        if (strncmp(kv_vllm_flags[i].name, q, j))
            continue;
        if (!count)
            hit = &kv_vllm_flags[i];
        if (others && n && len < n) {
            int w = snprintf(others + len, n - len, "%s--%s", count ? ", " : "", kv_vllm_flags[i].name);
            len = w < 0 ? n : len + (size_t)w;
        }
        count++;
    }
    return count == 1 ? hit : NULL;
}
