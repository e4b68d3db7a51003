// `--remote URL` for `run`, `rm`, `get` and `put` (or the `remote` setting): the remote tier behind the
// storage directory, shared with other hosts (the library's `YCache.Remote`). Forms: `redis://…` (given
// several times: shards), `redis+unix:///path.sock`, `redis+cluster://HOST:PORT[,HOST:PORT…]` (a
// Cluster, by seeds), `http(s)://HOST/PATH` (values; with a Redis URL too, that Redis holds the leases),
// `s3://BUCKET[/PREFIX][?endpoint=URL&region=R]` (credentials from AWS_*; with other URLs: a chain in order);
// `--remote-read-only URL` adds a member that is asked, never written (after the `--remote` ones).
// No message ever shows a URL's user or password: `redacted` is the only form printed.

import YashimaShared

enum RemoteOption {
    static let spec = OptionSpec.option(
        "remote", "URL",
        "share results with other hosts: redis://HOST[:PORT][/DB] (repeat for shards), redis+unix:///PATH, "
            + "redis+cluster://HOST:PORT[,HOST:PORT...], http[s]://HOST/PATH, s3://BUCKET[/PREFIX] "
            + "(with other URLs: a chain, asked in order); a remote that is down is skipped")

    static let readOnlySpec = OptionSpec.option(
        "remote-read-only", "URL",
        "a remote asked after the --remote ones and never written (no stores, leases or removals); repeatable")

    /// The remote tier `--remote` (or the `remote` setting) names, if any; `readOnly` for commands that
    /// only read (`get`).
    static func parse(_ arguments: ParsedArguments, readOnly: Bool = false, directory: Word?) throws -> YCache.Remote? {
        var urls = try arguments.strings("remote")
        if urls.isEmpty, let (value, _) = try Settings.value("remote", directory: directory) {
            urls = Self.urls(in: value)
        }
        let readOnlyURLs = try arguments.strings("remote-read-only")
        guard !readOnlyURLs.isEmpty else { return urls.isEmpty ? nil : try remote(urls, readOnly: readOnly) }
        // A chain: the `--remote` remote first, then the read-only members in the order given.
        let shown = (urls + readOnlyURLs).map(redacted).joined(separator: " ")
        do {
            let writable = try urls.isEmpty ? [] : [remote(urls, readOnly: readOnly)]
            let readers = try members(readOnlyURLs, options: YCache.Remote.Options(readOnly: true))
            let all = writable + readers
            return all.count == 1 ? all[0] : try .chain(all)
        } catch let error as YCache.Remote.ConfigurationError {
            throw CommandFailure.usage("--remote \(shown): \(error.description)")
        }
    }

    /// The URLs of one setting value (whitespace-separated).
    private static func urls(in value: String) -> [String] {
        value.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
    }

    /// The remote for one setting value (whitespace-separated URLs).
    static func remote(_ value: String, readOnly: Bool) throws -> YCache.Remote {
        try remote(urls(in: value), readOnly: readOnly)
    }

    static func remote(_ urls: [String], readOnly: Bool) throws -> YCache.Remote {
        guard !urls.isEmpty else { throw UsageError("--remote needs a URL (redis://HOST or http://HOST/PATH)") }
        let options = YCache.Remote.Options(readOnly: readOnly)
        let shown = urls.map(redacted).joined(separator: " ")
        do {
            if urls.contains(where: { scheme(of: $0) == "s3" }) { return try chain(urls, options: options) }
            var redis: [String] = []
            var cluster: [String] = []
            var http: [String] = []
            for url in urls {
                switch scheme(of: url) {
                case "redis", "redis+unix": redis.append(url)
                case "redis+cluster": cluster += try seeds(of: url)
                case "http", "https": http.append(url)
                case let scheme?:
                    throw UsageError(
                        "--remote: unsupported scheme \(scheme):// (expected redis://, redis+unix://, "
                            + "redis+cluster://, http://, https:// or s3://)")
                case nil:
                    throw UsageError(
                        "--remote \(redacted(url)) is not a URL (expected redis://HOST or http://HOST/PATH)")
                }
            }
            guard http.count <= 1 else { throw UsageError("--remote: at most one HTTP cache server") }
            guard cluster.isEmpty || redis.isEmpty else {
                throw UsageError("--remote: a Redis Cluster and separate Redis servers cannot be mixed")
            }
            let leases: YCache.Remote?
            if !cluster.isEmpty {
                leases = try .redisCluster(seeds: cluster, options: options)
            } else if !redis.isEmpty {
                leases = try .redis(shards: redis, options: options)
            } else {
                leases = nil
            }
            if let url = http.first {
                return try leases.map { try .http(url, leases: $0, options: options) } ?? .http(url, options: options)
            }
            return leases!
        } catch let error as YCache.Remote.ConfigurationError {
            throw CommandFailure.usage("--remote \(shown): \(error.description)")
        }
    }

