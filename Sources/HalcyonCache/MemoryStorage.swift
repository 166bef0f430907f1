// The memory tier: an LRU of byte values with a total-cost limit, a count limit, a
// per-entry expiration that a read can slide forward, and a periodic sweep of expired
// entries. Split into lock-guarded shards so readers on different threads rarely meet
// (see `Config.shardCount` and Docs/ARCHITECTURE-hybrid.md for the measurement).

import Foundation
import Synchronization

/// The memory tier's namespace: `Config`, `Backend`, `Meta` and `Stats`.
public enum MemoryStorage {
    /// What a memory entry looks like without its bytes (for `cache.describe`).
    public struct Meta: Sendable, Equatable {
        /// Cost of the entry: its byte count.
        public var size: Int
        /// The entry's opaque flags.
        public var flags: UInt32
        /// When the entry expires; `Date.distantFuture` for never.
        public var expiration: Date
        /// The last store, read or touch.
        public var lastAccess: Date
    }

    /// A snapshot of the tier's counters and occupancy.
    public struct Stats: Sendable, Equatable {
        /// Reads (`value`, `valueAndMeta`) that found a live entry.
        public var hits: Int
        /// Reads that found nothing or only an expired entry.
        public var misses: Int
        /// Entries dropped to respect `totalCostLimit` or `countLimit`.
        public var evictions: Int
        /// Entries dropped because they had expired (on read or by a sweep).
        public var expirations: Int
        /// Sum of the entries' byte counts.
        public var totalCost: Int
        /// Number of entries.
        public var count: Int
    }

    /// The memory tier's settings. A value type: the backend copies it at init.
    public struct Config: Sendable {
        /// Upper bound of the sum of the entries' byte counts. Default 256 MiB; 0 = unlimited.
        /// An entry larger than the limit on its own is not stored.
        public var totalCostLimit: Int
        /// Upper bound of the number of entries. Default 0 = unlimited.
        public var countLimit: Int = 0
        /// Expiration of an entry stored without one. Default `.seconds(300)`.
        public var expiration: StorageExpiration = .seconds(300)
        /// How often expired entries are swept out, in seconds. Default 120; 0 or less
        /// disables the sweep (expired entries are still never returned).
        public var cleanInterval: TimeInterval = 120
        /// The source of "now" for every expiration decision. Default `SystemClock()`.
        public var clock: any CacheClock = SystemClock()
        /// Number of independently locked shards, rounded up to a power of two.
        /// Default 16, the faster design measured on this machine (1 = one global lock).
        public var shardCount: Int = 16

        /// - Parameter totalCostLimit: bytes; default 256 MiB; 0 = unlimited.
        public init(totalCostLimit: Int = 256 * 1024 * 1024) {
            self.totalCostLimit = totalCostLimit
        }
    }

    /// The lock-guarded state of one shard.
    ///
    /// Threading: thread-safe; `state` is a `Locked` (pthread mutex), held only for O(1) list work and never
    /// while calling out.
    final class Shard: Sendable {
        let state = Locked(LRUState())
    }

    /// The memory tier.
    ///
    /// Threading: every method is thread-safe and synchronous; it runs on the caller's
    /// thread and calls nothing back. Each shard's lock guards that shard's map, list
    /// and counters; the global cost and count are atomics, so the limits are global
    /// although the locks are not. At most one shard lock is held at a time, so the shards
    /// cannot deadlock. The clean timer fires on `cleanQueue`.
    ///
    /// Eviction order: when a store takes the tier over a limit, the victim is the oldest
    /// of the shards' least recently used entries, which is the globally least recently
    /// used entry whenever no other thread moves it meanwhile. Concurrent stores may each
    /// evict one entry more than strictly needed; the limits themselves hold once every
    /// store has returned.
    ///
    /// ```swift
    /// let memory = MemoryStorage.Backend(config: .init(totalCostLimit: 64 << 20))
    /// memory.store(CacheEntry(bytes: [1, 2, 3]), forKey: "k", expiration: .seconds(60))
    /// let entry = memory.value(forKey: "k")   // slides the expiration by default
    /// ```
    public final class Backend: Sendable {
        /// The settings fixed at init.
        public let config: Config
        private let clock: any CacheClock
        private let shards: [Shard]
        private let shardMask: Int
        private let globalCost = Atomic<Int>(0)
        private let globalCount = Atomic<Int>(0)
        /// Serial queue the periodic clean timer fires on; it only calls `removeExpired`.
        private let cleanQueue = DispatchQueue(label: "halcyon.MemoryStorage.cleanQueue")
        private let cleanTimer: RepeatingTimer?

