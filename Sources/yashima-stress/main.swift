// yashima-stress: the multi-process stress runner (default), its hidden `worker` subcommand, and the
// `bench` benchmark suite. Exit status: 0 all passed, 1 a failure, 2 bad arguments.

import Dispatch
import Foundation
import Glibc
import Synchronization

/// Runs the command line's command; its exit status (errors reported on stderr).
func runCommand(_ words: [String]) async -> Int32 {
    do {
        switch words.first {
        case "worker":
            return try await WorkerCommand.run(Array(words.dropFirst()))
        case "bench":
            return try await Bench.run(Array(words.dropFirst()))
        default:
            return try await StressRunner.run(words)
        }
    } catch let error as ArgumentError {
        FileHandle.standardError.write(Data("yashima-stress: \(error.description)\n".utf8))
        return 2
    } catch {
        FileHandle.standardError.write(Data("yashima-stress: \(error)\n".utf8))
        return 1
    }
}

let words = Array(CommandLine.arguments.dropFirst())
if words.starts(with: ["worker", "instr"]) {
    // The instruction-count worker runs under valgrind, and valgrind 3.19 (Debian 12's) crashes on a
    // process whose main thread is parked by dispatch_main (its sigsuspend on libdispatch's read-only mask:
    // the tool writes into the mask). So this worker's main thread waits on a semaphore instead; it uses
    // no main actor.
    let finished = DispatchSemaphore(value: 0)
    let status = Atomic<Int32>(0)
    Task.detached { [words] in
        status.store(await runCommand(words), ordering: .releasing)
        finished.signal()
    }
    finished.wait()
    exit(status.load(ordering: .acquiring))
}
// Every other command runs on the main actor, as top-level code would, the main thread serving it.
Task { @MainActor in exit(await runCommand(words)) }
dispatchMain()
