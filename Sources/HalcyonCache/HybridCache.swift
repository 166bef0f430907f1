// The hybrid cache's public face: the API, the one place that decides where a key lives
// (`placement`), and the hand-off to that home. Two homes:
// - `LocalStore` (LocalStore.swift): this host's keys, in the memory and disk tiers,
//   ordered by the ioQueue (`IOScheduler`), journaled by the write-behind store;
// - `SharedStore` (SharedStore.swift): keys shared with other hosts through an upstream
//   (`Config.upstream`), ordered per key by the shared store, with memory-only copies.
// Operations that span both homes (several keys, prefixes, listings, a whole-cache clear)
// are composed in HybridCache+Placement.swift. The values of the API are in
// HybridCache+Values.swift.

import Foundation
import HalcyonSupport

/// A byte cache with a memory tier and a disk tier (Kingfisher's `ImageCache`, for bytes),
/// and optionally keys shared with other hosts through an upstream (Redis).
///
/// ```swift
/// let cache = HybridCache(config: .init(memory: .init(), disk: .init(name: "default", sizeLimit: 1 << 30, directory: nil)))
/// cache.store(CacheEntry(bytes: Array("v".utf8)), forKey: "k") { result in … }
/// let task = cache.retrieve(forKey: "k", callbackQueue: .dispatch(myQueue)) { result in … }
/// task.cancel()   // no success is delivered after this returns
/// ```
///
/// **Placement.** Each key has one home, decided here and nowhere else (`placement`):
/// shared when an upstream is configured and the key starts with one of its prefixes,
/// local otherwise. With `UpstreamConfig.namespaced`, the key within its namespace is
/// what starts with a prefix (`SharedStore.shares`), and the key kept upstream is the
/// stored key, namespace and all. Each home owns the order of its keys' operations, and
/// each writes the memory tier only for its own keys, so no key has two writers.
///
/// Threading: every method may be called from any thread and never blocks on the ioQueue,
/// except `commitDirect`, whose caller waits for it (see there). Every completion is
/// delivered through the call's `CallbackQueue` with the call's priority, never while a
/// lock is held; under `.untouch` a completion for queued work runs on the ioQueue (or on
/// the thread that received the upstream's reply): it must hand off and return, never
/// wait for the cache. Every call returns a `CacheTask`; see its guarantees.
///
/// `Sendable`: every stored property is immutable after init and itself `Sendable`.
public final class HybridCache: DeliversTasks, Sendable {
    /// Where a key lives.
    enum Placement {
        case local
        case shared(SharedStore)
    }

    /// The settings fixed at init.
    public let config: Config
    /// The memory tier. Thread-safe; using it directly bypasses read-your-writes.
    public let memoryStorage: MemoryStorage.Backend
    /// The disk tier. Thread-safe; using it directly bypasses the ioQueue's ordering.
    public let diskStorage: DiskStorage.Backend
    /// This host's keys.
    let local: LocalStore
    /// The shared keys; nil without `config.upstream`.
    let shared: SharedStore?

    /// Creates both tiers, the ioQueue, the sweep timer and, with `config.upstream`, the
    /// shared store. Never fails: a disk tier that is not ready makes every disk call fail
    /// with its error, memory-only calls work.
    public init(config: Config) {
        self.config = config
        let memory = MemoryStorage.Backend(config: config.memory)
        let disk = DiskStorage.Backend(config: config.disk)
        memoryStorage = memory
        diskStorage = disk
        let counters = Locked(CacheStats())
        let shared = config.upstream.map {
            SharedStore(
                config: $0, copies: MemoryStorage.Copies(backend: memory), counters: counters, clock: config.memory.clock,
                defaults: .init(disk: disk.defaultExpiration, memory: config.memory.expiration))
        }
        self.shared = shared
        if let shared { shared.tier.observe(shared) }
        local = LocalStore(
            config: config, memory: memory, disk: disk, counters: counters,
            neighbour: shared.map { shared in
                LocalStore.Neighbour(dropCopies: { shared.dropCopies(departedAt: $0) }, isCopy: { shared.shares($0) })
            })
    }