        /// Creates the tier and, when `cleanInterval > 0`, starts its clean timer.
        public init(config: Config) {
            self.config = config
            self.clock = config.clock
            var n = 1
            while n < max(1, config.shardCount) { n <<= 1 }
            self.shards = (0..<n).map { _ in Shard() }
            self.shardMask = n - 1
            cleanTimer = config.cleanInterval > 0
                ? RepeatingTimer(interval: config.cleanInterval, leeway: .milliseconds(100), queue: cleanQueue)
                : nil
            // Weak: a forgotten backend must die, and its deinit cancels the timer.
            cleanTimer?.start { [weak self] in _ = self?.removeExpired() }
        }

        deinit {
            cleanTimer?.cancel()
        }

        @inline(__always)
        private func shard(for key: String) -> Shard {
            shards[key.hashValue & shardMask]
        }

        // MARK: Writing

        /// Stores `entry` under `key`, replacing any previous entry, and makes it the most
        /// recently used. Evicts least recently used entries while over a limit.
        ///
        /// - Parameters:
        ///   - expiration: counted from now; `nil` uses `config.expiration`.
        /// - Returns: false when nothing was stored: the expiration is already over, or the
        ///   entry alone exceeds `totalCostLimit`. In both cases an older entry under `key`
        ///   is removed too, so a reader never sees a value older than this write.
        @discardableResult
        public func store(_ entry: CacheEntry, forKey key: String, expiration: StorageExpiration? = nil) -> Bool {
            let expiration = expiration ?? config.expiration
            let now = clock.now()
            let expiresAt = expiration.estimatedExpirationSince(now)
            if expiration.isExpired || expiresAt <= now
                || (config.totalCostLimit > 0 && entry.bytes.count > config.totalCostLimit)
            {
                remove(forKey: key)
                return false
            }
            let delta = shard(for: key).state.withLock {
                $0.set(key: key, entry: entry, expiration: expiration, expiresAt: expiresAt, now: now)
            }
            globalCost.add(delta.costDelta, ordering: .relaxed)
            globalCount.add(delta.countDelta, ordering: .relaxed)
            enforceLimits()
            return true
        }

        /// Gives `key` a new expiration counted from now, without reading it.
        ///
        /// - Parameter expiration: `nil` restarts the entry's own expiration from now.
        ///   An already-over expiration removes the entry.
        /// - Returns: the new expiration instant, or nil when the key is absent or expired
        ///   (or was removed by an already-over `expiration`).
        @discardableResult
        public func touch(forKey key: String, expiration: StorageExpiration? = nil) -> Date? {
            let now = clock.now()
            let (result, removedCost) = shard(for: key).state.withLock { state -> (Date?, Int?) in
                guard let slot = state.slot(forKey: key) else { return (nil, nil) }
                if state[slot].expiresAt <= now {
                    state.expirations += 1
                    return (nil, state.remove(slot))
                }
                let newExpiration = expiration ?? state[slot].expiration
                let newDate = newExpiration.estimatedExpirationSince(now)
                if newExpiration.isExpired || newDate <= now {
                    return (nil, state.remove(slot))
                }
                return (state.setExpiration(slot, newExpiration, now: now), nil)
            }
            if let removedCost { accountRemoval(cost: removedCost, count: 1) }
            return result
        }

        /// Removes `key`. Returns whether a live or expired entry was there.
        @discardableResult
        public func remove(forKey key: String) -> Bool {
            let removedCost = shard(for: key).state.withLock { state -> Int? in
                guard let slot = state.slot(forKey: key) else { return nil }
                return state.remove(slot)
            }
            guard let removedCost else { return false }
            accountRemoval(cost: removedCost, count: 1)
            return true
        }

        /// Removes every entry. Returns how many there were (expired ones included).
        @discardableResult
        public func removeAll() -> Int {
            var removed = 0
            for shard in shards {
                let (count, cost) = shard.state.withLock { state -> (Int, Int) in
                    let cost = state.totalCost
                    return (state.removeAll(), cost)
                }
                accountRemoval(cost: cost, count: count)
                removed += count
            }
            return removed
        }

        /// Removes the entries whose expiration is at or before `referenceDate` (default:
        /// now) and counts them as expirations. Returns how many it removed.
        @discardableResult
        public func removeExpired(referenceDate: Date? = nil) -> Int {
            let date = referenceDate ?? clock.now()
            var removed = 0
            for shard in shards {
                let (count, cost) = shard.state.withLock { state -> (Int, Int) in
                    let slots = state.expiredSlots(at: date)
                    var cost = 0
                    for slot in slots { cost += state.remove(slot) }
                    state.expirations += slots.count
                    return (slots.count, cost)
                }
                accountRemoval(cost: cost, count: count)
                removed += count
            }
            return removed
        }

