// One process waiting on ten thousand keys another process holds (I5, issue 24): every value right, a
// handful of threads (the process's one lock-wait thread, not one per key), and when the holder is killed
// instead, every key taken over. Real processes (`yashima-stress worker hold-many` / `wait-many`), ordered
// by their HOLDING and WAITING lines, never by sleeps. Their waits for a line are hang guards (600 s: the
// children set up ten thousand locks, slowly on a loaded machine), never a speed claim.

import Foundation
import Glibc
import Testing

@Suite(.serialized) struct ManyWaitsTests {
    private func holder(_ dir: TemporaryDirectory, keys: Int, from: Int = 0) throws -> ChildProcess {
        try ChildProcess(["worker", "hold-many", "--directory", dir.path, "--keys", "\(keys)", "--from", "\(from)"])
    }

    private func waiter(_ dir: TemporaryDirectory, keys: Int) throws -> ChildProcess {
        try ChildProcess(["worker", "wait-many", "--directory", dir.path, "--keys", "\(keys)"])
    }

    @Test("one process waits on 10,000 keys another holds: every value right, at most 32 threads")
    func tenThousandKeys() async throws {
        let dir = TemporaryDirectory("many-waits")
        let keys = 10_000
        let holding = try holder(dir, keys: keys)
        #expect(await holding.line(timeout: 600, where: { $0.hasPrefix("HOLDING") }) != nil)
        let waiting = try waiter(dir, keys: keys)
        #expect(await startTogether([waiting]))
        #expect(await waiting.line(timeout: 600, where: { $0.hasPrefix("WAITING") }) == "WAITING \(keys)")
        holding.send("RELEASE")
        let result = await waiting.json(timeout: 600)
        #expect(result?["right"] as? Int == keys)
        #expect(result?["wrong"] as? Int == 0)
        #expect(result?["generated"] as? Int == 0, "the waiter generated keys its holder published")
        let threads = result?["peakThreads"] as? Int ?? .max
        #expect(threads <= 32, "peak threads \(threads) (one per key would be \(keys))")
        print("10,000 waits: peak \(threads) threads, RSS growth \((result?["rssGrowthBytes"] as? Int ?? 0) >> 20) MB")
        #expect(await holding.json(timeout: 600)?["published"] as? Int == keys)
        #expect(await waiting.exitStatus(timeout: 60) == 0)
        #expect(await holding.exitStatus(timeout: 60) == 0)
    }

    @Test("holders killed while a process waits on 2,000 of their keys: it takes every key over")
    func holdersKilled() async throws {
        let dir = TemporaryDirectory("many-waits-killed")
        let keys = 2000
        let holders = try [holder(dir, keys: keys / 2), holder(dir, keys: keys / 2, from: keys / 2)]
        for holder in holders { #expect(await holder.line(timeout: 600, where: { $0.hasPrefix("HOLDING") }) != nil) }
        let waiting = try waiter(dir, keys: keys)
        #expect(await startTogether([waiting]))
        #expect(await waiting.line(timeout: 600, where: { $0.hasPrefix("WAITING") }) == "WAITING \(keys)")
        // One holder publishes, the other dies holding its half: the kernel drops its locks.
        holders[0].send("RELEASE")
        holders[1].kill()
        let result = await waiting.json(timeout: 600)
        #expect(result?["right"] as? Int == keys)
        #expect(result?["wrong"] as? Int == 0)
        #expect(result?["generated"] as? Int == keys / 2, "the killed holder's keys are taken over, no other")
        #expect((result?["peakThreads"] as? Int ?? .max) <= 32)
        #expect(await waiting.exitStatus(timeout: 60) == 0)
        _ = await holders[1].exitStatus(timeout: 60)
        #expect(await holders[0].exitStatus(timeout: 60) == 0)
    }
}
