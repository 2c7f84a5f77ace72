#include "kv_events.h"

#include <stdlib.h>
#include <string.h>

#define LOG_LINES 256
#define LOG_LEN 256

typedef struct rec {
    uint64_t seq;
    int64_t req_id, value, step;
    double clock_s;
    int32_t block_id;
    uint8_t type, level;
    uint16_t log_idx;
} rec;

struct kv_events {
    rec *ring;
    uint32_t mask;
    uint64_t next_seq;       /* seq of the next event (first is 1) */
    char (*logs)[LOG_LEN];
    uint64_t log_seq[LOG_LINES]; /* seq of each kept line's event */
    uint64_t next_log;
    int block_events;
};

kv_events *kv_events_create(uint32_t capacity)
{
    uint32_t cap = 64;
    while (cap < capacity && cap < (1u << 30))
        cap <<= 1;
    kv_events *ev = calloc(1, sizeof *ev);
    if (!ev)
        return NULL;
    ev->ring = calloc(cap, sizeof *ev->ring);
    ev->logs = calloc(LOG_LINES, LOG_LEN);
    if (!ev->ring || !ev->logs) {
        kv_events_destroy(ev);
        return NULL;
    }
    ev->mask = cap - 1;
    ev->next_seq = 1;
    ev->block_events = 1;
    return ev;
}

void kv_events_destroy(kv_events *ev)
{
    if (!ev)
        return;
    free(ev->ring);
    free(ev->logs);
    free(ev);
}

void kv_events_set_block_events(kv_events *ev, int on) { ev->block_events = on; }

static rec *slot(kv_events *ev)
{
    uint64_t seq = ev->next_seq++;
    rec *r = &ev->ring[seq & ev->mask];
    r->seq = seq;
    return r;
}

uint64_t kv_events_push(kv_events *ev, kv_event_type type, int32_t block_id, int64_t req_id, int64_t value,
                        int64_t step, double clock_s)
{
    if (!ev->block_events && type <= KV_EV_CACHE_STORE)
        return ev->next_seq - 1;
    rec *r = slot(ev);
    r->type = (uint8_t)type;
    r->level = 0;
    r->block_id = block_id;
    r->req_id = req_id;
    r->value = value;
    r->step = step;
    r->clock_s = clock_s;
    return r->seq;
}

uint64_t kv_events_log(kv_events *ev, int level, const char *text, int64_t step, double clock_s)
{
    uint64_t log_no = ev->next_log++;
    uint32_t li = (uint32_t)(log_no % LOG_LINES);
    size_t n = strlen(text);
    if (n > LOG_LEN - 1)
        n = LOG_LEN - 1;
    memcpy(ev->logs[li], text, n);
    ev->logs[li][n] = '\0';
    rec *r = slot(ev);
    ev->log_seq[li] = r->seq;
    r->type = KV_EV_LOG;
    r->level = (uint8_t)level;
    r->block_id = -1;
    r->req_id = -1;
    r->value = (int64_t)log_no; /* reported as 0; tells whether the text is still kept */
    r->step = step;
    r->clock_s = clock_s;
    r->log_idx = (uint16_t)li;
    return r->seq;
}

uint64_t kv_events_last(const kv_events *ev) { return ev->next_seq - 1; }

int32_t kv_events_since(const kv_events *ev, uint64_t since, kv_event *out, int32_t max)
{
    uint64_t last = ev->next_seq - 1;
    uint64_t cap = (uint64_t)ev->mask + 1;
    uint64_t first = last >= cap ? last - cap + 1 : 1;
    if (since + 1 > first)
        first = since + 1;
    int32_t n = 0;
    /* log text is only kept for the last LOG_LINES lines */
    uint64_t oldest_log_ok = ev->next_log > LOG_LINES ? ev->next_log - LOG_LINES : 0;
    for (uint64_t s = first; s <= last && n < max; s++) {
        const rec *r = &ev->ring[s & ev->mask];
        if (r->seq != s)
            continue; /* a slot a restore did not fill */
        kv_event *o = &out[n++];
        o->seq = r->seq;
        o->type = (kv_event_type)r->type;
        o->block_id = r->block_id;
        o->req_id = r->req_id;
        o->value = r->value;
        o->step = r->step;
        o->clock_s = r->clock_s;
        o->level = r->level;
        o->text = NULL;
        if (r->type == KV_EV_LOG) {
            o->value = 0;
            o->text = (uint64_t)r->value >= oldest_log_ok ? ev->logs[r->log_idx] : "(log line dropped)";
        }
    }
    return n;
}

uint64_t kv_events_num_logs(const kv_events *ev) { return ev->next_log; }

void kv_events_clear(kv_events *ev, uint64_t next_seq, uint64_t next_log)
{
    memset(ev->ring, 0, ((size_t)ev->mask + 1) * sizeof *ev->ring);
    memset(ev->log_seq, 0, sizeof ev->log_seq);
    ev->next_seq = next_seq ? next_seq : 1;
    ev->next_log = next_log;
}

void kv_events_put(kv_events *ev, const kv_event *e, uint64_t log_no)
{
    if (e->seq == 0 || e->seq >= ev->next_seq || ev->next_seq - e->seq > (uint64_t)ev->mask + 1)
        return;
    rec *r = &ev->ring[e->seq & ev->mask];
    r->seq = e->seq;
    r->type = (uint8_t)e->type;
    r->level = (uint8_t)e->level;
    r->block_id = e->block_id;
    r->req_id = e->req_id;
    r->value = e->value;
    r->step = e->step;
    r->clock_s = e->clock_s;
    r->log_idx = 0;
    if (e->type == KV_EV_LOG) {
        uint32_t li = (uint32_t)(log_no % LOG_LINES);
        const char *text = e->text ? e->text : "";
        size_t n = strlen(text);
        if (n > LOG_LEN - 1)
            n = LOG_LEN - 1;
        memcpy(ev->logs[li], text, n);
        ev->logs[li][n] = '\0';
        r->value = (int64_t)log_no;
        r->log_idx = (uint16_t)li;
        ev->log_seq[li] = e->seq;
    }
}

uint64_t kv_events_log_seq(const kv_events *ev, uint64_t log_no)
{
    if (log_no >= ev->next_log || ev->next_log - log_no > LOG_LINES)
        return 0;
    uint64_t seq = ev->log_seq[log_no % LOG_LINES];
    const rec *r = &ev->ring[seq & ev->mask];
    return r->seq == seq && r->type == KV_EV_LOG && (uint64_t)r->value == log_no ? seq : 0;
}
