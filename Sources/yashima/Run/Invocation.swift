// What `run` and `rm` share: the options that make a run's key, and `Invocation`, what they know from the
// command line before they touch the cache (the command, its outputs, the key's parts that do not depend on
// the directory) and, once the command ran, its record. Bad key options are bad usage here (nothing runs).

import Foundation
import Glibc
import Synchronization
@_spi(Operator) import YashimaShared

/// What `run` and `rm` know before they touch the cache: the command, its outputs and the key's parts
/// that do not depend on the directory; and, once it ran, its record.
final class Invocation: Sendable {
    /// The options that make the key (`run` and `rm` share them).
    static let keyOptions: [OptionSpec] = [
        .option("namespace", "NAME", "namespace of the entry (default: run)"),
        .option("input", "FILE", "a file the command reads: its contents are part of the key (repeatable)"),
        .option(
            "output", "PATH",
            "a file or folder the command writes: stored, and written on a hit (repeatable)"),
        .option("key", "TEXT", "extra text for the key, such as a tool version (repeatable)"),
        .option("env", "NAME", "an environment variable whose value is part of the key (repeatable)"),
        .flag("cwd", "make the working directory part of the key"),
        .flag("stdin", "read standard input to its end, put it in the key and give it to the command"),
        .flag("no-stdin", "the command does not read standard input: give it /dev/null, and cache"),
    ]

    let argv: [Word]
    let outputs: [Word]
    let standardInput: StandardInput.Plan
    let runner: CommandRunner
    /// `--expire` and `--max-size`, parsed (nil when not given): bad ones are bad usage before anything runs.
    let expiry: Duration?
    let budget: Int64?
    private let parts: RunKey.Parts
    /// The record of the command's run, once it ran (so a cache failing afterwards never runs it twice).
    let ran = Mutex<RunRecord?>(nil)

    /// Parses and checks the command line's key options; bad ones are bad usage (nothing runs).
    init(_ arguments: ParsedArguments) async throws {
        guard !arguments.command.isEmpty else {
            throw CommandFailure.usage(
                arguments.sawDoubleDash
                    ? "missing command after --" : "missing command (yashima run [OPTIONS] -- COMMAND)")
        }
        guard !(arguments.flag("stdin") && arguments.flag("no-stdin")) else {
            throw UsageError("--stdin and --no-stdin contradict each other")
        }
        expiry = try Expiry.commandLine(arguments)
        budget = try Budget.commandLine(arguments)
        argv = arguments.command
        var outputs: [Word] = []
        for path in arguments.words("output") where !outputs.contains(path) {
            try Invocation.checkOutputPath(path)
            outputs.append(path)
        }
        self.outputs = outputs
        var parts = RunKey.Parts(namespace: "", argv: arguments.command, outputs: outputs)
        for path in arguments.words("input") {
            guard !path.isEmpty else { throw CommandFailure.usage("--input needs a path") }
            parts.inputs.append((path, try RunKey.digest(ofFile: path)))
        }
        parts.keys = arguments.words("key")
        for name in try arguments.strings("env") {
            guard !name.isEmpty, !name.contains("=") else {
                throw UsageError(
                    "--env takes the name of an environment variable, not \(Shell.quote(Array(name.utf8)))"
                        + (name.contains("=")
                            ? " (set it in the environment; --env \(name.prefix { $0 != "=" }) puts its value in the key)"
                            : ""))
            }
            parts.environment.append((name, Word.environment(name)))
        }
        if arguments.flag("cwd") {
            guard let directory = Word.workingDirectory else {
                throw CommandFailure.failed(
                    "--cwd: cannot read the working directory: \(String(cString: strerror(errno)))")
            }
            parts.workingDirectory = directory
        }
        standardInput = try await StandardInput.plan(read: arguments.flag("stdin"), ignore: arguments.flag("no-stdin"))
        parts.standardInputDigest = standardInput.digest
        self.parts = parts
        runner = CommandRunner(
            argv: argv, outputs: outputs, standardInput: standardInput.descriptorForCommand, signals: .shared)
    }

    /// The key, with the namespace from `--namespace` or the settings of `location`.
    func key(_ arguments: ParsedArguments, location: Location) throws -> CacheKey {
        var parts = parts
        parts.namespace = try Settings.value("namespace", arguments, directory: location.path)?.0 ?? "run"
        guard !parts.namespace.isEmpty else { throw UsageError("--namespace cannot be empty") }
        return RunKey.make(parts)
    }

    /// An output path must be in a folder that exists.
    private static func checkOutputPath(_ path: Word) throws {
        guard !path.isEmpty else { throw CommandFailure.usage("--output needs a path") }
        let folder = path.parentFolder
        var status = stat()
        guard folder.withCString({ stat($0, &status) }) == 0, status.st_mode & S_IFMT == S_IFDIR else {
            throw CommandFailure.usage(
                "--output \(path.quoted) is in a folder that does not exist (\(folder.quoted)); make it first (mkdir -p)"
            )
        }
    }
}
