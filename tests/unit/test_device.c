/* The device layer without a GPU: a fake GPU driver (one card, whose
 * context, like a real primary context, only takes memory the first time it
 * is created in a process) proves what the CUDA backend relies on: a card is
 * measured once per process and every later open reuses that figure; ranks
 * that share a card are scaled for every caller (serve --allocate, the
 * engine that simulate --device and the lesson app create); an engine frees
 * what it took on a borrowed device and never releases or destroys it. The
 * host backend's fingerprints mix in the global KV head and the parent
 * block's key, so a rank mix-up and a wrong prefix share read back wrong;
 * the per-step read-back checks what changed (linear over a run), and a
 * bounded sample covers every request. Plus dtype names, catalogue
 * matching and --hold parsing. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "backend.h"
#include "kv_args.h"
#include "kv_device.h"
#include "kv_device_host.h"
#include "kv_engine.h"
#include "kv_gpu.h"
#include "kv_model.h"
#include "kv_plan.h"
#include "kv_util.h"
#include "test_helpers.h"

#define GIB (1ull << 30)

/* ---- the fake GPU driver --------------------------------------------------- */

static int g_cards = 1;
static uint64_t g_card_total = 80 * GIB;
static int g_measures[8];
static int g_releases, g_destroys;
static int64_t g_verified_tokens;

typedef struct fake_impl {
    kv_device *inner;            /* a host backend does the storing */
    kv_device_info info[64];
} fake_impl;

static fake_impl *fk(kv_device *d) { return (fake_impl *)d->impl; }

static int fake_count(char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    return g_cards;
}

static int fake_measure(int card, kv_device_info *out, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    g_measures[card]++;
    snprintf(out->backend, sizeof out->backend, "cuda");
    snprintf(out->name, sizeof out->name, "NVIDIA H100 80GB HBM3");
    out->total_bytes = g_card_total;
    /* as a primary context: created (and holding memory) once per process */
    out->context_bytes = g_measures[card] == 1 ? 512ll << 20 : 0;
    out->free_bytes = g_card_total - (512ull << 20);
    out->peak_gbps = 3352;
    return 0;
}

static uint64_t card_held(kv_device *d, int card)
{
    uint64_t b = 0;
    for (int r = 0; r < d->num_ranks; r++)
        if (fk(d)->info[r].card == card)
            b += fk(d)->inner->ops->held(fk(d)->inner, r);
    return b;
}

static int fake_room(kv_device *d, int rank, uint64_t bytes, uint64_t freed, char *err, size_t errlen)
{
    const int card = fk(d)->info[rank].card;
    if (card_held(d, card) - freed + bytes > g_card_total)
        return kv_errf(err, errlen, KV_DEV_ENOMEM, "CUDA out of memory (fake). Tried to allocate %.2f GiB (rank %d)",
                       (double)bytes / GIB, rank);
    return 0;
}

static int f_info(kv_device *d, int rank, kv_device_info *out, char *err, size_t errlen)
{
    if (rank < 0 || rank >= d->num_ranks)
        return kv_errf(err, errlen, KV_DEV_EINVAL, "rank %d", rank);
    *out = fk(d)->info[rank];
    return 0;
}

static int f_mem_info(kv_device *d, int rank, uint64_t *fr, uint64_t *tot, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    *tot = g_card_total;
    *fr = g_card_total - card_held(d, fk(d)->info[rank].card);
    return 0;
}

static int f_reserve(kv_device *d, int rank, const char *term, uint64_t bytes, kv_dev_handle *h, char *err,
                     size_t errlen)
{
    int rc = fake_room(d, rank, bytes, 0, err, errlen);
    return rc ? rc : fk(d)->inner->ops->reserve(fk(d)->inner, rank, term, bytes, h, err, errlen);
}

static int f_alloc_pool(kv_device *d, int rank, const kv_pool_layout *l, kv_dev_handle *h, char *err, size_t errlen)
{
    kv_device_info in;
    fk(d)->inner->ops->info(fk(d)->inner, rank, &in, NULL, 0);
    (void)in;
    int rc = fake_room(d, rank, kv_pool_layout_bytes(l), 0, err, errlen);
    return rc ? rc : fk(d)->inner->ops->alloc_pool(fk(d)->inner, rank, l, h, err, errlen);
}

static void f_free(kv_device *d, int rank, kv_dev_handle h) { fk(d)->inner->ops->free(fk(d)->inner, rank, h); }
static uint64_t f_held(kv_device *d, int rank) { return fk(d)->inner->ops->held(fk(d)->inner, rank); }
static void f_placeholders(kv_device *d, int on) { fk(d)->inner->ops->set_placeholders(fk(d)->inner, on); }

static int f_write(kv_device *d, int rank, const kv_slot_write *w, size_t n, char *err, size_t errlen)
{
    return fk(d)->inner->ops->write_kv(fk(d)->inner, rank, w, n, err, errlen);
}

static int f_verify(kv_device *d, int rank, const kv_verify_req *v, int64_t *bad, char *err, size_t errlen)
{
    g_verified_tokens += v->num_tokens;
    return fk(d)->inner->ops->verify(fk(d)->inner, rank, v, bad, err, errlen);
}

static int f_bench(kv_device *d, int rank, const kv_bench_req *q, kv_bench_result *out, char *err, size_t errlen)
{
    return fk(d)->inner->ops->bench(fk(d)->inner, rank, q, out, err, errlen);
}

