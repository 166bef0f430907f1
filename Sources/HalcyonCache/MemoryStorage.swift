// The memory tier: an LRU of byte values with a total-cost limit, a count limit, per
// entry a lifetime (which a read can slide forward) and a residency (how long the bytes
// stay in RAM), the pending write-backs of lifetimes that moved ahead of their disk
// copies, and a periodic sweep of departed entries. Split
// into lock-guarded shards so readers on different threads rarely meet (see
// `Config.shardCount`).
//
// Why shards: a read must write (it moves the entry to the LRU head), so with one lock
// every read serialises. Sixteen shards cost a second hash of the key, which makes them a
// little dearer on one thread and cheaper from two threads on (Benchmarks/RESULTS.md,
// "Memory tier: 16 shards against one lock"). `Config.shardCount = 1` keeps the
// single-lock design available (the tests run both).
//
// The locks are `Locked` (pthread mutexes, which ThreadSanitizer sees; see
// Sources/HalcyonSupport/Locked.swift).

import Foundation
import HalcyonSupport
import Synchronization

/// The memory tier's namespace: `Config`, `Backend`, `Meta` and `Stats`.
public enum MemoryStorage {
    /// What a memory entry looks like without its bytes (for `cache.describe`).
    public struct Meta: Sendable, Equatable {
        /// Cost of the entry: its byte count.
        public var size: Int
        /// The entry's opaque flags.
        public var flags: UInt32
        /// The entry's lifetime: after it no read returns the entry from either tier;
        /// `Date.distantFuture` for never.
        public var expiration: Date
        /// When the memory copy leaves RAM unless read again (its residency); equal to
        /// `expiration` for an entry without a disk copy. The copy leaves at the earlier of
        /// the two.
        public var memoryExpiration: Date
        /// True when the entry has a disk copy (its lifetime then lives on after the memory
        /// copy leaves); false for an entry stored in memory only.
        public var hasDiskCopy: Bool
        /// The last store, read or touch.
        public var lastAccess: Date
        /// The entry's version (see `CacheEntry.version`).
        public var version: UInt64 = 0
        /// True when the lifetime ends at a fixed instant (stored or touched with `.date`):
        /// no sliding read moves it.
        public var isAbsolute: Bool = false
    }

    /// A snapshot of the tier's counters and occupancy.
    public struct Stats: Sendable, Equatable {
        /// Reads (`value`, `valueAndMeta`) that found a live entry.
        public var hits: Int
        /// Reads that found nothing or only an expired entry.
        public var misses: Int
        /// Entries dropped to respect `totalCostLimit` or `countLimit`.
        public var evictions: Int
        /// Entries dropped because their lifetime or residency ended (on read or by a sweep).
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
        /// Default 16 (1 = one global lock; why shards: the file's header).
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
        let state: Locked<LRUState>

        init(index: Int, oldestAccesses: OldestAccesses) {
            state = Locked(LRUState(shard: index, oldestAccesses: oldestAccesses))
        }
    }

    /// A shard's locked state as a key's lookup reaches it: without counting a reference.
    /// Both event loops look keys up in every shard, and a counted reference to the shard
    /// and to its lock is an atomic write to a line the other core writes too: two per
    /// lookup, and two more to let go (Benchmarks/RESULTS.md, "The clock per read burst;
    /// shard locks without counted references").
    ///
    /// Threading: as `Locked`. Valid while its backend lives, which owns the shard
    /// (`Backend.shards`); only the backend's own methods use it.
    struct ShardState: Sendable {
        let lock: Unmanaged<Locked<LRUState>>

        @inline(__always)
        func withLock<R>(_ body: (inout LRUState) throws -> R) rethrows -> R {
            try lock._withUnsafeGuaranteedRef { try $0.withLock(body) }
        }
    }

    /// The last access of each shard's least recently used entry, as each shard last
    /// published it: what eviction compares across the shards, without taking their locks
    /// or counting a reference to each.
    ///
    /// Threading: `@unchecked Sendable` because every element is an `Atomic`. An element is
    /// written only with its shard's lock held (`LRUState` publishes after each change of
    /// its oldest entry) and read from any thread, so a reader sees the value of some
    /// instant, which may be out of date by the time it acts on it.
    final class OldestAccesses: @unchecked Sendable {
        let count: Int
        /// Per shard, `Date.timeIntervalSinceReferenceDate` as its bit pattern; infinity
        /// when the shard is empty.
        private let slots: UnsafeMutablePointer<Atomic<UInt64>>

        init(count: Int) {
            self.count = count
            slots = .allocate(capacity: count)
            for i in 0..<count { (slots + i).initialize(to: Atomic(Double.infinity.bitPattern)) }
        }

        deinit {
            slots.deinitialize(count: count)
            slots.deallocate()
        }

        /// Publishes the last access of `shard`'s oldest entry; nil when it is empty.
        func publish(_ lastAccess: Date?, shard: Int) {
            slots[shard].store((lastAccess?.timeIntervalSinceReferenceDate ?? .infinity).bitPattern, ordering: .relaxed)
        }

        /// The shard whose published oldest entry is the least recently used, or nil when
        /// every shard is empty.
        func oldestShard() -> Int? {
            var pick: Int?
            var oldest = Double.infinity
            for i in 0..<count {
                let seconds = Double(bitPattern: slots[i].load(ordering: .relaxed))
                if seconds < oldest {
                    oldest = seconds
                    pick = i
                }
            }
            return pick
        }
    }

