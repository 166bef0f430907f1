// Where entry versions come from: a hybrid logical clock, so versions grow on every write
// and across restarts without scanning anything at start.

import Foundation
import HalcyonSupport

/// Hands out entry versions (spec §3, "Version"): each `next()` is
/// `max(last + 1, wall-clock microseconds)`.
///
/// Why this shape: a plain counter would have to be recovered at start (the largest
/// version on disk or in the journal) before the first write; wall-clock microseconds
/// alone repeat when two writes share a microsecond or the clock steps back. Taking the
/// larger of both gives strictly increasing versions within a process, and across a
/// restart as long as the wall clock has not stepped back further than the time the
/// restart took. Recovery that does see versions (a journal replay) calls `observe` so
/// that even a clock stepped back far cannot repeat one.
///
/// ```swift
/// let versions = VersionClock()
/// let v1 = versions.next(), v2 = versions.next()   // v2 > v1
/// ```
///
/// Threading: thread-safe; `last` is guarded by its `Locked` (the only mutable state).
/// One owner per cache (the write path) keeps versions unique per key.
public final class VersionClock: Sendable {
    private let last: Locked<UInt64>
    private let clock: any CacheClock

    /// - Parameters:
    ///   - clock: the wall clock the versions follow (default `SystemClock()`).
    ///   - start: versions handed out are all greater than this (default 0).
    public init(clock: any CacheClock = SystemClock(), start: UInt64 = 0) {
        self.clock = clock
        last = Locked(start)
    }

    /// A version greater than every one handed out or observed before.
    public func next() -> UInt64 {
        let micros = wallMicros()
        return last.withLock { last in
            last = max(last &+ 1, micros)
            return last
        }
    }

    /// The wall clock in microseconds since 1970 (0 before it).
    private func wallMicros() -> UInt64 {
        let seconds = clock.now().timeIntervalSince1970
        return seconds > 0 ? UInt64(min(seconds * 1e6, 1.8e19)) : 0
    }

    /// `count` consecutive versions, greater than every one handed out or observed
    /// before, for one reading of the clock and one hold of the lock: a group commit stamps
    /// its writes from them (`Run`). Those a run does not use are never handed out.
    public func reserve(_ count: Int) -> Run {
        precondition(count >= 0)
        guard count > 0 else { return Run(next: 0, end: 0) }
        let micros = wallMicros()
        return last.withLock { last in
            let first = max(last &+ 1, micros)
            last = first &+ UInt64(count - 1)
            return Run(next: first, end: first &+ UInt64(count))
        }
    }

    /// Versions reserved together (`reserve`), handed out in order. A plain value of the
    /// one group that reserved them.
    public struct Run: Sendable {
        private var next: UInt64
        private let end: UInt64

        fileprivate init(next: UInt64, end: UInt64) {
            self.next = next
            self.end = end
        }

        /// The next reserved version.
        public mutating func take() -> UInt64 {
            precondition(next < end, "more versions taken than reserved")
            defer { next &+= 1 }
            return next
        }
    }

    /// Makes every later `next()` exceed `version` (one found in recovery).
    public func observe(_ version: UInt64) {
        last.withLock { $0 = max($0, version) }
    }

    /// The last version handed out or observed.
    public var current: UInt64 { last.withLock { $0 } }
}
