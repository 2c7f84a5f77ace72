#include "lsn_figures.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The units a figure may carry, and the name two spellings share. */
static const struct {
    const char *word, *unit;
} UNITS[] = {
    {"tokens", "tokens"}, {"token", "tokens"}, {"GiB", "GiB"}, {"MiB", "MiB"}, {"KiB", "KiB"}, {"GB", "GB"},
    {"%", "%"},          {"x", "x"},          {"requests", "requests"}, {"request", "requests"},
    {"blocks", "blocks"}, {"block", "blocks"},
};

typedef struct figure {
    char text[40];
    const char *unit;
    double value;
    int decimals;
} figure;

#define MAX_FIGURES 1024

/* A unit word at p (after at most one space), ending at a non-word byte. */
static const char *unit_at(const char *p)
{
    if (*p == ' ')
        p++;
    for (size_t i = 0; i < sizeof UNITS / sizeof UNITS[0]; i++) {
        size_t n = strlen(UNITS[i].word);
        if (!strncmp(p, UNITS[i].word, n) && !isalnum((unsigned char)p[n]))
            return UNITS[i].unit;
    }
    return NULL;
}

/* Is the line holding p the learner's own entry? */
static int learners_line(const char *page, const char *p)
{
    const char *line = p;
    while (line > page && line[-1] != '\n')
        line--;
    return !strncmp(line, "Your answer", 11) || !strncmp(line, "You predicted", 13) ||
           !strncmp(line, "Your prediction", 15);
}

static int collect(const char *page, figure *f, int max)
{
    int n = 0;
    for (const char *p = page; *p && n < max; p++) {
        if (!isdigit((unsigned char)*p) || (p > page && (isalnum((unsigned char)p[-1]) || p[-1] == '.' ||
                                                           p[-1] == ',' || p[-1] == '_')))
            continue;
        /* digits, groups of three after commas, one decimal part */
        const char *q = p;
        char num[40];
        size_t k = 0;
        while (isdigit((unsigned char)*q) && k + 1 < sizeof num)
            num[k++] = *q++;
        while (q[0] == ',' && isdigit((unsigned char)q[1]) && isdigit((unsigned char)q[2]) &&
               isdigit((unsigned char)q[3]) && !isdigit((unsigned char)q[4]) && k + 4 < sizeof num) {
            memcpy(num + k, q + 1, 3);
            k += 3;
            q += 4;
        }
        int dec = 0;
        if (q[0] == '.' && isdigit((unsigned char)q[1])) {
            num[k++] = *q++;
            while (isdigit((unsigned char)*q) && k + 1 < sizeof num) {
                num[k++] = *q++;
                dec++;
            }
        }
        num[k] = '\0';
        const char *u = unit_at(q);
        if (u && !learners_line(page, p)) {
            size_t len = (size_t)(q - p);
            snprintf(f[n].text, sizeof f[n].text, "%.*s %s", (int)(len < 24 ? len : 24), p, u);
            f[n].unit = u;
            f[n].value = strtod(num, NULL);
            f[n].decimals = dec;
            n++;
        }
        p = q - 1 > p ? q - 1 : p;
    }
    return n;
}

/* The figure (digits, commas, one decimal point) at p: its length, 0 if none. */
static size_t figure_len(const char *p)
{
    size_t n = 0;
    while (isdigit((unsigned char)p[n]) || ((p[n] == ',' || p[n] == '.') && n > 0 && isdigit((unsigned char)p[n + 1])))
        n++;
    return n;
}

/* "went from 2.53 to 2.53 GiB": a move from a figure to itself claims a
 * change the figures deny. Returns 0, or -1 with msg. */
static int check_moves(const char *page, char *msg, size_t msglen)
{
    for (const char *p = strstr(page, "from "); p; p = strstr(p + 1, "from ")) {
        if (p > page && isalnum((unsigned char)p[-1]))
            continue;
        const char *a = p + 5;
        size_t na = figure_len(a);
        if (!na || strncmp(a + na, " to ", 4))
            continue;
        const char *b = a + na + 4;
        size_t nb = figure_len(b);
        if (na == nb && !strncmp(a, b, na) && !isalnum((unsigned char)b[nb])) {
            snprintf(msg, msglen, "the page says a figure went from %.*s to %.*s: a move to the same figure is "
                                  "no move (name what did change)", (int)na, a, (int)nb, b);
            return -1;
        }
    }
    return 0;
}

/* The figure (digits, commas, one point) that ends just before end, or
 * starts at p: its text in out (empty when there is none). */
static void figure_before(const char *page, const char *end, char *out, size_t outl)
{
    const char *b = end;
    while (b > page && (isdigit((unsigned char)b[-1]) || b[-1] == ',' || b[-1] == '.'))
        b--;
    while (b < end && !isdigit((unsigned char)*b))
        b++;
    snprintf(out, outl, "%.*s", (int)(end - b), b);
}

static void figure_at(const char *p, char *out, size_t outl)
{
    const char *e = p;
    while (isdigit((unsigned char)*e) || ((*e == ',' || *e == '.') && isdigit((unsigned char)e[1])))
        e++;
    snprintf(out, outl, "%.*s", (int)(e - p), p);
}

/* "A, not A": a page that sets a figure against itself (lesson 5 said
 * "106,944 x 4 = 427,776, not 427,776" where the blocks divided evenly). */
static int not_itself(const char *page, char *msg, size_t msglen)
{
    for (const char *p = strstr(page, ", not "); p; p = strstr(p + 1, ", not ")) {
        char a[40], b[40];
        figure_before(page, p, a, sizeof a);
        figure_at(p + 6, b, sizeof b);
        if (a[0] && !strcmp(a, b)) {
            snprintf(msg, msglen, "the page says %s, not %s: a figure set against itself (say what differs, or "
                                  "that nothing does)", a, b);
            return -1;
        }
    }
    return 0;
}

int lsn_figures_check(const char *page, char *msg, size_t msglen)
{
    if (page && check_moves(page, msg, msglen) < 0)
        return -1;
    if (page && not_itself(page, msg, msglen) < 0)
        return -1;
    figure *f = malloc(MAX_FIGURES * sizeof *f);
    if (!f)
        return 0;
    int n = collect(page ? page : "", f, MAX_FIGURES), rc = 0;
    for (int i = 0; i < n && !rc; i++)
        for (int j = i + 1; j < n && !rc; j++) {
            const figure *a = &f[i], *b = &f[j];
            if (a->unit != b->unit || a->value == b->value)
                continue;
            int d = a->decimals < b->decimals ? a->decimals : b->decimals;
            double s = pow(10, d);
            int same_digits = a->decimals != b->decimals && round(a->value * s) == round(b->value * s);
            double big = fmax(fabs(a->value), fabs(b->value));
            int near = a->decimals == 0 && b->decimals == 0 && big >= 1000 && fabs(a->value - b->value) / big < 0.002;
            if (same_digits || near) {
                snprintf(msg, msglen, "the page shows %s and %s: %s (one quantity shows one figure; two quantities "
                                      "need figures that tell them apart)", a->text, b->text,
                         same_digits ? "the same figure at two precisions" : "two figures within 0.2%");
                rc = -1;
            }
        }
    free(f);
    return rc;
}
