// Stampede protection: per-key leases that tell one caller "compute this" and park the
// others until the value is written, the lease is given back, its holder goes away, or
// its time is up. Nothing here blocks a thread: a parked caller is a closure.

import Foundation
import HalcyonSupport
import Synchronization

/// The lease table behind `cache.lease` / `cache.releaseLease`.
///
/// A caller that misses asks `acquire`: with no holder it gets a token (and computes the
/// value); otherwise it is parked with a `wake` closure and a deadline. A parked caller is
/// woken exactly once:
/// - `.written` when any write of the key ends the lease (`written`): it reads again;
/// - `.granted(token)` when the lease ends without a value (released, holder gone,
///   lease time over): the first parked caller becomes the holder;
/// - `.timedOut` when its own wait is over.
///
/// ```swift
/// switch leases.acquire(key: "k", owner: connectionID, ttl: 30, wait: 5, observed: leases.epoch) { reason in … } {
/// case .granted(let token): compute, then store with it
/// case .parked: the wake closure answers later (`withdraw` takes it back)
/// …
/// }
/// ```
///
/// Owners are opaque numbers (the daemon uses one per connection); `releaseAll(owner:)`
/// ends an owner's leases and drops its parked callers.
///
/// Threading: thread-safe; `state` (a `Locked`) guards everything, and wake closures and
/// timer work run after the lock is released, on `timerQueue` or the caller's thread.
public final class Leases: Sendable {
    /// Why a parked caller is woken.
    public enum Wake: Sendable, Equatable {
        /// The key was written: read it again.
        case written
        /// The lease passed to this caller.
        case granted(token: String)
        /// Its wait ran out.
        case timedOut
    }

    /// The answer to `acquire`.
    public enum Acquire: Sendable, Equatable {
        /// No one held the lease: this caller holds it now.
        case granted(token: String)
        /// Another caller holds it; this one waits (its `wake` will be called once,
        /// unless it is withdrawn first: see `withdraw`).
        case parked(waiter: UInt64)
        /// Another caller holds it and `wait` was 0.
        case held
        /// The key was written since the caller's read (`observed`): read again.
        case retry
        /// Parking would pass a bound.
        case refused(Refusal)
    }

    /// Which waiter bound a refused caller hit (wire `data.reason`s of `-32005`).
    public enum Refusal: String, Sendable, Equatable {
        case tooManyLeaseWaitersForKey
        case tooManyLeaseWaiters
    }

    /// Bounds on parked callers.
    public struct Limits: Sendable {
        /// Parked callers per key. Default 1024.
        public var waitersPerKey = 1024
        /// Parked callers in all. Default 16384.
        public var waiters = 16384
        public init() {}
    }

    /// Counters for `cache.stats`.
    public struct Stats: Sendable, Equatable {
        /// Leases held now.
        public var held: Int
        /// Callers parked now.
        public var waiting: Int
        /// Leases granted since start.
        public var granted: Int
        /// Leases that ran out of time.
        public var expired: Int
        /// Callers refused for a waiter bound.
        public var refused: Int
        /// Parked callers whose wait ran out.
        public var timedOut: Int
    }

    /// What `status` tells about a key's lease.
    public struct Status: Sendable, Equatable {
        /// When the lease ends at the latest (its `ttl`); nil when it holds until written,
        /// released or its owner goes away.
        public var endsAt: Date?
        /// Callers parked on it now.
        public var waiting: Int
    }

    private struct Holder {
        var token: String
        var owner: UInt64
        var timer: DispatchWorkItem?
        var endsAt: Date?
    }

    private struct Waiter {
        var id: UInt64
        var owner: UInt64
        var ttl: TimeInterval
        var wake: @Sendable (Wake) -> Void
        var timer: DispatchWorkItem
    }

    private struct State {
        var holders: [CacheKey: Holder] = [:]
        var waiters: [CacheKey: [Waiter]] = [:]
        var waiting = 0
        var nextID: UInt64 = 0
        /// Bumped by every `written` that finds a lease held or a caller parked.
        var epoch: UInt64 = 0
        /// The epoch of the last write that ended a lease or woke callers, per key: tells a
        /// caller whose read raced with that write to read again. Bounded (cleared when large).
        var lastWrite: [CacheKey: UInt64] = [:]
        var stats = Stats(held: 0, waiting: 0, granted: 0, expired: 0, refused: 0, timedOut: 0)
    }

