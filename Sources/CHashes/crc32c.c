// crc32c.c: CRC32C (Castagnoli), the checksum of entry headers and payloads (Docs/Format.md): the SSE4.2
// instruction in three interleaved streams where the CPU has it, else an 8-table software routine with
// the same result.
#include "CHashes.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

static uint32_t crc32c_table[8][256];
static int crc32c_hardware = -1;

static void crc32c_init_table(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : (c >> 1);
        crc32c_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = crc32c_table[0][n];
        for (int k = 1; k < 8; k++) {
            c = crc32c_table[0][c & 0xff] ^ (c >> 8);
            crc32c_table[k][n] = c;
        }
    }
}

static uint32_t crc32c_software(uint32_t crc, const unsigned char *p, size_t n) {
    while (n >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        word ^= crc;
        crc = crc32c_table[7][word & 0xff] ^ crc32c_table[6][(word >> 8) & 0xff] ^
              crc32c_table[5][(word >> 16) & 0xff] ^ crc32c_table[4][(word >> 24) & 0xff] ^
              crc32c_table[3][(word >> 32) & 0xff] ^ crc32c_table[2][(word >> 40) & 0xff] ^
              crc32c_table[1][(word >> 48) & 0xff] ^ crc32c_table[0][word >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) crc = crc32c_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return crc;
}

#if defined(__x86_64__)
#include <cpuid.h>
#include <nmmintrin.h>

// Three independent streams hide the crc32 instruction's 3-cycle latency; the partial CRCs are
// combined by shifting through zeros with the table-free software routine, which is exact.
__attribute__((target("sse4.2")))
static uint32_t crc32c_hw_serial(uint32_t crc, const unsigned char *p, size_t n) {
    uint64_t c = crc;
    while (n >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = _mm_crc32_u64(c, word);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--) c32 = _mm_crc32_u8(c32, *p++);
    return c32;
}

// Multiplication modulo the CRC32C polynomial (bit-reflected), used to shift a CRC over `len` zero bytes.
static uint32_t gf2_multiply(uint32_t a, uint32_t b) {
    uint32_t product = 0;
    for (int i = 0; i < 32; i++) {
        if (b & 0x80000000u) product ^= a;
        b <<= 1;
        a = (a & 1) ? (a >> 1) ^ 0x82F63B78u : (a >> 1);
    }
    return product;
}

// x^(8*len) mod P, in reflected form: the operator that appends `len` zero bytes.
static uint32_t zeros_operator(size_t len) {
    uint32_t result = 0x80000000u;  // x^0
    uint32_t square = 0x00800000u;  // x^8 (one zero byte)
    while (len) {
        if (len & 1) result = gf2_multiply(result, square);
        square = gf2_multiply(square, square);
        len >>= 1;
    }
    return result;
}

enum { CRC_BLOCK = 8192 };
static uint32_t crc32c_block_shift = 0;

__attribute__((target("sse4.2")))
static uint32_t crc32c_hardware_3way(uint32_t crc, const unsigned char *p, size_t n) {
    while (n >= 3 * CRC_BLOCK) {
        uint64_t a = crc, b = 0, c = 0;
        const unsigned char *pa = p, *pb = p + CRC_BLOCK, *pc = p + 2 * CRC_BLOCK;
        for (size_t i = 0; i < CRC_BLOCK; i += 8) {
            uint64_t wa, wb, wc;
            memcpy(&wa, pa + i, 8);
            memcpy(&wb, pb + i, 8);
            memcpy(&wc, pc + i, 8);
            a = _mm_crc32_u64(a, wa);
            b = _mm_crc32_u64(b, wb);
            c = _mm_crc32_u64(c, wc);
        }
        // crc(A||B||C) = shift(shift(a) ^ b) ^ c, where shift appends CRC_BLOCK zero bytes.
        uint32_t combined = gf2_multiply((uint32_t)a, crc32c_block_shift) ^ (uint32_t)b;
        combined = gf2_multiply(combined, crc32c_block_shift) ^ (uint32_t)c;
        crc = combined;
        p += 3 * CRC_BLOCK;
        n -= 3 * CRC_BLOCK;
    }
    return crc32c_hw_serial(crc, p, n);
}
#endif

static void crc32c_setup(void) {
    crc32c_init_table();
    int hardware = 0;
#if defined(__x86_64__)
    unsigned int eax, ebx, ecx, edx;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_SSE4_2)) hardware = 1;
    crc32c_block_shift = zeros_operator(CRC_BLOCK);
#endif
    __atomic_store_n(&crc32c_hardware, hardware, __ATOMIC_RELEASE);
}

static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;

uint32_t ysh_crc32c(uint32_t crc, const void *data, size_t length) {
    pthread_once(&crc32c_once, crc32c_setup);
    crc = ~crc;
#if defined(__x86_64__)
    if (crc32c_hardware) return ~crc32c_hardware_3way(crc, (const unsigned char *)data, length);
#endif
    return ~crc32c_software(crc, (const unsigned char *)data, length);
}

int ysh_crc32c_is_hardware(void) {
    pthread_once(&crc32c_once, crc32c_setup);
    return crc32c_hardware;
}
