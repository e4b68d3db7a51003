// The key of `yashima run`, proved on generated command lines: random argument vectors, inputs, keys,
// environment values, working directories, outputs and standard inputs of arbitrary bytes (invalid
// UTF-8, U+FFFD itself, precomposed and decomposed accents, `=`, empty, long) get the same key exactly
// when they agree on everything the key covers. Seeded; the seed is printed with any failure
// (YASHIMA_PROPERTY_SEED=N reruns it).

import Foundation
import Testing
@_spi(Operator) import YashimaShared

@testable import YashimaCommandLine

@Suite struct RunKeyPropertyTests {
    /// What a command line says, as a user gave it (repeats and order included).
    struct Line {
        var namespace = "run"
        var argv: [[UInt8]] = []
        var inputs: [(path: [UInt8], contents: [UInt8])] = []
        var keys: [[UInt8]] = []
        var environment: [(name: String, value: [UInt8]?)] = []
        var cwd: [UInt8]?
        var outputs: [[UInt8]] = []
        var stdin: [UInt8]?

        /// The key the implementation makes (outputs deduplicated as `Invocation` does).
        var key: CacheKey {
            var parts = RunKey.Parts(namespace: namespace, argv: argv.map(Word.init))
            parts.inputs = inputs.map { (Word($0.path), CacheKey.digest(of: Data($0.contents))) }
            parts.keys = keys.map(Word.init)
            parts.environment = environment.map { ($0.name, $0.value.map(Word.init)) }
            parts.workingDirectory = cwd.map(Word.init)
            var seen: [[UInt8]] = []
            for output in outputs where !seen.contains(output) { seen.append(output) }
            parts.outputs = seen.map(Word.init)
            parts.standardInputDigest = stdin.map { CacheKey.digest(of: Data($0)) }
            return RunKey.make(parts)
        }

