// A damaged `state` or `trim.lock` under real processes that hold the directory open (I14): each is
// damaged in place in each of the issue's five ways while `yashima-stress worker serve` children keep the
// directory open (and the state file mapped), then those children and one opened afterwards get, store,
// trim and remove. Every call must succeed with the right value, a removal made after the repair must be
// seen by processes that opened the directory before it, and concurrent repairers must end with one file.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

/// A `worker serve` child: one long-lived process with the directory open, driven line by line.
private struct Server {
    let child: ChildProcess
    let name: String

    init(_ name: String, _ dir: TemporaryDirectory, budget: Int = 256 * 1024) async throws {
        self.name = name
        child = try ChildProcess(["worker", "serve", "--directory", dir.path, "--budget", "\(budget)"])
        let ready = await child.line(timeout: 60)
        try #require(ready == "READY", "\(name) did not start: \(ready ?? "no output")")
    }

    /// Sends one command without waiting for its answer.
    func send(_ command: String) { child.send(command) }

    /// The answer to the last command sent.
    func answer() async -> [String: Any] {
        await child.json(timeout: 60) ?? ["ok": false, "error": "no answer from \(name)"]
    }

    /// Runs `command`; records an issue unless it succeeded. Returns the answer.
    @discardableResult
    func call(_ command: String, sourceLocation: SourceLocation = #_sourceLocation) async -> [String: Any] {
        send(command)
        let result = await answer()
        #expect(result["ok"] as? Bool == true, "\(name): \(command) → \(result)", sourceLocation: sourceLocation)
        return result
    }

    /// The value `command` answered (nil for JSON null or a failure).
    func value(_ command: String, sourceLocation: SourceLocation = #_sourceLocation) async -> String? {
        await call(command, sourceLocation: sourceLocation)["value"] as? String
    }

    func repairs() async -> Int { await call("stats")["repairs"] as? Int ?? -1 }

    func quit() async {
        child.send("quit")
        #expect(await child.exitStatus() == 0, "\(name) did not exit cleanly")
    }
}

