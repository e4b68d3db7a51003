// `yashima rm [run options] -- COMMAND…`: forget the stored result of one command, keyed exactly as `run`
// keys it (Run/Invocation.swift); with `--remote`, the remote copy too. Nothing runs.

import Foundation
@_spi(Operator) import YashimaShared

/// `yashima rm [run options] -- COMMAND…`: forget the stored result of one command, keyed exactly as
/// `run` keys it.
enum RemoveCommand {
    static let spec = CommandSpec(
        name: "rm", summary: "forget the stored result of one command (keyed exactly as run)",
        usage: "yashima rm [RUN OPTIONS] [--] COMMAND [ARG...]",
        description: """
            Removes the result "yashima run" stored for the same command line: give it the same key
            options (--input, --output, --key, --env, --cwd, --stdin, --namespace). Every process's next
            run of that command runs it again. With --remote, the remote copy is removed too. Nothing
            runs. Exit status 0 when a result was removed, 1 when none was stored, 2 for bad usage.
            """,
        options: Invocation.keyOptions + [RemoteOption.spec, RemoteOption.readOnlySpec, CommandSpec.json]
            + CommandSpec.storageOptions,
        takesCommand: true, run: run)

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        let invocation = try await Invocation(arguments)
        let location = try Location(arguments)
        let key = try invocation.key(arguments, location: location)
        var removed = false
        if location.exists {
            let cache = try location.openCache(
                budget: nil, remote: try RemoteOption.parse(arguments, directory: location.path))
            do {
                removed = try await cache.remove(for: key, codec: RunRecordCodec())
            } catch let error as YCache.Error {
                throw location.problem(error)
            }
        }
        if arguments.flag("json") {
            Output.json(["directory": location.path.text ?? location.path.quoted, "removed": removed])
        } else {
            Output.line(
                removed
                    ? "removed the stored result of \(Shell.command(invocation.argv))"
                    : "no stored result of \(Shell.command(invocation.argv))")
        }
        return removed ? 0 : 1
    }
}
