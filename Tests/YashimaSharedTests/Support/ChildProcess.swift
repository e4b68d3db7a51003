// Real child processes of the built `yashima-stress` executable (or any other program), for cross-process
// tests: spawn, read their lines or raw output with a timeout (poll), write to their stdin, SIGKILL them.
// No mocks.

import Foundation
import Glibc

/// The directory holding the test bundle and the package's built executables.
func productsDirectory() -> URL {
    URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
}

/// One running `yashima-stress` child (or another program's).
final class ChildProcess {
    let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private let errors: Pipe?
    private var buffer = Data()

    /// Starts `executable` (default: the built `yashima-stress`) with `arguments`. The child's stderr goes
    /// to ours, or with `capturingStandardError` to a pipe read by `standardErrorText()` (keep it short:
    /// it is read only after the child exits).
    init(
        executable: URL = productsDirectory().appendingPathComponent("yashima-stress"), _ arguments: [String],
        capturingStandardError: Bool = false
    ) throws {
        errors = capturingStandardError ? Pipe() : nil
        process.executableURL = executable
        process.arguments = arguments
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors ?? FileHandle.standardError
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }

    /// The next line of output, or nil when the child closed its output or `timeout` passed.
    func readLine(timeout: Double = 60) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                buffer.removeSubrange(buffer.startIndex...newline)
                return line
            }
            if !readMore(before: deadline) { return nil }
        }
    }

    /// All remaining output, as raw bytes, up to the moment the child closes it or `timeout` passes.
    func readToEnd(timeout: Double = 60) -> Data {
        let deadline = Date().addingTimeInterval(timeout)
        while readMore(before: deadline) {}
        defer { buffer.removeAll() }
        return buffer
    }

    /// Appends the next chunk of output to `buffer`; false when the output is closed or `deadline` passed.
    private func readMore(before deadline: Date) -> Bool {
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

    /// What the child wrote to stderr, when started with `capturingStandardError`. Call after `wait`.
    func standardErrorText() -> String {
        guard let errors else { return "" }
        return String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }

    /// Reads lines until one satisfies `predicate`.
    func readLine(timeout: Double = 60, where predicate: (String) -> Bool) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while let line = readLine(timeout: max(0.01, deadline.timeIntervalSinceNow)) {
            if predicate(line) { return line }
        }
        return nil
    }

    /// The next line parsed as a JSON object.
    func readJSON(timeout: Double = 60) -> [String: Any]? {
        guard let line = readLine(timeout: timeout, where: { $0.hasPrefix("{") }) else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
    }

    func send(_ line: String) {
        input.fileHandleForWriting.write(Data((line + "\n").utf8))
    }

    func kill(_ signal: Int32 = SIGKILL) {
        _ = Glibc.kill(process.processIdentifier, signal)
    }

    /// Waits for exit (up to `timeout`, then SIGKILL); returns the exit status, or nil if it had to be killed.
    @discardableResult
    func wait(timeout: Double = 60) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(2000) }
        if process.isRunning {
            kill()
            process.waitUntilExit()
            return nil
        }
        process.waitUntilExit()
        return process.terminationStatus
    }

    deinit {
        if process.isRunning {
            kill()
            process.waitUntilExit()
        }
    }
}

/// Starts children that wait at a start barrier, then releases them together.
func startTogether(_ children: [ChildProcess]) -> Bool {
    for child in children {
        guard child.readLine(timeout: 60, where: { $0 == "READY" }) != nil else { return false }
    }
    for child in children { child.send("GO") }
    return true
}
