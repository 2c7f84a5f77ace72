/* kv_trace: request traces for `kvlab simulate` (docs/DESIGN.md, "Command
 * line"; docs/trace-format.md).
 *
 * A trace is JSONL, one request per line:
 *   arrival_s        seconds, required, 0 .. KV_TRACE_MAX_ARRIVAL_S
 *   output_tokens    required, integer >= 1
 *   prompt_tokens    a length (integer >= 0)      } exactly one of the two
 *   prompt_token_ids a list of token ids (>= 0)   }
 *   prefix_id        optional string (or number): a shared prefix ...
 *   prefix_tokens    ... of this many tokens, placed before the prompt,
 *                    identical for every request naming the same id
 *   priority         optional integer (smaller = sooner, vLLM's rule)
 *   cache_salt       optional string: requests with different salts never
 *                    share cached blocks
 * Blank lines are skipped; unknown fields are ignored. Requests are sorted by
 * arrival (stable). Errors name the line and the field.
 *
 * Or a seeded generator, "gen:key=value,...": Poisson arrivals, log-normal
 * prompt and output lengths (a long tail), a fraction of requests sharing a
 * prefix (see kv_trace_generate). */
#ifndef KV_TRACE_H
#define KV_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "kv_engine.h"

typedef struct kv_trace_req {
    double arrival_s;
    int32_t prompt_tokens;       /* length after the prefix (= num ids when ids are given) */
    int32_t output_tokens;
    int32_t prefix_tokens;       /* 0 = no prefix */
    int32_t priority;
    int32_t num_ids;
    int32_t *prompt_token_ids;   /* owned, or NULL */
    const char *prefix_id;       /* interned in the trace, or NULL */
    const char *cache_salt;      /* interned in the trace, or NULL */
} kv_trace_req;

struct kv_trace_str;

typedef struct kv_trace {
    kv_trace_req *reqs;
    int64_t count, cap;
    char **strings;              /* interned prefix ids and salts, first-seen order */
    int32_t num_strings, cap_strings;
    struct kv_trace_str *index;  /* uthash over strings: O(1) interning */
} kv_trace;

/* Latest arrival a trace may hold (seconds, about 31.7 years): below it a
 * double keeps the virtual clock to a fraction of a microsecond, so every
 * step's duration still adds up; past it latencies would round to 0. */
#define KV_TRACE_MAX_ARRIVAL_S 1e9

/* Most requests one trace holds, generated or read: a run keeps each
 * request's state and latencies (about 800 bytes) and simulates about 30,000
 * requests a second, so a million is under a GiB and about a minute. Past it
 * a trace is refused with this figure, not run for hours until memory runs out. */
#define KV_TRACE_MAX_REQUESTS 1000000

/* Largest trace file kv_trace_load reads (bytes): 1 GiB, ~10 million lines. */
#define KV_TRACE_MAX_BYTES ((size_t)1 << 30)

/* Parse JSONL text (len bytes). 0 on success; -1 with "line N: field
 * 'name': problem" in err on the first bad line (out is left empty). */
int kv_trace_parse(const char *text, size_t len, kv_trace *out, char *err, size_t errlen);

/* Read (kv_read_file: a regular file of at most KV_TRACE_MAX_BYTES, never
 * a FIFO or a device) and parse a file. -1 with the reason (file or line)
 * in err. */
int kv_trace_load(const char *path, kv_trace *out, char *err, size_t errlen);

/* Generate from a spec "gen:k=v,k=v..." (the "gen:" prefix optional). Keys
 * (defaults): requests (1000) | n; rate (10, requests/s, Poisson); prompt
 * (512, median prompt tokens); prompt_sigma (0.8, log-normal sigma: the
 * tail); output (128, median output tokens); output_sigma (0.6); max_prompt
 * (32768) and max_output (8192) caps; prompt_mean + prompt_p99 (a log-normal
 * fitted to a mean and a 99th percentile instead of prompt/prompt_sigma;
 * the same for output_); prompt_min + prompt_max (uniform whole lengths
 * instead; the same for output_); shared (0, fraction of requests with a
 * shared prefix); prefix (1024, prefix tokens); prefixes (1, distinct
 * prefixes); priorities (0 = all 0, else uniform in [0, priorities)); seed
 * (1). The same spec always gives the same trace. -1 with err naming the key
 * on a bad spec. */
int kv_trace_generate(const char *spec, kv_trace *out, char *err, size_t errlen);

/* Load a file or, for "gen:...", generate. */
int kv_trace_open(const char *path_or_spec, kv_trace *out, char *err, size_t errlen);

/* The request spec for request i (pointers into the trace). */
void kv_trace_spec(const kv_trace *t, int64_t i, kv_request_spec *out);

void kv_trace_free(kv_trace *t);

#endif
