// The composite cache: a memory tier in front of a disk tier, and the one serial ioQueue
// that owns every write and every queued disk read. This file holds the type, its
// nested value types, the write bookkeeping behind read-your-writes, and the plumbing
// every request shares (task creation, queueing, delivery). The requests themselves
// live in HybridCache+Writes.swift, HybridCache+Reads.swift and
// HybridCache+Maintenance.swift.
//
// Who runs what, and where its completion runs. A write (store, touch, remove, clear,
// removeExpired, trim) runs on the ioQueue in call order, its completion on `callbackQueue`
// (under `.untouch`: on the ioQueue). A `toDisk: false` store of a key with nothing queued
// runs inline on the caller's thread (under `.untouch` its completion too, before `store`
// returns). A memory hit runs on the caller's thread; a memory miss on the ioQueue (or the
// caller's thread with `loadDiskFileSynchronously`); a read of a key with a queued write,
// or during a whole-cache write, on the ioQueue behind the write. `cancel()` of a task not
// started delivers from inside `cancel()` through `callbackQueue`.
//
// Rules that keep this safe: completions go to `CallbackQueue.execute` after every lock is
// released; an ioQueue job never waits for another; only a direct commit enters the queue
// synchronously, from a thread that is not on it (`IOScheduler.runDirect`, which asserts
// so). Under `.untouch`, completions of queued work run on the ioQueue, so they only hand
// off (the daemon posts its reply to a connection's mailbox). Under `swift test` the main
// queue is drained (Swift Testing parks the main thread in the main executor), so
// `mainAsync` and `mainCurrentOrAsync` are tested in-process.

import Foundation
import HalcyonSupport
import Synchronization

/// A byte cache with a memory tier and a disk tier (Kingfisher's `ImageCache`, for bytes).
///
/// ```swift
/// let cache = HybridCache(config: .init(memory: .init(), disk: .init(name: "default", sizeLimit: 1 << 30, directory: nil)))
/// cache.store(CacheEntry(bytes: Array("v".utf8)), forKey: "k") { result in … }
/// let task = cache.retrieve(forKey: "k", callbackQueue: .dispatch(myQueue)) { result in … }
/// task.cancel()   // no success is delivered after this returns
/// ```
///
/// Threading: every method may be called from any thread and never blocks on the ioQueue,
/// except `commitDirect`, whose caller waits for it (see there).
/// - Writes (`store`, `touch`, `remove`, `clear`, `removeExpired`, `trim`, the sweep,
///   write-backs) are `WriteOperation` values applied by `perform` on `ioQueue` in call
///   order, changing both tiers there as one step. Exception: a `store` with
///   `toDisk: false` for a key with no queued write and certainly no file runs inline.
/// - An entry has one lifetime, whichever tier answers (see `MemoryStorage.Backend`):
///   reads extend it in memory, and the disk copy's times catch up lazily (write-back).
/// - Reads (`retrieve`, `cachedType`, `describe`) answer from memory on the caller's
///   thread; on a miss the disk is read on `ioQueue`, or on the caller's thread with
///   `loadDiskFileSynchronously`. While a write to the key (or a whole-cache write) is
///   queued or running, the read queues behind it on `ioQueue` instead.
/// - Every completion is delivered through the call's `CallbackQueue` with the call's
///   priority, never while a lock is held. Under `.untouch` a completion for ioQueue work
///   runs on `ioQueue`: it must hand off and return, never wait for the cache.
/// - Every call returns a `CacheTask`; see its guarantees.
///
/// `@unchecked Sendable`: every stored property is immutable after init and itself
/// thread-safe: the backends lock internally, the scheduler is `Sendable`, `counters` and
/// `diskUsage` are `Locked`, the sweep timer is a libdispatch object.
public final class HybridCache: @unchecked Sendable {
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
        /// A store shared with other hosts for some keys (HybridCache+Upstream.swift); nil
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

    /// The settings fixed at init.
    public let config: Config
    /// The memory tier. Thread-safe; using it directly bypasses read-your-writes.
    public let memoryStorage: MemoryStorage.Backend
    /// The disk tier. Thread-safe; using it directly bypasses the ioQueue's ordering.
    public let diskStorage: DiskStorage.Backend
    /// The order of every piece of work: the ioQueue, the write book behind
    /// read-your-writes, the journal queue. The only way work is queued or ordered.
    let scheduler: IOScheduler
    /// Request counters that the backends do not keep themselves; held to add.
    let counters = Locked(CacheStats())
    /// The disk tier's bytes and files as the ioQueue last accounted them (see
    /// HybridCache+DiskUsage.swift); nil until the first listing or after a failed one.
    /// Written on the ioQueue only; read by `stats()` from any thread.
    let diskUsage = Locked<DiskUsage?>(nil)
    let sweepTimer: RepeatingTimer?
    /// Hands out the version of every stored entry (each store is stamped with one before
    /// its journal record is written). The journal's clock when there is a journal, so
    /// versions replayed at start are never handed out again.
    let versions: VersionClock
    /// The journal and the write-behind state; nil without a journal (or when the disk
    /// tier or the journal folder is not usable: then writes go to files directly).
    let writeBehind: WriteBehind?
    /// The shared keys' order and copies; nil without `config.upstream`.
    let nearCache: NearCache?

