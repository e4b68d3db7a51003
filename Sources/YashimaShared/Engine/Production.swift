// One production of a missed entry (a flight's body, or a direct call): storage (I13), the coordination
// decision and the key lock (I5), epochs (I10), the `.underKeyLock` tiers, the commit gate, publish, the
// tiers' after-publish work (I16). Whatever ends it early abandons the key lock. Steps: `run()`.

/// What a production is for.
enum ProductionKind: Sendable {
    /// A lookup that missed: may be answered from storage; a publish adds an entry.
    case lookup
    /// `refresh`: always generates; the publish replaces the value everywhere (I10).
    case refresh
    /// An explicit `store`: no generation, the publish replaces the value everywhere (I10).
    case store

    /// Whether the publish replaces a value other processes may hold (their memory copies must go, I10).
    var replaces: Bool { self != .lookup }
}

/// What a production may publish with: the key's lock (it is the key's one generator across processes),
/// or nothing (uncoordinated: a duplicate generation at worst, never a wrong value, I8).
enum WritePermit: ~Copyable {
    case keyLock(KeyLock)
    case uncoordinated

    /// Publishes `content` at `entry` (consuming the key lock: its lock file is the staging file, I6), or
    /// through a new staging file when uncoordinated.
    consuming func publish(_ content: EntryContent, to entry: EntryPath, in storage: StorageContext) async
        -> Result<PublishOutcome, SystemCallError>
    {
        switch consume self {
        case .keyLock(let lock): return await lock.publish(content, to: entry)
        case .uncoordinated: return await storage.files.publishOffPoolWhenLarge(content, to: entry, through: .newFile)
        }
    }

    /// Ends without publishing (KeyLock.abandon).
    consuming func abandon() {
        switch consume self {
        case .keyLock(let lock): lock.abandon()
        case .uncoordinated: break
        }
    }
}

struct Production<Codec: CacheCodec>: Sendable {
    let engine: CacheEngine
    let request: ProductionRequest<Codec>
    /// The in-process flight this production is the body of; nil for a direct call.
    let flight: Flight?
    let kind: ProductionKind

    /// Runs the steps (storage, coordination, epochs, tiers, commit gate, publish, after-publish; told one
    /// by one in Docs/Internals.md) and hands the result to the flight's callers.
    func run() async -> FlightResult {
        do {
            let storage = try openStorage()
            if kind == .lookup { storage?.directory.state.add(.misses) }  // shared counters, in the verified root
            let permit: WritePermit
            switch try await coordinate(storage) {
            case .found(let result): return result
            case .granted(let granted): permit = granted
            }
            let epochs = engine.epochs(of: request, in: storage)
            let produced: Produced<Codec.Value>
            do {
                guard let value = try await produceValue(storage) else {
                    permit.abandon()
                    return .noValue
                }
                produced = value
            } catch {
                permit.abandon()
                throw error
            }
            guard commitGate() else {
                permit.abandon()
                await produced.afterPublish?(nil)
                return .failure(CancellationError())
            }
            let stored: Stored
            do {
                stored = try await publish(produced, storage: storage, epochs: epochs, permit: permit)
            } catch {
                await produced.afterPublish?(nil)
                throw error
            }
            await produced.afterPublish?(stored.published)
            if produced.source == .remote { discardIfRemoved(stored, storage: storage, epochs: epochs) }
            if produced.sharedGeneration { engine.count { $0.sharedGenerations += 1 } }
            return .value(
                produced.value, stored.metadata, produced.source, sharedAcrossProcesses: produced.sharedGeneration,
                epochs: stored.epochs)
        } catch {
            return .failure(error)
        }
    }

    /// `run()` for a direct call: its value as the caller's result.
    func resolve() async throws -> YCache.Resolved<Codec.Value>? {
        switch await run() {
        case .value(let value, let metadata, let source, let shared, _):
            guard let value = value as? Codec.Value else { throw YCache.Error.valueTypeMismatch }
            return YCache.Resolved(value: value, origin: source, metadata: metadata, wasSharedGeneration: shared)
        case .noValue: return nil
        case .failure(let error): throw error
        }
    }

    // MARK: 1. Storage

    /// The storage this production reads and writes, its root checked now (I13): the lock file and the
    /// publish below are writes, and they use this context without checking again. None for a refresh
    /// whose write policy keeps storage out. A directory that cannot be opened is a miss (nil), unless
    /// `.throwError`.
    private func openStorage() throws(YCache.Error) -> StorageContext? {
        guard kind == .lookup || request.options.writePolicy == .memoryAndStorage else { return nil }
        return try engine.storage(for: .write).orMiss(under: request.options.readFailurePolicy)
    }

    // MARK: 2. Coordination

    /// How the coordination step ended.
    private enum Permission: ~Copyable {
        /// Storage had the entry (another process published it): the production's result.
        case found(FlightResult)
        /// Produce, then publish with this permit.
        case granted(WritePermit)
    }

