// The values of the hybrid cache's API: its settings, per-request options, and what each
// operation answers. Plain values, `Sendable`, the same whichever home (local or shared)
// a key has.

import Foundation

extension HybridCache {
    /// The settings of both tiers and of the periodic sweep.
    public struct Config: Sendable {
        /// The memory tier's settings.
        public var memory: MemoryStorage.Config
        /// The disk tier's settings.
        public var disk: DiskStorage.Config
        /// Seconds between sweeps on the ioQueue that remove expired entries of both tiers
        /// and enforce the disk size limit. Default 600; 0 or less disables the sweep.
        public var sweepInterval: TimeInterval = 600
        /// The write-ahead journal (see `JournalConfig`); nil (default) = none: every
        /// disk write reaches its file before its reply.
        public var journal: JournalConfig? = nil
        /// Bounds on the callers parked for leases on this host's keys (`Leases.Limits`).
        public var leaseLimits = Leases.Limits()
        /// A store shared with other hosts for some keys (SharedStore.swift); nil
        /// (default) = every key is this host's alone.
        public var upstream: UpstreamConfig? = nil

        public init(memory: MemoryStorage.Config, disk: DiskStorage.Config) {
            self.memory = memory
            self.disk = disk
        }
    }

    /// Per-request knobs; every field is defaulted.
    public struct Options: Sendable {
        /// Read the disk on the caller's thread instead of the ioQueue. Default false.
        /// Ignored while a write to the key is queued (the read queues behind it).
        public var loadDiskFileSynchronously = false
        /// Expiration of a disk store or touch; nil = the disk tier's default.
        public var diskExpiration: StorageExpiration? = nil
        /// Memory expiration of a store or touch; nil = the memory tier's default (for a
        /// touch: the entry's own). For an entry with a disk copy it bounds only how long
        /// the bytes stay in RAM; for a `toDisk: false` entry it is the lifetime.
        public var memoryExpiration: StorageExpiration? = nil
        /// What a read does to the entry's lifetime, whichever tier answered. Default `.cacheTime`.
        public var extendingExpiration: ExpirationExtending = .cacheTime
        /// File extension for this key's disk file instead of the configured one.
        public var forcedExtension: String? = nil
        /// The instant reads judge the lifetime at (both tiers), and a store counts its
        /// expiration from; nil = now.
        public var referenceDate: Date? = nil
        /// An instant of the memory tier's clock by which the read had arrived whole (the
        /// transport reads the clock once per socket read): a memory hit may be judged
        /// at it, and is extended from it, instead of reading the clock again. Never
        /// earlier than the entry's own last change or use, so a write or read of the
        /// same key made after the instant is never undone. nil = the clock's now.
        public var arrivedBy: Date? = nil
        /// Reads look at the memory tier only. Default false.
        public var fromMemoryOnly = false
        /// Stores also write the disk tier. Default true.
        public var toDisk = true
        /// Priority of the completion on an `.operationQueue` callback queue. Default `.normal`.
        public var priority: Operation.QueuePriority = .normal

        public init() {}
    }

    /// The outcome of a store.
    public struct StoreResult: Sendable, Equatable {
        /// False when the expiration was already over: nothing is stored (and any older
        /// value under the key is gone).
        public var stored: Bool
        /// Bytes stored.
        public var size: Int
        /// The entry's lifetime; nil = never.
        public var expiresAt: Date?
        /// The version the write gave the entry; nil when nothing was stored.
        public var version: UInt64?
    }

    /// The outcome of a retrieve.
    public struct RetrieveResult: Sendable, Equatable {
        /// The tier that answered; `.none` for a miss.
        public var cacheType: CacheType
        /// The entry; nil for a miss.
        public var entry: CacheEntry?
        /// The entry's lifetime after this read's extension; nil = never or a miss.
        public var expiresAt: Date?
    }

    /// What is known about an entry without loading it.
    public struct EntryDescription: Sendable, Equatable {
        /// The tier that answered; `.none` for a miss (other fields then zero/nil).
        public var cacheType: CacheType
        /// The value's byte count.
        public var size: Int
        /// The entry's opaque flags.
        public var flags: UInt32
        /// The entry's lifetime, whichever tier answered; nil = never (or a miss).
        public var expiresAt: Date?
        /// When the memory copy leaves RAM unless read again; nil when there is no memory
        /// copy (or a miss). Equal to `expiresAt` for a memory-only entry.
        public var memoryExpiresAt: Date? = nil
        /// The entry's last store, read or touch in that tier; nil for a miss.
        public var lastAccessAt: Date?
        /// The entry's version (0 for a miss or a format-1 file).
        public var version: UInt64 = 0
    }