static void f_release(kv_device *d)
{
    g_releases++;
    fk(d)->inner->ops->release(fk(d)->inner);
}

static void f_destroy(kv_device *d)
{
    g_destroys++;
    fk(d)->inner->ops->destroy(fk(d)->inner);
    free(d->impl);
    free(d);
}

static const kv_device_ops fake_ops = {f_info, f_mem_info, f_reserve, f_alloc_pool, f_free, f_held, f_placeholders,
                                       f_write, f_verify, f_bench, f_release, f_destroy};

static kv_device *fake_open(int num_ranks, const kv_device_info *rank_info, char *err, size_t errlen)
{
    kv_device *d = calloc(1, sizeof *d);
    fake_impl *f = calloc(1, sizeof *f);
    assert_true(d && f);
    f->inner = kv_device_host_open(num_ranks, 0, err, errlen);
    assert_non_null(f->inner);
    memcpy(f->info, rank_info, (size_t)num_ranks * sizeof *rank_info);
    d->ops = &fake_ops;
    d->name = "cuda";
    d->num_ranks = num_ranks;
    d->impl = f;
    return d;
}

static const kv_device_driver fake_driver = {"cuda", fake_count, fake_measure, fake_open};

/* backend.c (the CLI's callers) finds "the GPU backend" here, as the
 * program's registry (engine/kv_device_reg.c) hands it the CUDA driver. */
const kv_device_driver *kv_device_gpu_driver(void) { return &fake_driver; }

static int setup(void **state)
{
    (void)state;
    kv_device_driver_forget(&fake_driver);
    memset(g_measures, 0, sizeof g_measures);
    g_cards = 1;
    g_card_total = 80 * GIB;
    g_releases = g_destroys = 0;
    g_verified_tokens = 0;
    unsetenv("KVLAB_DEVICE");
    return 0;
}

/* ---- a plan to hold: Llama-3.1-8B on an H100, tp 2 ----------------------- */

typedef struct plan_fixture {
    kv_model m;
    kv_gpu_catalog cat;
    const kv_gpu *gpu;
    kv_args a;
    kv_plan p;
} plan_fixture;

static void load_plan(plan_fixture *f, int tp)
{
    char err[1024], notes[2048];
    memset(f, 0, sizeof *f);
    if (kv_model_load("meta-llama/Llama-3.1-8B-Instruct", test_assets_dir(), &f->m, err, sizeof err) != KV_MODEL_OK)
        fail_msg("model: %s", err);
    if (kv_gpu_catalog_load(test_assets_dir(), &f->cat, err, sizeof err) != KV_GPU_OK)
        fail_msg("catalogue: %s", err);
    f->gpu = kv_gpu_find(&f->cat, "h100-80gb", err, sizeof err);
    assert_non_null(f->gpu);
    kv_args_init(&f->a);
    char tps[8];
    snprintf(tps, sizeof tps, "%d", tp);
    char *argv[] = {"meta-llama/Llama-3.1-8B-Instruct", "--tensor-parallel-size", tps, "--max-model-len", "8192"};
    if (kv_args_parse(&f->a, 5, argv, notes, sizeof notes, err, sizeof err) < 0)
        fail_msg("args: %s", err);
    if (kv_plan_compute(&f->m, f->gpu, &f->a, &f->p, err, sizeof err) != KV_PLAN_OK)
        fail_msg("plan: %s", err);
    assert_true(f->p.starts);
}

/* The engine simulate --device and the lesson app build from a plan. */
static kv_engine *engine_on(plan_fixture *f, kv_device *d, int fit, char *err, size_t errlen)
{
    kv_engine_config c;
    char note[512];
    if (kv_engine_config_from_plan(&f->p, &f->m, f->gpu, &f->a, &c, note, sizeof note, err, errlen) != 0)
        fail_msg("config: %s", err);
    c.device = d;
    c.fit_device = fit;
    c.verify = 0;
    c.write_kv = 1;
    return kv_engine_create(&c, err, errlen);
}

/* ---- the card cache ------------------------------------------------------ */

static void test_context_measured_once(void **state)
{
    (void)state;
    char err[256];
    kv_device *d1 = kv_device_driver_open(&fake_driver, 1, err, sizeof err);
    assert_non_null(d1);
    kv_device *d2 = kv_device_driver_open(&fake_driver, 2, err, sizeof err);
    assert_non_null(d2);
    kv_device_info i1, i2, i3;
    assert_int_equal(d1->ops->info(d1, 0, &i1, err, sizeof err), 0);
    assert_int_equal(d2->ops->info(d2, 1, &i2, err, sizeof err), 0);
    /* what serve --gpu this, serve --allocate and the app each ask */
    kv_gpu this_gpu;
    double ctx = 0;
    assert_int_equal(kvlab_backend_this_gpu(NULL, &this_gpu, &ctx, err, sizeof err), 0);
    kv_device *d3 = kvlab_backend_open(2, 1, NULL, NULL, 0);
    assert_non_null(d3);
    assert_int_equal(d3->ops->info(d3, 0, &i3, err, sizeof err), 0);
    assert_int_equal(g_measures[0], 1); /* once for the whole process */
    assert_true(i1.context_bytes == 512ll << 20);
    assert_true(i2.context_bytes == i1.context_bytes && i3.context_bytes == i1.context_bytes);
    assert_true(ctx == (double)(512ll << 20));
    assert_int_equal(i2.card, 0);
    assert_int_equal(i2.ranks_on_card, 2);
    assert_int_equal(i1.ranks_on_card, 1);
    d1->ops->destroy(d1);
    d2->ops->destroy(d2);
    d3->ops->destroy(d3);
    /* forgetting the cache measures again: the fake context then reads 0, as a live primary context would */
    kv_device_driver_forget(&fake_driver);
    kv_device_info again;
    assert_int_equal(kv_device_driver_card(&fake_driver, 0, &again, err, sizeof err), 0);
    assert_int_equal(again.context_bytes, 0);
}

