// The orchestrator's worker processes: real processes of this executable (/proc/self/exe) started with
// posix_spawn on pipes, released together at a READY/GO barrier, and read with poll so no single worker
// can block the orchestrator. Every wait has a deadline; a worker still running past it is SIGKILLed and
// counted as hung. Runs on the main thread (never the cooperative pool).

import Foundation
import Glibc

/// How a worker process ended.
enum WorkerExit: Equatable, CustomStringConvertible {
    case exited(Int32)
    case signaled(Int32)

    var description: String {
        switch self {
        case .exited(let code): return "exit status \(code)"
        case .signaled(let signal): return "signal \(signal)" + (signal == SIGKILL ? " (SIGKILL)" : "")
        }
    }
}

struct SpawnError: Error, CustomStringConvertible {
    let description: String
}

/// One worker process and what it has said so far.
@MainActor
final class WorkerProcess {
    let pid: pid_t
    let index: Int
    let phase: String
    let stderrPath: String
    fileprivate var input: Int32
    fileprivate var output: Int32
    fileprivate var pending: [UInt8] = []
    fileprivate(set) var isReady = false
    fileprivate(set) var progress = 0
    fileprivate(set) var result: WorkerResult?
    fileprivate(set) var exit: WorkerExit?
    fileprivate(set) var killedOnPurpose = false
    fileprivate(set) var hung = false
    fileprivate(set) var malformedResult: String?

    fileprivate init(pid: pid_t, index: Int, phase: String, stderrPath: String, input: Int32, output: Int32) {
        self.pid = pid
        self.index = index
        self.phase = phase
        self.stderrPath = stderrPath
        self.input = input
        self.output = output
    }

    var isRunning: Bool { exit == nil }
    var label: String { "\(phase) worker \(index) (pid \(pid))" }

    /// Writes one line to the worker's stdin; a worker that is gone is ignored (SIGPIPE is ignored).
    func send(_ line: String) {
        guard input >= 0 else { return }
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(input, $0.baseAddress!, $0.count) }
    }

    /// The last lines the worker wrote to stderr (for failure reports).
    func stderrTail(lines count: Int = 6) -> String {
        guard let text = try? String(contentsOfFile: stderrPath, encoding: .utf8) else { return "" }  // no log, no tail
        return text.split(separator: "\n").suffix(count).joined(separator: " | ")
    }

    fileprivate func closeDescriptors() {
        if input >= 0 { close(input) }
        if output >= 0 { close(output) }
        input = -1
        output = -1
    }
}

/// The workers of one scenario phase (plus replacements started while it runs).
@MainActor
final class Fleet {
    let scenario: String
    let planPath: String
    let logDirectory: String
    let progress: ProgressLine
    private(set) var workers: [WorkerProcess] = []
    /// Once set, workers started later get GO as soon as they say READY (replacements).
    var releasesLateWorkers = false

