// `--remote URL` for `run`, `get` and `put`: the remote tier behind the storage directory, shared with
// other hosts (the library's `YCache.Remote`). The URL forms: `redis://[user[:password]@]host[:port][/db]`,
// `redis+unix:///path.sock[?db=N]`, `http(s)://host/path` (values only: generation is then exactly once
// per host). Credentials may come from the environment (`YASHIMA_REDIS_PASSWORD`, `YASHIMA_HTTP_TOKEN`, …),
// the shared secret from `YASHIMA_REMOTE_SECRET`. A remote that is down or slow costs one timeout, then is
// bypassed: the command works as without it.

import YashimaShared

enum RemoteOption {
    static let spec = OptionSpec.option(
        "remote", "URL",
        "share results with other hosts through Redis (redis://HOST[:PORT][/DB], redis+unix:///PATH) or an "
            + "HTTP cache (http[s]://HOST/PATH); a remote that is down is skipped")

    /// The remote tier `--remote` names, if any; `readOnly` for commands that only read (`get`).
    static func parse(_ arguments: ParsedArguments, readOnly: Bool = false) throws -> YCache.Remote? {
        guard let url = arguments.string("remote") else { return nil }
        let options = YCache.Remote.Options(readOnly: readOnly)
        do {
            if url.hasPrefix("http://") || url.hasPrefix("https://") { return try .http(url, options: options) }
            return try .redis(url, options: options)
        } catch {
            throw CommandFailure.usage("--remote \(url): \(error.description)")
        }
    }
}