    /// Where `key` lives: the one question of placement, asked only here.
    @inline(__always)
    func placement(_ key: CacheKey) -> Placement {
        guard let shared, shared.shares(key) else { return .local }
        return .shared(shared)
    }

    /// A thread-safe snapshot of the counters and of both tiers' occupancy.
    public func stats() -> CacheStats {
        var stats = local.stats()
        stats.upstream = shared?.stats
        return stats
    }

    /// The accounted namespaces' counters in both tiers (`Quotas`, `registerNamespace`).
    public func namespaceStats() -> [MemoryStorage.NamespaceStats] {
        let disk = local.namespaceDiskStats()
        return memoryStorage.namespaceStats().map { stats in
            var stats = stats
            if let d = disk[stats.namespace.prefix] {
                stats.diskBytes = d.bytes
                stats.diskEntries = d.count
                stats.diskEvictions = d.evictions
                stats.diskQuota = d.quota
            }
            return stats
        }
    }

    /// Replaces the per-namespace quotas. A namespace now over its memory quota loses its
    /// own least recently used memory entries before this returns
    /// (`MemoryStorage.Backend.setQuotas`); one over its disk quota loses its own files on
    /// the ioQueue soon after (LocalStore+DiskQuotas.swift). Thread-safe; call it off the
    /// event loops (it may evict many entries).
    public func setQuotas(_ quotas: Quotas) {
        memoryStorage.setQuotas(quotas)
        local.setDiskQuotas(quotas)
    }

    /// The namespaces with entries in the disk tier (a file, or a value still in the
    /// journal), listed in the background of the requests (one read of each file's header
    /// when no namespace is accounted yet); `completion` runs on the ioQueue.
    public func storedNamespaces(completion: @escaping @Sendable ([Namespace]) -> Void) {
        local.storedNamespaces(completion: completion)
    }

    /// Accounts `namespace` without a quota (a namespace learnt at run time); false when
    /// `MemoryStorage.Backend.maxAccounts` namespaces are accounted already.
    @discardableResult
    public func registerNamespace(_ namespace: Namespace) -> Bool {
        memoryStorage.register(namespace)
    }

    /// Whether some keys are shared with other hosts (`Config.upstream`).
    public var hasUpstream: Bool { shared != nil }

    /// Whether `key` lives in the upstream (`Config.upstream` and its prefixes).
    public func isShared(_ key: CacheKey) -> Bool {
        if case .shared = placement(key) { return true }
        return false
    }

    // MARK: Reads

    /// Reads `key`: memory first, then disk. A disk hit is put back into memory as a
    /// resident copy (residency `options.memoryExpiration` or the tier's). The read extends
    /// the entry's lifetime per `options.extendingExpiration` whichever tier answered; the
    /// extension is kept in memory, and reaches the file lazily (see
    /// `MemoryStorage.Backend`). `options.referenceDate` is the instant the lifetime is
    /// judged at, in both tiers. `expiresAt` is the entry's lifetime.
    ///
    /// A memory hit completes at once through `callbackQueue`; a memory miss reads the disk
    /// on the ioQueue, or on the caller's thread when `options.loadDiskFileSynchronously`.
    /// With `options.fromMemoryOnly` the disk is not looked at. A miss is a success with
    /// `cacheType: .none`.
    @discardableResult
    public func retrieve(
        forKey key: CacheKey, options: Options = .init(), callbackQueue: CallbackQueue = .untouch,
        completion: @escaping @Sendable (Result<RetrieveResult, CacheError>) -> Void
    ) -> CacheTask {
        switch placement(key) {
        case .local: local.retrieve(forKey: key, options: options, callbackQueue: callbackQueue, memoryAsked: false, completion: completion)
        case .shared(let shared): shared.retrieve(forKey: key, options: options, callbackQueue: callbackQueue, completion: completion)
        }
    }

