// The home of shared keys (keys that live in an `Upstream.Tier`): which keys are shared,
// the per-key order of their operations, and the rule that decides whether a copy read
// from or written to the upstream may be kept in the memory tier. The operations are in
// SharedStore+Operations.swift (reads and writes), SharedStore+Keys.swift (listing, lease
// status) and SharedStore+Leases.swift.

import Foundation
import HalcyonSupport

/// What the hybrid cache needs to share keys with other hosts.
public struct UpstreamConfig: Sendable {
    /// The shared store.
    public var tier: any Upstream.Tier
    /// Only keys starting with one of these are shared; empty = every key. With
    /// `namespaced`, a key's bytes after its namespace are matched (see there).
    public var prefixes: [CacheKey]
    /// Whether stored keys carry a namespace (`Namespace`; the daemon runs with
    /// `--access`). Then `prefixes` are matched against a key within its namespace, the
    /// key as its client sent it, so one prefix list means the same in every namespace
    /// and on every host with the same rules; the key kept upstream is still the stored
    /// key, namespace included, so namespaces never meet in the upstream. Default false:
    /// every byte of a key is matched, U+001F included.
    public var namespaced = false
    /// How many callers of this host may wait on shared leases at once; one more is
    /// refused (`CacheError.tooManyLeaseWaiters`), so the watch table is bounded. Default
    /// 16384, as `Leases.Limits.waiters`.
    public var leaseWaitersLimit = 16384

    public init(tier: any Upstream.Tier, prefixes: [CacheKey] = []) {
        self.tier = tier
        self.prefixes = prefixes
    }
}

/// Counters of the shared keys (part of `CacheStats`).
public struct UpstreamStats: Sendable, Equatable {
    /// Reads of a shared key answered by the upstream (the value was there).
    public var hits = 0
    /// Reads of a shared key the upstream had nothing for.
    public var misses = 0
    /// Keys named by invalidations from the upstream (changed by another host or client,
    /// expired or evicted there).
    public var invalidations = 0
    /// Flushes: every shared copy dropped (a lost connection, a server flush).
    public var flushes = 0
    /// Calls that failed because the upstream could not be reached (reads then miss,
    /// writes fail with `upstreamUnavailable`).
    public var unavailable = 0
    /// Calls the upstream refused.
    public var refused = 0
    /// Callers that would have waited on a shared lease, refused at `leaseWaitersLimit`.
    public var leaseWaitersRefused = 0
    /// Copies not kept because an invalidation or flush numbered after them had arrived.
    public var staleCopiesRefused = 0
    /// Operations on shared keys that waited behind an earlier write of the same key.
    public var queuedBehindWrite = 0
    /// Renewals of lifetimes sent upstream (a read of a copy with less than half of its
    /// sliding lifetime left, or a read asking a new lifetime: `renewalDue`), and those
    /// that found the key changed meanwhile.
    public var slides = 0
    public var slidesRefused = 0

    public init() {}
}

/// The shared keys of one hybrid cache: the per-key order of their operations, the
/// copies of them the memory tier may keep, and the operations on them. Reached only
/// through `HybridCache`, which decides that a key lives here (`shares`).
///
/// **Order.** Every operation on a shared key is admitted here before it starts. A write
/// starts when every earlier operation on the key has finished; a read starts at once
/// unless a write of the key is running or waiting, in which case it queues behind that
/// write (first in, first out). So on one connection each request sees exactly the
/// requests before it, and a read never answers from a copy older or newer than the
/// writes ahead of it. Keys with nothing running have no entry.
///
/// **Copies.** The upstream numbers its replies and its events from one counter. A copy
/// read (or written) at number *n* is stored in memory only if no invalidation of its key
/// and no flush numbered above *n* has been seen; an invalidation arriving later removes
/// it. Both happen under `state`'s lock, so no event can fall between the check and the
/// store. An invalidation of a key with no operation running needs no record: any later
/// reply carries a greater number.
///
/// **Memory.** The copies live in the memory tier as memory-only entries, written only
/// through `MemoryStorage.Copies` (keep, drop); the local store never writes a shared
/// key, because the façade never places one there.
///
/// Threading: thread-safe; `state` (a `Locked`) guards the table and the flush mark, and
/// is held across the memory tier's store and removal of shared copies (the memory tier
/// never calls back: this lock, then a memory shard's, is the only nesting). Start
/// closures run outside the lock, on the thread that admitted or finished.
final class SharedStore: Upstream.Observer, DeliversTasks, Sendable {
    typealias Options = HybridCache.Options
    typealias StoreResult = HybridCache.StoreResult
    typealias RetrieveResult = HybridCache.RetrieveResult
    typealias EntryDescription = HybridCache.EntryDescription
    typealias TouchResult = HybridCache.TouchResult
    typealias ConditionalStoreResult = HybridCache.ConditionalStoreResult
    typealias IncrementOutcome = HybridCache.IncrementOutcome
    typealias KeyPage = HybridCache.KeyPage
    typealias MemoryLookup = HybridCache.MemoryLookup

