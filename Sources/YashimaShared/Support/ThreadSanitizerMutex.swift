// Only in ThreadSanitizer builds compiled with `-Xswiftc -DYASHIMA_TSAN`: a `Mutex` that shadows
// `Synchronization.Mutex` inside this module, built on pthread_mutex, which TSan intercepts.
// Why: on Linux, Synchronization.Mutex hands a contended lock over in the kernel (FUTEX_LOCK_PI /
// FUTEX_UNLOCK_PI in its precompiled, uninstrumented slow path), so TSan sees no release/acquire edge
// and reports every contended critical section as a "Swift access race" (reproduced with a 12-line
// program of four threads and one Mutex<[Int: Int]>). Normal builds never compile this file's body.

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
