/* kv_plan_fields: the plan's scalar fields, one table, so every reader of a
 * plan uses the same keys, units and rounding: `kvlab serve --json`
 * (kv_plan_to_json) and the lesson runtime's lab.plan(). The lists (terms,
 * log, fixes, notes) are not scalars and stay with each reader.
 *
 *   for (int i = 0; i < kv_plan_field_count(); i++) {
 *       const kv_plan_field *f = kv_plan_field_at(i);
 *       kv_plan_value v = kv_plan_field_get(f, plan);
 *       ...   f->name, f->unit, v.kind (NULL, BOOL, INT, NUM, STR), v.b / v.i / v.d / v.s
 *   }
 *
 * Byte figures come twice, as `<term>_bytes` (exact) and `<term>_gib`
 * (GiB, rounded to f->precision decimals by kv_plan_field_get: 4). A field
 * whose value does not apply reads as KV_PLAN_VALUE_NULL (JSON null):
 * `error` when the plan starts, `vllm_version` under the textbook
 * accounting, `estimated_max_model_len` unless the length check failed. */
#ifndef KV_PLAN_FIELDS_H
#define KV_PLAN_FIELDS_H

#include <stdint.h>

#include "kv_plan.h"

typedef enum kv_plan_value_kind {
    KV_PLAN_VALUE_NULL = 0,
    KV_PLAN_VALUE_BOOL,
    KV_PLAN_VALUE_INT,
    KV_PLAN_VALUE_NUM,
    KV_PLAN_VALUE_STR,
} kv_plan_value_kind;

typedef struct kv_plan_value {
    kv_plan_value_kind kind;
    int b;
    int64_t i;
    double d;
    const char *s;  /* points into the plan (or a static string) */
} kv_plan_value;

typedef struct kv_plan_field {
    const char *name;   /* JSON and Lua key: "kv_cache_gib" */
    const char *unit;   /* "GiB", "bytes", "tokens", "blocks", "layers", "heads", "values", "" */
    int precision;      /* decimals kept for a number (-1: as is) */
    void (*get)(const kv_plan *p, kv_plan_value *v);
    const char *help;   /* one line */
} kv_plan_field;

int kv_plan_field_count(void);
const kv_plan_field *kv_plan_field_at(int i);
/* The field by name, NULL if none. */
const kv_plan_field *kv_plan_field_find(const char *name);
/* The field's value in plan p, numbers rounded to the field's precision. */
kv_plan_value kv_plan_field_get(const kv_plan_field *f, const kv_plan *p);

#endif
