// The README's quick start, run as it says: the same program in two processes at the same moment.

import Foundation
import Testing

@Suite(.serialized) struct ExamplesTests {
    private func run(_ mode: String, _ directory: String) throws -> Process {
        let process = Process()
        process.executableURL = productsDirectory().appendingPathComponent("yashima-examples")
        process.arguments = [mode, directory]
        process.standardOutput = Pipe()
        try process.run()
        return process
    }

    private func output(_ process: Process) -> String {
        process.waitUntilExit()
        let pipe = process.standardOutput as! Pipe
        return String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }

    @Test func quickStartInTwoProcessesGeneratesOnce() throws {
        let dir = TemporaryDirectory("quickstart")
        let first = try run("quickstart", dir.path)
        let second = try run("quickstart", dir.path)
        let lines = [output(first), output(second)].map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        #expect(first.terminationStatus == 0 && second.terminationStatus == 0)
        // One generated; the other either waited for it (shared) or started late enough to read it.
        #expect(lines.filter { $0.hasPrefix("generated false") }.count == 1, "\(lines)")
        #expect(lines.filter { $0.hasPrefix("storage") }.count == 1, "\(lines)")
        let third = try run("quickstart", dir.path)
        #expect(output(third).hasPrefix("storage false"))
    }

    @Test func guidesRun() throws {
        let dir = TemporaryDirectory("guides")
        let process = try run("guides", dir.path)
        let text = output(process)
        #expect(process.terminationStatus == 0)
        #expect(text.contains("image 2 1"))
        #expect(text.contains("summary"))
    }
}