static void test_ranks_map_onto_cards(void **state)
{
    (void)state;
    char err[256];
    g_cards = 2;
    kv_device *d = kv_device_driver_open(&fake_driver, 4, err, sizeof err);
    assert_non_null(d);
    int cards[4];
    for (int r = 0; r < 4; r++) {
        kv_device_info in;
        assert_int_equal(d->ops->info(d, r, &in, err, sizeof err), 0);
        cards[r] = in.card;
        assert_int_equal(in.ranks_on_card, 2);
    }
    assert_true(cards[0] == 0 && cards[1] == 1 && cards[2] == 0 && cards[3] == 1);
    assert_int_equal(g_measures[0] + g_measures[1], 2);
    d->ops->destroy(d);
    assert_null(kv_device_driver_open(&fake_driver, 0, err, sizeof err));
    assert_null(kv_device_driver_open(&fake_driver, 65, err, sizeof err));
}

static void test_fit_scale(void **state)
{
    (void)state;
    char err[256];
    kv_device *d = kv_device_driver_open(&fake_driver, 8, err, sizeof err); /* 8 ranks on 1 card */
    assert_non_null(d);
    const double card = 80.0 * GIB;
    assert_true(kv_device_fit_scale(d, 1, card, KV_FIT_SHARED) == 1.0);
    assert_true(fabs(kv_device_fit_scale(d, 2, card, KV_FIT_SHARED) - 0.5) < 1e-12); /* ranks in use, not all 8 */
    assert_true(fabs(kv_device_fit_scale(d, 4, card, KV_FIT_SHARED) - 0.25) < 1e-12);
    assert_true(kv_device_fit_scale(d, 2, card, 0) == 1.0);
    /* a plan for a card twice this one's size */
    assert_true(kv_device_fit_scale(d, 1, 2 * card, KV_FIT_SHARED) == 1.0); /* not asked to shrink: its OOM says so */
    assert_true(fabs(kv_device_fit_scale(d, 1, 2 * card, KV_FIT_SHARED | KV_FIT_SMALLER) - 0.5) < 1e-12);
    assert_true(fabs(kv_device_fit_scale(d, 2, 2 * card, KV_FIT_SHARED) - 0.5) < 1e-12);
    assert_true(fabs(kv_device_fit_scale(d, 2, 2 * card, KV_FIT_SHARED | KV_FIT_SMALLER) - 0.25) < 1e-12);
    d->ops->destroy(d);
    /* the host backend: every rank its own simulated card */
    kv_device *h = kv_device_host_open(2, 80 * GIB, err, sizeof err);
    assert_true(kv_device_fit_scale(h, 2, card, KV_FIT_SHARED) == 1.0);
    h->ops->destroy(h);
}

/* ---- every caller sizes shared ranks the same way ---------------------- */

static void test_shared_card_serve_allocate(void **state)
{
    (void)state;
    plan_fixture *f = malloc(sizeof *f);
    load_plan(f, 2);
    kvlab_serve_dev o;
    char err[256];
    char *argv[] = {"--allocate"};
    assert_int_equal(kvlab_serve_dev_flags(1, argv, &o, err, sizeof err), 0);
    kvlab_alloc_result r;
    kv_device *d = kvlab_serve_allocate(&f->p, &o, &r);
    if (!d) fail_msg("allocate: %s", r.error);
    assert_true(r.ok);
    assert_true(r.shared_card);
    /* two ranks planned for a whole card each, on one card of the same size */
    assert_true(r.scale < 0.51 && r.scale > 0.49);
    assert_true(r.held_bytes <= (double)g_card_total);
    assert_true(r.held_bytes > 0.8 * (double)g_card_total * (f->p.budget_bytes - f->p.cuda_context_bytes) /
                                  f->p.gpu_total_bytes);
    assert_int_equal(r.mismatches, 0);
    assert_string_equal(r.backend, "cuda");
    d->ops->destroy(d);
    kv_gpu_catalog_free(&f->cat);
    free(f);
}

