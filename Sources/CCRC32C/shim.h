// CRC-32C with the x86-64 `crc32` instruction (SSE 4.2), header-only. The function carries its own
// target attribute, so no compiler flag is needed and other CPUs never run it: callers check
// `segget_crc32c_hw_available()` first (CPUID), and fall back to the table-driven Swift code.
#ifndef SEGGET_CCRC32C_SHIM_H
#define SEGGET_CCRC32C_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>

static inline int segget_crc32c_hw_available(void) {
    unsigned int a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    return (c & bit_SSE4_2) != 0;
}

/// Continues the raw (not inverted) register `crc` over `n` bytes.
__attribute__((target("sse4.2"))) static inline uint32_t segget_crc32c_hw(uint32_t crc, const uint8_t *p, size_t n) {
    uint64_t c = crc;
    while (n > 0 && ((uintptr_t)p & 7) != 0) { c = __builtin_ia32_crc32qi((uint32_t)c, *p++); n--; }
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        n -= 8;
    }
    while (n > 0) { c = __builtin_ia32_crc32qi((uint32_t)c, *p++); n--; }
    return (uint32_t)c;
}

/// The bytes of each of the three lanes of `segget_crc32c_hw3`.
#define SEGGET_CRC32C_LANE 4096

/// `segget_crc32c_hw` in three interleaved lanes: the instruction takes 3 cycles to finish but can
/// start one every cycle, so three independent registers run about three times as fast as one. Each
/// round checksums 3 lanes of `SEGGET_CRC32C_LANE` bytes (the first continuing `crc`, the others from
/// 0), then folds them together: `shift` (4 × 256 entries, entry `k * 256 + b` being the register
/// `b << 8k` carried over `SEGGET_CRC32C_LANE` zero bytes) moves a register past one lane. The rest,
/// shorter than a round, goes through one register.
__attribute__((target("sse4.2"))) static inline uint32_t segget_crc32c_hw3(
    uint32_t crc, const uint8_t *p, size_t n, const uint32_t *shift) {
    uint64_t c0 = crc;
    while (n > 0 && ((uintptr_t)p & 7) != 0) { c0 = __builtin_ia32_crc32qi((uint32_t)c0, *p++); n--; }
    while (n >= 3 * SEGGET_CRC32C_LANE) {
        uint64_t c1 = 0, c2 = 0;
        const uint8_t *end = p + SEGGET_CRC32C_LANE;
        while (p < end) {
            uint64_t a, b, d;
            memcpy(&a, p, 8);
            memcpy(&b, p + SEGGET_CRC32C_LANE, 8);
            memcpy(&d, p + 2 * SEGGET_CRC32C_LANE, 8);
            c0 = __builtin_ia32_crc32di(c0, a);
            c1 = __builtin_ia32_crc32di(c1, b);
            c2 = __builtin_ia32_crc32di(c2, d);
            p += 8;
        }
        uint32_t r = (uint32_t)c0;
        r = shift[r & 0xFF] ^ shift[256 + ((r >> 8) & 0xFF)] ^ shift[512 + ((r >> 16) & 0xFF)] ^ shift[768 + (r >> 24)];
        r ^= (uint32_t)c1;
        r = shift[r & 0xFF] ^ shift[256 + ((r >> 8) & 0xFF)] ^ shift[512 + ((r >> 16) & 0xFF)] ^ shift[768 + (r >> 24)];
        c0 = r ^ (uint32_t)c2;
        p += 2 * SEGGET_CRC32C_LANE;
        n -= 3 * SEGGET_CRC32C_LANE;
    }
    return segget_crc32c_hw((uint32_t)c0, p, n);
}
#else
static inline int segget_crc32c_hw_available(void) { return 0; }
static inline uint32_t segget_crc32c_hw(uint32_t crc, const uint8_t *p, size_t n) { (void)p; (void)n; return crc; }
#define SEGGET_CRC32C_LANE 4096
static inline uint32_t segget_crc32c_hw3(uint32_t crc, const uint8_t *p, size_t n, const uint32_t *shift) {
    (void)p; (void)n; (void)shift; return crc;
}
#endif

#endif
