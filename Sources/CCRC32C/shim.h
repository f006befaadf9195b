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
#else
static inline int segget_crc32c_hw_available(void) { return 0; }
static inline uint32_t segget_crc32c_hw(uint32_t crc, const uint8_t *p, size_t n) { (void)p; (void)n; return crc; }
#endif

#endif
