/* kvlab serve MODEL [flags] --vs [other flags] [--json]: two command lines
 * side by side, term by term. The flags after --vs change or add to the
 * first line's (the same model and card unless they name others), so
 * `--vs --kv-cache-dtype fp8` asks what that one flag does. Exit 0 when the
 * second line starts, 1 when it would not, 2 bad input. */
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
#include "kv_util.h"
#include "paths.h"
#include "plan_inputs.h"
#include "vllm_config.h"

#define VS_DEFAULT_GPU "h100-80gb"

typedef struct vs_side {
    kv_args a;
    kv_model m;
    kv_gpu gpu;
    int custom;           /* --gpu-memory-gib alone: a custom card */
    kv_plan p;
} vs_side;

/* The side's plan on its card; its model is loaded already. */
static int vs_plan(vs_side *s, const kv_gpu_catalog *cat, char *note, size_t notelen, char *err, size_t errlen)
{
    const kv_gpu *g = NULL;
    if (s->a.gpu[0]) {
        g = kv_gpu_find(cat, s->a.gpu, err, errlen);
        if (!g)
            return -1;
    } else if (s->a.gpu_memory_gib <= 0) {
        g = kv_gpu_find(cat, VS_DEFAULT_GPU, err, errlen);
        if (!g)
            return -1;
        snprintf(note, notelen, "note: no --gpu given; assuming %s\n", VS_DEFAULT_GPU);
    }
    if (g)
        s->gpu = *g;
    return kv_plan_compute(&s->m, g ? &s->gpu : NULL, &s->a, &s->p, err, errlen) == KV_PLAN_OK ? 0 : -1;
}

static const char *const LABELS[KV_PLAN_NUM_TERMS] = {"budget", "weights", "activation", "CUDA graphs",
                                                      "CUDA context", "NCCL", "non-torch", "KV cache"};

/* What the second line changes: the flags whose value differs, "--x 1 -> 2, ...". */
static void changed(const kv_args *x, const kv_args *y, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < kv_args_flag_count() && off < len; i++) {
        const kv_args_flag *f = kv_args_flag_at(i);
        char u[128], v[128];
        if (f->kind == KV_ARG_NOTE || f->kind == KV_ARG_NOTE_BOOL || f->kind == KV_ARG_REFUSED)
            continue;
        if (kv_args_get(x, f->name, u, sizeof u) != 0 || kv_args_get(y, f->name, v, sizeof v) != 0 || !strcmp(u, v))
            continue;
        off += (size_t)snprintf(buf + off, len - off, "%s--%s %s -> %s", off ? ", " : "", f->name, u[0] ? u : "(unset)",
                                v[0] ? v : "(unset)");
    }
    if (!off)
        snprintf(buf, len, "nothing (the same plan)");
}

static const char *verdict(const kv_plan *p)
{
    return p->starts ? "starts" : kv_plan_error_name(p->error_kind);
}

