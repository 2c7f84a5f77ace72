#include "kv_timemodel.h"

#include <string.h>

double kv_timemodel_step(const kv_time_params *p, const kv_step_work *w, kv_step_time *out)
{
    kv_step_time t;
    memset(&t, 0, sizeof t);
    if (w->tokens > 0) {
        int32_t tp = p->tp > 0 ? p->tp : 1;
        double flops = 2.0 * p->active_params * w->tokens +
                       2.0 * (double)p->num_layers * (double)p->hidden_size * w->attention_pairs;
        t.flops = flops / tp;
        t.bytes = p->weight_bytes + p->kv_bytes_per_token * (w->kv_tokens_read + w->tokens);
        t.compute_s = p->peak_flops > 0 ? t.flops / p->peak_flops : 0.0;
        t.memory_s = p->hbm_bytes_per_s > 0 ? t.bytes / p->hbm_bytes_per_s : 0.0;
        if (tp > 1 && p->link_bytes_per_s > 0)
            t.comm_s = 2.0 * p->num_layers * (2.0 * (tp - 1) / tp) * w->tokens * p->hidden_size * 2.0 /
                       p->link_bytes_per_s;
        t.memory_bound = t.memory_s >= t.compute_s;
        t.total_s = (t.memory_s > t.compute_s ? t.memory_s : t.compute_s) + t.comm_s;
    }
    if (out)
        *out = t;
    return t.total_s;
}
