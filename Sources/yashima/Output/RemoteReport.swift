// What the remote tier did, for people: one clause for `run -v` and `put --remote` (from this process's
// statistics), and the remote rows, JSON and Prometheus families of `yashima stats` (from the counters and
// breakers every process using the directory shares, and a chain's members' counters and breakers). Never a
// URL's credentials: servers and members are shown by label.

import Foundation
@_spi(Operator) import YashimaShared

enum RemoteReport {
    /// What the remote tier did between `before` and `after` (one command's statistics), as a clause:
    /// "hit in 3.1 ms", "miss, stored", "timed out after 1.00 s", "waited 2.31 s for another host", ...;
    /// nil when it did nothing.
    static func clause(
        since before: CacheStatistics, to after: CacheStatistics, options: YCache.Remote.Options, elapsed: Duration
    ) -> String? {
        func delta(_ path: KeyPath<CacheStatistics, Int>) -> Int { after[keyPath: path] - before[keyPath: path] }
        var parts: [String] = []
        let waited = after.remoteLeaseWaitTime - before.remoteLeaseWaitTime
        if delta(\.remoteLeaseWaits) > 0 {
            var wait = "waited \(Format.seconds(waited)) for another host"
            if delta(\.remoteLeaseTakeovers) > 0 { wait += " (it stopped without storing: its lease expired)" }
            parts.append(wait)
        }
        if delta(\.remoteHits) > 0 {
            parts.append("hit in \(Format.seconds(elapsed))")
        } else if delta(\.remoteMisses) > 0 {
            parts.append("miss")
        }
        let rejections = [
            (delta(\.remoteRejectedBadSignature), "bad signature (signed with another secret)"),
            (delta(\.remoteRejectedUnsigned), "unsigned (stored by a host without the secret)"),
            (delta(\.remoteRejectedDamaged), "damaged"), (delta(\.remoteRejectedTooLarge), "too large"),
        ]
        for (count, reason) in rejections where count > 0 { parts.append("value rejected: \(reason)") }
        if delta(\.remoteTimeouts) > 0 { parts.append("timed out after \(Format.seconds(options.operationTimeout))") }
        if delta(\.remoteAuthenticationFailures) > 0 { parts.append("authentication failed") }
        if delta(\.remoteConnectionFailures) > 0 { parts.append("refused (could not connect)") }
        if delta(\.remoteThrottled) > 0 { parts.append("throttled (every process backs off for its Retry-After)") }
        let otherErrors =
            delta(\.remoteErrors) - delta(\.remoteAuthenticationFailures) - delta(\.remoteConnectionFailures)
            - delta(\.remoteThrottled)
        if otherErrors > 0 { parts.append("server error") }
        if delta(\.remoteBypassedCalls) > 0 && delta(\.remoteTimeouts) + delta(\.remoteErrors) == 0 {
            parts.append("skipped (marked down by an earlier failure, until its cooldown ends)")
        }
        if delta(\.remoteReleasesAfterFailedStore) > 0 { parts.append("could not store the value") }
        if delta(\.remoteSignedValuesKept) > 0 { parts.append("kept the signed value there (no secret here)") }
        if delta(\.remotePuts) > 0 { parts.append("stored") }
        return parts.isEmpty ? nil : parts.joined(separator: ", ")
    }

    /// `run`'s one warning when the remote refused the credentials (a wrong secret or password).
    static let authenticationWarning =
        "yashima: warning: the remote tier refused the credentials (check the password in the URL or "
        + "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY); the command ran without it"

    // MARK: stats