    /// A key with operations running or waiting.
    struct KeyState {
        var readers = 0
        var writing = false
        var waiting: [(write: Bool, start: @Sendable () -> Void)] = []
        /// The greatest invalidation of this key seen while operations were running.
        var invalidatedAt: UInt64 = 0
        /// Prefix removals this key came under after they were admitted: nothing starts
        /// until each has finished (`finishPrefix`).
        var holds = 0

        var writePending: Bool { writing || holds > 0 || waiting.contains { $0.write } }
        var idle: Bool { readers == 0 && !writing && holds == 0 && waiting.isEmpty }
    }

    /// A prefix removal admitted and not finished: the keys it waits for or runs as a
    /// write of (`admitted`: they had operations when it came) and the keys whose first
    /// operation came after it (`held`: they wait for it).
    struct PrefixRemoval {
        var prefix: CacheKey
        var admitted: Set<CacheKey>
        var held: Set<CacheKey> = []
    }

    /// The callers waiting for lease keys to change, by lease key, with an index by data
    /// key and their count, so that adding, withdrawing, waking and counting a watch cost
    /// the same however many callers wait. A data key has one lease key (`KeyLayout`), so a
    /// lease key's watches are all for one data key. A value, changed under `state`'s lock.
    struct LeaseWatches {
        typealias Watch = (key: CacheKey, token: String, wake: @Sendable () -> Void)
        private var byLeaseKey: [CacheKey: [Watch]] = [:]
        private var leaseKeyOf: [CacheKey: CacheKey] = [:]
        /// Watches kept: one per waiting caller.
        private(set) var count = 0

        mutating func add(leaseKey: CacheKey, _ watch: Watch) {
            byLeaseKey[leaseKey, default: []].append(watch)
            leaseKeyOf[watch.key] = leaseKey
            count += 1
        }

        /// Removes the watch of the attempt with `token` on `key`'s lease, unwoken.
        mutating func withdraw(key: CacheKey, token: String) {
            guard let leaseKey = leaseKeyOf[key], let watches = byLeaseKey[leaseKey] else { return }
            let kept = watches.filter { $0.token != token }
            if kept.isEmpty { return drop(leaseKey) }
            count -= watches.count - kept.count
            byLeaseKey[leaseKey] = kept
        }

        /// Removes and returns the wake-ups of everyone waiting on `leaseKey`.
        mutating func take(leaseKey: CacheKey) -> [@Sendable () -> Void] {
            guard let watches = byLeaseKey[leaseKey] else { return [] }
            drop(leaseKey)
            return watches.map(\.wake)
        }

        /// Removes and returns the wake-ups of everyone waiting on `key`'s lease.
        mutating func take(key: CacheKey) -> [@Sendable () -> Void] {
            guard let leaseKey = leaseKeyOf[key] else { return [] }
            return take(leaseKey: leaseKey)
        }

        /// Removes and returns every wake-up.
        mutating func takeAll() -> [@Sendable () -> Void] {
            defer { self = LeaseWatches() }
            return byLeaseKey.values.flatMap { $0.map(\.wake) }
        }

        /// Callers waiting on `key`'s lease.
        func count(forKey key: CacheKey) -> Int {
            leaseKeyOf[key].flatMap { byLeaseKey[$0]?.count } ?? 0
        }

