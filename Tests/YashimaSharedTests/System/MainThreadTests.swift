// `Syscall.isMainThread`, the cached answer a flight's start asks on every miss (Engine/PoolTask.swift),
// against Foundation's `Thread.isMainThread`, which asks the kernel twice each time, and in a forked child,
// whose only thread is its main one although that thread's cached answer was "no" in the parent.

import Foundation
import Glibc
import Testing

@testable import YashimaShared

@Suite("System: the main-thread check")
struct MainThreadTests {
    @Test("Foundation's answer on the main actor, a pool thread and a thread of its own, asked twice on each")
    func agreesWithFoundation() async throws {
        // Under this runner the main actor need not run on the process's first thread (here it does not:
        // Foundation says false there too), so the check is agreement, not a fixed answer.
        let onMain = await MainActor.run { [Syscall.isMainThread, Syscall.isMainThread, Thread.isMainThread] }
        #expect(onMain[0] == onMain[2] && onMain[1] == onMain[2])
        let onPool = await Task.detached { [Syscall.isMainThread, Syscall.isMainThread, Thread.isMainThread] }.value
        #expect(onPool == [false, false, false])
        let onThread = await withCheckedContinuation { continuation in
            Thread {
                continuation.resume(returning: [Syscall.isMainThread, Syscall.isMainThread, Thread.isMainThread])
            }
            .start()
        }
        #expect(onThread == [false, false, false])
    }

    @Test("a thread that forks is its child's main thread: the answer is read again under the child's pid")
    func forkedChildsThreadIsMain() async throws {
        // The one place a test can stand on a main thread. The thread asks first (caching "not main" under
        // the parent's pid), forks, and the child, which runs nothing but the question and _exit (no lock a
        // thread of the parent may have held), answers with its exit status.
        let status = await withCheckedContinuation { continuation in
            Thread {
                let before = Syscall.isMainThread
                let child = fork()
                if child == 0 { _exit(Syscall.isMainThread ? 0 : 1) }
                var status: Int32 = -1
                while child > 0, waitpid(child, &status, 0) < 0, errno == EINTR {}
                continuation.resume(returning: (before, child > 0, status))
            }
            .start()
        }
        #expect(status.0 == false)
        #expect(status.1, "fork failed")
        #expect(status.2 == 0, "the forked child's only thread was told it is not the main one (status \(status.2))")
    }
}
