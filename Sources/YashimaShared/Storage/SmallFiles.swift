// Small auxiliary files made complete before anyone can see them (I2): written in `tmp/` with their exact
// mode and size, then linked into place once (`layout`, a missing `state`: first creator wins) or renamed
// over a damaged one (a repair, I14). And reading such a file whole, never blocking on a FIFO there.

extension Directory {
    /// Creates `name` with `bytes` through a staging file and `linkat` (first creator wins). Returns
    /// whether this call created it.
    static func createOnce(
        _ name: String, in root: Int32, bytes: [UInt8], mode: UInt32, rootPath: String, size: Int = 0
    ) throws(YCache.Error) -> Bool {
        let staging = try writeStagingFile(
            for: name, in: root, bytes: bytes, mode: mode, folderMode: nil, rootPath: rootPath, size: size)
        defer { _ = Syscall.unlink(staging, in: root) }
        switch Syscall.link(staging, in: root, to: name, in: root) {
        case .success: return true
        case .failure(let error) where error.errno == .fileExists: return false
        case .failure(let error):
            throw .storageUnavailable(path: rootPath, reason: "cannot publish \(name): \(error)")
        }
    }

    /// Replaces `name` (a damaged auxiliary file, or a symlink, FIFO or socket there: the name itself,
    /// never what a link points to) by a complete new file with `bytes`, made in `tmp/` and renamed over
    /// it. Only under the lock that serializes its repairers. `tmp/` is made again (with `folderMode`)
    /// when it was removed or replaced by a symlink.
    static func createReplacing(
        _ name: String, in root: Int32, bytes: [UInt8], mode: UInt32, folderMode: UInt32, rootPath: String,
        size: Int = 0
    ) throws(YCache.Error) {
        let staging = try writeStagingFile(
            for: name, in: root, bytes: bytes, mode: mode, folderMode: folderMode, rootPath: rootPath, size: size)
        if case .failure(let error) = Syscall.rename(staging, in: root, to: name, in: root) {
            _ = Syscall.unlink(staging, in: root)
            throw .storageUnavailable(path: rootPath, reason: "cannot replace \(name): \(error)")
        }
    }

    /// A complete staging file `tmp/<name>-<random>.staging` with exactly `mode`, `size` bytes (zeros)
    /// starting with `bytes`. With a `folderMode`, `tmp/` is made again when it is missing or a symlink.
    private static func writeStagingFile(
        for name: String, in root: Int32, bytes: [UInt8], mode: UInt32, folderMode: UInt32?, rootPath: String,
        size: Int
    ) throws(YCache.Error) -> String {
        let staging = stagingFolder + "/" + name + "-" + randomHex(byteCount: 8) + stagingSuffix
        var opened = Syscall.open(staging, in: root, flags: [.writeOnly, .create, .exclusive], mode: mode)
        if case .failure(let error) = opened, error.errno.isFolderMissingOrReplaced, let folderMode,
            case .success = ensureDirectory(stagingFolder, in: root, mode: folderMode, replacingFiles: false)
        {
            opened = Syscall.open(staging, in: root, flags: [.writeOnly, .create, .exclusive], mode: mode)
        }
        let fd: Int32
        switch opened {
        case .success(let value): fd = value
        case .failure(let error):
            throw error.errno.isOutOfSpace
                ? .storageFull(path: rootPath, detail: "\(error)")
                : .storageUnavailable(path: rootPath, reason: "cannot create \(name): \(error)")
        }
        var result: Result<Void, SystemCallError> = Syscall.setMode(fd, mode)
        if case .success = result, size > 0 { result = Syscall.truncate(fd, length: Int64(size)) }
        if case .success = result { result = bytes.withUnsafeBytes { Syscall.write(fd, $0) } }
        Syscall.close(fd)
        if case .failure(let error) = result {
            _ = Syscall.unlink(staging, in: root)
            throw error.errno.isOutOfSpace
                ? .storageFull(path: rootPath, detail: "\(error)")
                : .storageUnavailable(path: rootPath, reason: "cannot write \(name): \(error)")
        }
        return staging
    }

    /// Reads a small file whole; `nil` when it does not exist, no bytes when it is not a regular file
    /// (a FIFO there is opened without blocking and never read).
    static func readSmallFile(_ name: String, in root: Int32, limit: Int = 4096) -> Result<[UInt8]?, SystemCallError> {
        let fd: Int32
        switch Syscall.open(name, in: root, flags: [.readOnly, .nonBlocking]) {
        case .success(let value): fd = value
        case .failure(let error) where error.errno == .noSuchFile: return .success(nil)
        case .failure(let error): return .failure(error)
        }
        defer { Syscall.close(fd) }
        guard case .success(let status) = Syscall.status(of: fd), status.isRegularFile else { return .success([]) }
        var buffer = [UInt8](repeating: 0, count: limit)
        let read = buffer.withUnsafeMutableBytes { Syscall.read(fd, into: $0, at: 0) }
        return read.map { Array(buffer[0..<$0]) }
    }
}