    /// The outcome of a touch.
    public struct TouchResult: Sendable, Equatable {
        /// Whether either tier held the key.
        public var touched: Bool
        /// The entry's new lifetime; nil = never or untouched.
        public var expiresAt: Date?
    }

    /// The outcome of a trim.
    public struct TrimResult: Sendable, Equatable {
        /// Files removed.
        public var removed: Int
        /// Disk bytes after the trim.
        public var totalSize: UInt64
    }

    /// The disk tier's occupancy.
    public struct DiskUsage: Sendable, Equatable {
        /// File bytes (values plus their headers).
        public var bytes: UInt64
        /// Files (expired ones included until removed).
        public var count: Int
    }

    /// The outcome of `add` and `compareAndStore`.
    public struct ConditionalStoreResult: Sendable, Equatable {
        /// Whether the value was stored.
        public var stored: Bool
        /// Stored: the new version. Not stored: the live entry's version (nil when the key
        /// holds none, or the expiration was already over).
        public var version: UInt64?
        /// The lifetime of the entry now under the key (nil = never, or no entry).
        public var expiresAt: Date?
    }

    /// The outcome of `increment`.
    public enum IncrementOutcome: Sendable, Equatable {
        /// The new value, its version and the entry's lifetime (nil = never).
        case incremented(value: Int64, version: UInt64, expiresAt: Date?)
        /// The live value is not a decimal integer text (JSON's integer form).
        case notAnInteger
        /// The sum does not fit a signed 64-bit integer; nothing was stored.
        case overflow
        /// The key held no live entry and the caller asked not to create one (no
        /// `initial`); nothing was stored. Decided on the ioQueue, so no write can slip in
        /// between the check and the answer (memcached `incr` on a missing key).
        case missing

        /// Whether the sum was stored (a refusal stores nothing).
        public var stored: Bool {
            if case .incremented = self { true } else { false }
        }
    }

    /// A set that its caller commits itself with `commitDirect`.
    ///
    /// A class: a set passes from the transport's group through the dispatcher to the
    /// commit, and a struct of this size would be copied (and every reference in it
    /// retained) at each step.
    ///
    /// Threading: immutable; any thread.
    public final class DirectStore: Sendable {
        public let key: CacheKey
        public let entry: CacheEntry
        /// `diskExpiration` and `memoryExpiration` apply; see `canCommitDirect`.
        public let options: Options

        public init(key: CacheKey, entry: CacheEntry, options: Options) {
            self.key = key
            self.entry = entry
            self.options = options
        }
    }

    /// An add, a compare-and-set or an increment that its caller commits itself with
    /// `commitDirect`: the same step as `add`, `compareAndStore` and `increment` take in
    /// their own ioQueue jobs.
    ///
    /// Threading: immutable; any thread.
    public final class DirectUpdate: Sendable {
        public enum Change: Sendable {
            /// `add`: store when the key holds no live entry.
            case add(CacheEntry)
            /// `compareAndStore`: store when the live entry has this version.
            case compareAndStore(CacheEntry, version: UInt64)
            /// `increment` (`initial` nil: refuse a missing key).
            case increment(by: Int64, initial: Int64?, flags: UInt32)
        }

        public let key: CacheKey
        public let change: Change
        /// As for the method the change stands for; see `canCommitDirect`.
        public let options: Options

        public init(key: CacheKey, change: Change, options: Options) {
            self.key = key
            self.change = change
            self.options = options
        }

        /// The bytes of the value it may store (an increment's are a few digits).
        var valueSize: Int {
            switch change {
            case .add(let entry), .compareAndStore(let entry, _): entry.bytes.count
            case .increment: LocalStore.incrementValueSize
            }
        }
    }

    /// One write of a direct commit.
    public enum DirectWrite: Sendable {
        case store(DirectStore)
        case update(DirectUpdate)

        /// The key it writes.
        public var key: CacheKey {
            switch self {
            case .store(let s): s.key
            case .update(let u): u.key
            }
        }

        /// The bytes of the value it may store.
        public var valueSize: Int {
            switch self {
            case .store(let s): s.entry.bytes.count
            case .update(let u): u.valueSize
            }
        }
    }

    /// What a write of a direct commit did: what `store`, `add`/`compareAndStore` or
    /// `increment` would have given its completion.
    public enum DirectOutcome: Sendable {
        case stored(Result<StoreResult, CacheError>)
        case conditional(Result<ConditionalStoreResult, CacheError>)
        case incremented(Result<IncrementOutcome, CacheError>)
    }

