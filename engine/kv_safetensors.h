/* kv_safetensors: what a checkpoint's safetensors shards hold, read from
 * their headers only (never the tensors), offline.
 *
 * A .safetensors file starts with an 8-byte little-endian length N and N
 * bytes of JSON: one entry per tensor, {"dtype": "BF16", "shape": [...],
 * "data_offsets": [begin, end]}, plus an optional "__metadata__". The bytes
 * of a tensor are end - begin. A sharded checkpoint lists its shards in
 * model.safetensors.index.json ("weight_map": tensor -> file); a single one
 * is model.safetensors, or any *.safetensors beside config.json. This is
 * what vLLM's loader reads (model_executor/model_loader/weight_utils.py
 * safetensors_weights_iterator over the files the index names). */
#ifndef KV_SAFETENSORS_H
#define KV_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define KV_ST_MAX_DTYPES 12

/* One dtype's share of a checkpoint. */
typedef struct kv_st_dtype {
    char name[12];      /* safetensors' name: "BF16", "F32", "F8_E4M3", "I32", "U8", ... */
    int64_t bytes;
    int64_t elements;   /* bytes / element size; 0 when the size is unknown (sub-byte types) */
    int32_t tensors;
} kv_st_dtype;

typedef struct kv_st_summary {
    int32_t shards;          /* files read; 0: no safetensors found */
    int32_t tensors;
    int64_t bytes;           /* all tensors */
    int32_t num_dtypes;
    kv_st_dtype dtypes[KV_ST_MAX_DTYPES];
} kv_st_summary;

enum {
    KV_ST_OK = 0,
    KV_ST_NONE = 1,      /* no safetensors in the folder (not an error) */
    KV_ST_EBAD = -1,     /* a shard or the index is malformed or missing: err says which */
};

/* Read the shard headers of the checkpoint in folder dir into *out (zeroed
 * first): the shards model.safetensors.index.json names (each a plain file
 * name in dir), else every *.safetensors in dir (at most 4096 files; a
 * header at most 256 MiB). Returns KV_ST_OK, KV_ST_NONE, or KV_ST_EBAD with
 * one line in err ("model-00002-of-00004.safetensors: header length
 * 999999999999 is past the end of the file"). */
int kv_st_scan_dir(const char *dir, kv_st_summary *out, char *err, size_t errlen);

/* Bytes per element of a safetensors dtype name (F32 4, BF16 2, F8_E4M3 1,
 * ...); 0 for an unknown or sub-byte type. */
int kv_st_dtype_size(const char *name);

/* Whether the dtype is a 16/32/64-bit float (what vLLM casts to the model's
 * dtype when it loads an unquantized checkpoint). */
int kv_st_dtype_is_wide_float(const char *name);

#endif
