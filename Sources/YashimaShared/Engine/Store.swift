// The publish step of every production and of `store`: encode once, publish through the permit (a store or
// refresh replaces, a lookup adds where no live entry is: first wins), trim when over budget (I9), remember
// in memory under the epochs the publish's write window left (I10). Storage first (the commit point).

import Foundation

/// What the publish step stored.
struct Stored: Sendable {
    /// Nil when the write policy is `.disabled` (nothing encoded, nothing kept).
    let metadata: YCache.Metadata?
    /// The epochs the memory item was stamped with (I10), which a joiner checks.
    let epochs: EpochSnapshot?
    /// For the generation tiers' post-publish work.
    let published: PublishedValue?
    /// The key's epochs just before the publish's write window opened; nil when nothing was published.
    var beforePublish: SharedState.Stamp?
    /// An `.adding` publish left a live entry in place, or a remote value was refused because its slot was
    /// written since its fetch: a newer write of the key may be in storage.
    var leftForNewerWrite = false
}

extension CacheEngine {
    /// `YCache.store`: writes `value` as a production of kind `.store` would publish it (no generation,
    /// no key lock; the value replaces the stored one everywhere, I10).
    func store<Codec: CacheCodec>(_ value: Codec.Value, for key: CacheKey, codec: Codec, options: YCache.Options)
        async throws
    {
        let entryKey = EntryKey(key: key, codecIdentifier: codec.identifier)
        let request = request(entryKey, codec: codec, options: options) { value }
        let storage = options.writePolicy == .memoryAndStorage ? try? storageTier.context(for: .write).get() : nil
        let production = Production(engine: self, request: request, flight: nil, kind: .store)
        // Published and stored remotely inside one write window (I10, I16: RemoteWriteWindow).
        let identity = request.expectation.identity
        var deleteRemote: RemoteTier.Delete?
        if let tier = remoteTier, tier.storesExplicitly(options) {
            deleteRemote = { await tier.deleteRemote(identity) }
        }
        let window = RemoteWriteWindow.opened(
            in: storage, slots: request.expectation.slots, identity: identity, for: deleteRemote)
        let stored: Stored
        do {
            stored = try await production.publish(
                Produced(value: value, source: .generated), storage: storage, epochs: nil, permit: .uncoordinated)
        } catch {
            await RemoteWriteWindow.close(window, deleteRemote: deleteRemote)
            throw error
        }
        // The value replaces the other tiers' copies too (another host's next miss finds it).
        if let published = stored.published {
            for tier in tiers { await tier.store(identity, published: published, options: options) }
        }
        await RemoteWriteWindow.close(window, deleteRemote: deleteRemote)
    }
}

