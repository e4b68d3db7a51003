// The engine behind `YCache`: configuration, the tiers in the order a lookup walks them (Tier.swift), the
// one way to storage (`storage(for:)`), statistics. No I/O of its own beyond Storage and Coordination;
// never blocks the cooperative pool (BlockingWork, LockWait).

import Foundation
import Synchronization

/// What a storage access is for.
enum StoragePurpose: Sendable {
    /// A lookup: the root path is re-checked at most once per `Policy.rootCheckInterval` (I13).
    case read
    /// A write (publish, remove, trim, a production's lock file): the root path is checked now (I13).
    case write
}

final class CacheEngine: Sendable {
    let storagePath: String
    /// The storage budget this instance enforces when it writes (I9).
    let budget: StorageBudget
    /// The free space this instance leaves on the filesystem, and its readings of it (SpacePressure).
    let freeSpace: FreeSpaceWatch
    let sharing: StorageSharingMode
    let allowNetworkFilesystem: Bool
    let memory: MemoryStore
    let flights = FlightTable()
    let statistics = Mutex(CacheStatistics())
    let expectations = ExpectationCache()
    /// The tiers, in the order a lookup walks them (Tier.swift).
    let tiers: [any CacheTier]
    /// The `.beforeFlight` tiers (memory, storage), which every lookup asks.
    let lookupTiers: [any CacheTier]
    /// The `.underKeyLock` tiers (remote, the generator), which a production asks, outermost first.
    let productionTiers: [any CacheTier]
    /// The remote tier, if any (also in `tiers`): a lookup flight's production starts its first call early.
    let remoteTier: RemoteTier?

    private enum Opening {
        case notYet
        case open(StorageContext)
        case failed(YCache.Error, at: Int64)
    }

    private let opening = Mutex<Opening>(.notYet)

    init(
        storagePath: String, memoryMaximumCost: Int?, memoryMaximumEntryCount: Int?, budget: StorageBudget,
        freeSpaceFloor: YCache.FreeSpaceFloor? = nil, sharing: StorageSharingMode, allowNetworkFilesystem: Bool,
        remote: RemoteStores? = nil
    ) {
        self.storagePath = storagePath
        self.budget = budget
        freeSpace = FreeSpaceWatch(floor: freeSpaceFloor)
        self.sharing = sharing
        self.allowNetworkFilesystem = allowNetworkFilesystem
        self.memory = MemoryStore(maximumCost: memoryMaximumCost, maximumCount: memoryMaximumEntryCount)
        // Adding a tier is a type and a line here.
        let remoteTier = remote.map(RemoteTier.init)
        self.remoteTier = remoteTier
        let tiers: [(any CacheTier)?] = [MemoryTier(), StorageTier(), remoteTier, GeneratorTier()]
        self.tiers = tiers.compactMap { $0 }
        lookupTiers = self.tiers.filter { $0.place == .beforeFlight }
        productionTiers = self.tiers.filter { $0.place == .underKeyLock }
        precondition(self.tiers.map(\.place) == lookupTiers.map(\.place) + productionTiers.map(\.place))
        // I17: the remote tier's breakers and counters live in the directory's state file once it is open.
        let board = DirectoryMachineBoard(state: { [weak self] in self?.stateIfOpen })
        // (No cast over the tiers: casting a struct to a class makes the runtime search every protocol
        // conformance for a bridging one, a cost every process start-up would pay.)
        remoteTier?.attach(board)
    }

    // MARK: Storage

    /// The storage context, opening the directory on first use, and again: after a failure (at most once
    /// per `Policy.storageReopenInterval`), after a fork (I7), and when the root path no longer names the
    /// open root (I13), which a write checks now and a read at most once per `Policy.rootCheckInterval`.
    /// The one way every part of the engine gets at storage.
    func storage(for purpose: StoragePurpose = .read) -> Result<StorageContext, YCache.Error> {
        let (result, opened) = openedStorage(for: purpose)
        if opened, !firstLookupRehearsed.exchange(true, ordering: .relaxed) { rehearseFirstLookup(in: result) }
        return result
    }

    /// `storage(for:)`'s work under the `opening` lock; `opened`: this call opened the directory.
    private func openedStorage(for purpose: StoragePurpose) -> (Result<StorageContext, YCache.Error>, opened: Bool) {
        opening.withLock { opening in
            let now = Syscall.monotonicNanoseconds
            switch opening {
            case .open(let context) where context.directory.isUsable(verifyingRoot: purpose == .write, now: now):
                return (.success(context), false)
            case .failed(let error, let at) where now - at < storageReopenInterval:
                return (.failure(error), false)
            default:
                do throws(YCache.Error) {
                    let directory = try Directory(
                        path: storagePath, sharing: sharing, allowNetworkFilesystem: allowNetworkFilesystem,
                        // Called with `opening` or the state's own lock held (a repair while opening or
                        // switching files): only the local counter, never `count`, whose shared-counter
                        // mirror takes both locks again.
                        onRepair: { [weak self] in self?.statistics.withLock { $0.auxiliaryFileRepairs += 1 } })
                    let context = StorageContext(directory: directory)
                    opening = .open(context)
                    return (.success(context), true)
                } catch {
                    opening = .failed(error, at: now)
                    return (.failure(error), false)
                }
            }
        }
    }

