// The C layer's path resolution below the root (CFileLock.h): no symlink is followed in any component of
// any call (open, fstatat, rename, link, unlink, mkdir, utimensat), with openat2 and with the
// component-walking fallback used where openat2 is missing (forced here through a test hook).

import CFileLock
import Foundation
import Glibc
import Testing

@testable import YashimaShared

extension Hardening {
    @Suite("Hardening: path resolution", .serialized)
    struct PathResolution {
        @Test("no call follows a symlinked folder in the middle of a path", arguments: [false, true])
        func symlinkedFolderIsNeverFollowed(fallback: Bool) throws {
            let dir = TemporaryDirectory("resolve")
            let outside = TemporaryDirectory("resolve-outside")
            Hardening.makeOutsideFolder(outside.path, fileName: "victim")
            let directory = try Directory(path: dir.path, sharing: .privateToUser, allowNetworkFilesystem: false)
            _ = rmdir(dir.path + "/entries/ab")  // fan-out folders are created with the directory
            try #require(symlink(outside.path, dir.path + "/entries/ab") == 0)
            _ = FileManager.default.createFile(atPath: dir.path + "/tmp/new", contents: Data("n".utf8))
            let before = Snapshot(outside.path)
            if fallback { ysh_set_openat2_disabled(1) }
            defer { ysh_set_openat2_disabled(0) }
            let root = directory.descriptor

            func expectRefused<T>(_ result: Result<T, SystemCallError>, _ what: String) {
                guard case .failure(let error) = result else {
                    Issue.record("\(what) went through the symlink")
                    return
                }
                #expect(error.errno == .symlinkLoop || error.errno == .notDirectory, "\(what): \(error)")
            }
            expectRefused(Syscall.open("entries/ab/victim", in: root, flags: [.readOnly]), "open")
            expectRefused(Syscall.open("entries/ab/new", in: root, flags: [.writeOnly, .create]), "open O_CREAT")
            expectRefused(Syscall.status(of: "entries/ab/victim", in: root), "fstatat")
            expectRefused(Syscall.unlink("entries/ab/victim", in: root), "unlinkat")
            expectRefused(Syscall.rename("tmp/new", in: root, to: "entries/ab/victim", in: root), "renameat")
            expectRefused(Syscall.link("tmp/new", in: root, to: "entries/ab/linked", in: root), "linkat")
            expectRefused(Syscall.makeDirectory("entries/ab/sub", in: root, mode: 0o700), "mkdirat")
            expectRefused(Syscall.touch("entries/ab/victim", in: root), "utimensat")
            expectRefused(Syscall.listDirectory("entries/ab", in: root), "opendir")
            #expect(Snapshot(outside.path) == before)

            // The same calls work on real folders.
            _ = rmdir(dir.path + "/entries/cd")  // created with the directory; make it again here
            #expect(throws: Never.self) { try Syscall.makeDirectory("entries/cd", in: root, mode: 0o700).get() }
            #expect(throws: Never.self) { try Syscall.rename("tmp/new", in: root, to: "entries/cd/x", in: root).get() }
            #expect(throws: Never.self) { try Syscall.touch("entries/cd/x", in: root).get() }
            #expect(throws: Never.self) { try Syscall.status(of: "entries/cd/x", in: root).get() }
            #expect(throws: Never.self) {
                let fd = try Syscall.open("entries/cd/x", in: root, flags: [.readOnly]).get()
                Syscall.close(fd)
            }
            #expect(throws: Never.self) { try Syscall.unlink("entries/cd/x", in: root).get() }
            // The last component is a symlink: acted on itself (unlink removes the link), never followed.
            try #require(symlink(outside.path + "/victim", dir.path + "/entries/cd/link") == 0)
            expectRefused(Syscall.open("entries/cd/link", in: root, flags: [.readOnly]), "open of a final symlink")
            #expect(try Syscall.status(of: "entries/cd/link", in: root).get().isSymbolicLink)
            #expect(throws: Never.self) { try Syscall.unlink("entries/cd/link", in: root).get() }
            #expect(Snapshot(outside.path) == before)
        }
    }
}
