// RemoteEnvelopeReaderTests.swift: CRC32C combining against direct computation, and the streaming
// envelope reader: every chunking of a value gives the value; payloads at or above the threshold land
// in the staging file at the given offset (with their own CRC32C), smaller ones stay in memory;
// early rejections (foreign, wrong identity, unsigned, over the cap) and late ones (checksum,
// signature, truncated, trailing) as for RemoteEnvelope.open; a staging write failure is a local fault.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

@Suite("Remote envelope reader")
struct RemoteEnvelopeReaderTests {
    let identity = SHA256.hash(Array("identity".utf8))
    let secret = RemoteSecret("k")!

    private func bytes(_ count: Int, seed: UInt8 = 3) -> [UInt8] {
        Array(periodicBytes(count) { UInt8(truncatingIfNeeded: $0 &* 131 &+ Int(seed)) })
    }

    /// Feeds `value` in chunks of `chunk` bytes and finishes.
    private func read(
        _ value: [UInt8], chunk: Int, secret: RemoteSecret? = nil, limit: Int = 1 << 30,
        staging: RemoteStagingFile? = nil, threshold: Int = 0
    ) -> Result<RemoteEnvelopeReader.Opened, RemoteEnvelopeReader.Failure> {
        var reader = RemoteEnvelopeReader(
            identity: identity, secret: secret, maximumBytes: limit, staging: staging, streamingThreshold: threshold)
        var offset = 0
        while offset < value.count {
            let end = min(value.count, offset + chunk)
            if case .failure(let failure) = value[offset..<end].withUnsafeBytes({ reader.consume($0) }) {
                return .failure(failure)
            }
            offset = end
        }
        return reader.finish()
    }

    @Test("CRC32C.combine equals the checksum of the concatenation")
    func combine() {
        let data = bytes(70_000)
        for split in [0, 1, 7, 8, 72, 4096, 24_576, 69_999, 70_000] {
            let first = CRC32C.checksum(Array(data[..<split]))
            let second = CRC32C.checksum(Array(data[split...]))
            #expect(CRC32C.combine(first, second, secondLength: data.count - split) == CRC32C.checksum(data))
        }
        #expect(CRC32C.combine(0x1234_5678, 0, secondLength: 0) == 0x1234_5678)
    }

    @Test("any chunking, signed or not, in memory")
    func chunkings() throws {
        for key in [nil, secret] {
            let payload = Data(bytes(10_000))
            let sealed = RemoteEnvelope.seal(payload, identity: identity, createdAt: 3, expiresAt: 4, secret: key)
            for chunk in [1, 7, 80, 81, 4096, sealed.count] {
                let opened = try read(sealed, chunk: chunk, secret: key).get()
                #expect(opened == .memory(RemoteValue(payload: payload, createdAt: 3, expiresAt: 4)), "chunk \(chunk)")
            }
        }
    }

    @Test("payloads at or above the threshold go to the staging file at its offset; smaller stay in memory")
    func staging() throws {
        let directory = TemporaryDirectory("reader")
        try FileManager.default.createDirectory(at: directory.url, withIntermediateDirectories: true)
        let path = directory.path + "/staging"
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        #expect(fd >= 0)
        defer { close(fd) }
        let staging = RemoteStagingFile(descriptor: fd, payloadOffset: 100)
        let large = bytes(300_000)
        let sealed = RemoteEnvelope.seal(Data(large), identity: identity, createdAt: 5, expiresAt: 6, secret: secret)
        let opened = try read(sealed, chunk: 16_384, secret: secret, staging: staging, threshold: 300_000).get()
        let expected = RemoteFileValue(
            payloadByteCount: large.count, payloadChecksum: CRC32C.checksum(large), createdAt: 5, expiresAt: 6)
        #expect(opened == .file(expected))
        let written = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(written.count == 100 + large.count)
        #expect(Array(written[100...]) == large)
        let small = RemoteEnvelope.seal(Data(bytes(10)), identity: identity, createdAt: 1, expiresAt: 0, secret: nil)
        let inMemory = try read(small, chunk: 3, staging: staging, threshold: 300_000).get()
        #expect(inMemory == .memory(RemoteValue(payload: Data(bytes(10)), createdAt: 1, expiresAt: 0)))
        // A staging write that fails (a read-only descriptor) is a local failure, not a rejection.
        let readOnly = open(path, O_RDONLY | O_CLOEXEC)
        defer { close(readOnly) }
        let failed = read(
            sealed, chunk: 16_384, secret: secret, staging: RemoteStagingFile(descriptor: readOnly, payloadOffset: 0),
            threshold: 1)
        guard case .failure(.staging(let error)) = failed else {
            Issue.record("expected a staging failure, got \(failed)")
            return
        }
        #expect(error.errno == .badDescriptor)
    }

    @Test("rejections: early from the header, late from the checksum and signature")
    func rejections() {
        let payload = Data(bytes(5000))
        let unsigned = RemoteEnvelope.seal(payload, identity: identity, createdAt: 1, expiresAt: 0, secret: nil)
        let signed = RemoteEnvelope.seal(payload, identity: identity, createdAt: 1, expiresAt: 0, secret: secret)
        let other = RemoteEnvelope.seal(
            payload, identity: SHA256.hash(Array("other".utf8)), createdAt: 1, expiresAt: 0, secret: nil)
        // Early: the first 80 bytes decide (the rest is never needed).
        #expect(
            read(Array(unsigned.prefix(80)) + bytes(10), chunk: 80, secret: secret) == .failure(.rejected(.unsigned)))
        #expect(read(Array(other.prefix(80)), chunk: 80) == .failure(.rejected(.wrongIdentity)))
        #expect(read(Array("GET / HTTP/1.1".utf8), chunk: 8) == .failure(.rejected(.foreign)))
        #expect(read(Array(unsigned.prefix(80)), chunk: 80, limit: 1000) == .failure(.tooLarge))
        #expect(read(unsigned, chunk: 512, limit: unsigned.count) != .failure(.tooLarge))
        // Late.
        var damaged = unsigned
        damaged[200] ^= 1
        #expect(read(damaged, chunk: 512) == .failure(.rejected(.badChecksum)))
        var forged = signed
        forged[forged.count - 1] ^= 1
        #expect(read(forged, chunk: 512, secret: secret) == .failure(.rejected(.badSignature)))
        #expect(read(Array(unsigned.dropLast()), chunk: 512) == .failure(.rejected(.truncated)))
        #expect(read(unsigned + [0], chunk: 512) == .failure(.rejected(.trailingBytes)))
        #expect(read([], chunk: 1) == .failure(.rejected(.foreign)))
        #expect(read(Array(unsigned.prefix(40)), chunk: 1) == .failure(.rejected(.truncated)))
    }
}
