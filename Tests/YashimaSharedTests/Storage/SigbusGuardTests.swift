// The SIGBUS guard of CFileLock: a guarded MAP_SHARED mapping of a file truncated under it reads zeros
// instead of killing the process, in this process and in a child; an unguarded fault still kills a child
// with SIGBUS (default action), or reaches the handler that was installed before the guard.

import CFileLock
import Foundation
import Glibc
import Testing

@Suite("SIGBUS guard")
struct SigbusGuardTests {
    @Test("a guarded mapping of a file truncated under it reads zeros instead of faulting")
    func guardedMappingSurvivesTruncation() throws {
        let dir = TemporaryDirectory("sigbus")
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        let path = dir.path + "/mapped"
        try writeFile(Data(repeating: 0xAB, count: 65_536), to: URL(fileURLWithPath: path))
        let fd = open(path, O_RDWR | O_CLOEXEC)
        try #require(fd >= 0)
        defer { close(fd) }
        var err: Int32 = 0
        let base = try #require(ysh_mmap_shared(fd, 65_536, &err))
        try #require(ysh_sigbus_guard_register(base, 65_536, &err) == 0)
        defer {
            ysh_sigbus_guard_unregister(base)
            munmap(base, 65_536)
        }
        let word = { (offset: Int) in ysh_atomic_load_u64((base + offset).assumingMemoryBound(to: UInt64.self)) }
        #expect(word(40_000) == 0xABAB_ABAB_ABAB_ABAB)
        let trips = ysh_sigbus_guard_trips()
        try #require(ftruncate(fd, 16_384) == 0)
        #expect(word(40_000) == 0, "the page past the new end of file reads zeros")
        #expect(ysh_sigbus_guard_trips() == trips + 1)
        #expect(word(0) == 0, "the whole range was replaced, so the magic check sees the damage")
        _ = ysh_atomic_fetch_add_u64((base + 40_000).assumingMemoryBound(to: UInt64.self), 1)
        #expect(word(40_000) == 1, "the replacement is writable memory")
    }

    @Test(
        "SIGBUS in a child: guarded, it survives; unguarded, it dies of SIGBUS or reaches the earlier handler",
        arguments: ["guarded", "unguarded", "chained"])
    func sigbusInChild(mode: String) async throws {
        let dir = TemporaryDirectory("sigbus-child")
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        let path = dir.path + "/mapped"
        try writeFile(Data(repeating: 0xCD, count: 65_536), to: URL(fileURLWithPath: path))
        // No backtracer for the child that must die: it would take seconds to symbolicate.
        let child = try ChildProcess(
            ["worker", "sigbus-probe", "--file", path, "--mode", mode], environment: ["SWIFT_BACKTRACE": "enable=no"],
            capturingStandardError: true)
        #expect(await child.line() == "TRUNCATED")
        switch mode {
        case "guarded":
            #expect(await child.line() == "SURVIVED 0 1")
            #expect(await child.exitStatus() == 0)
        case "unguarded":
            _ = await child.exitStatus()
            if case .signaled(let signal) = child.exit {
                #expect(signal == SIGBUS)
            } else {
                // Built with AddressSanitizer, whose SIGBUS handler was there first: the guard passes the
                // fault on to it, and it reports the fault and exits with status 1.
                let errors = await child.standardErrorText()
                #expect(errors.contains("AddressSanitizer") && errors.contains("BUS"), "\(errors)")
                #expect(child.exit != .exited(0))
            }
        default:
            #expect(await child.exitStatus() == 42, "the handler installed before the guard did not run")
        }
    }
}
