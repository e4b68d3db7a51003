// Removing an entry (I4): only ever an unlink, so pages a reader already mapped stay readable and trim may
// remove what others are reading. The unlink takes the file's allocated and payload bytes off the state
// file's counters (I9).

/// How `EntryFile.remove` learns the payload bytes it takes off the payload counter (I9).
enum PayloadCharge: Sendable {
    /// Known from a header read just before (a scan, a namespace removal).
    case known(Int64)
    /// The file's size minus this header size: the entry's key and codec are known, so its header size is.
    case headerSize(Int)
    /// Unknown: read the entry's fixed header first.
    case readHeader
}

extension EntryFile {
    /// Unlinks `relative` and subtracts its allocated and payload bytes from the counters (I9). A missing
    /// file is fine.
    @discardableResult
    func remove(_ relative: String, payload charge: PayloadCharge) -> Result<Bool, SystemCallError> {
        let root = directory.descriptor
        let allocated: Int64
        var payload: Int64 = 0
        switch Syscall.status(of: relative, in: root) {
        case .success(let status):
            allocated = status.isRegularFile ? status.allocatedBytes : 0
            if status.isRegularFile {
                switch charge {
                case .known(let bytes): payload = bytes
                case .headerSize(let size): payload = Self.payloadBytes(fileSize: status.size, headerSize: size)
                case .readHeader: payload = chargedPayloadBytes(relative, status: status)
                }
            }
        case .failure(let error) where error.errno == .noSuchFile: return .success(false)
        case .failure(let error): return .failure(error)
        }
        switch Syscall.unlink(relative, in: root) {
        case .success:
            directory.state.adjustUsage(by: -allocated)
            directory.state.adjustPayloadBytes(by: -payload)
            return .success(true)
        case .failure(let error) where error.errno == .noSuchFile: return .success(false)
        case .failure(let error): return .failure(error)
        }
    }
}
