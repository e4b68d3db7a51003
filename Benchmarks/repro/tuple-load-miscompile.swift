// Swift 6.3.1 (x86_64 Linux) -O miscompile, found while benchmarking: a word read back through
// withUnsafeBytes(of: &tuple) and then reduced (% or &) comes out 0. It hits SHA256Digest.prefixWord ->
// SharedState.slots in release builds, so every key lands in key-epoch slot 0. Run: swiftc -O this.swift
@inline(never) func tupleMod(_ w: UInt64) -> UInt64 {
    var words = (w, UInt64(2))
    return withUnsafeBytes(of: &words) { $0.load(as: UInt64.self) } % 4096
}
@inline(never) func tupleMask(_ w: UInt64) -> UInt64 {
    var words = (w, UInt64(2))
    return withUnsafeBytes(of: &words) { $0.load(as: UInt64.self) } & 4095
}
@inline(never) func singleWord(_ w: UInt64) -> UInt64 {
    var word = w
    return withUnsafeBytes(of: &word) { $0.load(as: UInt64.self) } % 4096
}
let w = UInt64(CommandLine.arguments.count) &* 0x6daa_9ffc_a0d8_f74a
print("expected \(w % 4096): tuple % -> \(tupleMod(w)), tuple & -> \(tupleMask(w)), single word -> \(singleWord(w))")
// swiftc -Onone: expected 1866: tuple % -> 1866, tuple & -> 1866, single word -> 1866
// swiftc -O:     expected 1866: tuple % -> 0, tuple & -> 0, single word -> 1866
