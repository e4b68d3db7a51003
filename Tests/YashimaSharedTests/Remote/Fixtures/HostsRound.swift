// One stampede round across "hosts" on one machine, as the remote tier's process tests run it: each
// host a fresh storage directory with its own worker processes (`yashima-stress worker get`, one JSON
// line per key), all released at once by the READY/GO barrier, never by sleeps. The round collects
// every worker's lines, expects each worker to print one per key and to exit 0, and reads the ledger
// in which every generation on every host is written. The tests judge the lines and the ledger.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

/// What one round of workers across hosts printed and generated.
struct HostsRound {
    /// Every worker's result lines (one per key), worker after worker.
    let results: [[String: Any]]
    /// The ledger's lines: one per generation, on any host.
    let generations: [String]

    /// Runs a round: `perHost` workers on each of `hosts` new directories (labelled `label-<n>`), made
    /// by `worker` from a host's directory and the ledger's path (it passes `--ledger` and `--go`),
    /// started together; each is read for `keys` lines (up to 120 s each) and its exit (up to 120 s).
    static func run(
        label: String, hosts: Int, perHost: Int, keys: Int, sourceLocation: SourceLocation = #_sourceLocation,
        worker: (_ host: TemporaryDirectory, _ ledger: String) throws -> ChildProcess
    ) async throws -> HostsRound {
        let directories = (0..<hosts).map { TemporaryDirectory("\(label)-\($0)") }
        let ledger = directories[0].path + ".ledger"
        defer { unlink(ledger) }
        var children: [ChildProcess] = []
        for host in directories {
            for _ in 0..<perHost { children.append(try worker(host, ledger)) }
        }
        #expect(await startTogether(children), sourceLocation: sourceLocation)
        var results: [[String: Any]] = []
        for child in children {
            var lines = 0
            while lines < keys, let line = await child.json(timeout: 120) {
                results.append(line)
                lines += 1
            }
            #expect(lines == keys, "a worker did not finish", sourceLocation: sourceLocation)
            #expect(await child.exitStatus(timeout: 120) == 0, sourceLocation: sourceLocation)
        }
        return HostsRound(results: results, generations: Ledger(path: ledger).lines())
    }

    /// The lines whose value the worker found right (`correct`).
    var correctCount: Int { results.filter { $0["correct"] as? Bool == true }.count }
}
