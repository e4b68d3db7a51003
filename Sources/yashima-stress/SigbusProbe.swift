// `worker sigbus-probe`: the SIGBUS guard of CFileLock seen from a process that can die of it. The tests
// run it guarded (it must survive a truncated mapping), unguarded (it must die of SIGBUS, as without the
// guard) and with a handler installed before the guard (which must receive the unguarded fault).

import CFileLock
import Foundation
import Glibc

enum SigbusProbe {
    /// `worker sigbus-probe --file PATH --mode guarded|unguarded|chained`: maps PATH (at least 64 KiB)
    /// shared, truncates it to 0 and reads the word at 32 KiB. `guarded`: the mapping is under the SIGBUS
    /// guard; prints `SURVIVED <word> <trips>` and exits 0. `unguarded`: another range is guarded (so the
    /// guard's handler is installed) but not this one: the process must die of SIGBUS. `chained`: a
    /// handler installed before the guard must receive the unguarded fault; it exits with status 42.
    static func run(_ arguments: inout Arguments) throws -> Int32 {
        guard let path = arguments.string("file") else { throw ArgumentError(description: "sigbus-probe needs --file") }
        let mode = arguments.string("mode") ?? "guarded"
        try arguments.rejectUnknown()
        guard ["guarded", "unguarded", "chained"].contains(mode) else {
            throw ArgumentError(description: "--mode must be guarded, unguarded or chained, not '\(mode)'")
        }
        if mode == "chained" {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { _ in _exit(42) }
            sigemptyset(&action.sa_mask)
            guard sigaction(SIGBUS, &action, nil) == 0 else { throw ArgumentError(description: "sigaction failed") }
        }
        let length = 65_536
        let fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw ArgumentError(description: "cannot open \(path): errno \(errno)") }
        var err: Int32 = 0
        guard let base = ysh_mmap_shared(fd, length, &err) else {
            throw ArgumentError(description: "cannot map \(path): errno \(err)")
        }
        var decoy = [UInt8](repeating: 0, count: 16)
        let registered = decoy.withUnsafeMutableBytes { raw -> Int32 in
            mode == "guarded"
                ? ysh_sigbus_guard_register(base, length, &err)
                : ysh_sigbus_guard_register(raw.baseAddress!, raw.count, &err)
        }
        guard registered == 0 else { throw ArgumentError(description: "guard registration failed: errno \(err)") }
        guard ftruncate(fd, 0) == 0 else { throw ArgumentError(description: "ftruncate failed: errno \(errno)") }
        emit("TRUNCATED")
        let word = ysh_atomic_load_u64((base + 32_768).assumingMemoryBound(to: UInt64.self))
        emit("SURVIVED \(word) \(ysh_sigbus_guard_trips())")
        return 0
    }
}
