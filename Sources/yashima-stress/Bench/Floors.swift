// The C floors (Benchmarks/floors): found beside this package's sources, built once per bench run with the
// system `cc` (Benchmarks/floors/build.sh) into a folder beside the bench directory, and run as child
// processes. A serving floor (read, publish, memory, redis) answers one command line at a time, so the bench
// alternates its operations with the library's, chunk by chunk, in the same run; its per-operation samples
// come back through a file of raw doubles. Every ratio the bench prints is against one of these.

import ChildProcesses
import Foundation
import Glibc
import Synchronization

enum Floors {
    /// The built program, once per process: (bench directory, program path).
    private static let built = Mutex<(String, String)?>(nil)

    /// The floors' source folder: `$YASHIMA_FLOORS_SOURCE`, else `Benchmarks/floors` in the first folder
    /// above this executable that has one (a build in the checkout's `.build`), else beside the source file
    /// this was compiled from.
    static func sourceDirectory() -> String? {
        func usable(_ path: String) -> Bool { access(path + "/build.sh", R_OK) == 0 }
        if let given = ProcessInfo.processInfo.environment["YASHIMA_FLOORS_SOURCE"] {
            return usable(given) ? given : nil
        }
        var folder = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        while folder.path != "/" {
            let candidate = folder.appendingPathComponent("Benchmarks/floors").path
            if usable(candidate) { return candidate }
            folder.deleteLastPathComponent()
        }
        let compiled = URL(fileURLWithPath: #filePath).deletingLastPathComponent()  // Sources/yashima-stress/Bench
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Benchmarks/floors").path
        return usable(compiled) ? compiled : nil
    }

    /// The folder the floors are built into for a bench directory `base` (removed with it).
    static func buildDirectory(_ base: String) -> String { base + ".floors" }

    /// A path for a file of this run's floors (a list of paths to read), in their build folder.
    static func scratchFile(_ context: BenchContext, _ name: String) throws -> String {
        _ = try program(context)
        return buildDirectory(context.base) + "/" + name
    }

    /// The `floors` program for this run, built on first use. Throws when the sources or `cc` are missing.
    static func program(_ context: BenchContext) throws -> String {
        try built.withLock { built in
            if let built, built.0 == context.base { return built.1 }
            guard let source = sourceDirectory() else {
                throw ArgumentError(
                    description: "the C floors' sources (Benchmarks/floors) were not found; set YASHIMA_FLOORS_SOURCE")
            }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/bash")
            process.arguments = [source + "/build.sh", buildDirectory(context.base)]
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            let printed = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            let path = String(decoding: printed, as: UTF8.self).split(separator: "\n").last.map(String.init) ?? ""
            guard process.terminationStatus == 0, access(path, X_OK) == 0 else {
                throw ArgumentError(description: "building the C floors failed (\(source)/build.sh; needs cc)")
            }
            built = (context.base, path)
            return path
        }
    }
}

/// One serving floor process: READY, then one `OK <figure> <failures>` line per command.
final class FloorServer {
    let child: ChildProcess
    let samplesPath: String
    let name: String

    /// Starts `floors <command> <arguments> --samples <file>` and waits for its READY.
    init(_ context: BenchContext, _ command: String, _ arguments: [String]) throws {
        let program = try Floors.program(context)
        name = command
        samplesPath = Floors.buildDirectory(context.base) + "/\(command)-\(UUID().uuidString).f64"
        child = try ChildProcess(program, [command] + arguments + ["--samples", samplesPath])
        guard child.readLine(timeout: .seconds(120)) == "READY" else {
            child.finish()
            throw ArgumentError(description: "the C floor '\(command)' did not start")
        }
    }

    deinit {
        child.finish()
        unlink(samplesPath)
    }

    /// Sends one command; returns its figure (the last operation's or the total's nanoseconds, by command).
    @discardableResult
    func run(_ command: String) throws -> Double {
        child.send(command)
        guard let line = child.readLine(timeout: ChildProcess.benchPatience), line.hasPrefix("OK ") else {
            throw ArgumentError(description: "the C floor '\(name)' failed on '\(command)'")
        }
        let fields = line.split(separator: " ")
        guard fields.count == 3, let figure = Double(fields[1]), fields[2] == "0" else {
            throw ArgumentError(description: "the C floor '\(name)' reported failures: \(line)")
        }
        return figure
    }

    /// Every sample written so far, and the file emptied.
    func takeSamples() -> Samples {
        let samples = BenchWorker.readSamples(samplesPath)
        truncate(samplesPath, 0)
        return samples
    }
}

/// A floor row's name, marked as C so that no ratio is mistaken for one against a Swift baseline.
func floorName(_ text: String) -> String { "C floor: " + text }
