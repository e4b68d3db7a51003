// Starting a flight's production on the thread of the caller that starts it (issue 25), without giving up
// what a task of its own gives it: its own cancellation, the caller's task-locals and priority.

extension Task where Success == Void, Failure == Never {
    /// A new task (the caller's task-locals and priority, a cancellation of its own, as `Task.init`)
    /// that starts at once on this thread, and runs there until its first suspension (`Task.immediate`),
    /// when the caller is a task off the main thread; its callers here are tasks on the cooperative pool
    /// (`resolveOnPool` and the flight's steps it takes). A flight's production starts so: the thread that took the key's lock
    /// goes on with the generator and the publish, and a production that does not suspend has completed
    /// its flight before its first caller waits for it, which then does not suspend either. Queued for
    /// the pool instead, it cost two thread wake-ups per miss: a pool thread for the production, then the
    /// caller's for the result (issue 25). Called outside any task (a thread of the library's own, which
    /// must not run a generator) or on the main thread (the main actor's, where a generator must not run
    /// either), it is queued as `Task.init` does.
    static func startingOnThisPoolThread(_ operation: sending @escaping @isolated(any) () async -> Void) -> Task {
        guard withUnsafeCurrentTask(body: { $0 != nil }), !Syscall.isMainThread else {
            return Task(operation: operation)
        }
        return Task.immediate(operation: operation)
    }
}
