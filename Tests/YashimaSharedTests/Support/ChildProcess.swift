// Real child processes of the built `yashima-stress` executable, for cross-process tests: spawn, read
// their lines with a timeout (poll), write to their stdin, SIGKILL them. No mocks.

import Foundation
import Glibc

/// The directory holding the test bundle and the package's built executables.
func productsDirectory() -> URL {
    URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
}

/// One running `yashima-stress` child.
final class ChildProcess {
    let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private var buffer = Data()

    /// Starts `executable` (default: the built `yashima-stress`) with `arguments`.
    init(executable: URL = productsDirectory().appendingPathComponent("yashima-stress"), _ arguments: [String]) throws {
        process.executableURL = executable
        process.arguments = arguments
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }

    /// The next line of output, or nil when the child closed its output or `timeout` passed.
    func readLine(timeout: Double = 60) -> String? {
        let fd = output.fileHandleForReading.fileDescriptor
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                buffer.removeSubrange(buffer.startIndex...newline)
                return line
            }
            let remaining = deadline.timeIntervalSinceNow
            if remaining <= 0 { return nil }
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, Int32(min(remaining, 1) * 1000))
            if ready <= 0 { continue }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let count = read(fd, &chunk, chunk.count)
            if count <= 0 { return nil }
            buffer.append(contentsOf: chunk[0..<count])
        }
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
