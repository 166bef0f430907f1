// The upstream tier's seam: what the hybrid cache may ask of a store shared by several
// hosts (Redis, Valkey), in terms of entries, versions and lifetimes only. The storage
// engine sees this protocol and nothing of the store behind it; the Redis adapter lives
// in HalcyonUpstreamTier, and the tests bring an in-memory one of their own.

import Foundation
import HalcyonSupport

/// The vocabulary of the upstream tier.
public enum Upstream {
    /// How long a written entry lives upstream.
    public enum Lifetime: Sendable, Equatable {
        /// No expiry.
        case never
        /// This many milliseconds from the write (at least 1).
        case milliseconds(Int64)
        /// Keep the key's current lifetime (`KEEPTTL`); a new key gets none.
        case keep
        /// This many milliseconds from the write (at least 1), counted again from a
        /// read that slides it (`Tier.slide`): a sliding expiration, kept beside the value
        /// so that every host's reads can slide it.
        case sliding(Int64)

        /// The milliseconds of `.milliseconds` and `.sliding`.
        public var milliseconds: Int64? {
            switch self {
            case .milliseconds(let ms), .sliding(let ms): return ms
            case .never, .keep: return nil
            }
        }

        /// The span reads count again: `.sliding`'s milliseconds, else nil.
        public var slidingMilliseconds: Int64? {
            if case .sliding(let ms) = self { return ms }
            return nil
        }
    }

    /// An entry read from upstream.
    public struct Entry: Sendable, Equatable {
        /// The value's bytes and flags; `version` is the one all hosts agree on.
        public var entry: CacheEntry
        /// Milliseconds left to live when it was read (the key's PTTL); nil = never.
        public var timeToLive: Int64?
        /// The event sequence number current when the read's reply arrived: a later
        /// invalidation of this key (a greater `Event.sequence`) means the copy is stale.
        public var sequence: UInt64
        /// The milliseconds a read slides the lifetime to, when it was written with a
        /// sliding expiration (`Lifetime.sliding`); nil otherwise.
        public var slidingTimeToLive: Int64?

        public init(entry: CacheEntry, timeToLive: Int64?, sequence: UInt64, slidingTimeToLive: Int64? = nil) {
            self.entry = entry
            self.timeToLive = timeToLive
            self.sequence = sequence
            self.slidingTimeToLive = slidingTimeToLive
        }
    }

    /// The outcome of `Tier.slide` and `Tier.renew`.
    public enum Renewal: Sendable, Equatable {
        /// The key holds another value (or none) now, or, for a slide, a lifetime another
        /// client set: nothing changed.
        case changed
        /// The key lives `timeToLive` milliseconds from now (nil: no end).
        case renewed(timeToLive: Int64?)
    }

    /// The outcome of a write that stored (or, for the conditional ones, may not have).
    public struct Written: Sendable, Equatable {
        /// Whether the write stored its value (always true for `set`).
        public var stored: Bool
        /// Stored: the new version. Not stored: the live entry's version (nil when none).
        public var version: UInt64?
        /// Milliseconds left on the key now under it; nil = never or no key.
        public var timeToLive: Int64?
        /// As for `Entry.sequence`: the value written may be kept locally as a copy read at this point.
        public var sequence: UInt64

        public init(stored: Bool, version: UInt64?, timeToLive: Int64?, sequence: UInt64) {
            self.stored = stored
            self.version = version
            self.timeToLive = timeToLive
            self.sequence = sequence
        }
    }

    /// The outcome of `increment`.
    public enum Incremented: Sendable, Equatable {
        /// The sum was stored with this version.
        case value(Int64, Written)
        /// The live value is not a decimal integer text.
        case notAnInteger
        /// The sum does not fit a signed 64-bit integer; nothing stored.
        case overflow
        /// No live key and no `initial` value to start from; nothing stored.
        case missing
    }

    /// The outcome of `acquireLease`.
    public enum LeaseAttempt: Sendable, Equatable {
        /// The lease is this caller's until released or until its lifetime runs out.
        case acquired
        /// Another holder has it for about this many more milliseconds. The lease key is
        /// watched from now on: its release or expiry arrives as an invalidation of
        /// `leaseKey` (numbered after `sequence`), the wake-up signal for waiters.
        case held(timeToLive: Int64?, leaseKey: CacheKey, sequence: UInt64)
    }

