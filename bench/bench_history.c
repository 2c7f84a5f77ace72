/* kvlab history benchmark (not a test): the memory the history of a
 * 100,000-step run takes and how long seeking in it takes, for the README.
 *
 * A 20,000-block pool of 16-token blocks (320,000 tokens; Llama-3.1-8B
 * geometry, block events on as in the lesson app) runs a closed loop of
 * requests (log-uniform prompts of 64..4,096 tokens, outputs of 16..1,024,
 * a third of them behind one of 8 shared prefixes of 512 tokens, the queue
 * kept ~400 deep so the pool fills, preempts and evicts) for 100,000 steps
 * with a kv_history attached (default bound 64 MiB). Then it seeks to 2,000
 * random positions, then 2,000 times one step back from a random position
 * (the `[` key), then 2,000 times one step forward (`]`), and prints the
 * history's memory (peak and final, split), the recording overhead per step,
 * and seek times p50/p99/max.
 *
 * usage: bench_history [STEPS] [MAX_MIB] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "kv_engine.h"
#include "kv_hash.h"
#include "kv_history.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* CPU time of this thread: what one core spent, whatever else the machine runs */
static double cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t rng_s = 12345;
static uint32_t rnd(uint32_t n)
{
    rng_s += 0x9E3779B97F4A7C15ull;
    return (uint32_t)(kv_hash_mix(rng_s, 3) % n);
}

static int32_t log_uniform(int32_t lo, int32_t hi)
{
    double u = rnd(1u << 30) / (double)(1u << 30);
    double v = lo * __builtin_exp(u * __builtin_log((double)hi / lo));
    return (int32_t)v;
}

static void config(kv_engine_config *c)
{
    kv_engine_config_default(c);
    c->num_blocks = 20000;
    c->block_size = 16;
    c->max_model_len = 8192;
    c->max_num_seqs = 256;
    c->max_num_batched_tokens = 8192;
    c->verify = 0;
    c->write_kv = 0;
    c->block_events = 1;
}

/* One run of `steps` steps; returns seconds of wall time spent stepping. */
static double run(kv_engine *e, int64_t steps, kv_history *h, uint64_t *peak)
{
    static const char *prefixes[] = {"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"};
    rng_s = 12345;
    double t = 0;
    for (int64_t s = 0; s < steps; s++) {
        kv_engine_info in;
        kv_engine_get_info(e, &in);
        while (in.num_waiting + in.num_running < 400) {
            kv_request_spec sp;
            memset(&sp, 0, sizeof sp);
            sp.prompt_tokens = log_uniform(64, 4096);
            sp.output_tokens = log_uniform(16, 1024);
            sp.arrival_s = -1;
            if (rnd(3) == 0) {
                sp.prefix_id = prefixes[rnd(8)];
                sp.prefix_tokens = 512;
            }
            kv_engine_submit(e, &sp, NULL, 0);
            in.num_waiting++;
        }
        double t0 = cpu();
        kv_engine_step(e, NULL, NULL, 0);
        t += cpu() - t0;
        if (h && peak) {
            kv_history_stats st;
            if (s % 64 == 0) {
                kv_history_get_stats(h, &st);
                if (st.bytes > *peak)
                    *peak = st.bytes;
            }
        }
    }
    return t;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, double *t, double *w, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_d);
    qsort(w, (size_t)n, sizeof *w, cmp_d);
    printf("  %-24s CPU p50 %5.2f ms  p99 %5.2f ms  max %5.2f ms | wall p50 %5.2f  p99 %5.2f  max %5.2f ms\n", what,
           1e3 * t[n / 2], 1e3 * t[(n * 99) / 100], 1e3 * t[n - 1], 1e3 * w[n / 2], 1e3 * w[(n * 99) / 100],
           1e3 * w[n - 1]);
}

