// The engine behind `YCache`: the tiers in the order a lookup walks them (Tier.swift; memory and storage
// own their state: MemoryTier.swift, StorageTier.swift), the flight table, statistics. No I/O of its own
// beyond Storage and Coordination; never blocks the cooperative pool (BlockingWork, LockWait).

import Foundation
import Synchronization

final class CacheEngine: Sendable {
    /// The storage budget this instance enforces when it writes (I9).
    let budget: StorageBudget
    /// The free space this instance leaves on the filesystem, and its readings of it (SpacePressure).
    let freeSpace: FreeSpaceWatch
    let flights = FlightTable()
    /// What this cache counts itself (memory, storage, generations, failures), shared with its tiers.
    let counters: CacheCounters
    let expectations = ExpectationCache()
    /// This process's memory (L1): the memory store, its hits and what it remembers (MemoryTier.swift).
    /// The first of `tiers`; a lookup asks it by this typed reference (`walk`).
    let memoryTier: MemoryTier
    /// The storage directory (L2): the one way to its context, its hits, epochs and discards (StorageTier.swift).
    /// The second of `tiers`; a lookup asks it after memory by this typed reference (`walk`).
    let storageTier: StorageTier
    /// The tiers, in the order a lookup walks them (Tier.swift): the `.beforeFlight` ones (memory, storage,
    /// which `walk` asks through the two properties above, in this order), then the `.underKeyLock` ones.
    let tiers: [any CacheTier]
    /// The `.underKeyLock` tiers (remote, the generator), which a production asks, outermost first.
    let productionTiers: [any CacheTier]
    /// The remote tier, if any (also in `tiers`): a lookup flight's production starts its first call early.
    let remoteTier: RemoteTier?

    init(
        storagePath: String, memoryMaximumCost: Int?, memoryMaximumEntryCount: Int?, budget: StorageBudget,
        freeSpaceFloor: YCache.FreeSpaceFloor? = nil, sharing: StorageSharingMode, allowNetworkFilesystem: Bool,
        remote: RemoteStores? = nil
    ) {
        self.budget = budget
        freeSpace = FreeSpaceWatch(floor: freeSpaceFloor)
        let counters = CacheCounters()
        self.counters = counters
        let memory = MemoryTier(MemoryStore(maximumCost: memoryMaximumCost, maximumCount: memoryMaximumEntryCount))
        memoryTier = memory
        let storageTier = StorageTier(
            path: storagePath, sharing: sharing, allowNetworkFilesystem: allowNetworkFilesystem, memory: memory,
            counters: counters)
        self.storageTier = storageTier
        // Adding a tier is a type and a line here.
        let remoteTier = remote.map(RemoteTier.init)
        self.remoteTier = remoteTier
        let tiers: [(any CacheTier)?] = [memory, storageTier, remoteTier, GeneratorTier()]
        self.tiers = tiers.compactMap { $0 }
        productionTiers = self.tiers.filter { $0.place == .underKeyLock }
        // The lookup walks `tiers` as listed: the `.beforeFlight` prefix is exactly memory then storage
        // (`walk` asks them by their typed properties, with no existential copied or retained per tier),
        // and every tier after it is `.underKeyLock` (`productionTiers`, in the same order).
        precondition(
            self.tiers.count == 2 + productionTiers.count && (self.tiers[0] as? MemoryTier) === memory
                && (self.tiers[1] as? StorageTier) === storageTier
                && self.tiers.map(\.place) == [.beforeFlight, .beforeFlight] + productionTiers.map(\.place))
        // I17: the remote tier's breakers and counters live in the directory's state file once it is open.
        let board = DirectoryMachineBoard(state: { [weak storageTier] in storageTier?.stateIfOpen })
        // (No cast over the tiers: casting a struct to a class makes the runtime search every protocol
        // conformance for a bridging one, a cost every process start-up would pay.)
        remoteTier?.attach(board)
    }

    /// The storage directory's path, as configured (the storage tier's).
    var storagePath: String { storageTier.path }

    // MARK: Statistics

    /// This cache's statistics now, with the counters its tiers keep themselves.
    var currentStatistics: CacheStatistics {
        var current = counters.current
        for tier in tiers { tier.addCounters(to: &current) }
        return current
    }

    /// Updates this cache's statistics, and adds the change to the directory's shared counters
    /// (SharedState+Counters) when it is open.
    func count(_ update: (inout CacheStatistics) -> Void) {
        counters.count(state: storageTier.stateIfOpen, update)
    }

    /// `count(_:)` for a caller that holds the open storage's context already: its state file is the one
    /// `stateIfOpen` would return (nil when storage is not open), without taking the opening lock again.
    func count(state: SharedState?, _ update: (inout CacheStatistics) -> Void) {
        counters.count(state: state, update)
    }
}

/// What one cache counts itself (`CacheStatistics` but the remote tier's own counters), shared by the
/// engine and its tiers; each change is added to the directory's shared counters when given its state.
final class CacheCounters: Sendable {
    private let statistics = Mutex(CacheStatistics())

    /// The counters now.
    var current: CacheStatistics { statistics.withLock { $0 } }

    /// Updates the counters, and adds the change to `state`'s shared counters (SharedState+Counters)
    /// when given one (nil: storage is not open).
    func count(state: SharedState?, _ update: (inout CacheStatistics) -> Void) {
        let (before, after) = statistics.withLock { statistics in
            let before = statistics
            update(&statistics)
            return (before, statistics)
        }
        state?.add(after, since: before)
    }

    /// Updates this process's counters only, never the shared ones (whose mirror takes the state's locks):
    /// for a caller that may hold those locks, such as a repair while opening storage.
    func countLocally(_ update: (inout CacheStatistics) -> Void) {
        statistics.withLock { update(&$0) }
    }
}

/// What `CacheEngine.rehearseFirstLookup` made (kept only so that its work is not elided).
private let firstLookupRehearsal = Atomic<Int>(0)

extension CacheEngine {
    /// Once per process, when `YCache.openStorage()` first opens (or finds open) a storage directory
    /// (`StorageTier.contextPreparingFirstLookup`): makes what a process's first lookup otherwise makes on
    /// its way, the type metadata of the lookup path's generic types, each instantiation checking a
    /// conformance (`EntryKey: Hashable`, `DataCodec: CacheCodec`, `EntryReadFailure: Error`) by the
    /// runtime's scan of every conformance record, and the CRC32C routine's setup. A process that opens its
    /// storage before its work (a `make -j` worker, the fresh stampede) then looks up at about a warm
    /// process's cost. Not done when a lookup opens the directory: measured whole-process (2026-12-07), it
    /// costs 1.06 M instructions and takes 0.68 M off the first hit, since the first lookup's call sites
    /// still make their own types from their mangled names. Made for `DataCodec` (the CLI's and
    /// `data(for:)`'s codec); another codec's own types are made at its first use. Nothing is stored, read
    /// or written (scratch tables, a key's expectation computed).
    @inline(never)
    static func rehearseFirstLookup(in opened: Result<StorageContext, YCache.Error>) {
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
