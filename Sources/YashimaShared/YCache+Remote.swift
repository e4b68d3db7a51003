// `YCache.Remote`: the public description of the optional remote tier behind the local storage directory
// (Redis; an HTTP cache server; HTTP values with Redis leases), its options and its configuration error.
// Plain data: the factories parse and validate (URLs, credentials and the shared secret from the
// environment are read once, here); Remote/RemoteBackend.swift builds the backend's stores per cache.

import Foundation

extension YCache {
    /// A remote tier shared by several hosts, behind each host's storage directory.
    ///
    /// Per key a lookup goes: memory → local storage → the key's local lock (one process per host goes
    /// on) → the remote value → on a miss the key's remote lease (one host generates; the others wait for
    /// its value, woken when it finishes, and take over if its lease expires) → generate → publish locally
    /// → store remotely and release the lease. A value found remotely is verified (entry identity, length,
    /// checksum, and with a secret its HMAC-SHA256) before it is published locally and returned with
    /// `source == .remote`.
    ///
    /// ```swift
    /// let cache = YCache(storageDirectory: dir, remote: try .redis("redis://cache.internal:6379"))
    /// ```
    ///
    /// The remote tier is best effort: it is never what makes a call fail. A remote error or timeout
    /// costs a call at most `Options.operationTimeout` once, is counted in `CacheStatistics`, and the
    /// server is then bypassed for a cooldown while the cache works as it does without one. That bypass
    /// (the circuit breaker) is kept per server in the storage directory's `state` file, so it holds for
    /// every process using the directory: once one process found a server down or hung, the others skip it
    /// at no cost, and one probe after the cooldown (by any process) closes it for all.
    ///
    /// ## Bounds
    /// With `T` = `operationTimeout`, `L` = `leaseTimeToLive`, `R` = `leaseRecheckInterval`:
    /// - A remote call takes at most `T`, connecting included; after one that failed, the server is
    ///   bypassed, so one lookup pays at most `T` once for its lookup and lease together.
    /// - A host that generated holding a key's lease and cannot store its value (the server refuses or
    ///   pauses writes, a failover, a timeout) still releases the lease and wakes the waiters, by a
    ///   separate call retried for at most `T` more: it spends at most `2T` after its generation.
    /// - A host waiting for another host's lease waits while the holder generates (the holder renews the
    ///   lease every `L/3`). Once the holder stops renewing (it finished, failed, died, hung or was cut
    ///   off), the waiter stops waiting within about one round trip when the holder released the lease
    ///   (at most `R` if the notification was lost), and within `L` when it could not (the lease expires:
    ///   the waiter looks again exactly then), plus at most `T` to take the lease over; then it generates
    ///   itself (or finds the value). So a waiter's wait is at most the holder's remaining generation
    ///   `+ L + T` (3 s with the defaults), and never more than `crossProcessWaitTimeout + T` when that is
    ///   set. A key is generated at most once per host whatever fails (the local lock), and once in all
    ///   while the server works.
    ///
    /// ## Trust (`Options.secret`)
    /// A host with a secret signs what it stores and accepts only values signed with it: an unsigned value
    /// or one signed with another secret is rejected (never returned), generated again and replaced. A
    /// host without a secret cannot check a signature: it accepts signed and unsigned values on their
    /// checksum, and never replaces a signed value (on Redis its store keeps one in place, atomically; on
    /// HTTP only its lookup before generating protects one). So a fleet where some hosts lack the secret
    /// converges on signed values, and every rejection is counted by reason (bad signature, unsigned,
    /// damaged, too large) in `CacheStatistics` and the directory's shared counters (`yashima stats`).
    ///
    /// Only values that go to storage (`writePolicy: .memoryAndStorage`) are stored remotely; `store`
    /// replaces the remote value too, and `remove(for:codec:)` deletes it, while `removeAll(in:)` and
    /// `removeAll()` stay local.
    ///
    /// Leases are for efficiency, not correctness: a host paused or cut off for longer than the lease TTL
    /// can duplicate a generation, never corrupt a value. HTTP alone has no leases: generation is then
    /// exactly-once per host, and hosts missing the same key at once may each generate it.
    public struct Remote: Sendable, Equatable, CustomStringConvertible, CustomReflectable {
        /// The backend with its parsed and validated settings.
        let backend: RemoteBackend
        /// The options it was made with.
        public let options: Options

