// Decoding the bytes `read(2)` returns from an inotify descriptor into events: the raw layer under every
// watch (Observation/'s watcher, Coordination/'s LockWatch) with InotifySyscalls.swift. A pure function,
// no I/O: unit-tested with synthetic buffers.

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
