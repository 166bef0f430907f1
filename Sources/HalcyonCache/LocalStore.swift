// The home of this host's keys: the memory tier in front of the disk tier, the one
// serial ioQueue that owns every write and every queued disk read, the journal and the
// write-behind state. This file holds the type, its state and the queueing every local
// operation shares; the operations are in its `LocalStore+*.swift` extensions: reads
// (+Reads, +MemoryAnswer), writes (+Writes, +Atomic, +MultiKey, +Keys, +Maintenance), the
// one function every write goes through (+WriteOperation), group and direct commit
// (+GroupCommit, +DirectWrites), the journal (+Journal, +Unwritten, +UnwrittenTable,
// +MaterializerFiles) and the disk tier's running account (+DiskUsage).
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
// off (the daemon posts its reply to a connection's mailbox). The locks and the order
// they nest in are listed once, in IOScheduler.swift.

import Foundation
import HalcyonSupport
import Synchronization

/// This host's keys in a memory tier and a disk tier (Kingfisher's `ImageCache`, for
/// bytes), reached only through `HybridCache`, which decides that a key lives here.
///
/// - Writes (`store`, `touch`, `remove`, `clear`, `removeExpired`, `trim`, the sweep,
///   write-backs) are `WriteOperation` values applied by `perform` on the ioQueue in call
///   order, changing both tiers there as one step. Exception: a `store` with
///   `toDisk: false` for a key with no queued write and certainly no file runs inline.
///   `perform` is the one function that writes either tier for a local key.
/// - An entry has one lifetime, whichever tier answers (see `MemoryStorage.Backend`):
///   reads extend it in memory, and the disk copy's times catch up lazily (write-back).
/// - Reads answer from memory on the caller's thread; on a miss the disk is read on the
///   ioQueue, or on the caller's thread with `loadDiskFileSynchronously`. While a write to
///   the key (or a whole-cache write) is queued or running, the read queues behind it on
///   the ioQueue instead (`readPlan`, the one decision every read makes).
///
/// Threading: every method may be called from any thread and never blocks on the
/// ioQueue, except `commitDirect`, whose caller waits for it (see there).
/// `@unchecked Sendable`: every stored property is immutable after init and itself
/// thread-safe: the backends lock internally, the scheduler is `Sendable`, `counters`,
/// `diskUsage` and `namespaceDisk` are `Locked`, the sweep timer is a libdispatch object.
final class LocalStore: DeliversTasks, @unchecked Sendable {
    typealias Config = HybridCache.Config
    typealias Options = HybridCache.Options
    typealias StoreResult = HybridCache.StoreResult
    typealias RetrieveResult = HybridCache.RetrieveResult
    typealias EntryDescription = HybridCache.EntryDescription
    typealias TouchResult = HybridCache.TouchResult
    typealias TrimResult = HybridCache.TrimResult
    typealias DiskUsage = HybridCache.DiskUsage
    typealias ConditionalStoreResult = HybridCache.ConditionalStoreResult
    typealias IncrementOutcome = HybridCache.IncrementOutcome
    typealias DirectStore = HybridCache.DirectStore
    typealias DirectUpdate = HybridCache.DirectUpdate
    typealias DirectWrite = HybridCache.DirectWrite
    typealias DirectOutcome = HybridCache.DirectOutcome
    typealias JournalConfig = HybridCache.JournalConfig
    typealias KeyPage = HybridCache.KeyPage
    typealias ClearResult = HybridCache.ClearResult
    typealias MemoryLookup = HybridCache.MemoryLookup
    typealias StoreItem = HybridCache.StoreItem

    /// What the memory tier holds that is not this store's (copies of shared keys, which
    /// `SharedStore` keeps there): a whole-cache clear or expiry run drops them too,
    /// counted apart, and a listing leaves them out. Given once, at init, by the façade.
    struct Neighbour: Sendable {
        /// Drops the copies (with a date: those over by then); how many went.
        var dropCopies: @Sendable (_ departedAt: Date?) -> Int
        /// Whether a key in memory is such a copy.
        var isCopy: @Sendable (CacheKey) -> Bool
    }

    /// The settings fixed at init.
    let config: Config
    /// The memory tier. Thread-safe; using it directly bypasses read-your-writes.
    let memoryStorage: MemoryStorage.Backend
    /// The disk tier. Thread-safe; using it directly bypasses the ioQueue's ordering.
    let diskStorage: DiskStorage.Backend
    /// The order of every piece of work: the ioQueue, the write book behind
    /// read-your-writes, the journal queue. The only way work is queued or ordered.
    let scheduler: IOScheduler
    /// Request counters that the backends do not keep themselves; held to add.
    let counters: Locked<CacheStats>
    /// The disk tier's bytes and files as the ioQueue last accounted them (see
    /// LocalStore+DiskUsage.swift); nil until the first listing or after a failed one.
    /// Written on the ioQueue only; read by `stats()` from any thread.
    let diskUsage = Locked<DiskUsage?>(nil)
    /// The namespaces' disk accounts and quotas (LocalStore+DiskQuotas.swift); written on
    /// the ioQueue only, read by `stats` from any thread.
    let namespaceDisk = Locked(NamespaceDisk())
    let sweepTimer: RepeatingTimer?
    /// Hands out the version of every stored entry (each store is stamped with one before
    /// its journal record is written). The journal's clock when there is a journal, so
    /// versions replayed at start are never handed out again.
    let versions: VersionClock
    /// The journal and the write-behind state; nil without a journal (or when the disk
    /// tier or the journal folder is not usable: then writes go to files directly).
    let writeBehind: WriteBehind?
    /// The memory tier's other tenant, if any.
    let neighbour: Neighbour?
    /// The leases on this host's keys: a write of a key ends its lease (`written`).
    let leases: Leases

    /// Creates the ioQueue, opens the journal and starts the sweep timer over the given
    /// tiers. Never fails: a disk tier that is not ready makes every disk call fail with
    /// its error, memory-only calls work.
    init(
        config: Config, memory: MemoryStorage.Backend, disk: DiskStorage.Backend, counters: Locked<CacheStats>,
        neighbour: Neighbour?
    ) {
        leases = Leases(limits: config.leaseLimits)
        self.config = config
        memoryStorage = memory
        diskStorage = disk
        self.counters = counters
        self.neighbour = neighbour
        let scheduler = IOScheduler(label: "halcyon.HybridCache.ioQueue")
        self.scheduler = scheduler
        writeBehind = config.journal.flatMap {
            LocalStore.openJournal($0, diskStorage: disk, clock: config.disk.clock, scheduler: scheduler)
        }
        versions = writeBehind?.versions ?? VersionClock(clock: config.disk.clock)
        sweepTimer = config.sweepInterval > 0
            ? RepeatingTimer(interval: config.sweepInterval, leeway: .seconds(1), queue: scheduler.timerQueue)
            : nil
        // Weak: the timer must not keep a forgotten store alive; deinit cancels it. It
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

    /// The one hook of a local write that took effect and may have changed `key` (a
    /// store, whatever it stored; a removal that removed): the key's lease ends and its
    /// parked callers read again. Called from the write path itself (`perform`, and a
    /// group's journaled sets), so no write method can forget it; it may run with the
    /// write book's lock held, and calls nothing out (see `Leases.written`).
    func written(_ key: CacheKey) {
        leases.written(key: key)
    }

    /// The counters and both tiers' occupancy (the façade adds the shared keys').
    func stats() -> CacheStats {
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
        return stats
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
}
