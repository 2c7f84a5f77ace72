/* kvlab fit MODEL [--context N] [--concurrency C] [--gpus LIST] [--tp LIST]
 * [--sweep FLAG=V1,V2,...] [vLLM flags] [--json]: which cards and tensor-
 * parallel sizes serve C requests of N tokens at once. One plan per card x
 * tp (x each swept value), the same plan `kvlab serve` makes; each row says
 * whether vLLM starts, the KV tokens, how many requests of the context fit
 * at once, the headroom over the target, what limits it and what would make
 * a row that misses fit, and the cheapest row that meets the target. Exit 0
 * when some row fits, 1 when none does, 2 bad input. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "kv_args.h"
#include "kv_gpu.h"
#include "kv_model.h"
#include "kv_plan.h"
#include "kv_release.h"
#include "kv_util.h"
#include "plan_inputs.h"

#define FIT_MAX_LIST 64

static void fit_usage(FILE *f)
{
    fprintf(f,
            "usage: kvlab fit MODEL [--context N] [--concurrency C] [--gpus LIST] [--tp LIST]\n"
            "                 [--sweep FLAG=V1,V2,...] [vLLM flags] [--json]\n"
            "  one row per card x tensor-parallel size: does vLLM start, its KV tokens, how many\n"
            "  requests of N tokens fit at once, the headroom over C, what limits it and, for a\n"
            "  row that misses, what would make it fit (fp8 KV cache, a larger tp, a bigger card);\n"
            "  then the cheapest row that serves C requests of N tokens at once.\n"
            "  --context N       tokens per request (default: --max-model-len, else the model's own);\n"
            "                    also the --max-model-len planned with unless that flag is given\n"
            "  --concurrency C   requests of that length at once (default 1)\n"
            "  --gpus LIST       cards, comma-separated ids or aliases (default: the whole catalogue)\n"
            "  --tp LIST         tensor-parallel sizes (default 1,2,4,8)\n"
            "  --sweep FLAG=V1,V2,...  repeat the table for each value of one vLLM flag\n"
            "  --json            one object: rows (gpu, tensor_parallel_size, fits, kv_cache_tokens,\n"
            "                    max_concurrency, kv_needed_gib, fits_with, ...) and cheapest\n"
            "  vLLM flags and --vllm-version as for kvlab serve (not --gpu or --tensor-parallel-size)\n"
            "cheapest: the fewest cards, then the smallest card (its memory: the catalogue has no\n"
            "prices), then the most KV tokens. Pipeline parallelism is not planned (pp 1).\n"
            "exit 0: some row fits; 1: none does; 2: bad input\n");
}

/* Split "a,b,c" into at most max items (pointers into a copy kept in buf). */
static int split_list(const char *s, char *buf, size_t buflen, char **items, int max)
{
    snprintf(buf, buflen, "%s", s);
    int n = 0;
    for (char *t = strtok(buf, ","); t && n < max; t = strtok(NULL, ","))
        if (*t)
            items[n++] = t;
    return n;
}

/* A change that makes a row that misses fit: one flag on the same cards,
 * more cards of the kind, or a bigger card. */
typedef struct fit_alt {
    char change[64];        /* the flag: "--kv-cache-dtype fp8", "--tensor-parallel-size 2", "--gpu h100-nvl-94gb" */
    char text[48];          /* the table's short form: "--kv-cache-dtype fp8", "tp 2", "h100-nvl-94gb" */
    int cards;
    int64_t kv_cache_tokens;
    double max_concurrency;
} fit_alt;

#define FIT_MAX_ALTS 3

typedef struct fit_row {
    const kv_gpu *gpu;
    int tp;
    const char *sweep;      /* the swept value, or NULL */
    int valid;              /* 0: kvlab refuses the combination (limit says why) */
    int starts;
    int fits;
    kv_plan_error error_kind;
    int64_t kv_cache_tokens;
    double max_concurrency; /* requests of the context at once */
    double headroom;        /* (at once - C) / C */
    double kv_gib;
    double kv_need_gib;     /* KV memory per GPU that C requests of N tokens need */
    int kv_dtype_bytes;
    int nalt;
    fit_alt alt[FIT_MAX_ALTS];
    char limit[600];
} fit_row;

