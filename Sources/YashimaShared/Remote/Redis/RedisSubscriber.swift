// RedisSubscriber.swift: the process's one SUBSCRIBE connection per server, shared by every lease waiter,
// with a reader thread: `subscribe` returns once the server confirmed it; a lost connection wakes every
// waiter to re-check. Details: Docs/Internals.md.

import Foundation
import Synchronization

/// The shared subscriber connection to one server.
///
/// Safe to share (`@unchecked Sendable`): every stored property except `writeLock` and the constants is
/// read and written only while `condition` is locked; `writeLock` orders the sends so that commands
/// reach the server in the order their per-channel sequence numbers were assigned.
final class RedisSubscriber: @unchecked Sendable {
    /// The server.
    let endpoint: RedisEndpoint
    /// Connection settings.
    let settings: RedisConnectionSettings
    /// How long an idle connection (no channels) stays open for the next waiter.
    static let lingerNanoseconds: Int64 = 2_000_000_000

    private struct Channel {
        var waiters = Set<Int>()
        var subscribed = false
        var sent = 0
        var acknowledged = 0
        var lastSubscribe = 0
    }

    private struct Waiter {
        let channel: [UInt8]
        let generation: Int
        var needed = 0
        var messages = 0
        var lost = false
        var cancelled = false
        var failure: RemoteError?
    }

    private let condition = NSCondition()
    private let writeLock = NSLock()
    private var connection: RedisConnection?
    private var opening = false
    private var generation = 0
    private var channels: [[UInt8]: Channel] = [:]
    private var waiters: [Int: Waiter] = [:]
    private var nextWaiter = 0
    private var idleSince: Int64 = 0
    /// The process whose reader thread and connection these are (a forked child has no reader).
    private var ownerProcessID = Syscall.processID

    private struct RegistryKey: Hashable {
        let endpoint: RedisEndpoint
        let settings: RedisConnectionSettings
    }

    private static let registry = Mutex<[RegistryKey: RedisSubscriber]>([:])

    init(endpoint: RedisEndpoint, settings: RedisConnectionSettings) {
        self.endpoint = endpoint
        self.settings = settings
    }

    /// The process's subscriber for `endpoint`.
    static func shared(for endpoint: RedisEndpoint, settings: RedisConnectionSettings) -> RedisSubscriber {
        let key = RegistryKey(endpoint: endpoint, settings: settings)
        return registry.withLock { subscribers in
            if let subscriber = subscribers[key] { return subscriber }
            let subscriber = RedisSubscriber(endpoint: endpoint, settings: settings)
            subscribers[key] = subscriber
            return subscriber
        }
    }

    /// True while the subscriber has an open connection (tests).
    var isConnected: Bool { locked { connection != nil } }

    /// Subscribes to `channel` and returns once the server confirmed it. Blocking.
    ///
    /// - Throws: Connection failures, ``RemoteError/timedOut`` (the connection is then dropped: a server
    ///   that does not confirm in time is not trusted to deliver), or `.server(reply)` when the server
    ///   refuses (`NOPERM` for an ACL user without channel rights).
    func subscribe(_ channel: [UInt8], deadline: RemoteDeadline) throws(RemoteError) -> RedisSubscription {
        let (id, used) = try register(channel, deadline: deadline)
        condition.lock()
        defer { condition.unlock() }
        while true {
            guard let waiter = waiters[id] else { throw .connectionClosed }
            if waiter.lost {
                waiters[id] = nil
                throw waiter.failure ?? .connectionClosed
            }
            if let state = channels[channel], state.acknowledged >= waiter.needed {
                return RedisSubscription(subscriber: self, id: id)
            }
            guard !deadline.hasPassed else {
                waiters[id] = nil
                used.close()  // the reader wakes, fails every waiter of this connection and ends
                throw .timedOut
            }
            _ = condition.wait(until: Self.date(of: deadline))
        }
    }

