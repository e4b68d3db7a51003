// Signals and `yashima run`: SIGINT or SIGTERM while waiting for another process's run stops waiting at
// once (128 + the signal) and leaves the other run alone; while the command runs, the signal is
// forwarded to it, its output passes through, nothing is stored, and the next caller runs it again.
// Events are ordered by what the outside world shows (a marker file the command creates, the waiter's
// inotify watch on the lock's folder in /proc), never by sleeps.

import Foundation
import Glibc
import Testing

@Suite(.serialized) struct CLISignalTests {
    /// A command that appends to the ledger, creates the marker, then waits for a line from the gate (a
    /// FIFO the test writes to) before printing and exiting. Its standard input is /dev/null (a pipe
    /// there would make the run uncached).
    static let command =
        #"echo run >> "$LEDGER"; echo started; touch "$MARKER"; read line < "$GATE"; echo "finished $line""#

    private func start(_ fixture: CLIFixture) throws -> ChildProcess {
        if access(fixture.path("gate"), F_OK) != 0 { mkfifo(fixture.path("gate"), 0o600) }
        return try ChildProcess(
            executable: yashimaExecutable, ["run"] + fixture.dir + ["--", "sh", "-c", CLISignalTests.command],
            environment: [
                "LEDGER": fixture.path("ledger"), "MARKER": fixture.path("marker"), "GATE": fixture.path("gate"),
            ],
            capturingStandardError: true, standardInputFromNullDevice: true)
    }

    /// Writes `line` to the gate the running command waits on (opening it waits for that reader).
    private func open(_ fixture: CLIFixture, with line: String) async {
        let path = fixture.path("gate")
        await offPool {
            let fd = Glibc.open(path, O_WRONLY | O_CLOEXEC)
            guard fd >= 0 else { return }
            _ = (line + "\n").withCString { Glibc.write(fd, $0, strlen($0)) }
            close(fd)
        }
    }

    /// `start`, returned once its command started (the marker exists).
    private func started(_ fixture: CLIFixture) async throws -> ChildProcess {
        let runner = try start(fixture)
        #expect(await eventually { access(fixture.path("marker"), F_OK) == 0 }, "the command never started")
        return runner
    }

    @Test(arguments: [SIGINT, SIGTERM])
    func signalWhileWaitingStopsAtOnce(_ signal: Int32) async throws {
        let fixture = try CLIFixture()
        let runner = try await started(fixture)
        let waiter = try start(fixture)
        let waiterPID = waiter.pid
        #expect(
            await eventually(within: 30) { await offPool { isWaitingForLock(waiterPID) } },
            "the second run never waited")
        waiter.kill(signal)
        #expect(await waiter.exitStatus(timeout: 20) == 128 + signal)
        // The run it waited for is untouched: it finishes and stores its result.
        await open(fixture, with: "ok")
        #expect(await runner.output() == Data("started\nfinished ok\n".utf8))
        #expect(await runner.exitStatus() == 0)
        #expect(fixture.lines("ledger").count == 1)
        // A new caller reads the stored result and runs nothing.
        let hit = try await yashima(["run"] + fixture.dir + ["--", "sh", "-c", CLISignalTests.command])
        #expect(hit.status == 0)
        #expect(hit.text == "started\nfinished ok\n")
        #expect(fixture.lines("ledger").count == 1)
    }

    /// Reading an `--input` happens before the lookup and may block (here a FIFO nobody writes): a signal
    /// ends it at once, as any wait of `run` (a hit starts its signal thread only when it may block).
    @Test(arguments: [SIGINT, SIGTERM])
    func signalWhileReadingAnInputStopsAtOnce(_ signal: Int32) async throws {
        let fixture = try CLIFixture()
        let fifo = fixture.path("fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        let reader = try ChildProcess(
            executable: yashimaExecutable, ["run", "--input", fifo] + fixture.dir + ["--", "true"],
            capturingStandardError: true, standardInputFromNullDevice: true)
        let pid = reader.pid
        // Blocked opening the FIFO: sleeping in openat(2) (257 on x86_64, 56 on arm64).
        #expect(
            await eventually {
                let syscall = (try? String(contentsOfFile: "/proc/\(pid)/syscall", encoding: .utf8)) ?? ""
                return syscall.hasPrefix("257 ") || syscall.hasPrefix("56 ")
            }, "the run never opened its input")
        reader.kill(signal)
        let status = await reader.exitStatus(timeout: 20)
        if status == nil { reader.kill() }
        #expect(status == 128 + signal)
    }

    @Test(arguments: [SIGINT, SIGTERM])
    func signalWhileRunningIsForwardedAndNothingStored(_ signal: Int32) async throws {
        let fixture = try CLIFixture()
        let runner = try await started(fixture)
        runner.kill(signal)
        // The shell died of the forwarded signal; what it printed passes through.
        #expect(await runner.output(timeout: 20) == Data("started\n".utf8))
        #expect(await runner.exitStatus(timeout: 20) == 128 + signal)
        // Nothing was stored: the next caller runs the command again, and that run is stored.
        unlink(fixture.path("marker"))
        let again = try await started(fixture)
        await open(fixture, with: "second")
        #expect(await again.output() == Data("started\nfinished second\n".utf8))
        #expect(await again.exitStatus() == 0)
        #expect(fixture.lines("ledger").count == 2)
        let listing = try await yashima(["ls", "--json"] + fixture.dir).json["entries"] as? [[String: Any]]
        #expect(listing?.count == 1)
    }
}
