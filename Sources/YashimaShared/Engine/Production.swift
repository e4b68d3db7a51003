// One production of a missed entry, always a flight's body (a direct call's flight has one caller):
// storage (I13), the coordination decision and the key lock (I5, one path: FlightCoordination), epochs
// (I10), the `.underKeyLock` tiers, the commit gate, publish, the tiers' after-publish work (I16).

import Synchronization

/// What a production is for.
enum ProductionKind: Sendable {
    /// A lookup that missed: may be answered from storage; a publish adds an entry.
    case lookup
    /// `refresh`: always generates; the publish replaces the value everywhere (I10).
    case refresh
    /// An explicit `store`: no generation, the publish replaces the value everywhere (I10).
    case store

    /// Whether the publish replaces the stored value (a store, a refresh) rather than adding one where none
    /// is live (a lookup's: first wins, `PublishMode.adding`).
    var replaces: Bool { self != .lookup }

    /// How its publish treats an entry already there.
    var publishMode: PublishMode { replaces ? .replacing : .adding }
}

/// What a production may publish with: the key's lock (it is the key's one generator across processes),
/// or nothing (uncoordinated: a duplicate generation at worst, never a wrong value, I8).
enum WritePermit: ~Copyable {
    case keyLock(KeyLock)
    case uncoordinated

