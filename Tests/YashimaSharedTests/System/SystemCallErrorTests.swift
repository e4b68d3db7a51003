// `SystemCallError` names the operation and the path it was given, as Go's `fs.PathError` does (a
// descriptor-only call names no path), for the syscall wrappers and for `FileLock`.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

@Suite("SystemCallError: operation and path")
struct SystemCallErrorTests {
    @Test("a path call names its path; a rename both; a descriptor call none; a lock its file")
    func operationAndPath() throws {
        // Relative to the temporary folder, where none of these names exists.
        let root = try Syscall.openDirectoryPath(FileManager.default.temporaryDirectory.path).get()
        defer { Syscall.close(root) }

        guard case .failure(let open) = Syscall.open("entries/zz/missing.entry", in: root, flags: [.readOnly]) else {
            Issue.record("opened a missing file")
            return
        }
        #expect(open.operation == "openat")
        #expect(open.path == "entries/zz/missing.entry")
        #expect(open.errno == .noSuchFile)
        #expect(open.description.hasPrefix("openat entries/zz/missing.entry: "))

        guard case .failure(let rename) = Syscall.rename("tmp/a-\(getpid())", in: root, to: "tmp/b", in: root) else {
            Issue.record("renamed a missing file")
            return
        }
        #expect(rename.operation == "renameat")
        #expect(rename.path == "tmp/a-\(getpid()) -> tmp/b")

        guard case .failure(let status) = Syscall.status(of: Int32(-1)) else {
            Issue.record("fstat of -1 succeeded")
            return
        }
        #expect(status.operation == "fstat")
        #expect(status.path == nil)
        #expect(status.description == "fstat: \(Errno.badDescriptor)")

        guard case .failed(let lock) = FileLock.attempt(.exclusive, on: -1, path: "locks/ab/key.lock") else {
            Issue.record("locked descriptor -1")
            return
        }
        #expect(lock.operation == "flock")
        #expect(lock.description.hasPrefix("flock locks/ab/key.lock: "))
    }
}
