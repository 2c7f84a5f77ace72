/* kv_sched_rules: the scheduling rules that differ between vLLM releases,
 * as plain fields, so the engine config (kv_engine.h) and the release table
 * (kv_release.h) can carry them without the scheduler's internals. */
#ifndef KV_SCHED_RULES_H
#define KV_SCHED_RULES_H

/* Scheduling rules that changed between vLLM releases. The release table
 * (engine/kv_release.c) gives one row per release range; kv_sched_rules_default
 * is the newest release's. Each field names the vLLM file and the releases. */
typedef struct kv_sched_rules {
    /* Admit a waiting request only when its whole prompt fits the free
     * blocks, not just its first chunk (SchedulerConfig.scheduler_reserve_full_isl,
     * vllm/config/scheduler.py; 0.19 and later, default True). */
    int reserve_full_prompt;
    /* Fraction of num_blocks kept free when admitting a waiting request while
     * others run (SchedulerConfig.watermark, kv_cache_manager.py; 0.24 and
     * later, default 0.0). */
    double watermark;
    /* Priority policy: when the lowest-priority running request preempts
     * itself, go on scheduling the ones after it (scheduler.py, 0.33). Before,
     * the running phase ended there. */
    int priority_self_continue;
    /* Priority policy: a victim already scheduled in this step is taken out of
     * the step and its tokens go back to the budget, and the scan position
     * moves back one (scheduler.py, 0.11.2 and later). Before (0.11.0), the
     * victim stayed in the step's schedule with its tokens and the scan
     * skipped the request after it. */
    int priority_unschedule_victim;
    /* Freed blocks without a hash go to the head of the free queue, hashed
     * ones to the tail (block_pool.py free_blocks, 0.24 and later). Before,
     * every freed block went to the tail. */
    int free_uncached_first;
    /* Prefix-cache stats are recorded once, when the request is admitted
     * (kv_cache_manager.py record_prefix_cache_stats, 0.27 and later). Before,
     * at every lookup, also for a request that then could not be admitted. */
    int stats_at_admission;
    /* Resumed (once preempted) requests are counted apart in the prefix-cache
     * stats (PrefixCacheStats preempted_*, 0.11.2 and later). */
    int stats_split_preempted;
    /* Chunked prefill off and a waiting prompt over the token budget: skip it
     * and try the next ones, putting it back at the head afterwards
     * (scheduler.py 0.9.2 - 0.11.x). 0: admission stops there (0.12 and later). */
    int skip_unchunkable;
    /* long_prefill_token_threshold only caps a prefill while more than one
     * request is running or waiting (scheduler.py, 0.31 and later). */
    int long_prefill_needs_two;
} kv_sched_rules;

/* The newest release's rules (vLLM 0.33): full-prompt admission on, no
 * watermark, priority self-preemption goes on, victims unscheduled, uncached
 * blocks freed to the head, stats at admission and split, no skipping,
 * long-prefill cap only with two or more requests. */
void kv_sched_rules_default(kv_sched_rules *r);

#endif
