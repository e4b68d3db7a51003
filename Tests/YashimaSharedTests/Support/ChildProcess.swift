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