    /// `storage(for:)` when the directory is open and usable as it is; nil when getting it would open
    /// (or reopen) the directory, which a lookup on its caller's executor leaves to the pool.
    func storageIfOpen(for purpose: StoragePurpose) -> Result<StorageContext, YCache.Error>? {
        let usable = opening.withLock { opening -> StorageContext? in
            guard case .open(let context) = opening,
                context.directory.isUsable(verifyingRoot: purpose == .write, now: Syscall.monotonicNanoseconds)
            else { return nil }
            return context
        }
        return usable.map { .success($0) }
    }

    /// The open directory's state file, without opening the directory (nil until it is open): where the
    /// statistics are mirrored, which must never be what opens storage.
    var stateIfOpen: SharedState? {
        opening.withLock { opening in
            if case .open(let context) = opening { return context.directory.state }
            return nil
        }
    }

    // MARK: Statistics

    /// This cache's statistics now, with the counters its tiers keep themselves.
    var currentStatistics: CacheStatistics {
        var current = statistics.withLock { $0 }
        for tier in tiers { tier.addCounters(to: &current) }
        return current
    }

    /// Updates this cache's statistics, and adds the change to the directory's shared counters
    /// (SharedState+Counters) when it is open.
    func count(_ update: (inout CacheStatistics) -> Void) {
        count(state: stateIfOpen, update)
    }

    /// `count(_:)` for a caller that holds the open storage's context already: its state file is the one
    /// `stateIfOpen` would return (nil when storage is not open), without taking `opening`'s lock again.
    func count(state: SharedState?, _ update: (inout CacheStatistics) -> Void) {
        let (before, after) = statistics.withLock { statistics in
            let before = statistics
            update(&statistics)
            return (before, statistics)
        }
        state?.add(after, since: before)
    }
}

/// `Policy.storageReopenInterval` in nanoseconds, read once.
private let storageReopenInterval = Policy.storageReopenInterval.nanoseconds

extension Result where Success == StorageContext, Failure == YCache.Error {
    /// The storage for a lookup: the context, or under `.treatAsMiss` nil when it cannot be opened (a
    /// miss); under `.throwError` the error.
    func orMiss(under policy: CacheReadFailurePolicy) throws(YCache.Error) -> StorageContext? {
        switch self {
        case .success(let context): return context
        case .failure(let error):
            if policy == .throwError { throw error }
            return nil
        }
    }
}

/// Whether this process rehearsed its first lookup (`CacheEngine.rehearseFirstLookup`).
private let firstLookupRehearsed = Atomic<Bool>(false)

/// What `CacheEngine.rehearseFirstLookup` made (kept only so that its work is not elided).
private let firstLookupRehearsal = Atomic<Int>(0)

extension CacheEngine {
    /// Once per process, when it first opens a storage directory (`openStorage()`, or a first lookup):
    /// makes what a process's first lookup otherwise makes on its way, the type metadata of the lookup
    /// path's generic types, each instantiation checking a conformance (`EntryKey: Hashable`,
    /// `DataCodec: CacheCodec`, `EntryReadFailure: Error`) by the runtime's scan of every conformance
    /// record, and the CRC32C routine's setup: about 0.6 M instructions of a fresh process's first hit
    /// and 1.1 M of its first miss (Benchmarks/results/2026-12-02-floors.md). A process that opens its
    /// storage before its work (a `make -j` worker, the fresh stampede) then looks up at about a warm
    /// process's cost; one that opens it by its first lookup pays the same work a little earlier. Made
    /// for `DataCodec` (the CLI's and `data(for:)`'s codec); another codec's own types are made at its
    /// first use. Nothing is stored, read or written (scratch tables, a key's expectation computed).
    @inline(never)
    func rehearseFirstLookup(in opened: Result<StorageContext, YCache.Error>) {
        guard case .success = opened else { return }
        let codec = DataCodec()
        let key = EntryKey(key: CacheKey(namespace: "", identity: ""), codecIdentifier: codec.identifier)
        let metadata = key.key.metadata(
            codecIdentifier: key.codecIdentifier, createdAt: 0, expiresAt: nil, byteCount: 0, cost: nil)
        var made = MemoryStore.rehearseInsert(for: key, metadata: metadata) + VerifiedInodes.rehearseInsert()
        var expectations = FixedTable<EntryKey, EntryExpectation>(capacity: 2)
        expectations.insert(EntryExpectation(key: key.key, codecIdentifier: key.codecIdentifier), for: key)
        made += expectations.value(for: key) == nil ? 0 : 1
        made &+= Int(CRC32C.checksum([0]))
        Self.rehearseCodecTypes(DataCodec.self)
        let types: [Any.Type] = [
            Result<StoredEntry, EntryReadFailure>.self, Result<StorageContext, YCache.Error>?.self,
            TierLookup<DataCodec>.self, YCache.Resolved<Data>?.self, (EntryKey?, EntryKey?).self,
            Result<[UInt8]?, SystemCallError>.self, MemoryItem?.self, EntryExpectation?.self,
        ]
        made = types.reduce(made) { $0 &+ ObjectIdentifier($1).hashValue }
        firstLookupRehearsal.store(made, ordering: .relaxed)
    }
}
