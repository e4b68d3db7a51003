// The waits of a child process for async callers (the tests): each blocking wait runs on a thread of its
// own, never on a thread of Swift's cooperative pool, which has one thread per core (two on CI): a test
// that blocked one would starve every other test's continuations. The exit is awaited without any thread
// waiting (the child's reaper resumes the caller). The default timeouts (600 s) are hang guards, not
// bounds: a child's progress is the machine's to give, and a loaded parallel run stretched 60 s ones.

import Foundation
import Glibc

extension ChildProcess {
    /// The next line of output, or nil when the child closed its output or `timeout` seconds passed.
    public func line(timeout: Double = 600) async -> String? {
        await offPool { self.readLine(timeout: .seconds(timeout)) }
    }

    /// Reads lines until one satisfies `predicate`; nil when the output closes or `timeout` passes first.
    public func line(timeout: Double = 600, where predicate: @escaping @Sendable (String) -> Bool) async -> String? {
        await offPool { self.readLine(timeout: .seconds(timeout), where: predicate) }
    }

    /// The next line that starts with `{`, parsed as a JSON object.
    public func json(timeout: Double = 600) async -> [String: Any]? {
        guard let line = await line(timeout: timeout, where: { $0.hasPrefix("{") }) else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
    }

    /// All remaining output, as raw bytes, up to the moment the child closes it or `timeout` passes.
    public func output(timeout: Double = 600) async -> Data {
        await offPool { self.readToEnd(timeout: .seconds(timeout)) }
    }

    /// What the child wrote to stderr, when started with `.capture`. Call once it has exited.
    public func standardErrorText() async -> String {
        await offPool { self.standardErrorText() }
    }

    /// Writes `data` to the child's stdin, then closes it (the child reads end of file).
    public func sendAndClose(_ data: Data) {
        write(data)
        closeInput()
    }

    /// Waits for the exit, up to `timeout` seconds, then SIGKILL: the exit status (or the signal number
    /// that ended it), or nil when it had to be killed.
    @discardableResult
    public func exitStatus(timeout: Double = 600) async -> Int32? {
        let exit: ChildExit? = await withTaskGroup(of: ChildExit?.self) { group in
            group.addTask { await self.exitAwaited() }
            group.addTask {
                try? await Task.sleep(for: .seconds(timeout))  // the bound against hanging, not an order
                if !Task.isCancelled { self.kill() }  // then the other task ends too
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        return exit?.status
    }
}

/// Starts `children` at the READY/GO barrier (`releaseTogether`), waiting off the pool. True when all of
/// them were ready within a minute.
public func startTogether(_ children: [ChildProcess]) async -> Bool {
    await offPool {
        let release = releaseTogether(children)
        return release.released && release.notReady.isEmpty
    }
}

/// Runs blocking `work` on a new thread and suspends until it returns.
func offPool<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: work()) }.start()
    }
}
