// The guide "Sharing across machines" (SharingAcrossMachines.md): a remote tier behind each host's storage directory.
// Built with the package so the samples keep compiling; ExamplesTests runs `remote`, which configures each
// cache without contacting a server (the remote tier's own tests start their servers).

import Foundation
import YashimaShared

// sample: remote-redis
/// Every host's cache: its own storage directory, and one Redis shared by all hosts. The ACL user's
/// password and the shared secret come from the environment (`YASHIMA_REDIS_USER`,
/// `YASHIMA_REDIS_PASSWORD`, `YASHIMA_REMOTE_SECRET`), never from the code.
func renderCache() throws -> YCache {
    var options = YCache.Remote.Options()
    options.leaseTimeToLive = .seconds(5)  // a host that dies holding a lease delays the others this long
    return YCache(
        storageDirectory: URL(fileURLWithPath: "/var/cache/render"),
        remote: try .redis("redis://10.0.0.5:6379/0", options: options))
}
// end sample

// sample: remote-http
/// Large artifacts on an HTTP cache server: alone (exactly once per host), or with the leases on Redis
/// (exactly once across hosts).
func artifactCaches(directory: URL) throws -> (valuesOnly: YCache, withLeases: YCache) {
    let valuesOnly = YCache(
        storageDirectory: directory, remote: try .http("http://artifacts.internal:8080/yashima"))
    let withLeases = YCache(
        storageDirectory: directory,
        remote: try .http("http://artifacts.internal:8080/yashima", leases: .redis("redis://10.0.0.5:6379")))
    return (valuesOnly, withLeases)
}
// end sample

// sample: remote-s3
/// Artifacts in an S3 bucket: AWS's (credentials and region from the AWS_* environment), or an
/// S3-compatible store at an endpoint of its own.
func bucketCaches(directory: URL) throws -> (aws: YCache, selfHosted: YCache) {
    let aws = YCache(storageDirectory: directory, remote: try .s3("s3://artifacts/yashima"))
    let selfHosted = YCache(
        storageDirectory: directory,
        remote: try .s3("s3://artifacts/yashima?endpoint=http://10.0.0.7:8333&region=us-east-1"))
    return (aws, selfHosted)
}
// end sample

// sample: remote-chain
/// Redis in front of S3: hits from Redis, misses there filled from S3 on the way back; the bucket
/// read-only on developer machines (CI writes it).
func chainedCache(directory: URL, developerMachine: Bool) throws -> YCache {
    let bucket = try YCache.Remote.s3(
        "s3://artifacts/yashima", options: YCache.Remote.Options(readOnly: developerMachine))
    let remote = try YCache.Remote.chain([.redis("redis://10.0.0.5:6379"), bucket])
    return YCache(storageDirectory: directory, remote: remote)
}
// end sample
