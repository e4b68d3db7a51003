// The history checker proven on synthetic histories: each anomaly class is flagged (with its key, versions
// and processes) on a history that has it, and linearizable histories pass, including overlapping writes
// read in either order, misses, calls that never returned, removals racing reads, and 120,000 operations
// of a register simulated with random overlapping calls (then one stale read planted in it is found).

import Foundation
import Testing

@testable import yashima_stress

/// Builds operations on one key (default `ha/k0`), times in nanoseconds.
private func write(_ process: String, _ version: String, _ start: Int64, _ end: Int64?, key: String = "ha/k0")
    -> HistoryOperation
{
    HistoryOperation(process: process, call: "store", kind: .write, key: key, version: version, start: start, end: end)
}

private func read(_ process: String, _ version: String?, _ start: Int64, _ end: Int64?, key: String = "ha/k0")
    -> HistoryOperation
{
    HistoryOperation(
        process: process, call: "valueIfCached", kind: .read, key: key, version: version, start: start, end: end)
}

private func remove(_ process: String, _ start: Int64, _ end: Int64, key: String = "ha/k0") -> HistoryOperation {
    HistoryOperation(
        process: process, call: "remove", kind: .remove, key: key, version: "absent:\(process)@\(start)",
        start: start, end: end)
}

private func final(_ process: String, _ version: String?, _ start: Int64, key: String = "ha/k0") -> HistoryOperation {
    HistoryOperation(
        process: process, call: "final", kind: .final, key: key, version: version, start: start, end: start + 1)
}

private func classes(_ operations: [HistoryOperation]) -> Set<AnomalyClass> {
    Set(HistoryChecker.check(operations).anomalies.map(\.kind))
}

@Suite struct HistoryCheckerTests {
    // MARK: Each class flagged

    @Test func readOfASupersededValueIsAStaleRead() throws {
        let verdict = HistoryChecker.check([
            write("p1.0", "v1", 0, 10), write("p2.0", "v2", 20, 30), read("p3.0", "v1", 40, 50),
        ])
        let anomaly = try #require(verdict.anomalies.first)
        #expect(verdict.anomalies.count == 1)
        #expect(anomaly.kind == .staleRead && anomaly.key == "ha/k0")
        #expect(anomaly.versions == ["v1", "v2"])
        #expect(anomaly.processes == ["p1.0", "p2.0", "p3.0"])
    }

    /// Issue 32's example: a write in flight, one process already reads the new value, another then the old.
    @Test func theIssuesExampleIsAStaleRead() throws {
        let ms: (Double) -> Int64 = { Int64(($0 * 1e6).rounded()) }
        let verdict = HistoryChecker.check([
            write("P0", "v874", ms(600), ms(601), key: "k1"),
            write("P1", "v876", ms(609.37), ms(612.45), key: "k1"),
            read("P2", "v876", ms(610.36), ms(610.39), key: "k1"),
            read("P3", "v874", ms(610.58), ms(610.59), key: "k1"),
        ])
        let anomaly = try #require(verdict.anomalies.first)
        #expect(verdict.anomalies.map(\.kind) == [.staleRead])
        #expect(anomaly.versions == ["v874", "v876"] && anomaly.processes.contains("P3"))
        let text = anomaly.described(origin: 0)
        for part in ["stale read on k1", "P3", "v876", "609.370", "612.450", "610.360", "610.580", "610.590"] {
            #expect(text.contains(part), "the report lacks \(part):\n\(text)")
        }
    }

    @Test func aValueReadAfterItsRemovalIsFlagged() throws {
        let verdict = HistoryChecker.check([
            write("p1.0", "v1", 0, 10), read("p2.0", "v1", 12, 14), remove("p1.1", 20, 30),
            read("p2.0", "v1", 40, 50),
        ])
        #expect(verdict.anomalies.map(\.kind) == [.removedSeenAgain])
        #expect(verdict.anomalies.first?.processes.contains("p1.1") == true)
    }

    @Test func removeAllInANamespaceRemovesItsKeysOnly() {
        let purge = HistoryOperation(
            process: "p9.0", call: "removeAll", kind: .purge, key: "ha", version: "absent:p9.0#1", start: 20, end: 30)
        let history = [
            write("p1.0", "a1", 0, 10, key: "ha/k0"), write("p1.0", "b1", 0, 10, key: "hb/k1"), purge,
            read("p2.0", "b1", 40, 50, key: "hb/k1"),
        ]
        #expect(classes(history).isEmpty)
        #expect(classes(history + [read("p2.0", "a1", 40, 50, key: "ha/k0")]) == [.removedSeenAgain])
    }

    @Test func twoProcessesSeeingTwoWritesInOppositeOrders() throws {
        // Two long concurrent writes; p1 reads v1 then v2, p2 reads v2 then v1.
        let verdict = HistoryChecker.check([
            write("p8.0", "v1", 0, 100), write("p9.0", "v2", 0, 100),
            read("p1.0", "v1", 10, 11), read("p1.0", "v2", 20, 21),
            read("p2.0", "v2", 12, 13), read("p2.0", "v1", 22, 23),
        ])
        #expect(verdict.anomalies.map(\.kind) == [.oppositeOrders])
        #expect(Set(verdict.anomalies.first?.versions ?? []) == ["v1", "v2"])
    }

