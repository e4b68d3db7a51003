// One child process on pipes, shared by the stress runner, the benchmarks and the tests (an internal
// library target, not a product): spawned with posix_spawn, its stdout read line by line with a deadline
// (poll, never an unbounded read), its stdin written line by line, signalled, and reaped by a thread of
// its own the moment it exits, so every wait for its exit (blocking or async) waits on that and nothing
// polls. The child starts with no signal blocked and every signal at its default action, whatever the
// spawning thread blocks or the parent ignores: a Dispatch thread blocks some signals, and a parent that
// ignores SIGPIPE (the stress runner does) would otherwise hand that on. Foundation's `Process` resets
// the mask (checked: a child spawned from a thread blocking SIGTERM had none blocked) but keeps ignored
// signals ignored, and it offers no way to start a child under another user's launcher with its stderr
// in a file, which the stress runner needs. Like `Process`, the child closes every descriptor but its
// three standard ones before it runs.

import Foundation
import Glibc
import Synchronization

/// How a child process ended.
public enum ChildExit: Equatable, Sendable, CustomStringConvertible {
    /// It called exit with this status.
    case exited(Int32)
    /// A signal ended it.
    case signaled(Int32)

    /// The exit status, or the signal number for a child a signal ended (as Foundation's
    /// `terminationStatus` reports them).
    public var status: Int32 {
        switch self {
        case .exited(let code): return code
        case .signaled(let signal): return signal
        }
    }

    /// "exit status N" or "signal N".
    public var description: String {
        switch self {
        case .exited(let code): return "exit status \(code)"
        case .signaled(let signal): return "signal \(signal)" + (signal == SIGKILL ? " (SIGKILL)" : "")
        }
    }

    /// Decodes a `waitpid` status (the W* macros are not imported into Swift).
    init(waitStatus status: Int32) {
        let signal = status & 0x7F
        self = signal == 0 ? .exited((status >> 8) & 0xFF) : .signaled(signal)
    }
}

/// Why a child could not be started.
public struct SpawnError: Error, CustomStringConvertible {
    /// What failed, with its errno.
    public let description: String
}

/// One running child process: its pipes, its exit, and what it has written so far.
public final class ChildProcess: Sendable {
    /// Where the child's standard error goes.
    public enum StandardError: Sendable {
        /// This process's standard error.
        case inherit
        /// A pipe this object reads (`standardErrorText()`, after the child exited: keep it short).
        case capture
        /// A file created (or truncated) at this path, mode 0600.
        case file(String)
    }

    /// The child's process id.
    public let pid: Int32
    private let input: Mutex<Int32>
    /// The read end of the child's stdout, and what was read past the last line returned. Held while a
    /// read waits, so reads of one child run one at a time.
    private let output: Mutex<(descriptor: Int32, pending: [UInt8])>
    private let errors: Int32?
    private let ending = Ending()

    /// Starts `program` (a path, or a name looked up in `PATH`) with `arguments`, and `environment` added to
    /// this process's environment (nil: this process's, unchanged).
    public convenience init(
        _ program: String, _ arguments: [String], environment: [String: String]? = nil,
        standardError: StandardError = .inherit, standardInputFromNullDevice: Bool = false
    ) throws {
        try self.init(
            program, argumentBytes: arguments.map { Array($0.utf8) }, environment: environment,
            standardError: standardError, standardInputFromNullDevice: standardInputFromNullDevice)
    }