    /// Which tier holds a live `key`, without loading or extending it. Same paths as
    /// `retrieve`; `.none` when neither does.
    @discardableResult
    public func cachedType(
        forKey key: CacheKey, options: Options = .init(), callbackQueue: CallbackQueue = .untouch,
        completion: @escaping @Sendable (Result<CacheType, CacheError>) -> Void
    ) -> CacheTask {
        describe(forKey: key, options: options, callbackQueue: callbackQueue) { completion($0.map(\.cacheType)) }
    }

    /// Size, flags, lifetime, memory expiration (when a memory copy exists) and last
    /// access of `key`, without loading or extending it. Same paths as `retrieve`; a miss is a success
    /// with `cacheType: .none`.
    @discardableResult
    public func describe(
        forKey key: CacheKey, options: Options = .init(), callbackQueue: CallbackQueue = .untouch,
        completion: @escaping @Sendable (Result<EntryDescription, CacheError>) -> Void
    ) -> CacheTask {
        switch placement(key) {
        case .local: local.describe(forKey: key, options: options, callbackQueue: callbackQueue, completion: completion)
        case .shared(let shared): shared.describe(forKey: key, options: options, callbackQueue: callbackQueue, completion: completion)
        }
    }

    /// Reads `key` from memory only, as `retrieve` would first: same lifetime judgement,
    /// extension and counters. Never blocks on the ioQueue.
    ///
    /// Threading: any thread; touches one memory shard's lock, and the write book's only
    /// while some write is queued.
    public func memoryLookup(forKey key: CacheKey, options: Options = .init()) -> MemoryLookup<RetrieveResult> {
        // A `take` that takes nothing leaves every answer a result.
        switch memoryLookup(forKey: key, options: options, taking: { _, _ in false }) {
        case .answered(let result): return .answered(result!)
        case .missed: return .missed
        case .behindWrite: return .behindWrite
        }
    }

    /// `memoryLookup` that first offers a hit where it lies: `take` gets the entry lent
    /// (`LentEntry`) and its lifetime after the read's extension (nil = never), and returns
    /// true when it took what it needed from them, which the lookup answers with
    /// `.answered(nil)`; when it returns false, the entry is copied and answered as
    /// `memoryLookup` answers it. A local key's entry is lent under its memory shard's lock
    /// (`MemoryStorage.Backend.lendValue`), so `take` must be short, must not call into the
    /// cache, and must not keep the bytes. The common `cache.get` reply is written straight
    /// from the lent entry, with no result built around it.
    ///
    /// Threading: as `memoryLookup`.
    public func memoryLookup(
        forKey key: CacheKey, options: Options = .init(), taking take: (LentEntry, _ expiresAt: Date?) -> Bool
    ) -> MemoryLookup<RetrieveResult?> {
        switch placement(key) {
        case .local:
            return local.memoryLookup(forKey: key, options: options, taking: take)
        case .shared(let shared):
            switch shared.memoryLookup(forKey: key, options: options) {
            case .answered(let result):
                guard let entry = result.entry, result.cacheType != .none else { return .answered(result) }
                return .answered(entry.withLent { take($0, result.expiresAt) } ? nil : result)
            case .missed: return .missed
            case .behindWrite: return .behindWrite
            }
        }
    }

    /// After `memoryLookup` answered `.missed`: `retrieve` without asking memory again
    /// (a read queued behind a write that arrived meanwhile still asks it, after the write).
    @discardableResult
    public func retrieveAfterMemoryMiss(
        forKey key: CacheKey, options: Options = .init(), callbackQueue: CallbackQueue = .untouch,
        completion: @escaping @Sendable (Result<RetrieveResult, CacheError>) -> Void
    ) -> CacheTask {
        switch placement(key) {
        case .local: local.retrieve(forKey: key, options: options, callbackQueue: callbackQueue, memoryAsked: true, completion: completion)
        case .shared(let shared): shared.retrieve(forKey: key, options: options, callbackQueue: callbackQueue, completion: completion)
        }
    }