    /// Opens the connection if needed, registers a waiter and sends SUBSCRIBE when the channel has no
    /// subscription in effect or on the way.
    private func register(_ channel: [UInt8], deadline: RemoteDeadline) throws(RemoteError) -> (Int, RedisConnection) {
        while true {
            let current = try connect(deadline: deadline)
            writeLock.lock()
            defer { writeLock.unlock() }
            condition.lock()
            guard connection === current else {  // the reader dropped it meanwhile: start over
                condition.unlock()
                continue
            }
            let id = nextWaiter
            nextWaiter += 1
            var state = channels[channel] ?? Channel()
            let send = !state.subscribed
            if send {
                state.subscribed = true
                state.sent += 1
                state.lastSubscribe = state.sent
            }
            state.waiters.insert(id)
            channels[channel] = state
            waiters[id] = Waiter(channel: channel, generation: generation, needed: state.lastSubscribe)
            condition.unlock()
            if send {
                // A failed send closes the connection; the reader then marks this waiter lost.
                try? current.send([RESPCommand("SUBSCRIBE", channel)], deadline: deadline)
            }
            return (id, current)
        }
    }

    private func connect(deadline: RemoteDeadline) throws(RemoteError) -> RedisConnection {
        condition.lock()
        if ownerProcessID != Syscall.processID {
            // A forked child: the parent's reader thread is not here and its stream is not ours to use.
            ownerProcessID = Syscall.processID
            connection = nil
            opening = false
            generation += 1
            channels.removeAll()
            for id in waiters.keys { waiters[id]?.lost = true }
        }
        while opening {
            guard !deadline.hasPassed else {
                condition.unlock()
                throw .timedOut
            }
            _ = condition.wait(until: Self.date(of: deadline))
        }
        if let connection {
            condition.unlock()
            return connection
        }
        opening = true
        condition.unlock()
        let opened: RedisConnection
        do throws(RemoteError) {
            opened = try RedisConnection.open(
                to: endpoint, limits: settings.limits, connectTimeout: settings.connectTimeout, deadline: deadline)
        } catch {
            locked {
                opening = false
                condition.broadcast()
            }
            throw error
        }
        let openedGeneration = locked {
            opening = false
            generation += 1
            connection = opened
            idleSince = Syscall.monotonicNanoseconds
            condition.broadcast()
            return generation
        }
        let reader = Thread { [self] in read(opened, generation: openedGeneration) }
        reader.name = "yashima-remote-subscriber"
        reader.stackSize = 256 * 1024
        reader.start()
        return opened
    }

    /// Waits for a message on waiter `id`'s channel until `deadline`. Blocking.
    func wait(_ id: Int, until deadline: RemoteDeadline) -> RedisSubscription.Event {
        condition.lock()
        defer { condition.unlock() }
        while true {
            guard var waiter = waiters[id] else { return .lost }
            if waiter.cancelled { return .cancelled }
            if waiter.messages > 0 {
                waiter.messages = 0
                waiters[id] = waiter
                return .notified
            }
            if waiter.lost { return .lost }
            guard !deadline.hasPassed else { return .timedOut }
            _ = condition.wait(until: Self.date(of: deadline))
        }
    }

    /// Wakes waiter `id` with `.cancelled`.
    func cancel(_ id: Int) {
        locked {
            waiters[id]?.cancelled = true
            condition.broadcast()
        }
    }

    /// Removes waiter `id`; the channel's last waiter sends UNSUBSCRIBE. Blocking (one short send).
    func unsubscribe(_ id: Int) {
        writeLock.lock()
        defer { writeLock.unlock() }
        condition.lock()
        var send: (RedisConnection, [UInt8])?
        if let waiter = waiters.removeValue(forKey: id), !waiter.lost, waiter.generation == generation,
            let current = connection, var state = channels[waiter.channel]
        {
            state.waiters.remove(id)
            if state.waiters.isEmpty && state.subscribed {
                state.subscribed = false
                state.sent += 1
                send = (current, waiter.channel)
            }
            channels[waiter.channel] = state
        }
        if channels.values.allSatisfy({ $0.waiters.isEmpty }) { idleSince = Syscall.monotonicNanoseconds }
        condition.unlock()
        if let (current, channel) = send {
            try? current.send([RESPCommand("UNSUBSCRIBE", channel)], deadline: .after(.seconds(1)))
        }
    }

