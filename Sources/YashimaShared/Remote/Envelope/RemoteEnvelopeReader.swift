// RemoteEnvelopeReader.swift: the one verifier of remote values, as their bytes arrive: the header checked
// as soon as it is in, the payload into memory or a staging file, checksum and signature at the end.
// RemoteEnvelope.open is this reader over bytes at hand.

import Foundation
import Synchronization

/// A file the caller opened for writing, into which a large remote payload is streamed (for the engine,
/// a staging file in the storage's `tmp/`, with room for the local entry header before the payload).
struct RemoteStagingFile: Sendable {
    /// The open, writable descriptor (owned by the caller; never closed or truncated here).
    let descriptor: Int32
    /// Where the payload's first byte goes (`pwrite`; the descriptor's file position is not used).
    let payloadOffset: Int64
}

/// Where a lookup's payload goes if it is large enough to stream: a staging file made only then, by the
/// caller's closure, on the thread reading the value. Most hits are small, and making a file (a new inode
/// in the storage's `tmp/`, later unlinked) costs more than a small hit's whole round trip on a busy ext4.
final class RemoteStagingSlot: Sendable {
    private enum State {
        case pending(@Sendable () -> (file: RemoteStagingFile, name: String)?)
        case made((file: RemoteStagingFile, name: String)?)
    }
    private let state: Mutex<State>

    /// A slot whose file `make` creates when first asked for: the file and the caller's name for it (the
    /// engine: its path under the root), or nil when it cannot be made (the payload then stays in memory).
    init(_ make: @escaping @Sendable () -> (file: RemoteStagingFile, name: String)?) {
        state = Mutex(.pending(make))
    }

    /// A slot holding a file the caller made already.
    init(_ file: RemoteStagingFile) { state = Mutex(.made((file, ""))) }

    /// The file, made now if it was not yet; nil when it could not be made.
    func file() -> RemoteStagingFile? {
        state.withLock { state in
            switch state {
            case .made(let made): return made?.file
            case .pending(let make):
                let made = make()
                state = .made(made)
                return made?.file
            }
        }
    }

    /// The file and its name once made (nil when never asked for, or when making it failed).
    var made: (file: RemoteStagingFile, name: String)? {
        state.withLock { state in
            if case .made(let made) = state { return made }
            return nil
        }
    }
}

/// A verified remote value whose payload was streamed into a ``RemoteStagingFile``.
struct RemoteFileValue: Equatable, Sendable {
    /// The payload's byte count (written at the staging file's payload offset).
    let payloadByteCount: Int
    /// The payload's own CRC32C (what a local entry header records).
    let payloadChecksum: UInt32
    /// When the value was created, nanoseconds since 1970.
    let createdAt: Int64
    /// When it expires, nanoseconds since 1970 (0: never).
    let expiresAt: Int64
}

/// Verifies one envelope streamed in chunks. Not thread-safe: one owner feeds it in order.
struct RemoteEnvelopeReader {
    /// Why the bytes are not a value.
    enum Failure: Error, Equatable, Sendable {
        /// The bytes are not a valid value of the identity asked for.
        case rejected(RemoteEnvelope.Rejection)
        /// The header announces a value larger than the reader's limit (the cap): not read further.
        case tooLarge
        /// Writing the payload into the staging file failed (a local fault, not the server's).
        case staging(SystemCallError)
    }

    /// A verified value, in memory or in the staging file.
    enum Opened: Equatable, Sendable {
        /// The payload is in memory.
        case memory(RemoteValue)
        /// The payload is in the staging file.
        case file(RemoteFileValue)
    }

    private enum Phase {
        case header
        case payload
        case tag
        case done
    }

    private let identity: SHA256Digest
    private let secret: RemoteSecret?
    private let maximumBytes: Int
    private let stagingSlot: RemoteStagingSlot?
    private var staging: RemoteStagingFile?
    private let streamingThreshold: Int
    private var phase = Phase.header
    private var header: [UInt8] = []
    private var tag: [UInt8] = []
    private var payloadCount = 0
    private var received = 0
    private var signed = false
    private var toFile = false
    private var memory = Data()
    private var payloadCRC: UInt32 = 0
    private var mac: HMACSHA256?
    private var failure: Failure?

