/* Emits key, n, slot as memcached 1.6.45's proxy computes them: XXH3_64bits_withSeed
 * (proxy_xxhash.c, seed 0) then mcplib_dist_jump_hash_get_server (proxy_jump_hash.c). */
#define XXH_INLINE_ALL
#include "xxhash.h"
#include <stdio.h>
#include <stdint.h>
#include <string.h>
static uint32_t jump(uint64_t hash, unsigned int buckets) {
    int64_t b = -1, j = 0;
    while (j < buckets) {
        b = j;
        hash = hash * 2862933555777941757ULL + 1;
        j = (b + 1) * ((double)(1LL << 31) / (double)((hash >> 33) + 1));
    }
    return b;
}
int main(void) {
    char key[300];
    unsigned ns[] = {1, 2, 3, 4, 5, 7, 16, 100, 1000};
    for (int i = 0; i < 400; i++) {
        int len;
        if (i % 50 == 24) { len = 129 + (i * 7) % 111; memset(key, 'm', len); key[len-1] = '0' + i % 10; key[len] = 0; }
        else if (i % 50 == 49) { len = 240 + i % 11; memset(key, 'k', len); key[len-1] = '0' + i % 10; key[len] = 0; }
        else len = snprintf(key, sizeof key, "key:%d:%s", i, i % 3 ? "user" : "session/abcdefghijklmnopqrstuvwxyz");
        for (unsigned k = 0; k < sizeof ns / sizeof ns[0]; k++)
            printf("%s %u %u\n", key, ns[k], jump(XXH3_64bits_withSeed(key, len, 0), ns[k]));
    }
    return 0;
}
