// Decoding the bytes `read(2)` returns from an inotify descriptor into events, and the names the watcher
// cares about: entry files (`<64 hex>.entry`), fan-out folders (`<2 hex>`) and removal markers. Pure
// functions, no I/O: unit-tested with synthetic buffers.

/// One decoded `struct inotify_event`.
struct InotifyEvent: Equatable, Sendable {
    /// The watch descriptor; -1 for a queue overflow.
    let watch: Int32
    let mask: InotifyMask
    /// Pairs the two halves of a rename; the two moves of a `RENAME_EXCHANGE` take consecutive cookies.
    let cookie: UInt32
    /// The name inside the watched folder; empty for events about the folder itself.
    let name: String

    /// Decodes every complete event in `bytes` (the result of one read): a 16-byte header (wd, mask,
    /// cookie, len, in host byte order) and `len` bytes of NUL-padded name. A truncated tail, which the
    /// kernel never returns, is ignored.
    static func decode(_ bytes: UnsafeRawBufferPointer) -> [InotifyEvent] {
        var events: [InotifyEvent] = []
        var offset = 0
        let header = Inotify.eventHeaderSize
        while offset + header <= bytes.count {
            let watch = bytes.loadUnaligned(fromByteOffset: offset, as: Int32.self)
            let mask = bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
            let cookie = bytes.loadUnaligned(fromByteOffset: offset + 8, as: UInt32.self)
            let length = Int(bytes.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
            guard offset + header + length <= bytes.count else { break }
            let nameBytes = UnsafeRawBufferPointer(rebasing: bytes[(offset + header)..<(offset + header + length)])
            let end = nameBytes.firstIndex(of: 0) ?? nameBytes.count
            let name = String(decoding: UnsafeRawBufferPointer(rebasing: nameBytes[0..<end]), as: UTF8.self)
            events.append(InotifyEvent(watch: watch, mask: InotifyMask(rawValue: mask), cookie: cookie, name: name))
            offset += header + length
        }
        return events
    }
}

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
