// Real child processes of the built `yashima-stress` executable (or any other program), for cross-process
// tests: spawn, read their lines or raw output with a timeout (poll), write to their stdin, SIGKILL them.
// No mocks. Every wait is async and holds no thread of the cooperative pool (see OffPool.swift).

import Foundation
import Glibc
import Synchronization

/// The directory holding the test bundle and the package's built executables.
func productsDirectory() -> URL {
    URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
}

/// One running `yashima-stress` child (or another program's). Every wait is `async` and runs off the
/// cooperative pool (see `offPool`): reads poll the pipe on a thread of their own, and the exit is
/// awaited through Foundation's termination handler.
final class ChildProcess: Sendable {
    let process = Process()
    private let exited: ProcessExit
    private let input = Pipe()
    private let output = Pipe()
    private let errors: Pipe?
    /// Output read past the last line returned. Held while a read blocks, so reads run one at a time.
    private let buffer = Mutex(Data())

    /// Starts `executable` (default: the built `yashima-stress`) with `arguments`, and `environment` added
    /// to this process's environment. The child's stderr goes
    /// to ours, or with `capturingStandardError` to a pipe read by `standardErrorText()` (keep it short:
    /// it is read only after the child exits).
    init(
        executable: URL = productsDirectory().appendingPathComponent("yashima-stress"), _ arguments: [String],
        environment: [String: String] = [:], capturingStandardError: Bool = false
    ) throws {
        errors = capturingStandardError ? Pipe() : nil
        process.executableURL = executable
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors ?? FileHandle.standardError
        exited = ProcessExit(process)
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }

    /// The next line of output, or nil when the child closed its output or `timeout` passed.
    func line(timeout: Double = 60) async -> String? {
        await offPool { self.readLine(timeout: timeout) }
    }

    /// Reads lines until one satisfies `predicate`; nil when the output closes or `timeout` passes first.
    func line(timeout: Double = 60, where predicate: @escaping @Sendable (String) -> Bool) async -> String? {
        await offPool { self.readLine(timeout: timeout, where: predicate) }
    }

    /// The next line that starts with `{`, parsed as a JSON object.
    func json(timeout: Double = 60) async -> [String: Any]? {
        guard let line = await line(timeout: timeout, where: { $0.hasPrefix("{") }) else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
    }

    /// All remaining output, as raw bytes, up to the moment the child closes it or `timeout` passes.
    func output(timeout: Double = 60) async -> Data {
        await offPool {
            self.buffer.withLock { buffer in
                let deadline = Date().addingTimeInterval(timeout)
                while self.readMore(into: &buffer, before: deadline) {}
                defer { buffer.removeAll() }
                return buffer
            }
        }
    }

    /// What the child wrote to stderr, when started with `capturingStandardError`. Call after
    /// `exitStatus`.
    func standardErrorText() async -> String {
        guard let errors else { return "" }
        let handle = errors.fileHandleForReading
        return await offPool { String(decoding: handle.readDataToEndOfFile(), as: UTF8.self) }
    }

    func send(_ line: String) {
        input.fileHandleForWriting.write(Data((line + "\n").utf8))
    }

    /// Writes `data` to the child's standard input, then closes it (the child reads end of file).
    func sendAndClose(_ data: Data) {
        input.fileHandleForWriting.write(data)
        try? input.fileHandleForWriting.close()
    }

    func kill(_ signal: Int32 = SIGKILL) {
        _ = Glibc.kill(process.processIdentifier, signal)
    }

    /// Waits for exit (up to `timeout`, then SIGKILL); returns the exit status, or nil if it had to be killed.
    @discardableResult
    func exitStatus(timeout: Double = 60) async -> Int32? {
        if await exited.wait(within: timeout) { return process.terminationStatus }
        kill()
        await exited.wait()
        return nil
    }

    // The blocking reads, run only through `offPool`.

    private func readLine(timeout: Double) -> String? {
        buffer.withLock { buffer in
            let deadline = Date().addingTimeInterval(timeout)
            while true {
                if let newline = buffer.firstIndex(of: 0x0A) {
                    let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                    buffer.removeSubrange(buffer.startIndex...newline)
                    return line
                }
                if !readMore(into: &buffer, before: deadline) { return nil }
            }
        }
    }

    private func readLine(timeout: Double, where predicate: (String) -> Bool) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while let line = readLine(timeout: max(0.01, deadline.timeIntervalSinceNow)) {
            if predicate(line) { return line }
        }
        return nil
    }

    /// Appends the next chunk of output to `buffer`; false when the output is closed or `deadline` passed.
    private func readMore(into buffer: inout Data, before deadline: Date) -> Bool {
        let fd = output.fileHandleForReading.fileDescriptor
        while true {
            let remaining = deadline.timeIntervalSinceNow
            if remaining <= 0 { return false }
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, Int32(min(remaining, 1) * 1000))
            if ready <= 0 { continue }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let count = read(fd, &chunk, chunk.count)
            if count <= 0 { return false }
            buffer.append(contentsOf: chunk[0..<count])
            return true
        }
    }

    /// A child still running here was left by a failed test (every passing path awaits `exitStatus`):
    /// SIGKILL, then a wait that is short because nothing can delay a killed process's exit.
    deinit {
        if process.isRunning {
            kill()
            process.waitUntilExit()
        }
    }
}

/// Starts children that wait at a start barrier, then releases them together.
func startTogether(_ children: [ChildProcess]) async -> Bool {
    for child in children {
        guard await child.line(timeout: 60, where: { $0 == "READY" }) != nil else { return false }
    }
    for child in children { child.send("GO") }
    return true
}
