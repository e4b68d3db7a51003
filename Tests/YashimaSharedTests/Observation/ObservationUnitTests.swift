// The pure parts of observation: decoding inotify's bytes, the names the watcher reads, the removal
// marker's name and record, the bounded observer buffer, and the bounded attribution tables.

import Foundation
import Testing

@testable import YashimaShared

@Suite("Observation: decoding and bounds")
struct ObservationUnitTests {
    /// One `struct inotify_event` as the kernel lays it out: 16 bytes, then the name NUL-padded to `padded`.
    static func event(wd: Int32, mask: InotifyMask, cookie: UInt32 = 0, name: String, padded: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        withUnsafeBytes(of: wd) { bytes += $0 }
        withUnsafeBytes(of: mask.rawValue) { bytes += $0 }
        withUnsafeBytes(of: cookie) { bytes += $0 }
        withUnsafeBytes(of: UInt32(padded)) { bytes += $0 }
        var nameBytes = Array(name.utf8)
        nameBytes += [UInt8](repeating: 0, count: padded - nameBytes.count)
        return bytes + nameBytes
    }

    @Test func decodesEventsWithPaddedNamesAndIgnoresATruncatedTail() {
        let name = String(repeating: "ab", count: 32) + ".entry"
        var buffer = Self.event(wd: 3, mask: .movedTo, cookie: 9, name: name, padded: 80)
        buffer += Self.event(wd: 1, mask: [.created, .isDirectory], name: "7f", padded: 16)
        buffer += Self.event(wd: -1, mask: .queueOverflow, name: "", padded: 0)
        buffer += Array(Self.event(wd: 4, mask: .deleted, name: "cut", padded: 16).prefix(20))
        let events = buffer.withUnsafeBytes { InotifyEvent.decode($0) }
        #expect(
            events == [
                InotifyEvent(watch: 3, mask: .movedTo, cookie: 9, name: name),
                InotifyEvent(watch: 1, mask: [.created, .isDirectory], cookie: 0, name: "7f"),
                InotifyEvent(watch: -1, mask: .queueOverflow, cookie: 0, name: ""),
            ])
        #expect(Inotify.eventHeaderSize == 16)
    }

    @Test func readsEntryAndFolderNames() {
        let identity = EntryIdentity(key: CacheKey("k"), codecIdentifier: "data-v1")
        #expect(ObservedName.entryIdentity(identity.hex + ".entry") == identity.digest)
        #expect(ObservedName.entryIdentity(identity.hex.uppercased() + ".entry") == nil)
        #expect(ObservedName.entryIdentity(identity.hex + ".lock") == nil)
        #expect(ObservedName.entryIdentity("0123.entry") == nil)
        #expect(ObservedName.fanOutByte("a7") == 0xA7)
        #expect(ObservedName.fanOutByte("A7") == nil && ObservedName.fanOutByte("a") == nil)
        #expect((0...255).allSatisfy { ObservedName.fanOutByte(ObservedName.fanOutName(UInt8($0))) == UInt8($0) })
    }

    @Test func markerNamesAndRecords() {
        let unique = "0123456789abcdef"
        let scope = RemovalSignal.Scope(namespace: "previews")
        let name = RemovalSignal.markerName(scope, unique: unique)
        #expect(name.hasPrefix("ns-") && name.hasSuffix(".removal") && !name.contains("previews"))
        #expect(RemovalSignal.scope(ofMarker: name) == scope)
        #expect(
            RemovalSignal.scope(ofMarker: RemovalSignal.markerName(.wholeDirectory, unique: unique)) == .wholeDirectory)
        #expect(RemovalSignal.scope(ofMarker: name + ".dead") == nil)
        #expect(RemovalSignal.scope(ofMarker: "all.short.removal") == nil)
        // The record names the namespace exactly, only for the scope it belongs to.
        for namespace in ["previews", "", "a/../b\u{0}c", "名前"] {
            let scope = RemovalSignal.Scope(namespace: namespace)
            #expect(
                RemovalSignal.namespace(inRecord: RemovalSignal.record(namespace: namespace), scope: scope) == namespace
            )
        }
        let record = RemovalSignal.record(namespace: "previews")
        #expect(RemovalSignal.namespace(inRecord: record, scope: .init(namespace: "other")) == nil)
        #expect(RemovalSignal.namespace(inRecord: Array(record.dropLast()), scope: scope) == nil)
        let huge = String(repeating: "n", count: RemovalSignal.maximumRecordedNamespace + 1)
        #expect(
            RemovalSignal.namespace(inRecord: RemovalSignal.record(namespace: huge), scope: .init(namespace: huge))
                == nil)
        #expect(RemovalSignal.record(namespace: nil).count == 16)
    }

    @Test func aFullBufferBecomesOneMissedEventsAndStaysBounded() async throws {
        let observer = Observer(filter: .everything, start: .now, bufferLimit: 16)
        let channel = observer.channel
        let entry = YCache.RemovedEntry(entryIdentifier: "e", key: nil, codecIdentifier: nil)
        for _ in 0..<10_000 {
            channel.push(.removed(entry))
            #expect(channel.bufferedCount <= 16)
        }
        #expect(channel.overflowCount > 0)
        // The first change after an overflow is the marker; what follows it is under the limit.
        #expect(try await channel.next(observer: observer, isolation: nil) == .missedEvents)
        var rest = 0
        while channel.bufferedCount > 0 {
            #expect(try await channel.next(observer: observer, isolation: nil) == .removed(entry))
            rest += 1
        }
        #expect(rest < 16)
        channel.finish()
    }

    @Test func bufferedChangesComeBeforeTheErrorThenTheEnd() async throws {
        let observer = Observer(filter: .everything, start: .now, bufferLimit: 8)
        let channel = observer.channel
        channel.push(.missedEvents)
        channel.fail(.observationUnavailable(path: "/x", reason: "test"))
        channel.push(.missedEvents)  // after the failure: dropped
        #expect(try await channel.next(observer: observer, isolation: nil) == .missedEvents)
        await #expect(throws: YCache.Error.observationUnavailable(path: "/x", reason: "test")) {
            _ = try await channel.next(observer: observer, isolation: nil)
        }
        #expect(try await channel.next(observer: observer, isolation: nil) == nil)
    }

    @Test func summariesAreBoundedByCountAndBytesAndTheirOrderDoesNotLeak() {
        var table = SummaryTable(capacity: 100, byteCapacity: 1 << 20)
        table.markScanned()
        let key = CacheKey("k")
        func identity(_ index: Int) -> SHA256Digest { SHA256.hash(Array("\(index)".utf8)) }
        // Publish-and-remove churn never grows the insertion order past a bound.
        for index in 0..<50_000 {
            table.insert(identity(index), key: key, codec: "c")
            #expect(table.remove(identity(index)) != nil)
        }
        #expect(table.isComplete && table.count == 0 && table.orderSlots <= 2048 + 1)
        for index in 0..<150 { table.insert(identity(index), key: key, codec: "c") }
        #expect(table.count == 100 && !table.isComplete)
        #expect(table.remove(identity(0)) == nil && table.remove(identity(149)) != nil)  // the oldest went first
        var bytes = SummaryTable(capacity: 1000, byteCapacity: 64 * 1024)
        bytes.insert(
            identity(1), key: CacheKey(namespace: "n", identity: String(repeating: "x", count: 8000)), codec: "c")
        #expect(bytes.count == 0 && !bytes.isComplete)  // one key over 1/16 of the bytes is not kept
    }

    @Test func deferredPublicationsAreBoundedAndReleasedInOrder() {
        var deferred = DeferredPublications(capacity: 3)
        func entry(_ name: String) -> YCache.ObservedEntry {
            let key = CacheKey(namespace: "n", identity: name)
            return YCache.ObservedEntry(
                key: key,
                metadata: key.metadata(codecIdentifier: "c", createdAt: 0, expiresAt: nil, byteCount: 0, cost: nil),
                entryIdentifier: name)
        }
        for name in ["a", "b", "c"] { deferred.add(SHA256.hash(Array(name.utf8)), entry(name)) }
        deferred.remove(SHA256.hash(Array("b".utf8)))
        #expect(deferred.take { _ in true }.map(\.key.identity) == ["a", "c"])
        for name in ["a", "b", "c", "d"] { deferred.add(SHA256.hash(Array(name.utf8)), entry(name)) }
        #expect(deferred.overflowed && deferred.count == 0)
    }
}