int cmd_serve_vs(int argc, char **argv)
{
    int json = 0, vs = -1;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--vs") && vs < 0)
            vs = i;
    char **one = calloc((size_t)argc + 1, sizeof *one), **two = calloc((size_t)argc + 1, sizeof *two);
    vs_side *s = calloc(2, sizeof *s);
    int n1 = 0, n2 = 0, rc = 2;
    char err[1024] = "", notes[2048], note[128] = "", note2[128] = "";
    kv_gpu_catalog cat = {0};
    if (!one || !two || !s)
        goto out;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (i < vs)
            one[n1++] = argv[i];
        else if (i > vs)
            two[n2++] = argv[i];
    }
    if (n2 == 0) {
        fprintf(stderr, "kvlab serve: --vs needs the flags of the second line (kvlab serve MODEL [flags] --vs "
                        "--kv-cache-dtype fp8)\n");
        goto out;
    }
    kv_args_init(&s[0].a);
    if (kvlab_inputs_cli("serve", "kvlab serve MODEL [flags] --vs [other flags]", &s[0].a, n1, one, notes,
                         sizeof notes, &s[0].m, &cat) != 0)
        goto out;
    s[1].a = s[0].a;
    s[1].a.model[0] = '\0';
    if (kvlab_vllm_args_parse(&s[1].a, n2, two, notes, sizeof notes, err, sizeof err) < 0) {
        fprintf(stderr, "kvlab serve: after --vs: %s\n", err);
        goto out;
    }
    if (!s[1].a.model[0])
        memcpy(s[1].a.model, s[0].a.model, sizeof s[1].a.model);
    if (vs_plan(&s[0], &cat, note, sizeof note, err, sizeof err) != 0) {
        fprintf(stderr, "kvlab serve: %s\n", err);
        goto out;
    }
    if (kvlab_inputs_load(&s[1].a, kvlab_assets_dir(), &s[1].m, NULL, err, sizeof err) != KVLAB_INPUTS_OK ||
        vs_plan(&s[1], &cat, note2, sizeof note2, err, sizeof err) != 0) {
        fprintf(stderr, "kvlab serve: after --vs: %s\n", err);
        goto out;
    }
    const kv_plan *a = &s[0].p, *b = &s[1].p;
    char what[1024], x[32], y[32], z[32];
    changed(&s[0].a, &s[1].a, what, sizeof what);
    if (strcmp(s[0].a.model, s[1].a.model)) {
        size_t l = strlen(what);
        snprintf(what + l, sizeof what - l, "%smodel %s -> %s", strcmp(what, "nothing (the same plan)") ? ", " : "",
                 s[0].m.id, s[1].m.id);
    }
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "changes", what);
        cJSON *ja = kv_plan_to_json(a), *jb = kv_plan_to_json(b);
        if (ja)
            cJSON_AddStringToObject(ja, "model", s[0].m.id);
        if (jb)
            cJSON_AddStringToObject(jb, "model", s[1].m.id);
        cJSON_AddItemToObject(o, "a", ja);
        cJSON_AddItemToObject(o, "b", jb);
        cJSON *d = cJSON_AddArrayToObject(o, "differences");
        for (int i = 0; d && i < KV_PLAN_NUM_TERMS; i++) {
            cJSON *t = cJSON_CreateObject();
            cJSON_AddStringToObject(t, "term", a->terms[i].name);
            cJSON_AddNumberToObject(t, "a_gib", round(a->terms[i].bytes / KV_GIB * 1e4) / 1e4);
            cJSON_AddNumberToObject(t, "b_gib", round(b->terms[i].bytes / KV_GIB * 1e4) / 1e4);
            cJSON_AddNumberToObject(t, "difference_gib", round((b->terms[i].bytes - a->terms[i].bytes) / KV_GIB * 1e4) / 1e4);
            cJSON_AddItemToArray(d, t);
        }
        char *str = cJSON_Print(o);
        if (str)
            printf("%s\n", str);
        free(str);
        cJSON_Delete(o);
    } else {
        printf("%s%s", note, strcmp(note, note2) ? note2 : "");
        printf("kvlab serve --vs: %s on %s, vLLM %s accounting\n", s[0].m.id, a->gpu_id,
               a->accounting == KV_ACCOUNTING_TEXTBOOK ? "textbook" : a->vllm_version);
        printf("the second line changes: %s\n\n", what);
        printf("Per GPU (GiB)      %-44s %10s %10s %10s\n", "how (first line)", "first", "second", "change");
        for (int i = 0; i < KV_PLAN_NUM_TERMS; i++) {
            const kv_plan_term *ta = &a->terms[i], *tb = &b->terms[i];
            if (!ta->counted && !tb->counted && ta->bytes == 0 && tb->bytes == 0)
                continue;
            char d[24];
            double dv = (tb->bytes - ta->bytes) / KV_GIB;
            snprintf(d, sizeof d, fabs(dv) < 0.005 ? "same" : "%+.2f", dv);
            snprintf(x, sizeof x, ta->counted ? "%.2f" : "(%.2f)", ta->bytes / KV_GIB);
            snprintf(y, sizeof y, tb->counted ? "%.2f" : "(%.2f)", tb->bytes / KV_GIB);
            printf("  %-16s %-44.44s %10s %10s %10s\n", LABELS[i], ta->how, x, y, d);
        }
        char bpt[32] = "same";
        if (b->kv_bytes_per_token != a->kv_bytes_per_token)
            snprintf(bpt, sizeof bpt, "%+lld", (long long)(b->kv_bytes_per_token - a->kv_bytes_per_token));
        printf("  %-16s %-44s %10lld %10lld %10s\n", "bytes per token", "", (long long)a->kv_bytes_per_token,
               (long long)b->kv_bytes_per_token, bpt);
        kv_fmt_thousands(x, sizeof x, a->starts ? a->kv_cache_tokens : 0);
        kv_fmt_thousands(y, sizeof y, b->starts ? b->kv_cache_tokens : 0);
        long long dt = (long long)((b->starts ? b->kv_cache_tokens : 0) - (a->starts ? a->kv_cache_tokens : 0));
        char dts[40] = "same";
        if (dt) {
            kv_fmt_thousands(z, sizeof z, dt < 0 ? -dt : dt);
            snprintf(dts, sizeof dts, "%c%s", dt < 0 ? '-' : '+', z);
        }
        printf("  %-16s %-44s %10s %10s %10s\n", "KV tokens", "", x, y, dts);
        char la[32], lb[32];
        kv_fmt_thousands(la, sizeof la, a->max_model_len);
        kv_fmt_thousands(lb, sizeof lb, b->max_model_len);
        printf("  %-16s %-44s %10.2f %10.2f %+10.2f\n", "max concurrency", strcmp(la, lb) ? "(at each line's max_model_len)" : "",
               a->max_concurrency, b->max_concurrency, b->max_concurrency - a->max_concurrency);
        printf("  %-16s %-44s %10s %10s\n", "max_model_len", "", la, lb);
        printf("  %-16s %-44s %10s %10s\n", "vLLM would", "", verdict(a), verdict(b));
        if (!b->starts && b->error[0])
            printf("\nsecond line: %s\n", b->error);
    }
    rc = b->starts ? 0 : 1;
out:
    kv_gpu_catalog_free(&cat);
    free(one);
    free(two);
    free(s);
    return rc;
}
