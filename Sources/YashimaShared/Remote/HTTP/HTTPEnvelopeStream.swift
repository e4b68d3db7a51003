// HTTPEnvelopeStream.swift: a streamed store's request body, pulled by the transport a buffer at a time as
// the socket takes it: the envelope header, the payload (pread from the caller's file, or memory), the HMAC
// tag. Read only on the thread doing the transfer, before the store returns; rewound for a retry.

import Foundation

/// An envelope streamed from a file or from memory. Not thread-safe: the transfer's thread reads it.
final class HTTPEnvelopeStream {
    /// Where the payload comes from.
    enum Payload {
        /// A local file's bytes.
        case file(RemotePayloadFile)
        /// Bytes in memory.
        case memory(Data)
    }

    private let header: [UInt8]
    private let payload: Payload
    private let payloadCount: Int
    /// The MAC over the header, where every pass starts (nil unsigned).
    private let initialMAC: HMACSHA256?
    private var mac: HMACSHA256?
    private var tag: [UInt8] = []
    private var position = 0

    /// The envelope's total byte count.
    let byteCount: Int

    /// A stream of the envelope for `payload`, signed when `secret` is given.
    init(
        payload: Payload, identity: SHA256Digest, createdAt: Int64, expiresAt: Int64, secret: RemoteSecret?
    ) {
        let (count, checksum): (Int, UInt32)
        switch payload {
        case .file(let file): (count, checksum) = (file.byteCount, file.checksum)
        case .memory(let data): (count, checksum) = (data.count, data.withUnsafeBytes { CRC32C.checksum($0) })
        }
        let header = RemoteEnvelope.header(
            payloadCount: count, payloadChecksum: checksum, identity: identity, createdAt: createdAt,
            expiresAt: expiresAt, signed: secret != nil)
        self.header = header
        self.payload = payload
        payloadCount = count
        byteCount = RemoteEnvelope.sealedSize(payloadCount: count, signed: secret != nil)
        initialMAC = secret.map { secret in
            var mac = HMACSHA256(key: secret.bytes)
            mac.update(header)
            return mac
        }
        mac = initialMAC
    }

    /// True once every byte was read.
    var isAtEnd: Bool { position == byteCount }

    /// Back to the first byte (a retry on another connection).
    func rewind() {
        position = 0
        mac = initialMAC
        tag = []
    }

    /// Fills `target` from the current position (header, payload, tag): the count (0 at the end), or the
    /// caller's file's failure (a short file too).
    func fill(_ target: UnsafeMutableRawBufferPointer) -> Result<Int, SystemCallError> {
        var written = 0
        while written < target.count && position < byteCount {
            let space = UnsafeMutableRawBufferPointer(rebasing: target[written...])
            let count: Int
            if position < header.count {
                count = min(space.count, header.count - position)
                header.withUnsafeBytes {
                    space.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[position..<(position + count)]))
                }
            } else if position < header.count + payloadCount {
                let offset = position - header.count
                let chunk = UnsafeMutableRawBufferPointer(
                    rebasing: space[0..<min(space.count, payloadCount - offset)])
                switch payload {
                case .file(let file):
                    switch Syscall.read(file.descriptor, into: chunk, at: file.offset + Int64(offset)) {
                    case .failure(let error): return .failure(error)
                    case .success(let read):
                        guard read == chunk.count else {
                            return .failure(
                                SystemCallError(operation: "pread (payload shorter than announced)", errno: .ioError))
                        }
                    }
                case .memory(let data):
                    data.withUnsafeBytes {
                        chunk.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + chunk.count)]))
                    }
                }
                mac?.update(UnsafeRawBufferPointer(chunk))
                count = chunk.count
            } else {
                if tag.isEmpty, let mac { tag = mac.finalize() }
                let offset = position - header.count - payloadCount
                count = min(space.count, tag.count - offset)
                tag.withUnsafeBytes {
                    space.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + count)]))
                }
            }
            written += count
            position += count
        }
        return .success(written)
    }
}
