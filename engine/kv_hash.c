#include "kv_hash.h"

#include <string.h>
/* inlined: a block hash is ~80 bytes, where a call into the library costs
 * as much as the hashing */
#define XXH_INLINE_ALL
#include <xxhash.h>

kv_hash kv_hash_none(uint64_t seed)
{
    XXH128_hash_t h = XXH3_128bits(&seed, sizeof seed);
    return (kv_hash){h.low64, h.high64};
}

kv_hash kv_hash_block(kv_hash parent, const int32_t *tokens, int32_t n, int has_extra, uint64_t extra)
{
    /* Small blocks (the common 16 tokens) hash from one stack buffer; big
     * ones stream, so nothing here touches the heap. */
    unsigned char buf[16 + 4 * 256 + 8];
    XXH128_hash_t h;
    if (n >= 0 && n <= 256) {
        size_t off = 0;
        memcpy(buf, &parent, 16);
        off = 16;
        memcpy(buf + off, tokens, (size_t)n * 4);
        off += (size_t)n * 4;
        if (has_extra) {
            memcpy(buf + off, &extra, 8);
            off += 8;
        }
        h = XXH3_128bits(buf, off);
    } else {
        XXH3_state_t st;
        XXH3_INITSTATE(&st);
        XXH3_128bits_reset(&st);
        XXH3_128bits_update(&st, &parent, 16);
        XXH3_128bits_update(&st, tokens, (size_t)(n > 0 ? n : 0) * 4);
        if (has_extra)
            XXH3_128bits_update(&st, &extra, 8);
        h = XXH3_128bits_digest(&st);
    }
    return (kv_hash){h.low64, h.high64};
}

kv_hash kv_hash_seeded(kv_hash parent, uint64_t seed, uint32_t vocab, int32_t start, int has_extra,
                       uint64_t extra)
{
    struct {
        kv_hash parent;
        uint64_t tag, seed, extra;
        uint32_t vocab;
        int32_t start;
    } k;
    memset(&k, 0, sizeof k);
    k.parent = parent;
    k.tag = 0x5345454445444b56ull; /* a seeded block, never a token list */
    k.seed = seed;
    k.extra = has_extra ? extra : 0;
    k.vocab = vocab | (has_extra ? 0x80000000u : 0);
    k.start = start;
    XXH128_hash_t h = XXH3_128bits(&k, sizeof k);
    return (kv_hash){h.low64, h.high64};
}

uint64_t kv_hash_str(const char *s)
{
    return XXH3_64bits(s, strlen(s));
}
