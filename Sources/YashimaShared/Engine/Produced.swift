// What a production's tiers hand the publish step (Store.swift): the value, where it came from, the bytes
// and times a tier already had (`StoredForm`), and the work to do once it is published (`afterPublish`);
// and what the publish step did (`PublishedValue`, `PublishedEntry`).

import Foundation

/// A value a production got from its tiers or its generator, and what the publish step needs to know.
struct Produced<Value: Sendable>: Sendable {
    let value: Value
    /// Where it came from: `.generated` for the generator.
    let source: YCache.Origin
    /// True when another host generated it while this production waited for its lease.
    var sharedGeneration = false
    /// The value's encoded bytes and times when a tier already has them (a value fetched from elsewhere,
    /// with the created and expiry times it was stored with): the publish step publishes them as they are.
    /// Nil: the publish step encodes the value, created now, expiring by the caller's options.
    var stored: StoredForm?
    /// Called once the production is over: with what the publish step did, or with nil when nothing was
    /// published (the commit gate closed: the flight was cancelled; or the write failed and threw).
    var afterPublish: (@Sendable (PublishedValue?) async -> Void)?
    /// Set when `afterPublish` stores the value in the remote tier: deletes the key's remote value. The
    /// publish step then holds a write window from before its rename to after `afterPublish`
    /// (RemoteWriteWindow), and calls this before closing it when another write of the slot came between.
    var deleteRemote: RemoteTier.Delete?

    init(value: Value, source: YCache.Origin, stored: StoredForm? = nil) {
        self.value = value
        self.source = source
        self.stored = stored
    }
}

/// A value's encoded bytes and the times they were stored with elsewhere.
struct StoredForm: Sendable {
    let payload: Data
    /// Nanoseconds since 1970.
    let createdAt: Int64
    /// Nanoseconds since 1970; nil: never expires.
    let expiresAt: Int64?
    /// The entry file already staged with these bytes (a large remote hit, RemoteStaging.swift): the
    /// publish step renames it into place instead of writing the payload.
    var staged: StagedEntry?
}

/// What the publish step did with a produced value.
struct PublishedValue: Sendable {
    /// The entry as encoded for storage; nil when the write policy keeps the value out of storage and
    /// nothing was encoded (`.disabled`).
    let content: EntryContent?
    /// Whether it was published in this machine's storage directory.
    let isStoredLocally: Bool
    /// The entry file published, when there is one (for streaming its payload from the file).
    var entry: PublishedEntry?
}

/// An entry file a publish step wrote: where it is, and the header it was published with.
struct PublishedEntry: Sendable {
    let storage: StorageContext
    let path: EntryPath
    let header: EntryFormat.Header

    /// The entry's payload, opened for streaming; nil when the file is gone or was replaced. The caller
    /// closes `descriptor`.
    func openPayload() -> RemotePayloadFile? {
        guard let fd = storage.files.openPublished(path, matching: header) else { return nil }
        return RemotePayloadFile(
            descriptor: fd, offset: Int64(header.payloadOffset), byteCount: Int(header.payloadByteCount),
            checksum: header.payloadChecksum)
    }
}
