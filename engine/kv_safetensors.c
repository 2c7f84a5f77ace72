/* kv_safetensors: shard headers (see kv_safetensors.h). */
#include "kv_safetensors.h"
#include "kv_util.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_SHARDS 4096
#define MAX_HEADER (256ll << 20)

static const struct {
    const char *name;
    int size;
    int wide_float;
} DTYPES[] = {
    {"F64", 8, 1}, {"F32", 4, 1}, {"F16", 2, 1}, {"BF16", 2, 1},
    {"F8_E4M3", 1, 0}, {"F8_E5M2", 1, 0}, {"F8_E8M0", 1, 0},
    {"I64", 8, 0}, {"I32", 4, 0}, {"I16", 2, 0}, {"I8", 1, 0},
    {"U64", 8, 0}, {"U32", 4, 0}, {"U16", 2, 0}, {"U8", 1, 0}, {"BOOL", 1, 0},
};

int kv_st_dtype_size(const char *name)
{
    for (size_t i = 0; name && i < sizeof DTYPES / sizeof DTYPES[0]; i++)
        if (!strcmp(DTYPES[i].name, name))
            return DTYPES[i].size;
    return 0;
}

int kv_st_dtype_is_wide_float(const char *name)
{
    for (size_t i = 0; name && i < sizeof DTYPES / sizeof DTYPES[0]; i++)
        if (!strcmp(DTYPES[i].name, name))
            return DTYPES[i].wide_float;
    return 0;
}

static void add_tensor(kv_st_summary *s, const char *dtype, int64_t bytes)
{
    s->tensors++;
    s->bytes += bytes;
    int i = 0;
    while (i < s->num_dtypes && strcmp(s->dtypes[i].name, dtype))
        i++;
    if (i == s->num_dtypes) {
        if (s->num_dtypes == KV_ST_MAX_DTYPES)
            i = KV_ST_MAX_DTYPES - 1; /* the rest share the last slot */
        else
            snprintf(s->dtypes[s->num_dtypes++].name, sizeof s->dtypes[0].name, "%s", dtype);
    }
    kv_st_dtype *d = &s->dtypes[i];
    d->bytes += bytes;
    d->tensors++;
    int size = kv_st_dtype_size(d->name);
    d->elements = size > 0 ? d->bytes / size : 0;
}

/* One shard: the 8-byte length, then the JSON header. */
static int read_shard(const char *dir, const char *name, kv_st_summary *s, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return kv_errf(err, errlen, KV_ST_EBAD, "%s: cannot open it (the index names it)", name);
    struct stat st;
    unsigned char len8[8];
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || fread(len8, 1, 8, f) != 8) {
        fclose(f);
        return kv_errf(err, errlen, KV_ST_EBAD, "%s: not a safetensors file (shorter than its 8-byte header length)",
                       name);
    }
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | len8[i];
    if (n < 2 || (int64_t)n > MAX_HEADER || (int64_t)n > (int64_t)st.st_size - 8) {
        fclose(f);
        return kv_errf(err, errlen, KV_ST_EBAD, "%s: header length %llu is past the end of the file (%lld bytes)",
                       name, (unsigned long long)n, (long long)st.st_size);
    }
    char *buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        fclose(f);
        return kv_errf(err, errlen, KV_ST_EBAD, "%s: cannot read its %llu-byte header", name, (unsigned long long)n);
    }
    fclose(f);
    buf[n] = '\0';
    cJSON *root = cJSON_ParseWithLength(buf, (size_t)n);
    free(buf);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return kv_errf(err, errlen, KV_ST_EBAD, "%s: the header is not a JSON object", name);
    }
    int64_t data = (int64_t)st.st_size - 8 - (int64_t)n;
    const cJSON *t;
    cJSON_ArrayForEach(t, root) {
        if (t->string && !strcmp(t->string, "__metadata__"))
            continue;
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(t, "dtype");
        const cJSON *off = cJSON_GetObjectItemCaseSensitive(t, "data_offsets");
        const cJSON *b = cJSON_GetArrayItem(off, 0), *e = cJSON_GetArrayItem(off, 1);
        if (!cJSON_IsString(dt) || !cJSON_IsNumber(b) || !cJSON_IsNumber(e) || b->valuedouble < 0 ||
            e->valuedouble < b->valuedouble || e->valuedouble > (double)data) {
            int rc = kv_errf(err, errlen, KV_ST_EBAD, "%s: tensor '%.80s' has no valid dtype and data_offsets", name,
                             t->string ? t->string : "?");
            cJSON_Delete(root);
            return rc;
        }
        add_tensor(s, dt->valuestring, (int64_t)(e->valuedouble - b->valuedouble));
    }
    cJSON_Delete(root);
    s->shards++;
    return KV_ST_OK;
}

