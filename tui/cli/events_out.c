#include "events_out.h"

#include <string.h>

uint32_t kvlab_events_capacity(int32_t num_blocks, int32_t max_num_seqs)
{
    uint64_t need = 8 * (uint64_t)(num_blocks > 0 ? num_blocks : 0) + 16 * (uint64_t)(max_num_seqs > 0 ? max_num_seqs : 0);
    if (need < 65536)
        need = 65536;
    if (need > (1u << 30))
        need = 1u << 30;
    return (uint32_t)need;
}

static void put_text(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static const char *levels[] = {"info", "warning", "error"};

void kvlab_events_drain(kvlab_events_out *o, const kv_engine *e)
{
    static kv_event ev[4096];
    for (;;) {
        int32_t n = kv_engine_events_since(e, o->last_seq, ev, 4096);
        if (n <= 0)
            return;
        for (int32_t i = 0; i < n; i++) {
            const kv_event *v = &ev[i];
            if (v->seq > o->last_seq + 1) {
                fprintf(o->f, "{\"type\":\"gap\",\"first_seq\":%llu,\"last_seq\":%llu}\n",
                        (unsigned long long)(o->last_seq + 1), (unsigned long long)(v->seq - 1));
                o->lost += v->seq - o->last_seq - 1;
            }
            fprintf(o->f, "{\"seq\":%llu,\"step\":%lld,\"t\":%.9g,\"type\":\"%s\"", (unsigned long long)v->seq,
                    (long long)v->step, v->clock_s, kv_event_type_name(v->type));
            if (v->block_id >= 0)
                fprintf(o->f, ",\"block\":%d", (int)v->block_id);
            if (v->req_id >= 0)
                fprintf(o->f, ",\"request\":%lld", (long long)v->req_id);
            if (v->type == KV_EV_LOG) {
                fprintf(o->f, ",\"level\":\"%s\",\"text\":", levels[v->level >= 0 && v->level <= 2 ? v->level : 0]);
                put_text(o->f, v->text ? v->text : "");
            } else {
                fprintf(o->f, ",\"value\":%lld", (long long)v->value);
            }
            fputs("}\n", o->f);
            o->last_seq = v->seq;
            o->written++;
        }
        if (n < 4096)
            return;
    }
}
