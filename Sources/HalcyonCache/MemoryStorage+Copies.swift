// The narrow part of the memory tier that holds copies of keys whose home is elsewhere
// (shared keys, whose value lives upstream): keep a copy with a lifetime, read it without
// extending it, drop it. A copy is an ordinary memory-only entry; what makes it a copy is
// that its key's placement is shared, which the façade decides, so no local write ever
// touches it and no copy operation ever touches a local key.

import Foundation

extension MemoryStorage {
    /// The copy operations of one memory tier.
    ///
    /// Threading: a value over the thread-safe backend; any thread. Every method takes one
    /// shard's lock (the whole-tier ones each shard's in turn) and calls nothing out.
    struct Copies: Sendable {
        let backend: Backend

        /// Keeps `entry` as the copy of `key` until `expiration`; false when the tier
        /// cannot hold it (too large for its limits).
        @discardableResult
        func keep(_ entry: CacheEntry, forKey key: CacheKey, expiration: StorageExpiration) -> Bool {
            backend.store(entry, forKey: key, expiration: expiration)
        }

        /// The copy of `key` and its times, live at `referenceDate` (nil: now), not extended.
        func copy(forKey key: CacheKey, referenceDate: Date? = nil) -> (CacheEntry, Meta)? {
            backend.valueAndMeta(forKey: key, referenceDate: referenceDate, extendingExpiration: ExpirationExtending.none)
        }

        /// The times of the copy of `key`, live at `referenceDate`, without loading it.
        func meta(forKey key: CacheKey, referenceDate: Date? = nil) -> Meta? {
            backend.meta(forKey: key, referenceDate: referenceDate)
        }

        /// Whether a live copy of `key` is held.
        func holds(_ key: CacheKey) -> Bool { backend.isCached(forKey: key) }

        /// Drops the copy of `key`; whether there was one.
        @discardableResult
        func drop(_ key: CacheKey) -> Bool { backend.remove(forKey: key) }

        /// Drops the copies whose keys `matches` says (with `departedAt`: only those over by
        /// then, counted as expirations); their keys.
        func drop(where matches: (CacheKey) -> Bool, departedAt date: Date? = nil) -> [CacheKey] {
            backend.removeMemoryOnly(where: matches, departedAt: date)
        }

        /// Counts a completed write of `key` in its namespace's sets, as local stores count.
        func countSet(_ key: CacheKey) { backend.countSet(forKey: key) }

        /// The keys of the copies held that start with `prefix`.
        func keys(prefix: CacheKey) -> [CacheKey] { backend.keys(prefix: prefix, memoryOnly: false) }
    }
}