    /// The one decision whether this production coordinates with other processes (I5): only when the
    /// caller asked for it; when single-flight is not disabled (disabled, every call generates); when the
    /// value goes to storage (otherwise waiters would find nothing there); on a local filesystem (flock
    /// across machines is not trusted); and not for a refresh outside a flight, which is one caller's own
    /// retry after its joined refresh was overtaken by a removal and does not queue behind other processes.
    private func coordinatesAcrossProcesses(_ storage: StorageContext) -> Bool {
        let options = request.options
        return options.crossProcess == .coordinate && options.singleFlightPolicy != .disabled
            && options.writePolicy == .memoryAndStorage && storage.isLocalFilesystem
            && !(kind == .refresh && flight == nil)
    }

    /// Takes the key's lock when the production coordinates (I5), or looks in storage once more when it
    /// does not: the caller missed storage just before the production began, and another process may have
    /// published since. A refresh is never answered from storage.
    private func coordinate(_ storage: StorageContext?) async throws -> Permission {
        guard let storage, coordinatesAcrossProcesses(storage) else {
            if kind == .lookup, let hit = try engine.storageHit(request, in: storage, shared: false) {
                return .found(Self.result(of: hit, sharedAcrossProcesses: false))
            }
            return .granted(.uncoordinated)
        }
        let (engine, request) = (engine, request)
        let lookAgain: (() throws -> StorageHit<Codec.Value>?)? =
            kind == .lookup ? { try engine.storageHit(request, in: storage, shared: true) } : nil
        let lockPath = storage.directory.lockPath(forKeyDigest: request.expectation.keyDigest)
        switch try await KeyLock.acquire(
            lockPath, in: storage.directory, timeout: request.options.crossProcessWaitTimeout, lookAgain: lookAgain)
        {
        case .found(let hit):
            engine.count { $0.sharedGenerations += 1 }
            return .found(Self.result(of: hit.value, sharedAcrossProcesses: true))
        case .acquired(let lock):
            return .granted(.keyLock(lock))
        case .timedOut:
            engine.count { $0.crossProcessTimeouts += 1 }
            return .granted(.uncoordinated)
        case .unavailable:
            engine.count { $0.crossProcessLockFailures += 1 }
            return .granted(.uncoordinated)
        }
    }

    private static func result(of hit: StorageHit<Codec.Value>, sharedAcrossProcesses: Bool) -> FlightResult {
        .value(
            hit.resolution.value, hit.resolution.metadata, .storage, sharedAcrossProcesses: sharedAcrossProcesses,
            epochs: hit.epochs)
    }

    // MARK: 4. Producing

    /// The `.underKeyLock` tiers, outermost first, each able to answer or to ask the ones after it; the
    /// last is the caller's generator (GeneratorTier).
    private func produceValue(_ storage: StorageContext?) async throws -> Produced<Codec.Value>? {
        var next: @Sendable () async throws -> Produced<Codec.Value>? = { nil }  // after the generator: nothing
        var request = request
        if kind == .lookup, request.options.writePolicy == .memoryAndStorage, let storage, storage.isLocalFilesystem {
            request.staging = storage
        }
        for tier in engine.productionTiers.reversed() {
            let (below, request, kind, engine) = (next, request, kind, engine)
            next = { try await tier.produce(request, kind: kind, engine: engine, next: below) }
        }
        return try await next()
    }

    /// A remote value published while a removal of its key ran (I10, I16): the removal deleted the
    /// remote copy and unlinked the local one, and this production, which fetched it before, must not
    /// bring it back. Its entry is unlinked again and its memory copy dropped; the callers of this
    /// production (which began before the removal ended) still get the value.
    private func discardIfRemoved(_ stored: Stored, storage: StorageContext?, epochs: EpochSnapshot?) {
        // The epochs were taken in this storage's state file: compared there, not in a root that replaced it
        // meanwhile (a root re-check switches the engine to it, whose stamps would read as a removal here).
        guard let storage, stored.published?.isStoredLocally == true, !engine.isCurrent(epochs, in: storage) else {
            return
        }
        engine.memory.remove(request.memoryKey)
        let expectation = request.expectation
        _ = try? engine.unlinkStoredEntry(
            at: storage.directory.entryPath(for: expectation.identity), headerSize: expectation.headerSize,
            namespace: request.key.namespace, keyDigest: expectation.keyDigest, in: storage)
    }

    // MARK: 5. The commit gate

    /// Whether the value may be stored: false once every caller of the flight left under
    /// `.cancelWhenNoWaiters` (and, without a flight, when the caller's task was cancelled); true from then
    /// on the flight can no longer be cancelled.
    private func commitGate() -> Bool {
        if let flight { return flight.commit() }
        return !(request.options.singleFlightPolicy == .cancelWhenNoWaiters && Task.isCancelled)
    }
}
