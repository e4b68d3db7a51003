// One mapping of one state file (one inode), shared (MAP_SHARED) by every process, under the SIGBUS guard
// (I14): every word is read and written only through the C atomics, so processes never tear each other's
// updates, and a mapping of a file truncated under it reads zeros instead of killing the process.

import CFileLock

/// One mapping of one state file (one inode), with the descriptor it was mapped from. The descriptor
/// stays open so a process can mark this very inode dead (`pwrite`) when the path has been made to name
/// another file (`SharedState.verifyPath`).
///
/// Safe to share across tasks (`@unchecked Sendable`): the stored properties are immutable lets, except
/// `descriptor`, which only `takeDescriptor` writes, before the object is shared with anyone; the mapping
/// is never unmapped while the object lives (munmap runs in deinit) and is only read or written through
/// sequentially consistent C atomics, which are safe from any thread and process. After the SIGBUS guard
/// replaced it with zeros, it is private anonymous memory of the same size: still safe to access.
final class StateMapping: @unchecked Sendable {
    let base: UnsafeMutableRawPointer
    private(set) var descriptor: Int32
    /// The file's status when it was opened (its device and inode identify it).
    let file: FileStatus
    /// The instance id read at open (0 in files of older builds: a valid id).
    let instance: UInt64
    private let guarded: Bool

    init(base: UnsafeMutableRawPointer, descriptor: Int32, file: FileStatus, guarded: Bool) {
        self.base = base
        self.descriptor = descriptor
        self.file = file
        self.guarded = guarded
        instance = ysh_atomic_load_u64((base + SharedState.instanceOffset).assumingMemoryBound(to: UInt64.self))
    }

    deinit {
        if guarded { Syscall.unguardMapping(base) }
        Syscall.unmap(base, length: SharedState.size)
        if descriptor >= 0 { Syscall.close(descriptor) }
    }

    /// Hands the descriptor to the caller (who closes it); for a mapping that is dropped at once.
    func takeDescriptor() -> Int32 {
        defer { descriptor = -1 }
        return descriptor
    }

    /// Whether word 0 still holds the magic: false once any process marked the file dead, or it was
    /// zeroed, or the SIGBUS guard replaced this mapping.
    var isLive: Bool { load(0) == SharedState.magic }

    /// Marks this inode dead for every process mapping it (`pwrite`, never through the mapping).
    func markDead() {
        guard descriptor >= 0 else { return }
        var dead = SharedState.deadMarker
        _ = withUnsafeBytes(of: &dead) { Syscall.write(descriptor, $0, at: 0) }
    }

    func load(_ offset: Int) -> UInt64 {
        ysh_atomic_load_u64((base + offset).assumingMemoryBound(to: UInt64.self))
    }

    func loadSigned(_ offset: Int) -> Int64 {
        ysh_atomic_load_i64((base + offset).assumingMemoryBound(to: Int64.self))
    }

    func store(_ offset: Int, _ value: UInt64) {
        ysh_atomic_store_u64((base + offset).assumingMemoryBound(to: UInt64.self), value)
    }

    func increment(_ offset: Int) {
        _ = fetchIncrement(offset)
    }

    /// Adds one to the word at `offset`; returns its previous value.
    func fetchIncrement(_ offset: Int) -> UInt64 { fetchAdd(offset, 1) }

    /// Adds `delta` to the word at `offset`, wrapping; returns its previous value.
    func fetchAdd(_ offset: Int, _ delta: UInt64) -> UInt64 {
        ysh_atomic_fetch_add_u64((base + offset).assumingMemoryBound(to: UInt64.self), delta)
    }

    /// Adds `delta` to the signed counter at `offset`, clamping a result below zero to 0.
    func adjust(_ offset: Int, by delta: Int64) {
        let word = (base + offset).assumingMemoryBound(to: Int64.self)
        let old = ysh_atomic_fetch_add_i64(word, delta)
        if old &+ delta < 0 {
            // Drift below zero (an unlink counted twice): clamp, the next trim scan recounts.
            _ = ysh_atomic_cas_i64(word, old &+ delta, 0)
        }
    }

    /// Sets `flag` in the word at `offset` (compare-and-swap).
    func clearFlag(_ flag: UInt64, at offset: Int) {
        let word = (base + offset).assumingMemoryBound(to: Int64.self)
        while true {
            let old = ysh_atomic_load_i64(word)
            if UInt64(bitPattern: old) & flag == 0 { return }
            if ysh_atomic_cas_i64(word, old, Int64(bitPattern: UInt64(bitPattern: old) & ~flag)) != 0 { return }
        }
    }

    func setFlag(_ flag: UInt64, at offset: Int) {
        let word = (base + offset).assumingMemoryBound(to: Int64.self)
        while true {
            let old = ysh_atomic_load_i64(word)
            if UInt64(bitPattern: old) & flag != 0 { return }
            if ysh_atomic_cas_i64(word, old, Int64(bitPattern: UInt64(bitPattern: old) | flag)) != 0 { return }
        }
    }

    /// Raises the signed word at `offset` to `value`; lowers it only when it lies more than
    /// `Policy.touchInterval` above `value` (a clock that jumped back).
    func raise(_ offset: Int, to value: Int64) {
        let word = (base + offset).assumingMemoryBound(to: Int64.self)
        while true {
            let old = ysh_atomic_load_i64(word)
            if old >= value && old - value < touchIntervalNanoseconds { return }
            if ysh_atomic_cas_i64(word, old, value) != 0 { return }
        }
    }
}
