// HTTPExchange.swift: one HTTP request in flight on URLSession, to its single outcome: the watchdog that
// enforces its deadlines (first byte, stall, whole transfer), and the rule that the caller's files are
// touched only while the exchange is live. Docs/Internals.md.

import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What a response head says that the backend uses.
struct HTTPResponseHead: Sendable {
    /// The status.
    let status: Int
    /// `Content-Length`, when given.
    let expectedLength: Int64?
    /// `Content-Range: bytes <first>-<last>/<total>` of a 206, when given and well formed (`total` nil
    /// for `*`).
    let range: (first: Int, last: Int, total: Int?)?
    /// A strong `ETag` (for `If-Range`), when given.
    let entityTag: String?

    /// The head of `response`.
    init(_ response: HTTPURLResponse) {
        status = response.statusCode
        expectedLength = response.expectedContentLength >= 0 ? response.expectedContentLength : nil
        range = response.value(forHTTPHeaderField: "Content-Range").flatMap(Self.parseRange)
        entityTag = response.value(forHTTPHeaderField: "ETag").flatMap { $0.hasPrefix("\"") ? $0 : nil }
    }

    /// Parses `bytes <first>-<last>/<total or *>`.
    static func parseRange(_ text: String) -> (first: Int, last: Int, total: Int?)? {
        guard text.hasPrefix("bytes ") else { return nil }
        let parts = text.dropFirst(6).split(separator: "/", maxSplits: 1)
        guard parts.count == 2 else { return nil }
        let bounds = parts[0].split(separator: "-", maxSplits: 1)
        guard bounds.count == 2, let first = Int(bounds[0]), let last = Int(bounds[1]), first >= 0, last >= first
        else { return nil }
        if parts[1] == "*" { return (first, last, nil) }
        guard let total = Int(parts[1]), total > last else { return nil }
        return (first, last, total)
    }
}

/// Receives a response, on the session's serial delegate queue, in order, while the exchange is live.
protocol HTTPResponseSink: AnyObject {
    /// The response head. Returns false to stop the transfer (the body is then not read).
    func begin(_ head: HTTPResponseHead) -> Bool
    /// The next body bytes. Returns false to stop the transfer.
    func receive(_ bytes: UnsafeRawBufferPointer) -> Bool
}

/// The outcome of a request that got an answer.
struct HTTPExchangeOutcome: Sendable {
    /// The response status.
    let status: Int
    /// True when the sink stopped the transfer before the body's end.
    let stopped: Bool
}

/// One request in flight.
///
/// Safe to share (`@unchecked Sendable`): every mutable field is read and written only while `lock` is
/// held; the sink and the body stream are called only under it (and the sink only from the delegate
/// queue, serially).
final class HTTPExchange: @unchecked Sendable {
    private let lock = NSLock()
    private let sink: (any HTTPResponseSink)?
    private let headDeadline: RemoteDeadline
    private let transferDeadline: RemoteDeadline
    private let stallNanoseconds: Int64
    private var lastProgress = Syscall.monotonicNanoseconds
    private var status: Int?
    private var stopped = false
    private var localFailure: SystemCallError?
    private var result: Result<HTTPExchangeOutcome, RemoteError>?
    private var continuation: CheckedContinuation<Result<HTTPExchangeOutcome, RemoteError>, Never>?
    private var task: URLSessionTask?
    private var watchdog: DispatchSourceTimer?

    /// An exchange whose first response byte is due by `deadline`.
    ///
    /// - Parameters:
    ///   - sink: Where the response goes (nil: the body is discarded).
    ///   - deadline: The operation deadline: the head must arrive by then (or bytes keep moving).
    ///   - stall: The longest time without a byte moving either way.
    ///   - transferDeadline: When the whole transfer must be over.
    init(
        sink: (any HTTPResponseSink)?, deadline: RemoteDeadline, stall: Duration, transferDeadline: RemoteDeadline
    ) {
        self.sink = sink
        headDeadline = deadline
        self.transferDeadline = transferDeadline
        stallNanoseconds = max(1, stall.remoteNanoseconds)
    }