    /// The remote rows of `stats` (none when no process used a remote tier since the counters were zeroed
    /// and no breaker is recorded).
    static func rows(
        _ counters: SharedRemoteCounters, _ health: [RemoteServerHealth], members: [RemoteMemberStatus] = []
    ) -> [[String]] {
        guard !counters.isEmpty || !health.isEmpty || !members.isEmpty else { return [] }
        let c = counters
        var rows: [[String]] = [
            [
                "remote",
                "hits \(c.hits), misses \(c.misses), stored \(c.stores); errors \(c.errors) (connection "
                    + "\(c.connectionFailures), authentication \(c.authenticationFailures), throttled \(c.throttled)), "
                    + "timeouts \(c.timeouts), skipped while down \(c.bypassed)",
            ],
            [
                "",
                "waited for another host \(c.leaseWaits) times, "
                    + "\(Format.seconds(Double(c.leaseWaitNanoseconds) / 1e9)) in all; took over \(c.leaseTakeovers) "
                    + "expired leases",
            ],
            [
                "",
                "rejected values \(c.rejected): bad signature \(c.rejectedBadSignature), unsigned "
                    + "\(c.rejectedUnsigned), damaged \(c.rejectedDamaged), too large \(c.rejectedTooLarge)",
            ],
        ]
        for (index, server) in health.enumerated() {
            rows.append([index == 0 ? "remote servers" : "", "\(server.server): " + describe(server)])
        }
        for (index, member) in members.enumerated() {
            let m = member
            rows.append([
                index == 0 ? "remote chain" : "",
                "\(m.position). \(m.member)\(m.readOnly ? " (read-only)" : ""): hits \(m.hits), misses \(m.misses), "
                    + "stored \(m.stores) (backfills \(m.backfills)); errors \(m.errors) (throttled \(m.throttled)), "
                    + "timeouts \(m.timeouts), skipped while down \(m.bypassed); "
                    + (m.breakers.allSatisfy { $0.state == .closed } ? "up" : "down"),
            ])
        }
        return rows
    }

    private static func describe(_ server: RemoteServerHealth) -> String {
        var text: String
        switch server.state {
        case .closed: return "up"
        case .open(let until):
            text = "down, skipped by every process until \(Format.local(until)) (\(Format.relative(until)))"
        case .probeDue: text = "down, the next call probes it"
        case .probing: text = "down, a process is probing it"
        }
        if let reason = server.reason { text += "; \(reason)" }
        if let since = server.since { text += " since \(Format.local(since))" }
        return text
    }

    /// `stats --json`'s `remote` object.
    static func json(
        _ counters: SharedRemoteCounters, _ health: [RemoteServerHealth], members: [RemoteMemberStatus] = []
    ) -> [String: Any] {
        let c = counters
        return [
            "members": members.map { m -> [String: Any] in
                [
                    "position": m.position, "member": m.member, "readOnly": m.readOnly,
                    "counters": [
                        "hits": m.hits, "misses": m.misses, "stores": m.stores, "backfills": m.backfills,
                        "errors": m.errors, "timeouts": m.timeouts, "bypassed": m.bypassed,
                        "failedWrites": m.failedWrites, "throttled": m.throttled,
                        "authenticationFailures": m.authenticationFailures,
                        "connectionFailures": m.connectionFailures, "rejected": m.rejected,
                    ],
                    "servers": m.breakers.map(serverObject),
                ]
            },
            "counters": [
                "hits": c.hits, "misses": c.misses, "stores": c.stores, "errors": c.errors, "timeouts": c.timeouts,
                "connectionFailures": c.connectionFailures, "authenticationFailures": c.authenticationFailures,
                "bypassed": c.bypassed, "failedWrites": c.failedWrites, "leaseWaits": c.leaseWaits,
                "leaseWaitSeconds": Double(c.leaseWaitNanoseconds) / 1e9, "leaseTakeovers": c.leaseTakeovers,
                "rejected": [
                    "total": c.rejected, "badSignature": c.rejectedBadSignature, "unsigned": c.rejectedUnsigned,
                    "damaged": c.rejectedDamaged, "tooLarge": c.rejectedTooLarge,
                ],
            ],
            "servers": health.map(serverObject),
        ]
    }

    private static func serverObject(_ server: RemoteServerHealth) -> [String: Any] {
        var object: [String: Any] = ["server": server.server, "state": stateName(server.state)]
        if case .open(let until) = server.state { object["until"] = Format.iso(until) }
        if let since = server.since { object["since"] = Format.iso(since) }
        if let reason = server.reason { object["reason"] = reason }
        return object
    }