        /// The tier's settings shared by every backend (some only apply to Redis).
        public struct Options: Sendable, Equatable, CustomStringConvertible, CustomReflectable {
            /// Never write remotely: no stores, removals or leases; lookups only. For hosts that must not
            /// publish. Generation is then coordinated per host only. Default `false`.
            public var readOnly: Bool
            /// The most one remote operation may take, connecting included: the most a call ever waits for
            /// the remote tier before it is bypassed. Default 1 s.
            public var operationTimeout: Duration
            /// The most connecting may take (within the operation timeout). Default 500 ms.
            public var connectTimeout: Duration
            /// How long the tier is bypassed after a failure before one probe call (doubling up to a
            /// minute while probes fail). Default 5 s.
            public var breakerCooldown: Duration
            /// Values whose stored form (payload and an envelope of at most 112 bytes) would be larger stay
            /// local. Default 64 MiB.
            public var maximumValueByteCount: Int
            /// How long a value lives on a Redis server at most (an entry's own expiry may end it earlier).
            /// Default 7 days. HTTP servers expire values by their own rules.
            public var valueTimeToLive: Duration
            /// The lease TTL (Redis): the holder renews it every third of it, so a host that died, hung or lost
            /// the server while holding a lease (or whose release failed) blocks the others at most this long
            /// after its last renewal (see Bounds in ``YCache/Remote``). Shorter is a smaller bound but a
            /// lease lost to a slow renewal; renewals must fit in it with a timeout to spare. Default 2 s.
            public var leaseTimeToLive: Duration
            /// How often a host waiting for another host's lease re-checks without being told (a lost
            /// notification costs at most this much). Default 1 s.
            public var leaseRecheckInterval: Duration
            /// The first part of every Redis key name, so several caches can share a server. 1–64 printable
            /// ASCII characters without spaces or braces. Default `"yashima"`.
            public var keyPrefix: String
            /// The shared secret: values are signed with it (HMAC-SHA256) and only values signed with it are
            /// accepted. `nil` (default) reads `YASHIMA_REMOTE_SECRET` from the environment; without either,
            /// values are unsigned. Never printed.
            public var secret: String?
            /// `removeAll()` also deletes every remote value of the cache: every key under `keyPrefix`, on
            /// every Redis server (shards, cluster masters), by `SCAN` and `UNLINK` (the ACL user needs
            /// `+scan +unlink`). It removes what every host shares, so it is off by default; `removeAll(in:)`
            /// stays local either way (remote names carry no namespace), and HTTP servers keep their values
            /// (they cannot be listed). Default `false`.
            public var removeAllRemotely: Bool

            /// Creates options; every parameter has the default the property documents.
            /// - Parameters:
            ///   - readOnly: Never write remotely.
            ///   - operationTimeout: The most one remote operation may take.
            ///   - connectTimeout: The most connecting may take.
            ///   - breakerCooldown: How long the tier is bypassed after a failure.
            ///   - maximumValueByteCount: Larger values stay local.
            ///   - valueTimeToLive: How long a value lives on a Redis server at most.
            ///   - leaseTimeToLive: The Redis lease TTL.
            ///   - leaseRecheckInterval: How often a lease waiter re-checks without a notification.
            ///   - keyPrefix: The first part of every Redis key name.
            ///   - secret: The shared secret; `nil` reads `YASHIMA_REMOTE_SECRET`.
            ///   - removeAllRemotely: `removeAll()` deletes every remote value too.
            public init(
                readOnly: Bool = false,
                operationTimeout: Duration = .seconds(1),
                connectTimeout: Duration = .milliseconds(500),
                breakerCooldown: Duration = .seconds(5),
                maximumValueByteCount: Int = 64 << 20,
                valueTimeToLive: Duration = .seconds(7 * 86_400),
                leaseTimeToLive: Duration = .seconds(2),
                leaseRecheckInterval: Duration = .seconds(1),
                keyPrefix: String = "yashima",
                secret: String? = nil,
                removeAllRemotely: Bool = false
            ) {
                self.readOnly = readOnly
                self.operationTimeout = operationTimeout
                self.connectTimeout = connectTimeout
                self.breakerCooldown = breakerCooldown
                self.maximumValueByteCount = maximumValueByteCount
                self.valueTimeToLive = valueTimeToLive
                self.leaseTimeToLive = leaseTimeToLive
                self.leaseRecheckInterval = leaseRecheckInterval
                self.keyPrefix = keyPrefix
                self.secret = secret
                self.removeAllRemotely = removeAllRemotely
            }