    /// One write of `writeMany`.
    public enum Write: Sendable, Equatable {
        /// `set`: stores `entry` (bytes and flags; its version is assigned).
        case set(CacheKey, CacheEntry, Lifetime)
        /// `remove`: its `Written.stored` says whether the key existed.
        case remove(CacheKey)

        public var key: CacheKey {
            switch self {
            case .set(let key, _, _), .remove(let key): return key
            }
        }
    }

    /// One page of `Tier.listKeys`.
    public struct KeyPage: Sendable, Equatable {
        /// Keys starting with the prefix (Halcyon's own metadata and lease keys left out);
        /// fewer than the limit, even none, does not mean the end.
        public var keys: [CacheKey]
        /// Pass back for the next page; nil at the end. Opaque: the tier's own form.
        public var cursor: String?

        public init(keys: [CacheKey], cursor: String?) {
            self.keys = keys
            self.cursor = cursor
        }
    }

    /// Why an upstream call failed.
    public enum Failure: Error, Sendable, Equatable {
        /// The store could not be reached (`-32006 upstreamUnavailable`): the call may not
        /// have taken effect, and nothing may be stored locally in its place.
        case unavailable(String)
        /// The store could not be reached because it refused this host's credentials
        /// (`-32006 upstreamAuthenticationFailed`); otherwise as `unavailable`.
        case unauthorized(String)
        /// The store refused the command.
        case refused(String)
    }

    /// What an observer hears, in sequence order.
    public enum Event: Sendable, Equatable {
        /// These keys changed through another host or client, expired or were evicted.
        case invalidated(keys: [CacheKey], sequence: UInt64)
        /// Every shared copy must go: the tier lost a connection (so it may have missed
        /// invalidations) or the store was flushed.
        case flushed(sequence: UInt64)

        public var sequence: UInt64 {
            switch self {
            case .invalidated(_, let sequence), .flushed(let sequence): return sequence
            }
        }
    }

    /// Receives the tier's events.
    ///
    /// Threading: `upstream(_:)` is called from the tier's own thread, one event at a
    /// time, in sequence order; it must not block or call back into the tier synchronously.
    public protocol Observer: AnyObject, Sendable {
        func upstream(_ event: Event)
    }

