// The operator's surface (`@_spi(Operator)`): what the `yashima` command-line tool needs from the
// internals and the public API does not give — the shared counters, the budget recorded for the directory,
// removal with a count, the names a storage root holds, and the one way to run blocking work off the
// pool (Support/BlockingWork). Listing, verification and the census of lock files and debris are in the other
// files of this folder. Everything here is blocking (scans, reads of every entry): call it off the
// cooperative pool. Nothing here changes the on-disk format; it follows the invariants (I1–I15) like the engine.

import Foundation

/// Operations on a whole storage directory for operators and tools: listing with last use, verification,
/// repair, a census of lock files and debris, and the counters every process shares.
@_spi(Operator)
public final class StorageOperator: Sendable {
    let engine: CacheEngine
    let context: StorageContext

    init(engine: CacheEngine, context: StorageContext) {
        self.engine = engine
        self.context = context
    }

    var directory: Directory { context.directory }
    var files: EntryFile { context.files }

    /// The storage directory's path.
    public var path: String { directory.path }

    /// The shared usage counter: allocated bytes of all entries as last adjusted (a hint that trim
    /// reconciles, I9). Read without scanning.
    public var usageCounter: Int64 { directory.state.usage }

    /// The shared payload counter: payload bytes of all entries as last adjusted (what the storage budget
    /// counts; a hint that trim reconciles, I9). Read without scanning.
    public var payloadCounter: Int64 { directory.state.payloadBytes }

    /// The path, relative to the storage directory, of the entry file `key` is stored in with the codec
    /// `codecIdentifier` (whether or not it exists): for tools that read files directly (benchmarks).
    /// - Parameters:
    ///   - key: The key.
    ///   - codecIdentifier: The codec's identifier.
    /// - Returns: `entries/<xx>/<entry identity>.entry`.
    public func entryPath(for key: CacheKey, codecIdentifier: String) -> String {
        directory.entryPath(for: EntryIdentity(key: key, codecIdentifier: codecIdentifier)).relative
    }

    // MARK: Counters

    /// The counters every process using the directory adds to, since they were last zeroed.
    public func counters() -> SharedCounters {
        let state = directory.state
        return SharedCounters(
            memoryHits: state.total(.memoryHits), storageHits: state.total(.storageHits),
            misses: state.total(.misses), generations: state.total(.generations),
            sharedGenerations: state.total(.sharedGenerations), corruptEntries: state.total(.corruptEntries),
            writeFailures: state.total(.writeFailures), crossProcessTimeouts: state.total(.crossProcessTimeouts),
            crossProcessLockFailures: state.total(.crossProcessLockFailures),
            trimFailures: state.total(.trimFailures), pressureTrims: state.total(.pressureTrims),
            savedNanoseconds: state.total(.savedNanoseconds),
            zeroedAt: state.countersZeroedAt.map { Date(timeIntervalSince1970: Double($0) / 1e9) })
    }

    /// Sets every shared counter to zero, for every process, and records the time.
    public func zeroCounters() {
        directory.state.zeroCounters(now: Syscall.realtimeNanoseconds)
    }

    /// Adds generation time that a hit saved (as `yashima run` measures it) to the shared counters.
    /// - Parameter nanoseconds: The time saved; 0 or less adds nothing.
    public func addSavedTime(nanoseconds: Int64) {
        guard nanoseconds > 0 else { return }
        directory.state.add(.savedNanoseconds, UInt64(nanoseconds))
    }

    // MARK: The recorded budget

    /// The budget recorded for the directory by an operator (`yashima run --max-size`): nil when none
    /// was recorded, `Int64.max` for unlimited. The library's own writers use their own budgets.
    public var recordedBudget: Int64? { directory.state.operatorBudget }

    /// Records the directory's budget in the state file, for every process that reads it.
    /// - Parameter bytes: A positive byte count, or `Int64.max` for unlimited.
    public func recordBudget(_ bytes: Int64) {
        directory.state.recordOperatorBudget(bytes)
    }

    // MARK: The filesystem

    /// The storage directory's filesystem: its size and the bytes still free on it for an unprivileged
    /// process (`fstatvfs`); nil when it cannot be read.
    public var filesystemSpace: (totalBytes: Int64, availableBytes: Int64)? {
        guard case .success(let space) = Syscall.filesystemSpace(directory.descriptor) else { return nil }
        return (space.totalBytes, space.availableBytes)
    }

    // MARK: Removal

    /// Removes every entry (of `namespace`, when given), as `YCache.removeAll()` and
    /// `removeAll(in:)` do (every process's next lookup misses), and returns how many entry files were
    /// unlinked.
    /// - Parameter namespace: Only entries of this namespace; nil for all.
    /// - Returns: The number of entry files unlinked.
    /// - Throws: A storage-open error when the directory cannot be used.
    public func removeAll(inNamespace namespace: String?) throws(YCache.Error) -> Int {
        try engine.removeAll(inNamespace: namespace)
    }
}

@_spi(Operator)
extension StorageOperator {
    // MARK: The layout, before a directory is opened

    /// The name of the file that makes a folder a storage directory (its layout version).
    public static var layoutFileName: String { Directory.layoutFile }

    /// The on-disk layout version this build reads and writes.
    public static var layoutVersion: Int { CrossProcessProtocol.layoutVersion }

    /// Whether `name`, found in a storage directory's root, is one the cache puts there itself (its
    /// folders and files, or a folder being made); anything else there is someone else's.
    public static func isOwnRootName(_ name: String) -> Bool {
        Directory.rootNames.contains(name) || name.hasPrefix(Directory.folderStagingPrefix)
    }

    // MARK: Blocking work

    /// Runs `body` (a scan, a read of every entry, a wait) on a thread of its own and returns its result:
    /// the caller's task is suspended, the cooperative pool never blocked (the library's BlockingWork).
    public static func offPool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await BlockingWork.run(stackSize: 1 << 20, body)
    }

    /// `offPool`, for work that throws.
    public static func offPool<T: Sendable>(throwing body: @escaping @Sendable () throws -> T) async throws -> T {
        try await offPool { Result { try body() } }.get()
    }
}

/// The counters every process using a storage directory adds to (in its `state` file), since they
/// were last zeroed. All but `savedNanoseconds` mirror `CacheStatistics`, summed over processes.
@_spi(Operator)
public struct SharedCounters: Sendable, Equatable {
    /// Lookups answered from a process's memory.
    public var memoryHits: UInt64
    /// Lookups answered from storage (reads after waiting for another process included).
    public var storageHits: UInt64
    /// Get-or-generate lookups that found nothing in memory or storage at first.
    public var misses: UInt64
    /// Values generated.
    public var generations: UInt64
    /// Lookups that used another task's or process's generation instead of generating.
    public var sharedGenerations: UInt64
    /// Entries found corrupt.
    public var corruptEntries: UInt64
    /// Storage writes that failed.
    public var writeFailures: UInt64
    /// Cross-process waits that passed their timeout.
    public var crossProcessTimeouts: UInt64
    /// Generations that ran without the key's lock file.
    public var crossProcessLockFailures: UInt64
    /// Trims after a write that failed (the write itself succeeded).
    public var trimFailures: UInt64
    /// Trims that made room for a write: after `ENOSPC` or `EDQUOT`, or below the free-space floor (0 in
    /// a directory only older builds wrote to).
    public var pressureTrims: UInt64
    /// Generation time saved by hits, in nanoseconds, as `yashima run` reports it.
    public var savedNanoseconds: UInt64
    /// When the counters were last zeroed; nil if never (they count from the directory's creation, or
    /// from the first build that kept them).
    public var zeroedAt: Date?
}