            /// The options, the secret redacted.
            public var description: String {
                "readOnly: \(readOnly), operationTimeout: \(operationTimeout), connectTimeout: \(connectTimeout), "
                    + "breakerCooldown: \(breakerCooldown), maximumValueByteCount: \(maximumValueByteCount), "
                    + "valueTimeToLive: \(valueTimeToLive), leaseTimeToLive: \(leaseTimeToLive), "
                    + "leaseRecheckInterval: \(leaseRecheckInterval), keyPrefix: \(keyPrefix), "
                    + "secret: \(secret == nil ? "from the environment, if set" : "(redacted)"), "
                    + "removeAllRemotely: \(removeAllRemotely)"
            }

            /// The description only (a dump must not show the secret).
            public var customMirror: Mirror { Mirror(self, children: ["options": description]) }

            /// The options every backend shares, as the backends take them.
            var policy: RemotePolicy {
                var policy = RemotePolicy()
                policy.readOnly = readOnly
                policy.operationTimeout = operationTimeout
                policy.connectTimeout = connectTimeout
                policy.breakerCooldown = breakerCooldown
                policy.maximumBreakerCooldown = max(.seconds(60), breakerCooldown)
                policy.maximumValueBytes = maximumValueByteCount
                policy.removeAllRemotely = removeAllRemotely
                return policy
            }
        }

        /// Why a remote tier could not be configured (a bad URL, an option out of range).
        public struct ConfigurationError: Swift.Error, Sendable, Equatable, CustomStringConvertible {
            /// What is wrong, without credentials or the secret.
            public let description: String
        }

        /// A Redis server: `redis://[user[:password]@]host[:port][/db]` or `redis+unix:///path.sock[?db=N]`.
        /// Credentials may also come from `YASHIMA_REDIS_USER` and `YASHIMA_REDIS_PASSWORD`.
        /// - Parameters:
        ///   - url: The server's URL.
        ///   - options: Timeouts, TTLs, read-only mode, the secret.
        /// - Throws: `ConfigurationError` for an invalid URL or option.
        public static func redis(_ url: String, options: Options = Options()) throws(ConfigurationError) -> Remote {
            try redis(shards: [url], options: options)
        }

        /// Several independent Redis servers as shards: each key (its value and its lease) lives on one of
        /// them, chosen by rendezvous hashing, the same on every host given the same list.
        /// - Parameters:
        ///   - urls: The servers' URLs (as for `redis(_:options:)`).
        ///   - options: Timeouts, TTLs, read-only mode, the secret.
        /// - Throws: `ConfigurationError` for an invalid or duplicate URL, an empty list or an invalid
        ///   option.
        public static func redis(shards urls: [String], options: Options = Options()) throws(ConfigurationError)
            -> Remote
        {
            Remote(backend: .redis(try redisConfiguration(urls, cluster: false, options: options)), options: options)
        }

        /// A Redis Cluster, reached through any of `seeds` (database 0): `MOVED` and `ASK` are followed,
        /// and a key's value and lease share a slot.
        /// - Parameters:
        ///   - seeds: URLs of some of the cluster's nodes.
        ///   - options: Timeouts, TTLs, read-only mode, the secret.
        /// - Throws: `ConfigurationError` for an invalid URL, a database other than 0 or an invalid option.
        public static func redisCluster(seeds: [String], options: Options = Options()) throws(ConfigurationError)
            -> Remote
        {
            Remote(backend: .redis(try redisConfiguration(seeds, cluster: true, options: options)), options: options)
        }

        /// An HTTP cache server (`GET`/`PUT`/`DELETE` at `<url>/<xx>/<entry identity hex>`: nginx with
        /// WebDAV, bazel-remote, an object store). Without leases, generation is exactly-once per host only.
        /// Credentials may be in the URL (`https://user:password@host/path`) or in the environment
        /// (`YASHIMA_HTTP_TOKEN`, or `YASHIMA_HTTP_USER` and `YASHIMA_HTTP_PASSWORD`).
        /// - Parameters:
        ///   - url: The base URL (`http://` or `https://`).
        ///   - options: Timeouts, size cap, read-only mode, the secret (the Redis-only options are ignored).
        /// - Throws: `ConfigurationError` for an invalid URL or option.
        public static func http(_ url: String, options: Options = Options()) throws(ConfigurationError) -> Remote {
            Remote(backend: .http(try httpConfiguration(url, options: options), leases: nil), options: options)
        }

