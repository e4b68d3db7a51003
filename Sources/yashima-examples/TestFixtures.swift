// The guide for parallel test runners (SharingAcrossProcesses.md): an expensive fixture built once for all of them.

import Foundation
import YashimaShared

// sample: test-fixtures
/// The schema the fixture is built from: a different schema must give a different fixture.
let schemaSQL = "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL);"

/// Every test process calls this. The first one to need the fixture builds it, the others wait for it
/// and read it, and later runs reuse it until the schema changes.
func seededDatabase(buildDirectory: URL) async throws -> Data {
    let fixtures = YCache(
        storageDirectory: buildDirectory.appendingPathComponent("fixtures"),
        storageMaximumByteCount: 2 << 30)  // 2 GiB of fixtures at most
    let key = CacheKey(namespace: "fixtures", identity: "seeded-db")
        .variant("schema", CacheKey.digest(of: schemaSQL))
    return try await fixtures.data(for: key) { try await buildSeededDatabase(schema: schemaSQL) }
}
// end sample

/// Stands in for an expensive fixture build; says when it runs.
func buildSeededDatabase(schema: String) async throws -> Data {
    print("building the seeded database")
    try await Task.sleep(for: .milliseconds(300))
    return Data((schema + "\nINSERT INTO users VALUES (1, 'ada');").utf8)
}
