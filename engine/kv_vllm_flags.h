/* kv_vllm_flags: every option `vllm serve` of each vLLM release accepts, as
 * generated from the releases' own argument parsers by
 * scripts/gen_vllm_flags.py (engine/kv_vllm_flags_data.c: the long name,
 * the short forms, whether it takes a value, the releases that have it),
 * plus each release's --quantization methods and --kv-cache-dtype values.
 *
 * kv_args uses it to accept any real command line of the release followed
 * and to refuse, in argparse's words, what that release lacks. A release
 * that was not read (a patch between two read ones) counts as the newest
 * read release at or below it. */
#ifndef KV_VLLM_FLAGS_H
#define KV_VLLM_FLAGS_H

#include <stddef.h>
#include <stdint.h>

/* What follows an option on the command line (argparse's nargs / action). */
enum {
    KV_VLLM_NARGS_NONE = 0, /* a switch (store_true, BooleanOptionalAction) */
    KV_VLLM_NARGS_ONE = 1,  /* one value */
    KV_VLLM_NARGS_MANY = 2, /* one or more values (nargs "+" / "*") */
    KV_VLLM_NARGS_OPT = 3,  /* an optional value (nargs "?") */
};

typedef struct kv_vllm_flag {
    const char *name;     /* long name without "--": "tensor-parallel-size" */
    const char *aliases;  /* other spellings without dashes, space-separated: "tp" ("" none) */
    uint8_t nargs;        /* KV_VLLM_NARGS_*, as in the newest release that has it */
    uint8_t negatable;    /* 1: also --no-<name> (BooleanOptionalAction), in the newest release */
    uint64_t releases[2]; /* bit i: kv_vllm_releases[i] has it */
    const char *shape;    /* per release i: '-' absent, else '0' + nargs + 4 if it has --no-<name> */
} kv_vllm_flag;

/* The generated data (engine/kv_vllm_flags_data.c). */
extern const int kv_vllm_num_releases;
extern const char *const kv_vllm_releases[];    /* oldest first: "0.6.4", "0.6.4.post1", ... */
extern const int kv_vllm_num_flags;
extern const kv_vllm_flag kv_vllm_flags[];      /* sorted by name */
extern const char *const kv_vllm_quantization_methods[]; /* per release, '|'-separated */
extern const char *const kv_vllm_kv_cache_dtypes[];      /* per release, '|'-separated */
extern const unsigned char kv_vllm_quantization_argparse[]; /* per release: 1 argparse choices, 0 ValueError */
extern const char *const kv_vllm_quantization_need_file[]; /* per release: methods read from a file beside config.json */

/* The index of the read release for version X.Y[.Z] ("" or NULL: the
 * newest): the newest read release at or below it; -1 below the oldest. */
int kv_vllm_release_index(const char *version);

/* The option for a spelling: with or without leading dashes, '_' or '-',
 * the long name or a short form ("-dp", "--data_parallel_size"); "no-X" finds
 * a negatable X with *negated = 1. NULL if no read release has it. */
const kv_vllm_flag *kv_vllm_flag_find(const char *spelling, int *negated);

/* argparse's abbreviation rule (vLLM's parsers keep allow_abbrev on): the
 * one long name that starts with spelling ("--gpu-memory" for
 * --gpu-memory-utilization), or NULL when none or several do; the matches
 * ("--max-num-seqs, --max-num-batched-tokens") go to others when non-NULL. */
const kv_vllm_flag *kv_vllm_flag_prefix(const char *spelling, char *others, size_t n);

/* 1 if release index ri has f. */
int kv_vllm_flag_in(const kv_vllm_flag *f, int ri);

/* f's shape in release index ri: 1 with *nargs (KV_VLLM_NARGS_*) and
 * *negatable (a --no- form) as that release's parser has them (0.6.4's
 * --enable-chunked-prefill takes an optional true/false, later releases'
 * is a switch with --no-enable-chunked-prefill); 0 where ri lacks f. */
int kv_vllm_flag_shape(const kv_vllm_flag *f, int ri, int *nargs, int *negatable);

/* The first release index with a --no- form of f, -1 if none has it. */
int kv_vllm_flag_negatable_from(const kv_vllm_flag *f);

/* The releases that have f as spans ("0.6.4-0.10.2, 0.17.0-0.33.0") into buf. */
size_t kv_vllm_flag_spans(const kv_vllm_flag *f, char *buf, size_t n);

/* Whether value is one of a '|'-separated list (exact match). */
int kv_vllm_list_has(const char *list, const char *value);

/* The list as argparse prints choices ("'awq', 'fp8', ..."), into buf. */
size_t kv_vllm_list_quoted(const char *list, char *buf, size_t n);

#endif