        /// What the key is documented to cover, canonically: inputs and environment as sets (a path or
        /// name given twice counts once), keys and outputs in order, everything else as it is.
        var meaning: [UInt8] {
            var bytes: [UInt8] = []
            func field(_ value: [UInt8]) { bytes += Array(String(value.count).utf8) + [0x3A] + value }
            field(Array(namespace.utf8))
            field(Array(String(argv.count).utf8)); argv.forEach(field)
            var files: [[UInt8]: [UInt8]] = [:]
            for input in inputs where files[input.path] == nil { files[input.path] = input.contents }
            field(Array(String(files.count).utf8))
            for path in files.keys.sorted(by: { $0.lexicographicallyPrecedes($1) }) { field(path); field(files[path]!) }
            field(Array(String(keys.count).utf8)); keys.forEach(field)
            // By bytes: "é" precomposed and decomposed are two names (Swift's String equality would merge them).
            var variables: [[UInt8]: [UInt8]?] = [:]
            for (name, value) in environment where variables[Array(name.utf8)] == nil {
                variables[Array(name.utf8)] = .some(value)
            }
            field(Array(String(variables.count).utf8))
            for name in variables.keys.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
                field(name)
                if let value = variables[name] ?? nil { field([1] + value) } else { field([0]) }
            }
            field(cwd.map { [1] + $0 } ?? [0])
            var seen: [[UInt8]] = []
            for output in outputs where !seen.contains(output) { seen.append(output) }
            field(Array(String(seen.count).utf8)); seen.forEach(field)
            field(stdin.map { [1] + $0 } ?? [0])
            return bytes
        }
    }

    /// A small deterministic generator (xorshift64*).
    struct Generator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state ^= state >> 12
            state ^= state << 25
            state ^= state >> 27
            return state &* 0x2545_F491_4F6C_DD1D
        }
        mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
        mutating func chance(_ percent: Int) -> Bool { below(100) < percent }

        /// Bytes without NUL, from pieces that break lossy or careless encodings.
        mutating func word(maximum: Int = 12) -> [UInt8] {
            let pieces: [[UInt8]] = [
                [0xFF], [0xFE], [0x80], [0xC3], [0xEF, 0xBF, 0xBD], [0xC3, 0xA9], [0x65, 0xCC, 0x81], Array("=".utf8),
                Array("a".utf8), Array("b".utf8), Array(" ".utf8), Array("/".utf8), Array("'".utf8), Array("\\".utf8),
                Array("\n".utf8), Array("%".utf8), Array("-".utf8), [0x01], [0x7F],
            ]
            if chance(2) { return (0..<(500 + below(1500))).map { _ in UInt8(1 + below(255)) } }
            return (0..<below(maximum + 1)).flatMap { _ in pieces[below(pieces.count)] }
        }

        mutating func line() -> Line {
            var line = Line()
            if chance(10) { line.namespace = ["run", "docs", "é", "e\u{301}", "=", "a b"][below(6)] }
            line.argv = (0..<(1 + below(4))).map { _ in word() }
            for _ in 0..<below(3) {
                let path = word(maximum: 4)
                let contents = line.inputs.first(where: { $0.path == path })?.contents ?? word(maximum: 6)
                line.inputs.append((path, contents))
            }
            line.keys = (0..<below(3)).map { _ in word(maximum: 4) }
            for _ in 0..<below(3) {
                let name = ["A", "B", "PATH", "é", "e\u{301}"][below(5)]
                let same = line.environment.first { $0.name.utf8.elementsEqual(name.utf8) }
                let value = same.map(\.value) ?? (chance(20) ? nil : word(maximum: 4))
                line.environment.append((name, value))
            }
            if chance(30) { line.cwd = [0x2F] + word(maximum: 4) }
            line.outputs = (0..<below(3)).map { _ in word(maximum: 3) }
            if chance(30) { line.stdin = word(maximum: 6) }
            return line
        }

        /// The same command line said another way: inputs and environment reordered and repeated.
        mutating func sameMeaning(_ line: Line) -> Line {
            var other = line
            other.inputs.shuffle(using: &self)
            if let input = other.inputs.first, chance(50) { other.inputs.append(input) }
            other.environment.shuffle(using: &self)
            if let variable = other.environment.first, chance(50) { other.environment.append(variable) }
            if let output = other.outputs.first, chance(30) { other.outputs.append(output) }
            return other
        }

        /// `bytes` nearly the same: one byte that is not UTF-8 swapped for another, or for U+FFFD, or an
        /// accent precomposed or decomposed — what a lossy conversion would not tell apart.
        mutating func tweak(_ bytes: [UInt8]) -> [UInt8] {
            if let index = bytes.firstIndex(where: { $0 == 0xFF || $0 == 0xFE }) {
                var copy = bytes
                if chance(50) {
                    copy[index] ^= 0x01
                } else {
                    copy.replaceSubrange(index...index, with: [0xEF, 0xBF, 0xBD])
                }
                return copy
            }
            if let range = bytes.firstRange(of: [0xC3, 0xA9]) {
                var copy = bytes
                copy.replaceSubrange(range, with: [0x65, 0xCC, 0x81])
                return copy
            }
            return bytes + [chance(50) ? 0xFF : 0x80]
        }

        /// The command line with one thing the key covers changed (which may, by chance, change nothing).
        mutating func changed(_ line: Line) -> Line {
            var other = line
            switch below(16) {
            case 9:
                let index = below(other.argv.count)
                other.argv[index] = tweak(other.argv[index])
            case 10 where !other.keys.isEmpty: other.keys[0] = tweak(other.keys[0])
            case 11 where !other.inputs.isEmpty:
                let path = other.inputs[0].path
                let tweaked = tweak(path)
                other.inputs = other.inputs.map { $0.path == path ? (tweaked, $0.contents) : $0 }
            case 12 where !other.outputs.isEmpty: other.outputs[0] = tweak(other.outputs[0])
            case 13: other.cwd = tweak(other.cwd ?? [0x2F])
            case 14 where other.stdin != nil: other.stdin = tweak(other.stdin!)
            case 15 where !other.environment.isEmpty:
                let name = other.environment[0].name
                let value = tweak(other.environment[0].value ?? [])
                other.environment = other.environment.map { $0.name.utf8.elementsEqual(name.utf8) ? (name, value) : $0 }
            case 0: other.argv[below(other.argv.count)] = word()
            case 1: other.argv.append(word())
            case 2: other.keys.append(word(maximum: 3))
            case 3: other.inputs.append((word(maximum: 3), word(maximum: 3)))
            case 4 where !other.inputs.isEmpty:
                let index = below(other.inputs.count)
                let path = other.inputs[index].path
                let contents = word(maximum: 4)
                other.inputs = other.inputs.map { $0.path == path ? (path, contents) : $0 }
            case 5: other.cwd = other.cwd == nil ? [0x2F] + word(maximum: 3) : nil
            case 6: other.outputs.insert(word(maximum: 3), at: 0)
            case 7: other.stdin = other.stdin == nil ? word(maximum: 3) : (chance(50) ? nil : word(maximum: 3))
            default:
                let name = ["A", "B", "C"][below(3)]
                let value: [UInt8]? = chance(30) ? nil : word(maximum: 3)
                other.environment =
                    other.environment.filter { !$0.name.utf8.elementsEqual(name.utf8) } + [(name, value)]
            }
            return other
        }
    }

    // The properties run on threads of their own (seconds of CPU in a debug build): on the cooperative
    // pool they held one of its two threads from every other suite of the parallel run.

    @Test func equalExactlyWhenTheyMeanTheSame() async {
        let seed =
            ProcessInfo.processInfo.environment["YASHIMA_PROPERTY_SEED"].flatMap { UInt64($0) }
            ?? UInt64.random(in: 1...UInt64.max)
        let (failures, distinct) = await offPool { () -> (Int, Int) in
            var random = Generator(state: seed)
            var keyOfMeaning: [[UInt8]: String] = [:]
            var meaningOfKey: [String: [UInt8]] = [:]
            var failures = 0
            func record(_ line: Line) {
                let meaning = line.meaning
                let key = line.key.stableIdentifier
                if let known = keyOfMeaning[meaning], known != key { failures += 1 }
                if let known = meaningOfKey[key], known != meaning { failures += 1 }
                keyOfMeaning[meaning] = key
                meaningOfKey[key] = meaning
            }
            for _ in 0..<10_000 {
                let line = random.line()
                record(line)
                record(random.sameMeaning(line))
                record(random.changed(line))
                if failures > 0 { break }
            }
            return (failures, keyOfMeaning.count)
        }
        #expect(failures == 0, "a key disagreed with what it covers; rerun with YASHIMA_PROPERTY_SEED=\(seed)")
        #expect(distinct > 15_000, "the generator made too few distinct command lines (seed \(seed))")
    }

    @Test func theKnownCollisionsAreGone() {
        func key(_ argv: [[UInt8]], keys: [[UInt8]] = [], cwd: [UInt8]? = nil) -> String {
            var line = Line()
            line.argv = argv
            line.keys = keys
            line.cwd = cwd
            return line.key.stableIdentifier
        }
        let echo = [Array("echo".utf8), Array("same".utf8)]
        #expect(key(echo, keys: [[0xFF]]) != key(echo, keys: [[0xFE]]))
        #expect(key(echo, keys: [[0xFF]]) != key(echo, keys: [[0xEF, 0xBF, 0xBD]]))
        #expect(key([[0xFF]]) != key([[0xFE]]))
        #expect(key([[0xFF]]) != key([[0xEF, 0xBF, 0xBD]]))
        #expect(key(echo, cwd: Array("/d".utf8) + [0xFF]) != key(echo, cwd: Array("/d".utf8) + [0xFE]))
        #expect(key([Array("é".utf8)]) != key([[0x65, 0xCC, 0x81]]), "precomposed and decomposed differ")
        #expect(key([Array("a".utf8), Array("b".utf8)]) != key([Array("a b".utf8)]))
    }

    @Test func theCommandLineComesBackExactly() async {
        let wrong = await offPool { () -> [[[UInt8]]] in
            var random = Generator(state: 42)
            var wrong: [[[UInt8]]] = []
            for _ in 0..<2_000 {
                let line = random.line()
                if RunKey.argv(of: line.key)?.map(\.bytes) != line.argv { wrong.append(line.argv) }
            }
            return wrong
        }
        #expect(
            wrong.isEmpty, "\(wrong.count) of 2,000 command lines did not come back; the first: \(wrong.first ?? [])")
    }
}

extension RunKeyPropertyTests.Generator: RandomNumberGenerator {}