    /// The function the tier calls when write-backs become pending, held in a `let`.
    ///
    /// Why a class and not `Locked<(@Sendable () -> Void)?>`: `Locked.withLock` hands its
    /// body the value `inout` at generic abstraction, so a closure stored as `Value` is
    /// converted to its concrete form for the body and converted back when the access ends;
    /// each conversion wraps it in a reabstraction thunk and the write-back stores the
    /// wrapped closure. Every read made the handler two frames deeper, and under sustained
    /// evictions it grew until calling it dominated the CPU (and would in time overflow the
    /// stack). A class reference crosses the `inout` unchanged.
    ///
    /// Threading: immutable, so thread-safe.
    final class WriteBackHandler: Sendable {
        let call: @Sendable () -> Void

        init(call: @escaping @Sendable () -> Void) {
            self.call = call
        }
    }

    /// The disk copy a memory copy mirrors, and the entry's lifetime as the cache knows
    /// it (which may be ahead of that copy's times: see `WriteBack`).
    public struct Mirror: Sendable, Equatable {
        /// The entry's lifetime; nil = never expires.
        public var expiresAt: Date
        /// The entry's original time-to-live, which `.cacheTime` reads count again from
        /// the read's instant; nil when reads do not move the lifetime (never, or an
        /// absolute `expiresAt`).
        public var timeToLive: TimeInterval?
        /// The instant `expiresAt` was counted from.
        public var extendedAt: Date
        /// The disk copy's expiration as it stands in its file.
        public var diskExpiresAt: Date
        /// The extension the disk copy's file name was made with.
        public var forcedExtension: String?

        public init(
            expiresAt: Date, timeToLive: TimeInterval?, extendedAt: Date, diskExpiresAt: Date, forcedExtension: String?
        ) {
            self.expiresAt = expiresAt
            self.timeToLive = timeToLive
            self.extendedAt = extendedAt
            self.diskExpiresAt = diskExpiresAt
            self.forcedExtension = forcedExtension
        }
    }

    /// A lifetime the disk copy of `key` has not been given yet: the owner of the disk
    /// tier writes it into the file's times (expiration `expiresAt`, last access
    /// `extendedAt`, so the file keeps `timeToLive` for its own slides).
    public struct WriteBack: Sendable, Equatable {
        public var key: CacheKey
        public var forcedExtension: String?
        /// The memory node it came from; a newer node of the key supersedes it.
        public var generation: UInt64
        public var expiresAt: Date
        public var timeToLive: TimeInterval?
        public var extendedAt: Date

        public init(
            key: CacheKey, forcedExtension: String?, generation: UInt64 = 0, expiresAt: Date, timeToLive: TimeInterval?,
            extendedAt: Date
        ) {
            self.key = key
            self.forcedExtension = forcedExtension
            self.generation = generation
            self.expiresAt = expiresAt
            self.timeToLive = timeToLive
            self.extendedAt = extendedAt
        }
    }

    /// The memory tier.
    ///
    /// Threading: every method is thread-safe and synchronous; it runs on the caller's
    /// thread. Each shard's lock guards that shard's map, list and counters; the global
    /// cost and count are atomics, so the limits are global although the locks are not;
    /// `pending` (the write-back set) has its own lock, never taken inside a shard's. The
    /// namespace table's lock (`namespaces`) is held while each shard's lock is taken in
    /// turn to install a copy; otherwise at most one lock is held at a time, so nothing
    /// here can deadlock. The clean timer
    /// fires on `cleanQueue`. The only call out is the write-back handler, made with no
    /// lock held, when the pending set stops being empty.
    ///
    /// Lifetime and residency: an entry stored with `mirroring:` has a disk copy; its
    /// lifetime (`Meta.expiration`) is the entry's, and the memory expiration only bounds
    /// its residency (`Meta.memoryExpiration`). An extending read moves both, in memory
    /// only; when the lifetime has run ahead of the disk copy's by at least half of what
    /// it promises, or when the node leaves memory (eviction, residency end, `removeAll`,
    /// a memory-only `remove`), the node's lifetime goes into the pending set, for the
    /// owner of the disk tier to write back (`takeWriteBacks`). An entry stored without a
    /// mirror lives in memory only, and its memory expiration is its lifetime.
    ///
    /// Eviction order: when a store takes the tier over a limit, the victim is the oldest
    /// of the shards' least recently used entries, which is the globally least recently
    /// used entry whenever no other thread moves it meanwhile. Concurrent stores may each
    /// evict one entry more than strictly needed; the limits themselves hold once every
    /// store has returned.
    ///
    /// Namespace quotas (`setQuotas`): a node counts in the account of its key's namespace
    /// (`CacheKey.namespacePrefixLength`, looked up in the shard's copy of the table once,
    /// when it is stored; a tier with no account makes one emptiness check instead). When a
    /// store takes a namespace over its quota, the victims are that namespace's own least
    /// recently used entries, found as above among each shard's oldest node of the
    /// namespace, so no other namespace's entry goes; then the tier's limits apply as
    /// before, to every entry. Finding a shard's oldest node of a namespace walks from the
    /// cold end past the colder nodes of other namespaces: cheap while the namespace over
    /// its quota holds the cold end, as a namespace flooding the tier does, and a walk of
    /// the shard at worst. An entry larger than its namespace's quota is not stored.
    ///
    /// ```swift
    /// let memory = MemoryStorage.Backend(config: .init(totalCostLimit: 64 << 20))
    /// memory.store(CacheEntry(bytes: [1, 2, 3]), forKey: "k", expiration: .seconds(60))
    /// let entry = memory.value(forKey: "k")   // slides the expiration by default
    /// ```
    public final class Backend: Sendable {
        /// The settings fixed at init.
        public let config: Config
        let clock: any CacheClock
        let shards: [Shard]
        /// `shards`' locked states, reached by a key's lookup without counting a reference
        /// (`ShardState`); `shards` keeps them alive as long as this backend.
        private let states: [ShardState]
        /// Each shard's oldest entry's last access, for eviction (`enforceLimits`).
        private let oldestAccesses: OldestAccesses
        private let shardMask: Int
        private let globalCost = Atomic<Int>(0)
        private let globalCount = Atomic<Int>(0)
        private let generations = Atomic<UInt64>(0)
        /// The namespace accounts (`MemoryStorage+Namespaces.swift`); each shard holds a
        /// copy, installed under this lock, which is taken before a shard's, never inside one.
        let namespaces = Locked(NamespaceTable())
        /// True once a namespace is accounted: the one check of paths that need a table.
        let hasAccounts = Atomic<Bool>(false)
        /// The pending write-backs by key ("write-back set").
        private let pending = Locked<[CacheKey: WriteBack]>([:])
        /// Called (no lock held) when the write-back set stops being empty. The closure
        /// lives in a `let` of a non-generic class (`WriteBackHandler`), never as the
        /// `Value` of `Locked`: see `WriteBackHandler`.
        private let writeBackHandler = Locked<WriteBackHandler?>(nil)
        /// Serial queue the periodic clean timer fires on; it only calls `removeExpired`.
        private let cleanQueue = DispatchQueue(label: "halcyon.MemoryStorage.cleanQueue")
        private let cleanTimer: RepeatingTimer?