    /// Creates both tiers, the ioQueue and the sweep timer. Never fails: a disk tier that
    /// is not ready makes every disk call fail with its error, memory-only calls work.
    public init(config: Config) {
        self.config = config
        memoryStorage = MemoryStorage.Backend(config: config.memory)
        let disk = DiskStorage.Backend(config: config.disk)
        diskStorage = disk
        let memory = memoryStorage
        let near = config.upstream.map { NearCache(config: $0, memory: memory) }
        nearCache = near
        if let near { near.tier.observe(near) }
        let scheduler = IOScheduler(label: "halcyon.HybridCache.ioQueue")
        self.scheduler = scheduler
        writeBehind = config.journal.flatMap {
            HybridCache.openJournal($0, diskStorage: disk, clock: config.disk.clock, scheduler: scheduler)
        }
        versions = writeBehind?.versions ?? VersionClock(clock: config.disk.clock)
        sweepTimer = config.sweepInterval > 0
            ? RepeatingTimer(interval: config.sweepInterval, leeway: .seconds(1), queue: scheduler.timerQueue)
            : nil
        // Weak: the timer must not keep a forgotten cache alive; deinit cancels it. It
        // only enqueues: the sweep takes its place in the order like any job.
        sweepTimer?.start { [weak self] in
            self?.scheduler.enqueue(.slice) { [weak self] in self?.sweep() }
        }
        memoryStorage.setWriteBackHandler { [weak self] in self?.scheduleWriteBackDrain() }
        // The first ioQueue job: list the disk folder once, so stores can check the size
        // limit without listing it again.
        scheduler.enqueue(.background) { [self] in
            recountDiskUsage()
            // Replayed entries go to their files in the background.
            if let writeBehind, writeBehind.unwrittenTotals.count > 0 { writeBehind.scheduleMaterializer(self) }
        }
    }

    deinit {
        sweepTimer?.cancel()
    }

    /// A thread-safe snapshot of the counters and of both tiers' occupancy.
    public func stats() -> CacheStats {
        var stats = counters.withLock { $0 }
        let memory = memoryStorage.stats
        stats.memoryHits = memory.hits
        stats.memoryMisses = memory.misses
        stats.memoryExpirations = memory.expirations
        stats.memoryEvictions = memory.evictions
        stats.memoryBytes = memory.totalCost
        stats.memoryEntries = memory.count
        // The ioQueue's running account, not a listing: stats must stay cheap on a large folder.
        let usage = diskUsage.withLock { $0 }
        stats.diskBytes = usage?.bytes ?? 0
        stats.diskEntries = usage?.count ?? 0
        stats.writesQueued = scheduler.writesQueued
        stats.journal = journalStats()
        stats.upstream = nearCache?.stats
        return stats
    }

    // MARK: Plumbing shared by every request

    /// A pending task whose early cancel delivers `.cancelled(started: false)` through
    /// `callbackQueue` from inside `cancel()`.
    func makeTask<T: Sendable>(
        _ callbackQueue: CallbackQueue, _ priority: Operation.QueuePriority,
        _ completion: (@Sendable (Result<T, CacheError>) -> Void)?
    ) -> CacheTask {
        guard let completion else { return CacheTask(onCancelBeforeStart: nil) }
        return CacheTask(onCancelBeforeStart: {
            callbackQueue.execute(priority: priority) { completion(.failure(.cancelled(started: false))) }
        })
    }

    /// Hands `result` to the callback queue. The task's delivery claim runs there, right
    /// before the completion, so a cancel that returned first always wins.
    func deliver<T: Sendable>(
        _ result: Result<T, CacheError>, task: CacheTask, _ callbackQueue: CallbackQueue,
        _ priority: Operation.QueuePriority, _ completion: (@Sendable (Result<T, CacheError>) -> Void)?
    ) {
        task.workFinished()
        guard let completion else {
            _ = task.claimDelivery()
            return
        }
        callbackQueue.execute(priority: priority) {
            if task.claimDelivery() {
                completion(result)
            } else {
                completion(.failure(.cancelled(started: true)))
            }
        }
    }

    /// Runs `work` now, on the caller's thread, and delivers its result.
    func runInline<T: Sendable>(
        _ callbackQueue: CallbackQueue, _ priority: Operation.QueuePriority,
        _ completion: (@Sendable (Result<T, CacheError>) -> Void)?,
        _ work: () -> Result<T, CacheError>
    ) -> CacheTask {
        let task = CacheTask(onCancelBeforeStart: nil)
        _ = task.begin()
        deliver(work(), task: task, callbackQueue, priority, completion)
        return task
    }

    /// Queues `work` on the ioQueue. A write (`scope` non-nil) is counted in the write
    /// book from enqueue until its effects are in place, which is what makes later reads
    /// of its key queue behind it. A cancelled job is skipped and still uncounted.
    ///
    /// `short`: the job touches at most one small file (an update whose store goes to the
    /// journal): see `IOScheduler.JobKind.shortWrite`.
    func enqueue<T: Sendable>(
        write scope: WriteScope?, _ callbackQueue: CallbackQueue, _ priority: Operation.QueuePriority,
        short: Bool = false,
        _ completion: (@Sendable (Result<T, CacheError>) -> Void)?,
        _ work: @escaping @Sendable () -> Result<T, CacheError>
    ) -> CacheTask {
        let task = makeTask(callbackQueue, priority, completion)
        let job: @Sendable () -> Void = { [self] in
            let result: Result<T, CacheError>? = task.begin() ? work() : nil
            if let scope { scheduler.finish(scope) }
            if let result { deliver(result, task: task, callbackQueue, priority, completion) }
        }
        if let scope {
            scheduler.enqueue(short ? .shortWrite(scope) : .write(scope), job)
        } else {
            scheduler.enqueue(.read, job)
        }
        return task
    }

    /// Converts a tier's "never" instant to the API's nil.
    static func optionalDate(_ date: Date) -> Date? {
        date == .distantFuture ? nil : date
    }
}