    static let executable: String = {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return "/proc/self/exe" }
        return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }()

    init(scenario: String, planPath: String, logDirectory: String, progress: ProgressLine) {
        self.scenario = scenario
        self.planPath = planPath
        self.logDirectory = logDirectory
        self.progress = progress
    }

    var running: [WorkerProcess] { workers.filter(\.isRunning) }

    /// Operations so far: finished workers' results plus running workers' last PROGRESS.
    var operations: Int { workers.reduce(0) { $0 + ($1.result?.operations ?? $1.progress) } }

    // MARK: Starting

    /// Starts `worker scenario --name <scenario> --plan <plan> --index <index> --phase <phase>`.
    @discardableResult
    func spawn(phase: String, index: Int) throws -> WorkerProcess {
        let launcher = SharedUsers.launcher(forWorker: index, executable: Fleet.executable)
        let arguments =
            launcher.arguments + [
                "worker", "scenario", "--name", scenario, "--plan", planPath, "--index", String(index),
                "--phase", phase,
            ]
        let stderrPath = logDirectory + "/\(phase)-\(index).stderr"
        var toChild: [Int32] = [-1, -1]
        var fromChild: [Int32] = [-1, -1]
        guard pipe(&toChild) == 0 else { throw SpawnError(description: "pipe failed: errno \(errno)") }
        guard pipe(&fromChild) == 0 else {
            close(toChild[0])
            close(toChild[1])
            throw SpawnError(description: "pipe failed: errno \(errno)")
        }
        // Our ends must not leak into other workers (a leaked stdin write end would hide our EOF).
        for fd in toChild + fromChild { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
        posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGPIPE)  // the orchestrator ignores SIGPIPE; workers get the default back
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF))

        let environment = ProcessInfo.processInfo.environment.map { "\($0.key)=\($0.value)" }
        var argv = arguments.map { strdup($0) } + [nil]
        var envp = environment.map { strdup($0) } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, launcher.program, &actions, &attributes, &argv, &envp)
        close(toChild[0])
        close(fromChild[1])
        guard status == 0 else {
            close(toChild[1])
            close(fromChild[0])
            throw SpawnError(description: "posix_spawn of \(Fleet.executable) failed: errno \(status)")
        }
        let worker = WorkerProcess(
            pid: pid, index: index, phase: phase, stderrPath: stderrPath, input: toChild[1], output: fromChild[0])
        workers.append(worker)
        return worker
    }

    // MARK: Waiting

    /// The start barrier: waits until every running worker said READY, then sends GO to all of them
    /// at once. Workers not READY by `deadline` are SIGKILLed as hung; returns false then.
    @discardableResult
    func release(deadline: UInt64, onLine: (WorkerProcess, String) -> Void = { _, _ in }) -> Bool {
        while running.contains(where: { !$0.isReady }) {
            if monotonicNanoseconds() >= deadline {
                for worker in running where !worker.isReady { terminate(worker, hung: true) }
                return false
            }
            pump(timeoutMilliseconds: 20, onLine: onLine)
        }
        for worker in running {
            worker.isReady = false
            worker.send("GO")
        }
        return true
    }

    /// Runs until every worker has exited, calling `tick` between reads. Workers still running at
    /// `deadline` are SIGKILLed and counted as hung.
    func wait(deadline: UInt64, onLine: (WorkerProcess, String) -> Void = { _, _ in }, tick: () -> Void = {}) {
        while !running.isEmpty {
            if monotonicNanoseconds() >= deadline {
                for worker in running { terminate(worker, hung: true) }
                return
            }
            pump(timeoutMilliseconds: 5, onLine: onLine)
            tick()
        }
    }

    /// Sends a line (STOP, GO) to every running worker.
    func broadcast(_ line: String) {
        for worker in running { worker.send(line) }
    }

    /// SIGKILLs a worker on purpose (chaos) and reaps it.
    func kill(_ worker: WorkerProcess) {
        guard worker.isRunning else { return }
        worker.killedOnPurpose = true
        terminate(worker, hung: false)
    }

    /// Kills every worker still running (cleanup after an orchestrator error).
    func shutdown() {
        for worker in running { terminate(worker, hung: true) }
    }

    private func terminate(_ worker: WorkerProcess, hung: Bool) {
        guard worker.isRunning else { return }
        worker.hung = hung
        _ = Glibc.kill(worker.pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(worker.pid, &status, 0) < 0 && errno == EINTR {}
        worker.exit = WorkerFleetStatus.decode(status)
        worker.closeDescriptors()
    }

    // MARK: Reading

    /// Reads whatever the workers wrote (waiting at most `timeoutMilliseconds`), handles the protocol
    /// lines (READY, PROGRESS, RESULT) and hands every other line to `onLine`; reaps exited workers.
    func pump(timeoutMilliseconds: Int32, onLine: (WorkerProcess, String) -> Void = { _, _ in }) {
        let open = workers.filter { $0.output >= 0 }
        if open.isEmpty {
            usleep(UInt32(timeoutMilliseconds) * 1000)
        } else {
            var descriptors = open.map { pollfd(fd: $0.output, events: Int16(POLLIN), revents: 0) }
            let ready = poll(&descriptors, nfds_t(descriptors.count), timeoutMilliseconds)
            if ready > 0 {
                var chunk = [UInt8](repeating: 0, count: 65536)
                for (worker, descriptor) in zip(open, descriptors) where descriptor.revents != 0 && worker.output >= 0 {
                    let count = read(worker.output, &chunk, chunk.count)
                    if count > 0 {
                        worker.pending.append(contentsOf: chunk[0..<count])
                        deliverLines(of: worker, onLine: onLine)
                    } else if count == 0 || (errno != EINTR && errno != EAGAIN) {
                        close(worker.output)
                        worker.output = -1
                    }
                }
            }
        }
        reap()
        progress.update(operations: operations, processes: running.count)
    }

    private func deliverLines(of worker: WorkerProcess, onLine: (WorkerProcess, String) -> Void) {
        while let newline = worker.pending.firstIndex(of: 0x0A) {
            let line = String(decoding: worker.pending[0..<newline], as: UTF8.self)
            worker.pending.removeSubrange(0...newline)
            if line == "READY" {
                worker.isReady = true
                if releasesLateWorkers {
                    worker.isReady = false
                    worker.send("GO")
                }
            } else if line.hasPrefix("PROGRESS "), let value = Int(line.dropFirst(9)) {
                worker.progress = value
            } else if line.hasPrefix("RESULT ") {
                do {
                    worker.result = try JSONDecoder().decode(WorkerResult.self, from: Data(line.utf8.dropFirst(7)))
                } catch {
                    worker.malformedResult = String(line.prefix(200))
                }
            } else {
                onLine(worker, line)
            }
        }
    }

    /// Collects the exit status of workers whose output has closed.
    private func reap() {
        for worker in workers where worker.isRunning && worker.output < 0 {
            var status: Int32 = 0
            let reaped = waitpid(worker.pid, &status, WNOHANG)
            if reaped == worker.pid {
                worker.exit = WorkerFleetStatus.decode(status)
                worker.closeDescriptors()
            }
        }
    }
}

/// Decoding waitpid statuses (the W* macros are not imported into Swift).
enum WorkerFleetStatus {
    static func decode(_ status: Int32) -> WorkerExit {
        let signal = status & 0x7F
        if signal == 0 { return .exited((status >> 8) & 0xFF) }
        return .signaled(signal)
    }
}