    /// The reader thread: dispatches confirmations and messages until the connection fails or idles out.
    private func read(_ connection: RedisConnection, generation: Int) {
        while true {
            let reply: RESPValue?
            do throws(RemoteError) {
                reply = try connection.nextReply(before: .after(.seconds(1)))
            } catch {
                fail(generation, error)
                connection.close()
                return
            }
            guard let reply else {
                let idle = locked { () -> Bool in
                    guard self.generation == generation, waiters.isEmpty,
                        channels.values.allSatisfy({ $0.waiters.isEmpty }),
                        Syscall.monotonicNanoseconds - idleSince >= Self.lingerNanoseconds
                    else { return false }
                    self.connection = nil
                    channels.removeAll()
                    return true
                }
                if idle {
                    connection.close()
                    return
                }
                continue
            }
            guard handle(reply, generation: generation) else {
                connection.close()
                return
            }
        }
    }

    /// Applies one pushed reply; false when it ends the connection (an error or an unknown shape).
    private func handle(_ reply: RESPValue, generation: Int) -> Bool {
        guard case .array(let items) = reply, items.count == 3, case .bulkString(let kind) = items[0],
            case .bulkString(let channel) = items[1]
        else {
            if case .error(let error) = reply {
                fail(generation, .redis(.server(error)))
            } else {
                fail(generation, .redis(.unexpectedReply(reply.shape)))
            }
            return false
        }
        locked {
            guard self.generation == generation, var state = channels[channel] else { return }
            switch String(decoding: kind, as: UTF8.self) {
            case "subscribe", "unsubscribe":
                state.acknowledged += 1
            case "message":
                for id in state.waiters { waiters[id]?.messages += 1 }
            default:
                break
            }
            if state.waiters.isEmpty && !state.subscribed && state.acknowledged >= state.sent {
                channels[channel] = nil
            } else {
                channels[channel] = state
            }
            condition.broadcast()
        }
        return true
    }

    /// Marks every waiter of connection `generation` lost and forgets the connection.
    private func fail(_ generation: Int, _ error: RemoteError) {
        locked {
            guard self.generation == generation else { return }
            connection = nil
            channels.removeAll()
            for (id, waiter) in waiters where waiter.generation == generation {
                waiters[id]?.lost = true
                waiters[id]?.failure = error
            }
            condition.broadcast()
        }
    }

    private func locked<T>(_ body: () -> T) -> T {
        condition.lock()
        defer { condition.unlock() }
        return body()
    }

    private static func date(of deadline: RemoteDeadline) -> Date {
        Date(timeIntervalSinceNow: min(3600, Double(deadline.remainingNanoseconds) / 1e9))
    }
}

/// One waiter's subscription to a channel. Close it when done (it unsubscribes when it is the last).
final class RedisSubscription: Sendable {
    /// What ended a wait.
    enum Event: Equatable, Sendable {
        /// A message arrived on the channel.
        case notified
        /// The deadline passed.
        case timedOut
        /// The connection was lost: re-check, then subscribe again.
        case lost
        /// ``cancel()`` was called.
        case cancelled
    }

    private let subscriber: RedisSubscriber
    private let id: Int

    fileprivate init(subscriber: RedisSubscriber, id: Int) {
        self.subscriber = subscriber
        self.id = id
    }

    /// Waits for a message (messages since the last wait count) until `deadline`. Blocking.
    func wait(until deadline: RemoteDeadline) -> Event { subscriber.wait(id, until: deadline) }

    /// Wakes a blocked ``wait(until:)`` with `.cancelled` (and every later one).
    func cancel() { subscriber.cancel(id) }

    /// Unsubscribes (idempotent). Blocking: one short send when this was the channel's last waiter.
    func close() { subscriber.unsubscribe(id) }
}
