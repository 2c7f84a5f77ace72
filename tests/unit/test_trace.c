/* JSONL traces and the seeded generator (kv_trace): every field, sorting,
 * errors naming the line and field, and the generator's determinism and
 * shape (Poisson arrivals, long-tailed lengths, shared-prefix fraction). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kv_trace.h"

static void test_parse_fields(void **state)
{
    (void)state;
    const char *t =
        "{\"arrival_s\": 0.5, \"prompt_tokens\": 100, \"output_tokens\": 20}\n"
        "\n"
        "{\"arrival_s\": 0.1, \"prompt_token_ids\": [1, 2, 3], \"output_tokens\": 4, \"priority\": -2}\r\n"
        "{\"arrival_s\": 0.5, \"prompt_tokens\": 0, \"output_tokens\": 1, \"prefix_id\": \"repo\", "
        "\"prefix_tokens\": 64, \"cache_salt\": \"alice\", \"extra\": true}\n"
        "{\"arrival_s\": 2, \"prompt_tokens\": 5, \"output_tokens\": 1, \"prefix_id\": 7, \"prefix_tokens\": 64}";
    kv_trace tr;
    char err[256];
    assert_int_equal(kv_trace_parse(t, strlen(t), &tr, err, sizeof err), 0);
    assert_int_equal(tr.count, 4);
    /* sorted by arrival, ties keep file order */
    assert_true(tr.reqs[0].arrival_s == 0.1);
    assert_int_equal(tr.reqs[0].num_ids, 3);
    assert_int_equal(tr.reqs[0].prompt_token_ids[2], 3);
    assert_int_equal(tr.reqs[0].priority, -2);
    assert_int_equal(tr.reqs[1].prompt_tokens, 100);
    assert_string_equal(tr.reqs[2].prefix_id, "repo");
    assert_int_equal(tr.reqs[2].prefix_tokens, 64);
    assert_string_equal(tr.reqs[2].cache_salt, "alice");
    assert_string_equal(tr.reqs[3].prefix_id, "7");
    kv_request_spec s;
    kv_trace_spec(&tr, 0, &s);
    assert_int_equal(s.num_prompt_token_ids, 3);
    assert_non_null(s.prompt_token_ids);
    assert_true(s.arrival_s == 0.1);
    kv_trace_free(&tr);
}

static void expect_error(const char *text, const char *want)
{
    kv_trace tr;
    char err[256] = "";
    assert_int_equal(kv_trace_parse(text, strlen(text), &tr, err, sizeof err), -1);
    if (!strstr(err, want))
        fail_msg("for %s\nwanted '%s' in '%s'", text, want, err);
    assert_int_equal(tr.count, 0);
    assert_null(tr.reqs);
}

static void test_parse_errors(void **state)
{
    (void)state;
    const char *ok = "{\"arrival_s\": 0, \"prompt_tokens\": 1, \"output_tokens\": 1}\n";
    char buf[512];
    snprintf(buf, sizeof buf, "%s%s{\"arrival_s\": 1, \"prompt_tokens\": 3}\n", ok, ok);
    expect_error(buf, "line 3: field 'output_tokens': missing");
    expect_error("{\"prompt_tokens\": 3, \"output_tokens\": 1}", "line 1: field 'arrival_s': missing");
    expect_error("{\"arrival_s\": -1, \"prompt_tokens\": 3, \"output_tokens\": 1}", "field 'arrival_s': must be");
    expect_error("{\"arrival_s\": \"soon\", \"prompt_tokens\": 3, \"output_tokens\": 1}", "field 'arrival_s'");
    expect_error("{\"arrival_s\": 0, \"prompt_tokens\": 3, \"output_tokens\": 0}", "field 'output_tokens': must be");
    expect_error("{\"arrival_s\": 0, \"prompt_tokens\": 2.5, \"output_tokens\": 1}", "field 'prompt_tokens'");
    expect_error("{\"arrival_s\": 0, \"output_tokens\": 1}", "field 'prompt_tokens': missing");
    expect_error("{\"arrival_s\": 0, \"prompt_tokens\": 1, \"prompt_token_ids\": [1], \"output_tokens\": 1}",
                 "not both");
    expect_error("{\"arrival_s\": 0, \"prompt_token_ids\": [1, \"a\"], \"output_tokens\": 1}",
                 "field 'prompt_token_ids': item 1");
    expect_error("{\"arrival_s\": 0, \"prompt_token_ids\": 5, \"output_tokens\": 1}", "field 'prompt_token_ids'");
    expect_error("{\"arrival_s\": 0, \"prompt_tokens\": 1, \"output_tokens\": 1, \"prefix_id\": \"a\"}",
                 "field 'prefix_tokens': missing");
    expect_error("{\"arrival_s\": 0, \"prompt_tokens\": 1, \"output_tokens\": 1, \"prefix_tokens\": 4}",
                 "field 'prefix_id': missing");
    expect_error("{\"arrival_s\": 0, \"prompt_tokens\": 1, \"output_tokens\": 1, \"priority\": \"high\"}",
                 "field 'priority'");
    expect_error("{\"arrival_s\": 0, \"prompt_tokens\": 1, \"output_tokens\": 1, \"cache_salt\": 3}",
                 "field 'cache_salt'");
    expect_error("{\"arrival_s\": 0, \"prompt_tokens\": 0, \"output_tokens\": 1}", "empty");
    snprintf(buf, sizeof buf, "%s{\"arrival_s\": 0, \"prompt_tokens\": 1,\n", ok);
    expect_error(buf, "line 2: not valid JSON");
    expect_error("[1, 2]", "line 1: expected a JSON object");
    expect_error("\n\n", "no requests");
}

