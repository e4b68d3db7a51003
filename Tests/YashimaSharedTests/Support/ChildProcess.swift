// Real child processes for the cross-process tests: the shared ChildProcesses library (spawn, lines with a
// timeout, stdin, signals, the READY/GO barrier), re-exported for every test file, with the defaults the
// tests use: the built `yashima-stress` as the program, environment added to this process's. No mocks.

@_exported import ChildProcesses
import Foundation

/// The directory holding the test bundle and the package's built executables.
func productsDirectory() -> URL {
    URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
}

extension ChildProcess {
    /// Starts `executable` (default: the built `yashima-stress`) with `arguments`, and `environment` added
    /// to this process's environment. The child's stderr goes to ours, or with `capturingStandardError`
    /// to a pipe read by `standardErrorText()` (keep it short: it is read only after the child exits).
    convenience init(
        executable: URL = productsDirectory().appendingPathComponent("yashima-stress"), _ arguments: [String],
        environment: [String: String] = [:], capturingStandardError: Bool = false,
        standardInputFromNullDevice: Bool = false
    ) throws {
        try self.init(
            executable.path, arguments, environment: environment.isEmpty ? nil : environment,
            standardError: capturingStandardError ? .capture : .inherit,
            standardInputFromNullDevice: standardInputFromNullDevice)
    }
}

/// Runs one test of this test bundle (`filter`) in a child process with `variable` set to `value`, and
/// returns its line that starts with `prefix` (nil when none came) with its `name=number` fields: for a
/// measurement a fresh process must make (a peak resident set).
func childTestReport(filter: String, _ variable: String, _ value: String, prefix: String) async throws -> (
    line: String?, fields: [String: Int]
) {
    let child = try ChildProcess(
        executable: URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath(),
        ["--testing-library", "swift-testing", "--filter", filter], environment: [variable: value])
    let line = await child.line(timeout: 600) { $0.hasPrefix(prefix) }
    _ = await child.exitStatus(timeout: 120)
    let fields = (line ?? "").split(separator: " ").dropFirst().reduce(into: [String: Int]()) {
        let pair = $1.split(separator: "=")
        if pair.count == 2 { $0[String(pair[0])] = Int(pair[1]) }
    }
    return (line, fields)
}
