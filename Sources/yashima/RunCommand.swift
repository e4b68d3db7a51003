// `yashima run [options] -- COMMAND [ARG…]`: memoize a command. A hit writes the stored standard output
// and `--output` files (each written beside its path and renamed into place) and runs nothing; a miss
// runs the command once across every process on the directory (the library's get-or-generate: the
// others wait, off the cooperative pool), stores its standard output and output files in one entry, and
// passes everything through. A command that fails is not stored; its status passes through.

import Foundation
import Glibc
@_spi(Operator) import YashimaShared

enum RunCommand {
    static let spec = CommandSpec(
        name: "run", summary: "memoize a command (exactly once across processes)",
        usage: "yashima run [OPTIONS] [--] COMMAND [ARG...]",
        description: """
            Runs COMMAND unless an earlier run with the same key stored its results; then writes those
            results instead. The key is COMMAND and its arguments (exact bytes), the contents of every
            --input file, every --key, the value of every --env variable, the --output paths, and the
            working directory with --cwd. On a miss the command runs once across all processes using the
            directory: the others wait for it and then write what it stored. With --remote, results are
            shared with other hosts too: a miss looks there first, and one host runs the command while the
            others wait for its result (a remote that is down is skipped). Its standard output and every
            --output file are stored when it exits 0; a command that exits non-zero is not stored, its
            standard output, standard error and exit status pass through, and the next caller runs it again.
            Standard input and standard error are the caller's; standard output is written when the command
            exits. Output files written from storage appear atomically (written beside, then renamed).

            Options end at "--" or at the first word that is not an option.
            Prints nothing of its own unless --verbose (one line on standard error).
            Exit status: the command's; 2 for bad usage or a bad input; 1 when yashima itself fails;
            127 when COMMAND is not found, 126 when it cannot be run; 128+N after signal N (Ctrl-C: 130;
            SIGINT or SIGTERM while waiting for another process stops waiting at once, while the command
            runs it is forwarded to the command and nothing is stored).
            """,
        options: [
            .option("namespace", "NAME", "namespace of the entry (default: run)"),
            .option("input", "FILE", "a file the command reads: its contents are part of the key (repeatable)"),
            .option("output", "FILE", "a file the command writes: stored, and written on a hit (repeatable)"),
            .option("key", "TEXT", "extra text for the key, such as a tool version (repeatable)"),
            .option("env", "NAME", "an environment variable whose value is part of the key (repeatable)"),
            .flag("cwd", "make the working directory part of the key"),
            .option("expire", "DURATION", "the entry expires after DURATION (90s, 15m, 2h, 7d)"),
            .option(
                "max-size", "SIZE",
                "budget for the whole directory (4096, 500M, 10G, unlimited), recorded for later commands "
                    + "(default: the recorded one, else 1 GiB)"),
            .flag("no-wait", "if another process is running the same command, run it here too instead of waiting"),
            RemoteOption.spec,
            .flag("verbose", short: "v", "one line on standard error: hit, miss or waited, and the time saved"),
        ] + CommandSpec.storageOptions,
        takesCommand: true)

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        let remote = try RemoteOption.parse(arguments)
        guard !arguments.command.isEmpty, let argvIndex = arguments.commandArgvIndex else {
            throw CommandFailure.usage(
                arguments.sawDoubleDash
                    ? "missing command after --" : "missing command (yashima run [OPTIONS] -- COMMAND)")
        }
        let argvAddresses = (argvIndex..<(argvIndex + arguments.command.count)).map {
            UInt(bitPattern: CommandLine.unsafeArgv[$0])
        }
        let expiry = try arguments.string("expire").map { try parseDuration($0, option: "expire") }
        let explicitBudget = try arguments.string("max-size").map {
            try parseSize($0, option: "max-size", allowUnlimited: true)
        }
        var outputs: [String] = []
        for path in arguments.strings("output") where !outputs.contains(path) {
            try checkOutputPath(path)
            outputs.append(path)
        }
        let location = try Location(arguments)
        let key = try RunKey.make(
            namespace: arguments.string("namespace") ?? "run", argvAddresses: argvAddresses,
            inputs: arguments.strings("input"), keys: arguments.strings("key"),
            environmentNames: arguments.strings("env"), includeWorkingDirectory: arguments.flag("cwd"),
            outputs: outputs)
        let verbose = arguments.flag("verbose")
        let started = ContinuousClock.now
        let codec = RunRecordCodec()

        // The hit path: one lookup, nothing else opened, nothing recorded unless --max-size says so.
        let probe = try location.openCache(budget: explicitBudget, remote: remote)
        let storage = try location.storageOperator(probe)
        let budget = effectiveBudget(explicit: explicitBudget, storage: storage)
        if let record = try? await probe.valueIfCached(for: key, codec: codec) {
            try deliver(record, outputs: outputs, fromStorage: true)
            let elapsed = started.duration(to: .now)
            let saved = Int64(record.runningNanoseconds) - nanoseconds(elapsed)
            storage.addSavedTime(nanoseconds: saved)
            if verbose {
                Output.error(
                    "yashima: hit: \(Format.bytes(Int64(record.byteCount))) from storage in "
                        + "\(Format.seconds(elapsed)), saved \(Format.seconds(Double(max(0, saved)) / 1e9))")
            }
            return 0
        }

