// Staging-file names (I2): unpredictable (24 hex characters from getrandom(2), no per-process seed) and
// created O_CREAT|O_EXCL, so a name someone planted in tmp/ is never opened, let alone written through.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

extension Hardening {
    @Suite("Hardening: staging names")
    struct StagingNames {
        static func isStagingName(_ name: String) -> Bool {
            let hex = name.dropFirst(4).dropLast(8)
            return name.hasPrefix("tmp/") && name.hasSuffix(".staging") && hex.count == 24
                && hex.allSatisfy { $0.isHexDigit && !$0.isUppercase }
        }

        @Test("names are 24 random hex characters and never repeat, within and across instances")
        func namesAreUnpredictable() throws {
            let dir = TemporaryDirectory("staging")
            let first = try Directory(path: dir.path, sharing: .privateToUser, allowNetworkFilesystem: false)
            let second = try Directory(path: dir.path, sharing: .privateToUser, allowNetworkFilesystem: false)
            let a = (0..<2000).map { _ in first.newStagingPath() }
            let b = (0..<2000).map { _ in second.newStagingPath() }
            #expect(a.allSatisfy(Self.isStagingName))
            #expect(Set(a).count == a.count)
            #expect(Set(a).isDisjoint(with: b))
            // Every hex digit appears at every position over 4000 names: no fixed or counter-like part.
            for position in 4..<28 {
                let digits = Set((a + b).map { $0[$0.index($0.startIndex, offsetBy: position)] })
                #expect(digits.count == 16, "position \(position) takes only \(digits.sorted())")
            }
        }

        @Test("a file or symlink planted at a staging name is never opened: O_EXCL fails")
        func plantedNameIsRefused() throws {
            let dir = TemporaryDirectory("staging-excl")
            let outside = TemporaryDirectory("staging-outside")
            Hardening.makePrivateFolder(outside.path)
            let directory = try Directory(path: dir.path, sharing: .privateToUser, allowNetworkFilesystem: false)
            let target = outside.path + "/target"
            Hardening.makeOutsideFile(target)
            let before = Snapshot(target)
            let planted = directory.newStagingPath()
            let linked = directory.newStagingPath()
            _ = FileManager.default.createFile(atPath: dir.path + "/" + planted, contents: Data("planted".utf8))
            try #require(symlink(target, dir.path + "/" + linked) == 0)
            for name in [planted, linked] {
                let opened = Syscall.open(
                    name, in: directory.descriptor, flags: [.writeOnly, .create, .exclusive], mode: 0o600)
                guard case .failure(let error) = opened else {
                    Issue.record("O_EXCL opened a planted \(name)")
                    continue
                }
                #expect(error.errno == .fileExists)
            }
            #expect(Snapshot(target) == before)
            #expect(try String(contentsOfFile: dir.path + "/" + planted, encoding: .utf8) == "planted")
        }

        @Test("two processes publishing at once never collide on a staging name")
        func twoProcessesNeverCollide() async throws {
            let dir = TemporaryDirectory("staging-procs")
            // Each child publishes 200 distinct keys; a collision would make an O_EXCL open fail
            // (a write failure, thrown by the worker) or publish one process's bytes under the other's key.
            let children = try (0..<2).map { index in
                try ChildProcess([
                    "worker", "get", "--directory", dir.path, "--key", "p\(index)", "--count", "200", "--size", "512",
                    "--seed", "\(index + 1)", "--go",
                ])
            }
            #expect(await startTogether(children))
            for child in children {
                var correct = 0
                while let line = await child.json(timeout: 60) {
                    if line["correct"] as? Bool == true { correct += 1 }
                    if correct == 200 { break }
                }
                #expect(correct == 200)
                #expect(await child.exitStatus() == 0)
            }
            let staging = Hardening.allNames(under: dir.path + "/tmp")
            #expect(staging.isEmpty, "no staging file left behind: \(staging)")
        }
    }
}
