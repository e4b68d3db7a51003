// `worker serve`: a long-lived process that opens a storage directory once and then runs the commands a
// test writes to its stdin, one per line, answering each with one JSON line. It lets cross-process tests
// keep a directory open (and its state file mapped) while they damage it, then drive get, store and
// remove in that same process.

import Foundation
import Glibc
import Synchronization
import YashimaShared

enum ServeWorker {
    /// `worker serve --directory D [--budget N] [--memory-budget N] [--sharing private|group]`. Prints
    /// READY once the directory is open, then answers:
    /// - `get KEY VALUE`: get-or-generate (the generator returns VALUE) → value, source
    /// - `get-alone KEY VALUE`: the same without the key's lock (`crossProcess: .processLocal`), as a
    ///   process whose wait for another holder timed out goes on → value, source
    /// - `store KEY VALUE` → ok
    /// - `remove KEY` → ok
    /// - `cached KEY`: memory, then storage, never generating → value (null on a miss), source
    /// - `memory KEY`: this process's memory only → value (null when not there)
    /// - `trim`: `trimStorageIfNeeded()`; `usage`: `storageUsage()` → bytes
    /// - `stats` → the `CacheStatistics` counters; `quit`
    /// - `hold KEY VALUE`: get-or-generate whose generator prints `GENERATING KEY` and returns VALUE only
    ///   after the next line on stdin (issue 32's repro: a generation held open while others write)
    /// - `big KEY SIZE`: get-or-generate SIZE bytes of data (`Payload`, seed 1), kept by the process →
    ///   source, correct; `check-big`: reads every byte of the kept value again → correct
    /// Keys are in namespace `serve`, values are strings (one word). A failed call answers
    /// `{"ok": false, "error": "..."}` and the process goes on.
    static func run(_ arguments: inout Arguments) async throws -> Int32 {
        let setup = try WorkerSetup(&arguments)
        try arguments.rejectUnknown()
        let cache = setup.makeCache()
        try cache.openStorage()
        emit("READY")
        while let line = readLine() {
            let words = line.split(separator: " ").map(String.init)
            guard let command = words.first else { continue }
            if command == "quit" { break }
            do {
                emit(jsonLine(try await answer(command, Array(words.dropFirst()), cache)))
            } catch {
                emit(jsonLine(["ok": false, "error": "\(error)"]))
            }
        }
        return 0
    }

    private static func key(_ name: String) -> CacheKey { CacheKey(namespace: "serve", identity: name) }

    /// The value `big` returned and the bytes it must have.
    private static let held = Mutex<(Data, Data)?>(nil)

    /// Waits for the next line on stdin, read on a thread of its own (never the cooperative pool's).
    private static func nextInputLine() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread {
                _ = readLine()
                continuation.resume()
            }
        }
    }

    private static func answer(_ command: String, _ words: [String], _ cache: YCache) async throws -> [String: Any] {
        func word(_ index: Int) throws -> String {
            guard index < words.count else { throw ArgumentError(description: "\(command) needs \(index + 1) words") }
            return words[index]
        }
        let codec = StringCodec()
        switch command {
        case "get":
            let value = try word(1)
            let resolution = try await cache.resolve(for: key(try word(0)), codec: codec) { value }
            return ["ok": true, "value": resolution.value, "source": resolution.source.rawValue]
        case "get-alone":
            let value = try word(1)
            let options = YCache.Options(crossProcess: .processLocal)
            let resolution = try await cache.resolve(for: key(try word(0)), codec: codec, options: options) { value }
            return ["ok": true, "value": resolution.value, "source": resolution.source.rawValue]
        case "store":
            try await cache.store(try word(1), for: key(try word(0)), codec: codec)
            return ["ok": true]
        case "remove":
            try await cache.remove(for: key(try word(0)), codec: codec)
            return ["ok": true]
        case "cached":
            var options = YCache.Options()
            options.lookupPolicy = .cacheOnly
            options.readFailurePolicy = .throwError
            do {
                let resolution = try await cache.resolve(for: key(try word(0)), codec: codec, options: options) {
                    throw YCache.Error.cacheMiss  // never called under .cacheOnly
                }
                return ["ok": true, "value": resolution.value, "source": resolution.source.rawValue]
            } catch YCache.Error.cacheMiss {
                return ["ok": true, "value": NSNull(), "source": "miss"]
            }
        case "memory":
            return ["ok": true, "value": try await cache.peek(for: key(try word(0)), codec: codec) ?? NSNull()]
        case "hold":
            let (name, value) = (try word(0), try word(1))
            let resolution = try await cache.resolve(for: key(name), codec: codec) {
                emit("GENERATING \(name)")
                await nextInputLine()
                return value
            }
            return ["ok": true, "value": resolution.value, "source": resolution.source.rawValue]
        case "big":
            let key = key(try word(0))
            guard let size = Int(try word(1)) else { throw ArgumentError(description: "big needs a size") }
            let expected = Payload.bytes(1, key: key, kind: .data, size: size)
            let resolution = try await cache.resolve(for: key, codec: DataCodec()) { expected }
            held.withLock { $0 = (resolution.value, expected) }
            return ["ok": true, "source": resolution.source.rawValue, "correct": resolution.value == expected]
        case "check-big":
            guard let (value, expected) = held.withLock({ $0 }) else {
                throw ArgumentError(description: "no big value")
            }
            return ["ok": true, "correct": value == expected]  // touches every byte of the value it was handed
        case "trim":
            try await cache.trimStorageIfNeeded()
            return ["ok": true]
        case "usage":
            return ["ok": true, "bytes": try await cache.storageUsage().byteCount]
        case "stats":
            let statistics = cache.statistics
            return [
                "ok": true, "repairs": statistics.auxiliaryFileRepairs, "memoryHits": statistics.memoryHits,
                "storageHits": statistics.storageHits, "generations": statistics.generations,
                "writeFailures": statistics.writeFailures,
            ]
        default:
            throw ArgumentError(description: "unknown serve command '\(command)'")
        }
    }
}
