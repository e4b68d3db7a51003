// The stampede against the bare-flock C floor (Benchmarks/floors/stampede.c) at 8, 32 and 64 processes,
// with fresh processes and with warm ones. Fresh: N newly exec'd `worker stampede-rounds` processes each
// open the (existing) directory, then all are released at once by the READY/GO barrier and call
// `value(for:)` on one missing key with a 200 ms generator: their first lookup. Warm: the same processes'
// later rounds, a new key each. Floor: N C processes parked before the barrier, one holding LOCK_EX for
// 200 ms then writing the value, N-1 blocked in flock(LOCK_SH) then reading it. Every figure: the last
// process's finish, from the moment the barrier's first GO was sent, minus 200 ms; floor and cache rounds
// alternate. (Measured from the hold's start instead, as before, a fresh process's way from GO to its
// lock is left out: that figure is in the notes.)

import ChildProcesses
import Foundation
import Glibc
import YashimaShared

enum StampedeBench {
    /// One round's result: the overhead from the release and from the hold's start, in nanoseconds, and
    /// the median CPU time a process spent on its lookup (user + system), when the processes report it.
    struct Round {
        var fromRelease: Double
        var fromHold: Double
        var cpu: Double?
    }

    static func run(_ context: BenchContext) async throws {
        let report = context.report
        report.section("stampede: fresh and warm processes against the bare-flock C floor (slowest − 200 ms)")
        let program = try Floors.program(context)
        for processes in context.stampedeSizes {
            let sets = context.quick ? 2 : (processes > 32 ? 3 : 5)
            let warmRounds = 2
            var floor = Samples()
            var fresh = Samples()
            var warm = Samples()
            var freshHold = Samples()
            var warmHold = Samples()
            var floorCPU = Samples()
            var freshCPU = Samples()
            var warmCPU = Samples()
            var generations: [Int] = []
            var failures = 0
            for set in 0..<sets {
                let directory = context.directory("stampede-\(processes)-\(set)")
                try YCache(storageDirectory: directory).openStorage()  // made: the workers open an existing one
                let ledger = directory.path + "/../stampede-\(processes)-\(set).ledger"
                let workers = try (0..<processes).map { _ in
                    try ChildProcess(
                        context.executable,
                        [
                            "worker", "stampede-rounds", "--directory", directory.path, "--rounds",
                            "\(1 + warmRounds)", "--generate-ms", "200", "--ledger", ledger,
                        ])
                }
                defer { for worker in workers { worker.finish() } }
                for round in 0...warmRounds {
                    if let result = try floorRound(program, processes, context, name: "\(set)-\(round)") {
                        floor.append(result.fromRelease)
                        if let cpu = result.cpu { floorCPU.append(cpu) }
                    } else {
                        failures += 1
                    }
                    let before = Ledger(path: ledger).lines().count
                    guard let result = self.round(workers) else {
                        failures += 1
                        continue
                    }
                    generations.append(Ledger(path: ledger).lines().count - before)
                    if round == 0 {
                        fresh.append(result.fromRelease)
                        freshHold.append(result.fromHold)
                        if let cpu = result.cpu { freshCPU.append(cpu) }
                    } else {
                        warm.append(result.fromRelease)
                        warmHold.append(result.fromHold)
                        if let cpu = result.cpu { warmCPU.append(cpu) }
                    }
                }
            }
            let floorRow = floorName("bare flock, \(processes) processes")
            report.add(
                BenchRow(
                    section: "targets", name: floorRow, samples: floor,
                    note: "CPU per process: " + formatNanoseconds(floorCPU.median)))
            let once = generations.allSatisfy { $0 == 1 }
            let common =
                "generations per round: " + generations.map(String.init).joined(separator: ",")
                + (once ? "" : " (NOT exactly 1)") + (failures > 0 ? "; \(failures) rounds failed" : "")
                + "; load \(loadAverage())"
            report.add(
                BenchRow(
                    section: "targets", name: "stampede, fresh processes, \(processes)", samples: fresh,
                    note: "from the hold's start: \(formatNanoseconds(freshHold.median)); CPU per process: "
                        + formatNanoseconds(freshCPU.median) + "; " + common),
                comparedTo: floorRow, limit: 3.0, targetText: "≤ 3x the C floor")
            report.add(
                BenchRow(
                    section: "targets", name: "stampede, warm processes, \(processes)", samples: warm,
                    note: "from the hold's start: \(formatNanoseconds(warmHold.median)); CPU per process: "
                        + formatNanoseconds(warmCPU.median)),
                comparedTo: floorRow, limit: 3.0, targetText: "≤ 3x the C floor")
        }
    }

