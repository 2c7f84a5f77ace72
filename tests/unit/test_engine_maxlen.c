/* A prompt exactly max_model_len long is refused at submission, as vLLM's
 * input processor refuses it (prompt + at least one output token must fit);
 * before, the scheduler's max_model_len - 1 cap left its last prompt token
 * uncomputed forever and `kvlab simulate` never finished. One token shorter
 * is served and capped at max_model_len. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kv_engine.h"

static kv_engine *mk(int32_t max_model_len)
{
    kv_engine_config c;
    kv_engine_config_default(&c);
    c.num_blocks = 64;
    c.block_size = 16;
    c.max_model_len = max_model_len;
    c.max_num_batched_tokens = 128;
    c.max_num_seqs = 8;
    char err[256];
    kv_engine *e = kv_engine_create(&c, err, sizeof err);
    if (!e)
        fail_msg("kv_engine_create: %s", err);
    return e;
}

static void test_prompt_of_max_model_len_refused(void **state)
{
    (void)state;
    kv_engine *e = mk(256);
    kv_request_spec s = {0};
    s.prompt_tokens = 256;
    s.output_tokens = 4;
    s.arrival_s = -1;
    char err[512] = "";
    assert_int_equal(kv_engine_submit(e, &s, err, sizeof err), KV_ENGINE_ETOOLONG);
    assert_non_null(strstr(err, "The decoder prompt (length 256) plus the number of requested output tokens "
                                "(at least 1) is longer than the maximum model length of 256."));
    /* the same with the length split between a shared prefix and the prompt */
    s.prompt_tokens = 200;
    s.prefix_id = "repo";
    s.prefix_tokens = 56;
    assert_int_equal(kv_engine_submit(e, &s, err, sizeof err), KV_ENGINE_ETOOLONG);
    kv_engine_destroy(e);
}

static void test_one_shorter_finishes(void **state)
{
    (void)state;
    kv_engine *e = mk(256);
    kv_request_spec s = {0};
    s.prompt_tokens = 255;
    s.output_tokens = 4;
    s.arrival_s = -1;
    char err[512] = "";
    int64_t id = kv_engine_submit(e, &s, err, sizeof err);
    assert_true(id >= 0);
    int steps = 0;
    kv_request_view v;
    for (; steps < 100; steps++) {
        kv_step_result r;
        assert_true(kv_engine_step(e, &r, err, sizeof err) >= 0);
        assert_int_equal(kv_engine_request(e, id, &v), 0);
        if (v.status == KV_REQ_FINISHED)
            break;
    }
    assert_int_equal(v.status, KV_REQ_FINISHED);
    assert_int_equal(v.num_output_tokens, 1); /* capped at max_model_len */
    assert_int_equal(v.num_tokens, 256);
    kv_engine_destroy(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prompt_of_max_model_len_refused),
        cmocka_unit_test(test_one_shorter_finishes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