extension Production {
    /// Step 6: writes `produced` by the options' write policy and remembers it in memory; consumes
    /// `permit` whatever happens.
    /// - Parameters:
    ///   - storage: The storage opened (and verified, I13) for this write; when nil, opened once more.
    ///   - epochs: The key's epochs from before the value was produced (I10).
    func publish(
        _ produced: Produced<Codec.Value>, storage: StorageContext?, epochs: EpochSnapshot?,
        permit: consuming WritePermit
    ) async throws -> Stored {
        let options = request.options
        guard options.writePolicy != .disabled else {
            permit.abandon()
            return Stored(
                metadata: nil, epochs: epochs, published: PublishedValue(content: nil, isStoredLocally: false))
        }
        let now = Syscall.realtimeNanoseconds
        let (content, expiresAt): (EntryContent, Int64?)
        do {
            (content, expiresAt) = try encode(produced, now: now)
        } catch {
            permit.abandon()
            throw error  // the codec's own error, unwrapped: nothing is written
        }
        var write = StorageWrite(epochs: epochs)
        if options.writePolicy == .memoryAndStorage {
            let failure: YCache.Error?
            // A remote value is published only while no write of its slot came since its production's epochs
            // (a removal meanwhile deleted it everywhere, I16).
            var mode = kind.publishMode
            if produced.source == .remote, case .adding = mode, let epochs {
                mode = .addingUnlessWrittenSince(epochs.stamp)
            } else if kind == .lookup, options.singleFlightPolicy == .disabled, produced.source == .generated {
                // An independent generation (`.disabled`): its caller gets its own value, so the value must
                // be the key's latest write, never one left behind another entry (I10).
                mode = .replacing
            }
            (write, failure) = await writeToStorage(
                content, staged: produced.stored?.staged, storage: storage, epochs: epochs, mode: mode, permit: permit)
            if let failure {
                engine.count { $0.writeFailures += 1 }
                if options.writeFailurePolicy == .throwError {
                    engine.memoryTier.store.remove(request.entryKey)
                    throw failure
                }
            }
        } else {
            permit.abandon()
        }
        let cost =
            options.cost?.charged
            ?? request.codec.memoryCost(of: produced.value, encodedByteCount: content.payload.count)
        let metadata = request.key.metadata(
            codecIdentifier: request.codec.identifier, createdAt: content.createdAt, expiresAt: expiresAt,
            byteCount: content.payload.count, cost: cost, keyDigest: request.expectation.keyDigest)
        guard !write.leftForLiveEntry else {
            // Another writer's entry, published after this lookup missed, stayed (first wins): the value is
            // kept in no memory and no remote tier. The production answers with that entry instead
            // (`Production.entryLeftInPlace`); only when it is gone again is the value its caller's alone,
            // and a joiner looks again (epochs that match nothing).
            return Stored(
                metadata: metadata, epochs: write.epochs,
                published: PublishedValue(content: nil, isStoredLocally: false), beforePublish: write.beforePublish,
                leftForNewerWrite: true)
        }
        engine.memoryTier.remember(
            MemoryItem(
                value: produced.value, cost: cost, metadata: metadata, slots: write.epochs?.slots,
                stamp: write.epochs?.stamp, entryPath: write.entryPath, entryVersion: write.entryVersion),
            for: request.entryKey, lastUse: write.publishedAt)
        return Stored(
            metadata: metadata, epochs: write.epochs,
            published: PublishedValue(
                content: content, isStoredLocally: write.entryPath != nil, entry: write.publishedEntry),
            beforePublish: write.beforePublish)
    }

    /// The entry to publish, and its expiry (nil: never): the bytes a tier already had, or the value
    /// encoded now.
    private func encode(_ produced: Produced<Codec.Value>, now: Int64) throws -> (EntryContent, Int64?) {
        let (payload, createdAt, expiresAt): (Data, Int64, Int64?)
        if let stored = produced.stored {
            (payload, createdAt, expiresAt) = (stored.payload, stored.createdAt, stored.expiresAt)
        } else {
            let encoded = try request.codec.encode(produced.value)
            (payload, createdAt, expiresAt) = (encoded, now, request.options.expiry.expiresAtNanoseconds(now: now))
        }
        let content = EntryContent(
            payload: payload, expectation: request.expectation, codecIdentifier: request.codec.identifier,
            createdAt: createdAt, expiresAt: expiresAt ?? 0)
        return (content, expiresAt)
    }

    /// What a storage write left for the memory item.
    private struct StorageWrite {
        var epochs: EpochSnapshot?
        var entryPath: EntryPath?
        var entryVersion: EntryVersion?
        /// The mtime the publish gave the entry (its first use, I11).
        var publishedAt: Int64?
        /// The file published.
        var publishedEntry: PublishedEntry?
        /// The key's epochs just before the publish's write window opened.
        var beforePublish: SharedState.Stamp?
        /// An `.adding` publish found a live entry and left it: nothing of this value was stored.
        var leftForLiveEntry = false
    }

