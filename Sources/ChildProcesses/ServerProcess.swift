// What the real servers of the tests and the benchmarks (redis-server, nginx) share: finding the executable,
// whether CI requires it, a private folder under /tmp, retrying a start that lost its probed port, loopback
// ports (and whether a process itself listens on one), and the server's one child: spawned as a
// ChildProcess, ready once a probe answers, then stopped.

import Foundation
import Glibc
import Synchronization

/// Why a server could not be started.
public struct ServerError: Error, CustomStringConvertible {
    /// What went wrong.
    public let description: String

    /// An error saying `description`.
    public init(_ description: String) { self.description = description }
}

/// The executable named `name`: the one `variable` names when set (a path that does not exist plays a
/// machine without it), else the first executable of `candidates`, then of `PATH`'s folders.
public func serverExecutable(_ name: String, named variable: String, candidates: [String]) -> String? {
    let environment = ProcessInfo.processInfo.environment
    if let chosen = environment[variable] {
        return FileManager.default.isExecutableFile(atPath: chosen) ? chosen : nil
    }
    let all = candidates + (environment["PATH"] ?? "").split(separator: ":").map { "\($0)/\(name)" }
    return all.first { FileManager.default.isExecutableFile(atPath: $0) }
}

/// True when the environment variable `variable` is `1` (CI: a missing server fails instead of skipping).
public func serverRequired(by variable: String) -> Bool { ProcessInfo.processInfo.environment[variable] == "1" }

/// A new private folder `<template without XXXXXX><random>` (short, so socket paths fit sun_path).
public func makeServerFolder(_ template: String) throws -> String {
    var bytes = Array(template.utf8CString)
    guard let made = mkdtemp(&bytes) else { throw ServerError("mkdtemp \(template) failed: errno \(errno)") }
    return String(cString: made)
}

/// Runs `start` up to five times while it throws and `retrying` holds: another process may take a port
/// between our probe (`Loopback.freePort`) and the server's bind. The last failure is thrown.
public func startRetryingTakenPorts<Server>(retrying: Bool = true, _ start: () async throws -> Server) async throws
    -> Server
{
    for attempt in 0..<5 {
        do {
            return try await start()
        } catch  where retrying && attempt < 4 {
            continue
        }
    }
    throw ServerError("the server did not start")
}

/// TCP on 127.0.0.1: a port free now, and whether something accepts on one.
public enum Loopback {
    /// A port free now (and, with `withBus`, port + 10000 too: Redis Cluster's bus), below the kernel's
    /// ephemeral range, so no outgoing connection's local port takes it before the server binds it.
    public static func freePort(withBus: Bool = false) -> Int {
        let range = withBus ? 10000...(ephemeralStart - 10001) : 20000...min(29999, ephemeralStart - 1)
        for _ in 0..<100 {
            let port = Int.random(in: range)
            if isFree(port) && (!withBus || isFree(port + 10000)) { return port }
        }
        return Int.random(in: range)
    }

    /// The first port of `net.ipv4.ip_local_port_range` (connections' local ports), 32768 when unread,
    /// and never below 20001 (the ranges above stay non-empty).
    private static let ephemeralStart: Int = {
        let text = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
        let first = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).first.flatMap { Int($0) }
        return max(first ?? 32768, 20001)
    }()

    /// True when something accepts TCP connections on 127.0.0.1:`port`.
    public static func accepts(_ port: Int) -> Bool {
        guard let fd = connected(port) else { return false }
        close(fd)
        return true
    }

    /// A close-on-exec TCP socket connected to 127.0.0.1:`port`, or nil.
    public static func connected(_ port: Int) -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        guard withAddress(port, { connect(fd, $0, $1) }) == 0 else {
            close(fd)
            return nil
        }
        return fd
    }

    /// True when process `processID` itself holds a listening TCP socket (IPv4) on every port of `ports`:
    /// the sockets of /proc/net/tcp in state LISTEN, by inode, against the process's descriptors. A probe
    /// that only connects cannot tell a server from another that bound its port first (parallel tests pick
    /// free ports at random, and a server may bind its last port seconds after starting), and a test then
    /// talks to the other test's server: its values, its pauses, its kills.
    public static func isListening(processID: Int32, on ports: [Int]) -> Bool {
        guard processID > 0, let table = ProcFile.text("/proc/net/tcp") else { return false }
        var listening: [Int: Set<Substring>] = [:]  // port → inodes of its listening sockets
        for line in table.split(separator: "\n").dropFirst() {
            // sl, local address (hex IP:port), remote address, state (0A: LISTEN), …, inode (field 9).
            let fields = line.split(separator: " ")
            guard fields.count > 9, fields[3] == "0A", let colon = fields[1].lastIndex(of: ":"),
                let port = Int(fields[1][fields[1].index(after: colon)...], radix: 16)
            else { continue }
            listening[port, default: []].insert(fields[9])
        }
        let folder = "/proc/\(processID)/fd"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return false }
        var sockets = Set<Substring>()
        for name in names {
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: folder + "/" + name),
                target.hasPrefix("socket:["), target.hasSuffix("]")
            else { continue }
            sockets.insert(Substring(target.dropFirst(8).dropLast()))
        }
        return ports.allSatisfy { !(listening[$0] ?? []).isDisjoint(with: sockets) }
    }

    private static func isFree(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return withAddress(port) { bind(fd, $0, $1) } == 0
    }

    /// Calls `body` with 127.0.0.1:`port` as a `sockaddr`.
    private static func withAddress(_ port: Int, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }
}