@Suite(.serialized) struct AuxiliaryFileRepairTests {
    @Test(
        "damaged under running processes: every call works, values are right, a later removal is seen by all",
        arguments: ["state", "trim.lock"], AuxiliaryDamage.allCases)
    func damagedUnderRunningProcesses(file: String, damage: AuxiliaryDamage) async throws {
        let dir = TemporaryDirectory("aux-\(file)-\(damage.rawValue)")
        let a = try await Server("A", dir)
        let b = try await Server("B", dir)
        let c = try await Server("C", dir)
        // k1's key epoch is 2 when B and C read it (a removal bumps twice): after a repair, a removal in
        // the new file bumps it to 2 again, and only the file's instance id tells the two apart.
        #expect(await a.value("get k1 zero") == "zero")  // generated: no bump (a store would bump once)
        await a.call("remove k1")
        #expect(await a.value("get k1 one") == "one")
        #expect(await b.value("get k1 wrong") == "one")
        #expect(await c.value("get k1 wrong") == "one")
        #expect(await b.value("memory k1") == "one")
        #expect(await c.value("memory k1") == "one")
        await a.call("trim")  // makes trim.lock
        let path = dir.path + "/" + file
        let before = inode(path)

        try damage.apply(to: path)

        // Every process keeps working (without the SIGBUS guard a truncated state file kills them here)...
        #expect(await a.value("get k2 two") == "two")
        #expect(await b.value("get k2 wrong") == "two")
        #expect(await c.value("get k1 wrong") == "one")
        // ...and one that opens the directory now (opening repairs damage it can see).
        let late = try await Server("late", dir)
        #expect(await late.value("get k2 wrong") == "two")
        // A removal by that process (on the repaired file, if any) is seen by those that opened before
        // the damage and only looked up since (a write checks the path first).
        await late.call("remove k1")
        #expect(await b.value("memory k1") == nil, "B's memory served an entry removed by late")
        #expect(await c.value("memory k1") == nil, "C's memory served an entry removed by late")
        #expect(await a.value("memory k1") == nil, "A's memory served an entry removed by late")
        #expect(await b.value("cached k1") == nil)
        #expect(await c.value("get k1 new") == "new")
        #expect(await b.value("get k1 wrong") == "new")
        // Writes over the budget trim, through trim.lock.
        let filler = String(repeating: "f", count: 20_000)
        for index in 0..<16 { await [a, b, c, late][index % 4].call("store fill\(index) \(filler)") }
        await a.call("trim")
        await b.call("trim")
        #expect((await late.call("usage")["bytes"] as? Int ?? .max) <= 256 * 1024)
        // A removal by a process that opened before the damage is seen by all.
        #expect(await late.value("memory k2") == "two")
        await a.call("remove k2")
        #expect(await b.value("memory k2") == nil, "B's memory served a removed entry")
        #expect(await late.value("memory k2") == nil, "late's memory served a removed entry")
        // So is a replacement.
        #expect(await b.value("get k2 two") == "two")
        await c.call("store k2 three")
        #expect(await b.value("memory k2") == nil, "B's memory kept a replaced value")
        #expect(await a.value("get k2 wrong") == "three")
        #expect(await b.value("get k2 wrong") == "three")

        var repairs = 0
        for server in [a, b, c, late] { repairs += await server.repairs() }
        let expected = file == "state" && damage.isDetectableInStateFile ? 1 : 0
        #expect(repairs == expected, "repairs counted by all processes together")
        #expect(isGoodStateFile(dir.path + "/state"))
        if file == "state" { #expect((inode(path) != before) == damage.isDetectableInStateFile) }
        for server in [a, b, c, late] { await server.quit() }
    }

    @Test("processes noticing a damaged state file at the same moment repair it once and share the new file")
    func concurrentRepairersUnderOpenProcesses() async throws {
        let dir = TemporaryDirectory("aux-concurrent")
        var servers: [Server] = []
        for index in 0..<4 { servers.append(try await Server("S\(index)", dir)) }
        await servers[0].call("store shared one")
        for server in servers { #expect(await server.value("get shared wrong") == "one") }
        try AuxiliaryDamage.fillWithZeros.apply(to: dir.path + "/state")
        // All four notice on their next call, sent together.
        for (index, server) in servers.enumerated() { server.send("get own\(index) v\(index)") }
        for (index, server) in servers.enumerated() {
            let answer = await server.answer()
            #expect(answer["ok"] as? Bool == true && answer["value"] as? String == "v\(index)", "\(answer)")
        }
        var repairs = 0
        for server in servers { repairs += await server.repairs() }
        #expect(repairs == 1)
        #expect(isGoodStateFile(dir.path + "/state"))
        // One file for everyone: a removal by one is seen by the other three.
        await servers[3].call("remove shared")
        for server in servers.prefix(3) { #expect(await server.value("memory shared") == nil) }
        for server in servers { await server.quit() }
    }

    @Test("processes opening a directory with a truncated state file at the same moment repair it once")
    func concurrentRepairersAtOpen() async throws {
        let dir = TemporaryDirectory("aux-concurrent-open")
        let setup = try await Server("setup", dir)
        await setup.call("store k one")
        await setup.quit()
        try AuxiliaryDamage.truncateToZero.apply(to: dir.path + "/state")
        let children = try (0..<4).map { _ in
            try ChildProcess(["worker", "get", "--directory", dir.path, "--namespace", "serve", "--key", "k", "--go"])
        }
        #expect(await startTogether(children))
        var repairs = 0
        for child in children {
            let result = await child.json()
            repairs += result?["repairs"] as? Int ?? 100
            #expect(await child.exitStatus() == 0)
        }
        #expect(repairs == 1)
        #expect(isGoodStateFile(dir.path + "/state"))
    }
}
