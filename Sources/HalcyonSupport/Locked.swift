// A value guarded by a pthread mutex: the one lock of every layer (the storage engine's
// shards, books and counters, the transport's tables, the upstream client, the tests).
// Not `Synchronization.Mutex`: on Linux that lock is a futex driven from the
// (uninstrumented) standard library, so ThreadSanitizer cannot see its happens-before
// edges and reports every access it guards as a race. pthread_mutex is intercepted by
// ThreadSanitizer and costs the same uncontended.
//
// On glibc the mutex is adaptive (`PTHREAD_MUTEX_ADAPTIVE_NP`): a thread that finds it
// held spins a bounded number of turns before it sleeps on the futex. The locks are held
// for O(1) work, so the holder on the other core is usually done within the spin; sleeping
// instead costs a futex wait, a futex wake from the holder and a context switch on each
// side (Benchmarks/RESULTS.md, "Immortal shared objects and adaptive locks").

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value that is only ever read or written inside `withLock`.
///
/// Threading: thread-safe. `@unchecked Sendable`: `value` is touched only between
/// `pthread_mutex_lock` and `pthread_mutex_unlock` on `mutex`; `withLock` must not be
/// re-entered on the same instance from inside its body (the mutex is not recursive), and
/// no body may call out to code that could (callbacks run after `withLock` returns).
///
/// `withLock` is `@inlinable`: every layer takes its locks on its hot paths (a memory
/// shard per lookup, the write book, counters), and a generic call across the module
/// boundary would be neither specialized nor inlined.
public final class Locked<Value>: @unchecked Sendable {
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    @usableFromInline var value: Value

    public init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        #if canImport(Glibc)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
        #endif
        pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the value.
    @inlinable @inline(__always)
    public func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
