// HTTPTransport.swift: the HTTP backend's requests on URLSession: one session per store (no caches, cookies
// or redirects), credentials and custom headers on every request, callbacks routed to each HTTPExchange
// on a serial queue (never the pool); bodies from memory or an HTTPEnvelopeStream.

import Foundation
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What a request sends.
enum HTTPRequestBody {
    /// No body.
    case none
    /// These bytes, with `Content-Length`.
    case bytes(Data)
    /// A streamed envelope (chunked transfer).
    case stream(HTTPEnvelopeStream)
}

/// Requests to one HTTP server. Thread-safe. A dump shows header names only (the `Authorization`
/// header and custom headers may hold secrets).
final class HTTPTransport: Sendable, CustomReflectable {
    private let session: URLSession
    private let router: HTTPSessionDelegate
    private let headers: [String: String]
    private let stall: Duration
    /// The longest whole transfer (``HTTPRemoteConfiguration/transferTimeout``).
    let transferLimit: Duration

    /// A transport for `configuration`'s server.
    init(configuration: HTTPRemoteConfiguration) {
        var headers = configuration.headers
        if let credentials = configuration.endpoint.credentials {
            headers["Authorization"] = credentials.authorization
        }
        self.headers = headers
        stall = configuration.policy.operationTimeout
        transferLimit = configuration.transferTimeout
        let settings = URLSessionConfiguration.ephemeral
        settings.requestCachePolicy = .reloadIgnoringLocalCacheData
        settings.urlCache = nil
        settings.httpCookieStorage = nil
        settings.httpShouldSetCookies = false
        settings.urlCredentialStorage = nil
        settings.httpMaximumConnectionsPerHost = 8
        // A backstop only (whole seconds, idle time): the exchanges enforce the real deadlines.
        let backstop = Double(configuration.transferTimeout.remoteMilliseconds) / 1000 + 5
        settings.timeoutIntervalForRequest = backstop
        settings.timeoutIntervalForResource = backstop
        router = HTTPSessionDelegate()
        session = URLSession(configuration: settings, delegate: router, delegateQueue: nil)
    }

    deinit {
        session.invalidateAndCancel()
    }

    var customMirror: Mirror { Mirror(self, children: ["headers": headers.keys.sorted()]) }

    /// Sends `method` to `url` and suspends until the answer, a timeout or the caller's cancellation.
    ///
    /// - Parameters:
    ///   - extraHeaders: Headers of this request only (`Range`, `If-Range`).
    ///   - sink: Receives the response (nil: discard the body).
    ///   - deadline: The operation deadline for the first response byte (see ``HTTPExchange``).
    ///   - transferDeadline: When the whole transfer must be over (default: the transfer limit from now).
    /// - Throws: ``RemoteError/timedOut``, ``RemoteError/transport(code:)``, ``RemoteError/cancelled`` or
    ///   ``RemoteError/localFile(_:)``; any status is an answer, not an error.
    func send(
        _ method: String, to url: URL, extraHeaders: [String: String] = [:], body: HTTPRequestBody = .none,
        sink: (any HTTPResponseSink)? = nil, deadline: RemoteDeadline, transferDeadline: RemoteDeadline? = nil
    ) async throws(RemoteError) -> HTTPExchangeOutcome {
        guard !Task.isCancelled else { throw .cancelled }
        var request = URLRequest(url: url)
        request.httpMethod = method
        // No compression: the body is the envelope's bytes, and ranges count those.
        request.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
        for (name, value) in headers.merging(extraHeaders, uniquingKeysWith: { $1 }) {
            request.setValue(value, forHTTPHeaderField: name)
        }
        let exchange = HTTPExchange(
            sink: sink, deadline: deadline, stall: stall, transferDeadline: transferDeadline ?? .after(transferLimit))
        switch body {
        case .none: break
        case .bytes(let data):
            request.httpBody = data
            request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
        case .stream(let stream):
            stream.attach(to: exchange)
            request.httpBodyStream = stream
            request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
        }
        let task = session.dataTask(with: request)
        router.register(exchange, for: task)
        let outcome = await exchange.run(task)
        router.unregister(task)
        return try outcome.get()
    }
}

/// Routes URLSession's callbacks to the exchange of each task.
///
/// Safe to share (`@unchecked Sendable`): its only state is the `Mutex`-protected table; URLSession
/// calls it on the session's delegate queue.
final class HTTPSessionDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let exchanges = Mutex<[Int: HTTPExchange]>([:])

    func register(_ exchange: HTTPExchange, for task: URLSessionTask) {
        exchanges.withLock { $0[task.taskIdentifier] = exchange }
    }

    func unregister(_ task: URLSessionTask) {
        _ = exchanges.withLock { $0.removeValue(forKey: task.taskIdentifier) }
    }

    private func exchange(for task: URLSessionTask) -> HTTPExchange? {
        exchanges.withLock { $0[task.taskIdentifier] }
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        guard let response = response as? HTTPURLResponse else {
            completionHandler(.cancel)
            return
        }
        let proceed = exchange(for: dataTask)?.didReceive(HTTPResponseHead(response)) ?? false
        completionHandler(proceed ? .allow : .cancel)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        exchange(for: dataTask)?.didReceive(data)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        exchange(for: task)?.didComplete(error: error, response: task.response)
    }

    /// Redirects are not followed (the 3xx is the answer): credentials never go to another host.
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }

    /// Credentials go with every request (the URL's or the environment's), never in answer to a
    /// challenge: a 401 with `WWW-Authenticate` is the answer (corelibs would wait forever for a
    /// credential it does not have).
    func urlSession(
        _ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        exchange(for: task)?.refuseChallenge()
        completionHandler(.cancelAuthenticationChallenge, nil)
    }

    /// A body stream is never rewound (no redirects, no authentication rounds): none is given again.
    func urlSession(
        _ session: URLSession, task: URLSessionTask,
        needNewBodyStream completionHandler: @escaping @Sendable (InputStream?) -> Void
    ) {
        completionHandler(nil)
    }
}