    /// A reader for a value of `identity`.
    ///
    /// - Parameters:
    ///   - identity: The entry asked for.
    ///   - secret: This host's secret (see ``RemoteEnvelope/open(_:identity:secret:)``).
    ///   - maximumBytes: The largest envelope read (the size cap); a header announcing more fails with
    ///     ``Failure/tooLarge``.
    ///   - staging: Where payloads of `streamingThreshold` bytes or more go (its file is made when the
    ///     header announces such a payload); nil keeps every payload in memory.
    ///   - streamingThreshold: The smallest payload streamed to `staging`.
    init(
        identity: SHA256Digest, secret: RemoteSecret?, maximumBytes: Int, staging: RemoteStagingSlot? = nil,
        streamingThreshold: Int = 0
    ) {
        self.identity = identity
        self.secret = secret
        self.maximumBytes = maximumBytes
        stagingSlot = staging
        self.streamingThreshold = streamingThreshold
        header.reserveCapacity(RemoteEnvelope.headerSize)
    }

    /// A reader streaming large payloads into `file`, which the caller made already.
    init(
        identity: SHA256Digest, secret: RemoteSecret?, maximumBytes: Int, staging file: RemoteStagingFile?,
        streamingThreshold: Int
    ) {
        self.init(
            identity: identity, secret: secret, maximumBytes: maximumBytes, staging: file.map(RemoteStagingSlot.init),
            streamingThreshold: streamingThreshold)
    }

    /// The value's total byte count, once the header is in (nil before).
    var expectedByteCount: Int? {
        guard phase != .header else { return nil }
        return RemoteEnvelope.sealedSize(payloadCount: payloadCount, signed: signed)
    }

    /// Takes the next bytes. After a failure every call returns it again.
    mutating func consume(_ bytes: UnsafeRawBufferPointer) -> Result<Void, Failure> {
        if let failure { return .failure(failure) }
        var offset = 0
        while offset < bytes.count {
            let rest = UnsafeRawBufferPointer(rebasing: bytes[offset...])
            let taken: Int
            switch phase {
            case .header:
                taken = min(RemoteEnvelope.headerSize - header.count, rest.count)
                let before = header.count
                header.append(contentsOf: rest[0..<taken])
                if before < RemoteEnvelope.magic.count && header.count >= RemoteEnvelope.magic.count
                    && !RemoteEnvelope.magic.elementsEqual(header[0..<RemoteEnvelope.magic.count])
                {
                    return fail(.rejected(.foreign))
                }
                if header.count == RemoteEnvelope.headerSize, case .failure(let failure) = startPayload() {
                    return fail(failure)
                }
            case .payload:
                taken = min(payloadCount - received, rest.count)
                if case .failure(let failure) = takePayload(UnsafeRawBufferPointer(rebasing: rest[0..<taken])) {
                    return fail(failure)
                }
            case .tag:
                taken = min(RemoteEnvelope.tagSize - tag.count, rest.count)
                tag.append(contentsOf: rest[0..<taken])
                if tag.count == RemoteEnvelope.tagSize { phase = .done }
            case .done:
                return fail(.rejected(.trailingBytes))
            }
            offset += taken
        }
        return .success(())
    }

