/*
 * The data pattern the UCP test and benchmark programs write and check
 * (ucp_rma_check, ucx_pxn_ucp_bench): 8-byte words of splitmix64 of a seed
 * and the word's index, so that any byte tells where it belongs.
 */
#ifndef PXN_APPS_PATTERN_H_
#define PXN_APPS_PATTERN_H_

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace pxn_tools {

inline uint64_t pattern_word(uint64_t seed, uint64_t index) /* splitmix64 */
{
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + index + 1;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

inline void fill_pattern(uint8_t *p, uint64_t len, uint64_t seed)
{
    for (uint64_t i = 0; i < len; i += 8) {
        const uint64_t w = pattern_word(seed, i / 8);
        memcpy(p + i, &w, std::min<uint64_t>(8, len - i));
    }
}

/* Offset of the first byte that differs from the pattern, or len. With
 * first_word, p holds the pattern as it stands from word first_word on
 * (a block copied from offset 8 * first_word of a patterned region). */
inline uint64_t first_mismatch(const uint8_t *p, uint64_t len, uint64_t seed,
                               uint64_t first_word = 0)
{
    for (uint64_t i = 0; i < len; i += 8) {
        const uint64_t w = pattern_word(seed, first_word + i / 8);
        const uint64_t n = std::min<uint64_t>(8, len - i);
        if (memcmp(p + i, &w, n) != 0) {
            for (uint64_t j = 0; j < n; ++j) {
                if (p[i + j] != reinterpret_cast<const uint8_t*>(&w)[j]) {
                    return i + j;
                }
            }
        }
    }
    return len;
}

} // namespace pxn_tools

#endif
