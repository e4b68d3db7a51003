// Which entry files this process has already verified (payload checksum), so a hit on an entry does not
// checksum it again: keyed by inode, trusted only while the file's ctime says nothing wrote it since (I1
// rules out in-place writes by conforming processes) and its header names the same publish (an inode number
// reused by a new file). A fixed table (FixedTable): past its capacity a hit costs one checksum more.

import Synchronization

/// The (inode, ctime, size, publish) of entry files whose payload checksum this process already verified.
/// Any write to a file changes its ctime, so a match proves the bytes are the verified ones; only ctimes
/// at least `Policy.verifiedCtimeMinimumAge` old are remembered (coarse timestamps, see Policy). A new file
/// that gets a freed inode number, the size and (on a coarse clock) the ctime of a verified one still has
/// its own publish in its header (`EntryVersion`: creation time to the nanosecond, payload size and
/// checksum), so it is checksummed like any file never seen.
///
/// A touch (I11) changes the ctime too, without changing a byte, and touches follow publishes: were every
/// changed ctime a new file version, a large entry touched after each write somewhere in the directory
/// would have its payload checksummed on every hit. So a ctime that moved on since the verification still
/// counts as the verified version when the file's last change was a cache touch: its mtime carries the
/// touch mark (`Policy.touchMark`) and differs from its ctime, which a write never leaves (a write sets
/// both to the kernel's one "now"; a touch sets an explicit mtime). The record keeps the verified ctime,
/// so a write after the touch, even within one coarse clock tick, is caught again. What this cannot see,
/// like any check of metadata, is a foreign process rewriting an entry in place (which I1 rules out for
/// every conforming writer) and a cache touch after it.
final class VerifiedInodes: Sendable {
    static let shared = VerifiedInodes()

    private struct Identity: Hashable {
        let device: UInt64
        let inode: UInt64
    }

    private struct Seen: Equatable {
        let changed: Int64
        let size: Int64
        let version: EntryVersion
    }

    private let table = Mutex(FixedTable<Identity, Seen>(capacity: Policy.verifiedInodeCapacity))

    /// Whether the file of `status`, whose header names the publish `version`, was verified.
    func contains(_ status: FileStatus, version: EntryVersion) -> Bool {
        guard let seen = table.withLock({ $0.value(for: Identity(device: status.device, inode: status.inode)) }),
            seen.size == status.size, seen.version == version
        else { return false }
        if seen.changed == status.changedNanoseconds { return true }
        return status.changedNanoseconds > seen.changed && EntryFile.isTouchMark(status.modifiedNanoseconds)
            && status.modifiedNanoseconds != status.changedNanoseconds
    }

    /// Stores a record in a scratch table, not this one: the type metadata a process makes on its first
    /// insert made ahead of time (`CacheEngine.rehearseWake`). Returns the scratch table's count (1).
    static func rehearseInsert() -> Int {
        var scratch = FixedTable<Identity, Seen>(capacity: 2)
        let version = EntryVersion(createdAtNanoseconds: 0, payloadByteCount: 0, payloadChecksum: 0)
        scratch.insert(Seen(changed: 0, size: 0, version: version), for: Identity(device: 0, inode: 0))
        return scratch.count
    }

    func insert(_ status: FileStatus, version: EntryVersion, now: Int64) {
        guard now - status.changedNanoseconds >= verifiedCtimeMinimumAge else { return }
        table.withLock { table in
            table.insert(
                Seen(changed: status.changedNanoseconds, size: status.size, version: version),
                for: Identity(device: status.device, inode: status.inode))
        }
    }
}

/// `Policy.verifiedCtimeMinimumAge` in nanoseconds, read once.
private let verifiedCtimeMinimumAge = Policy.verifiedCtimeMinimumAge.nanoseconds