static int plain_name(const char *s)
{
    return s && *s && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

/* The shards the index names, each once. */
static int scan_index(const char *dir, const char *index, kv_st_summary *s, char *err, size_t errlen)
{
    size_t len = 0;
    char *text = NULL;
    char e2[256];
    if (kv_read_file(index, 64u << 20, &text, &len, e2, sizeof e2) != 0)
        return kv_errf(err, errlen, KV_ST_EBAD, "model.safetensors.index.json: %s", e2);
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(map)) {
        cJSON_Delete(root);
        return kv_errf(err, errlen, KV_ST_EBAD, "model.safetensors.index.json: no \"weight_map\" object");
    }
    const char **seen = calloc(MAX_SHARDS, sizeof *seen);
    int nseen = 0, rc = KV_ST_OK;
    const cJSON *w;
    cJSON_ArrayForEach(w, map) {
        if (!seen) {
            rc = kv_errf(err, errlen, KV_ST_EBAD, "out of memory");
            break;
        }
        if (!cJSON_IsString(w) || !plain_name(w->valuestring)) {
            rc = kv_errf(err, errlen, KV_ST_EBAD, "model.safetensors.index.json: '%.80s' names no plain file in the "
                                                  "folder", w->string ? w->string : "?");
            break;
        }
        int dup = 0;
        for (int i = 0; i < nseen && !dup; i++)
            dup = !strcmp(seen[i], w->valuestring);
        if (dup)
            continue;
        if (nseen == MAX_SHARDS) {
            rc = kv_errf(err, errlen, KV_ST_EBAD, "model.safetensors.index.json: more than %d shards", MAX_SHARDS);
            break;
        }
        seen[nseen++] = w->valuestring;
        if ((rc = read_shard(dir, w->valuestring, s, err, errlen)) != KV_ST_OK)
            break;
    }
    free(seen);
    cJSON_Delete(root);
    return rc;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int kv_st_scan_dir(const char *dir, kv_st_summary *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!dir || !*dir)
        return KV_ST_NONE;
    char index[4096];
    struct stat st;
    snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
    int rc;
    if (stat(index, &st) == 0 && S_ISREG(st.st_mode)) {
        rc = scan_index(dir, index, out, err, errlen);
    } else {
        DIR *d = opendir(dir);
        if (!d)
            return KV_ST_NONE;
        char **names = NULL;
        int n = 0;
        rc = KV_ST_OK;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            size_t l = strlen(e->d_name);
            if (l <= 12 || strcmp(e->d_name + l - 12, ".safetensors"))
                continue;
            if (n == MAX_SHARDS) {
                rc = kv_errf(err, errlen, KV_ST_EBAD, "%s: more than %d .safetensors files", dir, MAX_SHARDS);
                break;
            }
            char **nn = realloc(names, (size_t)(n + 1) * sizeof *names);
            if (!nn || !(nn[n] = strdup(e->d_name))) {
                names = nn ? nn : names;
                rc = kv_errf(err, errlen, KV_ST_EBAD, "out of memory");
                break;
            }
            names = nn;
            n++;
        }
        closedir(d);
        if (n > 1)
            qsort(names, (size_t)n, sizeof *names, cmp_names);
        for (int i = 0; i < n && rc == KV_ST_OK; i++)
            rc = read_shard(dir, names[i], out, err, errlen);
        for (int i = 0; i < n; i++)
            free(names[i]);
        free(names);
    }
    if (rc != KV_ST_OK) {
        memset(out, 0, sizeof *out);
        return rc;
    }
    return out->shards > 0 ? KV_ST_OK : KV_ST_NONE;
}