/* What every plan of one run shares. */
typedef struct fit_ctx {
    const kv_model *m;
    const kv_args *base;    /* the flags, --max-model-len the context */
    const char *sweep_flag; /* NULL without --sweep */
    int64_t context, conc;
} fit_ctx;

/* The plan of card g at tp with the swept value sval (or NULL) and one more
 * flag (flag NULL: none). 0, or -1 with err when kvlab refuses the line. */
static int fit_plan(const fit_ctx *x, const kv_gpu *g, int tp, const char *sval, const char *flag, const char *val,
                    kv_plan *p, char *err, size_t errlen)
{
    kv_args a = *x->base;
    char tv[16];
    snprintf(tv, sizeof tv, "%d", tp);
    if (kv_args_set(&a, "tensor-parallel-size", tv, err, errlen) < 0 ||
        (sval && kv_args_set(&a, x->sweep_flag, sval, err, errlen) < 0) ||
        (flag && kv_args_set(&a, flag, val, err, errlen) < 0))
        return -1;
    return kv_plan_compute_nofix(x->m, g, &a, p, err, errlen) == KV_PLAN_OK ? 0 : -1;
}

/* vLLM starts and holds conc requests of the context at once. */
static int plan_fits(const kv_plan *p, int64_t conc)
{
    return p->starts && p->max_concurrency + 1e-9 >= (double)conc && p->max_num_seqs >= conc;
}

static void row_limit(fit_row *r, const kv_plan *p, int64_t context, int64_t conc)
{
    char a[32], b[32];
    if (!r->starts) {
        switch (p->error_kind) {
        case KV_PLAN_ERR_WEIGHTS_OOM:
            snprintf(r->limit, sizeof r->limit, "weights: %.2f GiB per card do not fit its %.2f GiB",
                     p->weights_bytes / KV_GIB, p->gpu_total_bytes / KV_GIB);
            break;
        case KV_PLAN_ERR_MAX_MODEL_LEN:
            kv_fmt_thousands(a, sizeof a, context);
            kv_fmt_thousands(b, sizeof b, p->estimated_max_model_len);
            snprintf(r->limit, sizeof r->limit, "KV cache: one %s-token request needs %.2f GiB, %.2f left (%s fit)",
                     a, (double)p->needed_bytes / KV_GIB, p->available_kv_bytes / KV_GIB, b);
            break;
        case KV_PLAN_ERR_NO_KV_MEMORY:
            snprintf(r->limit, sizeof r->limit, "no memory left for the KV cache (%.2f GiB)",
                     p->available_kv_bytes / KV_GIB);
            break;
        default:
            snprintf(r->limit, sizeof r->limit, "would not start: %s", kv_plan_error_name(p->error_kind));
        }
        return;
    }
    if (p->max_num_seqs < conc) {
        snprintf(r->limit, sizeof r->limit, "max_num_seqs %lld < %lld requests", (long long)p->max_num_seqs,
                 (long long)conc);
        return;
    }
    kv_fmt_thousands(a, sizeof a, context);
    if (!r->fits)
        snprintf(r->limit, sizeof r->limit, "KV cache: %lld x %s tokens need %.2f GiB, %.2f left (%.2f fit)",
                 (long long)conc, a, r->kv_need_gib, r->kv_gib, r->max_concurrency);
    else
        snprintf(r->limit, sizeof r->limit, "KV cache (%.2f requests of %s tokens)", r->max_concurrency, a);
}

/* Fewer cards, then the smaller card, then more KV tokens. */
static int cheaper(const fit_row *x, const fit_row *y)
{
    if (x->tp != y->tp)
        return x->tp < y->tp;
    if (x->gpu->reported_total_bytes != y->gpu->reported_total_bytes)
        return x->gpu->reported_total_bytes < y->gpu->reported_total_bytes;
    return x->kv_cache_tokens > y->kv_cache_tokens;
}

static void alt_add(fit_row *w, const char *change, const char *text, int cards, int64_t tokens, double conc)
{
    if (w->nalt >= FIT_MAX_ALTS)
        return;
    fit_alt *t = &w->alt[w->nalt++];
    snprintf(t->change, sizeof t->change, "%s", change);
    snprintf(t->text, sizeof t->text, "%s", text);
    t->cards = cards;
    t->kv_cache_tokens = tokens;
    t->max_concurrency = conc;
}

