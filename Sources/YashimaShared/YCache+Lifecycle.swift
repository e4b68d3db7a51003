// The public facade, continued: writing (`store`, `putInMemory`), inspecting (`metadata`, `contains`,
// `entries`, `storageUsage`), removing and trimming, wired to CacheEngine (Engine/Store.swift,
// Engine/Lifecycle.swift). Scans, removals of many entries and trims run off the cooperative pool
// (BlockingWork). No I/O, locking or path handling happens here.

import Foundation

extension YCache {
    // MARK: Writing

    /// Stores `value`, replacing any cached value, per `options.writePolicy`.
    ///
    /// - `.memoryAndStorage` (the default): encodes the value, publishes it to storage, invalidates other
    ///   processes' memory copies of the key (I10), trims if usage goes over the budget, then puts it in
    ///   memory. A value larger than the whole storage budget, a key over 64 MiB of canonical bytes or a
    ///   codec identifier over 4 KiB is put in this process's memory only; the key's old stored entry is
    ///   removed, for every process.
    /// - `.memoryOnly`: encodes the value (for its metadata) and keeps it in this process's memory only;
    ///   storage and other processes are untouched.
    /// - `.disabled`: nothing is stored.
    ///
    /// When the codec cannot encode the value, its error is thrown and nothing changes, whatever the
    /// policy. When the storage write fails, `writeFailurePolicy: .throwError` throws and removes this
    /// process's memory copy of the key; `.bestEffort` keeps the value in memory and returns normally.
    /// `options.expiry` and `options.cost` apply; the other policies are ignored.
    /// - Parameters:
    ///   - value: The value to store.
    ///   - key: What the value depends on.
    ///   - codec: How the value is encoded.
    ///   - options: Write and write-failure policies, expiry and cost.
    /// - Throws: The codec's own error when it cannot encode the value; under
    ///   `writeFailurePolicy: .throwError` only: `YCache.Error.storageFull`, `.ioFailure`, or a storage-open
    ///   error (`.storageUnavailable`, `.insecureStorageDirectory`, `.networkFilesystem`,
    ///   `.unsupportedLayout`).
    public func store<Codec: CacheCodec>(
        _ value: Codec.Value, for key: CacheKey, codec: Codec, options: Options = .default
    ) async throws {
        try await engine.store(value, for: key, codec: codec, options: options)
    }

    /// Puts `value` in this process's memory only; storage and other processes never see it.
    ///
    /// The value is encoded (as in Yashima) so that its metadata has its byte count; nothing is written.
    /// When the storage directory can be opened, the item records the key's removal epochs, so a later
    /// `remove` or `removeAll` by any process drops it. It is not kept when its cost exceeds the memory
    /// budget.
    /// - Parameters:
    ///   - value: The value to keep.
    ///   - key: What the value depends on.
    ///   - codec: The codec whose lookups should find it (its identifier is part of the memory key).
    ///   - cost: Its cost; `nil` asks the codec (`memoryCost(of:encodedByteCount:)`).
    ///   - expiry: When it stops being returned.
    /// - Throws: The codec's own error when it cannot encode the value (nothing is kept).
    public func putInMemory<Codec: CacheCodec>(
        _ value: Codec.Value, for key: CacheKey, codec: Codec, cost: CacheCost? = nil, expiry: CacheExpiry = .never
    ) async throws {
        try engine.putInMemory(value, for: key, codec: codec, cost: cost, expiry: expiry)
    }

    // MARK: Inspecting

    /// The stored value's metadata (from memory if it is not in storage), without decoding the payload.
    /// Does not count as a use for LRU, and stores or removes nothing.
    ///
    /// Only the entry's header and identity are checked, not its payload checksum. When the storage
    /// directory cannot be opened, only memory is consulted.
    /// - Parameters:
    ///   - key: What the value depends on.
    ///   - codec: The codec the value was stored with.
    /// - Returns: The metadata, or `nil` when nothing unexpired is cached for `key` and `codec`.
    /// - Throws: `YCache.Error.ioFailure` (or `.storageFull`) when reading the entry header fails for a
    ///   reason other than a missing or corrupt file.
    public func metadata<Codec: CacheCodec>(for key: CacheKey, codec: Codec) async throws -> Metadata? {
        try engine.metadata(for: key, codec: codec)
    }

