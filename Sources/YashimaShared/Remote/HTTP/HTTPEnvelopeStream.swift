// HTTPEnvelopeStream.swift: a streamed store's request body, pulled by URLSession a buffer at a time: the
// envelope header, the payload (pread from the caller's file, or memory), the HMAC tag. The caller's file
// is read only while the exchange is live.

import Foundation

/// An envelope streamed from a file or from memory.
final class HTTPEnvelopeStream: InputStream {
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
    private var mac: HMACSHA256?
    private var tag: [UInt8] = []
    private var position = 0
    private var status: Stream.Status = .notOpen
    private weak var exchange: HTTPExchange?

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
        header = RemoteEnvelope.header(
            payloadCount: count, payloadChecksum: checksum, identity: identity, createdAt: createdAt,
            expiresAt: expiresAt, signed: secret != nil)
        self.payload = payload
        payloadCount = count
        byteCount = RemoteEnvelope.sealedSize(payloadCount: count, signed: secret != nil)
        if let secret {
            var mac = HMACSHA256(key: secret.bytes)
            mac.update(header)
            self.mac = mac
        }
        super.init(data: Data())
    }

    /// Reads happen only while `exchange` is live; call before the request starts.
    func attach(to exchange: HTTPExchange) { self.exchange = exchange }

    override func open() { status = .open }
    override func close() { status = .closed }
    override var streamStatus: Stream.Status { status }
    override var streamError: (any Error)? { nil }
    override var hasBytesAvailable: Bool { position < byteCount }

    override func getBuffer(
        _ buffer: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>, length len: UnsafeMutablePointer<Int>
    ) -> Bool { false }

    /// Copies the next bytes into `buffer`; -1 once the exchange has ended or the file failed.
    override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength length: Int) -> Int {
        guard let exchange, length > 0 else { return -1 }
        let target = UnsafeMutableRawBufferPointer(start: buffer, count: length)
        let result = exchange.whileLive { () -> Result<Int, SystemCallError> in fill(target) }
        switch result {
        case .success(let count)?:
            if position == byteCount { status = .atEnd }
            return count
        case .failure(let error)?:
            exchange.recordLocalFailure(error)
            status = .error
            return -1
        case nil:
            return -1
        }
    }

    /// Fills `target` from the current position: header, payload, tag.
    private func fill(_ target: UnsafeMutableRawBufferPointer) -> Result<Int, SystemCallError> {
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