    /// The description `describe` would give of a key memory holds, or nil when memory
    /// does not hold it live or a queued write concerns it: then take `describe` or
    /// `cachedType`. Never extends, never counts (as `describe`).
    ///
    /// Threading: any thread; touches one memory shard's lock, and the write book's only
    /// while some write is queued.
    public func memoryDescription(forKey key: CacheKey, options: Options = .init()) -> EntryDescription? {
        switch placement(key) {
        case .local: local.memoryDescription(forKey: key, options: options)
        case .shared(let shared): shared.memoryDescription(forKey: key, options: options)
        }
    }

    // MARK: Writes

    /// Stores `entry` under `key` in memory and (unless `options.toDisk` is false) on disk.
    ///
    /// Runs on the ioQueue after every earlier write. With `toDisk: false` the value goes to
    /// memory only, its memory expiration is its lifetime, and any disk copy of `key` is
    /// removed, so that when memory later drops the value a read misses instead of finding
    /// an older one on disk; when no write to `key` (nor a whole-cache write) is queued and
    /// the maybeCached set says no file exists (no system call), that store runs inline on
    /// the caller's thread. With a disk copy, the disk expiration is the entry's lifetime
    /// and the memory expiration only its residency in RAM.
    /// An already-over expiration stores nothing (`stored: false`) and removes any older
    /// value of `key` from both tiers. A disk failure also removes `key` from memory, so a
    /// failed store never leaves the new value in one tier and the old one in the other
    /// visible; the completion gets the disk error.
    ///
    /// - Parameters:
    ///   - options: `toDisk`, `diskExpiration`, `memoryExpiration`, `forcedExtension`,
    ///     `referenceDate`, `priority` apply.
    ///   - callbackQueue: default `.untouch`.
    ///   - completion: called exactly once, unless nil.
    @discardableResult
    public func store(
        _ entry: CacheEntry, forKey key: CacheKey, options: Options = .init(), callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<StoreResult, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        switch placement(key) {
        case .local: local.store(entry, forKey: key, options: options, callbackQueue: callbackQueue, completion: completion)
        case .shared(let shared): shared.store(entry, forKey: key, options: options, callbackQueue: callbackQueue, completion: completion)
        }
    }

    /// Gives `key` a new expiration counted from now, without loading it.
    ///
    /// Runs on the ioQueue. The entry gets `options.diskExpiration` (nil: the disk tier's
    /// rule) as its new lifetime, in both tiers; a memory copy restarts its residency
    /// with `options.memoryExpiration` (nil: its own). A memory-only entry gets
    /// `options.memoryExpiration`, else `options.diskExpiration`, else its own memory
    /// expiration as its lifetime. A new lifetime already over (`.expired`, a past date)
    /// expires the entry now, as Redis's EXPIRE does: it is removed from both tiers,
    /// counted as an expiration, and the result is `touched: true` with `expiresAt` the
    /// current whole second.
    @discardableResult
    public func touch(
        forKey key: CacheKey, options: Options = .init(), callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<TouchResult, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        switch placement(key) {
        case .local: local.touch(forKey: key, options: options, callbackQueue: callbackQueue, completion: completion)
        case .shared(let shared): shared.touch(forKey: key, options: options, callbackQueue: callbackQueue, completion: completion)
        }
    }

    /// Removes `key` from the chosen tiers. Runs on the ioQueue. Removing the memory copy
    /// alone keeps the disk copy, which then gets the lifetime memory extended.
    ///
    /// - Returns (through `completion`): whether either tier held the key.
    @discardableResult
    public func remove(
        forKey key: CacheKey, fromMemory: Bool = true, fromDisk: Bool = true, options: Options = .init(),
        callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<Bool, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        switch placement(key) {
        case .local:
            local.remove(forKey: key, fromMemory: fromMemory, fromDisk: fromDisk, options: options,
                         callbackQueue: callbackQueue, completion: completion)
        case .shared(let shared):
            shared.remove(forKey: key, fromMemory: fromMemory, fromDisk: fromDisk, options: options,
                          callbackQueue: callbackQueue, completion: completion)
        }
    }

