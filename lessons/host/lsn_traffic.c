#include "lsn_traffic.h"

#include <math.h>
#include <string.h>

double lsn_rng_next(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return (double)((x * 0x2545F4914F6CDD1Dull) >> 11) / 9007199254740992.0;
}

void lsn_traffic_stop(lsn_traffic *t)
{
    uint64_t *rng = t->rng;
    memset(t, 0, sizeof *t);
    t->rng = rng;
}

int lsn_traffic_pending(const lsn_traffic *t)
{
    return t->active && !t->fn && t->rate > 0 && (t->count == 0 || t->sent < t->count);
}

void lsn_traffic_feed(lsn_traffic *t, kv_engine *e, double clock_s)
{
    while (lsn_traffic_pending(t) && t->next_s <= clock_s) {
        kv_request_spec spec = {0};
        spec.prompt_tokens = t->prompt_min + (int32_t)(lsn_rng_next(t->rng) * (t->prompt_max - t->prompt_min + 1));
        spec.output_tokens = t->output_min + (int32_t)(lsn_rng_next(t->rng) * (t->output_max - t->output_min + 1));
        if (spec.prompt_tokens > t->prompt_max)
            spec.prompt_tokens = t->prompt_max;
        if (spec.output_tokens > t->output_max)
            spec.output_tokens = t->output_max;
        spec.prefix_id = t->prefix_id[0] ? t->prefix_id : NULL;
        spec.prefix_tokens = t->prefix_tokens;
        spec.arrival_s = -1;
        kv_engine_submit(e, &spec, NULL, 0);
        t->sent++;
        t->next_s += -log(1 - lsn_rng_next(t->rng)) / t->rate;
    }
}
