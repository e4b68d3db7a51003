// The five ways the issue damages an auxiliary file (`state`, `trim.lock`) in place, under processes that
// have it open or mapped: a flipped byte in the header, a flipped byte in the middle, truncation to half
// and to zero, and zeros over the whole file; plus a flipped version byte, header damage that leaves the
// magic intact (processes that opened the file before cannot see it; only the repairer's mark tells them). In place on purpose (the same inode, never a rename): that
// is what a disk error, a stray writer or a buggy build does, and what makes truncation fault (SIGBUS)
// in every process that maps the file.

import Foundation
import Glibc
import Testing

enum AuxiliaryDamage: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case flipHeaderByte
    case flipVersionByte
    case flipMiddleByte
    case truncateToHalf
    case truncateToZero
    case fillWithZeros

    var testDescription: String { rawValue }

    /// Damages the file at `path` in place. An empty file (`trim.lock`) gets a byte written where a flip
    /// would go, and 4 KiB of zeros for the fill.
    func apply(to path: String) throws {
        let fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0 else { throw POSIXError(.EIO) }
        let size = Int(status.st_size)
        func flip(at offset: Int) throws {
            var byte: UInt8 = 0
            if size > offset { _ = pread(fd, &byte, 1, off_t(offset)) }
            byte ^= 0xFF
            guard pwrite(fd, &byte, 1, off_t(offset)) == 1 else { throw POSIXError(.EIO) }
        }
        switch self {
        case .flipHeaderByte:
            try flip(at: 3)  // inside the magic word
        case .flipVersionByte:
            try flip(at: 8)
        case .flipMiddleByte:
            try flip(at: size / 2)
        case .truncateToHalf:
            guard ftruncate(fd, off_t(size / 2)) == 0 else { throw POSIXError(.EIO) }
        case .truncateToZero:
            guard ftruncate(fd, 0) == 0 else { throw POSIXError(.EIO) }
        case .fillWithZeros:
            let zeros = [UInt8](repeating: 0, count: max(size, 4096))
            guard pwrite(fd, zeros, zeros.count, 0) == zeros.count else { throw POSIXError(.EIO) }
        }
    }

    /// Whether a process can tell the `state` file is damaged: every way but a flip in the middle, which
    /// changes one epoch word (a removal nobody made: values in memory for that slot are read again).
    var isDetectableInStateFile: Bool { self != .flipMiddleByte }
}

/// Whether `path` holds a good state file: 65,536 bytes, the magic, version 1, a regular file with one link.
func isGoodStateFile(_ path: String) -> Bool {
    var status = stat()
    guard lstat(path, &status) == 0, status.st_mode & S_IFMT == S_IFREG, status.st_nlink == 1,
        status.st_size == 65_536, let data = FileManager.default.contents(atPath: path)
    else { return false }
    return Array(data.prefix(16)) == Array("YSHSTATE".utf8) + [1, 0, 0, 0, 0, 0, 0, 0]
}

/// The inode of `path` (lstat), or nil.
func inode(_ path: String) -> UInt64? {
    var status = stat()
    return lstat(path, &status) == 0 ? UInt64(status.st_ino) : nil
}