    /// Starts `task` (its delegate callbacks must reach this exchange) and suspends until the outcome.
    func run(_ task: URLSessionTask) async -> Result<HTTPExchangeOutcome, RemoteError> {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                lock.lock()
                if let result {
                    lock.unlock()
                    continuation.resume(returning: result)
                    return
                }
                self.continuation = continuation
                self.task = task
                let timer = DispatchSource.makeTimerSource(queue: .global())
                let interval = max(2_000_000, min(250_000_000, stallNanoseconds / 8))
                timer.schedule(deadline: .now() + .nanoseconds(Int(interval)), repeating: .nanoseconds(Int(interval)))
                timer.setEventHandler { [weak self] in self?.checkDeadlines() }
                watchdog = timer
                lock.unlock()
                timer.resume()
                task.resume()
            }
        } onCancel: {
            // Not on the canceller's thread (maybe the cooperative pool's): finishing waits for a sink
            // write in progress, and cancelling the task waits for URLSession's work queue.
            DispatchQueue.global().async { self.finish(.failure(.cancelled)) }
        }
    }

    /// Runs `body` if the exchange is live, counting it as progress; nil once it has ended.
    func whileLive<T>(_ body: () -> T) -> T? {
        lock.lock()
        defer { lock.unlock() }
        guard result == nil else { return nil }
        lastProgress = Syscall.monotonicNanoseconds
        return body()
    }

    /// Records a failure of the caller's file (the body stream's read): the outcome becomes
    /// ``RemoteError/localFile(_:)`` whatever URLSession reports.
    func recordLocalFailure(_ error: SystemCallError) {
        lock.lock()
        localFailure = localFailure ?? error
        lock.unlock()
    }

    // MARK: Delegate callbacks (the session's delegate queue)

    /// The response head arrived. False: stop the transfer.
    func didReceive(_ head: HTTPResponseHead) -> Bool {
        let proceed = whileLive { () -> Bool in
            status = head.status
            let proceed = sink?.begin(head) ?? true
            if !proceed { stopped = true }
            return proceed
        }
        if proceed == false { cancelTask() }
        return proceed ?? false
    }

    /// Body bytes arrived.
    func didReceive(_ data: Data) {
        let proceed = whileLive { () -> Bool in
            guard !stopped else { return false }
            let proceed = data.withUnsafeBytes { sink?.receive($0) ?? true }
            if !proceed { stopped = true }
            return proceed
        }
        if proceed == false { cancelTask() }
    }

    /// The server asked for credentials (a 401 with `WWW-Authenticate`): the answer is that 401.
    /// URLSession on Linux would otherwise wait for credentials forever; the task is cancelled instead.
    func refuseChallenge() {
        lock.lock()
        stopped = true
        status = status ?? 401
        lock.unlock()
    }

    /// URLSession reports the end, with its error if any.
    func didComplete(error: (any Error)?, response: URLResponse?) {
        lock.lock()
        let local = localFailure
        let known = status ?? (response as? HTTPURLResponse)?.statusCode
        let wasStopped = stopped
        lock.unlock()
        if let local {
            finish(.failure(.localFile(local)))
        } else if let known, error == nil || wasStopped {
            finish(.success(HTTPExchangeOutcome(status: known, stopped: wasStopped)))
        } else if let error {
            finish(.failure(Self.classify(error)))
        } else {
            finish(.failure(.transport(code: URLError.Code.badServerResponse.rawValue)))
        }
    }

    // MARK: Ending

    private func checkDeadlines() {
        lock.lock()
        let now = Syscall.monotonicNanoseconds
        let due = max(headDeadline.nanoseconds, lastProgress &+ stallNanoseconds)
        let late = result == nil && (now >= due || now >= transferDeadline.nanoseconds)
        lock.unlock()
        if late { finish(.failure(.timedOut)) }
    }

    /// Delivers `outcome` once (later calls do nothing) and stops the task and the watchdog.
    private func finish(_ outcome: Result<HTTPExchangeOutcome, RemoteError>) {
        lock.lock()
        guard result == nil else {
            lock.unlock()
            return
        }
        result = outcome
        let waiting = continuation
        continuation = nil
        let timer = watchdog
        watchdog = nil
        let running = task
        lock.unlock()
        timer?.cancel()
        if case .failure = outcome { running?.cancel() }
        waiting?.resume(returning: outcome)
    }

    private func cancelTask() {
        lock.lock()
        let running = task
        lock.unlock()
        running?.cancel()
    }

    /// The remote error for a URLSession failure: only the code, never the URL or a message.
    static func classify(_ error: any Error) -> RemoteError {
        if let error = error as? URLError {
            return error.code == .timedOut ? .timedOut : .transport(code: error.code.rawValue)
        }
        return .transport(code: (error as NSError).code)
    }
}
