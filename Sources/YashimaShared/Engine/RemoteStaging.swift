// A large remote hit streamed into the local entry file it becomes (I6): a staging file in `tmp/` with room
// for the header, the payload verified as it arrives, read back into memory of its own for the caller (never
// a mapping: the file may be truncated by someone once published), renamed into place under the key's lock.

import Foundation

/// A staging file holding a complete local entry (header, then the verified payload), not yet
/// published. Closes its descriptor when released; `discard()` unlinks the file if it is still there.
final class StagedEntry: Sendable {
    let storage: StorageContext
    /// Its path relative to the root (`tmp/<random>.staging`).
    let relative: String
    /// Open for reading and writing; owned by this object.
    let descriptor: Int32
    let header: EntryFormat.Header

    init(storage: StorageContext, relative: String, descriptor: Int32, header: EntryFormat.Header) {
        self.storage = storage
        self.relative = relative
        self.descriptor = descriptor
        self.header = header
    }

    deinit { Syscall.close(descriptor) }

    /// Unlinks the staging file; after a publish renamed it into place the name is gone and this does
    /// nothing (staging names are random, never reused, I2).
    func discard() { _ = Syscall.unlink(relative, in: storage.directory.descriptor) }

    /// The payload, read back from the file into a buffer of its own (`pread`): the value handed to the
    /// caller must not depend on the file, which is published and then anyone's to truncate. Nil when the
    /// read comes up short.
    func readPayload() -> Data? {
        let count = Int(header.payloadByteCount)
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: max(count, 1), alignment: 16)
        let read = Syscall.read(
            descriptor, into: UnsafeMutableRawBufferPointer(start: buffer, count: count),
            at: Int64(header.payloadOffset))
        guard case .success(let got) = read, got == count else {
            buffer.deallocate()
            return nil
        }
        let baseBits = UInt(bitPattern: buffer)
        return Data(
            bytesNoCopy: buffer, count: count,
            deallocator: .custom { _, _ in
                // Captures only an integer: safe whichever thread frees the Data (as EntryFile.readBuffered).
                UnsafeMutableRawPointer(bitPattern: baseBits)?.deallocate()
            })
    }
}

extension RemoteTier {
    /// Looks `request`'s entry up with its payload streamed into a new staging file of `storage`, made
    /// only for a payload at or above the backend's threshold (see the file's header): a hit in the file
    /// is returned ready to publish from it; a hit in memory as ``hit(_:_:shared:)`` makes it; nil on a
    /// miss.
    func lookupStaged<Codec: CacheCodec>(
        _ request: ProductionRequest<Codec>, storage: StorageContext, shared: Bool
    ) async -> Produced<Codec.Value>? {
        let expectation = request.expectation
        // Made by the backend only once the value's header announces a payload to stream (on its I/O
        // thread): a small hit never creates, and then unlinks, a file. None made (a local fault): memory.
        let payloadOffset = Int64(expectation.headerSize)
        let staging = RemoteStagingSlot {
            guard case .success(let (relative, fd)) = storage.files.createStagingFile() else { return nil }
            return (RemoteStagingFile(descriptor: fd, payloadOffset: payloadOffset), relative)
        }
        let found = await values.lookup(expectation.identity, staging: staging)
        guard case .hitInFile(let file) = found, let (made, relative) = staging.made else {
            if let (made, relative) = staging.made {
                Syscall.close(made.descriptor)
                _ = Syscall.unlink(relative, in: storage.directory.descriptor)
            }
            guard case .hit(let value) = found else { return nil }
            return hit(value, request, shared: shared)
        }
        let fd = made.descriptor
        let header = EntryFormat.Header(
            keyByteCount: expectation.keyBytes.count, codecByteCount: expectation.codecBytes.count,
            payloadByteCount: Int64(file.payloadByteCount), createdAtNanoseconds: file.createdAt,
            expiresAtNanoseconds: file.expiresAt, payloadChecksum: file.payloadChecksum,
            entryIdentity: expectation.identity.digest, keyStableDigest: expectation.keyDigest)
        let staged = StagedEntry(storage: storage, relative: relative, descriptor: fd, header: header)
        let headerBytes = EntryFormat.encodeHeader(
            keyBytes: expectation.keyBytes, codecIdentifier: request.codec.identifier,
            entryIdentity: expectation.identity.digest, keyStableDigest: expectation.keyDigest,
            payloadByteCount: file.payloadByteCount, payloadChecksum: file.payloadChecksum,
            createdAtNanoseconds: file.createdAt, expiresAtNanoseconds: file.expiresAt)
        guard headerBytes.count == expectation.headerSize,
            case .success = headerBytes.withUnsafeBytes({ Syscall.write(fd, $0, at: 0) }),
            let payload = staged.readPayload(), let decoded = try? request.codec.decode(payload)
        else {
            staged.discard()
            return nil
        }
        var produced = Produced(
            value: decoded, source: .remote,
            stored: StoredForm(
                payload: payload, createdAt: file.createdAt, expiresAt: file.expiresAt == 0 ? nil : file.expiresAt,
                staged: staged))
        produced.sharedGeneration = shared
        produced.afterPublish = { _ in staged.discard() }
        return produced
    }
}