    /// Publishes `content` at `entry` (consuming the key lock: its lock file is the staging file, I6), or
    /// through a new staging file when uncoordinated; on a full disk, once more after `room` made room.
    consuming func publish(
        _ content: EntryContent, to entry: EntryPath, in storage: StorageContext, mode: PublishMode,
        room: RoomForWrite? = nil
    ) async -> Result<PublishOutcome, SystemCallError> {
        switch consume self {
        case .keyLock(let lock): return await lock.publish(content, to: entry, mode: mode, room: room)
        case .uncoordinated:
            let write = {
                await storage.files.publishOffPoolWhenLarge(content, to: entry, through: .newFile, mode: mode)
            }
            return if let room { await room.retrying(write) } else { await write() }
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
    /// The in-process flight this production is the body of (a direct call's has one caller,
    /// `Flight.alone`); nil only for an explicit store, which publishes and coordinates nothing.
    let flight: Flight?
    let kind: ProductionKind

    /// Steps 3 to 7, with the permit the coordination step granted.
    /// - Parameter epochs: The key's epochs (I10), taken once the permit was granted and before any tier
    ///   read a value (`engine.storageTier.epochs(of:in:)`).
    func produce(_ storage: StorageContext?, permit: consuming WritePermit, epochs: EpochSnapshot?) async
        -> FlightResult
    {
        // What the publish would otherwise make first is made beside the generation (issue 25), and is
        // done before this returns: no file work outlives the call.
        engine.rehearseFirstInserts(request)
        let folder =
            request.options.writePolicy == .memoryAndStorage
            ? storage?.directory.prepareFanOut(request.expectation.path.fanOut) : nil
        let result = await generateAndPublish(storage, permit: permit, epochs: epochs)
        await folder?.value
        return result
    }

    /// Steps 4 to 7 (`produce`).
    private func generateAndPublish(
        _ storage: StorageContext?, permit: consuming WritePermit, epochs: EpochSnapshot?
    ) async -> FlightResult {
        do {
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
            // A value stored remotely too is published and stored inside one write window (I10, I16:
            // RemoteWriteWindow), closed once the remote tier holds nothing the local directory replaced.
            let window = RemoteWriteWindow.opened(
                in: storage, slots: request.expectation.slots, identity: request.expectation.identity,
                for: produced.deleteRemote)
            let stored: Stored
            do {
                stored = try await publish(produced, storage: storage, epochs: epochs, permit: permit)
            } catch {
                await produced.afterPublish?(nil)
                await RemoteWriteWindow.close(window, deleteRemote: produced.deleteRemote)
                throw error
            }
            await produced.afterPublish?(stored.published)
            await RemoteWriteWindow.close(window, deleteRemote: produced.deleteRemote)
            if produced.source == .remote, stored.leftForNewerWrite, !Injection.remoteWindowSkip {
                // The slot was written since the fetch (a write whose remote store had not landed yet, a
                // removal): the remote value may be older than storage's, so it is not the answer (I10).
                return try await afterRefusedRemoteValue(storage, epochs: epochs)
            }
            if stored.leftForNewerWrite, let hit = entryLeftInPlace(storage) {
                return Self.result(of: hit, sharedAcrossProcesses: false)
            }
            if produced.source == .remote { discardIfRemoved(stored, storage: storage, epochs: epochs) }
            if produced.sharedGeneration { engine.count { $0.sharedGenerations += 1 } }
            return .value(
                produced.value, stored.metadata, produced.source, sharedAcrossProcesses: produced.sharedGeneration,
                epochs: stored.epochs)
        } catch {
            return .failure(error)
        }
    }

    /// A direct call (no flight of the table: single-flight disabled, a lookup's fallback, a refresh's
    /// own retry): the production as a flight with this one caller, its value as the caller's result.
    @inline(never)
    func resolve() async throws -> YCache.Resolved<Codec.Value>? {
        let production = self
        let result = try await Flight.alone(
            kind: kind == .refresh ? .refresh : .lookup,
            cancelsWhenNoWaiters: request.options.singleFlightPolicy == .cancelWhenNoWaiters,
            entry: request.entryKey
        ) { flight in
            Production(engine: production.engine, request: production.request, flight: flight, kind: production.kind)
                .start(flight)
        }
        switch result {
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
    fileprivate func openStorage() throws(YCache.Error) -> StorageContext? {
        guard kind == .lookup || request.options.writePolicy == .memoryAndStorage else { return nil }
        return try engine.storageTier.context(for: .write).orMiss(under: request.options.readFailurePolicy)
    }

    // MARK: 2. Coordination

    /// The one decision whether this production coordinates with other processes (I5): only when the
    /// caller asked for it; when single-flight is not disabled (disabled, every call generates); when the
    /// value goes to storage (otherwise waiters would find nothing there); on a local filesystem (flock
    /// across machines is not trusted); and not for a refresh outside a flight, which is one caller's own
    /// retry after its joined refresh was overtaken by a removal and does not queue behind other processes.
    fileprivate func coordinatesAcrossProcesses(_ storage: StorageContext) -> Bool {
        let options = request.options
        return options.crossProcess == .coordinate && options.singleFlightPolicy != .disabled
            && options.writePolicy == .memoryAndStorage && storage.isLocalFilesystem
            && !(kind == .refresh && flight?.isAlone != false)
    }

    /// A production that does not coordinate (`coordinatesAcrossProcesses`): a lookup looks in storage
    /// once more (the caller missed it just before the production began, and another process may have
    /// published since; a refresh is never answered from storage), then produces without the key's lock.
    fileprivate func withoutKeyLock(_ storage: StorageContext?) async -> FlightResult {
        do {
            if kind == .lookup, let hit = try engine.storageTier.hit(request, in: storage, shared: false) {
                return Self.result(of: hit, sharedAcrossProcesses: false)
            }
        } catch {
            return .failure(error)
        }
        return await produce(
            storage, permit: .uncoordinated, epochs: engine.storageTier.epochs(of: request, in: storage))
    }

    fileprivate static func result(of hit: StorageHit<Codec.Value>, sharedAcrossProcesses: Bool) -> FlightResult {
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
        if request.options.writePolicy == .memoryAndStorage, let storage {
            request.directory = storage.directory
            if kind == .lookup, storage.isLocalFilesystem { request.staging = storage }
        }
        for tier in engine.productionTiers.reversed() {
            let (below, request, kind, engine) = (next, request, kind, engine)
            next = { try await tier.produce(request, kind: kind, engine: engine, next: below) }
        }
        return try await next()
    }

    /// A lookup whose remote value was refused (`leftForNewerWrite`): storage's entry when there is one
    /// now, else the caller's generator, published locally where no live entry is (its lock was given up
    /// with the refused publish: a duplicate generation at worst, I8). The remote value, older than what
    /// storage had meanwhile, is deleted inside the generation's write window (RemoteWriteWindow), so that
    /// it cannot come back after this value is evicted.
    private func afterRefusedRemoteValue(_ opened: StorageContext?, epochs: EpochSnapshot?) async throws
        -> FlightResult
    {
        // The root the path names now (the production's may have been renamed away meanwhile, I13).
        let storage = opened.map { (try? engine.storageTier.context(for: .write).get()) ?? $0 }
        if let hit = try engine.storageTier.hit(request, in: storage, shared: false) {
            return Self.result(of: hit, sharedAcrossProcesses: false)
        }
        guard let value = try await request.generate() else { return .noValue }
        engine.count { $0.generations += 1 }
        let identity = request.expectation.identity
        var deleteRemote: RemoteTier.Delete?
        if let tier = engine.remoteTier { deleteRemote = { await tier.deleteRemote(identity) } }
        let window = RemoteWriteWindow.opened(
            in: storage, slots: request.expectation.slots, identity: identity, for: deleteRemote)
        let stored: Stored
        do {
            stored = try await publish(
                Produced(value: value, source: .generated), storage: storage,
                epochs: engine.storageTier.epochs(of: request, in: storage), permit: .uncoordinated)
        } catch {
            await RemoteWriteWindow.close(window, deleteRemote: deleteRemote)
            throw error
        }
        if let deleteRemote, await !deleteRemote() { storage?.directory.oweRemoteDelete(identity) }
        await RemoteWriteWindow.close(window, deleteRemote: deleteRemote)
        if stored.leftForNewerWrite, let hit = entryLeftInPlace(storage) {
            return Self.result(of: hit, sharedAcrossProcesses: false)
        }
        return .value(value, stored.metadata, .generated, sharedAcrossProcesses: false, epochs: stored.epochs)
    }

    /// A lookup whose publish found a live entry and left it (first wins): that entry, read now, is the
    /// answer, so this caller agrees with every other process. The entry is not always a newer write: it
    /// may be an older value published again (a remote hit's, fetched by another process while this
    /// generation ran, after the local copy was dropped), and a caller handed its own value would then see
    /// the older one at its next lookup (a stale read, issue 32's soak). Nil when no entry is there now
    /// (removed, expired or unreadable since): the caller keeps its own value, ordered before that entry.
    private func entryLeftInPlace(_ opened: StorageContext?) -> StorageHit<Codec.Value>? {
        guard kind == .lookup, let opened else { return nil }
        // The root the path names now (the production's may have been renamed away meanwhile, I13).
        let storage = (try? engine.storageTier.context(for: .write).get()) ?? opened
        return (try? engine.storageTier.hit(request, in: storage, shared: false)) ?? nil
    }

    /// A remote value published while a removal of its key ran (I10, I16): the removal deleted the
    /// remote copy and unlinked the local one, and this production, which fetched it before, must not
    /// bring it back. Its entry is unlinked again and its memory copy dropped; the callers of this
    /// production (which began before the removal ended) still get the value.
    private func discardIfRemoved(_ stored: Stored, storage: StorageContext?, epochs: EpochSnapshot?) {
        // The publish was refused when the slot was written between the fetch's epochs and its window
        // (`.addingUnlessWrittenSince`). A removal that opened its window after that check and before the
        // publish's window closed shows as a window stamp that matches nothing: then the entry may be
        // back after that removal, and goes again. Compared in this storage's state file, not in a root
        // that replaced it meanwhile.
        guard let storage, stored.published?.isStoredLocally == true, let epochs, let before = stored.beforePublish,
            !(epochs.stamp.matches(before) && stored.epochs?.stamp.isQuiet == true)
        else {
            return
        }
        engine.memoryTier.store.remove(request.entryKey)
        let expectation = request.expectation
        _ = try? engine.unlinkStoredEntry(
            at: storage.directory.entryPath(for: expectation.identity), headerSize: expectation.headerSize,
            namespace: request.key.namespace, keyDigest: expectation.keyDigest, in: storage)
    }

    // MARK: 5. The commit gate

    /// Whether the value may be stored: false once every caller of the flight left under
    /// `.cancelWhenNoWaiters`; true from then on the flight can no longer be cancelled.
    private func commitGate() -> Bool {
        flight?.commit() ?? true
    }
}

// MARK: A lookup flight's production

extension Production {
    /// Starts a flight's production on its first caller's task (FlightTable.join's `start`, or
    /// `Flight.alone`'s): opens storage (I13) and counts a lookup's miss, once; when the production
    /// coordinates across processes, takes the first step of the key's lock (FlightCoordination, the one
    /// way a production takes it). Otherwise, and once the lock is held or given up, the production is a
    /// task of its own (inheriting the caller's task-locals and priority) running the remaining steps.
    @inline(never)
    func start(_ flight: Flight) {
        let storage: StorageContext?
        do { storage = try openStorage() } catch {
            flight.complete(.failure(error))
            return
        }
        if kind == .lookup { storage?.directory.state.add(.misses) }  // shared counters, in the verified root
        guard let storage, coordinatesAcrossProcesses(storage) else {
            let production = self
            flight.setProducer(
                Task.startingOnThisPoolThread { flight.complete(await production.withoutKeyLock(storage)) })
            return
        }
        let coordination = FlightCoordination(
            engine: engine, request: request, storage: storage, flight: flight, kind: kind)
        flight.setStepper { coordination.step($0) }
        coordination.step(nil)
    }
}

/// The coordination step of a flight's production while it is not a task (I5, I8): the key's
/// lock tried without waiting (`KeyLock.step`); while another process holds it, a wait of the process's
/// lock-wait thread whose end makes one of the flight's callers take the next step (Flight.lead), or,
/// for a small entry published meanwhile, completes the flight there (`released`). What a step needs is
/// here, on the heap, so a key waited on holds no task and no production frames.
private final class FlightCoordination<Codec: CacheCodec>: Sendable {
    let engine: CacheEngine
    /// The production's request, on the heap with the rest of the step (a waiting key holds no frame).
    let request: ProductionRequest<Codec>
    let storage: StorageContext
    let flight: Flight
    /// A lookup's (storage may answer it) or a refresh's (never answered from storage).
    let kind: ProductionKind
    let lockPath: LockPath
    /// Monotonic nanoseconds (I8); nil: wait as long as the holder holds the lock.
    let deadline: Int64?
    /// Taken from the first caller's task, as its producer task would have inherited them.
    let observer: (@Sendable (LockPath) -> Void)?
    let recheck: Int64?

    init(
        engine: CacheEngine, request: ProductionRequest<Codec>, storage: StorageContext, flight: Flight,
        kind: ProductionKind
    ) {
        self.engine = engine
        self.kind = kind
        self.request = request
        self.storage = storage
        self.flight = flight
        lockPath = storage.directory.lockPath(forKeyDigest: request.expectation.keyDigest)
        deadline = request.options.crossProcessWaitTimeout.map {
            Syscall.monotonicNanoseconds + max(0, $0.nanoseconds)
        }
        observer = LockWait.observer
        recheck = LockWait.recheckInterval?.nanoseconds
    }

    /// One step: nil for the first (storage was just missed), else why the wait ended.
    func step(_ reason: FlightStep?) {
        let engine = engine
        switch reason {
        case .failed(let error)?:
            flight.complete(.failure(error))
            return
        case .timedOut?:
            engine.count { $0.crossProcessTimeouts += 1 }
            spawn(.uncoordinated)
            return
        case .released?, nil:
            break
        }
        let (request, storage) = (request, storage)
        let lookAgain: (() throws -> StorageHit<Codec.Value>?)? =
            kind == .lookup ? { try engine.storageTier.hit(request, in: storage, shared: true) } : nil
        do {
            switch try KeyLock.step(lockPath, in: storage.directory, afterWait: reason != nil, lookAgain: lookAgain) {
            case .found(let hit):
                engine.count { $0.sharedGenerations += 1 }
                flight.complete(Production<Codec>.result(of: hit.value, sharedAcrossProcesses: true))
            case .acquired(let lock):
                spawn(.keyLock(lock), startingRemoteLookup: kind == .lookup)
            case .unavailable:
                engine.count { $0.crossProcessLockFailures += 1 }
                spawn(.uncoordinated)
            case .busy:
                wait()
            }
        } catch {
            flight.complete(.failure(error))
        }
    }

    /// The production's remaining steps on a task of its own, with `permit`. Holding the key's lock
    /// (`startingRemoteLookup`), the remote tier's first call starts here, after the epochs are taken
    /// (I10), and its round trip overlaps the hop to the task (RemoteTier.startLookup).
    private func spawn(_ permit: consuming WritePermit, startingRemoteLookup: Bool = false) {
        let held = HeldPermit(permit)
        var request = request
        let epochs = engine.storageTier.epochs(of: request, in: storage)
        if startingRemoteLookup { request.remoteLookup = engine.remoteTier?.startLookup(request, storage: storage) }
        let production = Production(engine: engine, request: request, flight: flight, kind: kind)
        let (storage, flight) = (storage, flight)
        flight.setProducer(
            Task.startingOnThisPoolThread {
                flight.complete(await production.produce(storage, permit: held.take(), epochs: epochs))
            })
    }

    /// The holder released the key's lock (published, most likely): on the lock-wait thread, which calls
    /// this, a small entry of a codec of the library's own is read, verified, decoded and remembered here
    /// and completes the flight, so a waiting caller is resumed once, with the value (issue 25: no hop to
    /// a caller's task to take the step first). The same read as the step's look after a wait
    /// (`StorageTier.hit`: I3's validation, epochs taken before the read, I10), bounded so that it
    /// never holds the thread long: only entry files up to `Policy.LockWaiting.wakeReadLimit` bytes, and
    /// only `DataCodec` and `StringCodec`, whose decode is a copy (no caller's code runs on this thread).
    /// Anything else (no entry, a larger one, another codec, a refresh) leads the flight's next step.
    private func released() {
        guard kind == .lookup, !flight.isCancelled, Codec.self == DataCodec.self || Codec.self == StringCodec.self
        else {
            flight.lead(.released)
            return
        }
        let found: StorageHit<Codec.Value>?
        do {
            found = try engine.storageTier.hit(
                request, in: storage, shared: true, limit: Policy.LockWaiting.wakeReadLimit)
        } catch is LeavesCallerExecutor {
            found = nil
        } catch {
            flight.complete(.failure(error))  // as the step would (`.throwError`)
            return
        }
        guard let found else {
            flight.lead(.released)
            return
        }
        engine.count { $0.sharedGenerations += 1 }
        flight.complete(Production<Codec>.result(of: found, sharedAcrossProcesses: true))
    }

    /// Waits for the lock's holder on the lock-wait thread; its end leads the flight's next step.
    private func wait() {
        if let deadline, deadline <= Syscall.monotonicNanoseconds {
            step(.timedOut)
            return
        }
        let watch: LockWatch
        switch LockWatch.current() {
        case .success(let current): watch = current
        case .failure(let error):
            flight.complete(.failure(error))
            return
        }
        let identifier = watch.newIdentifier()
        guard flight.setWait(cancel: { watch.finish(identifier, with: .failure(CancellationError())) }) else { return }
        let flight = flight
        watch.register(
            identifier, path: lockPath, in: storage.directory, deadline: deadline, recheck: recheck,
            checkingCancellation: false,
            resume: { [self] outcome in
                switch outcome {
                case .success(.released): released()
                case .success(.timedOut): flight.lead(.timedOut)
                case .failure(let error): flight.lead(.failed(error))
                }
            }, announcing: observer)
        // Cancelled between `setWait` and the registration: the wait ends here.
        if flight.isCancelled { watch.finish(identifier, with: .failure(CancellationError())) }
        engine.rehearseFirstInserts(request)
    }
}

/// Whether this process has rehearsed its first inserts (`CacheEngine.rehearseFirstInserts`).
private let firstInsertsRehearsed = Atomic<Bool>(false)

extension CacheEngine {
    /// Once per process, on a task of its own beside the first wait for another process's generation or
    /// the first production: makes what the first insert into the memory LRU and into the verified-inode
    /// table makes on its first run in a process (their type metadata: the runtime scans every conformance
    /// record for their keys' `Hashable`). Issue 25: a waiter paid it in the storage hit after the holder's
    /// release (about a fifth of each waiter's wake-up at 64 processes on 2 cores), the holder between its
    /// publish and its return; now both pay it while they wait or generate. A few hundred µs of CPU, once.
    func rehearseFirstInserts<Codec: CacheCodec>(_ request: ProductionRequest<Codec>) {
        guard memoryTier.store.mightKeep(cost: 0), !firstInsertsRehearsed.exchange(true, ordering: .relaxed) else {
            return
        }
        let metadata = request.key.metadata(
            codecIdentifier: request.codec.identifier, createdAt: 0, expiresAt: nil, byteCount: 0, cost: nil)
        let key = request.entryKey
        Task {
            _ = MemoryStore.rehearseInsert(for: key, metadata: metadata) + VerifiedInodes.rehearseInsert()
            Self.rehearseCodecTypes(Codec.self)
        }
    }

    /// Makes the metadata of the generic types a wake-up (FlightCoordination's read on the lock-wait
    /// thread, the waiting caller's settle) instantiates for the caller's codec, which a process otherwise
    /// makes after the holder's release, on its first wake-up: each checks `Codec: CacheCodec` (the
    /// runtime's scan of every conformance record) the first time (issue 25).
    @inline(never)
    static func rehearseCodecTypes<Codec: CacheCodec>(_: Codec.Type) {
        let types: [Any.Type] = [
            ProductionRequest<Codec>.self, StorageHit<Codec.Value>?.self, YCache.Resolved<Codec.Value>.self,
            PoolLookup<Codec>.Outcome.self, KeyLock.Found<StorageHit<Codec.Value>>.self,
        ]
        // Kept (an atomic store): metadata accessors have no visible effect, and would otherwise be elided.
        rehearsedTypes.store(types.reduce(0) { $0 &+ ObjectIdentifier($1).hashValue }, ordering: .relaxed)
    }
}

/// What `CacheEngine.rehearseCodecTypes` made (kept only so that its work is not elided).
private let rehearsedTypes = Atomic<Int>(0)

/// A write permit handed to the production's task (a noncopyable value cannot be captured).
private final class HeldPermit: Sendable {
    private let permit: Mutex<WritePermit?>

    init(_ permit: consuming WritePermit) { self.permit = Mutex(permit) }

    /// The permit; `.uncoordinated` if it was taken already (never: each is taken once).
    func take() -> WritePermit {
        permit.withLock { held in
            guard let permit = held.take() else { return WritePermit.uncoordinated }
            return permit
        }
    }
}
