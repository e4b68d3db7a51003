// RemoteValueStore.swift: what the engine sees of any remote backend: look up, store, remove; async, never
// throwing, payloads in memory or streamed through files; and the rules every backend shares (expiry after
// verification, when a store is skipped, what each outcome counts).

import Foundation

/// A payload inside a local file (a published entry's payload), streamed to the remote tier.
struct RemotePayloadFile: Sendable {
    /// An open, readable descriptor, owned by the caller and kept open until the call returns.
    let descriptor: Int32
    /// Where the payload starts in the file.
    let offset: Int64
    /// The payload's byte count.
    let byteCount: Int
    /// The payload's CRC32C (a local entry header records it), so the envelope header can be sent
    /// before the payload is read. Damaged bytes then fail the readers' check and read as a miss.
    let checksum: UInt32

    /// The whole payload in memory, read on a RemoteIO thread; nil when the file fails or is shorter.
    func readWhole() async -> Data? {
        await RemoteIO.shared.run { () -> Data? in
            var payload = Data(count: byteCount)
            let result = payload.withUnsafeMutableBytes { Syscall.read(descriptor, into: $0, at: offset) }
            guard case .success(let count) = result, count == byteCount else { return nil }
            return payload
        }
    }
}

/// A remote tier's values: lookups, stores and removals for one entry identity, every call guarded
/// (``RemoteGuard``) and never throwing. A remote failure reads as ``RemoteLookup/unavailable`` or
/// ``RemoteStoreOutcome/unavailable`` and the caller carries on as if there were no remote tier.
protocol RemoteValueStore: AnyObject, Sendable {
    /// The tier's counters.
    var statistics: RemoteStatistics { get }
    /// Timeouts, breakers, read-only mode, cap.
    var remoteGuard: RemoteGuard { get }
    /// Signs stored values; only values signed with it are hits.
    var secret: RemoteSecret? { get }
    /// The counters of every store behind this one (itself; a chain's members).
    var memberStatistics: [RemoteStatistics] { get }
    /// The smallest payload this backend streams through files (a lookup's staging file, a store's
    /// payload file); nil when it takes and returns values whole (Redis).
    var fileStreamingThreshold: Int? { get }

    /// Looks `identity` up, the payload in memory. A hit is verified for that identity (and signature).
    func lookup(_ identity: EntryIdentity) async -> RemoteLookup

    /// Looks `identity` up; a payload large enough to stream (the backend decides) is written into the
    /// slot's file (made then) and reported as ``RemoteLookup/hitInFile(_:)``, others as
    /// ``RemoteLookup/hit(_:)``. On anything but `hitInFile` the file, if one was made, is meaningless: the
    /// caller discards it.
    func lookup(_ identity: EntryIdentity, staging: RemoteStagingSlot) async -> RemoteLookup

    /// Stores `payload` as `identity`'s value (replacing whatever is there).
    func store(_ identity: EntryIdentity, payload: Data, createdAt: Int64, expiresAt: Int64) async -> RemoteStoreOutcome

    /// Stores the payload in `file` as `identity`'s value, streamed when the backend can.
    func store(
        _ identity: EntryIdentity, payloadFile file: RemotePayloadFile, createdAt: Int64, expiresAt: Int64
    ) async -> RemoteStoreOutcome

    /// Deletes `identity`'s value: `.removed`, `.absent`, or `.unavailable` when the server could not be
    /// asked (breaker open, read-only) or failed, so a stored value may survive.
    @discardableResult
    func remove(_ identity: EntryIdentity) async -> RemoteRemoval

    /// Deletes every value of this cache (its key prefix) on every server: the number deleted,
    /// `.unsupported` when the backend cannot list its values (HTTP), or `.unavailable` when a server
    /// could not be asked.
    func removeAll() async -> RemoteBulkRemoval
}

extension RemoteValueStore {
    /// One store: its own counters.
    var memberStatistics: [RemoteStatistics] { [statistics] }

    /// Values come and go whole (Redis).
    var fileStreamingThreshold: Int? { nil }

    /// A backend that cannot list its values (an HTTP server) removes nothing.
    func removeAll() async -> RemoteBulkRemoval { .unsupported }

    /// The default for backends whose values come whole (Redis): the payload in memory.
    func lookup(_ identity: EntryIdentity, staging: RemoteStagingSlot) async -> RemoteLookup {
        await lookup(identity)
    }

    /// `lookup(_:staging:)` into a file the caller made already.
    func lookup(_ identity: EntryIdentity, staging file: RemoteStagingFile) async -> RemoteLookup {
        await lookup(identity, staging: RemoteStagingSlot(file))
    }

    /// The default for backends that take values whole (Redis): reads the payload (on a RemoteIO
    /// thread) and stores it from memory.
    func store(
        _ identity: EntryIdentity, payloadFile file: RemotePayloadFile, createdAt: Int64, expiresAt: Int64
    ) async -> RemoteStoreOutcome {
        if let skip = skipReason(payloadCount: file.byteCount, expiresAt: expiresAt) { return .skipped(skip) }
        guard let payload = await file.readWhole() else {
            statistics.add(.failedWrites)
            return .unavailable
        }
        return await store(identity, payload: payload, createdAt: createdAt, expiresAt: expiresAt)
    }

    /// Verifies stored bytes for `identity`: a hit, or the reason for the miss.
    static func verify(_ bytes: [UInt8], identity: EntryIdentity, secret: RemoteSecret?) -> RemoteLookup {
        switch RemoteEnvelope.open(bytes, identity: identity.digest, secret: secret) {
        case .failure(let rejection): return .miss(.rejected(rejection))
        case .success(let value): return isExpired(value.expiresAt) ? .miss(.expired) : .hit(value)
        }
    }