static void test_shared_card_engine(void **state)
{
    (void)state;
    plan_fixture *f = malloc(sizeof *f);
    load_plan(f, 2);
    char err[512];
    /* simulate --device: a device for the plan's ranks */
    kv_device *d = kvlab_backend_open(2, 0, NULL, NULL, 0);
    assert_non_null(d);
    kv_engine *bad = engine_on(f, d, 0, err, sizeof err); /* as it was: every rank sized for a whole card */
    assert_null(bad);
    assert_non_null(strstr(err, "out of memory"));
    assert_non_null(strstr(err, "rank 1"));
    kv_engine *e = engine_on(f, d, KV_FIT_SHARED, err, sizeof err);
    if (!e) fail_msg("engine on a shared card: %s", err);
    assert_true(kv_engine_device_scale(e) < 0.51 && kv_engine_device_scale(e) > 0.49);
    assert_true(kv_engine_get_config(e)->num_blocks < f->p.num_blocks * 0.51);
    assert_true(d->ops->held(d, 0) + d->ops->held(d, 1) <= g_card_total);
    kv_engine_destroy(e);
    d->ops->destroy(d);

    /* the lesson app: one device of 8 ranks for every lesson engine */
    kv_device *app = kvlab_backend_open_app(8);
    assert_non_null(app);
    e = engine_on(f, app, KV_FIT_SHARED, err, sizeof err);
    if (!e) fail_msg("app engine: %s", err);
    assert_true(kv_engine_device_scale(e) < 0.51);
    kv_event ev[64];
    int32_t n = kv_engine_events_since(e, 0, ev, 64), said = 0;
    for (int32_t i = 0; i < n; i++)
        said |= ev[i].type == KV_EV_LOG && ev[i].text && strstr(ev[i].text, "scaled to fit") != NULL;
    assert_true(said);
    kv_engine_destroy(e);
    /* a tp 1 lesson engine on the same device: its whole card, as planned */
    plan_fixture *g = malloc(sizeof *g);
    load_plan(g, 1);
    e = engine_on(g, app, KV_FIT_SHARED, err, sizeof err);
    if (!e) fail_msg("tp 1 engine: %s", err);
    assert_true(kv_engine_device_scale(e) == 1.0);
    assert_int_equal(kv_engine_get_config(e)->num_blocks, g->p.num_blocks);
    kv_engine_destroy(e);
    app->ops->destroy(app);
    kv_gpu_catalog_free(&f->cat);
    kv_gpu_catalog_free(&g->cat);
    free(f);
    free(g);
}

/* ---- a borrowed device ---------------------------------------------------- */

static void test_borrowed_device_not_released(void **state)
{
    (void)state;
    char err[512];
    kv_device *d = kv_device_driver_open(&fake_driver, 2, err, sizeof err);
    assert_non_null(d);
    /* the owner holds something of its own first */
    kv_dev_handle mine = 0;
    assert_int_equal(d->ops->reserve(d, 0, "weights", 3 * GIB, &mine, err, sizeof err), 0);
    const uint64_t before0 = d->ops->held(d, 0), before1 = d->ops->held(d, 1);
    kv_engine_config c;
    kv_engine_config_default(&c);
    c.num_blocks = 64;
    c.tensor_parallel_size = 2;
    c.verify = 1;
    c.device = d;
    c.fit_device = 0; /* what it holds as planned (fitting is test_shared_card_engine's) */
    for (int r = 0; r < 2; r++) c.terms[r][KV_TERM_ACTIVATION] = 1.0 * GIB;
    kv_engine *e = kv_engine_create(&c, err, sizeof err);
    if (!e) fail_msg("create: %s", err);
    assert_true(d->ops->held(d, 0) > before0 + GIB);
    kv_request_spec s = {0};
    s.prompt_tokens = 100;
    s.output_tokens = 10;
    s.arrival_s = -1;
    assert_true(kv_engine_submit(e, &s, err, sizeof err) >= 0);
    assert_true(kv_engine_step(e, NULL, err, sizeof err) > 0);
    kv_engine_destroy(e);
    assert_int_equal(g_releases, 0);
    assert_int_equal(g_destroys, 0);
    /* what the engine took is back; the owner's own allocation stays */
    assert_true(d->ops->held(d, 0) == before0);
    assert_true(d->ops->held(d, 1) == before1);
    assert_true(before0 >= 3 * GIB);
    /* a second engine on the same device starts from the same room */
    e = kv_engine_create(&c, err, sizeof err);
    if (!e) fail_msg("second create: %s", err);
    kv_engine_destroy(e);
    assert_int_equal(g_releases, 0);
    d->ops->free(d, 0, mine);
    assert_int_equal(d->ops->held(d, 0), 0);
    d->ops->destroy(d);
    assert_int_equal(g_destroys, 1);
    /* an engine's own host backend is its to destroy */
    kv_engine_config_default(&c);
    c.num_blocks = 16;
    e = kv_engine_create(&c, err, sizeof err);
    assert_non_null(e);
    kv_engine_destroy(e);
}

/* ---- what the fingerprints catch ---------------------------------------- */

/* Two ranks of one model hold different heads: the same token stores
 * different values on each (a rank that reads another's pool fails). */
static void test_host_global_heads(void **state)
{
    (void)state;
    char err[256];
    kv_device *d = kv_device_host_open(2, 0, err, sizeof err);
    kv_pool_layout l = {8, 16, 4, 4, 128, 2, KV_DTYPE_BF16, 0};
    assert_int_equal(d->ops->alloc_pool(d, 0, &l, NULL, err, sizeof err), 0);
    l.first_kv_head = 4;
    assert_int_equal(d->ops->alloc_pool(d, 1, &l, NULL, err, sizeof err), 0);
    kv_slot_write w[16];
    int32_t table[1] = {3}, tok[16];
    uint64_t key[1] = {99};
    for (int i = 0; i < 16; i++) {
        tok[i] = 7 + i;
        w[i] = (kv_slot_write){3 * 16 + i, tok[i], i, key[0]};
    }
    for (int r = 0; r < 2; r++) assert_int_equal(d->ops->write_kv(d, r, w, 16, err, sizeof err), 0);
    for (int i = 0; i < 16; i++)
        assert_true(kv_device_host_peek(d, 0, 3 * 16 + i) != kv_device_host_peek(d, 1, 3 * 16 + i));
    kv_verify_req v = {table, key, 1, tok, 0, 16};
    int64_t bad = -1;
    for (int r = 0; r < 2; r++) {
        assert_int_equal(d->ops->verify(d, r, &v, &bad, err, sizeof err), 0);
        assert_int_equal(bad, 0);
    }
    /* rank 0's values in rank 1's slots (a mix-up) */
    for (int i = 0; i < 16; i++) kv_device_host_poke(d, 1, 3 * 16 + i, kv_device_host_peek(d, 0, 3 * 16 + i));
    assert_int_equal(d->ops->verify(d, 1, &v, &bad, err, sizeof err), 0);
    assert_int_equal(bad, 16 * 4 * 4 * 2);
    d->ops->destroy(d);
}