    /// Stores `entry` only when `key` holds no live entry (memcached `add`, Redis `SET NX`).
    ///
    /// One ioQueue job, in order with every other write. `options` as for `store`.
    @discardableResult
    public func add(
        _ entry: CacheEntry, forKey key: CacheKey, options: Options = .init(), callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<ConditionalStoreResult, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        switch placement(key) {
        case .local: local.add(entry, forKey: key, options: options, callbackQueue: callbackQueue, completion: completion)
        case .shared(let shared):
            shared.conditionalStore(entry, forKey: key, version: nil, options: options, callbackQueue: callbackQueue, completion: completion)
        }
    }

    /// Stores `entry` only when the version of `key`'s live entry is `version`
    /// (compare-and-set). A key with no live entry never matches.
    ///
    /// One ioQueue job, in order with every other write. `options` as for `store`.
    @discardableResult
    public func compareAndStore(
        _ entry: CacheEntry, forKey key: CacheKey, version: UInt64, options: Options = .init(),
        callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<ConditionalStoreResult, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        switch placement(key) {
        case .local:
            local.compareAndStore(entry, forKey: key, version: version, options: options, callbackQueue: callbackQueue, completion: completion)
        case .shared(let shared):
            shared.conditionalStore(entry, forKey: key, version: version, options: options, callbackQueue: callbackQueue, completion: completion)
        }
    }

    /// Adds `delta` to the integer under `key`, atomically. A missing or expired key
    /// starts at `initial`, or with `initial` nil is refused (`.missing`). An existing
    /// entry keeps its flags (its encoding: bytes stay bytes, text stays text) and its
    /// lifetime unless `options.diskExpiration` is given; a new one is stored with `flags`
    /// (the daemon's `json` encoding) and the store defaults. `options.toDisk` as for `store`.
    ///
    /// One ioQueue job, in order with every other write.
    @discardableResult
    public func increment(
        forKey key: CacheKey, by delta: Int64, initial: Int64? = 0, flags: UInt32, options: Options = .init(),
        callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<IncrementOutcome, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        switch placement(key) {
        case .local:
            local.increment(forKey: key, by: delta, initial: initial, flags: flags, options: options,
                            callbackQueue: callbackQueue, completion: completion)
        case .shared(let shared):
            shared.increment(forKey: key, by: delta, initial: initial, flags: flags, options: options,
                             callbackQueue: callbackQueue, completion: completion)
        }
    }

    /// Whether `commitDirect` would take `write` now without making its caller wait: the
    /// ioQueue has no job queued or running (a sweep, a disk read, `debug.sleep`; only
    /// other callers' commits, which are short), the journal is on, its fsync policy never
    /// makes a commit wait for the device, the value goes in the journal, the bounds are
    /// far enough that the commit will not wait for the materializer, and an update can
    /// decide without opening a file (`decidesWithoutFiles`). Otherwise use the method the
    /// write stands for, whose waits happen on the ioQueue.
    public func canCommitDirect(_ write: DirectWrite) -> Bool {
        guard case .local = placement(write.key) else { return false }
        return local.canCommitDirect(write)
    }