    /// Whether a value is cached in memory or storage. Does not count as a use for LRU.
    /// - Parameters:
    ///   - key: What the value depends on.
    ///   - codec: The codec the value was stored with.
    /// - Returns: `metadata(for:codec:) != nil`.
    /// - Throws: The errors of `metadata(for:codec:)`.
    public func contains<Codec: CacheCodec>(for key: CacheKey, codec: Codec) async throws -> Bool {
        try await metadata(for: key, codec: codec) != nil
    }

    /// The entries in storage, optionally only those of one namespace, with their keys and metadata
    /// (payloads are not read). Expired and unreadable entries are left out, and so are values kept only
    /// in memory. Scans the whole directory off the cooperative pool; stores nothing.
    /// - Parameter namespace: Only entries whose key has this namespace; `nil` for all.
    /// - Returns: One `StoredEntryInfo` per entry, in no particular order.
    /// - Throws: A storage-open error: `YCache.Error.storageUnavailable`, `.insecureStorageDirectory`,
    ///   `.networkFilesystem`, `.unsupportedLayout` or `.storageFull`.
    public func entries(in namespace: String? = nil) async throws -> [StoredEntryInfo] {
        _ = try engine.storageTier.context(for: .write).get()  // reported (a miss would hide it); checked now (I13)
        let engine = self.engine
        return await BlockingWork.run { engine.entries(inNamespace: namespace) }
    }

    /// Payload bytes, allocated bytes and entry count of the storage directory, counted now (all
    /// processes' entries).
    ///
    /// Scans the directory, reading each entry's fixed header (not its payload), and stores the counts in
    /// the shared usage counters (I9).
    /// - Returns: The payload bytes (`byteCount`, what the budget counts), the allocated bytes
    ///   (`allocatedByteCount`, `st_blocks × 512`), the number of entry files and the budgets.
    /// - Throws: A storage-open error: `YCache.Error.storageUnavailable`, `.insecureStorageDirectory`,
    ///   `.networkFilesystem`, `.unsupportedLayout` or `.storageFull`.
    public func storageUsage() async throws -> StorageUsage {
        let engine = self.engine
        return usage(try await BlockingWork.run { Result { () throws(Error) in try engine.storageUsage() } }.get())
    }

    private func usage(_ counted: CountedUsage) -> StorageUsage {
        StorageUsage(
            byteCount: Int(counted.payloadBytes), entryCount: counted.entries,
            maximumByteCount: configuration.storageMaximumByteCount, allocatedByteCount: counted.allocatedBytes,
            maximumAllocatedByteCount: configuration.storageMaximumAllocatedByteCount)
    }

    // MARK: Removing

    /// Removes the entry for `key` and `codec` from memory and storage. Every process's next lookup misses.
    ///
    /// This process's memory copy is removed first; then the key's removal epoch is bumped (invalidating
    /// other processes' memory copies) and the entry file unlinked.
    ///
    /// With a remote tier (`Configuration.remote`, not read-only) the remote value is deleted first, so
    /// that no process of this host fetches it again; other hosts' storage directories keep their copies
    /// (each host removes its own). When the remote delete cannot be done (the server is down, hung or
    /// refuses it, or its breaker is open), the local copies are removed all the same and
    /// `YCache.Error.remoteRemovalIncomplete` is thrown: the remote copy may survive, and the next miss of
    /// any host (this one included) may fetch it again. A read-only remote tier never deletes: its removals
    /// are local, and do not throw for it.
    /// - Parameters:
    ///   - key: The entry's key.
    ///   - codec: The codec it was stored with.
    /// - Returns: True when this process's memory held the value, an entry file was unlinked, or a remote
    ///   value was deleted.
    /// - Throws: A storage-open error (`YCache.Error.storageUnavailable`, `.insecureStorageDirectory`,
    ///   `.networkFilesystem`, `.unsupportedLayout`, `.storageFull`) when the directory cannot be used (the
    ///   memory copy is removed anyway), `.ioFailure` when the entry file cannot be unlinked, or
    ///   `.remoteRemovalIncomplete` when only the remote delete failed (everything local is removed).
    @discardableResult
    public func remove<Codec: CacheCodec>(for key: CacheKey, codec: Codec) async throws -> Bool {
        try await engine.remove(key: key, codecIdentifier: codec.identifier)
    }

