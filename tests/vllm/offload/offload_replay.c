/* offload_replay: kvlab's host tier (engine/kv_offload.h) driven by a list
 * of the OffloadingConnector's manager calls on stdin, one per line, for the
 * differential test (tests/vllm/offload/diff.sh):
 *   C capacity protect lru  a new tier of that many blocks; protect 1: an
 *                       offer's own keys are never evicted (vLLM 0.18 on);
 *                       lru: the ranking, a kv_offload_lru (0 to 0.30, 1
 *                       0.31 - 0.32, 2 0.33 on; absent = 0)
 *   T k1 k2 ...         touch (the scheduler's _touch)
 *   L k1 k2 ...         lookup (prints the hit count)
 *   S req pos k1 k2 ... prepare_store + complete_store by request req, k1 at
 *                       block position pos (prints the count stored, -1 cannot store)
 *   P req pos k1 k2 ... prepare_load + complete_load
 *   F req k1 k2 ...     the request finished; its keys by position
 * After every call it prints the held keys, lowest rank first:
 *   "<op> <result> | k k k ...". Keys are whole numbers (a block hash each).
 * Exit 0, or 2 for a line it cannot read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_offload.h"

#define MAX_KEYS 65536

static kv_hash keys[MAX_KEYS], held[MAX_KEYS];

int main(void)
{
    static char line[1 << 20];
    kv_offload *o = NULL;
    while (fgets(line, sizeof line, stdin)) {
        char op = line[0];
        if (op == '\n' || op == '#')
            continue;
        int32_t n = 0;
        for (char *p = line + 1, *end; n < MAX_KEYS; p = end) {
            unsigned long long v = strtoull(p, &end, 10);
            if (end == p)
                break;
            keys[n++] = (kv_hash){v, 0};
        }
        long long r = 0;
        switch (op) {
        case 'C':
            kv_offload_destroy(o);
            o = n == 2 || n == 3
                    ? kv_offload_create((int64_t)keys[0].lo, keys[1].lo != 0,
                                        n == 3 ? (kv_offload_lru)keys[2].lo : KV_OFFLOAD_LRU_TOUCH)
                    : NULL;
            if (!o) {
                fprintf(stderr, "offload_replay: bad C line\n");
                return 2;
            }
            break;
        case 'T': kv_offload_touch(o, keys, n); break;
        case 'L': r = kv_offload_lookup(o, keys, n); break;
        case 'S':
        case 'P':
        case 'F':
            if (!o || n < (op == 'F' ? 1 : 2)) {
                fprintf(stderr, "offload_replay: short %c line\n", op);
                return 2;
            }
            if (op == 'S')
                r = kv_offload_prepare_store(o, (int64_t)keys[0].lo, keys + 2, (int32_t)keys[1].lo, n - 2);
            else if (op == 'P')
                kv_offload_prepare_load(o, (int64_t)keys[0].lo, keys + 2, (int32_t)keys[1].lo, n - 2);
            else
                kv_offload_request_finished(o, (int64_t)keys[0].lo, keys + 1, n - 1);
            break;
        default: fprintf(stderr, "offload_replay: unknown op '%c'\n", op); return 2;
        }
        if (!o) {
            fprintf(stderr, "offload_replay: no C line first\n");
            return 2;
        }
        int32_t h = kv_offload_keys(o, held, MAX_KEYS);
        printf("%c %lld |", op, r);
        for (int32_t i = 0; i < h && i < MAX_KEYS; i++)
            printf(" %llu", (unsigned long long)held[i].lo);
        putchar('\n');
    }
    kv_offload_stats st;
    kv_offload_get_stats(o, &st);
    printf("stats stored %lld evicted %lld skipped %lld\n", (long long)st.stored_blocks, (long long)st.evicted_blocks,
           (long long)st.skipped_stores);
    kv_offload_destroy(o);
    return 0;
}