    public let limits: Limits
    private let state = Locked(State())
    /// Leases held plus callers parked, as of the last change (kept outside the lock):
    /// a write of a key when there are none, the common case, ends nothing and wakes
    /// nobody, so `written` need not take the lock.
    private let inUse = Atomic<Int>(0)
    /// Runs lease and wait deadlines.
    private let timerQueue = DispatchQueue(label: "halcyon.Leases.timerQueue")

    public init(limits: Limits = .init()) {
        self.limits = limits
    }

    /// Read before the caller's cache read, passed to `acquire` as `observed`.
    public var epoch: UInt64 { state.withLock { $0.epoch } }

    /// A snapshot of the counters.
    public var stats: Stats {
        state.withLock { s in
            var stats = s.stats
            stats.held = s.holders.count
            stats.waiting = s.waiting
            return stats
        }
    }

    /// After a miss: take the lease of `key` for `ttl` seconds, or park for up to `wait`
    /// seconds (then `wake` is called exactly once, on another thread), or be told it is
    /// held. `observed` is `epoch` as read before the miss.
    public func acquire(
        key: CacheKey, owner: UInt64, ttl: TimeInterval, wait: TimeInterval, observed: UInt64,
        wake: @escaping @Sendable (Wake) -> Void
    ) -> Acquire {
        update { s -> Acquire in
            if s.holders[key] == nil {
                if let written = s.lastWrite[key], written > observed { return .retry }
                let token = grant(key: key, owner: owner, ttl: ttl, in: &s)
                return .granted(token: token)
            }
            guard wait > 0 else { return .held }
            if s.waiting >= limits.waiters {
                s.stats.refused += 1
                return .refused(.tooManyLeaseWaiters)
            }
            if (s.waiters[key]?.count ?? 0) >= limits.waitersPerKey {
                s.stats.refused += 1
                return .refused(.tooManyLeaseWaitersForKey)
            }
            s.nextID &+= 1
            let id = s.nextID
            let timer = DispatchWorkItem { [weak self] in self?.waitEnded(key: key, id: id) }
            s.waiters[key, default: []].append(Waiter(id: id, owner: owner, ttl: ttl, wake: wake, timer: timer))
            s.waiting += 1
            timerQueue.asyncAfter(deadline: .now() + wait, execute: timer)
            return .parked(waiter: id)
        }
    }

    /// Whether `key`'s lease is held, without taking it or joining its queue (a lock's
    /// `locked()`): nil when no one holds it.
    public func status(key: CacheKey) -> Status? {
        guard inUse.load(ordering: .acquiring) > 0 else { return nil }
        return state.withLock { s in
            guard let holder = s.holders[key] else { return nil }
            return Status(endsAt: holder.endsAt, waiting: s.waiters[key]?.count ?? 0)
        }
    }

    /// Gives the lease back. The first parked caller gets it. False when `token` is not
    /// the key's current lease. Any caller holding the token may give it back, whichever
    /// owner (connection) took it: the token is the proof of holding.
    @discardableResult
    public func release(key: CacheKey, token: String) -> Bool {
        let (released, handOff) = update { s -> (Bool, (@Sendable () -> Void)?) in
            guard let holder = s.holders[key], holder.token == token else { return (false, nil) }
            holder.timer?.cancel()
            s.holders[key] = nil
            return (true, handOn(key: key, in: &s))
        }
        handOff?()
        return released
    }

    /// Changes the state under its lock and notes how many leases and parked callers
    /// there are now (`inUse`).
    private func update<T>(_ body: (inout State) -> T) -> T {
        state.withLock { s in
            let result = body(&s)
            inUse.store(s.holders.count + s.waiting, ordering: .releasing)
            return result
        }
    }

    /// A write of `key` took effect: its lease (if any) ends and every parked caller is
    /// woken, on `timerQueue`, to read the value. With no lease held and nobody parked it
    /// changes nothing a caller can observe (the epoch only matters where a write is
    /// recorded in `lastWrite`), so it returns at once. It calls nothing out on the
    /// caller's thread: the local store calls it where a write takes effect, which may be
    /// under the write book's lock.
    public func written(key: CacheKey) {
        guard inUse.load(ordering: .acquiring) > 0 else { return }
        let woken = update { s -> [Waiter] in
            s.epoch &+= 1
            let holder = s.holders.removeValue(forKey: key)
            holder?.timer?.cancel()
            let waiters = s.waiters.removeValue(forKey: key) ?? []
            if holder != nil || !waiters.isEmpty {
                if s.lastWrite.count > 65536 { s.lastWrite.removeAll() }
                s.lastWrite[key] = s.epoch
            }
            s.waiting -= waiters.count
            for w in waiters { w.timer.cancel() }
            return waiters
        }
        guard !woken.isEmpty else { return }
        let wakes = woken.map(\.wake)
        timerQueue.async { for wake in wakes { wake(.written) } }
    }

