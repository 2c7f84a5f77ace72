/* lsn_lever: which flag changes count as a fix of a `vllm serve` server
 * (issue 21: "A goal or golf score counts only real vllm serve flags that an
 * operator would change to fix that server"). One row per flag that is not
 * an ordinary vLLM serve flag, and one row per class of lever: whether a
 * goal counts it unless the goal lists it in lab.goal{levers = ...}
 * (lessons/API.md "Goals"), and the one line the page says when the learner
 * pulls it while it does not count. Plain C, no Lua. */
#ifndef LSN_LEVER_H
#define LSN_LEVER_H

#include <stddef.h>

typedef enum lsn_lever_class {
    LSN_LEVER_VLLM,           /* a vllm serve flag (model included): counted */
    LSN_LEVER_HARDWARE,       /* the card: counted (another GPU is a real fix) */
    LSN_LEVER_MODEL_OVERRIDE, /* kv-heads, hf-overrides: a checkpoint that is not the one served */
    LSN_LEVER_DEBUG,          /* num-gpu-blocks-override, kvlab's plan-term overrides */
    LSN_LEVER_WHATIF,         /* kvlab's switches with no vLLM flag: kv-cache, contiguous, gpu-used-gib */
    LSN_LEVER_TRAFFIC,        /* request-rate, traffic-prompt, traffic-output */
} lsn_lever_class;

/* The class of a flag by its canonical name ("kv-heads"). */
lsn_lever_class lsn_lever_class_of(const char *canon);

/* Does a goal count this flag as a lever? levers: the goal's own extra
 * names (canonical flag names, or a class name: "traffic", "what-if",
 * "model-override", "debug"), n of them. */
int lsn_lever_counts(const char *canon, char *const *levers, int n);

/* The line the page says when the learner changes a flag the goal does not
 * count ("Not counted for this goal: --kv-heads is a model override ...").
 * Returns buf. */
char *lsn_lever_not_counted(const char *canon, char *buf, size_t buflen);

/* Is `name` a class name lsn_lever_counts understands? */
int lsn_lever_is_class(const char *name);

#endif