/// A server's child process: at most one runs at a time (a restart replaces it).
public final class ServerProcess: Sendable {
    private let running = Mutex<ChildProcess?>(nil)

    /// A server process not started yet (`launch`).
    public init() {}

    /// The running process's pid, 0 when none runs.
    public var processID: Int32 { running.withLock { $0?.pid ?? 0 } }

    /// Starts `executable` with `arguments` (its stderr into `errorFile`, or discarded) and waits until
    /// `probe` answers (tried every `interval` microseconds, off the pool) for at most 10 s. Throws when
    /// it exits or never answers, with `log()` in the message.
    public func launch(
        _ executable: String, _ arguments: [String], errorFile: String = "/dev/null", every interval: UInt32,
        until probe: @escaping @Sendable () -> Bool, log: () -> String
    ) async throws {
        let child = try ChildProcess(executable, arguments, standardError: .file(errorFile))
        running.withLock { $0 = child }
        let ready = await offPool { () -> Bool in
            let limit = monotonicNanoseconds() + 10_000_000_000
            while monotonicNanoseconds() < limit && child.isRunning {
                if probe() { return true }
                usleep(interval)
            }
            return false
        }
        guard ready else {
            let status = child.exit.map { "\($0)" } ?? "running"
            await terminate()
            throw ServerError("\(executable) not ready (\(status)): \(log().suffix(500))")
        }
    }

    /// SIGSTOP, then waits (off the pool, 10 s at most) until every thread of the process is stopped. A
    /// multi-threaded server goes on answering until the kernel has stopped its last thread: on a loaded
    /// machine a SeaweedFS GET was answered 1.7 ms after the signal was sent (the test that paused it to
    /// hang its calls then saw a hit).
    public func pause() async {
        let pid = processID
        guard pid > 0 else { return }
        Glibc.kill(pid, SIGSTOP)
        _ = await offPool {
            let limit = monotonicNanoseconds() + 10_000_000_000
            while !Self.isStopped(pid) && monotonicNanoseconds() < limit { usleep(200) }
        }
    }

    /// Whether every thread of process `pid` is stopped (state `T` or `t` in its `stat`), or it is gone.
    public static func isStopped(_ pid: Int32) -> Bool {
        let folder = "/proc/\(pid)/task"
        guard let threads = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return true }
        return threads.allSatisfy { thread in
            // "tid (comm) S …": the state follows the last ')' (a command name may hold one).
            guard let stat = ProcFile.text("\(folder)/\(thread)/stat"), let close = stat.lastIndex(of: ")") else {
                return true  // the thread ended meanwhile
            }
            let state = stat[stat.index(after: close)...].drop(while: { $0 == " " }).first
            return state == "T" || state == "t"
        }
    }

    /// SIGKILL, then waits for the exit.
    public func kill() async {
        guard let child = running.withLock({ $0 }) else { return }
        child.kill(SIGKILL)
        _ = await child.exitAwaited()
        running.withLock { $0 = nil }
    }

    /// SIGCONT (a stopped server handles no SIGTERM) and SIGTERM, up to 3 s, then SIGKILL.
    public func terminate() async {
        guard let child = running.withLock({ $0 }) else { return }
        child.kill(SIGCONT)
        child.kill(SIGTERM)
        if await offPool({ child.waitForExit(timeout: .seconds(3)) }) == nil {
            child.kill(SIGKILL)
            _ = await child.exitAwaited()
        }
        running.withLock { $0 = nil }
    }

    /// SIGKILL and wait, blocking (for a fixture's deinit).
    public func killNow() {
        guard let child = running.withLock({ $0 }) else { return }
        child.kill(SIGKILL)
        _ = child.waitForExit(timeout: nil)
        running.withLock { $0 = nil }
    }

    deinit { killNow() }
}

/// CLOCK_MONOTONIC in nanoseconds.
func monotonicNanoseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
}