    /// Ends the value: checks that every byte came, the checksum and the signature.
    mutating func finish() -> Result<Opened, Failure> {
        if let failure { return .failure(failure) }
        guard phase == .done else {
            let short = phase == .header && header.count < RemoteEnvelope.magic.count
            return fail(.rejected(short ? .foreign : .truncated))
        }
        let stored = header.withUnsafeBytes {
            UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: RemoteEnvelope.Offset.checksum, as: UInt32.self))
        }
        let computed = header.withUnsafeBytes {
            RemoteEnvelope.checksum(header: $0, payloadChecksum: payloadCRC, payloadCount: payloadCount)
        }
        guard computed == stored else { return fail(.rejected(.badChecksum)) }
        if secret != nil, let mac {
            guard constantTimeEqual(mac.finalize(), tag) else { return fail(.rejected(.badSignature)) }
        }
        let (createdAt, expiresAt) = header.withUnsafeBytes {
            (
                Int64(littleEndian: $0.loadUnaligned(fromByteOffset: RemoteEnvelope.Offset.createdAt, as: Int64.self)),
                Int64(littleEndian: $0.loadUnaligned(fromByteOffset: RemoteEnvelope.Offset.expiresAt, as: Int64.self))
            )
        }
        if toFile {
            return .success(
                .file(
                    RemoteFileValue(
                        payloadByteCount: payloadCount, payloadChecksum: payloadCRC, createdAt: createdAt,
                        expiresAt: expiresAt)))
        }
        return .success(.memory(RemoteValue(payload: memory, createdAt: createdAt, expiresAt: expiresAt)))
    }

    /// Records `failure` (sticky) and returns it.
    private mutating func fail<Success>(_ failure: Failure) -> Result<Success, Failure> {
        self.failure = failure
        return .failure(failure)
    }

    /// The header is complete: validate it and choose where the payload goes.
    private mutating func startPayload() -> Result<Void, Failure> {
        typealias Offset = RemoteEnvelope.Offset
        let fields = header.withUnsafeBytes { buffer in
            (
                version: UInt16(littleEndian: buffer.loadUnaligned(fromByteOffset: Offset.version, as: UInt16.self)),
                flags: UInt16(littleEndian: buffer.loadUnaligned(fromByteOffset: Offset.flags, as: UInt16.self)),
                reserved: buffer.loadUnaligned(fromByteOffset: Offset.reserved1, as: UInt32.self)
                    | buffer.loadUnaligned(fromByteOffset: Offset.reserved2, as: UInt32.self),
                count: UInt64(
                    littleEndian: buffer.loadUnaligned(fromByteOffset: Offset.payloadByteCount, as: UInt64.self)),
                identity: (0..<4).map {
                    UInt64(bigEndian: buffer.loadUnaligned(fromByteOffset: Offset.identity + 8 * $0, as: UInt64.self))
                }
            )
        }
        guard fields.version == RemoteEnvelope.version else {
            return .failure(.rejected(.unsupportedVersion(fields.version)))
        }
        guard fields.flags & ~RemoteEnvelope.signedFlag == 0, fields.reserved == 0 else {
            return .failure(.rejected(.malformedHeader))
        }
        signed = fields.flags & RemoteEnvelope.signedFlag != 0
        let overhead = RemoteEnvelope.headerSize + (signed ? RemoteEnvelope.tagSize : 0)
        guard fields.count <= UInt64(max(0, maximumBytes - overhead)), maximumBytes >= overhead else {
            return .failure(.tooLarge)
        }
        guard fields.identity == [identity.w0, identity.w1, identity.w2, identity.w3] else {
            return .failure(.rejected(.wrongIdentity))
        }
        if secret != nil && !signed { return .failure(.rejected(.unsigned)) }
        payloadCount = Int(fields.count)
        if let secret {
            var mac = HMACSHA256(key: secret.bytes)
            mac.update(header)
            self.mac = mac
        }
        if payloadCount >= streamingThreshold, let stagingSlot {
            staging = stagingSlot.file()  // made now, on this thread; none made: the payload stays in memory
        }
        toFile = staging != nil
        if !toFile { memory.reserveCapacity(payloadCount) }
        phase = payloadCount > 0 ? .payload : (signed ? .tag : .done)
        return .success(())
    }

    private mutating func takePayload(_ bytes: UnsafeRawBufferPointer) -> Result<Void, Failure> {
        if toFile, let staging {
            let at = staging.payloadOffset + Int64(received)
            if case .failure(let error) = Syscall.write(staging.descriptor, bytes, at: at) {
                return .failure(.staging(error))
            }
        } else {
            bytes.withMemoryRebound(to: UInt8.self) { memory.append($0) }
        }
        payloadCRC = CRC32C.checksum(bytes, continuing: payloadCRC)
        mac?.update(bytes)
        received += bytes.count
        if received == payloadCount { phase = signed ? .tag : .done }
        return .success(())
    }
}
