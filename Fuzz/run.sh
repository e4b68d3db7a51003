#!/bin/sh
# Builds the entry-decoder fuzz target with libFuzzer + AddressSanitizer and runs it.
#   Fuzz/run.sh SECONDS [extra libFuzzer flags...]
# Environment: FUZZ_BUILD (build dir, default /tmp/ysh-fuzz-build), FUZZ_WORK (working corpus, default
# Fuzz/.work/corpus, not committed), FUZZ_MERGE=1 to merge new coverage back into Fuzz/corpus afterwards.
# Crashes are written to Fuzz/crashes/ (committed as regressions; the replay test runs them).
set -eu
seconds="${1:?usage: Fuzz/run.sh SECONDS [libFuzzer flags...]}"
shift
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
src="$root/Sources/YashimaShared"
build="${FUZZ_BUILD:-/tmp/ysh-fuzz-build}"
work="${FUZZ_WORK:-$here/.work/corpus}"
swift_bin="${SWIFT_BIN:-$(dirname "$(command -v swiftc)")}"
mkdir -p "$build" "$work" "$here/crashes"

# 1. The C hashes (CRC32C, SHA-256) instrumented for coverage and ASan, but without libFuzzer's main.
for c in crc32c sha256; do
    "$swift_bin/clang" -c -O1 -g -fsanitize=fuzzer-no-link,address \
        -I "$root/Sources/CHashes/include" "$root/Sources/CHashes/$c.c" -o "$build/$c.o"
done

# 2. The target plus exactly the library files the decoder needs, as one module.
"$swift_bin/swiftc" -sanitize=fuzzer,address -parse-as-library -O -g \
    -swift-version 6 -module-name YashimaFuzz \
    -I "$root/Sources/CHashes/include" \
    "$here/EntryDecoderFuzz.swift" "$here/EntryDecoderFuzzBody.swift" \
    "$src/Storage/EntryFormat.swift" "$src/Support/CRC32C.swift" "$src/Support/SHA256.swift" \
    "$src/Key/CacheKey.swift" "$src/Key/CacheKey+Canonical.swift" "$src/Key/CanonicalEncoding.swift" \
    "$src/Key/EntryIdentity.swift" "$src/Key/UTF8Order.swift" \
    "$build/crc32c.o" "$build/sha256.o" -o "$build/entry-decoder-fuzz"

# 3. Run: new inputs go to the working corpus; the committed seeds are read too.
status=0
# The Swift runtime's backtracer would sit on a crash for its interactive timeout; libFuzzer reports it.
SWIFT_BACKTRACE=enable=no "$build/entry-decoder-fuzz" "$work" "$here/corpus" \
    -max_total_time="$seconds" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$here/crashes/" -print_final_stats=1 "$@" || status=$?

if [ "${FUZZ_MERGE:-0}" = 1 ]; then
    "$build/entry-decoder-fuzz" -merge=1 -max_len=8192 "$here/corpus" "$work"
fi
exit "$status"