        private mutating func drop(_ leaseKey: CacheKey) {
            guard let watches = byLeaseKey.removeValue(forKey: leaseKey) else { return }
            count -= watches.count
            if let key = watches.first?.key { leaseKeyOf[key] = nil }
        }
    }

    struct State {
        var keys: [CacheKey: KeyState] = [:]
        /// The greatest flush seen.
        var flushedAt: UInt64 = 0
        var stats = UpstreamStats()
        /// Callers waiting for a lease key to change (its holder released it, it expired,
        /// a flush), by lease key, with the data key they wait for and the token of their
        /// attempt (which `withdrawWatch` names). Only callers that wait have one, and it
        /// goes when they are woken or stop waiting, so it holds at most one entry per
        /// waiting caller.
        var leaseWatches = LeaseWatches()
        /// Releases that could not reach the upstream, by key: the token to give back
        /// (compare-and-delete) once it can be reached again.
        var pendingReleases: [CacheKey: String] = [:]
        var releaseRetryScheduled = false
        /// Lease attempts on their way: while any is, invalidations are remembered in
        /// `recentChanges`, so an attempt whose `held` reply comes after the release's
        /// invalidation sees it. Emptied when no attempt is on its way.
        var leaseAttempts = 0
        var recentChanges: [CacheKey: UInt64] = [:]
        /// Shared leases taken through this host, by key: the token and the owner (a
        /// connection) that took it, so they can be given back when the owner goes away.
        var leaseHolders: [CacheKey: (token: String, owner: UInt64)] = [:]
        /// The sliding lifetime (milliseconds) of the copies written with one, and the keys
        /// whose slide is on its way upstream.
        var slides: [CacheKey: Int64] = [:]
        var sliding: Set<CacheKey> = []
        /// Prefix removals admitted and not finished, by id.
        var prefixRemovals: [UInt64: PrefixRemoval] = [:]
        var lastPrefixRemoval: UInt64 = 0
    }

    /// The lifetimes a store without its own takes: the disk tier's default when it
    /// asks for a disk copy (`toDisk`), else the memory tier's; the same rule as a local
    /// store's, so a key's lifetime does not depend on its placement.
    struct Defaults: Sendable {
        var disk: StorageExpiration
        var memory: StorageExpiration
    }

    let tier: any Upstream.Tier
    let prefixes: [CacheKey]
    /// `UpstreamConfig.namespaced`.
    let namespaced: Bool
    let leaseWaitersLimit: Int
    /// This host's copies of shared keys, in the memory tier.
    let copies: MemoryStorage.Copies
    /// The cache's request counters (shared with the local store: sets, removals).
    let counters: Locked<CacheStats>
    let clock: any CacheClock
    let defaults: Defaults
    private let state = Locked(State())

    init(
        config: UpstreamConfig, copies: MemoryStorage.Copies, counters: Locked<CacheStats>, clock: any CacheClock,
        defaults: Defaults
    ) {
        tier = config.tier
        prefixes = config.prefixes
        namespaced = config.namespaced
        leaseWaitersLimit = config.leaseWaitersLimit
        self.copies = copies
        self.counters = counters
        self.clock = clock
        self.defaults = defaults
    }

    /// Whether the stored `key` is shared: whether it, or with `namespaced` its bytes
    /// after its namespace, starts with one of `prefixes`. `HybridCache.placement` asks
    /// it for every key it places; this store asks it only to tell its own copies from
    /// the local store's entries in the memory tier, so the two always agree.
    func shares(_ key: CacheKey) -> Bool {
        guard !prefixes.isEmpty else { return true }
        let start = namespaced ? key.namespacePrefixLength ?? 0 : 0
        return prefixes.contains { key.hasPrefix($0, from: start) }
    }

    /// Whether some shared key may start with the stored prefix `prefix`. With
    /// `namespaced`, a prefix that names a namespace is matched by its bytes after it; a
    /// prefix that could still be the start of a namespace name (an admin's, in the whole
    /// keyspace) may cover keys of every namespace.
    func mayShare(prefix: CacheKey) -> Bool {
        guard !prefixes.isEmpty else { return true }
        guard namespaced else { return mayMatchPrefix(prefix) }
        if let length = prefix.namespacePrefixLength {
            return mayMatchPrefix(CacheKey(utf8: prefix.utf8.dropFirst(length)))
        }
        let couldBeginName = prefix.count <= Namespace.maxNameBytes && prefix.utf8.allSatisfy(Namespace.isNameByte)
        return couldBeginName || mayMatchPrefix(prefix)
    }

