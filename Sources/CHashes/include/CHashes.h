// CHashes: the hashes YashimaShared computes with CPU instructions where the CPU has them: CRC32C
// (SSE4.2, crc32c.c: entry headers and payloads, Docs/Format.md) and the SHA-256 compression function
// (SHA-NI, sha256.c: key and entry identities, the remote tier's HMAC). Each has a portable path with the
// same results (crc32c.c's tables; SHA256.swift's rounds). Pure functions: no syscall, no errno.
#ifndef YASHIMA_CHASHES_H
#define YASHIMA_CHASHES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// CRC32C (Castagnoli) continuing from `crc` (pass 0 to start). Uses SSE4.2 when the CPU has it.
uint32_t ysh_crc32c(uint32_t crc, const void *data, size_t length);
/// 1 when ysh_crc32c uses the SSE4.2 instruction.
int ysh_crc32c_is_hardware(void);

/// 1 when the CPU has the x86 SHA extensions, which ysh_sha256_blocks needs.
int ysh_sha256_is_hardware(void);
/// SHA-256's 64 round constants (FIPS 180-4), for the Swift rounds that run without the SHA extensions.
const uint32_t *ysh_sha256_round_constants(void);
/// The SHA-256 compression function over `count` consecutive 64-byte blocks, updating the eight working
/// values in `state` (H0 to H7). Call only when ysh_sha256_is_hardware(); otherwise it does nothing.
void ysh_sha256_blocks(uint32_t state[8], const void *blocks, size_t count);

#ifdef __cplusplus
}
#endif

#endif