        /// Creates the tier and, when `cleanInterval > 0`, starts its clean timer.
        public init(config: Config) {
            self.config = config
            self.clock = config.clock
            var n = 1
            while n < max(1, config.shardCount) { n <<= 1 }
            let oldestAccesses = OldestAccesses(count: n)
            self.oldestAccesses = oldestAccesses
            self.shards = (0..<n).map { Shard(index: $0, oldestAccesses: oldestAccesses) }
            self.states = shards.map { ShardState(lock: .passUnretained($0.state)) }
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

        /// Installs the function told that write-backs are pending (the hybrid cache
        /// queues a drain). It must only hand off: it runs on whatever thread added the
        /// first pending write-back.
        public func setWriteBackHandler(_ handler: @escaping @Sendable () -> Void) {
            let slot = WriteBackHandler(call: handler)
            writeBackHandler.withLock { $0 = slot }
        }

        /// The state of the shard that holds `key` and the key's tag in that shard's index:
        /// one hash of the key picks both (the shard from its lower bits, the tag from its
        /// upper bits).
        @inline(__always)
        func locate(_ key: CacheKey) -> (state: ShardState, tag: UInt32) {
            let hash = key.hashValue
            return (states[hash & shardMask], SlotIndex.tag(of: hash))
        }

        private func nextGeneration() -> UInt64 {
            generations.add(1, ordering: .relaxed).newValue
        }

        // MARK: Writing

        /// Stores `entry` under `key` as an entry of the memory tier only, replacing any
        /// previous entry, and makes it the most recently used. Its memory expiration is
        /// its lifetime. Evicts least recently used entries while over a limit.
        ///
        /// - Parameters:
        ///   - expiration: counted from now; `nil` uses `config.expiration`.
        ///   - absolute: whether no read moves the lifetime; default
        ///     `expiration.isAbsolute` (false for a `.date` standing for the instant a
        ///     sliding lifetime has reached).
        /// - Returns: false when nothing was stored: the expiration is already over, or the
        ///   entry alone exceeds `totalCostLimit`. In both cases an older entry under `key`
        ///   is removed too, so a reader never sees a value older than this write.
        @discardableResult
        public func store(
            _ entry: CacheEntry, forKey key: CacheKey, expiration: StorageExpiration? = nil, absolute: Bool? = nil
        ) -> Bool {
            let expiration = expiration ?? config.expiration
            let now = clock.now()
            let expiresAt = expiration.estimatedExpirationSince(now)
            guard !expiration.isExpired, expiresAt > now else {
                remove(forKey: key)
                return false
            }
            return insert(Node(
                key: key, entry: entry,
                timeToLive: absolute ?? expiration.isAbsolute ? nil : expiration.timeToLive(from: now), expiresAt: expiresAt,
                extendedAt: now, residency: expiration, residentUntil: expiresAt, diskExpiresAt: nil,
                forcedExtension: nil, writeBackQueued: false, generation: nextGeneration(), lastAccess: now))
        }

        /// Stores `entry` under `key` as the resident copy of a disk entry: its lifetime is
        /// `mirror.expiresAt`, its residency `residency` (nil: `config.expiration`) counted
        /// from now. When the lifetime is already ahead of the disk copy by the write-back
        /// threshold, a write-back is queued at once.
        ///
        /// `countingSet`: the store also counts in its namespace's sets (`countSet`), stored
        /// or not, under the same lock hold.
        ///
        /// - Returns: false when nothing was stored (lifetime or residency already over,
        ///   or the entry alone exceeds `totalCostLimit`); an older entry is removed then.
        @discardableResult
        public func store(
            _ entry: CacheEntry, forKey key: CacheKey, residency: StorageExpiration?, mirroring mirror: Mirror,
            countingSet: Bool = false
        ) -> Bool {
            let residency = residency ?? config.expiration
            let now = clock.now()
            let residentUntil = residency.estimatedExpirationSince(now)
            guard !residency.isExpired, residentUntil > now, mirror.expiresAt > now else {
                if countingSet { countSet(forKey: key) }
                remove(forKey: key)
                return false
            }
            var node = Node(
                key: key, entry: entry, timeToLive: mirror.timeToLive, expiresAt: mirror.expiresAt,
                extendedAt: mirror.extendedAt, residency: residency, residentUntil: residentUntil,
                diskExpiresAt: mirror.diskExpiresAt, forcedExtension: mirror.forcedExtension, writeBackQueued: false,
                generation: nextGeneration(), lastAccess: now)
            let writeBack = Backend.writeBackDue(&node, now: now)
            guard insert(consume node, countingSet: countingSet) else { return false }
            if let writeBack { addPending([writeBack]) }
            return true
        }

        /// Stores `node` unless it alone exceeds the tier's limit or its namespace's quota
        /// (then an older entry of the key is removed too), then brings its namespace within
        /// its quota and the tier within its limits. `countingSet`: see `store(_:forKey:residency:mirroring:countingSet:)`.
        private func insert(_ node: consuming Node, countingSet: Bool = false) -> Bool {
            let key = node.key
            let cost = node.cost
            let generation = node.generation
            if config.totalCostLimit > 0 && cost > config.totalCostLimit {
                if countingSet { countSet(forKey: key) }
                remove(forKey: key)
                return false
            }
            // Moved into the shard, not copied: a copy of a node counts a reference for
            // each object it holds.
            var moving: Node? = consume node
            let located = locate(key)
            let stored = located.state.withLock { state -> (delta: (costDelta: Int, countDelta: Int), account: Account?)? in
                let id = state.accountID(forKey: key)
                let account = id == Account.none ? nil : state.accounts[Int(id)]
                if countingSet && id != Account.none { state.namespaceSets[Int(id)] += 1 }
                if let account {
                    let limit = account.limit.load(ordering: .relaxed)
                    if limit > 0 && cost > limit { return nil }
                }
                return (state.set(moving.take()!, tag: located.tag, account: id), account)
            }
            guard let stored else {
                remove(forKey: key)
                return false
            }
            globalCost.add(stored.delta.costDelta, ordering: .relaxed)
            globalCount.add(stored.delta.countDelta, ordering: .relaxed)
            dropPending(forKey: key, olderThan: generation)
            if let account = stored.account, account.isOverQuota { enforceQuota(account) }
            enforceLimits()
            return true
        }

        /// Gives `key` a new lifetime and restarts its residency, without reading it.
        ///
        /// - Parameters:
        ///   - expiration: the new memory expiration (residency; for a memory-only entry
        ///     also its lifetime); nil keeps the entry's own.
        ///   - mirror: for an entry with a disk copy, the copy's new lifetime (the disk was
        ///     touched too); nil for a memory-only entry, whose lifetime is then its new
        ///     memory expiration.
        /// - Returns: the new lifetime, or nil when the key is absent or gone (or was
        ///   removed because the new lifetime is already over).
        @discardableResult
        public func touch(forKey key: CacheKey, expiration residency: StorageExpiration? = nil, mirroring mirror: Mirror? = nil) -> Date? {
            let now = clock.now()
            let generation = nextGeneration()
            var departed: WriteBack?
            let located = locate(key)
            let (result, removedCost) = located.state.withLock { state -> (Date?, Int?) in
                guard let slot = state.slot(forKey: key, tag: located.tag) else { return (nil, nil) }
                if state[slot].leavesAt <= now {
                    state.expirations += 1
                    departed = state[slot].departureWriteBack(now: now)
                    return (nil, state.remove(slot))
                }
                let alive = state.withNode(slot) { node -> Bool in
                    let newResidency = residency ?? node.residency
                    node.residency = newResidency
                    node.residentUntil = newResidency.estimatedExpirationSince(now)
                    node.generation = generation
                    node.writeBackQueued = false
                    if let mirror, node.diskExpiresAt != nil {
                        node.expiresAt = mirror.expiresAt
                        node.timeToLive = mirror.timeToLive
                        node.extendedAt = mirror.extendedAt
                        node.diskExpiresAt = mirror.diskExpiresAt
                    } else if node.diskExpiresAt == nil {
                        node.expiresAt = node.residentUntil
                        node.timeToLive = newResidency.slidingTimeToLive(from: now)
                        node.extendedAt = now
                    }
                    return !newResidency.isExpired && node.leavesAt > now
                }
                if !alive { return (nil, state.remove(slot)) }
                return (state[slot].expiresAt, nil)
            }
            if let removedCost { accountRemoval(cost: removedCost, count: 1) }
            dropPending(forKey: key, olderThan: generation)
            if let departed { addPending([departed]) }
            return result
        }

        /// Removes `key`. Returns whether a live or expired entry was there.
        ///
        /// - Parameter writingBack: true when the disk copy stays (a memory-only removal):
        ///   a lifetime that ran ahead of it is then queued for write-back like any
        ///   departure. False (default) drops any pending write-back of `key` too: the
        ///   caller is replacing or removing the disk copy.
        @discardableResult
        public func remove(forKey key: CacheKey, writingBack: Bool = false) -> Bool {
            let now = clock.now()
            let located = locate(key)
            let removed = located.state.withLock { state -> (cost: Int, writeBack: WriteBack?)? in
                guard let slot = state.slot(forKey: key, tag: located.tag) else { return nil }
                let writeBack = writingBack ? state[slot].departureWriteBack(now: now) : nil
                return (state.remove(slot), writeBack)
            }
            if writingBack {
                if let writeBack = removed?.writeBack { addPending([writeBack]) }
            } else {
                dropPending(forKey: key, olderThan: .max)
            }
            guard let removed else { return false }
            accountRemoval(cost: removed.cost, count: 1)
            return true
        }

        /// Removes `key` as an expiration (counted in `Stats.expirations`, not as a removal):
        /// its lifetime was ended now by its owner (a touch with a lifetime already over).
        /// Drops any pending write-back of `key`. Returns whether an entry was there.
        @discardableResult
        public func expire(forKey key: CacheKey) -> Bool {
            let located = locate(key)
            let cost = located.state.withLock { state -> Int? in
                guard let slot = state.slot(forKey: key, tag: located.tag) else { return nil }
                state.expirations += 1
                return state.remove(slot)
            }
            dropPending(forKey: key, olderThan: .max)
            guard let cost else { return false }
            accountRemoval(cost: cost, count: 1)
            return true
        }

        /// Turns the resident copy of `key` into a memory-only entry, because its disk copy
        /// was removed and memory is all a read can answer from. It leaves when it would
        /// have anyway (the earlier of its lifetime and its residency); a read extends it
        /// by the shorter of its time-to-live and its residency span. Drops any pending
        /// write-back (there is no file to write it to). Returns whether a copy was there.
        @discardableResult
        public func detachFromDisk(forKey key: CacheKey) -> Bool {
            let now = clock.now()
            let located = locate(key)
            let found = located.state.withLock { state -> Bool in
                guard let slot = state.slot(forKey: key, tag: located.tag) else { return false }
                state.withNode(slot) { node in
                    guard node.diskExpiresAt != nil else { return }
                    let leaves = node.leavesAt
                    if node.timeToLive == nil, node.expiresAt != .distantFuture {
                        // Absolute: it stays so, ending at the earlier instant.
                        node.residency = .date(leaves)
                    } else {
                        let spans = [node.timeToLive, node.residency.timeToLive(from: now)].compactMap { $0 }
                        let span = spans.min()
                        node.timeToLive = span
                        node.residency = span.map { .seconds($0) } ?? .never
                    }
                    node.expiresAt = leaves
                    node.residentUntil = leaves
                    node.diskExpiresAt = nil
                    node.forcedExtension = nil
                    node.writeBackQueued = false
                }
                return true
            }
            dropPending(forKey: key, olderThan: .max)
            return found
        }

        /// Removes the memory-only entries whose key `matches` (a pure test: it runs under a
        /// shard's lock), all of them or, with `departedAt`, those whose lifetime ends at or
        /// before it or whose residency is over now (counted as expirations). For the
        /// copies of shared keys, which a clear or a removal of expired entries counts
        /// apart from the host's own. Returns their keys.
        public func removeMemoryOnly(where matches: (CacheKey) -> Bool, departedAt date: Date? = nil) -> [CacheKey] {
            let now = clock.now()
            var keys: [CacheKey] = []
            for shard in shards {
                let (count, cost) = shard.state.withLock { state -> (Int, Int) in
                    let candidates = date.map { state.departingSlots(lifetimeAt: $0, now: now) } ?? Array(state.allSlots)
                    var count = 0, cost = 0
                    for slot in candidates where state[slot].diskExpiresAt == nil && matches(state[slot].key) {
                        keys.append(state[slot].key)
                        cost += state.remove(slot)
                        count += 1
                    }
                    if date != nil { state.expirations += count }
                    return (count, cost)
                }
                accountRemoval(cost: cost, count: count)
            }
            return keys
        }

        /// Removes every entry. Returns how many there were (expired ones included).
        ///
        /// - Parameter writingBack: true when the disk copies stay (clearing the memory
        ///   tier only): lifetimes that ran ahead of them are queued for write-back. False
        ///   (default) also empties the pending set.
        @discardableResult
        public func removeAll(writingBack: Bool = false) -> Int {
            removeAll(writingBack: writingBack, countingCopies: nil).removed
        }

        /// `removeAll(writingBack:)`, also telling how many of the entries it removed were
        /// another tier's copies: memory-only entries whose key `isCopy` picks, as
        /// `removeMemoryOnly(where:)` picks them. Each shard is counted and emptied under
        /// one hold of its lock, so a copy stored meanwhile is either counted here or left
        /// for later.
        public func removeAll(writingBack: Bool, countingCopies isCopy: ((CacheKey) -> Bool)?) -> (removed: Int, copies: Int) {
            let now = clock.now()
            var removed = 0
            var copies = 0
            var writeBacks: [WriteBack] = []
            for shard in shards {
                let (count, cost) = shard.state.withLock { state -> (Int, Int) in
                    if writingBack {
                        for slot in state.allSlots {
                            if let writeBack = state[slot].departureWriteBack(now: now) { writeBacks.append(writeBack) }
                        }
                    }
                    if let isCopy {
                        for slot in state.allSlots where state[slot].diskExpiresAt == nil && isCopy(state[slot].key) {
                            copies += 1
                        }
                    }
                    let cost = state.totalCost
                    return (state.removeAll(), cost)
                }
                accountRemoval(cost: cost, count: count)
                removed += count
            }
            if writingBack {
                addPending(writeBacks)
            } else {
                pending.withLock { $0.removeAll() }
            }
            return (removed, copies)
        }

        /// Removes the entries whose lifetime ends at or before `referenceDate` (default:
        /// now) or whose residency is over now, and counts them as expirations. Lifetimes
        /// ahead of their disk copies are queued for write-back. Returns how many it removed.
        @discardableResult
        public func removeExpired(referenceDate: Date? = nil) -> Int {
            let now = clock.now()
            let date = referenceDate ?? now
            var removed = 0
            var writeBacks: [WriteBack] = []
            for shard in shards {
                let (count, cost) = shard.state.withLock { state -> (Int, Int) in
                    let slots = state.departingSlots(lifetimeAt: date, now: now)
                    var cost = 0
                    for slot in slots {
                        if let writeBack = state[slot].departureWriteBack(now: now) { writeBacks.append(writeBack) }
                        cost += state.remove(slot)
                    }
                    state.expirations += slots.count
                    return (slots.count, cost)
                }
                accountRemoval(cost: cost, count: count)
                removed += count
            }
            addPending(writeBacks)
            return removed
        }

        // MARK: Write-back

        /// Takes the pending set: for each key still resident with the same generation,
        /// the node's lifetime as it is now (the node then counts as written back); for a
        /// departed node, the lifetime it left with; a key since stored again is skipped.
        /// The caller must write every returned lifetime to the disk copy.
        public func takeWriteBacks() -> [WriteBack] {
            let taken = pending.withLock { set -> [WriteBack] in
                let all = Array(set.values)
                set.removeAll(keepingCapacity: true)
                return all
            }
            return taken.compactMap { record in
                let located = locate(record.key)
                return located.state.withLock { state -> WriteBack? in
                    guard let slot = state.slot(forKey: record.key, tag: located.tag) else { return record }
                    guard state[slot].generation == record.generation else { return nil }
                    return state.withNode(slot) { node in
                        node.writeBackQueued = false
                        node.diskExpiresAt = node.expiresAt
                        return node.writeBack()
                    }
                }
            }
        }

        /// Takes the pending set and every resident lifetime ahead of its disk copy (for
        /// a flush: a sweep, a shutdown). The nodes then count as written back.
        public func takeAllWriteBacks() -> [WriteBack] {
            var all = takeWriteBacks()
            for shard in shards {
                shard.state.withLock { state in
                    for slot in state.allSlots where state[slot].lagsDisk {
                        all.append(state.withNode(slot) { node in
                            node.writeBackQueued = false
                            node.diskExpiresAt = node.expiresAt
                            return node.writeBack()
                        })
                    }
                }
            }
            return all
        }

        /// Queues a write-back that no resident node tracks (a disk hit whose value memory
        /// could not keep). A store or touch of the key drops it.
        public func queueWriteBack(_ writeBack: WriteBack) {
            addPending([writeBack])
        }

        /// Whether a write-back of `key` is pending.
        public func hasPendingWriteBack(forKey key: CacheKey) -> Bool {
            pending.withLock { $0[key] != nil }
        }

        /// The keys of the live entries starting with `prefix` (lifetime judged at now,
        /// departed ones skipped), without touching, reordering or counting any. With
        /// `memoryOnly`, only entries without a disk copy. Unordered. For `cache.keys` and
        /// `cache.removePrefix`.
        public func keys(prefix: CacheKey, memoryOnly: Bool) -> [CacheKey] {
            let now = clock.now()
            var out: [CacheKey] = []
            for shard in shards {
                shard.state.withLock { state in
                    for slot in state.allSlots {
                        let node = state[slot]
                        guard node.key.hasPrefix(prefix), node.leavesAt > now,
                              !memoryOnly || node.diskExpiresAt == nil
                        else { continue }
                        out.append(node.key)
                    }
                }
            }
            return out
        }

        /// The resident entries that have a disk copy: key, file extension, lifetime and
        /// last access, so that disk maintenance can judge a file by what memory knows.
        public func residentDiskEntries() -> [(key: CacheKey, forcedExtension: String?, expiresAt: Date, lastAccess: Date)] {
            var out: [(key: CacheKey, forcedExtension: String?, expiresAt: Date, lastAccess: Date)] = []
            for shard in shards {
                shard.state.withLock { state in
                    for slot in state.allSlots where state[slot].diskExpiresAt != nil {
                        let node = state[slot]
                        out.append((node.key, node.forcedExtension, node.expiresAt, node.lastAccess))
                    }
                }
            }
            return out
        }

        func addPending(_ writeBacks: [WriteBack]) {
            guard !writeBacks.isEmpty else { return }
            let wasEmpty = pending.withLock { set -> Bool in
                let wasEmpty = set.isEmpty
                for writeBack in writeBacks { set[writeBack.key] = writeBack }
                return wasEmpty
            }
            if wasEmpty, let handler = writeBackHandler.withLock({ $0 }) { handler.call() }
        }

        private func dropPending(forKey key: CacheKey, olderThan generation: UInt64) {
            pending.withLock { set in
                // Most often empty: no hash of the key then.
                guard !set.isEmpty else { return }
                if let record = set[key], record.generation < generation { set[key] = nil }
            }
        }

        /// The write-back threshold. Marks `node` queued and returns its write-back when its
        /// lifetime is ahead of the disk copy and either ends earlier than the disk copy
        /// (a shortening must reach the disk soon) or the disk copy has at most half of the
        /// remaining lifetime left: a hot key costs about two file-time writes per TTL,
        /// whatever its read rate.
        static func writeBackDue(_ node: inout Node, now: Date) -> WriteBack? {
            guard !node.writeBackQueued, let disk = node.diskExpiresAt,
                  isWriteBackDue(expiresAt: node.expiresAt, diskExpiresAt: disk, now: now)
            else { return nil }
            node.writeBackQueued = true
            return node.writeBack()
        }

        /// The threshold itself (see `writeBackDue`), for a lifetime no node tracks.
        public static func isWriteBackDue(expiresAt: Date, diskExpiresAt disk: Date, now: Date) -> Bool {
            guard disk != expiresAt else { return false }
            return expiresAt < disk || disk.timeIntervalSince(now) <= expiresAt.timeIntervalSince(now) / 2
        }

        // MARK: Reading

        /// The entry under `key`, or nil when absent or gone (a departed entry is
        /// removed on the way). Counts a hit or a miss and marks the entry used now.
        ///
        /// - Parameter extendingExpiration: what the read does to the lifetime;
        ///   default `.cacheTime` (the original time-to-live restarts from now).
        public func value(forKey key: CacheKey, extendingExpiration: ExpirationExtending = .cacheTime) -> CacheEntry? {
            valueAndMeta(forKey: key, extendingExpiration: extendingExpiration)?.entry
        }

        /// Like `value(forKey:extendingExpiration:)`, also returning the entry's meta after
        /// the read's extension.
        ///
        /// - Parameter referenceDate: the instant the lifetime is judged at (default now):
        ///   an entry whose lifetime ends at or before it is a miss (and stays, unextended).
        ///   Residency is always judged now. Extensions count from now.
        public func valueAndMeta(
            forKey key: CacheKey, referenceDate: Date? = nil, extendingExpiration: ExpirationExtending = .cacheTime
        ) -> (entry: CacheEntry, meta: Meta)? {
            read(forKey: key, referenceDate: referenceDate, extendingExpiration: extendingExpiration) { state, slot in
                state.entryAndMeta(slot)
            }
        }

        /// What `lendValue` did with a hit.
        public enum Lent {
            /// `take` took what it needed from the lent entry.
            case taken
            /// `take` declined it: the entry copied, with its lifetime after the read's
            /// extension.
            case declined(CacheEntry, expiresAt: Date)
        }

        /// `valueAndMeta`'s read, lending the entry where it lies instead of returning it:
        /// `take` gets the entry (`LentEntry`) and its lifetime after the read's extension,
        /// and returns true when it took what it needed; otherwise the entry is copied out.
        /// Nil, and no call, when `valueAndMeta` would return nil.
        ///
        /// `take` runs under the shard's lock, with the bytes where they lie: a caller that
        /// only copies them out builds no result around them and counts no reference. It
        /// must be short, must not call back into this tier, and must not keep the bytes.
        ///
        /// `arrivedBy`: a reading of this tier's clock by which the request had arrived (see
        /// `HybridCache.Options.arrivedBy`); the hit is judged, marked used and extended at
        /// it, or at the entry's own last change or use when that is later. nil: now.
        @inline(__always)
        public func lendValue(
            forKey key: CacheKey, referenceDate: Date? = nil, extendingExpiration: ExpirationExtending = .cacheTime,
            arrivedBy: Date? = nil, taking take: (LentEntry, _ expiration: Date) -> Bool
        ) -> Lent? {
            read(
                forKey: key, referenceDate: referenceDate, extendingExpiration: extendingExpiration, arrivedBy: arrivedBy
            ) { state, slot in
                if state.lendEntry(slot, take) { return .taken }
                let (entry, expiresAt) = state.entryAndExpiration(slot)
                return .declined(entry, expiresAt: expiresAt)
            }
        }

        /// The read behind `valueAndMeta` and `lendValue`: judges the entry under `key`,
        /// counts the hit or miss, removes a departed entry, marks a hit used now and
        /// extends it, and answers a hit with `hit` of its slot, under the shard's lock.
        ///
        /// `arrivedBy`: see `lendValue`. Why an instant given rather than read here: each hit
        /// reading the clock was a visible share of a memory hit's CPU, and every request of
        /// one socket read arrived before a single reading taken after it; the later of it
        /// and the entry's own instants keeps every answer inside its request's interval.
        @inline(__always)
        private func read<R>(
            forKey key: CacheKey, referenceDate: Date?, extendingExpiration: ExpirationExtending, arrivedBy: Date? = nil,
            _ hit: (inout LRUState, Int32) -> R
        ) -> R? {
            let reading = arrivedBy ?? clock.now()
            var departed: (cost: Int, writeBack: WriteBack?)?
            var writeBack: WriteBack?
            let located = locate(key)
            let found = located.state.withLock { state -> R? in
                guard let slot = state.slot(forKey: key, tag: located.tag) else {
                    state.misses += 1
                    state.countNamespaceMiss(forKey: key)
                    return nil
                }
                let account = state[slot].account
                let now = arrivedBy == nil ? reading : state[slot].laterOf(reading)
                if state[slot].leavesAt <= now {
                    state.misses += 1
                    if account != Account.none { state.namespaceMisses[Int(account)] += 1 }
                    state.expirations += 1
                    let lagging = state[slot].departureWriteBack(now: now)
                    departed = (state.remove(slot), lagging)
                    return nil
                }
                if let referenceDate, state[slot].expiresAt <= referenceDate {
                    state.misses += 1
                    if account != Account.none { state.namespaceMisses[Int(account)] += 1 }
                    return nil
                }
                state.hits += 1
                if account != Account.none { state.namespaceHits[Int(account)] += 1 }
                state.touchRecency(slot, now: now)
                writeBack = state.withNode(slot) { Backend.extend(&$0, extendingExpiration, now: now) }
                return hit(&state, slot)
            }
            if let departed {
                accountRemoval(cost: departed.cost, count: 1)
                if let lagging = departed.writeBack { addPending([lagging]) }
            }
            if let writeBack { addPending([writeBack]) }
            return found
        }

        /// Applies a read's extension to `node`; returns a write-back when one is due.
        static func extend(_ node: inout Node, _ extending: ExpirationExtending, now: Date) -> WriteBack? {
            let expiration: StorageExpiration
            switch extending {
            case .none:
                return nil
            case .cacheTime:
                guard let span = node.timeToLive else {
                    // Never, or absolute: the lifetime stays; a resident copy's residency
                    // still restarts. Written only when it moves (a residency that never
                    // ends does not), so that a hit leaves the node's line as it was.
                    if node.diskExpiresAt != nil {
                        let until = node.residency.estimatedExpirationSince(now)
                        if until != node.residentUntil { node.residentUntil = until }
                    }
                    return nil
                }
                expiration = .seconds(span)
            case .expirationTime(let asked):
                expiration = asked
                node.timeToLive = asked.slidingTimeToLive(from: now)
            }
            node.extendedAt = now
            if node.diskExpiresAt == nil {
                // Memory only: the memory expiration is the lifetime.
                if case .expirationTime(let asked) = extending { node.residency = asked }
                node.expiresAt = expiration.estimatedExpirationSince(now)
                node.residentUntil = node.expiresAt
                return nil
            }
            // The same whole-second rounding the disk tier gives a stored expiration, so
            // that the lifetime reported now is the one the file will carry.
            node.expiresAt = Lifetime.end(of: expiration, from: now)
            node.residentUntil = node.residency.estimatedExpirationSince(now)
            return writeBackDue(&node, now: now)
        }

        /// Whether a live entry is under `key`. Never extends, never reorders, never counts.
        public func isCached(forKey key: CacheKey) -> Bool {
            meta(forKey: key) != nil
        }

        /// The meta of the live entry under `key`, judged at `referenceDate` (default now;
        /// residency always now). Never extends, never reorders, never counts; a departed
        /// entry is removed (and its lifetime queued for write-back).
        public func meta(forKey key: CacheKey, referenceDate: Date? = nil) -> Meta? {
            let now = clock.now()
            var departed: (cost: Int, writeBack: WriteBack?)?
            let located = locate(key)
            let found = located.state.withLock { state -> Meta? in
                guard let slot = state.slot(forKey: key, tag: located.tag) else { return nil }
                if state[slot].leavesAt <= now {
                    state.expirations += 1
                    let lagging = state[slot].departureWriteBack(now: now)
                    departed = (state.remove(slot), lagging)
                    return nil
                }
                if let referenceDate, state[slot].expiresAt <= referenceDate { return nil }
                return state.entryAndMeta(slot).meta
            }
            if let departed {
                accountRemoval(cost: departed.cost, count: 1)
                if let lagging = departed.writeBack { addPending([lagging]) }
            }
            return found
        }

        // MARK: Occupancy

        /// Sum of the entries' byte counts (departed entries not yet swept included).
        public var totalCost: Int { globalCost.load(ordering: .relaxed) }

        /// Number of entries (departed entries not yet swept included).
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

        func accountRemoval(cost: Int, count: Int) {
            guard count > 0 || cost > 0 else { return }
            globalCost.subtract(cost, ordering: .relaxed)
            globalCount.subtract(count, ordering: .relaxed)
        }

        private func overLimit() -> Bool {
            (config.totalCostLimit > 0 && globalCost.load(ordering: .relaxed) > config.totalCostLimit)
                || (config.countLimit > 0 && globalCount.load(ordering: .relaxed) > config.countLimit)
        }

        /// Evicts globally least recently used entries until under both limits. Picks the
        /// shard whose published oldest access (`OldestAccesses`) is the oldest, reading
        /// no lock, then evicts that shard's least recently used entry under its lock: one
        /// lock per eviction, not one per shard. An evicted lifetime is queued for
        /// write-back only when the write-back threshold says it is due, as for a resident
        /// entry: under sustained evictions every disk hit evicts another entry, and writing
        /// back a few seconds' slide of a days-long lifetime each time would double the
        /// journal's records for nothing.
        private func enforceLimits() {
            var writeBacks: [WriteBack] = []
            while overLimit() {
                guard let victim = oldestAccesses.oldestShard() else { break }
                guard evictPick(in: shards[victim], { $0.oldest }, writeBacks: &writeBacks) else {
                    // The shard emptied between the read and the lock, and published so
                    // before unlocking; the shards' own locks settle the rest.
                    addPending(writeBacks)
                    evict(while: overLimit) { $0.oldest }
                    return
                }
            }
            addPending(writeBacks)
        }

        /// Evicts, while `over()`, the oldest of the nodes `candidate` picks in each shard
        /// (the least recently used of one namespace, or of all when `enforceLimits` finds
        /// its pick gone): peeks at every shard under its lock
        /// (one lock at a time), then evicts the oldest pick if it is still its shard's
        /// pick. `candidate` runs under the shard's lock (`inout`: no copy of the shard's
        /// state).
        func evict(while over: () -> Bool, _ candidate: (inout LRUState) -> (slot: Int32, lastAccess: Date)?) {
            var writeBacks: [WriteBack] = []
            while over() {
                var victim: (shard: Shard, lastAccess: Date)?
                for shard in shards {
                    if let oldest = shard.state.withLock({ candidate(&$0) }),
                       victim == nil || oldest.lastAccess < victim!.lastAccess
                    {
                        victim = (shard, oldest.lastAccess)
                    }
                }
                guard let victim else { break }
                evictPick(in: victim.shard, candidate, writeBacks: &writeBacks)
            }
            addPending(writeBacks)
        }

        /// Evicts the node `candidate` picks in `shard` now, if any, under the shard's
        /// lock; counts the eviction in the tier and in the node's namespace, and adds the
        /// node's due write-back to `writeBacks`. Returns whether a node was evicted.
        @discardableResult
        private func evictPick(
            in shard: Shard, _ candidate: (inout LRUState) -> (slot: Int32, lastAccess: Date)?,
            writeBacks: inout [WriteBack]
        ) -> Bool {
            let now = clock.now()
            let cost = shard.state.withLock { state -> Int? in
                guard let oldest = candidate(&state) else { return nil }
                state.evictions += 1
                let account = state[oldest.slot].account
                if account != Account.none { state.accounts[Int(account)].evictions.add(1, ordering: .relaxed) }
                if let writeBack = state[oldest.slot].departureWriteBack(now: now) { writeBacks.append(writeBack) }
                return state.remove(oldest.slot)
            }
            guard let cost else { return false }
            accountRemoval(cost: cost, count: 1)
            return true
        }
    }
}

/// Lifetime arithmetic shared by the tiers.
enum Lifetime {
    /// The instant `expiration` counted from `now` ends, rounded up to a whole second as
    /// the disk tier stores it (`FileTimes.planned`); `now` itself when already over.
    static func end(of expiration: StorageExpiration, from now: Date) -> Date {
        FileTimes.planned(expiration, now: now)?.expirationDate ?? now
    }
}
