#!/bin/sh
# Regenerates the hand-made seeds in Fuzz/corpus (files named seed-*) from SeedCorpus.swift, compiled
# with the library's own EntryFormat, CacheKey, SHA256 and CRC32C sources.
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
src="$root/Sources/YashimaShared"
build="${FUZZ_BUILD:-/tmp/ysh-fuzz-build}"
swift_bin="${SWIFT_BIN:-$(dirname "$(command -v swiftc)")}"
mkdir -p "$build"
for c in crc32c sha256; do
    "$swift_bin/clang" -c -O1 -I "$root/Sources/CHashes/include" "$root/Sources/CHashes/$c.c" \
        -o "$build/$c-plain.o"
done
"$swift_bin/swiftc" -parse-as-library -swift-version 6 -module-name YashimaSeeds \
    -I "$root/Sources/CHashes/include" "$here/SeedCorpus.swift" \
    "$src/Storage/EntryFormat.swift" "$src/Support/CRC32C.swift" "$src/Support/SHA256.swift" \
    "$src/Key/CacheKey.swift" "$src/Key/CacheKey+Canonical.swift" "$src/Key/CanonicalEncoding.swift" \
    "$src/Key/EntryIdentity.swift" "$src/Key/UTF8Order.swift" "$build/crc32c-plain.o" "$build/sha256-plain.o" \
    -o "$build/make-seeds"
"$build/make-seeds" "$here/corpus"
