// The names the watcher cares about in a storage directory: entry files (`<64 hex>.entry`), fan-out
// folders (`<2 hex>`). Pure functions, no I/O: unit-tested with synthetic names. The events they come
// in are decoded by System/InotifyEvent.swift.

/// Names in the storage directory, as the watcher reads them.
enum ObservedName {
    /// The entry identity of an entry file's name (`<64 lowercase hex>.entry`), or nil for any other name
    /// (staging names, foreign files).
    static func entryIdentity(_ name: String) -> SHA256Digest? {
        let suffix = Directory.entrySuffix
        guard name.utf8.count == 64 + suffix.utf8.count, name.hasSuffix(suffix) else { return nil }
        return digest(fromHex: name.utf8.prefix(64))
    }

    /// The byte a fan-out folder name (`00` … `ff`) stands for, or nil.
    static func fanOutByte(_ name: String) -> UInt8? {
        let utf8 = Array(name.utf8)
        guard utf8.count == 2, let high = hexValue(utf8[0]), let low = hexValue(utf8[1]) else { return nil }
        return high << 4 | low
    }

    /// The fan-out folder name of a byte: two lowercase hex digits.
    static func fanOutName(_ byte: UInt8) -> String {
        let digits = Array("0123456789abcdef")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0xF)]])
    }

    /// 64 lowercase hex digits as a digest; nil for anything else (uppercase included: the cache never
    /// writes it, so such a file is not an entry any lookup would find).
    static func digest(fromHex hex: some Collection<UInt8>) -> SHA256Digest? {
        guard hex.count == 64 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32)
        var iterator = hex.makeIterator()
        while let high = iterator.next(), let low = iterator.next() {
            guard let h = hexValue(high), let l = hexValue(low) else { return nil }
            bytes.append(h << 4 | l)
        }
        return SHA256Digest(bytes: bytes)
    }

    private static func hexValue(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return character - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return character - UInt8(ascii: "a") + 10
        default: return nil
        }
    }
}
