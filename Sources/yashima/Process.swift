// Running the command for `yashima run`, and the signals around it. The command is started with
// posix_spawnp: standard input and standard error inherited, standard output into an unlinked temporary
// file (so a large output is never held in memory twice: it is mapped afterwards), default signal
// dispositions and an empty signal mask. SIGINT, SIGTERM and SIGHUP are blocked in every thread of
// `yashima run` and taken by one thread with sigwait: while the command runs they are forwarded to it
// (and nothing is stored); at any other moment the process removes its temporary files and exits at once
// with 128 + the signal (a wait for another process ends there; the kernel drops its locks).
// `yashima watch` blocks the same signals and takes them with `takeSignals` (WatchCommand.swift).

import Foundation
import Glibc
import Synchronization

/// The signal state of one `yashima run` process.
final class SignalControl: Sendable {
    static let shared = SignalControl()
    static let handled: [Int32] = [SIGINT, SIGTERM, SIGHUP]

    private struct State {
        var child: pid_t?
        var forwarded: Int32?
        var temporaryPaths: Set<String> = []
    }

    private let state = Mutex(State())

    private static var handledSet: sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in handled { sigaddset(&set, signal) }
        return set
    }

    /// Blocks the handled signals in the calling thread, and so in every thread it starts later. Call it
    /// first thing in `main`, before any other thread exists.
    static func blockSignals() {
        var set = handledSet
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    /// Starts the thread that takes the blocked signals, for `yashima run`.
    func start() {
        SignalControl.takeSignals { [self] signal in handle(signal) }
    }

    /// Starts a thread that takes the blocked signals (`blockSignals`) with sigwait and hands each to
    /// `handler`, on that thread.
    static func takeSignals(_ handler: @escaping @Sendable (Int32) -> Void) {
        let thread = Thread {
            var set = SignalControl.handledSet
            while true {
                var signal: Int32 = 0
                if sigwait(&set, &signal) == 0 { handler(signal) }
            }
        }
        thread.stackSize = 64 * 1024
        thread.start()
    }

    private func handle(_ signal: Int32) {
        state.withLock { state in
            if let child = state.child {
                kill(child, signal)
                if state.forwarded == nil { state.forwarded = signal }
                return
            }
            for path in state.temporaryPaths { unlink(path) }
            _exit(128 + signal)
        }
    }

    /// Runs `start` (which starts the command) so that a signal is either taken before it, and no command
    /// starts, or forwarded to the command.
    func whileStarting(_ start: () throws -> pid_t) rethrows -> pid_t {
        try state.withLock { state in
            let pid = try start()
            state.child = pid
            state.forwarded = nil
            return pid
        }
    }

    /// The command has exited: returns the signal forwarded to it, if any.
    func commandExited() -> Int32? {
        state.withLock { state in
            state.child = nil
            return state.forwarded
        }
    }

    /// A file to remove if a signal ends the process.
    func track(_ path: String) { _ = state.withLock { $0.temporaryPaths.insert(path) } }
    func untrack(_ path: String) { _ = state.withLock { $0.temporaryPaths.remove(path) } }
}

/// Why the command did not give a value to store.
enum CommandOutcome: Error {
    /// It exited with a non-zero status (or was killed by a signal: 128 + the signal); its standard
    /// output is passed through.
    case failed(status: Int32, standardOutput: Data)
    /// A signal was forwarded to it: nothing is stored.
    case interrupted(signal: Int32, standardOutput: Data)
    /// It could not be started (127: not found, 126: not executable).
    case notStarted(status: Int32, message: String)
    /// It exited 0 but an `--output` file is missing or unreadable.
    case missingOutput(String)
}

/// One run of the command.
struct CommandRunner: Sendable {
    /// The command's argv, as the process got it (exact bytes), as addresses (they live as long as the
    /// process: `CommandLine.unsafeArgv`).
    let argvAddresses: [UInt]
    let outputs: [String]
    let signals: SignalControl