    private func mayMatchPrefix(_ prefix: CacheKey) -> Bool {
        prefixes.contains { $0.hasPrefix(prefix) || prefix.hasPrefix($0) }
    }

    var stats: UpstreamStats { state.withLock { $0.stats } }

    func count(_ change: (inout UpstreamStats) -> Void) {
        state.withLock { change(&$0.stats) }
    }

    // MARK: Order

    /// Whether a write of `key` is running or waiting: a read must then queue.
    func writePending(_ key: CacheKey) -> Bool {
        state.withLock { state in
            state.keys[key]?.writePending ?? state.prefixRemovals.values.contains { key.hasPrefix($0.prefix) }
        }
    }

    /// Runs `start` when the key's order allows (now, on this thread, or later, on the
    /// thread that finishes the operation ahead). Each admitted operation must `finish`.
    func admit(_ key: CacheKey, write: Bool, _ start: @escaping @Sendable () -> Void) {
        if state.withLock({ enqueue(key, write: write, start, &$0) }) { start() }
    }

    /// Runs `start` once a write of every key in `keys` may start, as if each were
    /// `admit`ted as a write; all are queued under one lock, so two such groups always
    /// queue in the same order on the keys they share and can never wait on each other.
    /// Each distinct key must `finish` (as a write).
    func admitWrites(_ keys: Set<CacheKey>, _ start: @escaping @Sendable () -> Void) {
        let ready = state.withLock { admitWrites(keys, start, &$0) }
        if ready { start() }
    }

    /// `admitWrites` inside the lock; true when `start` must run now (after the lock).
    private func admitWrites(_ keys: Set<CacheKey>, _ start: @escaping @Sendable () -> Void, _ state: inout State) -> Bool {
        guard !keys.isEmpty else { return true }
        let left = Locked(keys.count)
        let one: @Sendable () -> Void = {
            if left.withLock({ left -> Bool in
                left -= 1
                return left == 0
            }) { start() }
        }
        let ready = keys.filter { enqueue($0, write: true, one, &state) }.count
        return ready > 0 && left.withLock { left -> Bool in
            left -= ready
            return left == 0
        }
    }

    /// Runs `start(id)` once every operation admitted so far on a key starting with
    /// `prefix` has finished; from this call until `finishPrefix(id)`, every operation on
    /// such a key, including keys with nothing running now, waits for it. So a prefix
    /// removal sees exactly the writes before it on its connection, and no write after it.
    func admitPrefix(_ prefix: CacheKey, _ start: @escaping @Sendable (UInt64) -> Void) {
        let (id, ready) = state.withLock { state -> (UInt64, Bool) in
            state.lastPrefixRemoval += 1
            let id = state.lastPrefixRemoval
            let keys = Set(state.keys.keys.filter { $0.hasPrefix(prefix) })
            state.prefixRemovals[id] = PrefixRemoval(prefix: prefix, admitted: keys)
            return (id, admitWrites(keys, { start(id) }, &state))
        }
        if ready { start(id) }
    }

    /// Ends a prefix removal: its keys' next operations may start.
    func finishPrefix(_ id: UInt64) {
        let next = state.withLock { state -> [@Sendable () -> Void] in
            guard let removal = state.prefixRemovals.removeValue(forKey: id) else { return [] }
            var starting: [@Sendable () -> Void] = []
            for key in removal.admitted { starting += release(key, &state) { $0.writing = false } }
            for key in removal.held { starting += release(key, &state) { $0.holds -= 1 } }
            return starting
        }
        for start in next { start() }
    }