int main(int argc, char **argv)
{
    int64_t steps = argc > 1 ? atoll(argv[1]) : 100000;
    uint64_t max_mib = argc > 2 ? (uint64_t)atoll(argv[2]) : 64;
    char err[512];
    kv_engine_config c;
    config(&c);
    /* the same run without a history, for the recording overhead */
    kv_engine *plain = kv_engine_create(&c, err, sizeof err);
    if (!plain) {
        fprintf(stderr, "bench: %s\n", err);
        return 2;
    }
    double t_plain = run(plain, steps, NULL, NULL);
    kv_engine_metrics pm;
    kv_engine_get_metrics(plain, &pm);
    kv_engine_destroy(plain);

    kv_engine *e = kv_engine_create(&c, err, sizeof err);
    kv_history_opts o = {max_mib << 20, 0};
    kv_history *h = kv_history_create(&o, err, sizeof err);
    if (!e || !h || kv_history_attach(h, e, err, sizeof err) != 0) {
        fprintf(stderr, "bench: %s\n", err);
        return 2;
    }
    uint64_t peak = 0;
    double t_hist = run(e, steps, h, &peak);
    kv_history_sync(h);
    kv_history_stats st;
    kv_history_get_stats(h, &st);
    if (st.bytes > peak)
        peak = st.bytes;
    kv_engine_metrics m;
    kv_engine_get_metrics(e, &m);
    int64_t first = kv_history_first(h), present = kv_history_present(h);
    printf("history of %lld steps on a %d-block pool (%d tokens each): %lld preemptions, %lld evictions, "
           "%lld requests finished\n",
           (long long)steps, (int)c.num_blocks, (int)c.block_size, (long long)m.num_preemptions_total,
           (long long)m.block_evictions, (long long)m.request_success_total);
    printf("  memory: peak %.1f MiB, now %.1f MiB of the %.0f MiB bound (checkpoints %.1f MiB in %d, journal %.1f "
           "MiB, marks %.1f MiB for %lld marks); the replay engine is one more engine (%.1f MiB)\n",
           peak / 1048576.0, st.bytes / 1048576.0, st.max_bytes / 1048576.0, st.checkpoint_bytes / 1048576.0,
           st.checkpoints, st.journal_bytes / 1048576.0, st.mark_bytes / 1048576.0, (long long)st.marks,
           kv_engine_host_bytes(&c) / 1048576.0);
    printf("  checkpoint every %d steps; positions %lld..%lld kept (%lld forgotten)\n", st.every, (long long)first,
           (long long)present, (long long)st.forgotten);
    printf("  stepping (CPU time): %.2f us/step without a history, %.2f us/step recording (%+.1f%%)\n", 1e6 * t_plain / steps,
           1e6 * t_hist / steps, 100.0 * (t_hist - t_plain) / t_plain);
    if (pm.num_preemptions_total != m.num_preemptions_total || pm.block_evictions != m.block_evictions)
        printf("  WARNING: the run with a history differs from the one without\n");

    enum { N = 2000 };
    static double tr[N], tb[N], tf[N], wr[N], wb[N], wf[N];
    int64_t span = present - first + 1;
    for (int i = 0; i < N; i++) {
        int64_t pos = first + (int64_t)rnd((uint32_t)span);
        double t0 = cpu(), w0 = now();
        if (kv_history_seek(h, pos, err, sizeof err) != 0) {
            fprintf(stderr, "bench: seek %lld: %s\n", (long long)pos, err);
            return 1;
        }
        tr[i] = cpu() - t0;
        wr[i] = now() - w0;
    }
    for (int i = 0; i < N; i++) {
        int64_t pos = first + 1 + (int64_t)rnd((uint32_t)(span - 1));
        kv_history_seek(h, pos, err, sizeof err);
        double t0 = cpu(), w0 = now();
        kv_history_seek(h, pos - 1, err, sizeof err);
        tb[i] = cpu() - t0;
        wb[i] = now() - w0;
    }
    int64_t pos = first + (int64_t)rnd((uint32_t)(span / 2));
    kv_history_seek(h, pos, err, sizeof err);
    for (int i = 0; i < N; i++) {
        double t0 = cpu(), w0 = now();
        kv_history_seek(h, ++pos, err, sizeof err);
        tf[i] = cpu() - t0;
        wf[i] = now() - w0;
    }
    printf("seeking:\n");
    report("to a random step", tr, wr, N);
    report("one step back ([)", tb, wb, N);
    report("one step forward (])", tf, wf, N);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("  peak RSS of the process %.1f MiB (two engines of this pool, the history and the benchmark)\n",
           ru.ru_maxrss / 1024.0);
    kv_history_destroy(h);
    kv_engine_destroy(e);
    return 0;
}
