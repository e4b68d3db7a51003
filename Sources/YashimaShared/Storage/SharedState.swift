// The `state` file every process maps shared: the directory's usage counters (I9: payload bytes, which
// the budget counts, and allocated bytes), the time of the last publish (I11) and the removal epochs (I10). Words are only touched through the C atomics, so processes never tear each other's updates.
// Created once (staging file + linkat, first creator wins) and never truncated afterwards.

import CFileLock

/// The shared state of one storage directory, mapped `MAP_SHARED` in every process.
///
/// Layout (little-endian, 8-byte words):
/// | offset | field |
/// |---|---|
/// | 0 | magic `YSHSTATE` |
/// | 8 | state format version (1) |
/// | 16 | usage: allocated bytes of all entries (Int64, a hint reconciled by trim) |
/// | 24 | reserved (the state file's instance id, another change) |
/// | 32 | global epoch (bumped by `removeAll()`) |
/// | 40 | payload bytes of all entries (Int64, a hint reconciled by trim): what the storage budget counts |
/// | 48 | last publish: the largest mtime a publish gave an entry, ns since 1970 (Int64; I11) |
/// | 56 | accounting flags: bit 0 set once a scan has counted the payload word (a file made by 0.1, or just now, has 0) |
/// | 64 | namespace epochs, `namespaceSlots` words, slot = namespace digest mod count |
/// | 64 + 8·namespaceSlots | key epochs, `keySlots` words, slot = key digest mod count |
/// | 41,024 | shared counters and the operator's words (`SharedState+Counters.swift`) |
//
// Safe to share across tasks (`@unchecked Sendable`): the only stored properties are immutable lets;
// the mapping they point to is never unmapped while the object lives (munmap runs in deinit) and is only
// read or written through sequentially consistent C atomics, which are safe from any thread and process.
final class SharedState: @unchecked Sendable {
    static let size = 65_536
    static let magic: UInt64 = UInt64(littleEndian: Array("YSHSTATE".utf8).withUnsafeBytes { $0.load(as: UInt64.self) })
    static let version: UInt64 = 1
    static let namespaceSlots = 1024
    static let keySlots = 4096
    private static let usageOffset = 16
    private static let globalEpochOffset = 32
    private static let payloadOffset = 40
    private static let lastPublishOffset = 48
    fileprivate static let accountingFlagsOffset = 56
    /// Bit of the accounting flags: the payload counter was counted by a scan.
    private static let payloadCountedFlag: UInt64 = 1
    private static let namespaceOffset = 64
    private static let keyOffset = 64 + 8 * 1024

    /// The mapping (internal, not private, for the shared counters in SharedState+Counters.swift).
    let base: UnsafeMutableRawPointer

    private init(base: UnsafeMutableRawPointer) {
        self.base = base
    }

    deinit {
        Syscall.unmap(base, length: SharedState.size)
    }

    /// Opens (creating once when missing) and maps the state file.
    static func open(rootDescriptor root: Int32, rootPath: String, fileMode: UInt32) throws(YCache.Error) -> SharedState
    {
        for _ in 0..<3 {
            switch Syscall.open(Directory.stateFile, in: root, flags: [.readWrite]) {
            case .success(let fd):
                defer { Syscall.close(fd) }
                guard case .success(let status) = Syscall.status(of: fd), status.isRegularFile,
                    status.size == Int64(size)
                else {
                    throw .storageUnavailable(path: rootPath, reason: "the state file is damaged (wrong size or type)")
                }
                let base: UnsafeMutableRawPointer
                switch Syscall.mapShared(fd, length: size) {
                case .success(let pointer): base = pointer
                case .failure(let error):
                    throw .storageUnavailable(path: rootPath, reason: "cannot map the state file: \(error)")
                }
                let state = SharedState(base: base)
                let word = base.load(as: UInt64.self)
                guard word == magic, state.load(8) == version else {
                    throw .storageUnavailable(path: rootPath, reason: "the state file is damaged (bad magic)")
                }
                return state
            case .failure(let error) where error.errno == .noSuchFile:
                var bytes = [UInt8](repeating: 0, count: 16)
                bytes.withUnsafeMutableBytes {
                    $0.storeBytes(of: magic, toByteOffset: 0, as: UInt64.self)
                    $0.storeBytes(of: version.littleEndian, toByteOffset: 8, as: UInt64.self)
                }
                _ = try Directory.createOnce(
                    Directory.stateFile, in: root, bytes: bytes, mode: fileMode, rootPath: rootPath, size: size)
            case .failure(let error):
                throw .storageUnavailable(path: rootPath, reason: "cannot open the state file: \(error)")
            }
        }
        throw .storageUnavailable(path: rootPath, reason: "the state file keeps disappearing")
    }

    private func load(_ offset: Int) -> UInt64 {
        ysh_atomic_load_u64((base + offset).assumingMemoryBound(to: UInt64.self))
    }

    /// Adds one to the word at `offset`; returns its previous value.
    @discardableResult
    private func increment(_ offset: Int) -> UInt64 {
        ysh_atomic_fetch_add_u64((base + offset).assumingMemoryBound(to: UInt64.self), 1)
    }

    // MARK: Usage (I9)

