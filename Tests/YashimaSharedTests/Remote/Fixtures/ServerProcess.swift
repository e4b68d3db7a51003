// What the tests' real servers (NginxServer, RedisServer) share: finding the executable (a variable
// naming another one, else the usual places and PATH), whether CI requires it, a private folder under
// /tmp, retrying a start that lost its probed port to another process, and the server's one child
// process: spawned from a thread that blocks no signal, ready once a probe answers, stopped with
// SIGTERM then SIGKILL, SIGKILLed when the fixture goes away. Also loopback ports: one free now, and
// whether something accepts on one.

import Foundation
import Glibc
import Synchronization

@testable import YashimaShared

/// The executable named `name`: the one `variable` names when set (a path that does not exist plays a
/// machine without it), else the first executable of `candidates`, then of `PATH`'s folders.
func serverExecutable(_ name: String, named variable: String, candidates: [String]) -> String? {
    let environment = ProcessInfo.processInfo.environment
    if let chosen = environment[variable] {
        return FileManager.default.isExecutableFile(atPath: chosen) ? chosen : nil
    }
    let all = candidates + (environment["PATH"] ?? "").split(separator: ":").map { "\($0)/\(name)" }
    return all.first { FileManager.default.isExecutableFile(atPath: $0) }
}

/// True when the environment variable `variable` is `1` (CI: a missing server fails instead of skipping).
func serverRequired(by variable: String) -> Bool { ProcessInfo.processInfo.environment[variable] == "1" }

/// A new private folder `<template without XXXXXX><random>` (short, so socket paths fit sun_path).
func makeServerFolder(_ template: String) throws -> String {
    var bytes = Array(template.utf8CString)
    guard let made = mkdtemp(&bytes) else { throw RedisFixtureError(description: "mkdtemp failed") }
    return String(cString: made)
}

/// Runs `start` up to five times while it throws and `retrying` holds: another process may take a port
/// between our probe (`RedisServer.freePort`) and the server's bind. The last failure is thrown.
func startRetryingTakenPorts<Server>(retrying: Bool = true, _ start: () async throws -> Server) async throws
    -> Server
{
    for attempt in 0..<5 {
        do {
            return try await start()
        } catch  where retrying && attempt < 4 {
            continue
        }
    }
    throw RedisFixtureError(description: "the server did not start")
}

/// A test server's child process: at most one runs at a time.
final class ServerProcess: Sendable {
    private let running = Mutex<(process: Process, exit: ProcessExit)?>(nil)

    /// The running process's pid, 0 when none runs.
    var processID: Int32 { running.withLock { $0?.process.processIdentifier ?? 0 } }

    /// Starts `executable` with `arguments` (output discarded) and returns its exit, to watch while
    /// waiting for it to be ready.
    func launch(_ executable: String, _ arguments: [String]) async throws -> ProcessExit {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        let exit = ProcessExit(process)
        // A child inherits the spawning thread's blocked-signal mask, and the pool's threads block
        // SIGTERM: spawned from one, the server would ignore SIGTERM. Spawn from a thread that blocks
        // nothing.
        try await offPool {
            var empty = sigset_t()
            sigemptyset(&empty)
            pthread_sigmask(SIG_SETMASK, &empty, nil)
            try process.run()
        }
        running.withLock { $0 = (process, exit) }
        return exit
    }

    /// Off the pool, tries `probe` every `interval` microseconds until it answers (true), 10 s pass or
    /// the process exits (false).
    func waitUntilReady(_ exit: ProcessExit, every interval: UInt32, _ probe: @escaping @Sendable () -> Bool) async
        -> Bool
    {
        await offPool { () -> Bool in
            let limit = RemoteDeadline.after(.seconds(10))
            while !limit.hasPassed && !exit.hasExited {
                if probe() { return true }
                usleep(interval)
            }
            return false
        }
    }

    /// SIGKILL, then waits for the exit.
    func kill() async {
        guard let current = running.withLock({ $0 }) else { return }
        Glibc.kill(current.process.processIdentifier, SIGKILL)
        await current.exit.wait()
        running.withLock { $0 = nil }
    }

    /// SIGCONT (a SIGSTOPped server handles no SIGTERM) and SIGTERM, up to 3 s, then SIGKILL.
    func terminate() async {
        guard let current = running.withLock({ $0 }) else { return }
        Glibc.kill(current.process.processIdentifier, SIGCONT)
        Glibc.kill(current.process.processIdentifier, SIGTERM)
        if !(await current.exit.wait(within: 3)) {
            Glibc.kill(current.process.processIdentifier, SIGKILL)
            await current.exit.wait()
        }
        running.withLock { $0 = nil }
    }

    /// SIGKILL and wait, blocking (for a fixture's deinit).
    func killNow() {
        guard let current = running.withLock({ $0 }) else { return }
        Glibc.kill(current.process.processIdentifier, SIGKILL)
        current.process.waitUntilExit()
        running.withLock { $0 = nil }
    }

    deinit { killNow() }
}

/// A new TCP socket's `operation` on 127.0.0.1:`port` (`bind` or `connect`) succeeded.
func loopbackSocket(
    port: Int, _ operation: (Int32, UnsafePointer<sockaddr>, socklen_t) -> Int32, flags: Int32 = 0
) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | flags, 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = loopbackAddress(port: port)
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            operation(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
        }
    }
}