    /// Runs the command and collects its results; throws `CommandOutcome` unless it exited 0 with every
    /// output present.
    func run() async throws -> RunRecord {
        let captured = try temporaryFile()
        defer { close(captured) }
        let started = ContinuousClock.now
        let pid = try signals.whileStarting { try spawn(standardOutput: captured) }
        await waitForExit(pid)
        let running = started.duration(to: .now)
        // Only now is the command reaped: until `commandExited`, a signal may still be forwarded to its
        // pid, which must not have been reused by another process.
        let forwarded = signals.commandExited()
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let standardOutput = try mapFile(captured)
        if let forwarded { throw CommandOutcome.interrupted(signal: forwarded, standardOutput: standardOutput) }
        let exitStatus = status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
        guard exitStatus == 0 else {
            throw CommandOutcome.failed(status: exitStatus, standardOutput: standardOutput)
        }
        var files: [RunRecord.OutputFile] = []
        for path in outputs {
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else {
                throw CommandOutcome.missingOutput(
                    "the command exited 0 but did not write --output \(path) (\(String(cString: strerror(errno))))")
            }
            defer { close(fd) }
            var status = stat()
            guard fstat(fd, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
                throw CommandOutcome.missingOutput("--output \(path) is not a regular file after the command ran")
            }
            files.append(RunRecord.OutputFile(path: path, mode: status.st_mode & 0o7777, contents: try mapFile(fd)))
        }
        let nanoseconds = running.components.seconds * 1_000_000_000 + running.components.attoseconds / 1_000_000_000
        return RunRecord(
            runningNanoseconds: UInt64(max(0, nanoseconds)), standardOutput: standardOutput, outputs: files)
    }

    private func spawn(standardOutput: Int32) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, standardOutput, STDOUT_FILENO)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in SignalControl.handled + [SIGPIPE, SIGQUIT] { sigaddset(&defaults, signal) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        var argv: [UnsafeMutablePointer<CChar>?] = argvAddresses.map { UnsafeMutablePointer(bitPattern: $0) }
        argv.append(nil)
        var pid: pid_t = 0
        let rc = posix_spawnp(&pid, argv[0]!, &actions, &attributes, argv, environ)
        guard rc == 0 else {
            let name = String(cString: argv[0]!)
            if rc == ENOENT { throw CommandOutcome.notStarted(status: 127, message: "\(name): command not found") }
            throw CommandOutcome.notStarted(
                status: rc == EACCES ? 126 : 127, message: "cannot run \(name): \(String(cString: strerror(rc)))")
        }
        return pid
    }

    /// Waits for the command to exit, on a thread of its own (never on the cooperative pool), leaving it
    /// unreaped (WNOWAIT): its pid stays its own until the caller reaps it.
    private func waitForExit(_ pid: pid_t) async {
        await offPool {
            var info = siginfo_t()
            while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) == -1 && errno == EINTR {}
        }
    }

    /// An unlinked temporary file for the command's standard output.
    private func temporaryFile() throws -> Int32 {
        let folder = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array((folder + "/yashima-stdout-XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else {
            throw CommandFailure.failed(
                "cannot create a temporary file in \(folder) for the command's output: \(String(cString: strerror(errno)))"
            )
        }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        return fd
    }
}

/// The whole file open at `fd`, mapped (copy-on-write, never written back) rather than read.
func mapFile(_ fd: Int32) throws -> Data {
    var status = stat()
    guard fstat(fd, &status) == 0 else { throw CommandFailure.failed("fstat: \(String(cString: strerror(errno)))") }
    let size = Int(status.st_size)
    guard size > 0 else { return Data() }
    guard let base = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0), base != MAP_FAILED else {
        throw CommandFailure.failed("cannot map a file of \(size) bytes: \(String(cString: strerror(errno)))")
    }
    let address = UInt(bitPattern: base)
    return Data(
        bytesNoCopy: base, count: size,
        deallocator: .custom { _, count in
            // Captures only an integer: safe on whichever thread frees the Data.
            munmap(UnsafeMutableRawPointer(bitPattern: address), count)
        })
}