    /// The journal's settings (`HybridCache.Config.journal`; nil = no journal: every
    /// write goes to its file before its reply, as before the journal).
    public struct JournalConfig: Sendable {
        /// When appended records reach the device. Default `.everysec`.
        public var fsync: Journal.FsyncPolicy = .everysec
        /// The journal's bound in bytes (segments on disk). Default 256 MiB.
        public var maxJournalBytes: UInt64 = 256 << 20
        /// The bound on bytes acknowledged but not yet in their files. Default 64 MiB.
        public var maxUnwrittenBytes: UInt64 = 64 << 20
        /// How long a write waits at a bound for the materializer before it is refused
        /// with `diskBacklog`, in seconds. Default 2.
        public var backlogWait: Double = 2
        /// Values of this many bytes and more skip the journal: their file is written
        /// before the reply (Benchmarks/RESULTS.md, "Journal I/O"). Default 1 MiB.
        public var directValueSize: Int = 1 << 20
        /// Segment size; at most a quarter of `maxJournalBytes`. Default 16 MiB.
        public var segmentSize: UInt64 = 16 << 20
        /// The journal folder; nil = `<cache folder>.journal` beside the cache folder.
        public var directory: URL? = nil
        /// How long the materializer rests between looks for a pause in the load, while
        /// the bounds are under 30 % (`WriteBehind.MaterializerTurn`). Default 25 ms.
        public var materializerRest: DispatchTimeInterval = .milliseconds(25)
        /// Test hook: the materializer writes nothing while this returns true.
        public var materializerHeld: (@Sendable () -> Bool)? = nil
        /// Told of each journaled value dropped because its file can never be written (see
        /// `WriteBehind.dropIfNeverWritable`), with its key and the error: on the ioQueue,
        /// or during replay in init. The daemon logs them. It must not call the cache.
        public var onDroppedEntry: (@Sendable (_ key: CacheKey, _ error: CacheError) -> Void)? = nil

        public init(fsync: Journal.FsyncPolicy = .everysec) {
            self.fsync = fsync
        }
    }

    /// One page of `listKeys`.
    public struct KeyPage: Sendable, Equatable {
        /// Live keys starting with the prefix; a page may hold fewer than the limit (even
        /// none) without being the last.
        public var keys: [CacheKey]
        /// Pass back to continue; nil when the listing is complete. Opaque to callers.
        public var cursor: String?
    }

    /// What a clear or a removal of expired entries did.
    public struct ClearResult: Sendable, Equatable {
        /// The host's own entries removed: the larger of the two tiers' counts, so a key
        /// held in both tiers counts once.
        public var removed: Int
        /// This host's copies of shared keys dropped from memory (`Config.upstream`); the
        /// keys stay upstream, and the next read of one asks the upstream again.
        public var droppedShared: Int
        /// Shared keys removed upstream, for every host (`clear(shared: true)`); nil when
        /// not asked, or without an upstream.
        public var removedShared: Int?

        public init(removed: Int, droppedShared: Int = 0, removedShared: Int? = nil) {
            self.removed = removed
            self.droppedShared = droppedShared
            self.removedShared = removedShared
        }
    }

    /// What a memory lookup found.
    public enum MemoryLookup<Answer: Sendable>: Sendable {
        /// Memory answered: a hit, or a miss that stands because the read is
        /// `fromMemoryOnly`.
        case answered(Answer)
        /// Memory was asked and missed (the miss is counted): go on to the disk with
        /// `retrieveAfterMemoryMiss`.
        case missed
        /// A queued write concerns the key (read-your-writes): memory was not asked; take the
        /// ordinary read, which queues behind it.
        case behindWrite
    }

    /// One element of `storeMany`.
    public struct StoreItem: Sendable {
        public var key: CacheKey
        public var entry: CacheEntry
        /// nil = the disk tier's default.
        public var diskExpiration: StorageExpiration?
        /// nil = the memory tier's default.
        public var memoryExpiration: StorageExpiration?

        public init(key: CacheKey, entry: CacheEntry, diskExpiration: StorageExpiration? = nil,
                    memoryExpiration: StorageExpiration? = nil) {
            self.key = key
            self.entry = entry
            self.diskExpiration = diskExpiration
            self.memoryExpiration = memoryExpiration
        }
    }

    /// A key's lease, as `cache.leaseStatus` shows it.
    public struct LeaseStatus: Sendable, Equatable {
        /// When it ends at the latest; nil: no end.
        public var endsAt: Date?
        /// This host's callers waiting for it.
        public var waiting: Int
    }

    /// Converts a tier's "never" instant to the API's nil.
    static func optionalDate(_ date: Date) -> Date? {
        date == .distantFuture ? nil : date
    }

    /// The description of an entry memory holds.
    static func description(of meta: MemoryStorage.Meta) -> EntryDescription {
        EntryDescription(
            cacheType: .memory, size: meta.size, flags: meta.flags,
            expiresAt: HybridCache.optionalDate(meta.expiration), memoryExpiresAt: HybridCache.optionalDate(meta.memoryExpiration),
            lastAccessAt: meta.lastAccess, version: meta.version)
    }
}
