// `yashima verify` on a directory damaged by the tests' own helpers (EntryDamage: every way a header,
// identity or payload can be wrong) plus debris of killed processes: it must report exactly the damaged
// files and the debris, exit 1, and with --repair remove them (and nothing else), after which the
// directory verifies clean and every intact entry still reads back.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

@Suite struct CLIVerifyTests {
    @Test func verifyFindsEveryDamagedEntryAndRepairRemovesThem() async throws {
        let fixture = try CLIFixture()
        let cache = YCache(storageDirectory: URL(fileURLWithPath: fixture.storage), memoryMaximumCost: 0)
        let codec = DataCodec()
        let damages = EntryDamage.allCases
        let intact = 5
        var keys: [CacheKey] = []
        for index in 0..<(damages.count + intact) {
            let key = CacheKey(namespace: "verify", identity: "entry-\(index)").variant("n", index)
            let payload = sampleBytes(index % 3 == 0 ? 200_000 : 3_000, seed: UInt64(index))
            try await cache.store(payload, for: key, codec: codec)
            keys.append(key)
        }
        // Damage one entry per way, the way a concurrent writer would (a new file renamed over it).
        var damaged: [String: EntryDamage] = [:]
        for (index, damage) in damages.enumerated() {
            let url = try cache.entryURL(keys[index], codec)
            let bytes = try [UInt8](Data(contentsOf: url))
            let payload = Array(bytes.suffix(index % 3 == 0 ? 200_000 : 3_000))
            let broken = damage.apply(to: bytes, key: keys[index], codec: codec.identifier, payload: payload)
            try replaceFile(at: url, with: Data(broken))
            damaged[String(url.path.dropFirst(fixture.storage.count + 1))] = damage
        }
        // Debris: an old staging file and an old lock file nobody holds; a young staging file is a write
        // in progress and stays.
        let oldStaging = URL(fileURLWithPath: fixture.storage + "/tmp/0123456789abcdef01234567.staging")
        try writeFile(Data("partial".utf8), to: oldStaging)
        try setModificationTime(oldStaging, secondsAgo: 2 * 3600)
        let youngStaging = URL(fileURLWithPath: fixture.storage + "/tmp/fedcba9876543210fedcba98.staging")
        try writeFile(Data("in progress".utf8), to: youngStaging)
        let oldLock = URL(
            fileURLWithPath: fixture.storage + "/locks/ab/" + String(repeating: "ab", count: 32) + ".lock")
        try writeFile(Data(), to: oldLock)
        try setModificationTime(oldLock, secondsAgo: 2 * 3600)

        let stats = try await yashima(["stats", "--json"] + fixture.dir).json
        #expect((stats["debris"] as? [String: Int])?["total"] == 2)
        #expect((stats["debris"] as? [String: Int])?["stagingFiles"] == 2)
        #expect(stats["lockFiles"] as? Int == 1 && stats["lockFilesHeld"] as? Int == 0)

        let found = try await yashima(["verify", "--json"] + fixture.dir)
        #expect(found.status == 1, "damage left unrepaired is status 1")
        #expect(found.json["checked"] as? Int == damages.count + intact)
        let reported = (found.json["damaged"] as? [[String: Any]] ?? []).compactMap { $0["file"] as? String }
        #expect(Set(reported) == Set(damaged.keys), "missed: \(Set(damaged.keys).subtracting(reported))")
        #expect(reported.count == damaged.count)
        #expect((found.json["debris"] as? [String: Int])?["before"] == 2)
        let text = try await yashima(["verify"] + fixture.dir)
        #expect(text.status == 1)
        #expect(text.text.contains("damaged: \(damages.count)"))
        #expect(text.text.contains("payload checksum mismatch"))

        let repaired = try await yashima(["verify", "--repair", "--json"] + fixture.dir)
        #expect(repaired.status == 0, "\(repaired.error)")
        #expect(repaired.json["removed"] as? Int == damages.count)
        #expect((repaired.json["debris"] as? [String: Int])?["after"] == 0)
        for file in damaged.keys { #expect(!fileExists(URL(fileURLWithPath: fixture.storage + "/" + file)), "\(file)") }
        #expect(!fileExists(oldStaging) && !fileExists(oldLock))
        #expect(fileExists(youngStaging))

        let clean = try await yashima(["verify", "--json"] + fixture.dir)
        #expect(clean.status == 0)
        #expect(clean.json["checked"] as? Int == intact)
        #expect((clean.json["damaged"] as? [Any])?.isEmpty == true)
        // The intact entries still read back, and the damaged keys are plain misses.
        let reader = YCache(storageDirectory: URL(fileURLWithPath: fixture.storage), memoryMaximumCost: 0)
        for (index, key) in keys.enumerated() {
            let value = try await reader.valueIfCached(for: key, codec: codec)
            let expected = sampleBytes(index % 3 == 0 ? 200_000 : 3_000, seed: UInt64(index))
            #expect(value == (index < damages.count ? nil : expected), "entry \(index)")
        }
    }
}