    /// True when a verified value's own expiry has passed.
    static func isExpired(_ expiresAt: Int64) -> Bool {
        expiresAt > 0 && expiresAt <= Syscall.realtimeNanoseconds
    }

    /// The lookup a guarded attempt amounts to, counted.
    func finishLookup(_ attempt: RemoteAttempt<RemoteLookup>) -> RemoteLookup {
        let lookup: RemoteLookup
        switch attempt {
        case .completed(let result): lookup = result
        case .keyFailure(let error): lookup = .miss(error.missReason)
        case .unavailable: return .unavailable
        }
        switch lookup {
        case .hit, .hitInFile: statistics.add(.hits)
        case .miss(let reason):
            statistics.add(.misses)
            countRejection(reason)
        case .unavailable: break
        }
        return lookup
    }

    /// Counts a miss's reason when it is a rejected value (by reason) or one too large to read.
    func countRejection(_ reason: RemoteMiss) {
        switch reason {
        case .rejected(let rejection): statistics.addRejection(rejection)
        case .tooLarge: statistics.add(.rejectedTooLarge)
        default: break
        }
    }

    /// The store outcome a guarded attempt amounts to, counted.
    func finishStore(_ attempt: RemoteAttempt<Void>) -> RemoteStoreOutcome {
        switch attempt {
        case .completed:
            statistics.add(.puts)
            return .stored
        case .keyFailure(.payloadTooLarge):
            statistics.add(.oversizedValues)
            return .skipped(.tooLarge)
        case .keyFailure, .unavailable:
            return .unavailable
        }
    }

    /// The store outcome of a backend whose stores may keep a signed value (a host without the secret):
    /// `false` is that case, counted.
    func finishStore(_ attempt: RemoteAttempt<Bool>) -> RemoteStoreOutcome {
        switch attempt {
        case .completed(false):
            statistics.add(.signedValuesKept)
            return .skipped(.signedValueKept)
        case .completed: return finishStore(RemoteAttempt<Void>.completed(()))
        case .keyFailure(let error): return finishStore(RemoteAttempt<Void>.keyFailure(error))
        case .unavailable: return .unavailable
        }
    }

    /// Why a value of `payloadCount` bytes expiring at `expiresAt` is not stored, or nil to store it.
    func skipReason(payloadCount: Int, expiresAt: Int64) -> RemoteStoreOutcome.Skip? {
        if remoteGuard.policy.readOnly { return .readOnly }
        let size = RemoteEnvelope.sealedSize(payloadCount: payloadCount, signed: secret != nil)
        if !remoteGuard.admitsValue(ofSize: size) {
            statistics.add(.oversizedValues)
            return .tooLarge
        }
        if expiresAt > 0 && expiresAt - Syscall.realtimeNanoseconds < 1_000_000 { return .expired }
        return nil
    }
}

/// The result of a lookup.
enum RemoteLookup: Equatable, Sendable {
    /// A verified value, the payload in memory.
    case hit(RemoteValue)
    /// A verified value whose payload was streamed into the caller's staging file.
    case hitInFile(RemoteFileValue)
    /// Nothing usable is stored.
    case miss(RemoteMiss)
    /// The tier is down or bypassed: behave as without it.
    case unavailable
}

/// Why a lookup missed.
enum RemoteMiss: Equatable, Sendable {
    /// No value stored.
    case absent
    /// The stored value's own expiry has passed.
    case expired
    /// The stored bytes failed verification.
    case rejected(RemoteEnvelope.Rejection)
    /// The key holds another Redis type (planted by another client).
    case wrongType
    /// The stored value is longer than the size cap allows (it was not read).
    case tooLarge
    /// The HTTP server answered with this status (not 2xx, 404, 410, 429 or 5xx: say 401, 403, 3xx).
    case refused(status: Int)
    /// Writing the payload into the staging file failed (this host's fault).
    case localFailure
}

/// The result of deleting one value.
enum RemoteRemoval: Equatable, Sendable {
    /// A value was deleted.
    case removed
    /// None was stored.
    case absent
    /// The server could not be asked (its breaker is open, the tier is read-only) or failed: a stored
    /// value may survive, and a later miss may fetch it again.
    case unavailable

    /// What a guarded delete amounts to (`true`: one was deleted).
    init(_ attempt: RemoteAttempt<Bool>) {
        switch attempt {
        case .completed(let deleted): self = deleted ? .removed : .absent
        case .keyFailure, .unavailable: self = .unavailable
        }
    }
}

/// The result of deleting every value of a cache.
enum RemoteBulkRemoval: Equatable, Sendable {
    /// This many values were deleted.
    case removed(Int)
    /// The backend cannot list its values (an HTTP server): nothing was deleted.
    case unsupported
    /// A server could not be asked, or failed: values may survive (those deleted before stay deleted).
    case unavailable
}

/// The result of a store.
enum RemoteStoreOutcome: Equatable, Sendable {
    /// Stored.
    case stored
    /// Not stored, and not a failure of the tier.
    case skipped(Skip)
    /// The tier is down or bypassed, or the write failed or was refused.
    case unavailable

    /// Why a value was not stored.
    enum Skip: Equatable, Sendable {
        /// The envelope would exceed the size cap, or the server refused it as too large (413): the
        /// value stays local.
        case tooLarge
        /// The entry expires within a millisecond.
        case expired
        /// The tier is read-only.
        case readOnly
        /// This host has no secret and a signed value is stored: it is kept (the trust rule, README).
        case signedValueKept
    }
}