static const fit_row *find_row(const fit_row *rows, int nrows, const kv_gpu *g, int tp, const char *sweep)
{
    for (int i = 0; i < nrows; i++)
        if (rows[i].gpu == g && rows[i].tp == tp && rows[i].sweep == sweep)
            return &rows[i];
    return NULL;
}

/* What would make row w fit, if it misses: its KV cache in fp8 on the same
 * cards (where the KV cache is what is short), the smallest tp up to 8 of
 * the same card (from the table, else planned), and the smallest bigger
 * card of the table at the same tp. Appended to its limit: "; fits with
 * --kv-cache-dtype fp8 (26.90), tp 2 (29.49), h100-nvl-94gb (16.62)". */
static void row_alts(const fit_ctx *x, const fit_row *rows, int nrows, fit_row *w, kv_plan *p)
{
    char err[512], c[64], t[48];
    if (!w->valid || w->fits)
        return;
    int kv_short = w->starts || w->error_kind == KV_PLAN_ERR_MAX_MODEL_LEN || w->error_kind == KV_PLAN_ERR_NO_KV_MEMORY;
    if (kv_short && w->kv_dtype_bytes > 1 &&
        fit_plan(x, w->gpu, w->tp, w->sweep, "kv-cache-dtype", "fp8", p, err, sizeof err) == 0 && plan_fits(p, x->conc))
        alt_add(w, "--kv-cache-dtype fp8", "--kv-cache-dtype fp8", w->tp, p->kv_cache_tokens, p->max_concurrency);
    for (int tp = w->tp * 2; tp <= 8; tp *= 2) {
        const fit_row *o = find_row(rows, nrows, w->gpu, tp, w->sweep);
        int ok = o ? o->fits : fit_plan(x, w->gpu, tp, w->sweep, NULL, NULL, p, err, sizeof err) == 0 && plan_fits(p, x->conc);
        if (!ok)
            continue;
        snprintf(c, sizeof c, "--tensor-parallel-size %d", tp);
        snprintf(t, sizeof t, "tp %d", tp);
        alt_add(w, c, t, tp, o ? o->kv_cache_tokens : p->kv_cache_tokens, o ? o->max_concurrency : p->max_concurrency);
        break;
    }
    const fit_row *big = NULL;
    for (int i = 0; i < nrows; i++) {
        const fit_row *o = &rows[i];
        if (o->fits && o->tp == w->tp && o->sweep == w->sweep &&
            o->gpu->reported_total_bytes > w->gpu->reported_total_bytes && (!big || cheaper(o, big)))
            big = o;
    }
    if (big) {
        snprintf(c, sizeof c, "--gpu %s", big->gpu->id);
        alt_add(w, c, big->gpu->id, big->tp, big->kv_cache_tokens, big->max_concurrency);
    }
    for (int i = 0; i < w->nalt; i++) {
        size_t l = strlen(w->limit);
        snprintf(w->limit + l, sizeof w->limit - l, "%s%s (%.2f)", i ? ", " : "; fits with ", w->alt[i].text,
                 w->alt[i].max_concurrency);
    }
}

static cJSON *row_json(const fit_row *r, const char *sweep_flag)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "gpu", r->gpu->id);
    cJSON_AddStringToObject(o, "gpu_name", r->gpu->name);
    cJSON_AddNumberToObject(o, "tensor_parallel_size", r->tp);
    cJSON_AddNumberToObject(o, "pipeline_parallel_size", 1);
    cJSON_AddNumberToObject(o, "cards", r->tp);
    if (sweep_flag)
        cJSON_AddStringToObject(o, sweep_flag, r->sweep);
    cJSON_AddBoolToObject(o, "valid", r->valid);
    cJSON_AddBoolToObject(o, "starts", r->starts);
    cJSON_AddBoolToObject(o, "fits", r->fits);
    if (r->valid && !r->starts)
        cJSON_AddStringToObject(o, "error_kind", kv_plan_error_name(r->error_kind));
    cJSON_AddNumberToObject(o, "kv_cache_tokens", (double)r->kv_cache_tokens);
    cJSON_AddNumberToObject(o, "kv_cache_gib", round(r->kv_gib * 1e4) / 1e4);
    cJSON_AddNumberToObject(o, "max_concurrency", round(r->max_concurrency * 100) / 100);
    cJSON_AddNumberToObject(o, "headroom", round(r->headroom * 1e4) / 1e4);
    if (r->kv_need_gib > 0)
        cJSON_AddNumberToObject(o, "kv_needed_gib", round(r->kv_need_gib * 1e4) / 1e4);
    cJSON_AddStringToObject(o, "limit", r->limit);
    cJSON *alts = cJSON_AddArrayToObject(o, "fits_with");
    for (int i = 0; alts && i < r->nalt; i++) {
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "change", r->alt[i].change);
        cJSON_AddNumberToObject(t, "cards", r->alt[i].cards);
        cJSON_AddNumberToObject(t, "kv_cache_tokens", (double)r->alt[i].kv_cache_tokens);
        cJSON_AddNumberToObject(t, "max_concurrency", round(r->alt[i].max_concurrency * 100) / 100);
        cJSON_AddItemToArray(alts, t);
    }
    return o;
}

