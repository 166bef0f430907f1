// The process's one reading of the monotonic clock, for spans and deadlines that must not
// jump with the wall clock (journal fsync lag, back-pressure waits, the materializer's
// pacing, request latencies in the daemon's metrics).

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

public enum MonotonicClock {
    /// Nanoseconds on `CLOCK_MONOTONIC` (a vDSO call: no system call, no allocation).
    ///
    /// Threading: any thread. `@inlinable`: request latencies read it on every request.
    @inlinable @inline(__always)
    public static func nanoseconds() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
    }
}