    /// Admits now (true) or queues `start` (false); inside the lock.
    private func enqueue(_ key: CacheKey, write: Bool, _ start: @escaping @Sendable () -> Void, _ state: inout State) -> Bool {
        var entry: KeyState
        if let existing = state.keys[key] {
            entry = existing
        } else {
            // A key with nothing running: it waits for the prefix removals it falls under.
            entry = KeyState()
            for (id, removal) in state.prefixRemovals where key.hasPrefix(removal.prefix) {
                entry.holds += 1
                state.prefixRemovals[id]!.held.insert(key)
            }
        }
        defer { state.keys[key] = entry }
        let free = entry.holds == 0 && (write ? (entry.readers == 0 && !entry.writing && entry.waiting.isEmpty)
            : (!entry.writing && entry.waiting.isEmpty))
        if free {
            if write { entry.writing = true } else { entry.readers += 1 }
            return true
        }
        entry.waiting.append((write, start))
        if entry.writePending { state.stats.queuedBehindWrite += 1 }
        return false
    }

    /// Ends an admitted operation and starts what may follow it.
    func finish(_ key: CacheKey, write: Bool) {
        let next = state.withLock { state in
            release(key, &state) { entry in
                if write { entry.writing = false } else { entry.readers -= 1 }
            }
        }
        for start in next { start() }
    }

    /// Applies `change` to `key`'s entry and admits what may start now (returned, to run
    /// after the lock); an idle entry goes. Inside the lock.
    private func release(_ key: CacheKey, _ state: inout State, _ change: (inout KeyState) -> Void) -> [@Sendable () -> Void] {
        guard var entry = state.keys[key] else { return [] }
        change(&entry)
        var starting: [@Sendable () -> Void] = []
        while entry.holds == 0, let head = entry.waiting.first {
            if head.write {
                guard entry.readers == 0, !entry.writing, starting.isEmpty else { break }
                entry.writing = true
            } else {
                guard !entry.writing else { break }
                entry.readers += 1
            }
            starting.append(head.start)
            entry.waiting.removeFirst()
            if head.write { break }
        }
        state.keys[key] = entry.idle ? nil : entry
        return starting
    }

    // MARK: Copies

    /// Keeps `entry` as this host's copy of `key`, living `timeToLive` milliseconds (nil:
    /// until invalidated or evicted), unless an invalidation or flush numbered after
    /// `sequence` has been seen; then any older copy goes instead. `sliding`: the sliding
    /// lifetime it was written with (`Upstream.Lifetime.sliding`), which reads renew.
    func keep(_ key: CacheKey, _ entry: CacheEntry, timeToLive: Int64?, sequence: UInt64, sliding: Int64? = nil) {
        state.withLock { state in
            let invalidated = state.keys[key]?.invalidatedAt ?? 0
            guard sequence >= state.flushedAt, sequence >= invalidated else {
                state.stats.staleCopiesRefused += 1
                remove(key, &state)
                return
            }
            copies.keep(entry, forKey: key, expiration: SharedStore.expiration(timeToLive))
            remember(sliding, of: key, &state)
        }
    }

    /// A copy's lifetime for the upstream key's PTTL (milliseconds; nil: no end).
    private static func expiration(_ timeToLive: Int64?) -> StorageExpiration {
        timeToLive.map { .seconds(Double(max($0, 1)) / 1000) } ?? .never
    }

    /// Records the sliding lifetime `key`'s copy renews (none: nil), within `slidesBound`.
    private func remember(_ sliding: Int64?, of key: CacheKey, _ state: inout State) {
        if sliding != nil, state.slides.count >= SharedStore.slidesBound { forgetEvictedSlides(&state) }
        state.slides[key] = sliding
    }

    /// Drops this host's copy of `key` (a write whose outcome is not known, a change the
    /// reply did not describe).
    func drop(_ key: CacheKey) {
        state.withLock { remove(key, &$0) }
    }

    private func remove(_ key: CacheKey, _ state: inout State) {
        copies.drop(key)
        state.slides[key] = nil
    }

    /// Drops this host's copies of shared keys (with `departedAt`, only those over by
    /// then, as expirations), for a clear or a removal of expired entries; the keys stay
    /// upstream. Returns how many copies went.
    func dropCopies(departedAt date: Date? = nil) -> Int {
        state.withLock { state in
            let dropped = copies.drop(where: shares, departedAt: date)
            for key in dropped { state.slides[key] = nil }
            return dropped.count
        }
    }

    // MARK: Sliding lifetimes

    /// How many sliding lifetimes are remembered before those of copies no longer in
    /// memory (evicted) are forgotten.
    static let slidesBound = 65_536