/* The same tokens at the same positions after another prefix are other K/V. */
static void test_host_parent_key(void **state)
{
    (void)state;
    char err[256];
    kv_device *d = kv_device_host_open(1, 0, err, sizeof err);
    kv_pool_layout l = {8, 16, 2, 2, 64, 2, KV_DTYPE_FP8_E4M3, 0};
    assert_int_equal(d->ops->alloc_pool(d, 0, &l, NULL, err, sizeof err), 0);
    kv_slot_write w[16];
    int32_t table[2] = {5, 2}, tok[32];
    uint64_t keys[2] = {111, 222};
    for (int i = 0; i < 16; i++) {
        tok[16 + i] = 70 + i;
        w[i] = (kv_slot_write){2 * 16 + i, tok[16 + i], 16 + i, keys[1]};
    }
    assert_int_equal(d->ops->write_kv(d, 0, w, 16, err, sizeof err), 0);
    int64_t bad = -1;
    kv_verify_req v = {table, keys, 2, tok + 16, 16, 16}; /* positions 16..31: the second block */
    assert_int_equal(d->ops->verify(d, 0, &v, &bad, err, sizeof err), 0);
    assert_int_equal(bad, 0);
    keys[1] = 333; /* the block shared into a request whose first block differs */
    assert_int_equal(d->ops->verify(d, 0, &v, &bad, err, sizeof err), 0);
    assert_int_equal(bad, 16 * 2 * 2 * 2);
    d->ops->destroy(d);
}

/* Through the engine: requests with the same tokens but different cache
 * salts do not share; a block of one copied into the other (a wrong share)
 * and one rank's values copied into another's slots (a rank mix-up) are
 * both caught by the read-back. */
static void test_engine_catches_wrong_share_and_rank_mixup(void **state)
{
    (void)state;
    char err[512];
    kv_device *d = kv_device_host_open(2, 0, err, sizeof err);
    kv_engine_config c;
    kv_engine_config_default(&c);
    c.num_blocks = 64;
    c.tensor_parallel_size = 2;
    c.verify = 1;
    c.device = d;
    kv_engine *e = kv_engine_create(&c, err, sizeof err);
    assert_non_null(e);
    int32_t ids[48];
    for (int i = 0; i < 48; i++) ids[i] = 1000 + i;
    kv_request_spec s = {0};
    s.prompt_tokens = 48;
    s.prompt_token_ids = ids;
    s.num_prompt_token_ids = 48;
    s.output_tokens = 20;
    s.arrival_s = -1;
    s.cache_salt = "alice";
    int64_t a = kv_engine_submit(e, &s, err, sizeof err);
    s.cache_salt = "bob";
    int64_t b = kv_engine_submit(e, &s, err, sizeof err);
    assert_true(a >= 0 && b >= 0);
    assert_true(kv_engine_step(e, NULL, err, sizeof err) > 0);
    assert_int_equal(kv_engine_verify(e, err, sizeof err), 0);
    int32_t ta[8], tb[8];
    assert_true(kv_engine_block_table(e, a, ta, 8) >= 3);
    assert_true(kv_engine_block_table(e, b, tb, 8) >= 3);
    assert_true(ta[0] != tb[0]); /* different salts: no prefix-cache hit */
    /* b's first block holding a's bytes: same tokens, same positions, other prefix */
    for (int rank = 0; rank < 2; rank++)
        for (int i = 0; i < 16; i++)
            kv_device_host_poke(d, rank, (int64_t)tb[0] * 16 + i, kv_device_host_peek(d, rank, (int64_t)ta[0] * 16 + i));
    assert_int_equal(kv_engine_verify(e, err, sizeof err), KV_ENGINE_EVERIFY);
    assert_non_null(strstr(err, "differ"));
    kv_engine_destroy(e);

    /* rank 0's values in rank 1's slots */
    e = kv_engine_create(&c, err, sizeof err);
    assert_non_null(e);
    s.cache_salt = NULL;
    int64_t r = kv_engine_submit(e, &s, err, sizeof err);
    assert_true(kv_engine_step(e, NULL, err, sizeof err) > 0);
    assert_int_equal(kv_engine_verify(e, err, sizeof err), 0);
    int32_t t[8];
    kv_engine_block_table(e, r, t, 8);
    kv_device_host_poke(d, 1, (int64_t)t[1] * 16 + 5, kv_device_host_peek(d, 0, (int64_t)t[1] * 16 + 5));
    assert_int_equal(kv_engine_verify(e, err, sizeof err), KV_ENGINE_EVERIFY);
    assert_non_null(strstr(err, "rank 1"));
    kv_engine_destroy(e);
    d->ops->destroy(d);
}

/* The per-step read-back checks what changed, so a long decode reads each
 * token back about once, not once per step (quadratic). */
