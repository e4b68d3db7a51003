// What `yashima run` stores: one entry per command holding its standard output and every `--output` file,
// in a small container of its own (codec `yashima-run-v1`). One entry, not one per file, so that all of a
// command's results are published, trimmed, removed and validated together (a hit never finds some
// outputs and not others), under one key and one lock. The entry's payload checksum covers the whole
// container; decoding checks every length and slices the payload without copying it.

import Foundation
@_spi(Operator) import YashimaShared

/// One command's results.
///
/// Container layout (little-endian), the entry's payload:
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 8 | magic `YSHRUNV1` |
/// | 8 | 8 | the command's running time, nanoseconds (u64) |
/// | 16 | 4 | output file count N (u32) |
/// | 20 | 4 | reserved (0) |
/// | 24 | 8 | standard output length S (u64) |
/// | 32 | … | N descriptors: path length L (u32), mode bits (u32), file length B (u64), then L bytes of path |
/// | … | S | standard output |
/// | … | B each | the output files, in descriptor order |
///
/// The container is exactly that long; anything else fails to decode (and the entry is a miss).
struct RunRecord: Sendable {
    struct OutputFile: Sendable {
        /// The path as given to `--output`.
        let path: String
        /// Permission bits to give the file (`st_mode & 0o7777` when it was made).
        let mode: UInt32
        let contents: Data
    }

    /// How long the command ran, in nanoseconds.
    let runningNanoseconds: UInt64
    let standardOutput: Data
    let outputs: [OutputFile]

    var byteCount: Int { standardOutput.count + outputs.reduce(0) { $0 + $1.contents.count } }
}

struct RunRecordError: Error, CustomStringConvertible {
    let description: String
}

/// Encodes and decodes `RunRecord`s.
struct RunRecordCodec: CacheCodec {
    static let identifier = "yashima-run-v1"
    var identifier: String { RunRecordCodec.identifier }
    static let magic = Array("YSHRUNV1".utf8)

    func encode(_ record: RunRecord) throws -> Data {
        var header = [UInt8]()
        header += RunRecordCodec.magic
        append(record.runningNanoseconds, to: &header)
        append(UInt32(record.outputs.count), to: &header)
        append(UInt32(0), to: &header)
        append(UInt64(record.standardOutput.count), to: &header)
        for output in record.outputs {
            let path = Array(output.path.utf8)
            append(UInt32(path.count), to: &header)
            append(output.mode, to: &header)
            append(UInt64(output.contents.count), to: &header)
            header += path
        }
        var data = Data(capacity: header.count + record.byteCount)
        data.append(contentsOf: header)
        data.append(record.standardOutput)
        for output in record.outputs { data.append(output.contents) }
        return data
    }

    func decode(_ data: Data) throws -> RunRecord {
        var reader = Reader(data: data)
        guard try reader.bytes(8) == RunRecordCodec.magic else { throw RunRecordError(description: "bad magic") }
        let running: UInt64 = try reader.integer()
        let count: UInt32 = try reader.integer()
        _ = try reader.integer() as UInt32
        let standardOutputCount: UInt64 = try reader.integer()
        var descriptors: [(path: String, mode: UInt32, count: UInt64)] = []
        for _ in 0..<count {
            let pathCount: UInt32 = try reader.integer()
            let mode: UInt32 = try reader.integer()
            let fileCount: UInt64 = try reader.integer()
            let path = String(decoding: try reader.bytes(Int(pathCount)), as: UTF8.self)
            descriptors.append((path, mode, fileCount))
        }
        let standardOutput = try reader.slice(standardOutputCount)
        var outputs: [RunRecord.OutputFile] = []
        for descriptor in descriptors {
            outputs.append(
                RunRecord.OutputFile(
                    path: descriptor.path, mode: descriptor.mode, contents: try reader.slice(descriptor.count)))
        }
        guard reader.isAtEnd else { throw RunRecordError(description: "trailing bytes") }
        return RunRecord(runningNanoseconds: running, standardOutput: standardOutput, outputs: outputs)
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