    /// One round of the C floor: N fresh processes parked, released, timed; nil when one failed.
    static func floorRound(_ program: String, _ processes: Int, _ context: BenchContext, name: String) throws
        -> Round?
    {
        let directory = context.directory("floor-\(processes)-\(name)").path
        let children = try (0..<processes).map { index in
            try ChildProcess(
                program,
                [
                    "stampede", "--role", index == 0 ? "holder" : "waiter", "--lock", directory + "/key.lock",
                    "--data", directory + "/value",
                ])
        }
        defer { for child in children { child.finish() } }
        return round(children)
    }

    /// Waits for every child's READY, sends GO to all (timed from just before the first), waits without
    /// reading while they race (reading would take CPU from processes still waking), then reads every
    /// child's `DONE <finished> <hold started> <correct>` line. Nil when one failed or was wrong.
    static func round(_ children: [ChildProcess]) -> Round? {
        for child in children {
            guard child.readLine(timeout: ChildProcess.benchPatience, where: { $0 == "READY" }) != nil else {
                return nil
            }
        }
        let released = monotonicNanoseconds()
        for child in children { child.send("GO") }
        Thread.sleep(forTimeInterval: 0.3 + 0.005 * Double(children.count))
        var holdStarted: UInt64?
        var last: UInt64 = 0
        var cpu = Samples()
        for child in children {
            guard let line = child.readLine(timeout: ChildProcess.benchPatience, where: { $0.hasPrefix("DONE ") })
            else { return nil }
            let fields = line.split(separator: " ").compactMap { UInt64($0) }
            guard fields.count >= 3, fields[2] == 1 else { return nil }
            last = max(last, fields[0])
            if fields[1] > 0 { holdStarted = fields[1] }
            if fields.count > 3 { cpu.append(Double(fields[3])) }
        }
        guard let holdStarted else { return nil }
        return Round(
            fromRelease: Double(Int64(last) - Int64(released)) - 200_000_000,
            fromHold: Double(Int64(last) - Int64(holdStarted)) - 200_000_000,
            cpu: cpu.count > 0 ? cpu.median : nil)
    }

    /// `worker stampede-rounds --directory D --rounds R [--generate-ms 200] [--ledger L]`: opens the storage
    /// directory (the cache as deployed), then for each round: READY, waits for GO, gets-or-generates the
    /// key `stampede/r<round>` (the generator sleeps `--generate-ms` and records itself in the ledger), and
    /// writes its `DONE` line (writeStampedeLine). Stays until stdin closes.
    static func worker(_ arguments: inout Arguments) async throws -> Int32 {
        let setup = try WorkerSetup(&arguments)
        let rounds = try arguments.int("rounds", default: 3, range: 1...1000)!
        let generateMilliseconds = try arguments.int("generate-ms", default: 200, range: 0...3_600_000)!
        try arguments.rejectUnknown()
        let cache = setup.makeCache()
        try cache.openStorage()
        let ledger = setup.ledger
        let pid = getpid()
        var allCorrect = true
        for round in 0..<rounds {
            let key = CacheKey(namespace: "stampede", identity: "r\(round)")
            let expected = Payload.bytes(setup.seed, key: key, kind: .data, size: 4096)
            let holdStarted = Stamp()
            awaitGo()
            let cpuBefore = processCPUNanoseconds()
            let value = try await cache.value(for: key, codec: DataCodec()) {
                let started = monotonicNanoseconds()
                holdStarted.set(started)
                ledger?.record("\(key.namespace)/\(key.identity) data \(pid)")
                try await sleepExactly(until: started + UInt64(generateMilliseconds) * 1_000_000)
                return expected
            }
            let finished = monotonicNanoseconds()
            let cpu = processCPUNanoseconds() - cpuBefore
            allCorrect = allCorrect && value == expected
            writeStampedeLine(finished: finished, holdStarted: holdStarted.value, correct: value == expected, cpu: cpu)
        }
        while readLine() != nil {}
        return allCorrect ? 0 : 1
    }
}