static void test_verify_is_linear(void **state)
{
    (void)state;
    char err[512];
    kv_device *d = kv_device_driver_open(&fake_driver, 1, err, sizeof err);
    assert_non_null(d);
    kv_engine_config c;
    kv_engine_config_default(&c);
    c.num_blocks = 256;
    c.max_model_len = 4096;
    c.verify = 1;
    c.device = d;
    kv_engine *e = kv_engine_create(&c, err, sizeof err);
    assert_non_null(e);
    kv_request_spec s = {0};
    s.prompt_tokens = 100;
    s.output_tokens = 2000;
    s.arrival_s = -1;
    assert_true(kv_engine_submit(e, &s, err, sizeof err) >= 0);
    int steps = 0;
    for (;;) {
        int n = kv_engine_step(e, NULL, err, sizeof err);
        if (n < 0) fail_msg("step: %s", err);
        if (n == 0) break;
        steps++;
    }
    assert_true(steps > 1900);
    print_message("%d steps, %lld tokens read back\n", steps, (long long)g_verified_tokens);
    assert_true(g_verified_tokens >= 2000);
    assert_true(g_verified_tokens < 3 * 2100); /* every step in full would be ~2 million */
    kv_engine_destroy(e);
    d->ops->destroy(d);
}

/* A bounded sample, call after call, reaches every token: a corrupted old
 * token the per-step pass does not look at again is found. */
static void test_verify_sample(void **state)
{
    (void)state;
    char err[512];
    kv_device *d = kv_device_host_open(1, 0, err, sizeof err);
    kv_engine_config c;
    kv_engine_config_default(&c);
    c.num_blocks = 128;
    c.verify = 0;
    c.write_kv = 1;
    c.device = d;
    kv_engine *e = kv_engine_create(&c, err, sizeof err);
    assert_non_null(e);
    int64_t ids[3];
    for (int i = 0; i < 3; i++) {
        kv_request_spec s = {0};
        s.prompt_tokens = 300 + 50 * i;
        s.output_tokens = 50;
        s.arrival_s = -1;
        ids[i] = kv_engine_submit(e, &s, err, sizeof err);
    }
    for (int i = 0; i < 4; i++) assert_true(kv_engine_step(e, NULL, err, sizeof err) > 0);
    int64_t checked = 0, total = 0;
    for (int i = 0; i < 40; i++) {
        assert_int_equal(kv_engine_verify_sample(e, 64, &checked, err, sizeof err), 0);
        assert_true(checked <= 64);
        total += checked;
    }
    assert_true(total >= 40 * 64 - 64);
    int32_t t[64];
    kv_engine_block_table(e, ids[2], t, 64);
    kv_device_host_poke(d, 0, (int64_t)t[3] * 16 + 2, 12345);
    int found = 0;
    for (int i = 0; i < 40 && !found; i++)
        found = kv_engine_verify_sample(e, 64, &checked, err, sizeof err) == KV_ENGINE_EVERIFY;
    assert_true(found); /* within one round of ~1,100 tokens at 64 per call */
    kv_engine_destroy(e);
    d->ops->destroy(d);
}

#ifdef KVLAB_HAVE_LESSONS
#include "lsn_server.h"

/* The lesson app's engines on a GPU: K/V written every step, no full
 * read-back per step, a bounded sample per frame instead, and the log says
 * so; ranks sharing the card are scaled as for every other caller. */
static void test_lesson_server_on_gpu(void **state)
{
    (void)state;
    char err[512] = "";
    kv_device *app = kvlab_backend_open_app(8);
    assert_non_null(app);
    lsn_server *s = lsn_server_new(test_assets_dir(), app, 0, err, sizeof err);
    assert_non_null(s);
    assert_int_equal(lsn_server_set(s, "model", "meta-llama/Llama-3.1-8B-Instruct", err, sizeof err), 0);
    assert_int_equal(lsn_server_set(s, "gpu", "h100-80gb", err, sizeof err), 0);
    assert_int_equal(lsn_server_set(s, "max-model-len", "8192", err, sizeof err), 0);
    assert_int_equal(lsn_server_set(s, "tensor-parallel-size", "2", err, sizeof err), 0);
    if (lsn_server_start(s, err, sizeof err) != 1) fail_msg("start: %s", err);
    kv_engine *e = lsn_server_engine(s);
    assert_non_null(e);
    assert_string_equal(kv_engine_device_name(e), "cuda");
    assert_int_equal(kv_engine_get_config(e)->write_kv, 1);
    assert_int_equal(kv_engine_get_config(e)->verify, 0);
    assert_true(kv_engine_device_scale(e) < 0.51);
    kv_event ev[128];
    int32_t n = kv_engine_events_since(e, 0, ev, 128), said = 0;
    for (int32_t i = 0; i < n; i++)
        said |= ev[i].type == KV_EV_LOG && ev[i].text && strstr(ev[i].text, "every step writes K/V") != NULL;
    assert_true(said);
    kv_request_spec sp = {0};
    sp.prompt_tokens = 3000;
    sp.output_tokens = 16;
    sp.arrival_s = -1;
    assert_true(kv_engine_submit(e, &sp, err, sizeof err) >= 0);
    g_verified_tokens = 0;
    for (int i = 0; i < 4; i++) assert_true(kv_engine_step(e, NULL, err, sizeof err) >= 0);
    assert_int_equal(g_verified_tokens, 0); /* no read-back inside the steps */
    int64_t checked = 0;
    assert_int_equal(kv_engine_verify_sample(e, LSN_VERIFY_SAMPLE_TOKENS, &checked, err, sizeof err), 0);
    assert_true(checked > 0 && checked <= LSN_VERIFY_SAMPLE_TOKENS);
    lsn_server_free(s);
    assert_int_equal(app->ops->held(app, 0) + app->ops->held(app, 1), 0); /* the engine gave back its own */
    assert_int_equal(g_releases, 0);
    app->ops->destroy(app);
}
#endif