int cmd_fit(int argc, char **argv)
{
    int json = 0;
    int64_t context = 0, conc = 1;
    const char *gpus = NULL, *tps = "1,2,4,8", *sweep = NULL;
    char err[512];
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    if (!rest)
        return 2;
    int n = 0;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(s, "--json")) {
            json = 1;
        } else if (!strcmp(s, "--help") || !strcmp(s, "-h")) {
            fit_usage(stdout);
            free(rest);
            return 0;
        } else if (!strcmp(s, "--context") || !strcmp(s, "--concurrency")) {
            int64_t v;
            if (!val || kv_args_parse_int(val, &v, err, sizeof err) != 0 || v < 1) {
                fprintf(stderr, "kvlab fit: %s takes a whole number of %s (at least 1)%s%s\n", s,
                        s[3] == 'o' && s[5] == 't' ? "tokens" : "requests", val ? ", not " : "", val ? val : "");
                free(rest);
                return 2;
            }
            if (!strcmp(s, "--context"))
                context = v;
            else
                conc = v;
            i++;
        } else if (!strcmp(s, "--gpus") || !strcmp(s, "--tp") || !strcmp(s, "--sweep")) {
            if (!val) {
                fprintf(stderr, "kvlab fit: %s needs a value (%s)\n", s,
                        !strcmp(s, "--sweep") ? "FLAG=V1,V2,..." : "a comma-separated list");
                free(rest);
                return 2;
            }
            if (!strcmp(s, "--gpus"))
                gpus = val;
            else if (!strcmp(s, "--tp"))
                tps = val;
            else
                sweep = val;
            i++;
        } else if (!strcmp(s, "--gpu") || !strncmp(s, "--gpu=", 6) || !strcmp(s, "--tensor-parallel-size") ||
                   !strncmp(s, "--tensor-parallel-size=", 23) || !strcmp(s, "-tp")) {
            fprintf(stderr, "kvlab fit: %s is what fit varies; use --gpus LIST and --tp LIST\n", s);
            free(rest);
            return 2;
        } else {
            rest[n++] = argv[i];
        }
    }
    kv_args base;
    kv_args_init(&base);
    char notes[2048];
    kv_model m;
    kv_gpu_catalog cat = {0};
    int bad = kvlab_inputs_cli("fit", "kvlab fit MODEL --context N --concurrency C", &base, n, rest, notes,
                               sizeof notes, &m, &cat);
    free(rest);
    if (bad)
        return bad;
    /* The cards, the tp sizes and the swept values. */
    const kv_gpu *cards[FIT_MAX_LIST];
    int ncards = 0;
    char gbuf[1024], tbuf[256], sbuf[512];
    char *items[FIT_MAX_LIST];
    int rc = 2;
    if (gpus) {
        int k = split_list(gpus, gbuf, sizeof gbuf, items, FIT_MAX_LIST);
        if (!k) {
            fprintf(stderr, "kvlab fit: --gpus names no card ('%s'); give ids or aliases, comma-separated\n", gpus);
            goto out;
        }
        for (int i = 0; i < k; i++) {
            const kv_gpu *g = kv_gpu_find(&cat, items[i], err, sizeof err);
            if (!g) {
                fprintf(stderr, "kvlab fit: --gpus: %s\n", err);
                goto out;
            }
            cards[ncards++] = g;
        }
    } else {
        for (int i = 0; i < cat.count && ncards < FIT_MAX_LIST; i++)
            cards[ncards++] = &cat.gpus[i];
    }
    int tpv[FIT_MAX_LIST], ntp = 0;
    {
        int k = split_list(tps, tbuf, sizeof tbuf, items, FIT_MAX_LIST);
        if (!k) {
            fprintf(stderr, "kvlab fit: --tp takes sizes from 1 to 64, comma-separated, not '%s'\n", tps);
            goto out;
        }
        for (int i = 0; i < k; i++) {
            int64_t v;
            if (kv_args_parse_int(items[i], &v, err, sizeof err) != 0 || v < 1 || v > 64) {
                fprintf(stderr, "kvlab fit: --tp takes sizes from 1 to 64, not '%s'\n", items[i]);
                goto out;
            }
            tpv[ntp++] = (int)v;
        }
    }
    const char *sweep_flag = NULL;
    char sweep_name[64] = "";
    char *svals[FIT_MAX_LIST];
    int nsv = 1;
    svals[0] = NULL;
    if (sweep) {
        const char *eq = strchr(sweep, '=');
        if (!eq || eq == sweep || !eq[1]) {
            fprintf(stderr, "kvlab fit: --sweep takes FLAG=V1,V2,... (e.g. kv-cache-dtype=auto,fp8), not '%s'\n", sweep);
            goto out;
        }
        snprintf(sweep_name, sizeof sweep_name, "%.*s", (int)(eq - sweep), sweep);
        const char *nm = sweep_name + strspn(sweep_name, "-");
        const kv_args_flag *fl = kv_args_flag_find(nm);
        if (!fl) {
            fprintf(stderr, "kvlab fit: --sweep: unknown flag --%s\n", nm);
            goto out;
        }
        sweep_flag = fl->name;
        nsv = split_list(eq + 1, sbuf, sizeof sbuf, svals, FIT_MAX_LIST);
        if (!nsv) {
            fprintf(stderr, "kvlab fit: --sweep takes FLAG=V1,V2,... (e.g. kv-cache-dtype=auto,fp8), not '%s'\n", sweep);
            goto out;
        }
        for (int i = 0; i < nsv; i++) { /* every value is checked before any plan */
            kv_args t = base;
            if (kv_args_set(&t, sweep_flag, svals[i], err, sizeof err) < 0) {
                fprintf(stderr, "kvlab fit: --sweep: %s\n", err);
                goto out;
            }
        }
    }
    if (!context)
        context = base.max_model_len > 0 ? base.max_model_len : m.max_position_embeddings;
    char cbuf[32];
    snprintf(cbuf, sizeof cbuf, "%lld", (long long)context);
    if (!kv_args_is_set(&base, "max-model-len") && kv_args_set(&base, "max-model-len", cbuf, err, sizeof err) < 0) {
        fprintf(stderr, "kvlab fit: --context: %s\n", err);
        goto out;
    }

    int nrows = ncards * ntp * nsv;
    fit_row *rows = calloc((size_t)nrows, sizeof *rows);
    kv_plan *p = malloc(sizeof *p);
    if (!rows || !p) {
        free(rows);
        free(p);
        goto out;
    }
    int best = -1;
    int r = 0;
    const fit_ctx x = {&m, &base, sweep_flag, context, conc};
    for (int s = 0; s < nsv; s++)
        for (int c = 0; c < ncards; c++)
            for (int t = 0; t < ntp; t++, r++) {
                fit_row *row = &rows[r];
                row->gpu = cards[c];
                row->tp = tpv[t];
                row->sweep = svals[s];
                if (fit_plan(&x, cards[c], tpv[t], svals[s], NULL, NULL, p, err, sizeof err) != 0) {
                    snprintf(row->limit, sizeof row->limit, "invalid: %s", err);
                    continue;
                }
                row->valid = 1;
                row->starts = p->starts;
                row->error_kind = p->error_kind;
                row->kv_cache_tokens = p->starts ? p->kv_cache_tokens : 0;
                row->kv_gib = p->available_kv_bytes / KV_GIB;
                row->kv_need_gib = (double)conc * (double)kv_plan_request_bytes(p, context) / KV_GIB;
                row->kv_dtype_bytes = p->kv_dtype_bytes;
                row->max_concurrency = p->starts ? p->max_concurrency : 0;
                row->headroom = (row->max_concurrency - (double)conc) / (double)conc;
                row->fits = plan_fits(p, conc);
                row_limit(row, p, context, conc);
                if (row->fits && (best < 0 || cheaper(row, &rows[best])))
                    best = r;
            }
    for (int i = 0; i < nrows; i++)
        row_alts(&x, rows, nrows, &rows[i], p);
    free(p);
    const kv_release *rel = kv_release_find(base.vllm_version, NULL, 0);
    char ctxs[32];
    kv_fmt_thousands(ctxs, sizeof ctxs, context);
    static const char rule[] = "the fewest cards, then the smallest card (its memory: the catalogue has no prices), "
                               "then the most KV tokens";
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "model", m.id);
        cJSON_AddNumberToObject(o, "context", (double)context);
        cJSON_AddNumberToObject(o, "concurrency", (double)conc);
        if (base.accounting == KV_ACCOUNTING_TEXTBOOK)
            cJSON_AddNullToObject(o, "vllm_version");
        else
            cJSON_AddStringToObject(o, "vllm_version", rel ? rel->first : "");
        if (sweep_flag)
            cJSON_AddStringToObject(o, "sweep", sweep_flag);
        cJSON_AddStringToObject(o, "cheapest_rule", rule);
        cJSON_AddItemToObject(o, "cheapest", best >= 0 ? row_json(&rows[best], sweep_flag) : cJSON_CreateNull());
        cJSON *arr = cJSON_AddArrayToObject(o, "rows");
        for (int i = 0; arr && i < nrows; i++)
            cJSON_AddItemToArray(arr, row_json(&rows[i], sweep_flag));
        char *s = cJSON_Print(o);
        if (s)
            printf("%s\n", s);
        free(s);
        cJSON_Delete(o);
    } else {
        char rl[64];
        printf("kvlab fit: %s, %lld request%s of %s tokens at once (%s accounting)\n", m.id, (long long)conc,
               conc == 1 ? "" : "s", ctxs,
               base.accounting == KV_ACCOUNTING_TEXTBOOK ? "textbook" : (snprintf(rl, sizeof rl, "vLLM %s",
                                                                                  rel ? rel->first : "?"), rl));
        printf("%-18s %3s %5s %-6s %11s %8s %9s %-4s  %s\n", "gpu", "tp", "cards", "starts", "KV tokens", "at once",
               "headroom", "fits", "what limits it");
        for (int i = 0; i < nrows; i++) {
            const fit_row *w = &rows[i];
            if (sweep_flag && (i == 0 || rows[i - 1].sweep != w->sweep))
                printf("--%s %s\n", sweep_flag, w->sweep);
            if (!w->valid) {
                printf("%-18s %3d %5d %-6s %11s %8s %9s %-4s  %s\n", w->gpu->id, w->tp, w->tp, "-", "-", "-", "-", "no",
                       w->limit);
                continue;
            }
            char tok[32], hr[16], at[16];
            kv_fmt_thousands(tok, sizeof tok, w->kv_cache_tokens);
            snprintf(at, sizeof at, "%.2f", w->max_concurrency);
            snprintf(hr, sizeof hr, "%+.0f%%", 100 * w->headroom);
            printf("%-18s %3d %5d %-6s %11s %8s %9s %-4s  %s%s\n", w->gpu->id, w->tp, w->tp, w->starts ? "yes" : "no",
                   w->starts ? tok : "-", w->starts ? at : "-", w->starts ? hr : "-", w->fits ? "yes" : "no",
                   w->limit, i == best ? "  <- cheapest" : "");
        }
        if (best >= 0)
            printf("cheapest that serves %lld x %s tokens: %s at tp %d (%d card%s)\n", (long long)conc, ctxs,
                   rows[best].gpu->id, rows[best].tp, rows[best].tp, rows[best].tp == 1 ? "" : "s");
        else
            printf("no row serves %lld x %s tokens at once\n", (long long)conc, ctxs);
        if (best >= 0 && sweep_flag)
            printf("  (with --%s %s)\n", sweep_flag, rows[best].sweep);
        printf("cheapest = %s; pipeline parallelism is not planned (pp 1)\n", rule);
    }
    rc = best >= 0 ? 0 : 1;
    free(rows);
out:
    kv_gpu_catalog_free(&cat);
    return rc;
}
