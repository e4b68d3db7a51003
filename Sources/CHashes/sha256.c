// sha256.c: the SHA-256 compression function with the x86 SHA extensions (SHA-NI), which SHA256.swift
// calls where the CPU has them (key identities, entry identities, the remote tier's HMAC): about seven
// times the throughput of the Swift rounds, which run everywhere else with the same results.
#include "CHashes.h"

#include <pthread.h>
#include <stdint.h>

static int sha256_hardware = -1;

// FIPS 180-4's round constants K0-K63: the one copy, used by the SHA-NI rounds here and the Swift rounds.
static const uint32_t sha256_k[64] __attribute__((aligned(16))) = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

const uint32_t *ysh_sha256_round_constants(void) { return sha256_k; }

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

// Four rounds at a time: sha256rnds2 does two, on the state held as ABEF and CDGH. The schedule keeps the
// last four groups of four words; group g + 4 is made from groups g to g + 3 (sha256msg1 adds
// sigma0(W[t-15]) to W[t-16], the alignr brings W[t-7], sha256msg2 adds sigma1(W[t-2])).
__attribute__((target("sha,sse4.1,ssse3")))
static void sha256_blocks_ni(uint32_t state[8], const unsigned char *data, size_t count) {
    const __m128i byteSwap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    __m128i tmp = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&state[0]), 0xB1);  // CDAB
    __m128i state1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&state[4]), 0x1B);  // EFGH
    __m128i state0 = _mm_alignr_epi8(tmp, state1, 8);  // ABEF
    state1 = _mm_blend_epi16(state1, tmp, 0xF0);  // CDGH
    while (count-- > 0) {
        const __m128i abefSaved = state0, cdghSaved = state1;
        __m128i w[4];
        for (int g = 0; g < 4; g++) {
            w[g] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 16 * g)), byteSwap);
        }
        for (int g = 0; g < 16; g++) {
            __m128i message = _mm_add_epi32(w[g & 3], _mm_load_si128((const __m128i *)&sha256_k[4 * g]));
            state1 = _mm_sha256rnds2_epu32(state1, state0, message);
            message = _mm_shuffle_epi32(message, 0x0E);
            state0 = _mm_sha256rnds2_epu32(state0, state1, message);
            if (g < 12) {
                __m128i next = _mm_sha256msg1_epu32(w[g & 3], w[(g + 1) & 3]);
                next = _mm_add_epi32(next, _mm_alignr_epi8(w[(g + 3) & 3], w[(g + 2) & 3], 4));
                w[g & 3] = _mm_sha256msg2_epu32(next, w[(g + 3) & 3]);
            }
        }
        state0 = _mm_add_epi32(state0, abefSaved);
        state1 = _mm_add_epi32(state1, cdghSaved);
        data += 64;
    }
    tmp = _mm_shuffle_epi32(state0, 0x1B);  // FEBA
    state1 = _mm_shuffle_epi32(state1, 0xB1);  // DCHG
    _mm_storeu_si128((__m128i *)&state[0], _mm_blend_epi16(tmp, state1, 0xF0));  // DCBA
    _mm_storeu_si128((__m128i *)&state[4], _mm_alignr_epi8(state1, tmp, 8));  // HGFE
}
#endif

static void sha256_setup(void) {
    int hardware = 0;
#if defined(__x86_64__)
    unsigned int eax, ebx, ecx, edx;
    // SHA (leaf 7, EBX bit 29) with SSSE3 and SSE4.1 (leaf 1, ECX bits 9 and 19).
    if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (ebx & bit_SHA)
        && __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_SSSE3) && (ecx & bit_SSE4_1)) {
        hardware = 1;
    }
#endif
    __atomic_store_n(&sha256_hardware, hardware, __ATOMIC_RELEASE);
}

static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

int ysh_sha256_is_hardware(void) {
    pthread_once(&sha256_once, sha256_setup);
    return sha256_hardware;
}

void ysh_sha256_blocks(uint32_t state[8], const void *blocks, size_t count) {
#if defined(__x86_64__)
    if (ysh_sha256_is_hardware()) {
        sha256_blocks_ni(state, (const unsigned char *)blocks, count);
        return;
    }
#endif
    (void)state;
    (void)blocks;
    (void)count;
}