/* ---- smaller pieces -------------------------------------------------------- */

static char g_progress_line[96];

static void on_progress(void *ctx, const char *what)
{
    (*(int *)ctx)++;
    snprintf(g_progress_line, sizeof g_progress_line, "%s", what);
}

/* What the program is told before a large pool is allocated: once, at
 * 1 GiB and above, in GiB with one decimal; nothing without a hook. */
static void test_alloc_progress(void **state)
{
    (void)state;
    char b[64];
    assert_string_equal(kv_device_alloc_line(b, sizeof b, (uint64_t)(118.2 * 1073741824.0)),
                        "allocating 118.2 GiB on the GPU...");
    kv_device d;
    memset(&d, 0, sizeof d);
    int calls = 0;
    kv_device_progress(&d, 8ull << 30); /* no hook: nothing to call */
    d.progress = on_progress;
    d.progress_ctx = &calls;
    kv_device_progress(&d, (1ull << 30) - 1);
    assert_int_equal(calls, 0);
    kv_device_progress(&d, 20ull << 30);
    assert_int_equal(calls, 1);
    assert_string_equal(g_progress_line, "allocating 20.0 GiB on the GPU...");
}

static void test_dtype_names(void **state)
{
    (void)state;
    assert_int_equal(kv_dtype_from_name("bfloat16", 2), KV_DTYPE_BF16);
    assert_int_equal(kv_dtype_from_name("float16", 2), KV_DTYPE_FP16);
    assert_int_equal(kv_dtype_from_name("fp8", 1), KV_DTYPE_FP8_E4M3);
    assert_int_equal(kv_dtype_from_name("fp8_e4m3", 1), KV_DTYPE_FP8_E4M3);
    assert_int_equal(kv_dtype_from_name("fp8_e5m2", 1), KV_DTYPE_FP8_E5M2);
    assert_int_equal(kv_dtype_from_name("fp8_inc", 1), KV_DTYPE_FP8_E4M3);
    assert_int_equal(kv_dtype_from_name("int8_per_token_head", 1), KV_DTYPE_INT8);
    assert_int_equal(kv_dtype_from_name("float32", 4), KV_DTYPE_FP32);
    assert_int_equal(kv_dtype_from_name("nonsense", 1), KV_DTYPE_FP8_E4M3);
    assert_int_equal(kv_dtype_from_name("nonsense", 3), -1);
    for (int dt = 0; dt < KV_DTYPE_COUNT; dt++) assert_int_equal(kv_dtype_from_name(kv_dtype_name(dt), 0), dt);
    assert_int_equal(kv_dtype_bytes(KV_DTYPE_FP8_E5M2), 1);
    assert_int_equal(kv_dtype_bytes(KV_DTYPE_INT8), 1);
}

