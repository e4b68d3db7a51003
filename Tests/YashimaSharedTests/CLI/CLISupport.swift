// Running the built `yashima` executable (and shell pools around it) from tests: its exit status, its
// standard output as bytes, its standard error as text, and its JSON. Real processes, real files, real
// signals; waits are async and hold no thread of the cooperative pool (ChildProcess).

import Foundation
import Glibc
import Testing

@testable import YashimaShared

/// The built `yashima` executable.
let yashimaExecutable = productsDirectory().appendingPathComponent("yashima")

/// What one `yashima` (or shell) process did.
struct CLIResult {
    let status: Int32?
    let output: Data
    let error: String
    /// When the process ended, by its reaper's clock (not by when the awaiting test ran again).
    var exitedAt: ContinuousClock.Instant? = nil
    /// Just after it was spawned.
    var startedAt: ContinuousClock.Instant? = nil

    /// Seconds from its spawn to its end (nil if it was not seen ending): the process's own time, which a
    /// busy cooperative pool in this process does not stretch.
    var lifetime: Double? {
        guard let startedAt, let exitedAt else { return nil }
        let (seconds, attoseconds) = startedAt.duration(to: exitedAt).components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    var text: String { String(decoding: output, as: UTF8.self) }

    /// Standard output parsed as one JSON object.
    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: output)) as? [String: Any] ?? [:]
    }
}

/// How long a child (`yashima`, a shell) may run before it is killed and the test fails: a hang guard,
/// never a speed claim. Generous, because a child's own progress is the machine's to give: beside a
/// parallel suite and other jobs on two cores, `yashima stats` beside a suite holding 20,000 locks (the
/// census reads all of /proc/locks: 0.6 s for 10,000 lines in a debug build, idle) gave nothing within 60 s.
let childTimeout = 600.0

/// Runs `yashima arguments…` to its end, with `input` on its standard input (a pipe, then closed), or
/// /dev/null when `input` is nil (as a terminal user's or an `xargs` pool's command has: the run is cached).
func yashima(
    _ arguments: [String], input: Data? = nil, environment: [String: String] = [:], timeout: Double = childTimeout
) async throws -> CLIResult {
    try await runToEnd(
        ChildProcess(
            executable: yashimaExecutable, arguments, environment: environment, capturingStandardError: true,
            standardInputFromNullDevice: input == nil),
        input: input, timeout: timeout)
}

/// Runs `yashima` with arguments given as exact bytes (words that are not UTF-8), stdin /dev/null.
func yashima(
    bytes arguments: [[UInt8]], environment: [String: String] = [:], timeout: Double = childTimeout
) async throws -> CLIResult {
    try await run(yashimaExecutable.path, bytes: arguments, environment: environment, timeout: timeout)
}

/// Runs `program` with arguments given as exact bytes to its end, stdin /dev/null.
func run(
    _ program: String, bytes arguments: [[UInt8]], environment: [String: String] = [:], timeout: Double = childTimeout
) async throws -> CLIResult {
    try await runToEnd(
        ChildProcess(
            program, argumentBytes: arguments, environment: environment.isEmpty ? nil : environment,
            standardError: .capture, standardInputFromNullDevice: true),
        input: nil, timeout: timeout)
}

/// A path of exact bytes as a C string.
func cPath(_ bytes: [UInt8]) -> [CChar] { bytes.map { CChar(bitPattern: $0) } + [0] }

/// `text` as bytes, then `bytes` (a path or word that is not UTF-8).
func word(_ text: String, _ bytes: UInt8...) -> [UInt8] { Array(text.utf8) + bytes }

/// Runs `script` with /bin/sh to its end, its standard input /dev/null (as in a terminal-less pool).
func shell(_ script: String, environment: [String: String] = [:], timeout: Double = childTimeout) async throws
    -> CLIResult
{
    try await runToEnd(
        ChildProcess(
            executable: URL(fileURLWithPath: "/bin/sh"), ["-c", script], environment: environment,
            capturingStandardError: true, standardInputFromNullDevice: true),
        input: nil, timeout: timeout)
}

func runToEnd(_ child: ChildProcess, input: Data?, timeout: Double) async throws -> CLIResult {
    let started = ContinuousClock.now
    if let input { await offPool { child.sendAndClose(input) } } else { child.closeInput() }
    let output = await child.output(timeout: timeout)
    let status = await child.exitStatus(timeout: timeout)
    return CLIResult(
        status: status, output: output, error: await child.standardErrorText(), exitedAt: child.exitedAt,
        startedAt: started)
}

/// A storage directory, its scratch files, and the `--dir` argument, for one test.
final class CLIFixture: Sendable {
    let root = TemporaryDirectory("cli")
    var storage: String { root.path + "/storage" }
    var dir: [String] { ["--dir", storage] }

    init() throws {
        try FileManager.default.createDirectory(atPath: root.path, withIntermediateDirectories: true)
    }

    func path(_ name: String) -> String { root.path + "/" + name }

    /// Writes `contents` to `name` in the scratch folder (folders made as needed); returns the path.
    @discardableResult
    func file(_ name: String, _ contents: String, executable: Bool = false) throws -> String {
        let url = URL(fileURLWithPath: path(name))
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(contents.utf8).write(to: url)
        if executable { chmod(url.path, 0o755) }
        return url.path
    }

    /// Lines of a ledger file (missing: none).
    func lines(_ name: String) -> [String] {
        guard let text = try? String(contentsOfFile: path(name), encoding: .utf8) else { return [] }
        return text.split(separator: "\n").map(String.init)
    }
}

/// Bytes that look like a real input: printable and binary, different per `seed`.
func sampleBytes(_ count: Int, seed: UInt64) -> Data {
    var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
    return Data(
        (0..<count).map { _ in
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return UInt8(truncatingIfNeeded: state)
        })
}

/// Whether process `pid` is waiting for another process's lock: it has an inotify watch (a lock wait
/// watches the lock file's folder while it waits, Coordination/LockWatch; `yashima run` observes nothing
/// else), or it is blocked in flock(2) per /proc/locks.
func isWaitingForLock(_ pid: Int32) -> Bool {
    let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
    for descriptor in descriptors {
        guard
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(descriptor)"))
                == "anon_inode:inotify",
            let info = FileHandle(forReadingAtPath: "/proc/\(pid)/fdinfo/\(descriptor)").flatMap({ try? $0.readToEnd() }
            )
            .map({ String(decoding: $0, as: UTF8.self) })
        else { continue }
        if info.split(separator: "\n").contains(where: { $0.hasPrefix("inotify wd:") }) { return true }
    }
    // The census's reader: all of the file, merged over reads (ProcLocks).
    guard let locks = ProcLocks.read() else { return false }
    return locks.files.values.contains { $0.waitingProcesses.contains(pid) }
}