        // MARK: Reading

        /// The entry under `key`, or nil when absent or expired (an expired entry is
        /// removed on the way). Counts a hit or a miss and marks the entry used now.
        ///
        /// - Parameter extendingExpiration: what the read does to the expiration;
        ///   default `.cacheTime` (the stored span restarts from now).
        public func value(forKey key: String, extendingExpiration: ExpirationExtending = .cacheTime) -> CacheEntry? {
            valueAndMeta(forKey: key, extendingExpiration: extendingExpiration)?.entry
        }

        /// Like `value(forKey:extendingExpiration:)`, also returning the entry's meta after
        /// the read's extension.
        public func valueAndMeta(
            forKey key: String, extendingExpiration: ExpirationExtending = .cacheTime
        ) -> (entry: CacheEntry, meta: Meta)? {
            let now = clock.now()
            var expiredCost: Int?
            let found = shard(for: key).state.withLock { state -> (CacheEntry, Meta)? in
                guard let slot = state.slot(forKey: key) else {
                    state.misses += 1
                    return nil
                }
                if state[slot].expiresAt <= now {
                    state.misses += 1
                    state.expirations += 1
                    expiredCost = state.remove(slot)
                    return nil
                }
                state.hits += 1
                state.markRead(slot, now: now, extending: extendingExpiration)
                let node = state[slot]
                return (node.entry, node.meta())
            }
            if let expiredCost { accountRemoval(cost: expiredCost, count: 1) }
            return found
        }

        /// Whether a live entry is under `key`. Never extends, never reorders, never counts.
        public func isCached(forKey key: String) -> Bool {
            meta(forKey: key) != nil
        }

        /// The meta of the live entry under `key`. Never extends, never reorders, never counts.
        public func meta(forKey key: String) -> Meta? {
            let now = clock.now()
            return shard(for: key).state.withLock { state -> Meta? in
                guard let slot = state.slot(forKey: key), state[slot].expiresAt > now else { return nil }
                return state[slot].meta()
            }
        }

        // MARK: Occupancy

        /// Sum of the entries' byte counts (expired entries not yet swept included).
        public var totalCost: Int { globalCost.load(ordering: .relaxed) }

        /// Number of entries (expired entries not yet swept included).
        public var count: Int { globalCount.load(ordering: .relaxed) }

        /// A snapshot of the counters; each shard is read under its own lock, so the sums
        /// are exact when no other thread is using the tier.
        public var stats: Stats {
            var stats = Stats(hits: 0, misses: 0, evictions: 0, expirations: 0, totalCost: 0, count: 0)
            for shard in shards {
                shard.state.withLock { state in
                    stats.hits += state.hits
                    stats.misses += state.misses
                    stats.evictions += state.evictions
                    stats.expirations += state.expirations
                    stats.totalCost += state.totalCost
                    stats.count += state.count
                }
            }
            return stats
        }

        // MARK: Limits

        private func accountRemoval(cost: Int, count: Int) {
            guard count > 0 || cost > 0 else { return }
            globalCost.subtract(cost, ordering: .relaxed)
            globalCount.subtract(count, ordering: .relaxed)
        }

        private func overLimit() -> Bool {
            (config.totalCostLimit > 0 && globalCost.load(ordering: .relaxed) > config.totalCostLimit)
                || (config.countLimit > 0 && globalCount.load(ordering: .relaxed) > config.countLimit)
        }

        /// Evicts globally least recently used entries until under both limits. Peeks at
        /// every shard's tail under that shard's lock (one lock at a time), then evicts the
        /// oldest if it is still that shard's tail.
        private func enforceLimits() {
            while overLimit() {
                var victim: (shard: Shard, lastAccess: Date)?
                for shard in shards {
                    if let oldest = shard.state.withLock({ $0.oldest }),
                       victim == nil || oldest.lastAccess < victim!.lastAccess
                    {
                        victim = (shard, oldest.lastAccess)
                    }
                }
                guard let victim else { return }
                let cost = victim.shard.state.withLock { state -> Int? in
                    guard let oldest = state.oldest else { return nil }
                    state.evictions += 1
                    return state.remove(oldest.slot)
                }
                if let cost { accountRemoval(cost: cost, count: 1) }
            }
        }
    }
}
