// Only with `-DYASHIMA_TSAN`: a pthread-based `Mutex` shadowing Synchronization.Mutex in this module, which
// hands contended locks over in the kernel where TSan cannot see it (false races). Docs/Internals.md.

#if YASHIMA_TSAN
    import Glibc

    /// A pthread-based stand-in for `Synchronization.Mutex`, with the subset of its API the module uses.
    ///
    /// Safe to share across threads (`@unchecked Sendable`): `value` is read and written only inside
    /// `withLock`, between `pthread_mutex_lock` and `pthread_mutex_unlock` on `lock`, whose memory is
    /// heap-allocated once (a stable address) and destroyed only in `deinit`, when no thread can hold it.
    final class Mutex<Value>: @unchecked Sendable {
        private let lock: UnsafeMutablePointer<pthread_mutex_t>
        private var value: Value

        init(_ initialValue: Value) {
            lock = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
            lock.initialize(to: pthread_mutex_t())
            pthread_mutex_init(lock, nil)
            value = initialValue
        }

        deinit {
            pthread_mutex_destroy(lock)
            lock.deinitialize(count: 1)
            lock.deallocate()
        }

        func withLock<Result, E: Error>(_ body: (inout Value) throws(E) -> Result) throws(E) -> Result {
            pthread_mutex_lock(lock)
            defer { pthread_mutex_unlock(lock) }
            return try body(&value)
        }
    }
#endif
