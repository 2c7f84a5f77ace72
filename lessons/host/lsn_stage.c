#include "lsn_stage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const lsn_view_names[LSN_NVIEWS] = {"text", "pool", "memory", "flags", "metrics",
                                                "log", "tp", "plot", "requests"};

/* ---- strings ---------------------------------------------------------------- */

void lsn_sb_clear(lsn_strbuf *b)
{
    b->len = 0;
    if (b->s)
        b->s[0] = '\0';
}

int lsn_sb_add(lsn_strbuf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *ns = realloc(b->s, cap);
        if (!ns)
            return -1;
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
    return 0;
}

void lsn_sb_free(lsn_strbuf *b)
{
    free(b->s);
    memset(b, 0, sizeof *b);
}

static char *xstrdup(const char *s)
{
    return strdup(s ? s : "");
}

static void free_strv(char **v, int n)
{
    if (!v)
        return;
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* ---- narration ---------------------------------------------------------------- */

void lsn_text_clean(char *s, size_t n, int keep_newlines)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && !(c == '\n' && keep_newlines)) || c == 0x7f)
            s[i] = ' ';
        else if (c == 0xc2 && i + 1 < n && (unsigned char)s[i + 1] >= 0x80 && (unsigned char)s[i + 1] <= 0x9f)
            s[i] = s[i + 1] = ' ';
    }
}

static void split_clear(lsn_stage *st)
{
    free(st->split_frames);
    free((char *)st->split.link);
    st->split_frames = NULL;
    memset(&st->split, 0, sizeof st->split);
    st->split_on = 0;
}

int lsn_stage_split(lsn_stage *st, const lsn_split *sp, const lsn_split_frame *frames, int n)
{
    split_clear(st);
    if (n < 1 || n > LSN_SPLIT_FRAMES)
        return -1;
    lsn_split_frame *f = malloc((size_t)n * sizeof *f);
    char *link = strdup(sp->link ? sp->link : "");
    if (!f || !link) {
        free(f);
        free(link);
        return -1;
    }
    memcpy(f, frames, (size_t)n * sizeof *f);
    st->split = *sp;
    st->split.link = link;
    st->split.frames = st->split_frames = f;
    st->split.nframes = n;
    st->split_on = 1;
    return 0;
}

const lsn_split *lsn_stage_get_split(const lsn_stage *st)
{
    return st->split_on ? &st->split : NULL;
}

void lsn_stage_page(lsn_stage *st, const char *title)
{
    split_clear(st);
    lsn_sb_clear(&st->text);
    snprintf(st->page_title, sizeof st->page_title, "%s", title ? title : "");
    lsn_text_clean(st->page_title, strlen(st->page_title), 0);
    st->page_no++;
}

int lsn_stage_say(lsn_stage *st, const char *s, size_t len)
{
    if (st->text.len + len + 2 > LSN_PAGE_MAX_BYTES)
        return -1;
    if (st->text.len && lsn_sb_add(&st->text, "\n\n", 2) < 0)
        return -1;
    size_t at = st->text.len;
    if (lsn_sb_add(&st->text, s, len) < 0)
        return -1;
    lsn_text_clean(st->text.s + at, len, 1);
    return 0;
}

/* ---- views -------------------------------------------------------------------- */

static void view_sync(lsn_stage_view *v)
{
    v->pub.highlights = v->hl;
    v->pub.nhighlights = v->nhl;
    v->pub.option_keys = (const char *const *)v->keys;
    v->pub.option_values = (const char *const *)v->vals;
    v->pub.noptions = v->nopt;
}

lsn_stage_view *lsn_stage_view_get(lsn_stage *st, const char *name)
{
    for (int i = 0; i < LSN_NVIEWS; i++)
        if (name && !strcmp(lsn_view_names[i], name))
            return &st->views[i];
    return NULL;
}

const lsn_stage_view *lsn_stage_view_find(const lsn_stage *st, const char *name)
{
    return lsn_stage_view_get((lsn_stage *)st, name);
}

int lsn_stage_view_option(lsn_stage_view *v, const char *k, const char *val)
{
    for (int i = 0; i < v->nopt; i++) {
        if (!strcmp(v->keys[i], k)) {
            char *nv = xstrdup(val);
            if (!nv)
                return -1;
            free(v->vals[i]);
            v->vals[i] = nv;
            return 0;
        }
    }
    if (v->nopt >= LSN_MAX_OPTIONS)
        return -1;
    char **nk = realloc(v->keys, (size_t)(v->nopt + 1) * sizeof *nk);
    if (!nk)
        return -1;
    v->keys = nk;
    char **nv = realloc(v->vals, (size_t)(v->nopt + 1) * sizeof *nv);
    if (!nv)
        return -1;
    v->vals = nv;
    char *ks = xstrdup(k), *vs = xstrdup(val);
    if (!ks || !vs) {
        free(ks);
        free(vs);
        return -1;
    }
    v->keys[v->nopt] = ks;
    v->vals[v->nopt] = vs;
    v->nopt++;
    view_sync(v);
    return 0;
}

int lsn_stage_view_highlight(lsn_stage_view *v, const char *target, const int64_t *ids, int nids, const char *note)
{
    if (v->nhl >= LSN_MAX_HIGHLIGHTS || nids > LSN_MAX_IDS)
        return -1;
    if (v->nhl == v->caphl) {
        int cap = v->caphl ? v->caphl * 2 : 4;
        lsn_highlight *nh = realloc(v->hl, (size_t)cap * sizeof *nh);
        if (!nh)
            return -1;
        v->hl = nh;
        v->caphl = cap;
        view_sync(v);
    }
    lsn_highlight h = {xstrdup(target), NULL, 0, xstrdup(note)};
    int64_t *c = nids > 0 ? malloc((size_t)nids * sizeof *c) : NULL;
    if (!h.target || !h.note || (nids > 0 && !c)) {
        free((char *)h.target);
        free((char *)h.note);
        free(c);
        return -1;
    }
    if (c) {
        memcpy(c, ids, (size_t)nids * sizeof *c);
        h.ids = c;
        h.nids = nids;
    }
    v->hl[v->nhl++] = h;
    view_sync(v);
    return 0;
}

