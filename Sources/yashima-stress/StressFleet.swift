// The orchestrator's worker processes: real processes of this executable (/proc/self/exe), children of the
// shared ChildProcesses helper (pipes, stderr in the log directory), released together at its READY/GO
// barrier, and read with poll over all of them so no single worker can block the orchestrator. Every wait
// has a deadline; a worker still running past it is SIGKILLed and counted as hung. Runs on the main thread
// (never the cooperative pool).

import ChildProcesses
import Foundation
import Glibc

/// How a worker process ended.
typealias WorkerExit = ChildExit

/// One worker process and what it has said so far.
@MainActor
final class WorkerProcess {
    let child: ChildProcess
    let index: Int
    let phase: String
    let stderrPath: String
    fileprivate(set) var isReady = false
    fileprivate(set) var progress = 0
    fileprivate(set) var result: WorkerResult?
    /// Set once the worker's output is closed and it was reaped (or it was killed).
    fileprivate(set) var exit: WorkerExit?
    fileprivate(set) var killedOnPurpose = false
    fileprivate(set) var hung = false
    fileprivate(set) var malformedResult: String?

    fileprivate init(child: ChildProcess, index: Int, phase: String, stderrPath: String) {
        self.child = child
        self.index = index
        self.phase = phase
        self.stderrPath = stderrPath
    }

    var pid: pid_t { child.pid }
    var isRunning: Bool { exit == nil }
    var label: String { "\(phase) worker \(index) (pid \(pid))" }

    /// Writes one line to the worker's stdin; a worker that is gone is ignored.
    func send(_ line: String) {
        child.send(line)
    }

    /// The last lines the worker wrote to stderr (for failure reports).
    func stderrTail(lines count: Int = 6) -> String {
        guard let text = try? String(contentsOfFile: stderrPath, encoding: .utf8) else { return "" }  // no log, no tail
        return text.split(separator: "\n").suffix(count).joined(separator: " | ")
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
    /// The words that start worker `index` inside something, before its launcher (`ip netns exec NAME`:
    /// the netns scenario's hosts); nil or empty: nothing.
    var launchPrefix: ((_ index: Int) -> [String])?

    /// Added to every worker's environment (`--inject`: `YASHIMA_INJECT`); nil: none.
    static var environment: [String: String]?

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

    /// Starts `worker scenario --name <scenario> --plan <plan> --index <index> --phase <phase>`, its stderr
    /// in the log directory.
    @discardableResult
    func spawn(phase: String, index: Int) throws -> WorkerProcess {
        let launcher = SharedUsers.launcher(forWorker: index, executable: Fleet.executable)
        var program = launcher.program
        var arguments =
            Array(launcher.arguments.dropFirst()) + [  // the launcher's own argv[0] is the program
                "worker", "scenario", "--name", scenario, "--plan", planPath, "--index", String(index),
                "--phase", phase,
            ]
        if let prefix = launchPrefix?(index), let first = prefix.first {
            arguments = Array(prefix.dropFirst()) + [program] + arguments
            program = first
        }
        let stderrPath = logDirectory + "/\(phase)-\(index).stderr"
        let child = try ChildProcess(
            program, arguments, environment: Fleet.environment, standardError: .file(stderrPath))
        let worker = WorkerProcess(child: child, index: index, phase: phase, stderrPath: stderrPath)
        workers.append(worker)
        return worker
    }

    // MARK: Waiting

    /// The start barrier (ChildProcesses' `releaseTogether`): waits until every running worker said READY,
    /// then sends GO to all of them at once. Workers not READY by `deadline` are SIGKILLed as hung; returns
    /// false then.
    @discardableResult
    func release(deadline: UInt64, onLine: (WorkerProcess, String) -> Void = { _, _ in }) -> Bool {
        let waiting = running.filter { !$0.isReady }
        let ready = running.filter(\.isReady)
        let now = monotonicNanoseconds()
        let until = ContinuousClock.now.advanced(by: .nanoseconds(Int64(deadline > now ? deadline - now : 0)))
        let release = releaseTogether(waiting.map(\.child), readyAlready: ready.map(\.child), deadline: until) {
            child, line in
            guard let worker = self.worker(of: child) else { return }
            self.handle(line, from: worker, onLine: onLine)
        }
        reap()
        guard release.released else {
            for worker in running where !worker.isReady { terminate(worker, hung: true) }
            return false
        }
        for worker in workers { worker.isReady = false }
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
        worker.child.kill()
        worker.exit = worker.child.waitForExit(timeout: nil)
    }

    // MARK: Reading

    /// Reads whatever the workers wrote (waiting at most `timeoutMilliseconds`), handles the protocol
    /// lines (READY, PROGRESS, RESULT) and hands every other line to `onLine`; reaps exited workers.
    func pump(timeoutMilliseconds: Int32, onLine: (WorkerProcess, String) -> Void = { _, _ in }) {
        let open = running.filter { $0.child.isOutputOpen }
        if open.isEmpty {
            // Only exits to wait for (their output is closed): wait for one, as long as a read would have.
            _ = running.first?.child.waitForExit(timeout: .milliseconds(Int64(timeoutMilliseconds)))
        } else {
            readLines(from: open.map(\.child), waitingAtMost: .milliseconds(Int64(timeoutMilliseconds))) {
                child, line in
                guard let worker = self.worker(of: child) else { return }
                self.handle(line, from: worker, onLine: onLine)
            }
        }
        reap()
        progress.update(operations: operations, processes: running.count)
    }

    private func worker(of child: ChildProcess) -> WorkerProcess? {
        workers.first { $0.child === child }
    }

    /// One line of a worker: the protocol's (READY, PROGRESS, RESULT), or the caller's.
    private func handle(_ line: String, from worker: WorkerProcess, onLine: (WorkerProcess, String) -> Void) {
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

    /// Records the exit of workers whose output has closed (everything they wrote has been read).
    private func reap() {
        for worker in workers where worker.isRunning && !worker.child.isOutputOpen {
            if let exit = worker.child.exit { worker.exit = exit }
        }
    }
}
