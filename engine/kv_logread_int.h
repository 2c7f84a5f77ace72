/* kv_logread_int: what kv_logread.c shares with its generated table
 * (kv_logread_lines.c, scripts/gen-logread-lines.py). */
#ifndef KV_LOGREAD_INT_H
#define KV_LOGREAD_INT_H

/* One release's source line for one start-up message: vLLM prints
 * "[file:line]" before each message, the line of the logger call. */
typedef struct kv_logread_line {
    const char *version;  /* "0.19.0" */
    const char *file;     /* basename: "gpu_worker.py" */
    int line;
    const char *what;     /* "available_kv", "kv_size", "concurrency", "weights", "cg_estimate", ... */
} kv_logread_line;

extern const kv_logread_line KV_LOGREAD_LINES[];
extern const int KV_LOGREAD_NUM_LINES;

#endif