    /// Allocated bytes of all entries, as last adjusted (never negative).
    var usage: Int64 {
        max(0, ysh_atomic_load_i64((base + SharedState.usageOffset).assumingMemoryBound(to: Int64.self)))
    }

    /// Adds `delta` (may be negative) to the allocated-bytes counter.
    func adjustUsage(by delta: Int64) {
        adjust(SharedState.usageOffset, by: delta)
    }

    /// Payload bytes of all entries, as last adjusted (never negative): what the storage budget counts.
    var payloadBytes: Int64 {
        max(0, ysh_atomic_load_i64((base + SharedState.payloadOffset).assumingMemoryBound(to: Int64.self)))
    }

    /// Adds `delta` (may be negative) to the payload-bytes counter.
    func adjustPayloadBytes(by delta: Int64) {
        adjust(SharedState.payloadOffset, by: delta)
    }

    /// Whether a scan has counted the payload counter since the file was made. A state file made by 0.1
    /// (which had no payload counter) or made just now holds 0 there; until a trim scan counts it, the
    /// counter is not trusted and the next budgeted write recounts (I9).
    var isPayloadCounted: Bool {
        load(SharedState.accountingFlagsOffset) & SharedState.payloadCountedFlag != 0
    }

    /// Records that a scan counted the payload counter.
    func markPayloadCounted() {
        let word = (base + SharedState.accountingFlagsOffset).assumingMemoryBound(to: Int64.self)
        while true {
            let old = ysh_atomic_load_i64(word)
            let flags = UInt64(bitPattern: old)
            if flags & SharedState.payloadCountedFlag != 0 { return }
            let new = Int64(bitPattern: flags | SharedState.payloadCountedFlag)
            if ysh_atomic_cas_i64(word, old, new) != 0 { return }
        }
    }

    private func adjust(_ offset: Int, by delta: Int64) {
        guard delta != 0 else { return }
        let word = (base + offset).assumingMemoryBound(to: Int64.self)
        let old = ysh_atomic_fetch_add_i64(word, delta)
        if old + delta < 0 {
            // Drift below zero (an unlink counted twice): clamp, the next trim scan recounts.
            _ = ysh_atomic_cas_i64(word, old + delta, 0)
        }
    }

    // MARK: Last publish (I11)

    /// The largest mtime any publish gave an entry (nanoseconds since 1970; 0 in a state file made by 0.1).
    /// An entry last used before this looks older to trim than something published since, so a hit on it
    /// touches (I11).
    var lastPublishNanoseconds: Int64 {
        ysh_atomic_load_i64((base + SharedState.lastPublishOffset).assumingMemoryBound(to: Int64.self))
    }

    /// Raises the last-publish time to `nanoseconds`. It is lowered only when it lies more than the touch
    /// interval ahead (left by a clock that jumped back), so that it cannot keep every later hit touching.
    func notePublish(atNanoseconds nanoseconds: Int64) {
        let word = (base + SharedState.lastPublishOffset).assumingMemoryBound(to: Int64.self)
        while true {
            let old = ysh_atomic_load_i64(word)
            if old >= nanoseconds && old - nanoseconds < Policy.touchInterval { return }
            if ysh_atomic_cas_i64(word, old, nanoseconds) != 0 { return }
        }
    }

    // MARK: Epochs (I10)

    /// The epochs an in-memory entry is valid for.
    struct Stamp: Equatable, Sendable {
        var global: UInt64
        var namespace: UInt64
        var key: UInt64
    }

    /// Slots of a key: where its namespace and key epochs live.
    struct Slots: Equatable, Sendable {
        var namespace: Int
        var key: Int
    }

    /// The slots of a key. The namespace slot uses CRC32C of the namespace (stable across processes and
    /// cheap on every lookup); the key slot uses the key's SHA-256 digest, already at hand.
    static func slots(namespace: String, keyDigest: SHA256Digest) -> Slots {
        Slots(namespace: namespaceSlot(namespace), key: Int(keyDigest.prefixWord % UInt64(keySlots)))
    }

    static func namespaceSlot(_ namespace: String) -> Int {
        var namespace = namespace
        let crc = namespace.withUTF8 { CRC32C.checksum(UnsafeRawBufferPointer($0)) }
        return Int(crc % UInt32(namespaceSlots))
    }

    func stamp(_ slots: Slots) -> Stamp {
        Stamp(
            global: load(SharedState.globalEpochOffset),
            namespace: load(SharedState.namespaceOffset + 8 * slots.namespace),
            key: load(SharedState.keyOffset + 8 * slots.key))
    }

    /// Bumps the key epoch of `slots`; returns its value before the bump.
    @discardableResult
    func bumpKey(_ slots: Slots) -> UInt64 { increment(SharedState.keyOffset + 8 * slots.key) }
    func bumpNamespace(slot: Int) { increment(SharedState.namespaceOffset + 8 * slot) }
    func bumpGlobal() { increment(SharedState.globalEpochOffset) }
}

// MARK: Test seams

extension SharedState {
    /// Clears the accounting flags, as a state file made by 0.1 has them (tests only).
    func clearAccountingFlagsForTesting() {
        ysh_atomic_store_u64((base + SharedState.accountingFlagsOffset).assumingMemoryBound(to: UInt64.self), 0)
    }
}