    /// Removes every entry of `namespace`, in memory and storage. Every process's next lookup misses.
    ///
    /// Removes the namespace's values from this process's memory, bumps the namespace's removal epoch
    /// (invalidating other processes' memory copies), then scans the directory and unlinks each entry
    /// whose key has this namespace; an entry that cannot be unlinked is skipped silently.
    ///
    /// Local only: a remote tier's values stay (and a later miss here may fetch them again). Removing a
    /// namespace remotely would mean scanning a server other hosts share, which is slow and dangerous;
    /// remove single keys with `remove(for:codec:)`, or change the namespace (or the remote key prefix).
    /// - Parameter namespace: The namespace to empty.
    /// - Throws: A storage-open error (`YCache.Error.storageUnavailable`, `.insecureStorageDirectory`,
    ///   `.networkFilesystem`, `.unsupportedLayout`, `.storageFull`) when the directory cannot be used (the
    ///   memory copies are removed anyway).
    public func removeAll(in namespace: String) async throws {
        let engine = self.engine
        _ = try await BlockingWork.run { () -> Result<Int, YCache.Error> in
            Result { () throws(YCache.Error) in try engine.removeAll(inNamespace: namespace) }
        }.get()
    }

    /// Removes every entry, in memory and storage. Every process's next lookup misses.
    ///
    /// Clears this process's memory, bumps the global removal epoch (invalidating other processes'
    /// memory copies), then unlinks every entry file; one that cannot be unlinked is skipped silently.
    ///
    /// Local only, as `removeAll(in:)`, unless the remote tier was made with
    /// `YCache.Remote.Options.removeAllRemotely`: then every remote value of the cache (its key prefix, on
    /// every Redis server) is deleted first, so no host refills its storage from it. A server that cannot
    /// be reached keeps its values: the local entries are removed all the same, then
    /// `YCache.Error.remoteRemovalIncomplete` is thrown. An HTTP server cannot list its values and keeps
    /// them (not an error).
    /// - Throws: A storage-open error (`YCache.Error.storageUnavailable`, `.insecureStorageDirectory`,
    ///   `.networkFilesystem`, `.unsupportedLayout`, `.storageFull`) when the directory cannot be used
    ///   (memory is cleared anyway), or `.remoteRemovalIncomplete` when only the remote deletes failed.
    public func removeAll() async throws {
        let engine = self.engine
        var remoteFailure: YCache.Error?
        for tier in engine.tiers.reversed() {  // I16: the remote before the local
            do throws(YCache.Error) {
                try await tier.removeAll()
            } catch {
                remoteFailure = remoteFailure ?? error
            }
        }
        _ = try await BlockingWork.run { () -> Result<Int, YCache.Error> in
            Result { () throws(YCache.Error) in try engine.removeAll(inNamespace: nil) }
        }.get()
        if let remoteFailure { throw remoteFailure }
    }

    /// Removes expired entries from storage and returns how many.
    ///
    /// Scans every entry's header. Expired values in memory are not touched here (they are never
    /// returned, and are dropped on their next lookup).
    /// - Returns: The number of entry files unlinked.
    /// - Throws: A storage-open error: `YCache.Error.storageUnavailable`, `.insecureStorageDirectory`,
    ///   `.networkFilesystem`, `.unsupportedLayout` or `.storageFull`.
    @discardableResult
    public func removeExpired() async throws -> Int {
        _ = try engine.storageTier.context(for: .write).get()  // reported, as by the other removals
        let engine = self.engine
        return await BlockingWork.run { engine.removeExpired() }
    }

    /// Recounts storage usage and trims least-recently-used entries until it is within
    /// `storageMaximumByteCount` (payload bytes) and, when set, `storageMaximumAllocatedByteCount`; also
    /// removes staging debris of killed processes and unused lock files.
    ///
    /// Unlike the trim on the write path (down to 90 % of the budget, at most 4,096 unlinks per pass),
    /// this trims down to the budget itself with no per-pass limit, waiting for another process's trim
    /// to finish first. With no budget (both `nil`) it only sweeps debris: staging files and unheld lock
    /// files older than an hour.
    /// - Returns: The usage after trimming: what the trim's scan counted, less what it unlinked.
    /// - Throws: A storage-open error (`YCache.Error.storageUnavailable`, `.insecureStorageDirectory`,
    ///   `.networkFilesystem`, `.unsupportedLayout`, `.storageFull`), or `.ioFailure` (`.storageFull`)
    ///   when `trim.lock` cannot be opened or locked.
    @discardableResult
    public func trimStorageIfNeeded() async throws -> StorageUsage {
        let engine = self.engine
        return usage(try await BlockingWork.run { Result { () throws(Error) in try engine.trimStorage() } }.get())
    }
}
