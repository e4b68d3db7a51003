// What `yashima run` stores: one entry per command holding its standard output and every `--output` (a
// file, or a folder's whole tree), in a small container of its own (codec `yashima-run-v2`). One entry,
// not one per file, so all of a command's results are published, trimmed, removed and validated together
// under one key and one lock. Decoding checks every length and every path (a hit writes only inside the
// outputs it names) and slices the payload without copying it.

import Foundation
import Glibc
@_spi(Operator) import YashimaShared

/// One command's results.
///
/// Container layout (little-endian), the entry's payload:
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 8 | magic `YSHRUNV2` |
/// | 8 | 8 | the command's running time, nanoseconds (u64) |
/// | 16 | 4 | output count N (u32): the `--output` paths, in the key's order |
/// | 20 | 4 | item count K (u32) |
/// | 24 | 8 | standard output length S (u64) |
/// | 32 | … | K items: output index (u32), mode (u32: S_IFREG or S_IFDIR and permission bits), length B (u64), path length L (u32), then L bytes of path |
/// | … | S | standard output |
/// | … | B each | the files' contents, in item order (folders have none) |
///
/// Each output has exactly one item with an empty path (the output itself, a file or a folder) before
/// any of its own; a folder's other items are relative paths of plain components, each folder listed
/// before what it holds. The container is exactly that long; anything else fails to decode (a miss).
struct RunRecord: Sendable {
    /// A file or folder of an output: the output itself (`relativePath` empty) or something in its tree.
    struct Item: Sendable {
        /// Which `--output` (index into the command line's outputs).
        let output: Int
        /// Empty for the output itself, else a path inside its folder (`sub/a.png`).
        let relativePath: [UInt8]
        /// `S_IFREG` or `S_IFDIR`, and the permission bits to give it.
        let mode: UInt32
        let contents: Data

        var isFolder: Bool { mode & S_IFMT == S_IFDIR }
    }

    /// How long the command ran, in nanoseconds.
    let runningNanoseconds: UInt64
    let standardOutput: Data
    /// How many `--output` paths the command line named.
    let outputCount: Int
    let items: [Item]

    var byteCount: Int { standardOutput.count + items.reduce(0) { $0 + $1.contents.count } }
}

struct RunRecordError: Error, CustomStringConvertible {
    let description: String
}

/// Encodes and decodes `RunRecord`s.
struct RunRecordCodec: CacheCodec {
    static let identifier = "yashima-run-v2"
    var identifier: String { RunRecordCodec.identifier }
    static let magic = Array("YSHRUNV2".utf8)

    func encode(_ record: RunRecord) throws -> Data {
        var header = [UInt8]()
        header += RunRecordCodec.magic
        append(record.runningNanoseconds, to: &header)
        append(UInt32(record.outputCount), to: &header)
        append(UInt32(record.items.count), to: &header)
        append(UInt64(record.standardOutput.count), to: &header)
        for item in record.items {
            append(UInt32(item.output), to: &header)
            append(item.mode, to: &header)
            append(UInt64(item.contents.count), to: &header)
            append(UInt32(item.relativePath.count), to: &header)
            header += item.relativePath
        }
        var data = Data(capacity: header.count + record.byteCount)
        data.append(contentsOf: header)
        data.append(record.standardOutput)
        for item in record.items { data.append(item.contents) }
        return data
    }

    func decode(_ data: Data) throws -> RunRecord {
        var reader = Reader(data: data)
        guard try reader.bytes(8) == RunRecordCodec.magic else { throw RunRecordError(description: "bad magic") }
        let running: UInt64 = try reader.integer()
        let outputCount = Int(try reader.integer() as UInt32)
        let itemCount = Int(try reader.integer() as UInt32)
        let standardOutputCount: UInt64 = try reader.integer()
        if itemCount == 0 {
            // No --output (the usual record): only the standard output.
            guard outputCount == 0 else { throw RunRecordError(description: "an output is missing") }
            let standardOutput = try reader.slice(standardOutputCount)
            guard reader.isAtEnd else { throw RunRecordError(description: "trailing bytes") }
            return RunRecord(
                runningNanoseconds: running, standardOutput: standardOutput, outputCount: 0, items: [])
        }
        var descriptors: [(output: Int, mode: UInt32, count: UInt64, path: [UInt8])] = []
        var folders: [Set<[UInt8]>] = Array(repeating: [], count: min(outputCount, itemCount))
        var seenRoot = [Bool](repeating: false, count: folders.count)
        for _ in 0..<itemCount {
            let output = Int(try reader.integer() as UInt32)
            let mode: UInt32 = try reader.integer()
            let count: UInt64 = try reader.integer()
            let path = try reader.bytes(Int(try reader.integer() as UInt32))
            guard output < folders.count, [S_IFREG, S_IFDIR].contains(mode & S_IFMT),
                mode & S_IFMT == S_IFREG || count == 0
            else { throw RunRecordError(description: "bad item") }
            if path.isEmpty {
                guard !seenRoot[output] else { throw RunRecordError(description: "output listed twice") }
                seenRoot[output] = true
                if mode & S_IFMT == S_IFDIR { folders[output].insert([]) }
            } else {
                // Inside a folder output, under a folder already listed, plain components only.
                let components = path.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
                guard folders[output].contains([]),
                    components.allSatisfy({ !$0.isEmpty && $0 != [UInt8(ascii: ".")] && $0 != [0x2E, 0x2E] }),
                    !path.contains(0),
                    folders[output].contains(Array(path.dropLast(components.last!.count + 1)))
                        || components.count == 1
                else { throw RunRecordError(description: "bad path") }
                if mode & S_IFMT == S_IFDIR { folders[output].insert(path) }
            }
            descriptors.append((output, mode, count, path))
        }
        guard seenRoot.allSatisfy({ $0 }), seenRoot.count == outputCount else {
            throw RunRecordError(description: "an output is missing")
        }
        let standardOutput = try reader.slice(standardOutputCount)
        var items: [RunRecord.Item] = []
        for descriptor in descriptors {
            items.append(
                RunRecord.Item(
                    output: descriptor.output, relativePath: descriptor.path, mode: descriptor.mode,
                    contents: try reader.slice(descriptor.count)))
        }
        guard reader.isAtEnd else { throw RunRecordError(description: "trailing bytes") }
        return RunRecord(
            runningNanoseconds: running, standardOutput: standardOutput, outputCount: outputCount, items: items)
    }

    /// A record has no other copy in memory worth charging for (the process keeps no memory layer).
    func memoryCost(of value: RunRecord, encodedByteCount: Int?) -> Int { value.byteCount }

    private func append<T: FixedWidthInteger>(_ value: T, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { bytes += $0 }
    }

    private struct Reader {
        let data: Data
        var offset: Int

        init(data: Data) {
            self.data = data
            offset = data.startIndex
        }

        var isAtEnd: Bool { offset == data.endIndex }

        mutating func slice(_ count: UInt64) throws -> Data {
            guard count <= UInt64(data.endIndex - offset) else { throw RunRecordError(description: "truncated") }
            let end = offset + Int(count)
            defer { offset = end }
            return data[offset..<end]  // shares the payload's storage (a mapping, for large entries)
        }

        mutating func bytes(_ count: Int) throws -> [UInt8] {
            [UInt8](try slice(UInt64(count)))
        }

        mutating func integer<T: FixedWidthInteger>() throws -> T {
            let bytes = try bytes(MemoryLayout<T>.size)
            return bytes.withUnsafeBytes { T(littleEndian: $0.loadUnaligned(as: T.self)) }
        }
    }
}