    /// Publishes `content` in storage through `permit` (consumed on every path), or, for a value no
    /// reader could accept or the budget could never hold, keeps it out of storage (and out of every
    /// process's memory when it replaces a stored value, I10). Returns what the memory item needs, with
    /// the error that stopped the write, if any (a publish may have happened before it).
    private func writeToStorage(
        _ content: EntryContent, staged: StagedEntry?, storage opened: StorageContext?, epochs: EpochSnapshot?,
        mode: PublishMode, permit: consuming WritePermit
    ) async -> (StorageWrite, YCache.Error?) {
        let unwritten = StorageWrite(epochs: epochs)
        let storage: StorageContext
        if let opened,
            opened.directory.isStillNamedByPath(
                checkedWithin: publishRootRecheckAge, now: Syscall.monotonicNanoseconds)
        {
            storage = opened
        } else {
            // Opened long ago and renamed away since (I13): the key's lock there is given up, and the value
            // goes to the root the path names now, uncoordinated (a duplicate generation at worst, I8).
            if opened != nil {
                permit.abandon()
                permit = .uncoordinated
            }
            switch engine.storageTier.context(for: .write) {
            case .success(let opened): storage = opened
            case .failure(let error):
                permit.abandon()
                return (unwritten, error)
            }
        }
        let expectation = request.expectation
        let path = expectation.path
        let charged = EntryFile.chargedBytes(
            payloadByteCount: content.payload.count, keyByteCount: expectation.keyBytes.count,
            codecByteCount: expectation.codecBytes.count)
        let budget = engine.budget
        let tooLargeForBudget =
            (budget.payloadBytes.map { Int64(content.payload.count) > $0 } ?? false)
            || (budget.allocatedBytes.map { charged > $0 } ?? false)
        // A key or codec identifier no reader accepts (EntryFormat) would only be read back as corrupt.
        let unreadable =
            expectation.keyBytes.count > EntryFormat.maximumKeyByteCount
            || expectation.codecBytes.count > EntryFormat.maximumCodecByteCount
        if tooLargeForBudget || unreadable {
            permit.abandon()
            // Returned (and kept in memory) but never stored. A replacing write (a store, a refresh, an
            // independent generation) replaces the value, so the old stored entry must not outlive it in any
            // process (I10).
            guard case .replacing = mode else { return (unwritten, nil) }
            do throws(YCache.Error) {
                let (removedEpochs, _) = try engine.unlinkStoredEntry(
                    at: path, headerSize: expectation.headerSize, namespace: request.key.namespace,
                    keyDigest: expectation.keyDigest, in: storage)
                return (StorageWrite(epochs: removedEpochs), nil)
            } catch {
                return (unwritten, error)
            }
        }
        // Space pressure (Coordination/SpacePressure): below the free-space floor, trim first; a publish that
        // finds the disk full (ENOSPC, EDQUOT) makes room from the directory's own entries and writes once more.
        let engine = engine
        let room = RoomForWrite(
            storage: storage, charged: charged, watch: engine.freeSpace,
            onTrim: { engine.count(state: storage.directory.state) { $0.pressureTrims += 1 } })
        await room.keepFloor()
        let result: Result<PublishOutcome, SystemCallError>
        if let staged, staged.storage.directory.descriptor == storage.directory.descriptor {
            // The entry file is staged already: renamed into place under the key's lock, which then goes.
            // (Staged in a root since replaced, it is written again from its bytes instead.)
            result = await room.retrying {
                storage.files.publishStaged(
                    staged.relative, descriptor: staged.descriptor, header: staged.header, to: path,
                    expectation: expectation, mode: mode)
            }
            permit.abandon()
        } else {
            result = await permit.publish(content, to: path, in: storage, mode: mode, room: room)
        }
        let outcome: PublishOutcome
        switch result {
        case .success(let published): outcome = published
        case .failure(let error):
            return (unwritten, .system(error, path: engine.storagePath, operation: "publishing an entry"))
        }
        // The memory item is valid from the publish's write window on (I10), unless another write of the
        // slot came between (then it matches nothing and is read again at its next lookup).
        let stamped = EpochSnapshot(slots: expectation.slots, stamp: outcome.stamp ?? .unavailable)
        guard outcome.placed else {
            return (StorageWrite(epochs: stamped, beforePublish: outcome.before, leftForLiveEntry: true), nil)
        }
        let write = StorageWrite(
            epochs: stamped, entryPath: path, entryVersion: EntryVersion(outcome.header),
            publishedAt: outcome.modifiedNanoseconds,
            publishedEntry: PublishedEntry(storage: storage, path: path, header: outcome.header),
            beforePublish: outcome.before)
        // Maintenance after the value is stored: a failed trim is counted, never the caller's error.
        if budget.isExceeded(by: storage.directory.state),
            case .failure = await BlockingWork.run({ Maintenance.trimIfNeeded(storage, budget: budget) })
        {
            engine.count { $0.trimFailures += 1 }
        }
        return (write, nil)
    }
}

/// `Policy.publishRootRecheckAge` in nanoseconds, read once.
private let publishRootRecheckAge = Policy.publishRootRecheckAge.nanoseconds
