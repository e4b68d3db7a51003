// A remote backend in this process's memory: the envelope, the guard and the rules every backend shares
// (RemoteValueStore), with a dictionary for a server. The contract suite's third backend, and the
// smallest conformance there is: a new backend gets the contract's tests the same way.

import Foundation
import Synchronization

@testable import YashimaShared

/// What the in-memory backend's "server" holds: sealed envelopes by entry identity.
final class MemoryRemoteServer: Sendable {
    private let values = Mutex<[SHA256Digest: [UInt8]]>([:])

    subscript(identity: SHA256Digest) -> [UInt8]? {
        get { values.withLock { $0[identity] } }
        set { values.withLock { $0[identity] = newValue } }
    }

    /// Removes the value; true when there was one.
    func remove(_ identity: SHA256Digest) -> Bool { values.withLock { $0.removeValue(forKey: identity) } != nil }
}

/// A remote store over a `MemoryRemoteServer`.
final class MemoryRemoteStore: RemoteValueStore {
    let statistics = RemoteStatistics()
    let remoteGuard: RemoteGuard
    let secret: RemoteSecret?
    let server: MemoryRemoteServer

    init(server: MemoryRemoteServer, policy: RemotePolicy = RemotePolicy(), secret: RemoteSecret? = nil) {
        self.server = server
        self.secret = secret
        remoteGuard = RemoteGuard(policy: policy, scopes: 1, statistics: statistics)
    }

    func lookup(_ identity: EntryIdentity) async -> RemoteLookup {
        let (server, secret, cap) = (server, secret, remoteGuard.policy.maximumValueBytes)
        return finishLookup(
            await remoteGuard.perform(scope: 0, access: .read) { (_) throws(RemoteError) -> RemoteLookup in
                guard let bytes = server[identity.digest] else { return .miss(.absent) }
                guard bytes.count <= cap else { throw .replyTooLarge }  // not read, as Redis and HTTP
                return Self.verify(bytes, identity: identity, secret: secret)
            })
    }

    func store(_ identity: EntryIdentity, payload: Data, createdAt: Int64, expiresAt: Int64) async -> RemoteStoreOutcome
    {
        if let skip = skipReason(payloadCount: payload.count, expiresAt: expiresAt) { return .skipped(skip) }
        let (server, secret) = (server, secret)
        return finishStore(
            await remoteGuard.perform(scope: 0, access: .write) { (_) throws(RemoteError) -> Bool in
                // The trust rule: without a secret, a signed value stays (as Redis's script keeps it).
                if secret == nil, let held = server[identity.digest], held.count >= 12,
                    Array(held[0..<8]) == RemoteEnvelope.magic, held[10] & 1 == 1
                {
                    return false
                }
                server[identity.digest] = RemoteEnvelope.seal(
                    payload, identity: identity.digest, createdAt: createdAt, expiresAt: expiresAt, secret: secret)
                return true
            })
    }

    @discardableResult
    func remove(_ identity: EntryIdentity) async -> RemoteRemoval {
        let server = server
        let attempt = await remoteGuard.perform(scope: 0, access: .write) { (_) throws(RemoteError) in
            server.remove(identity.digest)
        }
        return RemoteRemoval(attempt)
    }
}