    private func forgetEvictedSlides(_ state: inout State) {
        state.slides = state.slides.filter { copies.holds($0.key) }
    }

    /// A read of this host's copy of `key`, `remaining` seconds from its end: the sliding
    /// lifetime to renew upstream now, or nil. Due when less than half
    /// of the sliding lifetime is left and no renewal of the key is on its way, so a key
    /// read steadily is renewed at most once per half lifetime, per host.
    func slideDue(_ key: CacheKey, remaining: TimeInterval) -> Int64? {
        state.withLock { state in
            guard let sliding = state.slides[key], !state.sliding.contains(key),
                  remaining * 1000 < Double(sliding) / 2 else { return nil }
            state.sliding.insert(key)
            state.stats.slides += 1
            return sliding
        }
    }

    /// A read of this host's copy of `key` that asked for the lifetime `asked` (ending at
    /// `askedEnd`, `.distantFuture` for none) when the copy ends at `copyEnd`: true, with
    /// the renewal counted and marked on its way, when one is due: when the sliding span
    /// changes, when the asked end comes before the copy's (beyond a twentieth of the asked
    /// lifetime, and 10 ms: the PTTL's rounding), or when the copy has at most half of the
    /// asked lifetime left. The disk tier writes its file times back by the same halves,
    /// so that a key read this way at any rate costs about two renewals per lifetime
    /// rather than a round trip per read.
    func renewalDue(_ key: CacheKey, asked: Upstream.Lifetime, askedEnd: Date, copyEnd: Date, now: Date) -> Bool {
        let wanted = askedEnd.timeIntervalSince(now), left = copyEnd.timeIntervalSince(now)
        let shortens = wanted < left - max(0.010, wanted / 20)
        return state.withLock { state in
            guard !state.sliding.contains(key),
                  state.slides[key] != asked.slidingMilliseconds || shortens || left <= wanted / 2
            else { return false }
            state.sliding.insert(key)
            state.stats.slides += 1
            return true
        }
    }

    /// A renewal of `key`'s lifetime (`slideDue`, `renewalDue`) came back: `.renewed` with
    /// the key's new PTTL; `.changed` when it held something else by then, or a lifetime
    /// another client set; nil when the call failed. Renewed, the copy of `version`, if
    /// still here (the renewal's own invalidation usually removes it first: its push comes
    /// before this reply on the same connection), lives as long as the key now, and its
    /// reads renew `sliding`. Otherwise they renew nothing more (a new copy brings its own
    /// sliding lifetime).
    func renewalEnded(_ key: CacheKey, version: UInt64, sliding: Int64?, _ renewal: Upstream.Renewal?) {
        state.withLock { state in
            state.sliding.remove(key)
            guard case .renewed(let timeToLive)? = renewal else {
                state.stats.slidesRefused += 1
                state.slides[key] = nil
                return
            }
            remember(sliding, of: key, &state)
            guard let (copy, _) = copies.copy(forKey: key), copy.version == version else { return }
            copies.keep(copy, forKey: key, expiration: SharedStore.expiration(timeToLive))
        }
    }

    // MARK: Leases

    /// Counts a lease attempt on its way upstream; `watch` or `endAttempt` ends it.
    func beginLeaseAttempt() {
        state.withLock { $0.leaseAttempts += 1 }
    }

    /// `owner` took `key`'s lease with `token` through this host.
    func leaseTaken(_ key: CacheKey, token: String, owner: UInt64) {
        state.withLock { $0.leaseHolders[key] = (token, owner) }
    }

    /// A release of `key`'s lease by `token` was asked for: it is no longer this host's to
    /// give back when its owner goes.
    func leaseGivenBack(_ key: CacheKey, token: String) {
        state.withLock { state in
            if state.leaseHolders[key]?.token == token { state.leaseHolders[key] = nil }
        }
    }

    /// `owner` went away: its shared leases, for the caller to give back. (A grant still on
    /// its way to it is given back by the caller that asked, which has been cancelled.)
    func ownerGone(_ owner: UInt64) -> [(key: CacheKey, token: String)] {
        state.withLock { state in
            let held = state.leaseHolders.filter { $0.value.owner == owner }
            for key in held.keys { state.leaseHolders[key] = nil }
            return held.map { ($0.key, $0.value.token) }
        }
    }