    @Test func valuesNeverWrittenAreFlagged() {
        #expect(classes([write("p1.0", "v1", 0, 10), read("p2.0", "v7", 20, 30)]) == [.neverWritten])
        // Read before its write began.
        #expect(classes([read("p2.0", "v1", 0, 5), write("p1.0", "v1", 10, 20)]) == [.neverWritten])
        // Bytes that are no value at all.
        var torn = read("p2.0", "bad", 20, 30)
        torn.flags = [.bad]
        #expect(classes([write("p1.0", "v1", 0, 10), torn]) == [.neverWritten])
        // A removal's "absent" is no value a read can return.
        #expect(classes([remove("p1.0", 0, 10), read("p2.0", "absent:p1.0@0", 20, 30)]) == [.neverWritten])
    }

    @Test func processesDisagreeingAtQuiescence() throws {
        let verdict = HistoryChecker.check([
            write("p1.0", "v1", 0, 10), write("p2.0", "v2", 0, 10), final("p1.0", "v1", 100),
            final("p2.0", "v2", 100), final("p3.0", "v2", 100), final("p4.0", nil, 100),
        ])
        let anomaly = try #require(verdict.anomalies.first { $0.kind == .disagreeAtQuiescence })
        #expect(anomaly.versions == ["v2", "v1"])
        #expect(anomaly.summary.contains("v1 in p1.0") && anomaly.summary.contains("v2 in p2.0, p3.0"))
        // The same final reads, all agreeing (or missing): nothing.
        #expect(
            classes([write("p1.0", "v1", 0, 10), final("p1.0", "v1", 100), final("p2.0", nil, 100)]).isEmpty)
    }

    @Test func anExpiredValueReturnedIsFlagged() {
        var late = read("p2.0", "v1", 20, 30)
        late.flags = [.expired]
        #expect(classes([write("p1.0", "v1", 0, 10), late]) == [.expiredValue])
    }

    // MARK: Linearizable histories pass

    @Test func sequentialHistoryWithMissesAndRemovalsPasses() {
        #expect(
            classes([
                write("p1.0", "v1", 0, 1), read("p2.0", "v1", 2, 3), read("p2.0", nil, 4, 5), read("p3.0", "v1", 6, 7),
                write("p2.0", "v2", 8, 9), read("p1.0", "v2", 10, 11), remove("p3.0", 12, 13),
                read("p1.0", nil, 14, 15), write("p1.0", "v3", 16, 17), read("p3.0", "v3", 18, 19),
                final("p1.0", "v3", 30), final("p2.0", nil, 30), final("p3.0", "v3", 30),
            ]).isEmpty)
    }

    /// Two concurrent writes, read in an order both allow: v2 takes effect first, then v1.
    @Test func overlappingWritesReadInEitherOrderPass() {
        #expect(
            classes([
                write("p1.0", "v1", 0, 10), write("p2.0", "v2", 2, 12), read("p3.0", "v2", 3, 4),
                read("p4.0", "v1", 5, 6), read("p3.0", "v1", 13, 14),
            ]).isEmpty)
        // A read concurrent with a write may return either value, and one of the same read may even see the
        // new value while a later-starting, still-overlapping read sees the old one... only while neither
        // has returned before the other began.
        #expect(
            classes([
                write("p1.0", "v1", 0, 1), write("p2.0", "v2", 2, 20), read("p3.0", "v2", 3, 10),
                read("p4.0", "v1", 5, 8),
            ]).isEmpty)
    }

    @Test func removalRacingAReadPasses() {
        #expect(
            classes([
                write("p1.0", "v1", 0, 1), remove("p2.0", 2, 10), read("p3.0", "v1", 3, 4), read("p3.0", nil, 11, 12),
            ]).isEmpty)
    }

    /// A write whose process died before it returned (a begin line only) counts once someone read it, and
    /// a read that never returned constrains nothing.
    @Test func callsThatNeverReturned() {
        let begun = HistoryOperation(
            process: "p5.0", call: "store", kind: .begin, key: "ha/k0", version: "v2", start: 20, end: nil)
        let verdict = HistoryChecker.check([
            write("p1.0", "v1", 0, 10), begun, read("p2.0", "v2", 50, 60), read("p3.0", "v2", 70, 80),
            read("p4.0", nil, 90, nil),
        ])
        #expect(verdict.anomalies.isEmpty)
        #expect(verdict.uncertainWritesDropped == 0)
        // Unread, it is left out: it may never have happened, so v1 read later is no stale read.
        let unread = HistoryChecker.check([write("p1.0", "v1", 0, 10), begun, read("p2.0", "v1", 50, 60)])
        #expect(unread.anomalies.isEmpty && unread.uncertainWritesDropped == 1)
        // A write that threw is the same.
        var failed = write("p5.0", "v2", 20, 30)
        failed.flags = [.uncertain]
        #expect(classes([write("p1.0", "v1", 0, 10), failed, read("p2.0", "v1", 50, 60)]).isEmpty)
        #expect(
            classes([write("p1.0", "v1", 0, 10), failed, read("p3.0", "v2", 40, 45), read("p2.0", "v1", 50, 60)]) == [
                .staleRead
            ])
    }

    /// A register simulated with every call's instant inside its interval, on 4 keys with 16 processes:
    /// 120,000 operations must pass; then a read of a superseded value is planted and must be found. On a
    /// thread of its own: seconds of work in a debug build must not hold one of the pool's two threads.
    @Test func aLargeSimulatedRegisterPassesAndAPlantedStaleReadIsFound() async throws {
        let (history, superseded) = await onOwnThread { Self.simulatedRegister(operationsPerKey: 30_000) }
        let verdict = await onOwnThread { HistoryChecker.check(history) }
        #expect(history.count == 120_000 && verdict.operationCount == history.filter { $0.kind != .begin }.count)
        #expect(verdict.anomalies.isEmpty, "\(verdict.anomalies.prefix(3).map { $0.described(origin: 0) })")
        let planted = try #require(superseded.dropFirst(superseded.count / 2).first)
        let late = read("p99.0", planted.version, planted.after + 1, planted.after + 2, key: planted.key)
        let found = await onOwnThread { HistoryChecker.check(history + [late]) }
        #expect(!found.anomalies.isEmpty)
        #expect(
            found.anomalies.allSatisfy { $0.key == planted.key && $0.versions.contains(planted.version) },
            "\(found.anomalies.map { $0.described(origin: 0) })")
    }

    /// Calls on a register, each taking effect at an instant inside its interval (so the history is
    /// linearizable), and the values superseded for sure (their write returned before the next began),
    /// with the end of the write that superseded them.
    private static func simulatedRegister(operationsPerKey: Int) -> (
        [HistoryOperation], [(key: String, version: String, after: Int64)]
    ) {
        var random = SplitMix64(seed: 42)
        var history: [HistoryOperation] = []
        var superseded: [(key: String, version: String, after: Int64)] = []
        for keyIndex in 0..<4 {
            let key = "h\(keyIndex % 2)/k\(keyIndex)"
            var current: String?
            var currentEnd: Int64?  // the end of `current`'s write (nil: it never returned, or a removal)
            var instant: Int64 = 1_000
            for index in 0..<operationsPerKey {
                instant += Int64(1 + random.below(20))
                let start = instant - Int64(random.below(60))
                let end: Int64? = random.chance(1) ? nil : instant + Int64(random.below(60))
                let process = "p\(random.below(16)).\(random.below(2))"
                switch random.below(10) {
                case 0..<3:
                    let version = "\(process)#\(keyIndex)-\(index)"
                    // Superseded for sure: its write returned before this one began.
                    if let current, let currentEnd, let end, currentEnd < start {
                        superseded.append((key, current, end))
                    }
                    current = version
                    currentEnd = end
                    history.append(
                        end == nil
                            ? HistoryOperation(
                                process: process, call: "store", kind: .begin, key: key, version: version,
                                start: start, end: nil)
                            : write(process, version, start, end, key: key))
                case 3:
                    if let current, let currentEnd, let end, currentEnd < start {
                        superseded.append((key, current, end))
                    }
                    current = nil
                    currentEnd = nil
                    history.append(remove(process, start, end ?? instant + 1, key: key))
                default:
                    history.append(read(process, random.chance(10) ? nil : current, start, end, key: key))
                }
            }
        }
        return (history, superseded)
    }

    // MARK: The log and the values

    @Test func operationLinesRoundTrip() {
        let operations = [
            write("p1.0", "p1.0#3", 100, 200),
            read("p2.1", nil, 300, nil),
            HistoryOperation(
                process: "p3.0", call: "value", kind: .write, key: "hb/k1", version: "p3.0#9", start: 5, end: 9,
                flags: [.uncertain, .expired]),
        ]
        let text = operations.map(\.line).joined(separator: "\n") + "\nnot a line\n"
        let parsed = HistoryLog.parse(text)
        #expect(parsed.operations == operations && parsed.malformed == 1)
    }

    @Test func valuesCarryTheirVersionAndTornOnesAreRefused() {
        let value = HistoryValue.bytes(key: "ha/k0", version: "p1.0#3", size: 5_000)
        #expect(value.count == 5_000)
        #expect(HistoryValue.parse(value, key: "ha/k0") == .version("p1.0#3"))
        #expect(
            HistoryValue.parse(HistoryValue.bytes(key: "ha/k0", version: "p1.0#3", size: 10), key: "ha/k0")
                == .version("p1.0#3"))
        var torn = value
        torn[4_000] ^= 0xFF
        #expect(HistoryValue.parse(torn, key: "ha/k0") != .version("p1.0#3"))
        #expect(HistoryValue.parse(value, key: "hb/k1") != .version("p1.0#3"))
        #expect(HistoryValue.parse(Data("junk".utf8), key: "ha/k0") != .version("p1.0#3"))
    }
}

/// Runs `work` on a thread of its own and suspends until it returns (never on the cooperative pool).
private func onOwnThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: work()) }.start()
    }
}
