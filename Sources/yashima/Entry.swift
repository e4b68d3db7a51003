// `yashima`: memoize shell commands across processes, and operate a YashimaShared storage directory.
// Dispatches to the subcommands of `commands` (one file each in Commands/, each spec carrying its `run`);
// exit status 0 ok, 1 failed, 2 bad usage (`run` passes its command's status through). For the commands
// whose spec takes the signals (`run`, `watch`), they are blocked here, first thing, before any thread
// exists (see Run/Process.swift). The command starts on the main thread (a hit that never suspends
// ends there: no thread is started); the main thread then waits on a semaphore, never in dispatch's main
// loop: that parks in sigsuspend with an empty mask, and the blocked signals would be delivered to it.

import Foundation
import Glibc
import Synchronization

/// Every subcommand (one file each in Commands/), in the order help lists them.
let commands: [CommandSpec] = [
    RunCommand.spec, RemoveCommand.spec, StatsCommand.spec, ListCommand.spec, VerifyCommand.spec, TrimCommand.spec,
    ClearCommand.spec, GetCommand.spec, PutCommand.spec, WatchCommand.spec, ConfigCommand.spec,
]

/// Parses the command line (exact bytes) and runs the subcommand; returns the exit status.
func main(_ words: [Word]) async -> Int32 {
    // Options before the subcommand (`yashima --dir X stats`) are the subcommand's own.
    let (global, rest) = splitGlobalOptions(words)
    guard let nameWord = rest.first else {
        if global.isEmpty {
            Output.error(Help.topLevel(commands), terminator: false)
        } else {
            Output.error("yashima: missing command after \(Shell.command(global)) (yashima --help lists them)")
        }
        return 2
    }
    let name = nameWord.text ?? nameWord.quoted
    if global.isEmpty, ["--help", "-h", "help"].contains(name) {
        let topic = rest.count > 1 ? rest[1].text : nil
        if name == "help", let spec = commands.first(where: { $0.name == topic }) {
            Output.out(spec.help)
        } else if name == "help", topic == "--man" {
            Output.out(Documentation.manPage(commands, date: Format.iso(Date()).prefix(10).description))
        } else if name == "help", topic == "--completion" {
            guard rest.count == 3, let script = Documentation.completion(rest[2].text ?? "", commands) else {
                Output.error("yashima: help --completion takes bash, zsh or fish")
                return 2
            }
            Output.out(script)
        } else {
            Output.out(Help.topLevel(commands))
        }
        return 0
    }
    if global.isEmpty, name == "--version" {
        Output.line(Documentation.version)
        return 0
    }
    guard let spec = commands.first(where: { $0.name == name }) else {
        var message = "unknown command \(nameWord.quoted)"
        if let suggestion = closest(name, among: commands.map(\.name)) { message += "; did you mean \(suggestion)?" }
        Output.error("yashima: \(message) (yashima --help lists them)")
        return 2
    }
    do {
        let arguments = try ParsedArguments(
            global + rest.dropFirst(), options: spec.options, commandName: "yashima \(spec.name)",
            takesCommand: spec.takesCommand)
        if arguments.flag("help") {
            Output.out(spec.help)
            return 0
        }
        if !spec.takesPositional, let extra = arguments.positional.first {
            throw UsageError(
                "unexpected argument \(extra.quoted) for yashima \(spec.name) (see yashima \(spec.name) --help)")
        }
        return try await spec.run(arguments)
    } catch let error as UsageError {
        Output.error("yashima: \(error.description)")
        return 2
    } catch let problem as CacheProblem {
        Output.error("yashima: \(problem.message)")
        return 2
    } catch let failure as CommandFailure {
        if !failure.message.isEmpty { Output.error("yashima: \(failure.message)") }
        return failure.status
    } catch {
        Output.error("yashima: \(error)")
        return 1
    }
}

/// The options before the subcommand's name, and the words from that name on. An option takes the next
/// word as its value when some subcommand declares it with a value.
func splitGlobalOptions(_ words: [Word]) -> (global: [Word], rest: [Word]) {
    // Looked up only when an option comes first (`yashima run ...`, the usual case, needs none).
    func valued(_ name: String) -> Bool {
        commands.contains { $0.options.contains { $0.value != nil && $0.name == name } }
    }
    var index = 0
    while index < words.count, words[index].hasPrefix("--"), words[index].bytes.count > 2,
        !["--help", "--version"].contains(words[index].text ?? "")
    {
        let name = String(decoding: words[index].bytes.dropFirst(2).prefix { $0 != UInt8(ascii: "=") }, as: UTF8.self)
        let inline = words[index].bytes.contains(UInt8(ascii: "="))
        index += !inline && valued(name) ? 2 : 1
    }
    index = min(index, words.count)
    return (Array(words[..<index]), Array(words[index...]))
}

/// The exit status, handed from the task that runs the command to the main thread.
final class ExitStatus: Sendable {
    let value = Mutex<Int32>(1)
}

/// Runs the command line: `main` starts on the calling (main) thread and goes on on the cooperative pool
/// from its first suspension, while the main thread waits; then exits with its status. The `yashima`
/// executable (Sources/yashima/Main) calls only this.
public func runAndExit() -> Never {
    let words = Word.arguments
    let name = splitGlobalOptions(words).rest.first?.text
    let signals = commands.first { $0.name == name }?.signals ?? .defaultActions
    if signals != .defaultActions { SignalControl.blockSignals() }
    let status = ExitStatus()
    let done = DispatchSemaphore(value: 0)
    Task.immediate {
        let result = await main(words)
        status.value.withLock { $0 = result }
        done.signal()
    }
    done.wait()
    if signals == .takenBySignalControl { SignalControl.shared.exitIfSignalled() }
    exit(status.value.withLock { $0 })
}
