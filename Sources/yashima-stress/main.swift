// yashima-stress: the multi-process stress runner (default), its hidden `worker` subcommand, and the
// `bench` benchmark suite. Exit status: 0 all passed, 1 a failure, 2 bad arguments.

import Foundation
import Glibc

let words = Array(CommandLine.arguments.dropFirst())
let status: Int32
do {
    switch words.first {
    case "worker":
        status = try await WorkerCommand.run(Array(words.dropFirst()))
    case "bench":
        status = try await Bench.run(Array(words.dropFirst()))
    default:
        status = try await StressRunner.run(words)
    }
} catch let error as ArgumentError {
    FileHandle.standardError.write(Data("yashima-stress: \(error.description)\n".utf8))
    exit(2)
} catch {
    FileHandle.standardError.write(Data("yashima-stress: \(error)\n".utf8))
    exit(1)
}
exit(status)