        /// Values on an HTTP cache server, leases on Redis: exactly-once generation across hosts with the
        /// payloads where large files belong.
        /// - Parameters:
        ///   - url: The HTTP server's base URL.
        ///   - leases: A Redis remote (`.redis(…)`, `.redis(shards:…)` or `.redisCluster(…)`) that holds only
        ///     the leases; its own options set the lease TTL and its timeouts.
        ///   - options: The HTTP side's timeouts, size cap, read-only mode and secret.
        /// - Throws: `ConfigurationError` for an invalid URL or option, or when `leases` is not Redis.
        public static func http(_ url: String, leases: Remote, options: Options = Options())
            throws(ConfigurationError) -> Remote
        {
            guard case .redis(let leaseConfiguration) = leases.backend else {
                throw ConfigurationError(description: "remote leases need a Redis backend")
            }
            let values = try httpConfiguration(url, options: options)
            return Remote(backend: .http(values, leases: leaseConfiguration), options: options)
        }

        /// An S3 bucket (AWS S3, or an S3-compatible store: SeaweedFS, MinIO, Ceph RGW, Garage, R2): values at
        /// `<prefix>/<xx>/<entry identity hex>`, requests signed with AWS Signature Version 4. Exactly-once
        /// across hosts with lease objects taken by conditional writes (`If-None-Match: *`, `If-Match`), which
        /// AWS S3, SeaweedFS and MinIO support; pass `conditionalLeases: false` where the store lacks them.
        ///
        /// `url` is `s3://BUCKET[/PREFIX]`, optionally `?endpoint=URL&region=R&style=path|virtual`. What it
        /// leaves out comes from the standard environment: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
        /// `AWS_SESSION_TOKEN`, `AWS_REGION`/`AWS_DEFAULT_REGION`, `AWS_ENDPOINT_URL_S3`/`AWS_ENDPOINT_URL`
        /// (without an endpoint: AWS's own for the region, virtual-hosted; with one: path-style). Credentials
        /// are never printed.
        /// - Parameters:
        ///   - url: The bucket and prefix.
        ///   - accessKeyID: The access key id, instead of `AWS_ACCESS_KEY_ID`.
        ///   - secretAccessKey: The secret access key, instead of `AWS_SECRET_ACCESS_KEY`.
        ///   - sessionToken: A session token, instead of `AWS_SESSION_TOKEN`.
        ///   - conditionalLeases: Take leases as objects with conditional writes (default `true`).
        ///   - options: Timeouts, size cap, read-only mode, lease TTL and re-check interval (how often a
        ///     waiter looks at another host's lease: S3 has no notifications), the secret.
        /// - Throws: `ConfigurationError` for an invalid URL, missing credentials or an invalid option.
        public static func s3(
            _ url: String, accessKeyID: String? = nil, secretAccessKey: String? = nil, sessionToken: String? = nil,
            conditionalLeases: Bool = true, options: Options = Options()
        ) throws(ConfigurationError) -> Remote {
            let configuration = try s3Configuration(
                url, accessKeyID: accessKeyID, secretAccessKey: secretAccessKey, sessionToken: sessionToken,
                conditionalLeases: conditionalLeases, options: options)
            return Remote(backend: .s3(configuration, leases: nil), options: options)
        }

        /// Values on an S3 bucket, leases on Redis (for stores without conditional writes).
        /// - Parameters:
        ///   - url: The bucket and prefix, as for `s3(_:accessKeyID:secretAccessKey:sessionToken:conditionalLeases:options:)`.
        ///   - leases: A Redis remote that holds only the leases.
        ///   - options: The S3 side's timeouts, size cap, read-only mode and secret.
        /// - Throws: `ConfigurationError` for an invalid URL or option, or when `leases` is not Redis.
        public static func s3(_ url: String, leases: Remote, options: Options = Options()) throws(ConfigurationError)
            -> Remote
        {
            guard case .redis(let leaseConfiguration) = leases.backend else {
                throw ConfigurationError(description: "remote leases need a Redis backend")
            }
            let configuration = try s3Configuration(
                url, accessKeyID: nil, secretAccessKey: nil, sessionToken: nil, conditionalLeases: false,
                options: options)
            return Remote(backend: .s3(configuration, leases: leaseConfiguration), options: options)
        }

