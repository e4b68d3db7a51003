// `yashima clear [--namespace N]`: remove everything, or one namespace, for every process; the count comes
// from the operator surface.

import Foundation
@_spi(Operator) import YashimaShared

enum ClearCommand {
    static let spec = CommandSpec(
        name: "clear", summary: "remove every entry, or one namespace's, for every process",
        usage: "yashima clear [--namespace NAME] [--json] [--dir DIR]",
        description: """
            Removes every entry (or every entry of one namespace). Every process's next lookup misses,
            memory layers included. A process that is reading an entry keeps reading it (entries are only
            unlinked); a generation in flight publishes after the clear.
            """,
        options: [.option("namespace", "NAME", "only entries of this namespace"), CommandSpec.json]
            + CommandSpec.storageOptions, run: run)

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        let location = try Location(arguments)
        let namespace = try arguments.string("namespace")
        var removed = 0
        if location.exists {
            let storage = try location.storageOperator(try location.openCache(budget: nil))
            do {
                removed = try await StorageOperator.offPool(throwing: { try storage.removeAll(inNamespace: namespace) })
            } catch let error as YCache.Error {
                throw CommandFailure.from(error)
            }
        }
        if arguments.flag("json") {
            Output.json(["directory": location.shown, "namespace": namespace ?? NSNull(), "removed": removed])
        } else {
            let scope = namespace.map { " from namespace \(Format.printable($0))" } ?? ""
            Output.line("removed \(Format.count(removed, "entry", "entries"))\(scope)")
        }
        return 0
    }
}