    private static func stateName(_ state: RemoteServerHealth.State) -> String {
        switch state {
        case .closed: return "closed"
        case .open: return "open"
        case .probeDue: return "probe-due"
        case .probing: return "half-open"
        }
    }

    /// The remote families of `stats --format prometheus`.
    static func families(
        _ counters: SharedRemoteCounters, _ health: [RemoteServerHealth], members: [RemoteMemberStatus] = []
    ) -> [MetricFamily] {
        let c = counters
        func counter(_ name: String, _ help: String, _ samples: [([(String, String)], UInt64)]) -> MetricFamily {
            MetricFamily(name: name, help: help, kind: .counter, samples: samples.map { ($0.0, Double($0.1)) })
        }
        var families = [
            counter("yashima_remote_hits_total", "Remote lookups that returned a verified value.", [([], c.hits)]),
            counter("yashima_remote_misses_total", "Remote lookups that found nothing usable.", [([], c.misses)]),
            counter("yashima_remote_stores_total", "Values stored remotely.", [([], c.stores)]),
            counter(
                "yashima_remote_errors_total", "Failed remote calls other than timeouts, by kind.",
                [
                    ([("kind", "connection")], c.connectionFailures),
                    ([("kind", "authentication")], c.authenticationFailures),
                    ([("kind", "throttled")], c.throttled),
                    (
                        [("kind", "other")],
                        c.errors - min(c.errors, c.connectionFailures + c.authenticationFailures + c.throttled)
                    ),
                ]),
            counter("yashima_remote_timeouts_total", "Remote calls that missed their deadline.", [([], c.timeouts)]),
            counter(
                "yashima_remote_bypassed_total", "Remote calls skipped while the server was marked down.",
                [([], c.bypassed)]),
            counter(
                "yashima_remote_rejections_total", "Remote values rejected, by reason.",
                [
                    ([("reason", "bad_signature")], c.rejectedBadSignature),
                    ([("reason", "unsigned")], c.rejectedUnsigned), ([("reason", "damaged")], c.rejectedDamaged),
                    ([("reason", "too_large")], c.rejectedTooLarge),
                ]),
            counter("yashima_remote_lease_waits_total", "Waits for another host's lease.", [([], c.leaseWaits)]),
            MetricFamily(
                name: "yashima_remote_lease_wait_seconds_total", help: "Time spent waiting for other hosts' leases.",
                kind: .counter, samples: [([], Double(c.leaseWaitNanoseconds) / 1e9)]),
            counter(
                "yashima_remote_lease_takeovers_total", "Leases taken over after the holder's expired.",
                [([], c.leaseTakeovers)]),
        ]
        if !health.isEmpty {
            families.append(
                MetricFamily(
                    name: "yashima_remote_breaker_open",
                    help: "1 while every process skips the remote server (down, or being probed), else 0.",
                    kind: .gauge,
                    samples: health.map { ([("server", $0.server)], $0.state == .closed ? 0 : 1) }))
        }
        if !members.isEmpty {
            let labels = { (m: RemoteMemberStatus) in [("member", m.member), ("position", "\(m.position)")] }
            for (name, help, value) in [
                ("hits", "Lookups a chain member answered with a verified value.", \RemoteMemberStatus.hits),
                ("misses", "Lookups that found nothing usable in a chain member.", \.misses),
                ("stores", "Values stored in a chain member (backfills included).", \.stores),
                ("backfills", "Values a chain member received from a later member's hit.", \.backfills),
                ("errors", "Failed calls to a chain member other than timeouts.", \.errors),
                ("throttled", "Calls a chain member throttled (429, 503 SlowDown).", \.throttled),
                ("timeouts", "Calls to a chain member that missed their deadline.", \.timeouts),
            ] as [(String, String, KeyPath<RemoteMemberStatus, UInt64>)] {
                families.append(
                    counter(
                        "yashima_remote_member_\(name)_total", help, members.map { (labels($0), $0[keyPath: value]) }))
            }
        }
        return families
    }
}