    /// A store shared by several hosts, as the hybrid cache consults it.
    ///
    /// Every call completes exactly once, on any thread (possibly before it returns).
    /// Writes take effect in the store before their completion. A key's `version` is
    /// agreed by every host: it changes on every write through any tier, and a key written
    /// by a client that knows nothing of versions gets one on its next read.
    ///
    /// **Keeping a copy.** A copy of an entry (from `get` or a write) may be kept locally
    /// only until an event with a greater sequence names its key, or any `.flushed` with
    /// a greater sequence arrives. A consumer that receives such an event before it stores
    /// the copy must not store it. Changes made through the tier itself are not announced
    /// back to it (their completions say what happened, numbered in the same sequence):
    /// a completion with a greater sequence supersedes an older copy, and a local `remove`,
    /// `touch` or lease release must be applied (and local lease waiters woken) from its
    /// completion.
    ///
    /// Threading: implementations are thread-safe.
    public protocol Tier: AnyObject, Sendable {
        /// Adds `observer`; events start at the next one.
        func observe(_ observer: any Observer)
        /// The entry under `key`, nil when there is none.
        func get(_ key: CacheKey, completion: @escaping @Sendable (Result<Entry?, Failure>) -> Void)
        /// Stores `entry` (bytes and flags; its version is assigned).
        func set(_ key: CacheKey, _ entry: CacheEntry, lifetime: Lifetime,
                 completion: @escaping @Sendable (Result<Written, Failure>) -> Void)
        /// Stores `entry` only when `key` holds nothing.
        func add(_ key: CacheKey, _ entry: CacheEntry, lifetime: Lifetime,
                 completion: @escaping @Sendable (Result<Written, Failure>) -> Void)
        /// Stores `entry` only when `key`'s version is `version`.
        func compareAndSet(_ key: CacheKey, _ entry: CacheEntry, version: UInt64, lifetime: Lifetime,
                           completion: @escaping @Sendable (Result<Written, Failure>) -> Void)
        /// Adds `delta` to the decimal integer under `key` (`initial` when none; with
        /// `initial` nil a missing key is `.missing`, decided in the same atomic step as the
        /// increment), storing the sum with `flags`; `lifetime` applies to a new key, and to
        /// an existing one unless it is `.keep`.
        func increment(_ key: CacheKey, by delta: Int64, initial: Int64?, flags: UInt32, lifetime: Lifetime,
                       completion: @escaping @Sendable (Result<Incremented, Failure>) -> Void)
        /// Gives `key` a new lifetime; false when there is no such key.
        func touch(_ key: CacheKey, lifetime: Lifetime, completion: @escaping @Sendable (Result<Bool, Failure>) -> Void)
        /// Removes `key`; false when there was none.
        func remove(_ key: CacheKey, completion: @escaping @Sendable (Result<Bool, Failure>) -> Void)
        /// Gives `key` its sliding lifetime again, `lifetime` milliseconds from now, if it
        /// still holds the value of `version` written with that sliding lifetime (and no
        /// other client has set its lifetime since).
        func slide(_ key: CacheKey, version: UInt64, lifetime: Int64, completion: @escaping @Sendable (Result<Renewal, Failure>) -> Void)
        /// Gives `key` the lifetime a read asked for (`ExpirationExtending.expirationTime`),
        /// from now, if it still holds the value of `version`; `lifetime`'s sliding span
        /// (none for `.milliseconds` and `.never`) becomes the one later reads renew.
        func renew(_ key: CacheKey, version: UInt64, lifetime: Lifetime, completion: @escaping @Sendable (Result<Renewal, Failure>) -> Void)
        /// Several `set`s and `remove`s as one step: sent together, completing once every
        /// one has taken effect (or failed), with one outcome per write, in order. Writes
        /// of one key take effect in their order.
        func writeMany(_ writes: [Write], completion: @escaping @Sendable ([Result<Written, Failure>]) -> Void)
        /// Removes every key that starts with `prefix` and that `include` accepts (it is
        /// asked of each such key, on any thread); how many.
        func removePrefix(
            _ prefix: CacheKey, where include: @escaping @Sendable (CacheKey) -> Bool,
            completion: @escaping @Sendable (Result<Int, Failure>) -> Void)
        /// A page of at most `limit` keys starting with `prefix` (every node of a cluster),
        /// from `cursor` (nil: the start). A key present for the whole listing appears
        /// once; keys written meanwhile may or may not.
        func listKeys(prefix: CacheKey, cursor: String?, limit: Int, completion: @escaping @Sendable (Result<KeyPage, Failure>) -> Void)
        /// Whether `key`'s lease is held by anyone, on any host: nil when not, else the
        /// milliseconds it has left (nil inside: no end).
        func leaseStatus(_ key: CacheKey, completion: @escaping @Sendable (Result<Int64??, Failure>) -> Void)
        /// Takes the lease on `key` with `token` for `lifetime` milliseconds (`SET NX PX`).
        func acquireLease(_ key: CacheKey, token: String, lifetime: Int64,
                          completion: @escaping @Sendable (Result<LeaseAttempt, Failure>) -> Void)
        /// Ends the lease on `key` if `token` still holds it (compare-and-delete); whether it did.
        func releaseLease(_ key: CacheKey, token: String, completion: @escaping @Sendable (Result<Bool, Failure>) -> Void)
    }
}

extension Upstream.Tier {
    /// Removes every key that starts with `prefix`; how many.
    public func removePrefix(_ prefix: CacheKey, completion: @escaping @Sendable (Result<Int, Upstream.Failure>) -> Void) {
        removePrefix(prefix, where: { _ in true }, completion: completion)
    }

    /// `writeMany` as one call per write, started in order, gathered (for tiers with
    /// nothing better, such as an in-process store whose calls complete before they return).
    public func writeMany(_ writes: [Upstream.Write], completion: @escaping @Sendable ([Result<Upstream.Written, Upstream.Failure>]) -> Void) {
        guard !writes.isEmpty else { return completion([]) }
        let gathered = Locked((results: [Result<Upstream.Written, Upstream.Failure>?](repeating: nil, count: writes.count), left: writes.count))
        for (index, write) in writes.enumerated() {
            let done: @Sendable (Result<Upstream.Written, Upstream.Failure>) -> Void = { result in
                let all = gathered.withLock { g -> [Result<Upstream.Written, Upstream.Failure>]? in
                    g.results[index] = result
                    g.left -= 1
                    return g.left == 0 ? g.results.map { $0! } : nil
                }
                if let all { completion(all) }
            }
            switch write {
            case .set(let key, let entry, let lifetime):
                set(key, entry, lifetime: lifetime, completion: done)
            case .remove(let key):
                remove(key) { result in done(result.map { Upstream.Written(stored: $0, version: nil, timeToLive: nil, sequence: 0) }) }
            }
        }
    }
}
