// The shared vocabulary of both tiers: how long an entry lives, how a read extends it,
// which tier answered, the clock every expiration is read from, and what an
// entry holds besides its bytes.

import Foundation
import HalcyonSupport

/// How long an entry stays valid after it is stored (or touched).
///
/// Expiration instants that reach the disk are rounded **up** to whole seconds, so an
/// entry never expires earlier than asked; see `estimatedExpirationSince(_:)`.
public enum StorageExpiration: Sendable, Equatable, Hashable {
    /// Never expires.
    case never
    /// Expires this many seconds (fractions allowed) after the reference date.
    case seconds(TimeInterval)
    /// Expires this many whole days after the reference date.
    case days(Int)
    /// Expires at this instant, whatever the reference date.
    case date(Date)
    /// Already expired: storing with it stores nothing; touching with it removes.
    case expired

    /// The instant this expiration ends when counted from `date`; `Date.distantFuture`
    /// for `.never`, `Date.distantPast` for `.expired`.
    public func estimatedExpirationSince(_ date: Date) -> Date {
        switch self {
        case .never: return .distantFuture
        case .seconds(let seconds): return date.addingTimeInterval(seconds)
        case .days(let days): return date.addingTimeInterval(TimeInterval(days) * 86_400)
        case .date(let instant): return instant
        case .expired: return .distantPast
        }
    }

    /// True for `.expired`, and for the forms whose span is not positive, which can
    /// only ever produce an instant in the past.
    public var isExpired: Bool {
        switch self {
        case .expired: return true
        case .seconds(let seconds): return !(seconds > 0)
        case .days(let days): return days <= 0
        case .never, .date: return false
        }
    }

    /// True for `.date`: the lifetime ends at that instant, and no read or default
    /// touch moves it (sliding expiration has no span to count again).
    public var isAbsolute: Bool {
        if case .date = self { return true }
        return false
    }

    /// The span a sliding read counts again from its own instant: nil when reads do not
    /// move this lifetime, for `.never` and for an absolute `.date`. What the tiers keep
    /// as an entry's `timeToLive`: nil there means "a slide leaves the lifetime as it is".
    public func slidingTimeToLive(from now: Date) -> TimeInterval? {
        isAbsolute ? nil : timeToLive(from: now)
    }

    /// The time-to-live this expiration describes when counted from `now`; nil for
    /// `.never`.
    public func timeToLive(from now: Date) -> TimeInterval? {
        switch self {
        case .never: return nil
        default: return estimatedExpirationSince(now).timeIntervalSince(now)
        }
    }
}

/// What a successful read does to the entry's expiration.
public enum ExpirationExtending: Sendable, Equatable, Hashable {
    /// Leave the expiration alone.
    case none
    /// Sliding expiration: keep the entry's original time-to-live, counted again from now.
    case cacheTime
    /// Reset the expiration to this one, counted from now.
    case expirationTime(StorageExpiration)
}

/// The tier that answered a lookup.
public enum CacheType: String, Sendable, Equatable, CaseIterable {
    /// Neither tier has the key.
    case none
    /// The memory tier answered.
    case memory
    /// The disk tier answered.
    case disk
    /// The upstream (a store shared by several hosts) answered: this read brought the
    /// value to this host.
    case upstream
}

/// A stored value: its bytes, a small opaque `flags` word that the cache keeps with
/// them in both tiers and across restarts (like memcached's client flags), and its version. The daemon
/// keeps there the wire encoding the value was written with.
public struct CacheEntry: Sendable, Equatable {
    /// The value's bytes, exactly as stored.
    public var bytes: [UInt8]
    /// Opaque to the cache; returned unchanged with the bytes.
    public var flags: UInt32
    /// Changes on every write of the key and survives restarts (spec §3, "Version");
    /// assigned by the write path from a `VersionClock`. 0 means "not assigned" (an
    /// entry built by hand, or a file of format 1, which kept none).
    public var version: UInt64

    public init(bytes: [UInt8], flags: UInt32 = 0, version: UInt64 = 0) {
        self.bytes = bytes
        self.flags = flags
        self.version = version
    }
}

/// A stored entry lent where it lies: its bytes, flags and version, valid only inside the
/// call that lends it (`HybridCache.memoryLookup(forKey:options:taking:)`).
///
/// Why not a borrowed `CacheEntry`: a value passed on from memory the compiler cannot prove
/// unchanged for the call (the memory tier's node array, reached through a pointer) is
/// copied first, and copying an entry retains its bytes' buffer, a line the other event
/// loop's reads of the same key then lose from their cache. The memory tier keeps each
/// value's address beside it, so lending one writes nothing
/// (Benchmarks/RESULTS.md, "Lending a memory hit without a counted reference").
public struct LentEntry {
    /// The value's bytes; the memory they point into is only valid during the call.
    public let bytes: UnsafeRawBufferPointer
    public let flags: UInt32
    public let version: UInt64

    public init(bytes: UnsafeRawBufferPointer, flags: UInt32, version: UInt64) {
        self.bytes = bytes
        self.flags = flags
        self.version = version
    }
}

extension CacheEntry {
    /// Calls `body` with this entry lent (`LentEntry`).
    @inline(__always)
    public func withLent<R>(_ body: (LentEntry) throws -> R) rethrows -> R {
        try bytes.withUnsafeBytes { try body(LentEntry(bytes: $0, flags: flags, version: version)) }
    }
}

/// The source of "now" for every expiration decision, injected through the tiers'
/// configs so tests can move time without sleeping.
///
/// Threading: implementations must be safe to call from any thread.
public protocol CacheClock: Sendable {
    /// The current instant.
    func now() -> Date
}

/// The wall clock.
public struct SystemClock: CacheClock {
    public init() {}
    public func now() -> Date { Date() }
}

/// A clock that moves only when told to; for tests.
///
/// Threading: thread-safe; `current` is a `Locked`.
public final class ManualClock: CacheClock, Sendable {
    private let current: Locked<Date>

    public init(_ start: Date = Date(timeIntervalSince1970: 1_700_000_000)) {
        current = Locked(start)
    }

    public func now() -> Date {
        current.withLock { $0 }
    }

    /// Moves the clock forward (or back, with a negative interval).
    public func advance(by interval: TimeInterval) {
        current.withLock { $0 = $0.addingTimeInterval(interval) }
    }

    /// Sets the clock to `date`.
    public func set(_ date: Date) {
        current.withLock { $0 = date }
    }
}