    /// Applies every write of `group`, in order: on the ioQueue after every write queued
    /// before, waiting on the caller's thread (`DispatchQueue.sync`; when the queue is
    /// idle the work runs on this thread). Each run of sets shares one journal append,
    /// and so does each run of updates: an update decides on every write before it (the
    /// sets before its run are applied first; the updates before it in its run are seen
    /// as they will be stored). The writes are applied and uncounted when this returns,
    /// so the caller may answer them at once and its next read sees them. Outcomes are in
    /// `group`'s order.
    ///
    /// - Important: never on the ioQueue, nor from work the ioQueue waits for (a
    ///   completion delivered `.untouch`): the ioQueue would wait for itself. Check
    ///   `canCommitDirect` first; a write it refuses is still applied correctly here, but
    ///   may wait on the caller's thread (for a bound, for the device).
    public func commitDirect(_ group: [DirectWrite]) -> [DirectOutcome] {
        local.commitDirect(group)
    }

    // MARK: The whole cache

    /// Removes the entries whose lifetime ends at or before `referenceDate` (default now)
    /// from the chosen tiers and counts them as expirations; memory copies whose residency
    /// is over leave too. A file is judged by the lifetime the cache knows: lifetimes that
    /// memory extended are written back first, and no live entry's file is deleted. A
    /// whole-cache write on the ioQueue. Copies of shared keys whose upstream lifetime is
    /// over are dropped from memory and counted apart (`ClearResult.droppedShared`).
    @discardableResult
    public func removeExpired(
        memory: Bool = true, disk: Bool = true, referenceDate: Date? = nil, callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<ClearResult, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        local.removeExpired(memory: memory, disk: disk, referenceDate: referenceDate, callbackQueue: callbackQueue, completion: completion)
    }

    /// When the disk tier is over its size limit (bytes on disk, headers included),
    /// removes least recently accessed files until it is at or below half the limit; an
    /// entry read from memory counts as accessed then. A whole-cache write on the ioQueue.
    @discardableResult
    public func trim(
        callbackQueue: CallbackQueue = .untouch, completion: (@Sendable (Result<TrimResult, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        local.trim(callbackQueue: callbackQueue, completion: completion)
    }

    /// The disk tier's bytes and file count, read on the ioQueue (after queued writes).
    @discardableResult
    public func totalSize(
        callbackQueue: CallbackQueue = .untouch, completion: @escaping @Sendable (Result<DiskUsage, CacheError>) -> Void
    ) -> CacheTask {
        local.totalSize(callbackQueue: callbackQueue, completion: completion)
    }

    /// Writes every lifetime memory knows that its disk copy does not have yet, after
    /// every write queued before it. The completion gets the number of files updated.
    @discardableResult
    public func flush(
        callbackQueue: CallbackQueue = .untouch, completion: (@Sendable (Result<Int, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        local.flush(callbackQueue: callbackQueue, completion: completion)
    }

    /// For a clean shutdown: stops the sweep, waits for every queued job, then flushes
    /// every extended lifetime to disk. Blocks the caller; call it once nothing will
    /// ask the cache anything more (extensions after it stay in memory only).
    public func shutdown() {
        local.shutdown()
    }

    /// Runs a sweep now, on the ioQueue; for tests and operators.
    public func sweepNow() {
        local.sweepNow()
    }

    /// Test hook: runs `materializeAll` on the ioQueue after every queued job.
    public func materializeNow(completion: @escaping @Sendable () -> Void) {
        local.materializeNow(completion: completion)
    }

    /// Holds the ioQueue for `seconds` (a plain queued job, not a write: reads of keys
    /// without queued writes still answer from memory). For tests and `debug.sleep`.
    @discardableResult
    public func debugSleep(
        seconds: Double, callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<Void, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        local.debugSleep(seconds: seconds, callbackQueue: callbackQueue, completion: completion)
    }

    /// The folder of the journal `config` opens for a disk tier at `diskPath`.
    public static func journalDirectory(_ config: JournalConfig, diskPath: String) -> String {
        LocalStore.journalDirectory(config, diskPath: diskPath)
    }

    /// Whether `cursor` could have come from `listKeys` (nil starts a listing).
    public static func isValidKeyCursor(_ cursor: String?) -> Bool {
        LocalStore.isValidKeyCursor(cursor)
    }
}
