// Removing an entry (I4): the file is first renamed aside into `tmp/` (so exactly one remover or replacing
// publisher ever owns a given file, I9), then unlinked: pages a reader already mapped stay readable and trim
// may remove what others are reading. The file's allocated and payload bytes come off the counters (I9).

/// How `EntryFile.remove` learns the payload bytes it takes off the payload counter (I9).
enum PayloadCharge: Sendable {
    /// The file's size minus this header size: the entry's key and codec are known, so its header size is
    /// (any file at an entry path has that key and codec, or is debris and charged its whole size).
    case headerSize(Int)
    /// Unknown: read the entry's fixed header first.
    case readHeader
}

/// The charges a removal or a replacing publish took off the counters (I9).
struct RemovedCharge: Sendable, Equatable {
    var allocatedBytes: Int64
    var payloadBytes: Int64
}

extension EntryFile {
    /// Unlinks the entry at `relative` and subtracts its allocated and payload bytes from the counters (I9).
    /// The file is renamed aside first and charged from what was moved, so a publish that replaces it at the
    /// same moment (which owns what it replaces, `commit`) never has it subtracted twice. A missing file is
    /// fine: `.success(nil)`.
    @discardableResult
    func remove(_ relative: String, payload charge: PayloadCharge) -> Result<RemovedCharge?, SystemCallError> {
        switch takeAside(relative) {
        case .success(let aside?):
            let removed = dispose(aside, charge: charge)
            directory.state.adjustUsage(by: -removed.allocatedBytes)
            directory.state.adjustPayloadBytes(by: -removed.payloadBytes)
            return .success(removed)
        case .success(nil): return .success(nil)
        case .failure(let error): return .failure(error)
        }
    }

    /// Renames the file at `relative` to a new name in `tmp/` (repairing `tmp/` when it was removed or
    /// replaced, I13) and returns that name; `nil` when nothing is at `relative`. A folder planted at an
    /// entry path is not the cache's to move: it goes back, and the call fails as an unlink would (EISDIR).
    func takeAside(_ relative: String) -> Result<String?, SystemCallError> {
        let root = directory.descriptor
        let aside = directory.newStagingPath()
        var moved = Syscall.rename(relative, in: root, to: aside, in: root)
        if case .failure(let error) = moved, error.errno.isFolderMissingOrReplaced {
            // The entry is gone, or `tmp/` is: tell them apart before repairing anything.
            guard case .success = Syscall.status(of: relative, in: root) else { return .success(nil) }
            if case .failure(let repairError) = directory.repairStagingFolder() { return .failure(repairError) }
            moved = Syscall.rename(relative, in: root, to: aside, in: root)
        }
        switch moved {
        case .success: break
        case .failure(let error) where error.errno == .noSuchFile: return .success(nil)
        case .failure(let error): return .failure(error)
        }
        if case .success(let status) = Syscall.status(of: aside, in: root), status.isDirectory {
            _ = Syscall.renameWithoutReplacing(aside, in: root, to: relative, in: root)
            return .failure(SystemCallError(operation: "renameat", path: relative, errno: .isDirectory))
        }
        return .success(aside)
    }

    /// Charges and unlinks a file this process moved aside (nobody else names it). Anything but a regular
    /// file is charged nothing.
    func dispose(_ aside: String, charge: PayloadCharge) -> RemovedCharge {
        let root = directory.descriptor
        guard case .success(let status) = Syscall.status(of: aside, in: root) else {
            return RemovedCharge(allocatedBytes: 0, payloadBytes: 0)
        }
        guard status.isRegularFile else {
            _ = Syscall.unlink(aside, in: root)  // a symlink or special file planted at an entry path
            return RemovedCharge(allocatedBytes: 0, payloadBytes: 0)
        }
        let payload: Int64
        switch charge {
        case .headerSize(let size): payload = Self.payloadBytes(fileSize: status.size, headerSize: size)
        case .readHeader: payload = chargedPayloadBytes(aside, status: status)
        }
        _ = Syscall.unlink(aside, in: root)
        return RemovedCharge(allocatedBytes: status.allocatedBytes, payloadBytes: payload)
    }
}
