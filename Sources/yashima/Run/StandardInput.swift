// The standard-input rule of `yashima run`: a result is never computed from input other than the
// caller's, and a standard input the command never reads is never waited on. `--stdin` reads it to the
// end into an unlinked file, puts its SHA-256 in the key and gives the command that file; `--no-stdin`
// gives the command /dev/null; otherwise a terminal, /dev/null, a closed descriptor or a pipe already at
// its end (`make -j` gives one to its jobs) is no input, and anything else (a pipe, a socket, a file)
// makes the run uncached with the input passed through.

import Foundation
import Glibc
@_spi(Operator) import YashimaShared

enum StandardInput {
    /// What the command is given as standard input, and what the key says of it.
    enum Plan {
        /// The caller's standard input, as it is (a terminal, /dev/null, nothing): not in the key.
        case inherit
        /// /dev/null (`--no-stdin`).
        case nullDevice
        /// The bytes read from standard input, in an unlinked file open at `descriptor`, and their digest
        /// (in the key).
        case captured(descriptor: Int32, digest: String)
        /// Input the key cannot cover: the run must be uncached. `kind` names it for the warning.
        case uncacheable(kind: String)

        var digest: String? {
            if case .captured(_, let digest) = self { return digest }
            return nil
        }

        /// The descriptor the command gets as its standard input (nil: inherit fd 0).
        var descriptorForCommand: Int32? {
            switch self {
            case .inherit, .uncacheable: return nil
            case .nullDevice: return Plan.nullDescriptor
            case .captured(let descriptor, _): return descriptor
            }
        }

        private static let nullDescriptor: Int32 = open("/dev/null", O_RDONLY | O_CLOEXEC)
    }

    /// The plan for this process's standard input.
    /// - Parameters:
    ///   - read: `--stdin`: read it all and key on it.
    ///   - ignore: `--no-stdin`: the command gets /dev/null.
    static func plan(read: Bool, ignore: Bool) async throws -> Plan {
        if ignore { return .nullDevice }
        if read { return try await capture() }
        var status = stat()
        guard fstat(STDIN_FILENO, &status) == 0 else { return .inherit }  // closed: the command gets none either
        if isatty(STDIN_FILENO) == 1 { return .inherit }
        switch status.st_mode & S_IFMT {
        case S_IFCHR where status.st_rdev == makeDevice(1, 3): return .inherit  // /dev/null
        case S_IFIFO where isClosedEmptyPipe(): return .inherit  // `make -j` gives its jobs such a pipe
        case S_IFIFO: return .uncacheable(kind: "a pipe")
        case S_IFSOCK: return .uncacheable(kind: "a socket")
        case S_IFREG: return .uncacheable(kind: "a file")
        default: return .uncacheable(kind: "a device")
        }
    }

    /// Whether standard input is an anonymous pipe with no data and no writer left: it can only ever
    /// give end of file, as /dev/null does (a named FIFO could get a new writer, so it does not count).
    private static func isClosedEmptyPipe() -> Bool {
        var target = [CChar](repeating: 0, count: 64)
        let length = readlink("/proc/self/fd/0", &target, target.count - 1)
        guard length > 5, target.prefix(5).map({ UInt8(bitPattern: $0) }) == Array("pipe:".utf8) else { return false }
        var descriptor = pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, 0) == 1 else { return false }
        return descriptor.revents & Int16(POLLHUP) != 0 && descriptor.revents & Int16(POLLIN) == 0
    }

    /// The warning printed when standard input makes a run uncached.
    static func warning(kind: String) -> String {
        "yashima: warning: standard input is \(kind), which the key cannot cover: running the command uncached "
            + "(--stdin caches it with the input in the key; --no-stdin or </dev/null if the command does not read it)"
    }

    /// Reads standard input to its end (off the cooperative pool) into an unlinked temporary file,
    /// rewound, and digests it.
    private static func capture() async throws -> Plan {
        let file = try temporaryFile(purpose: "standard input")
        let copied: Int32? = await StorageOperator.offPool {
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, $0.count) }
                if count == 0 { return nil }
                if count < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                guard buffer.withUnsafeBytes({ Output.write(UnsafeRawBufferPointer(rebasing: $0[..<count]), to: file) })
                else { return errno }
            }
        }
        if let copied {
            close(file)
            throw CommandFailure.failed("cannot read standard input (--stdin): \(String(cString: strerror(copied)))")
        }
        lseek(file, 0, SEEK_SET)
        let digest = CacheKey.digest(of: try mapFile(file))
        return .captured(descriptor: file, digest: digest)
    }

    private static func makeDevice(_ major: UInt64, _ minor: UInt64) -> UInt64 {
        // glibc's makedev: major bits 8–19 and 32–43, minor bits 0–7 and 12–31.
        (major & 0xFFF) << 8 | (major & ~0xFFF) << 32 | (minor & 0xFF) | (minor & ~0xFF) << 12
    }
}

/// An unlinked temporary file in `$TMPDIR` (else /tmp), open for reading and writing.
func temporaryFile(purpose: String) throws -> Int32 {
    let folder = Word.environment("TMPDIR").flatMap { $0.isEmpty ? nil : $0 } ?? Word("/tmp")
    var template = (folder.appending(Word("yashima-XXXXXX")).bytes + [0]).map { CChar(bitPattern: $0) }
    let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
    guard fd >= 0 else {
        throw CommandFailure.failed(
            "cannot create a temporary file in \(folder.quoted) for the command's \(purpose): "
                + String(cString: strerror(errno)))
    }
    _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
    template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
    return fd
}