        /// Remote tiers in order, as one: a lookup asks them in order, and a hit in a later member is stored
        /// in the earlier writable ones (backfill); a store and a removal go to every writable member; a
        /// member made with `readOnly` never receives a store, a lease or a delete. Each member keeps its
        /// own breakers and counters (`CacheStatistics` sums them). Leases come from the first writable
        /// member that has them. Values go through memory in a chain (no streaming through files).
        /// - Parameter members: At least one remote (`.redis`, `.http`, `.s3`, or a chain, flattened).
        /// - Throws: `ConfigurationError` for an empty list.
        public static func chain(_ members: [Remote]) throws(ConfigurationError) -> Remote {
            guard let first = members.first else {
                throw ConfigurationError(description: "a remote chain needs at least one member")
            }
            let flat = members.flatMap { member -> [RemoteBackend] in
                if case .chain(let inner) = member.backend { return inner }
                return [member.backend]
            }
            return Remote(backend: flat.count == 1 ? flat[0] : .chain(flat), options: first.options)
        }

        /// The backend and its servers, without credentials or the secret.
        public var description: String { backend.description }

        /// The description only (a dump must not show credentials or the secret).
        public var customMirror: Mirror { Mirror(self, children: ["remote": description]) }

        private static func redisConfiguration(_ urls: [String], cluster: Bool, options: Options)
            throws(ConfigurationError) -> RedisConfiguration
        {
            var configuration: RedisConfiguration
            do throws(RedisConfigurationError) {
                configuration = try RedisConfiguration(urls: urls, cluster: cluster)
            } catch {
                throw ConfigurationError(description: error.description)
            }
            configuration.policy = options.policy
            configuration.keyPrefix = options.keyPrefix
            configuration.valueTimeToLive = options.valueTimeToLive
            configuration.leaseTimeToLive = options.leaseTimeToLive
            configuration.waitRecheckInterval = options.leaseRecheckInterval
            if let text = options.secret { configuration.secret = try secret(text) }
            do throws(RedisConfigurationError) {
                try configuration.validate()
            } catch {
                throw ConfigurationError(description: error.description)
            }
            return configuration
        }

        private static func httpConfiguration(_ url: String, options: Options) throws(ConfigurationError)
            -> HTTPRemoteConfiguration
        {
            var configuration: HTTPRemoteConfiguration
            do throws(HTTPConfigurationError) {
                configuration = try HTTPRemoteConfiguration(url: url)
            } catch {
                throw ConfigurationError(description: error.description)
            }
            configuration.policy = options.policy
            if let text = options.secret { configuration.secret = try secret(text) }
            do throws(HTTPConfigurationError) {
                try configuration.validate()
            } catch {
                throw ConfigurationError(description: error.description)
            }
            return configuration
        }

        private static func s3Configuration(
            _ url: String, accessKeyID: String?, secretAccessKey: String?, sessionToken: String?,
            conditionalLeases: Bool, options: Options
        ) throws(ConfigurationError) -> S3Configuration {
            var environment = ProcessInfo.processInfo.environment
            if let accessKeyID { environment[S3Configuration.accessKeyVariable] = accessKeyID }
            if let secretAccessKey { environment[S3Configuration.secretKeyVariable] = secretAccessKey }
            if let sessionToken { environment[S3Configuration.sessionTokenVariable] = sessionToken }
            var configuration: S3Configuration
            do throws(S3ConfigurationError) {
                configuration = try S3Configuration(url: url, environment: environment)
            } catch {
                throw ConfigurationError(description: error.description)
            }
            configuration.policy = options.policy
            configuration.conditionalLeases = conditionalLeases
            configuration.leaseTimeToLive = options.leaseTimeToLive
            configuration.leasePollInterval = min(options.leaseRecheckInterval, .milliseconds(100))
            if let text = options.secret { configuration.secret = try secret(text) }
            do throws(S3ConfigurationError) {
                try configuration.validate()
            } catch {
                throw ConfigurationError(description: error.description)
            }
            return configuration
        }

        private static func secret(_ text: String) throws(ConfigurationError) -> RemoteSecret {
            guard let secret = RemoteSecret(text) else {
                throw ConfigurationError(description: "the remote secret must not be empty")
            }
            return secret
        }
    }
}
