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
    /// The write-ahead journal and the write-behind materializer; nil without a journal.
    public var journal: JournalStats? = nil
    /// The shared keys (`HybridCache.Config.upstream`); nil without an upstream.
    public var upstream: UpstreamStats? = nil

    public init() {}
}

/// The journal's part of `CacheStats` (`cache.stats` -> `journal`; see Journal.swift and WriteBehind.swift).
public struct JournalStats: Sendable, Equatable {
    /// Bytes in the journal's segments on disk now.
    public var bytes: UInt64 = 0
    /// Entries (and their bytes) acknowledged but not yet written to their per-key files.
    public var unwrittenEntries: Int = 0
    public var unwrittenBytes: Int = 0
    /// Per-key files the materializer wrote, and how many of those writes failed.
    public var filesWritten: Int = 0
    public var fileWriteFailures: Int = 0
    /// The last of those failures (retried): what the daemon's summary log names.
    public var lastFileWriteFailure: CacheError? = nil
    /// Acknowledged values dropped because their file can never be written (a key the
    /// folder cannot name a file with, a directory where the file belongs), by the
    /// materializer or at replay; each is logged with its key and errno.
    public var droppedEntries: Int = 0
    /// Group commits (one write each) and the records in them; the largest group; groups
    /// by size: 1, 2–4, 5–16, 17–64, 65 and more.
    public var groups: Int = 0
    public var records: Int = 0
    public var largestGroup: Int = 0
    public var groupSizes: [Int] = [0, 0, 0, 0, 0]
    /// fdatasync calls and failures; the lag from the oldest unsynced append to its sync
    /// (last and largest), in milliseconds.
    public var syncs: Int = 0
    public var syncFailures: Int = 0
    public var lastSyncLagMillis: Double = 0
    public var maxSyncLagMillis: Double = 0
    /// Appends that failed (ENOSPC, EIO, ...): each failed the writes it carried.
    public var failedAppends: Int = 0
    /// Times the journal's folder (or its current segment) was found removed under the
    /// daemon and the journal was rebuilt from what is not yet in files.
    public var journalRebuilds: Int = 0
    /// Records of unwritten entries appended anew so a checkpoint could pass their old
    /// segment without writing their files (see `WriteBehind.copyForward`).
    public var recordsCopiedForward: Int = 0
    /// Groups that found a bound reached and waited for the materializer, and writes
    /// refused with `diskBacklog` after the wait.
    public var stalls: Int = 0
    public var backlogRefusals: Int = 0
    /// Checkpoints written and segments deleted since start.
    public var checkpoints: Int = 0
    public var segmentsDeleted: Int = 0
    /// Values written straight to their file (too large to journal).
    public var directWrites: Int = 0
    /// At start: records replayed and how long the replay took.
    public var replayedRecords: Int = 0
    public var replayMillis: Double = 0

    public init() {}
}