    /// Returns once every wake-up queued so far has run (`written` wakes on `timerQueue`).
    func waitForWakesForTesting() {
        timerQueue.sync {}
    }

    /// The owner went away (its connection closed): its leases end (each passing to the
    /// first parked caller of another owner) and its parked callers are dropped unanswered.
    public func releaseAll(owner: UInt64) {
        let handOffs = update { s -> [@Sendable () -> Void] in
            for (key, list) in s.waiters {
                let kept = list.filter { w in
                    if w.owner == owner { w.timer.cancel(); return false }
                    return true
                }
                s.waiting -= list.count - kept.count
                s.waiters[key] = kept.isEmpty ? nil : kept
            }
            var out: [@Sendable () -> Void] = []
            for (key, holder) in s.holders where holder.owner == owner {
                holder.timer?.cancel()
                s.holders[key] = nil
                if let h = handOn(key: key, in: &s) { out.append(h) }
            }
            return out
        }
        for h in handOffs { h() }
    }

    // MARK: Under the lock

    private func grant(key: CacheKey, owner: UInt64, ttl: TimeInterval, in s: inout State) -> String {
        s.nextID &+= 1
        let token = "\(s.nextID)-\(String(UInt64.random(in: 0 ... .max), radix: 16))"
        var timer: DispatchWorkItem?
        var endsAt: Date?
        if ttl.isFinite {
            let item = DispatchWorkItem { [weak self] in self?.leaseEnded(key: key, token: token) }
            timerQueue.asyncAfter(deadline: .now() + ttl, execute: item)
            timer = item
            endsAt = Date().addingTimeInterval(ttl)
        }
        s.holders[key] = Holder(token: token, owner: owner, timer: timer, endsAt: endsAt)
        s.lastWrite[key] = nil
        s.stats.granted += 1
        return token
    }

    /// The lease of `key` ended without a value: the first parked caller becomes the
    /// holder. Returns the wake to call once the lock is released.
    private func handOn(key: CacheKey, in s: inout State) -> (@Sendable () -> Void)? {
        guard var list = s.waiters[key], !list.isEmpty else { return nil }
        let next = list.removeFirst()
        s.waiters[key] = list.isEmpty ? nil : list
        s.waiting -= 1
        next.timer.cancel()
        let token = grant(key: key, owner: next.owner, ttl: next.ttl, in: &s)
        let wake = next.wake
        return { wake(.granted(token: token)) }
    }

    /// Takes a parked caller out of `key`'s queue without waking it (its request was
    /// cancelled). False when it is no longer parked: its `wake` has been called, or is
    /// about to be.
    @discardableResult
    public func withdraw(key: CacheKey, waiter id: UInt64) -> Bool {
        update { s -> Bool in
            guard var list = s.waiters[key], let index = list.firstIndex(where: { $0.id == id }) else { return false }
            let w = list.remove(at: index)
            w.timer.cancel()
            s.waiters[key] = list.isEmpty ? nil : list
            s.waiting -= 1
            return true
        }
    }

    // MARK: Timers (on timerQueue)

    private func leaseEnded(key: CacheKey, token: String) {
        let handOff = update { s -> (@Sendable () -> Void)? in
            guard let holder = s.holders[key], holder.token == token else { return nil }
            s.holders[key] = nil
            s.stats.expired += 1
            return handOn(key: key, in: &s)
        }
        handOff?()
    }

    private func waitEnded(key: CacheKey, id: UInt64) {
        let waiter = update { s -> Waiter? in
            guard var list = s.waiters[key], let index = list.firstIndex(where: { $0.id == id }) else { return nil }
            let w = list.remove(at: index)
            s.waiters[key] = list.isEmpty ? nil : list
            s.waiting -= 1
            s.stats.timedOut += 1
            return w
        }
        waiter?.wake(.timedOut)
    }
}