    /// URLs with an `s3://` among them: a chain in the order given, consecutive `redis://` URLs one sharded
    /// member (a single member is the remote itself).
    private static func chain(_ urls: [String], options: YCache.Remote.Options) throws -> YCache.Remote {
        try .chain(members(urls, options: options))
    }

    /// The members `urls` make in a chain, in order (consecutive `redis://` URLs one sharded member).
    private static func members(_ urls: [String], options: YCache.Remote.Options) throws -> [YCache.Remote] {
        var members: [YCache.Remote] = []
        var redis: [String] = []
        func flushRedis() throws {
            if !redis.isEmpty { members.append(try .redis(shards: redis, options: options)) }
            redis = []
        }
        for url in urls {
            switch scheme(of: url) {
            case "redis", "redis+unix": redis.append(url)
            case "redis+cluster":
                try flushRedis()
                members.append(try .redisCluster(seeds: try seeds(of: url), options: options))
            case "http", "https":
                try flushRedis()
                members.append(try .http(url, options: options))
            case "s3":
                try flushRedis()
                members.append(try .s3(url, options: options))
            default:
                throw UsageError("--remote \(redacted(url)): unsupported in a chain")
            }
        }
        try flushRedis()
        return members
    }

    /// `redis+cluster://[user:password@]HOST:PORT,HOST:PORT` as one `redis://` URL per seed (the user
    /// information carried to each).
    private static func seeds(of url: String) throws -> [String] {
        let rest = url.dropFirst("redis+cluster://".count)
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        guard authorityEnd == rest.endIndex || rest[authorityEnd...] == "/" || rest[authorityEnd...] == "/0" else {
            throw UsageError("--remote \(redacted(url)): a Redis Cluster has database 0 only and takes no path")
        }
        var authority = rest[..<authorityEnd]
        var userInfo = ""
        if let at = authority.lastIndex(of: "@") {
            userInfo = String(authority[...at])
            authority = authority[authority.index(after: at)...]
        }
        let hosts = authority.split(separator: ",", omittingEmptySubsequences: false)
        guard !hosts.isEmpty, hosts.allSatisfy({ !$0.isEmpty }) else {
            throw UsageError("--remote \(redacted(url)): expected redis+cluster://HOST:PORT[,HOST:PORT...]")
        }
        return hosts.map { "redis://" + userInfo + $0 }
    }

    /// The scheme of `url` (lowercased) when it has the shape of one, else nil.
    private static func scheme(of url: String) -> String? {
        guard let end = url.range(of: "://")?.lowerBound else { return nil }
        let scheme = url[..<end].lowercased()
        guard let first = scheme.first, first.isLetter, scheme.count <= 20,
            scheme.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) })
        else { return nil }
        return scheme
    }

    /// `url` with its user information (user and password) replaced by `***`: the only form printed.
    /// Everything between `://` and the last `@` goes, so a password holding `/` or `@` goes too.
    static func redacted(_ url: String) -> String {
        guard let at = url.lastIndex(of: "@") else { return url }
        guard let start = url.range(of: "://")?.upperBound, start <= at else { return "***" }
        return String(url[..<start]) + "***" + String(url[at...])
    }
}
