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
"$swift_bin/clang" -c -O1 -I "$root/Sources/CFileLock/include" "$root/Sources/CFileLock/CFileLock.c" \
    -o "$build/CFileLock-plain.o"
"$swift_bin/swiftc" -parse-as-library -swift-version 6 -module-name YashimaSeeds \
    -I "$root/Sources/CFileLock/include" "$here/SeedCorpus.swift" \
    "$src/Storage/EntryFormat.swift" "$src/Support/CRC32C.swift" "$src/Support/SHA256.swift" \
    "$src/Key/CacheKey.swift" "$build/CFileLock-plain.o" -o "$build/make-seeds"
"$build/make-seeds" "$here/corpus"
