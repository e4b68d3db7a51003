// How a command fails, besides bad usage (`UsageError`, CommandLine/Arguments.swift): `CommandFailure`,
// a message and an exit status; `CacheProblem`, a storage directory the cache cannot use and what to do
// about it (`run` then runs its command uncached unless strict; the other commands exit 2).

@_spi(Operator) import YashimaShared

/// A command failed: print `message` (unless empty) after `yashima: ` and exit with `status`.
struct CommandFailure: Error {
    let status: Int32
    let message: String

    /// Bad usage or a bad input (status 2).
    static func usage(_ message: String) -> CommandFailure { CommandFailure(status: 2, message: message) }
    /// Something failed (status 1).
    static func failed(_ message: String) -> CommandFailure { CommandFailure(status: 1, message: message) }

    /// A library error that is not about the directory (those are `CacheProblem`s): failed (1).
    static func from(_ error: YCache.Error) -> CommandFailure { .failed(error.description) }
}

/// A storage directory the cache cannot use: what is wrong and what to do. `run` then runs its command
/// uncached (unless strict); the other commands exit 2.
struct CacheProblem: Error {
    /// What is wrong, naming the directory.
    let problem: String
    /// What to do about it, or nil.
    let advice: String?

    var message: String { advice.map { "\(problem) (\($0))" } ?? problem }
}
