// RemoteChain.swift: an ordered chain of remote members as one value store: a lookup asks them in order and a
// hit in a later member backfills the earlier writable ones; a store and a delete go to every writable member
// (a read-only one never gets a store, a lease or a delete); each member keeps its own breakers and counters.

import Foundation

/// Remote members in order (say Redis in front of S3), as one ``RemoteValueStore``. Values come and go
/// through memory (a member's own streaming is not used in a chain).
final class RemoteChainStore: RemoteValueStore {
    /// The members, in the order lookups ask them.
    let members: [any RemoteValueStore]
    /// The chain's own counters (unused: each member counts its own calls).
    let statistics = RemoteStatistics()
    /// Read-only when every member is; `removeAllRemotely` when any member has it.
    let remoteGuard: RemoteGuard

    /// A chain of `members` (at least one). Each member's counters and breakers are named by its place and
    /// servers on the machine's board (``RemoteMemberTag``), for `yashima stats`.
    init(members: [any RemoteValueStore]) {
        self.members = members
        for (index, member) in members.enumerated() {
            let tag = RemoteMemberTag(
                label: member.remoteGuard.labels.joined(separator: ", "), position: index + 1,
                readOnly: member.remoteGuard.policy.readOnly)
            member.statistics.join(tag)
            member.remoteGuard.join(member: tag.id)
        }
        var policy = RemotePolicy()
        policy.readOnly = members.allSatisfy { $0.remoteGuard.policy.readOnly }
        policy.removeAllRemotely = members.contains { $0.remoteGuard.policy.removeAllRemotely }
        remoteGuard = RemoteGuard(policy: policy, scopes: 1, labels: ["remote chain"], statistics: statistics)
    }

    /// Each member signs with its own secret.
    var secret: RemoteSecret? { nil }

    /// Every member's counters.
    var memberStatistics: [RemoteStatistics] { members.flatMap(\.memberStatistics) }

    private var writable: [any RemoteValueStore] { members.filter { !$0.remoteGuard.policy.readOnly } }

    /// The first member's hit; the writable members before it get the value too (backfill).
    func lookup(_ identity: EntryIdentity) async -> RemoteLookup {
        var answer = RemoteLookup.unavailable
        for (index, member) in members.enumerated() {
            let found = await member.lookup(identity)
            switch found {
            case .hit(let value):
                for earlier in members[..<index] where !earlier.remoteGuard.policy.readOnly {
                    let stored = await earlier.store(
                        identity, payload: value.payload, createdAt: value.createdAt, expiresAt: value.expiresAt)
                    if stored == .stored { earlier.statistics.add(.backfills) }
                }
                return found
            case .hitInFile: return found
            case .miss: answer = found
            case .unavailable: if case .unavailable = answer { answer = found }
            }
        }
        return answer
    }

    /// Stored in every writable member: `.stored` when any took it.
    func store(_ identity: EntryIdentity, payload: Data, createdAt: Int64, expiresAt: Int64) async -> RemoteStoreOutcome
    {
        var outcome = RemoteStoreOutcome.skipped(.readOnly)
        for member in writable {
            let stored = await member.store(identity, payload: payload, createdAt: createdAt, expiresAt: expiresAt)
            if stored == .stored || outcome == .skipped(.readOnly) { outcome = stored }
        }
        return outcome
    }

    /// Deleted from every writable member: `.unavailable` when one could not be asked (its copy may
    /// survive), else `.removed` when any held it.
    func remove(_ identity: EntryIdentity) async -> RemoteRemoval {
        var removal = RemoteRemoval.absent
        for member in writable {
            switch await member.remove(identity) {
            case .unavailable: removal = .unavailable
            case .removed where removal != .unavailable: removal = .removed
            default: break
            }
        }
        return removal
    }

    /// Every value of every writable member that can list them (`removeAllRemotely` set on it).
    func removeAll() async -> RemoteBulkRemoval {
        var total = 0
        for member in writable where member.remoteGuard.policy.removeAllRemotely {
            switch await member.removeAll() {
            case .removed(let count): total += count
            case .unsupported: break
            case .unavailable: return .unavailable
            }
        }
        return .removed(total)
    }
}
