/* libFuzzer target for the JSONL trace parser: any bytes must give either a
 * trace whose every request is valid, or -1 with a message naming a line. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kv_trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kv_trace tr;
    char err[512];
    err[0] = '\0';
    if (kv_trace_parse((const char *)data, size, &tr, err, sizeof err) == 0) {
        for (int64_t i = 0; i < tr.count; i++) {
            const kv_trace_req *r = &tr.reqs[i];
            if (r->arrival_s < 0 || r->output_tokens < 1 || r->prompt_tokens + r->prefix_tokens < 1 ||
                (r->prefix_tokens > 0) != (r->prefix_id != NULL))
                abort();
            if (i && tr.reqs[i - 1].arrival_s > r->arrival_s)
                abort();
        }
        kv_trace_free(&tr);
    } else if (!err[0] || tr.count != 0) {
        abort();
    }
    return 0;
}