        // A miss: get-or-generate, with this directory's budget.
        let cache = budget == explicitBudget ? probe : try location.openCache(budget: budget, remote: remote)
        // A result that cannot be stored is still the command's result.
        var options = YCache.Options(writeFailurePolicy: .bestEffort)
        if let expiry { options.expiry = .after(expiry) }
        if arguments.flag("no-wait") { options.crossProcessWaitTimeout = .zero }
        let runner = CommandRunner(argvAddresses: argvAddresses, outputs: outputs, signals: .shared)
        let resolution: YCache.Resolved<RunRecord>
        do {
            resolution = try await cache.resolve(for: key, codec: codec, options: options) { try await runner.run() }
        } catch let outcome as CommandOutcome {
            return fail(outcome)
        } catch let error as YCache.Error {
            throw CommandFailure.from(error)
        }
        let record = resolution.value
        let elapsed = started.duration(to: .now)
        switch resolution.source {
        case .generated:
            // The command wrote its output files itself; its standard output was captured.
            try deliver(record, outputs: outputs, fromStorage: false)
            if verbose {
                var line =
                    "yashima: miss: ran the command in \(Format.seconds(Double(record.runningNanoseconds) / 1e9))"
                if cache.statistics.crossProcessTimeouts > 0 { line += " (another process was running it: --no-wait)" }
                if cache.statistics.writeFailures > 0 {
                    line += "; could not store the result"
                } else if (try? await cache.contains(for: key, codec: codec)) == true {
                    line += ", stored \(Format.bytes(Int64(record.byteCount)))"
                } else {
                    line += "; not stored (larger than the budget of \(Format.bytes(budget)))"
                }
                Output.error(line)
            } else if cache.statistics.writeFailures > 0 {
                Output.error("yashima: warning: the result could not be stored (the disk may be full)")
            }
        case .storage, .memory:
            try deliver(record, outputs: outputs, fromStorage: true)
            let saved = Int64(record.runningNanoseconds) - nanoseconds(elapsed)
            storage.addSavedTime(nanoseconds: saved)
            if verbose {
                let other = resolution.origin == .remote ? "another host" : "another process"
                let how = resolution.wasSharedGeneration ? "waited \(Format.seconds(elapsed)) for \(other)" : "hit"
                Output.error(
                    "yashima: \(how): \(Format.bytes(Int64(record.byteCount))) from "
                        + (resolution.origin == .remote ? "the remote tier" : "storage") + ", saved "
                        + Format.seconds(Double(max(0, saved)) / 1e9))
            }
        }
        return 0
    }

    /// A command that gave nothing to store: pass its output and status through.
    private static func fail(_ outcome: CommandOutcome) -> Int32 {
        switch outcome {
        case .failed(let status, let standardOutput):
            Output.write(standardOutput, to: STDOUT_FILENO)
            return status
        case .interrupted(let signal, let standardOutput):
            Output.write(standardOutput, to: STDOUT_FILENO)
            return 128 + signal
        case .notStarted(let status, let message):
            Output.error("yashima: " + message)
            return status
        case .missingOutput(let message):
            Output.error("yashima: " + message + "; nothing stored")
            return 1
        }
    }

    /// An output path must be in a folder that exists, and must not be a folder itself.
    private static func checkOutputPath(_ path: String) throws {
        guard !path.isEmpty else { throw CommandFailure.usage("--output needs a path") }
        let url = URL(fileURLWithPath: path)
        var isDirectory: ObjCBool = false
        let folder = url.deletingLastPathComponent().path
        guard FileManager.default.fileExists(atPath: folder, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw CommandFailure.usage("--output \(path) is in a folder that does not exist (\(folder))")
        }
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw CommandFailure.usage("--output \(path) is a directory, not a file")
        }
    }

    /// Writes the record's standard output and, when it came from storage, its output files.
    private static func deliver(_ record: RunRecord, outputs: [String], fromStorage: Bool) throws {
        if fromStorage {
            guard record.outputs.count == outputs.count else {
                throw CommandFailure.failed("the stored entry does not hold the --output files asked for")
            }
            for (path, file) in zip(outputs, record.outputs) {
                try writeAtomically(file.contents, to: path, mode: file.mode)
            }
        }
        if !Output.write(record.standardOutput, to: STDOUT_FILENO) {
            throw CommandFailure.failed("cannot write to standard output: \(String(cString: strerror(errno)))")
        }
    }

    /// Writes `contents` to a new file beside `path` and renames it over `path`, so `path` never holds a
    /// partial file.
    private static func writeAtomically(_ contents: Data, to path: String, mode: UInt32) throws {
        let url = URL(fileURLWithPath: path)
        let suffix = (0..<6).map { _ in String(UInt8.random(in: 0...255), radix: 16) }.joined()
        let staging = url.deletingLastPathComponent().appendingPathComponent(
            "." + url.lastPathComponent + ".yashima-" + suffix
        ).path
        SignalControl.shared.track(staging)
        defer { SignalControl.shared.untrack(staging) }
        let fd = open(staging, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw CommandFailure.failed("cannot write --output \(path): \(String(cString: strerror(errno)))")
        }
        let written = Output.write(contents, to: fd) && fchmod(fd, mode_t(mode & 0o7777)) == 0
        let reason = String(cString: strerror(errno))
        close(fd)
        guard written, rename(staging, path) == 0 else {
            unlink(staging)
            throw CommandFailure.failed("cannot write --output \(path): \(reason)")
        }
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
    }
}