static void test_load_missing_file(void **state)
{
    (void)state;
    kv_trace tr;
    char err[256];
    assert_int_equal(kv_trace_load("/nonexistent/trace.jsonl", &tr, err, sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent/trace.jsonl"));
}

/* Interning: equal strings share one copy, distinct ones do not; a trace
 * with many distinct salts (each its own string) interns them all. */
static void test_intern_many(void **state)
{
    (void)state;
    enum { N = 20000 };
    size_t cap = (size_t)N * 2 * 96 + 64;
    char *t = malloc(cap);
    size_t len = 0;
    for (int i = 0; i < N; i++)
        len += (size_t)snprintf(t + len, cap - len,
                                "{\"arrival_s\": 0, \"prompt_tokens\": 4, \"output_tokens\": 1, \"cache_salt\": \"u%d\"}\n"
                                "{\"arrival_s\": 0, \"prompt_tokens\": 4, \"output_tokens\": 1, \"cache_salt\": \"u%d\"}\n",
                                i, i);
    kv_trace tr;
    char err[256];
    assert_int_equal(kv_trace_parse(t, len, &tr, err, sizeof err), 0);
    assert_int_equal(tr.count, 2 * N);
    assert_int_equal(tr.num_strings, N);
    for (int i = 0; i < N; i++) {
        assert_ptr_equal(tr.reqs[2 * i].cache_salt, tr.reqs[2 * i + 1].cache_salt);
        char want[16];
        snprintf(want, sizeof want, "u%d", i);
        assert_string_equal(tr.reqs[2 * i].cache_salt, want);
        if (i)
            assert_ptr_not_equal(tr.reqs[2 * i].cache_salt, tr.reqs[2 * i - 2].cache_salt);
    }
    kv_trace_free(&tr);
    free(t);
    /* the generator's prefixes are interned the same way */
    assert_int_equal(kv_trace_generate("gen:requests=10,shared=1,prefixes=50000", &tr, err, sizeof err), 0);
    assert_int_equal(tr.num_strings, 50000);
    kv_trace_free(&tr);
}

/* Only regular files are read: a device or a FIFO is refused at once (no
 * reading until memory runs out, no blocking on a writer). */
static void test_load_refuses_special_files(void **state)
{
    (void)state;
    kv_trace tr;
    char err[256];
    assert_int_equal(kv_trace_load("/dev/zero", &tr, err, sizeof err), -1);
    assert_non_null(strstr(err, "/dev/zero"));
    assert_non_null(strstr(err, "not a regular file"));
    char dir[] = "/tmp/kvlab-trace-XXXXXX";
    if (!mkdtemp(dir))
        skip();
    char fifo[64];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    if (mkfifo(fifo, 0600) != 0) {
        rmdir(dir);
        skip();
    }
    assert_int_equal(kv_trace_load(fifo, &tr, err, sizeof err), -1);
    assert_non_null(strstr(err, "FIFO"));
    unlink(fifo);
    rmdir(dir);
}

static void test_generator(void **state)
{
    (void)state;
    kv_trace a, b;
    char err[256];
    const char *spec = "gen:requests=20000,rate=50,prompt=400,output=100,shared=0.3,prefix=512,prefixes=3,seed=7";
    assert_int_equal(kv_trace_open(spec, &a, err, sizeof err), 0);
    assert_int_equal(kv_trace_open(spec, &b, err, sizeof err), 0);
    assert_int_equal(a.count, 20000);
    int64_t shared = 0;
    double sum_prompt = 0;
    int32_t max_prompt = 0;
    for (int64_t i = 0; i < a.count; i++) {
        assert_true(a.reqs[i].arrival_s == b.reqs[i].arrival_s);
        assert_int_equal(a.reqs[i].prompt_tokens, b.reqs[i].prompt_tokens);
        if (i)
            assert_true(a.reqs[i].arrival_s >= a.reqs[i - 1].arrival_s);
        if (a.reqs[i].prefix_id) {
            shared++;
            assert_int_equal(a.reqs[i].prefix_tokens, 512);
        }
        sum_prompt += a.reqs[i].prompt_tokens;
        if (a.reqs[i].prompt_tokens > max_prompt)
            max_prompt = a.reqs[i].prompt_tokens;
        assert_true(a.reqs[i].output_tokens >= 1);
    }
    /* Poisson at 50/s: 20000 arrivals take ~400 s */
    double span = a.reqs[a.count - 1].arrival_s;
    assert_true(span > 380 && span < 420);
    assert_true(shared > 5700 && shared < 6300);
    /* log-normal: the mean sits above the median and the tail reaches far */
    assert_true(sum_prompt / (double)a.count > 450);
    assert_true(max_prompt > 4 * 400);
    kv_trace_free(&a);
    kv_trace_free(&b);
    assert_int_equal(kv_trace_open("gen:requests=10,seed=8", &b, err, sizeof err), 0);
    kv_trace_free(&b);
    assert_int_equal(kv_trace_generate("gen:reqests=10", &b, err, sizeof err), -1);
    assert_non_null(strstr(err, "unknown key 'reqests'"));
    assert_int_equal(kv_trace_generate("gen:rate=fast", &b, err, sizeof err), -1);
    assert_non_null(strstr(err, "key 'rate'"));
    assert_int_equal(kv_trace_generate("gen:shared=2", &b, err, sizeof err), -1);
    assert_int_equal(kv_trace_generate("gen:prompt", &b, err, sizeof err), -1);
    assert_non_null(strstr(err, "key=value"));
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The other length shapes: {mean, p99} fits a log-normal to both figures,
 * {min, max} draws whole lengths uniformly, sigma 0 is one fixed length;
 * impossible fits are refused with the key named. */
static void test_generator_lengths(void **state)
{
    (void)state;
    kv_trace t;
    char err[256];
    assert_int_equal(kv_trace_generate("gen:requests=20000,prompt_mean=1000,prompt_p99=6000,max_prompt=1e6,"
                                       "output_min=10,output_max=20,seed=3", &t, err, sizeof err), 0);
    double sum = 0;
    int32_t *p = malloc((size_t)t.count * sizeof *p);
    int lo = 0, hi = 0;
    for (int64_t i = 0; i < t.count; i++) {
        p[i] = t.reqs[i].prompt_tokens;
        sum += p[i];
        assert_in_range(t.reqs[i].output_tokens, 10, 20);
        lo += t.reqs[i].output_tokens == 10;
        hi += t.reqs[i].output_tokens == 20;
    }
    qsort(p, (size_t)t.count, sizeof *p, cmp_i32);
    double mean = sum / (double)t.count, p99 = p[t.count * 99 / 100];
    assert_true(mean > 950 && mean < 1050);
    assert_true(p99 > 5400 && p99 < 6600);
    assert_true(lo > 1000 && hi > 1000); /* both ends drawn, about 1 in 11 each */
    free(p);
    kv_trace_free(&t);
    assert_int_equal(kv_trace_generate("gen:requests=50,prompt=700,prompt_sigma=0", &t, err, sizeof err), 0);
    for (int64_t i = 0; i < t.count; i++)
        assert_int_equal(t.reqs[i].prompt_tokens, 700);
    kv_trace_free(&t);
    assert_int_equal(kv_trace_generate("gen:prompt_mean=100", &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "prompt_mean and prompt_p99 go together"));
    assert_int_equal(kv_trace_generate("gen:output_mean=100,output_p99=5000", &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "output_p99 must lie between"));
    assert_int_equal(kv_trace_generate("gen:prompt_min=9,prompt_max=3", &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "prompt_min is above prompt_max"));
}

/* What the virtual clock and one line can hold: an arrival past
 * KV_TRACE_MAX_ARRIVAL_S (where a double no longer keeps microseconds and
 * latencies round to 0) is refused, in a file and from the generator; a
 * second object after the first on one line is refused, not dropped; a
 * token count past the cap names the cap. */
static void test_parse_limits(void **state)
{
    (void)state;
    expect_error("{\"arrival_s\": 1e308, \"prompt_tokens\": 3, \"output_tokens\": 1}",
                 "line 1: field 'arrival_s': at most 1e+09 s");
    expect_error("{\"arrival_s\": 1000000000.5, \"prompt_tokens\": 3, \"output_tokens\": 1}",
                 "field 'arrival_s': at most");
    expect_error("{\"arrival_s\": 0, \"prompt_tokens\": 3, \"output_tokens\": 1} {\"x\": 1}",
                 "line 1: text after the JSON object");
    expect_error("{\"arrival_s\": 0, \"prompt_tokens\": 1e12, \"output_tokens\": 1}",
                 "field 'prompt_tokens': must be a whole number from 0 to 100,000,000");
    expect_error("{\"arrival_s\": 0, \"prompt_tokens\": 1, \"output_tokens\": 1e9}",
                 "field 'output_tokens': must be a whole number from 1 to 100,000,000");
    kv_trace t;
    char err[256];
    const char *ok = "{\"arrival_s\": 1e9, \"prompt_tokens\": 3, \"output_tokens\": 1}  \r\n";
    assert_int_equal(kv_trace_parse(ok, strlen(ok), &t, err, sizeof err), 0);
    assert_int_equal(t.count, 1);
    kv_trace_free(&t);
    assert_int_equal(kv_trace_generate("gen:requests=20,rate=1e-9", &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "past the virtual clock's range"));
    assert_int_equal(t.count, 0);
    assert_int_equal(kv_trace_generate("gen:requests=20,rate=1e-6", &t, err, sizeof err), 0);
    assert_true(t.reqs[t.count - 1].arrival_s <= KV_TRACE_MAX_ARRIVAL_S);
    kv_trace_free(&t);
}

/* A trace holds at most KV_TRACE_MAX_REQUESTS: gen:n=1e8 was generated and
 * then simulated for hours (80 GB of request state) instead of refused. */
static void test_request_limit(void **state)
{
    (void)state;
    kv_trace t;
    char err[256];
    assert_int_equal(kv_trace_generate("gen:n=1e8", &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "requests=100000000 is more than the 1000000 requests one run simulates"));
    assert_int_equal(t.count, 0);
    assert_int_equal(kv_trace_generate("gen:requests=1000001", &t, err, sizeof err), -1);
    assert_int_equal(kv_trace_generate("gen:requests=1000000,rate=1000", &t, err, sizeof err), 0);
    assert_int_equal(t.count, KV_TRACE_MAX_REQUESTS);
    kv_trace_free(&t);
    /* a file: the line past the limit is named */
    static const char line[] = "{\"arrival_s\": 0, \"prompt_tokens\": 1, \"output_tokens\": 1}\n";
    size_t n = KV_TRACE_MAX_REQUESTS + 1, ll = sizeof line - 1;
    char *text = malloc(n * ll);
    assert_non_null(text);
    for (size_t i = 0; i < n; i++)
        memcpy(text + i * ll, line, ll);
    assert_int_equal(kv_trace_parse(text, n * ll, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "line 1000001: more than the 1000000 requests"));
    assert_int_equal(kv_trace_parse(text, (n - 1) * ll, &t, err, sizeof err), 0);
    assert_int_equal(t.count, KV_TRACE_MAX_REQUESTS);
    kv_trace_free(&t);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_fields),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_parse_limits),
        cmocka_unit_test(test_request_limit),
        cmocka_unit_test(test_load_missing_file),
        cmocka_unit_test(test_intern_many),
        cmocka_unit_test(test_load_refuses_special_files),
        cmocka_unit_test(test_generator),
        cmocka_unit_test(test_generator_lengths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