    /// Starts `program` with arguments given as exact bytes (words need not be UTF-8; none may hold NUL).
    /// With `standardInputFromNullDevice`, its stdin is /dev/null instead of a pipe from this object.
    public init(
        _ program: String, argumentBytes arguments: [[UInt8]], environment: [String: String]? = nil,
        standardError: StandardError = .inherit, standardInputFromNullDevice: Bool = false
    ) throws {
        ChildProcess.ignoreBrokenPipes
        var toChild: [Int32] = [-1, -1]
        var fromChild: [Int32] = [-1, -1]
        var errorPipe: [Int32] = [-1, -1]
        var opened: [Int32] = []
        defer { for fd in opened { close(fd) } }  // the child's ends, and ours on failure
        for index in 0..<(standardError.isCapture ? 3 : 2) {
            var ends: [Int32] = [-1, -1]
            guard pipe(&ends) == 0 else { throw SpawnError(description: "pipe failed: errno \(errno)") }
            // Our ends must not leak into other children (a leaked stdin write end would hide our EOF).
            for fd in ends { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
            opened += ends
            switch index {
            case 0: toChild = ends
            case 1: fromChild = ends
            default: errorPipe = ends
            }
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if standardInputFromNullDevice {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        } else {
            posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
        }
        posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
        switch standardError {
        case .inherit: break
        case .capture: posix_spawn_file_actions_adddup2(&actions, errorPipe[1], 2)
        case .file(let path): posix_spawn_file_actions_addopen(&actions, 2, path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        }
        Self.closeOtherDescriptors(in: &actions)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var nothing = sigset_t()
        sigemptyset(&nothing)
        posix_spawnattr_setsigmask(&attributes, &nothing)
        var everything = sigset_t()
        sigfillset(&everything)
        sigdelset(&everything, SIGKILL)
        sigdelset(&everything, SIGSTOP)
        posix_spawnattr_setsigdefault(&attributes, &everything)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        var variables = ProcessInfo.processInfo.environment
        if let environment { variables.merge(environment) { $1 } }
        var argv =
            ([Array(program.utf8)] + arguments).map { word in
                (word + [0]).withUnsafeBufferPointer { buffer in
                    buffer.withMemoryRebound(to: CChar.self) { strdup($0.baseAddress!) }
                }
            } + [nil]
        var envp = variables.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let status = posix_spawnp(&pid, program, &actions, &attributes, &argv, &envp)
        guard status == 0 else { throw SpawnError(description: "posix_spawn of \(program) failed: errno \(status)") }
        // Ours stay open; the child's copies close here (the defer).
        opened.removeAll { [toChild[1], fromChild[0], errorPipe[0]].contains($0) }
        self.pid = pid
        input = Mutex(toChild[1])
        output = Mutex((fromChild[0], []))
        errors = standardError.isCapture ? errorPipe[0] : nil
        startReaper()
    }

    /// Makes the child close every descriptor from 3 up before it runs (as Foundation's `Process` does):
    /// a descriptor another thread opened without close-on-exec would otherwise leak into it. One that
    /// leaked while a test was writing a copy of an executable made exec'ing that copy fail with ETXTBSY.
    /// `posix_spawn_file_actions_addclosefrom_np` (glibc 2.34) is looked up at run time, since Swift's
    /// Glibc module leaves GNU extensions out; without it nothing is closed.
    private static func closeOtherDescriptors(in actions: inout posix_spawn_file_actions_t) {
        typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        guard let library = dlopen(nil, RTLD_LAZY) else { return }
        defer { dlclose(library) }
        guard let symbol = dlsym(library, "posix_spawn_file_actions_addclosefrom_np") else { return }
        _ = unsafeBitCast(symbol, to: AddCloseFrom.self)(&actions, 3)
    }

    /// A write to a child that has exited must fail (EPIPE), not kill this process: SIGPIPE is ignored,
    /// once, by the first spawn. Children get the default action back (the spawn resets every signal).
    private static let ignoreBrokenPipes: Void = { signal(SIGPIPE, SIG_IGN) }()

    /// A thread that blocks in `waitpid` until the child exits, records how, and wakes every waiter. It
    /// holds only `ending`, never this object, so a child object dropped early still reaches its deinit.
    private func startReaper() {
        let (pid, ending) = (pid, ending)
        let thread = Thread {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            ending.record(ChildExit(waitStatus: status))
        }
        thread.stackSize = 64 * 1024
        thread.start()
    }

    // MARK: Exit

    /// How the child ended; nil while it runs.
    public var exit: ChildExit? { ending.exit }

    /// When the reaper saw the child end (its thread's clock, not the awaiting task's: a busy cooperative
    /// pool delays the task, not this); nil while it runs.
    public var exitedAt: ContinuousClock.Instant? { ending.exitedAt }

    /// Whether the child still runs.
    public var isRunning: Bool { exit == nil }

    /// Waits for the child to exit, at most `timeout` (nil: however long it takes). Blocking.
    public func waitForExit(timeout: Duration?) -> ChildExit? {
        ending.wait(timeout: timeout)
    }

    /// Suspends until the child exits; holds no thread meanwhile.
    public func exitAwaited() async -> ChildExit {
        await ending.awaited()
    }

    /// Sends `signal` (default SIGKILL) to the child, if it still runs.
    public func kill(_ signal: Int32 = SIGKILL) {
        guard isRunning else { return }
        _ = Glibc.kill(pid, signal)
    }

    // MARK: Input

    /// Writes `line` and a newline to the child's stdin; a child that is gone is ignored.
    public func send(_ line: String) {
        write(Data((line + "\n").utf8))
    }

    /// Writes `data` to the child's stdin; a child that is gone is ignored.
    public func write(_ data: Data) {
        input.withLock { fd in
            guard fd >= 0 else { return }
            data.withUnsafeBytes { raw in
                var offset = 0
                while offset < raw.count {
                    let written = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
                    if written < 0 && errno == EINTR { continue }
                    if written <= 0 { return }
                    offset += written
                }
            }
        }
    }

    /// Closes the child's stdin (it reads end of file).
    public func closeInput() {
        input.withLock { fd in
            if fd >= 0 { close(fd) }
            fd = -1
        }
    }

    // MARK: Output

    /// The next line of output (without its newline), or nil when the child closed its output or
    /// `timeout` passed first. Blocking.
    public func readLine(timeout: Duration = .seconds(60)) -> String? {
        let deadline = ContinuousClock.now.advanced(by: timeout)
        return output.withLock { output in
            while true {
                if let line = Self.takeLine(from: &output.pending) { return line }
                guard Self.readMore(into: &output, before: deadline) else { return nil }
            }
        }
    }

    /// Reads lines until one satisfies `predicate` (the others are dropped); nil when the output closes or
    /// `timeout` passes first. Blocking.
    public func readLine(timeout: Duration = .seconds(60), where predicate: (String) -> Bool) -> String? {
        let deadline = ContinuousClock.now.advanced(by: timeout)
        while let line = readLine(timeout: max(.milliseconds(10), ContinuousClock.now.duration(to: deadline))) {
            if predicate(line) { return line }
        }
        return nil
    }

    /// The next line that starts with `{`, parsed as a JSON object. Blocking.
    public func readJSON(timeout: Duration = .seconds(60)) -> [String: Any]? {
        guard let line = readLine(timeout: timeout, where: { $0.hasPrefix("{") }) else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
    }

    /// Everything the child still writes, as raw bytes, until it closes its output or `timeout` passes.
    /// Blocking.
    public func readToEnd(timeout: Duration = .seconds(60)) -> Data {
        let deadline = ContinuousClock.now.advanced(by: timeout)
        return output.withLock { output in
            while Self.readMore(into: &output, before: deadline) {}
            defer { output.pending.removeAll() }
            return Data(output.pending)
        }
    }

    /// What the child wrote to stderr when started with `.capture`, read to its end. Blocking: call once
    /// the child has exited.
    public func standardErrorText() -> String {
        guard let errors else { return "" }
        var text = Data()
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = read(errors, &chunk, chunk.count)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            text.append(contentsOf: chunk[0..<count])
        }
        return String(decoding: text, as: UTF8.self)
    }

    // MARK: Many children at once (the stress runner's workers)

    /// The read end of the child's stdout (-1 once it closed), for `readLines(from:waitingAtMost:onLine:)`.
    var outputDescriptor: Int32 { output.withLock { $0.descriptor } }

    /// Whether the child's output is still open: false once everything it wrote has been read to the end.
    public var isOutputOpen: Bool { outputDescriptor >= 0 }

    /// One read of what the child wrote (it is ready), and the complete lines it finishes. False at end
    /// of file (the descriptor is then closed).
    func readAvailable(_ deliver: (String) -> Void) -> Bool {
        let lines = output.withLock { output -> [String]? in
            guard output.descriptor >= 0 else { return nil }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let count = read(output.descriptor, &chunk, chunk.count)
            if count < 0 && (errno == EINTR || errno == EAGAIN) { return [] }
            guard count > 0 else {
                close(output.descriptor)
                output.descriptor = -1
                return nil
            }
            output.pending.append(contentsOf: chunk[0..<count])
            var lines: [String] = []
            while let line = Self.takeLine(from: &output.pending) { lines.append(line) }
            return lines
        }
        guard let lines else { return false }
        for line in lines { deliver(line) }
        return true
    }

    // MARK: Reading

    private static func takeLine(from pending: inout [UInt8]) -> String? {
        guard let newline = pending.firstIndex(of: 0x0A) else { return nil }
        let line = String(decoding: pending[0..<newline], as: UTF8.self)
        pending.removeSubrange(0...newline)
        return line
    }

    /// Appends the next chunk of output; false when the output is closed or `deadline` passed.
    private static func readMore(
        into output: inout (descriptor: Int32, pending: [UInt8]), before deadline: ContinuousClock.Instant
    ) -> Bool {
        guard output.descriptor >= 0 else { return false }
        while true {
            let remaining = ContinuousClock.now.duration(to: deadline)
            if remaining <= .zero { return false }
            var descriptor = pollfd(fd: output.descriptor, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(min(remaining, .seconds(1)).nanosecondsClamped / 1_000_000) + 1
            let ready = poll(&descriptor, 1, milliseconds)
            if ready < 0 && errno == EINTR { continue }
            if ready <= 0 { continue }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let count = read(output.descriptor, &chunk, chunk.count)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 {
                close(output.descriptor)
                output.descriptor = -1
                return false
            }
            output.pending.append(contentsOf: chunk[0..<count])
            return true
        }
    }

    /// A child still running here was left by a failed test or run (every good path waits for it):
    /// SIGKILL, then a wait that is short because nothing can delay a killed process's exit.
    deinit {
        if exit == nil {
            _ = Glibc.kill(pid, SIGKILL)
            _ = ending.wait(timeout: nil)
        }
        input.withLock { if $0 >= 0 { close($0) } }
        output.withLock { if $0.descriptor >= 0 { close($0.descriptor) } }
        if let errors { close(errors) }
    }
}

/// How a child ended, once its reaper knows, and everyone waiting for that.
private final class Ending: Sendable {
    private let state = Mutex<(exit: ChildExit?, waiters: [CheckedContinuation<ChildExit, Never>])>((nil, []))
    /// Signalled once when the child ends; each blocking waiter that wakes signals it again for the next.
    private let ended = DispatchSemaphore(value: 0)
    private let endedAt = Mutex<ContinuousClock.Instant?>(nil)

    var exit: ChildExit? { state.withLock { $0.exit } }

    var exitedAt: ContinuousClock.Instant? { endedAt.withLock { $0 } }

    func record(_ exit: ChildExit) {
        endedAt.withLock { $0 = .now }
        let waiters = state.withLock { state -> [CheckedContinuation<ChildExit, Never>] in
            state.exit = exit
            defer { state.waiters = [] }
            return state.waiters
        }
        ended.signal()
        for waiter in waiters { waiter.resume(returning: exit) }
    }

    func wait(timeout: Duration?) -> ChildExit? {
        if let exit { return exit }
        if let timeout {
            guard ended.wait(timeout: .now() + .nanoseconds(Int(timeout.nanosecondsClamped))) == .success else {
                return exit
            }
        } else {
            ended.wait()
        }
        ended.signal()  // the baton, for the next blocking waiter
        return exit
    }

    func awaited() async -> ChildExit {
        await withCheckedContinuation { (continuation: CheckedContinuation<ChildExit, Never>) in
            let ended = state.withLock { state -> ChildExit? in
                if let exit = state.exit { return exit }
                state.waiters.append(continuation)
                return nil
            }
            if let ended { continuation.resume(returning: ended) }
        }
    }
}

extension ChildProcess.StandardError {
    fileprivate var isCapture: Bool {
        if case .capture = self { return true }
        return false
    }
}

extension Duration {
    /// Whole nanoseconds, at least 0 and at most `Int64.max`.
    var nanosecondsClamped: Int64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? Int64.max : scaled + attoseconds / 1_000_000_000
    }
}
