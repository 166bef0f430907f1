// The counters a `HybridCache` exposes (for `cache.stats`): what was asked, what each
// tier answered, and what the cache dropped on its own, so no limit loses data silently.

/// A snapshot of a `HybridCache`'s counters and occupancy, taken by `HybridCache.stats()`.
///
/// Counters count since the cache was created. The snapshot is assembled from several
/// locks one after another, so under load its fields may be a few operations apart.
public struct CacheStats: Sendable, Equatable {
    /// Reads answered by the memory tier.
    public var memoryHits: Int = 0
    /// Reads the memory tier could not answer.
    public var memoryMisses: Int = 0
    /// Reads answered by the disk tier (after a memory miss).
    public var diskHits: Int = 0
    /// Reads the disk tier could not answer either.
    public var diskMisses: Int = 0
    /// Stores that completed: stored, or not stored because the expiration was already
    /// over. A store that failed (a disk error) or was cancelled before it ran is not a set.
    public var sets: Int = 0
    /// Removals that found the key in at least one tier.
    public var removals: Int = 0
    /// Memory entries dropped because they expired.
    public var memoryExpirations: Int = 0
    /// Disk files dropped because they expired (by `removeExpired` or a sweep).
    public var diskExpirations: Int = 0
    /// Memory entries dropped to respect the memory limits.
    public var memoryEvictions: Int = 0
    /// Disk files dropped to respect the disk size limit (after a store, by `trim`, by a sweep).
    public var diskEvictions: Int = 0
    /// Bytes held by the memory tier.
    public var memoryBytes: Int = 0
    /// Entries held by the memory tier.
    public var memoryEntries: Int = 0
    /// Bytes held by the disk tier (0 when it is not ready).
    public var diskBytes: UInt64 = 0
    /// Files held by the disk tier (0 when it is not ready).
    public var diskEntries: Int = 0
    /// Writes waiting or running on the ioQueue right now.
    public var writesQueued: Int = 0
    /// Sweeps, after-store trims and lifetime write-backs that failed with a disk error
    /// (the write itself stood).
    public var maintenanceErrors: Int = 0
    /// Files whose times were rewritten to carry a lifetime that reads extended in memory
    /// (the lazy write-back: about two per TTL for a hot key, plus one when its memory
    /// copy leaves, and at a flush or shutdown).
    public var extensionWriteBacks: Int = 0
    /// Periodic sweeps run.
    public var sweeps: Int = 0

    public init() {}
}
