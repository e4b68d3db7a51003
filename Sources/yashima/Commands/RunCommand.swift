// `yashima run [options] -- COMMAND [ARG…]`: memoize a command. A hit writes the stored standard output
// and `--output` files and folders (each appearing at once) and runs nothing; a miss runs the command once
// across every process on the directory (the library's get-or-generate), stores its results in one entry
// and passes everything through. Whatever the cache cannot do — an unusable directory, a standard input
// the key cannot cover — the command still runs (uncached, one warning line) unless `--strict`.

import Foundation
import Glibc
import Synchronization
@_spi(Operator) import YashimaShared

enum RunCommand {
    static let spec = CommandSpec(
        name: "run", summary: "memoize a command (exactly once across processes)",
        usage: "yashima run [OPTIONS] [--] COMMAND [ARG...]",
        description: """
            Runs COMMAND unless an earlier run with the same key stored its results; then writes those
            results instead. The key is COMMAND and its arguments, the contents of every --input file,
            every --key, the value of every --env variable, the --output paths, the working directory with
            --cwd, and standard input with --stdin: exact bytes, whatever they are. On a miss the command
            runs once across all processes using the directory: the others wait for it and then write
            what it stored. With --remote, results are shared with other hosts too. Its standard output
            and every --output (a file, or a folder's whole tree) are stored when it exits 0; a command
            that exits non-zero is not stored, and its output and exit status pass through.

            Standard input: with --stdin it is read to its end, put in the key and given to the command;
            with --no-stdin the command gets /dev/null. Otherwise a terminal, /dev/null, no standard
            input or a pipe already at its end (as make -j gives its jobs) is no input, and anything
            else (a pipe, a file, a socket) makes the run uncached, with one warning: the key cannot
            cover what the command might read there, and yashima never waits on an input the command
            may not read.

            A cache that cannot be used (a directory owned by someone else, writable by others, on a
            network filesystem, full) never fails the command: it runs uncached and one warning says
            what is wrong and what to do. --strict (or YASHIMA_STRICT=1) refuses instead (exit 2).
            YASHIMA_DISABLE=1 runs every command uncached, silently. --recache (YASHIMA_RECACHE=1) runs
            the command even on a hit and replaces the stored result.

            Options end at "--" or at the first word that is not an option. Prints nothing of its own
            unless --verbose (one line on standard error) or a warning.
            Exit status: the command's; 2 for bad usage or a bad input; 1 when yashima itself fails;
            127 when COMMAND is not found, 126 when it cannot be run; 128+N after signal N (Ctrl-C: 130;
            SIGINT or SIGTERM while waiting for another process stops waiting at once, while the command
            runs it is forwarded to the command and nothing is stored).
            """,
        options: Invocation.keyOptions + [
            .option("expire", "DURATION", "the entry expires after DURATION (90s, 15m, 2h, 7d)"),
            .option(
                "max-size", "SIZE",
                "budget for the whole directory (4096, 500M, 10G, unlimited), recorded for later commands "
                    + "(default: the recorded one, else 1 GiB)"),
            .flag("no-wait", "if another process is running the same command, run it here too instead of waiting"),
            .flag("recache", "run the command even on a hit, and replace the stored result"),
            .flag("strict", "refuse (exit 2) instead of running uncached when the cache cannot be used"),
            RemoteOption.spec, RemoteOption.readOnlySpec,
            .flag("verbose", short: "v", "one line on standard error: hit, miss or waited, and the time saved"),
        ] + CommandSpec.storageOptions,
        takesCommand: true, signals: .takenBySignalControl, run: run)

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        // Reading standard input to its end, or an --input file (a large one, a FIFO), may block: a
        // signal must end it at once.
        if arguments.flag("stdin") || !arguments.words("input").isEmpty { SignalControl.shared.start() }
        let invocation = try await Invocation(arguments)
        let verbose = arguments.flag("verbose")
        if Word.environment("YASHIMA_DISABLE")?.text == "1" {
            return try await invocation.runner.runPassingThrough()
        }
        if case .uncacheable(let kind) = invocation.standardInput {
            Output.error(StandardInput.warning(kind: kind))
            return try await invocation.runner.runPassingThrough()
        }
        do {
            return try await runCached(invocation, arguments, verbose: verbose)
        } catch let problem as CacheProblem {
            let strict = arguments.flag("strict") || Word.environment("YASHIMA_STRICT")?.text == "1"
            if strict { throw CommandFailure.usage("cannot use the cache: " + problem.message) }
            if let record = invocation.ran.withLock({ $0 }) {
                // The command already ran; the cache failed afterwards.
                Output.error("yashima: warning: cannot use the cache: \(problem.message); the result was not stored")
                return try deliver(record, invocation, fromStorage: false)
            }
            Output.error(
                "yashima: warning: cannot use the cache: \(problem.message); running the command uncached "
                    + "(--strict refuses instead)")
            return try await invocation.runner.runPassingThrough()
        }
    }

    private static func runCached(_ invocation: Invocation, _ arguments: ParsedArguments, verbose: Bool) async throws
        -> Int32
    {
        let location = try Location(arguments)
        let key = try invocation.key(arguments, location: location)
        let remote = try RemoteOption.parse(arguments, directory: location.path)
        // The remote tier may wait on the network: signals are taken from here on.
        if remote != nil { SignalControl.shared.start() }
        let expiry = try Expiry.effective(commandLine: invocation.expiry, directory: location.path)
        let recache = arguments.flag("recache") || Word.environment("YASHIMA_RECACHE")?.text == "1"
        let started = ContinuousClock.now
        let codec = RunRecordCodec()

        // The hit path: one lookup, nothing else opened, nothing recorded unless --max-size says so.
        let explicit = invocation.budget
        let probe = try location.openCache(budget: explicit, remote: remote)
        let storage = try location.storageOperator(probe)
        let budget = try Budget.effective(explicit: explicit, storage: storage)
        if !recache, let record = try? await probe.valueIfCached(for: key, codec: codec) {
            let status = try deliver(record, invocation, fromStorage: true)
            let elapsed = started.duration(to: .now)
            let saved = Int64(record.runningNanoseconds) - nanoseconds(elapsed)
            storage.addSavedTime(nanoseconds: saved)
            keptUntilExit.withLock { $0 += [probe, storage] }
            if verbose {
                Output.error(
                    "yashima: hit: \(Format.bytes(Int64(record.byteCount))) from storage in "
                        + "\(Format.seconds(elapsed)), saved \(Format.seconds(Double(max(0, saved)) / 1e9))")
            }
            return status
        }

        // A miss: get-or-generate, with this directory's budget. It may wait for another process (a
        // signal ends the wait at once) or run the command (a signal is forwarded to it).
        SignalControl.shared.start()
        let cache = budget == explicit ? probe : try location.openCache(budget: budget, remote: remote)
        // A result that cannot be stored is still the command's result.
        var options = YCache.Options(writeFailurePolicy: .bestEffort)
        if let expiry { options.expiry = .after(expiry) }
        if arguments.flag("no-wait") { options.crossProcessWaitTimeout = .zero }
        if recache { options.lookupPolicy = .refresh }
        let before = cache.statistics
        let resolution: YCache.Resolved<RunRecord>
        do {
            resolution = try await cache.resolve(for: key, codec: codec, options: options) {
                let record = try await invocation.runner.run()
                invocation.ran.withLock { $0 = record }
                return record
            }
        } catch let outcome as CommandOutcome {
            return fail(outcome)
        } catch let error as YCache.Error {
            throw location.problem(error)
        }
        let record = resolution.value
        let elapsed = started.duration(to: .now)
        // What the remote tier did, for -v ("; remote: waited 1.20 s for another host, hit in 1.3 s").
        let remoteClause =
            remote.flatMap {
                RemoteReport.clause(since: before, to: cache.statistics, options: $0.options, elapsed: elapsed)
            }.map { "; remote: " + $0 } ?? ""
        // Credentials the remote refused need the user: one warning even without -v (never the secret).
        if !verbose, remote != nil,
            cache.statistics.remoteAuthenticationFailures > before.remoteAuthenticationFailures
        {
            Output.error(RemoteReport.authenticationWarning)
        }
        switch resolution.source {
        case .generated:
            // The command wrote its output files itself; its standard output was captured.
            let status = try deliver(record, invocation, fromStorage: false)
            var line =
                "yashima: \(recache ? "recache" : "miss"): ran the command in "
                + Format.seconds(Double(record.runningNanoseconds) / 1e9)
            if cache.statistics.crossProcessTimeouts > 0 { line += " (another process was running it: --no-wait)" }
            if cache.statistics.writeFailures > 0 {
                Output.error(
                    verbose
                        ? line + "; could not store the result" + remoteClause
                        : "yashima: warning: the result could not be stored (the disk may be full)")
            } else if verbose {
                if (try? await cache.contains(for: key, codec: codec)) == true {
                    line += ", stored \(Format.bytes(Int64(record.byteCount)))"
                } else {
                    line += "; not stored (larger than the budget of \(Format.bytes(budget)))"
                }
                Output.error(line + remoteClause)
            }
            return status
        case .storage, .memory:
            let status = try deliver(record, invocation, fromStorage: true)
            let saved = Int64(record.runningNanoseconds) - nanoseconds(elapsed)
            storage.addSavedTime(nanoseconds: saved)
            if verbose {
                let other = resolution.origin == .remote ? "another host" : "another process"
                let how = resolution.wasSharedGeneration ? "waited \(Format.seconds(elapsed)) for \(other)" : "hit"
                Output.error(
                    "yashima: \(how): \(Format.bytes(Int64(record.byteCount))) from "
                        + (resolution.origin == .remote ? "the remote tier" : "storage") + ", saved "
                        + Format.seconds(Double(max(0, saved)) / 1e9) + remoteClause)
            }
            return status
        }
    }

    /// What a hit opened, kept until the process exits: their teardown (closing descriptors, unmapping,
    /// freeing tables) is the kernel's at exit, for nothing; nothing they hold needs to be written.
    private static let keptUntilExit = Mutex<[any AnyObject & Sendable]>([])

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
        case .unstorable(let message, let standardOutput):
            Output.write(standardOutput, to: STDOUT_FILENO)
            Output.error("yashima: warning: " + message + "; nothing stored")
            return 0
        }
    }

    /// Writes the record's standard output and, when it came from storage, its outputs.
    private static func deliver(_ record: RunRecord, _ invocation: Invocation, fromStorage: Bool) throws -> Int32 {
        if fromStorage { try OutputFiles.write(record, to: invocation.outputs) }
        // A write that may block (more than a pipe holds, or a terminal) is one a signal must end.
        if record.standardOutput.count > 65536 || isatty(STDOUT_FILENO) == 1 { SignalControl.shared.start() }
        if !Output.write(record.standardOutput, to: STDOUT_FILENO) {
            throw CommandFailure.failed("cannot write to standard output: \(String(cString: strerror(errno)))")
        }
        return 0
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
    }
}