/* A plan's fp16 cache becomes an fp16 engine pool (not bf16), and fp8_e5m2 stays e5m2. */
static void test_plan_dtype_reaches_the_pool(void **state)
{
    (void)state;
    char err[1024], notes[2048];
    plan_fixture *f = malloc(sizeof *f);
    load_plan(f, 1);
    static const struct { const char *flag; int dtype; } cases[] = {
        {"float16", KV_DTYPE_FP16}, {"bfloat16", KV_DTYPE_BF16}, {"fp8", KV_DTYPE_FP8_E4M3},
        {"fp8_e5m2", KV_DTYPE_FP8_E5M2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kv_args_init(&f->a);
        char *argv[] = {"meta-llama/Llama-3.1-8B-Instruct", "--kv-cache-dtype", (char *)cases[i].flag,
                        "--max-model-len", "8192"};
        if (kv_args_parse(&f->a, 5, argv, notes, sizeof notes, err, sizeof err) < 0) fail_msg("args: %s", err);
        if (kv_plan_compute(&f->m, f->gpu, &f->a, &f->p, err, sizeof err) != KV_PLAN_OK) fail_msg("plan: %s", err);
        kv_engine_config c;
        if (kv_engine_config_from_plan(&f->p, &f->m, f->gpu, &f->a, &c, NULL, 0, err, sizeof err) != 0)
            fail_msg("config: %s", err);
        if (c.cache_dtype != cases[i].dtype)
            fail_msg("--kv-cache-dtype %s: pool dtype %s", cases[i].flag, kv_dtype_name(c.cache_dtype));
    }
    kv_gpu_catalog_free(&f->cat);
    free(f);
}

static void test_match_catalog(void **state)
{
    (void)state;
    static const struct { const char *id; double total; } rows[] = {
        {"t4-16gb", 15835660288.0}, {"a10g-24gb", 23609475072.0}, {"a10-24gb", 23609475072.0},
        {"l4-24gb", 23570219008.0}, {"l40s-48gb", 47803596800.0}, {"rtx4090-24gb", 25386352640.0},
        {"rtx-a6000-48gb", 0}, {"rtx6000-ada-48gb", 51002867712.0}, {"a100-40gb-pcie", 42298834944.0},
        {"a100-80gb-sxm", 85100068864.0}, {"h100-80gb-sxm", 85045477376.0}, {"h100-80gb-pcie", 0},
        {"h100-nvl-94gb", 99861594112.0}, {"h200-141gb-sxm", 0}, {"gh200-96gb", 0},
    };
    kv_gpu gpus[sizeof rows / sizeof *rows];
    memset(gpus, 0, sizeof gpus);
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        snprintf(gpus[i].id, sizeof gpus[i].id, "%s", rows[i].id);
        gpus[i].reported_total_bytes = rows[i].total;
    }
    kv_gpu_catalog cat = {gpus, (int)(sizeof rows / sizeof *rows)};
    static const struct { const char *name; double total; const char *want; } cases[] = {
        {"NVIDIA H200", 150110748672.0, "h200-141gb-sxm"},
        {"NVIDIA H100 80GB HBM3", 85045477376.0, "h100-80gb-sxm"},
        {"NVIDIA H100 PCIe", 85030000000.0, "h100-80gb-pcie"},
        {"NVIDIA H100 NVL", 99861594112.0, "h100-nvl-94gb"},
        {"NVIDIA GH200 480GB", 102000000000.0, "gh200-96gb"},
        {"NVIDIA A100-SXM4-80GB", 85100068864.0, "a100-80gb-sxm"},
        {"NVIDIA A100-PCIE-40GB", 42298834944.0, "a100-40gb-pcie"},
        {"NVIDIA GeForce RTX 4090", 25386352640.0, "rtx4090-24gb"},
        {"NVIDIA RTX A6000", 51041271808.0, "rtx-a6000-48gb"},
        {"NVIDIA RTX 6000 Ada Generation", 51002867712.0, "rtx6000-ada-48gb"},
        {"NVIDIA L40S", 47803596800.0, "l40s-48gb"},
        {"NVIDIA L4", 23570219008.0, "l4-24gb"},
        {"NVIDIA A10G", 23609475072.0, "a10g-24gb"},
        {"Tesla T4", 15835660288.0, "t4-16gb"},
    };
    kv_device_info in;
    memset(&in, 0, sizeof in);
    snprintf(in.backend, sizeof in.backend, "cuda");
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(in.name, sizeof in.name, "%s", cases[i].name);
        in.total_bytes = (uint64_t)cases[i].total;
        const kv_gpu *g = kv_device_match_catalog(&cat, &in);
        assert_non_null(g);
        if (strcmp(g->id, cases[i].want)) fail_msg("%s matched %s, want %s", cases[i].name, g->id, cases[i].want);
    }
    snprintf(in.name, sizeof in.name, "Quadro P1000");
    assert_null(kv_device_match_catalog(&cat, &in));
    /* a MIG slice is none of them, though its name starts like the card's */
    snprintf(in.name, sizeof in.name, "NVIDIA H100 80GB HBM3 MIG 3g.40gb");
    in.total_bytes = 42000000000ull;
    assert_null(kv_device_match_catalog(&cat, &in));
    snprintf(in.name, sizeof in.name, "NVIDIA H100 80GB HBM3");
    snprintf(in.mig, sizeof in.mig, "MIG slice");
    assert_null(kv_device_match_catalog(&cat, &in));
    in.mig[0] = 0;
    snprintf(in.backend, sizeof in.backend, "host");
    assert_null(kv_device_match_catalog(&cat, &in));
}

static void test_hold_values(void **state)
{
    (void)state;
    char err[256];
    static const char *bad[] = {"nan", "NaN", "-1", "-inf", "", "abc", "5s", "0x10", " 5", "1e3x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        if (kvlab_parse_hold(bad[i], err, sizeof err) >= 0) fail_msg("--hold '%s' accepted", bad[i]);
        assert_non_null(strstr(err, "--hold needs a number of seconds"));
        assert_null(strchr(err, '\n'));
    }
    assert_true(kvlab_parse_hold("0", err, sizeof err) == 0);
    assert_true(kvlab_parse_hold("2.5", err, sizeof err) == 2.5);
    assert_true(kvlab_parse_hold("1e308", err, sizeof err) == 1e308);
    assert_true(isinf(kvlab_parse_hold("inf", err, sizeof err)));
    assert_true(isinf(kvlab_parse_hold("1e999", err, sizeof err))); /* beyond a double: forever */
    kvlab_serve_dev o;
    char *argv[] = {"x", "--hold=nan"};
    assert_int_equal(kvlab_serve_dev_flags(2, argv, &o, err, sizeof err), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_context_measured_once, setup),
        cmocka_unit_test_setup(test_ranks_map_onto_cards, setup),
        cmocka_unit_test_setup(test_fit_scale, setup),
        cmocka_unit_test_setup(test_shared_card_serve_allocate, setup),
        cmocka_unit_test_setup(test_shared_card_engine, setup),
        cmocka_unit_test_setup(test_borrowed_device_not_released, setup),
        cmocka_unit_test_setup(test_host_global_heads, setup),
        cmocka_unit_test_setup(test_host_parent_key, setup),
        cmocka_unit_test_setup(test_engine_catches_wrong_share_and_rank_mixup, setup),
        cmocka_unit_test_setup(test_verify_is_linear, setup),
        cmocka_unit_test_setup(test_verify_sample, setup),
#ifdef KVLAB_HAVE_LESSONS
        cmocka_unit_test_setup(test_lesson_server_on_gpu, setup),
#endif
        cmocka_unit_test(test_dtype_names),
        cmocka_unit_test(test_alloc_progress),
        cmocka_unit_test(test_plan_dtype_reaches_the_pool),
        cmocka_unit_test(test_match_catalog),
        cmocka_unit_test(test_hold_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