void lsn_stage_view_unhighlight(lsn_stage_view *v)
{
    for (int i = 0; i < v->nhl; i++) {
        free((char *)v->hl[i].target);
        free((char *)v->hl[i].note);
        free((int64_t *)v->hl[i].ids);
    }
    v->nhl = 0;
    view_sync(v);
}

void lsn_stage_focus(lsn_stage *st, lsn_stage_view *v)
{
    for (int i = 0; i < LSN_NVIEWS; i++)
        st->views[i].pub.focus = 0;
    v->pub.focus = 1;
    v->pub.shown = 1;
}

const lsn_view *lsn_stage_views(lsn_stage *st)
{
    for (int i = 0; i < LSN_NVIEWS; i++)
        st->pub_views[i] = st->views[i].pub;
    return st->pub_views;
}

/* ---- plot ---------------------------------------------------------------------- */

void lsn_stage_plot_clear(lsn_stage *st)
{
    for (int i = 0; i < st->nseries; i++) {
        free(st->series[i].name);
        free(st->series[i].x);
        free(st->series[i].y);
    }
    free(st->series);
    free(st->pub_series);
    st->series = NULL;
    st->pub_series = NULL;
    st->nseries = 0;
    free(st->plot_title);
    free(st->plot_xlabel);
    free(st->plot_ylabel);
    st->plot_title = st->plot_xlabel = st->plot_ylabel = NULL;
    st->plot_logy = 0;
    st->plot_on = 0;
}

void lsn_stage_plot(lsn_stage *st, const char *title, const char *xlabel, const char *ylabel, int logy)
{
    lsn_stage_plot_clear(st);
    st->plot_title = title ? strdup(title) : NULL;
    st->plot_xlabel = xlabel ? strdup(xlabel) : NULL;
    st->plot_ylabel = ylabel ? strdup(ylabel) : NULL;
    st->plot_logy = logy;
    st->plot_on = 1;
}

int lsn_stage_series(lsn_stage *st, const char *name)
{
    for (int i = 0; i < st->nseries; i++)
        if (!strcmp(st->series[i].name, name))
            return i;
    if (st->nseries >= LSN_MAX_SERIES)
        return -1;
    lsn_stage_line *ns = realloc(st->series, (size_t)(st->nseries + 1) * sizeof *ns);
    if (!ns)
        return -1;
    st->series = ns;
    lsn_series *np = realloc(st->pub_series, (size_t)(st->nseries + 1) * sizeof *np);
    if (!np)
        return -1;
    st->pub_series = np;
    memset(&st->series[st->nseries], 0, sizeof st->series[0]);
    if (!(st->series[st->nseries].name = strdup(name)))
        return -1;
    st->plot_on = 1;
    return st->nseries++;
}

int lsn_stage_plot_add(lsn_stage *st, int si, double x, double y)
{
    if (si < 0 || si >= st->nseries)
        return -1;
    lsn_stage_line *s = &st->series[si];
    if (s->n >= LSN_MAX_POINTS)
        return -1;
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 64;
        double *nx = realloc(s->x, (size_t)cap * sizeof *nx);
        if (!nx)
            return -1;
        s->x = nx;
        double *ny = realloc(s->y, (size_t)cap * sizeof *ny);
        if (!ny)
            return -1;
        s->y = ny;
        s->cap = cap;
    }
    s->x[s->n] = x;
    s->y[s->n] = y;
    s->n++;
    return 0;
}

const lsn_plot *lsn_stage_get_plot(lsn_stage *st)
{
    if (!st->plot_on)
        return NULL;
    for (int i = 0; i < st->nseries; i++) {
        st->pub_series[i].name = st->series[i].name;
        st->pub_series[i].npoints = st->series[i].n;
        st->pub_series[i].x = st->series[i].x;
        st->pub_series[i].y = st->series[i].y;
    }
    st->pub_plot.title = st->plot_title ? st->plot_title : "";
    st->pub_plot.xlabel = st->plot_xlabel ? st->plot_xlabel : "";
    st->pub_plot.ylabel = st->plot_ylabel ? st->plot_ylabel : "";
    st->pub_plot.logy = st->plot_logy;
    st->pub_plot.nseries = st->nseries;
    st->pub_plot.series = st->pub_series;
    return &st->pub_plot;
}

/* ---- whole stage ----------------------------------------------------------------- */

static void views_reset(lsn_stage *st)
{
    for (int i = 0; i < LSN_NVIEWS; i++) {
        lsn_stage_view *v = &st->views[i];
        lsn_stage_view_unhighlight(v);
        free(v->hl);
        free_strv(v->keys, v->nopt);
        free_strv(v->vals, v->nopt);
        memset(v, 0, sizeof *v);
        v->pub.name = lsn_view_names[i];
        v->pub.shown = i == 0; /* text is always shown */
        view_sync(v);
    }
}

void lsn_stage_reset(lsn_stage *st)
{
    split_clear(st);
    views_reset(st);
    lsn_stage_plot_clear(st);
    lsn_sb_clear(&st->text);
    st->page_title[0] = '\0';
    st->page_no = 0;
}

void lsn_stage_free(lsn_stage *st)
{
    lsn_stage_reset(st);
    lsn_sb_free(&st->text);
}
