// Running the command for `yashima run`, and the signals around it. The command is started with
// posix_spawnp: standard input and standard error inherited, standard output into an unlinked temporary
// file (so a large output is never held in memory twice: it is mapped afterwards), default signal
// dispositions and an empty signal mask. SIGINT, SIGTERM and SIGHUP are blocked in every thread of
// `yashima run` and taken by one thread with sigwait: while the command runs they are forwarded to it
// (and nothing is stored); at any other moment the process removes its temporary files and exits at once
// with 128 + the signal (a wait for another process ends there; the kernel drops its locks). A hit does
// not start that thread unless it may block (see `start`): one that arrives during a short hit is taken
// at its end (`exitIfSignalled`), with the same status.
// `yashima watch` blocks the same signals and takes them with `takeSignals` (WatchCommand.swift).

import Foundation
import Glibc
import Synchronization
@_spi(Operator) import YashimaShared

/// The signal state of one `yashima run` process.
final class SignalControl: Sendable {
    static let shared = SignalControl()
    static let handled: [Int32] = [SIGINT, SIGTERM, SIGHUP]

    private struct State {
        var child: pid_t?
        var forwarded: Int32?
        var temporaryPaths: Set<Word> = []
    }

    private let state = Mutex(State())
    /// Whether the thread that takes the signals runs.
    private let started = Atomic<Bool>(false)

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

    /// Starts the thread that takes the blocked signals, for `yashima run`, once: before anything that
    /// may block or wait (starting the command, waiting for another process, reading standard input or
    /// `--input` files, the remote tier, writing output files or a large standard output), so that a
    /// signal ends or is forwarded at once. A hit that does none of these never starts it (a thread is a
    /// good part of a hit's cost) and calls `exitIfSignalled` before it exits.
    func start() {
        guard !started.exchange(true, ordering: .acquiringAndReleasing) else { return }
        SignalControl.takeSignals { [self] signal in handle(signal) }
    }

    /// When the thread was never started: a handled signal that arrived meanwhile (blocked, so pending)
    /// ends the process as the thread would have, with 128 + the signal.
    func exitIfSignalled() {
        guard !started.load(ordering: .acquiring) else { return }
        var pending = sigset_t()
        sigemptyset(&pending)
        guard sigpending(&pending) == 0 else { return }
        for signal in SignalControl.handled where sigismember(&pending, signal) == 1 { handle(signal) }
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
            for path in state.temporaryPaths { OutputFiles.removeTree(path) }
            _exit(128 + signal)
        }
    }

    /// Runs `start` (which starts the command) so that a signal is either taken before it, and no command
    /// starts, or forwarded to the command.
    func whileStarting(_ start: () throws -> pid_t) rethrows -> pid_t {
        self.start()
        return try state.withLock { state in
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

    /// A file or folder to remove if a signal ends the process.
    func track(_ path: Word) {
        start()
        _ = state.withLock { $0.temporaryPaths.insert(path) }
    }
    func untrack(_ path: Word) { _ = state.withLock { $0.temporaryPaths.remove(path) } }
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
    /// It exited 0 but an output cannot be stored (a symlink in a folder): its results stand, unstored.
    case unstorable(message: String, standardOutput: Data)
}

/// One run of the command.
struct CommandRunner: Sendable {
    /// The command's argv, exact.
    let argv: [Word]
    let outputs: [Word]
    /// The command's standard input (nil: this process's).
    let standardInput: Int32?
    let signals: SignalControl

    /// Runs the command and collects its results; throws `CommandOutcome` unless it exited 0 with every
    /// output present and storable.
    func run() async throws -> RunRecord {
        let captured = try temporaryFile(purpose: "standard output")
        defer { close(captured) }
        let started = ContinuousClock.now
        let exitStatus = try await runToExit(standardOutput: captured)
        let running = started.duration(to: .now)
        let standardOutput = try mapFile(captured)
        if case .interrupted(let signal) = exitStatus {
            throw CommandOutcome.interrupted(signal: signal, standardOutput: standardOutput)
        }
        guard case .exited(0) = exitStatus else {
            throw CommandOutcome.failed(status: exitStatus.code, standardOutput: standardOutput)
        }
        let items: [RunRecord.Item]
        do {
            items = try OutputFiles.collect(outputs)
        } catch let problem as UnstorableOutput {
            throw CommandOutcome.unstorable(message: problem.message, standardOutput: standardOutput)
        }
        let nanoseconds = running.components.seconds * 1_000_000_000 + running.components.attoseconds / 1_000_000_000
        return RunRecord(
            runningNanoseconds: UInt64(max(0, nanoseconds)), standardOutput: standardOutput,
            outputCount: outputs.count, items: items)
    }

    /// Runs the command with every standard stream passed through (uncached): its exit status, or
    /// 128 + the signal forwarded to it.
    func runPassingThrough() async throws -> Int32 {
        try await runToExit(standardOutput: nil).code
    }

    /// How the command ended.
    enum Ending {
        case exited(Int32)
        case interrupted(signal: Int32)

        var code: Int32 {
            switch self {
            case .exited(let status): return status
            case .interrupted(let signal): return 128 + signal
            }
        }
    }

    private func runToExit(standardOutput: Int32?) async throws -> Ending {
        let pid = try signals.whileStarting { try spawn(standardOutput: standardOutput) }
        await waitForExit(pid)
        // Only now is the command reaped: until `commandExited`, a signal may still be forwarded to its
        // pid, which must not have been reused by another process.
        let forwarded = signals.commandExited()
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        if let forwarded { return .interrupted(signal: forwarded) }
        return .exited(status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F))
    }

    private func spawn(standardOutput: Int32?) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let standardInput { posix_spawn_file_actions_adddup2(&actions, standardInput, STDIN_FILENO) }
        if let standardOutput { posix_spawn_file_actions_adddup2(&actions, standardOutput, STDOUT_FILENO) }
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
        var argv: [UnsafeMutablePointer<CChar>?] = self.argv.map { word in
            word.withCString { strdup($0) }
        }
        argv.append(nil)
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let rc = posix_spawnp(&pid, argv[0]!, &actions, &attributes, argv, environ)
        guard rc == 0 else {
            let name = self.argv[0].quoted
            if rc == ENOENT { throw CommandOutcome.notStarted(status: 127, message: "\(name): command not found") }
            throw CommandOutcome.notStarted(
                status: rc == EACCES ? 126 : 127, message: "cannot run \(name): \(String(cString: strerror(rc)))")
        }
        return pid
    }

    /// Waits for the command to exit, on a thread of its own (never on the cooperative pool), leaving it
    /// unreaped (WNOWAIT): its pid stays its own until the caller reaps it.
    private func waitForExit(_ pid: pid_t) async {
        await StorageOperator.offPool {
            var info = siginfo_t()
            while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) == -1 && errno == EINTR {}
        }
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
