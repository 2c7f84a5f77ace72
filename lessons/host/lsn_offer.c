#include "lsn_offer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_args.h"
#include "kv_release.h"

/* The runner's rows: their values are not the server's (lsn_offer_set_value). */
static int own_row(const char *name) { return !strcmp(name, "vllm-version") || !strcmp(name, "accounting"); }

static void free_strv(char **v, int n)
{
    if (!v)
        return;
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void lsn_offer_clear(lsn_offer *o)
{
    free_strv(o->allowed, o->nallowed);
    free_strv(o->values, o->nflags);
    for (int i = 0; i < o->nflags; i++)
        free_strv((char **)o->flags[i].choices, o->flags[i].nchoices);
    free(o->flags);
    memset(o, 0, sizeof *o);
}

int lsn_offer_allow(lsn_offer *o, const char *name)
{
    if (name && !strcmp(name, "*")) {
        o->allow_all = 1;
        return 0;
    }
    const char *canon = NULL;
    if (!name || !lsn_server_flag_info(name, &canon, NULL, NULL))
        return -1;
    char **na = realloc(o->allowed, (size_t)(o->nallowed + 1) * sizeof *na);
    if (!na)
        return -1;
    o->allowed = na;
    if (!(o->allowed[o->nallowed] = strdup(canon)))
        return -1;
    o->nallowed++;
    return 0;
}

int lsn_offer_allows(const lsn_offer *o, const char *name)
{
    const char *canon = NULL;
    if (!lsn_server_flag_info(name, &canon, NULL, NULL))
        return 0;
    if (o->allow_all || own_row(canon))
        return 1;
    for (int i = 0; i < o->nallowed; i++)
        if (!strcmp(o->allowed[i], canon))
            return 1;
    return 0;
}

int lsn_offer_set_value(lsn_offer *o, const char *name, const char *value)
{
    for (int i = 0; i < o->nflags; i++) {
        if (strcmp(o->flags[i].name, name) || (o->values[i] && !strcmp(o->values[i], value)))
            continue;
        char *nv = strdup(value);
        if (!nv)
            return 0;
        free(o->values[i]);
        o->values[i] = nv;
        o->flags[i].value = nv;
        return 1;
    }
    return 0;
}


int lsn_offer_sync(lsn_offer *o, const lsn_server *s)
{
    int changed = 0;
    for (int i = 0; i < o->nflags; i++) {
        if (own_row(o->flags[i].name) && o->values[i])
            continue;
        char buf[512];
        lsn_server_get(s, o->flags[i].name, buf, sizeof buf);
        if (!o->values[i] || strcmp(o->values[i], buf)) {
            char *nv = strdup(buf);
            if (!nv)
                continue;
            free(o->values[i]);
            o->values[i] = nv;
            o->flags[i].value = nv;
            changed = 1;
        }
    }
    return changed;
}

static void add_flag(lsn_offer *o, const char *name)
{
    const char *canon = NULL, *help = NULL, *choices = NULL;
    if (!lsn_server_flag_info(name, &canon, &help, &choices))
        return;
    for (int i = 0; i < o->nflags; i++)
        if (!strcmp(o->flags[i].name, canon))
            return;
    lsn_flag *nf = realloc(o->flags, (size_t)(o->nflags + 1) * sizeof *nf);
    if (!nf)
        return;
    o->flags = nf;
    char **nv = realloc(o->values, (size_t)(o->nflags + 1) * sizeof *nv);
    if (!nv)
        return;
    o->values = nv;
    lsn_flag *f = &o->flags[o->nflags];
    memset(f, 0, sizeof *f);
    f->name = canon;
    f->help = help ? help : "";
    f->value = "";
    o->values[o->nflags] = NULL;
    char releases[1024];
    if (!strcmp(canon, "vllm-version")) { /* the row steps through the release table's rows */
        size_t at = (size_t)snprintf(releases, sizeof releases, "textbook");
        for (int i = 0; i < kv_release_count() && at < sizeof releases; i++)
            at += (size_t)snprintf(releases + at, sizeof releases - at, "|%s", kv_release_at(i)->first);
        choices = releases;
    }
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
    o->nflags++;
}

void lsn_offer_build(lsn_offer *o, const lsn_server *s)
{
    /* The playground lists the flags learners reach for first, then the rest. */
    static const char *const first[] = {"model", "gpu", "gpu-memory-utilization", "max-model-len",
                                        "max-num-seqs", "max-num-batched-tokens", "tensor-parallel-size",
                                        "request-rate", "traffic-prompt", "traffic-output",
                                        "kv-cache-dtype", "quantization", "block-size", "enable-prefix-caching",
                                        "enforce-eager", "kv-cache", "contiguous", "kv-heads"};
    if (o->allow_all) {
        for (size_t i = 0; i < sizeof first / sizeof first[0]; i++)
            add_flag(o, first[i]);
        for (int i = 0; i < kv_args_flag_count(); i++) {
            const kv_args_flag *f = kv_args_flag_at(i);
            if (f && f->kind != KV_ARG_NOTE && f->kind != KV_ARG_NOTE_BOOL && f->kind != KV_ARG_REFUSED)
                add_flag(o, f->name);
        }
    } else {
        for (int i = 0; i < o->nallowed; i++)
            add_flag(o, o->allowed[i]);
    }
    add_flag(o, "vllm-version"); /* every lesson: the learner's release, last */
    lsn_offer_sync(o, s);
}
