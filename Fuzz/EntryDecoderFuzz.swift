// The libFuzzer target for the entry decoder: every check a reader applies to untrusted bytes from a
// storage directory (EntryFormat's fixed header, header checksum, key bytes through
// CacheKey(canonicalBytes:), identity, payload checksum), plus the header-only path used by listings.
// Compiled with the library's own source files (see Fuzz/README.md), so it tests exactly that code.
// A crash, a sanitizer report or a failed `fuzzCheck` is a finding.

/// libFuzzer's entry point: one input, decoded every way a reader can.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzEntryDecoder(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data else { return 0 }
    EntryDecoderFuzz.run(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
