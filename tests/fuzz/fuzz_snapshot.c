/* libFuzzer target for loading an engine image from a hostile presenter (a
 * classroom follower's late join, lsn_engine_load_image -> kv_snapshot_load):
 * a real image of a busy engine (running, waiting and finished requests,
 * cached blocks, a prefix shared by all, preemptions) is edited by the input
 * (each 5 bytes: a 32-bit offset into the image and a byte to XOR there; a
 * last odd byte cuts the image short), then loaded into an engine of the
 * same config. It must load or say why (EINVAL/ENOMEM, with a message); an
 * engine that loaded, or that was left empty by a refusal, must take more
 * requests and steps and read back through every accessor without a fault. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kv_engine.h"
#include "kv_frame.h"
#include "kv_snapshot.h"

static kv_engine_config g_cfg;
static kv_snapshot g_img;
static uint8_t *g_work;

static void submit(kv_engine *e, int32_t prompt, int32_t out, const char *prefix)
{
    kv_request_spec s;
    memset(&s, 0, sizeof s);
    s.prompt_tokens = prompt;
    s.output_tokens = out;
    s.prefix_id = prefix;
    s.prefix_tokens = prefix ? 24 : 0;
    s.arrival_s = -1;
    kv_engine_submit(e, &s, NULL, 0);
}

static void init_once(void)
{
    kv_engine_config_default(&g_cfg);
    g_cfg.block_size = 4;
    g_cfg.num_blocks = 48;
    g_cfg.max_model_len = 128;
    g_cfg.max_num_seqs = 6;
    g_cfg.max_num_batched_tokens = 64;
    g_cfg.seed = 7;
    g_cfg.verify = 0;
    g_cfg.write_kv = 0;
    char err[256];
    kv_engine *e = kv_engine_create(&g_cfg, err, sizeof err);
    if (!e)
        abort();
    for (int i = 0; i < 40; i++) {
        submit(e, 8 + (i * 13) % 60, 4 + (i * 7) % 30, i % 3 ? "sys" : NULL);
        kv_step_result r;
        if (kv_engine_step(e, &r, err, sizeof err) < 0)
            abort();
    }
    kv_snapshot_init(&g_img);
    if (kv_snapshot_save(e, &g_img, err, sizeof err) != 0)
        abort();
    kv_engine_destroy(e);
    g_work = malloc(g_img.len);
    if (!g_work)
        abort();
}

/* Read everything the views and the lesson runtime read, then run on. */
static void exercise(kv_engine *e)
{
    kv_engine_info in;
    kv_engine_get_info(e, &in);
    static kv_frame f;
    static int f_init;
    if (!f_init) {
        kv_frame_init(&f);
        f_init = 1;
    }
    char ferr[256];
    kv_frame_capture(&f, e, NULL, NULL, ferr, sizeof ferr);
    kv_event ev[64];
    kv_engine_events_since(e, 0, ev, 64);
    char err[256];
    for (int i = 0; i < 20; i++) {
        if (i % 4 == 0)
            submit(e, 10 + i, 5, i % 8 ? "sys" : NULL);
        kv_step_result r;
        if (kv_engine_step(e, &r, err, sizeof err) < 0)
            break;
    }
    kv_engine_get_info(e, &in);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_work)
        init_once();
    memcpy(g_work, g_img.data, g_img.len);
    size_t len = g_img.len;
    size_t k = 0;
    for (; k + 5 <= size; k += 5) {
        uint32_t off = (uint32_t)data[k] | (uint32_t)data[k + 1] << 8 | (uint32_t)data[k + 2] << 16 |
                       (uint32_t)data[k + 3] << 24;
        g_work[off % len] ^= data[k + 4];
    }
    if (k < size)
        len = len * data[k] / 256; /* cut short */
    char err[256];
    kv_engine *e = kv_engine_create(&g_cfg, err, sizeof err);
    if (!e)
        abort();
    kv_snapshot s = {g_work, len, g_img.len, 0};
    err[0] = '\0';
    int rc = kv_snapshot_load(e, &s, err, sizeof err);
    if (rc != 0 && !err[0])
        abort(); /* a refusal says why */
    exercise(e);
    kv_engine_destroy(e);
    return 0;
}
