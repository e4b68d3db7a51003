// The publish step of every production and of `store`: encode once, publish through the permit, bump the
// epochs of a replaced value (I10), trim when over budget (I9), remember in memory. The local tiers' store:
// storage first (the commit point), then memory under the epochs it left.

import Foundation

/// What the publish step stored.
struct Stored: Sendable {
    /// Nil when the write policy is `.disabled` (nothing encoded, nothing kept).
    let metadata: YCache.Metadata?
    /// The epochs the memory item was stamped with (I10), which a joiner checks.
    let epochs: EpochSnapshot?
    /// For the generation tiers' post-publish work.
    let published: PublishedValue?
}

extension CacheEngine {
    /// `YCache.store`: writes `value` as a production of kind `.store` would publish it (no generation,
    /// no key lock; the value replaces the stored one everywhere, I10).
    func store<Codec: CacheCodec>(_ value: Codec.Value, for key: CacheKey, codec: Codec, options: YCache.Options)
        async throws
    {
        let memoryKey = MemoryKey(key: key, codecIdentifier: codec.identifier)
        let request = request(memoryKey, codec: codec, options: options) { value }
        let storage = options.writePolicy == .memoryAndStorage ? try? storage(for: .write).get() : nil
        let production = Production(engine: self, request: request, flight: nil, kind: .store)
        let stored = try await production.publish(
            Produced(value: value, source: .generated), storage: storage, epochs: nil, permit: .uncoordinated)
        // The value replaces the other tiers' copies too (another host's next miss finds it).
        if let published = stored.published {
            for tier in tiers { await tier.store(request.expectation.identity, published: published, options: options) }
        }
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
            (write, failure) = await writeToStorage(
                content, staged: produced.stored?.staged, storage: storage, epochs: epochs, permit: permit)
            if let failure {
                engine.count { $0.writeFailures += 1 }
                if options.writeFailurePolicy == .throwError {
                    engine.memory.remove(request.memoryKey)
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
        engine.remember(
            MemoryItem(
                value: produced.value, cost: cost, metadata: metadata, slots: write.epochs?.slots,
                stamp: write.epochs?.stamp, entryPath: write.entryPath, entryVersion: write.entryVersion),
            for: request.memoryKey, lastUse: write.publishedAt)
        return Stored(
            metadata: metadata, epochs: write.epochs,
            published: PublishedValue(
                content: content, isStoredLocally: write.entryPath != nil, entry: write.publishedEntry))
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
    }

    /// Publishes `content` in storage through `permit` (consumed on every path), or, for a value no
    /// reader could accept or the budget could never hold, keeps it out of storage (and out of every
    /// process's memory when it replaces a stored value, I10). Returns what the memory item needs, with
    /// the error that stopped the write, if any (a publish may have happened before it).
    private func writeToStorage(
        _ content: EntryContent, staged: StagedEntry?, storage opened: StorageContext?, epochs: EpochSnapshot?,
        permit: consuming WritePermit
    ) async -> (StorageWrite, YCache.Error?) {
        let unwritten = StorageWrite(epochs: epochs)
        let storage: StorageContext
        if let opened {
            storage = opened
        } else {
            switch engine.storage(for: .write) {
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
            // Returned (and kept in memory) but never stored. A store or refresh replaces the value, so the
            // old stored entry must not outlive it in any process (I10).
            guard kind.replaces else { return (unwritten, nil) }
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
        // A replacing write stamps its memory item from just before its publish (I10).
        let slots = SharedState.slots(namespace: request.key.namespace, keyDigest: expectation.keyDigest)
        let beforePublish = storage.directory.state.stamp(slots)
        let outcome: PublishOutcome
        let result: Result<PublishOutcome, SystemCallError>
        if let staged, staged.storage.directory.descriptor == storage.directory.descriptor {
            // The entry file is staged already: renamed into place under the key's lock, which then goes.
            // (Staged in a root since replaced, it is written again from its mapping instead.)
            result = await room.retrying {
                storage.files.publishStaged(
                    staged.relative, descriptor: staged.descriptor, header: staged.header, to: path)
            }
            permit.abandon()
        } else {
            result = await permit.publish(content, to: path, in: storage, room: room)
        }
        switch result {
        case .success(let published): outcome = published
        case .failure(let error):
            return (unwritten, .system(error, path: engine.storagePath, operation: "publishing an entry"))
        }
        var write = StorageWrite(
            epochs: epochs, entryPath: path, entryVersion: EntryVersion(outcome.header),
            publishedAt: outcome.modifiedNanoseconds,
            publishedEntry: PublishedEntry(storage: storage, path: path, header: outcome.header))
        if kind.replaces {
            // The value is replaced: other processes' memory copies go (I10). Our own copy is valid from our
            // bump on, unless a removal ran since before our publish (it may have unlinked what we
            // published): then it is read again.
            do throws(YCache.Error) {
                let after = try storage.directory.state.bumpKey(slots, expecting: beforePublish)
                write.epochs = EpochSnapshot(slots: slots, stamp: after ?? beforePublish)
            } catch {
                return (write, error)
            }
        }
        // Maintenance after the value is stored: a failed trim is counted, never the caller's error.
        if budget.isExceeded(by: storage.directory.state),
            case .failure = await BlockingWork.run({ Maintenance.trimIfNeeded(storage, budget: budget) })
        {
            engine.count { $0.trimFailures += 1 }
        }
        return (write, nil)
    }
}