    /// After a `held` reply numbered `sequence` to the attempt with `token`: `wake` runs
    /// once when `leaseKey` next changes (or at once, when it changed after the reply
    /// already, or a flush came), unless `withdrawWatch` takes it back first. False, with
    /// nothing kept, when `leaseWaitersLimit` callers wait already.
    func watch(leaseKey: CacheKey, of key: CacheKey, token: String, sequence: UInt64, _ wake: @escaping @Sendable () -> Void) -> Bool {
        let (kept, now) = state.withLock { state -> (Bool, Bool) in
            defer { endAttempt(&state) }
            if (state.recentChanges[leaseKey] ?? 0) > sequence || state.flushedAt > sequence { return (true, true) }
            guard state.leaseWatches.count < leaseWaitersLimit else {
                state.stats.leaseWaitersRefused += 1
                return (false, false)
            }
            state.leaseWatches.add(leaseKey: leaseKey, (key, token, wake))
            return (true, false)
        }
        if now { wake() }
        return kept
    }

    /// The caller of the attempt with `token` on `key`'s lease stopped waiting (answered,
    /// timed out, cancelled): its watch goes, unwoken.
    func withdrawWatch(of key: CacheKey, token: String) {
        state.withLock { $0.leaseWatches.withdraw(key: key, token: token) }
    }

    /// A release of `key`'s lease by `token` could not reach the upstream: it is retried
    /// (`retryReleases`) until the upstream answers. True when a retry must be scheduled
    /// (none is yet).
    func releaseFailed(_ key: CacheKey, token: String) -> Bool {
        state.withLock { state in
            state.pendingReleases[key] = token
            defer { state.releaseRetryScheduled = true }
            return !state.releaseRetryScheduled
        }
    }

    /// The releases still to retry (emptied: each that fails again comes back through
    /// `releaseFailed`); when there are none, no retry is scheduled any more.
    func takePendingReleases() -> [(key: CacheKey, token: String)] {
        state.withLock { state in
            let pending = state.pendingReleases.map { ($0.key, $0.value) }
            state.pendingReleases.removeAll()
            if pending.isEmpty { state.releaseRetryScheduled = false }
            return pending
        }
    }

    /// Releases waiting for the upstream to be reachable again.
    var pendingReleases: Int { state.withLock { $0.pendingReleases.count } }

    /// Ends a lease attempt that did not `watch`.
    func endLeaseAttempt() {
        state.withLock { endAttempt(&$0) }
    }

    private func endAttempt(_ state: inout State) {
        state.leaseAttempts -= 1
        if state.leaseAttempts == 0 { state.recentChanges.removeAll() }
    }

    /// Wakes this host's callers waiting on `key`'s lease (its release through this host,
    /// which the upstream does not announce back).
    func leaseEnded(for key: CacheKey) {
        let woken = state.withLock { $0.leaseWatches.take(key: key) }
        woken.forEach { $0() }
    }

    /// Callers waiting on `key`'s lease now.
    func leaseWaiters(for key: CacheKey) -> Int {
        state.withLock { $0.leaseWatches.count(forKey: key) }
    }

    /// Callers waiting on leases now.
    var leaseWaiters: Int { state.withLock { $0.leaseWatches.count } }

    // MARK: Observer

    func upstream(_ event: Upstream.Event) {
        let woken = state.withLock { state -> [@Sendable () -> Void] in
            var woken: [@Sendable () -> Void] = []
            switch event {
            case .invalidated(let keys, let sequence):
                state.stats.invalidations += keys.count
                for key in keys {
                    remove(key, &state)
                    if state.keys[key] != nil { state.keys[key]!.invalidatedAt = max(state.keys[key]!.invalidatedAt, sequence) }
                    if state.leaseAttempts > 0 { state.recentChanges[key] = sequence }
                    woken += state.leaseWatches.take(leaseKey: key)
                }
            case .flushed(let sequence):
                state.stats.flushes += 1
                state.flushedAt = max(state.flushedAt, sequence)
                state.slides.removeAll()
                _ = copies.drop(where: shares)
                woken = state.leaseWatches.takeAll()
            }
            return woken
        }
        woken.forEach { $0() }
    }
}
