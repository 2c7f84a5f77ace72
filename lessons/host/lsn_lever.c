#include "lsn_lever.h"

#include <stdio.h>
#include <string.h>

/* The classes: counted by default or not, the name a goal's levers list may
 * use, and what the page says of a lever of that class. */
static const struct {
    lsn_lever_class cls;
    const char *name;
    int counted;
    const char *what;
} classes[] = {
    {LSN_LEVER_VLLM, "vllm", 1, "a vllm serve flag"},
    {LSN_LEVER_HARDWARE, "hardware", 1, "the card"},
    {LSN_LEVER_MODEL_OVERRIDE, "model-override", 0,
     "a model override (a checkpoint that is not the one served; no vllm serve flag changes a model's shape)"},
    {LSN_LEVER_DEBUG, "debug", 0, "a debug override (it forces a figure vLLM would compute; no operator fixes a "
                                  "server with it)"},
    {LSN_LEVER_WHATIF, "what-if", 0, "a kvlab what-if switch (vllm serve has no such flag)"},
    {LSN_LEVER_TRAFFIC, "traffic", 0, "a change to the traffic, not to the server"},
};

/* Every flag that is not an ordinary vllm serve flag (engine/kv_args.c and
 * lessons/host/lsn_server.c list them). */
static const struct {
    const char *flag;
    lsn_lever_class cls;
} rows[] = {
    {"gpu", LSN_LEVER_HARDWARE},
    {"gpu-memory-gib", LSN_LEVER_HARDWARE},
    {"kv-heads", LSN_LEVER_MODEL_OVERRIDE},
    {"hf-overrides", LSN_LEVER_MODEL_OVERRIDE},
    {"num-gpu-blocks-override", LSN_LEVER_DEBUG},
    {"weights-gib", LSN_LEVER_DEBUG},
    {"activation-gib", LSN_LEVER_DEBUG},
    {"cudagraph-gib", LSN_LEVER_DEBUG},
    {"cuda-context-gib", LSN_LEVER_DEBUG},
    {"nccl-gib", LSN_LEVER_DEBUG},
    {"kv-cache", LSN_LEVER_WHATIF},
    {"contiguous", LSN_LEVER_WHATIF},
    {"gpu-used-gib", LSN_LEVER_WHATIF},
    {"request-rate", LSN_LEVER_TRAFFIC},
    {"traffic-prompt", LSN_LEVER_TRAFFIC},
    {"traffic-output", LSN_LEVER_TRAFFIC},
};

lsn_lever_class lsn_lever_class_of(const char *canon)
{
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (!strcmp(rows[i].flag, canon))
            return rows[i].cls;
    return LSN_LEVER_VLLM;
}

static int class_index(lsn_lever_class c)
{
    for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++)
        if (classes[i].cls == c)
            return (int)i;
    return 0;
}

int lsn_lever_is_class(const char *name)
{
    for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++)
        if (!strcmp(classes[i].name, name))
            return 1;
    return 0;
}

int lsn_lever_counts(const char *canon, char *const *levers, int n)
{
    int c = class_index(lsn_lever_class_of(canon));
    if (classes[c].counted)
        return 1;
    for (int i = 0; i < n; i++)
        if (!strcmp(levers[i], canon) || !strcmp(levers[i], classes[c].name))
            return 1;
    return 0;
}

char *lsn_lever_not_counted(const char *canon, char *buf, size_t buflen)
{
    int c = class_index(lsn_lever_class_of(canon));
    snprintf(buf, buflen, "Not counted for this goal: --%s is %s. Explore it, then put it back: only vllm serve "
                          "flags win.", canon, classes[c].what);
    return buf;
}
