// The lease table on its own: grants, parking, the waiter bounds, and what each kind of
// lease end does to parked callers.

import Foundation
import HalcyonSupport
import Testing
@testable import HalcyonCache

extension Leases.Acquire {
    var isParked: Bool {
        if case .parked = self { return true }
        return false
    }
}

@Suite struct LeasesTests {
    /// Collects wakes; `next` waits for one (20 s limit).
    /// Threading: thread-safe; a `Locked` holds the wakes.
    final class Wakes: Sendable {
        private let items = Locked<[Leases.Wake]>([])
        private let signal = DispatchSemaphore(value: 0)
        func add(_ wake: Leases.Wake) {
            items.withLock { $0.append(wake) }
            signal.signal()
        }
        /// Wakes received and not yet taken by `next`.
        var pending: Int { items.withLock { $0.count } }
        func next() -> Leases.Wake? {
            guard signal.wait(timeout: .now() + 20) == .success else { return nil }
            return items.withLock { $0.removeFirst() }
        }
    }

    /// A lease table with `limits` whose `key` is held by owner 1, with its epoch; nil
    /// (recorded) when the first caller is not granted the lease.
    static func heldLease(_ key: CacheKey, waitersPerKey: Int = 1, waiters: Int = 16384, wakes: Wakes) -> (Leases, UInt64)? {
        var limits = Leases.Limits()
        limits.waitersPerKey = waitersPerKey
        limits.waiters = waiters
        let leases = Leases(limits: limits)
        let e = leases.epoch
        guard case .granted = leases.acquire(key: key, owner: 1, ttl: 60, wait: 0, observed: e, wake: wakes.add) else {
            Issue.record("first caller not granted")
            return nil
        }
        return (leases, e)
    }

    @Test func aWithdrawnCallerIsNeverWokenAndFreesItsPlace() {
        let wakes = Wakes()
        guard let (leases, e) = Self.heldLease("k", wakes: wakes) else { return }
        guard case .parked(let waiter) = leases.acquire(key: "k", owner: 2, ttl: 60, wait: 30, observed: e, wake: wakes.add) else {
            Issue.record("second caller not parked"); return
        }
        #expect(leases.withdraw(key: "k", waiter: waiter))
        #expect(!leases.withdraw(key: "k", waiter: waiter))
        #expect(leases.stats.waiting == 0)
        // Its place under the per-key bound is free again, and a write wakes only the new one.
        #expect(leases.acquire(key: "k", owner: 3, ttl: 60, wait: 30, observed: e, wake: wakes.add).isParked)
        leases.written(key: "k")  // ends the lease now; wakes on the table's queue
        leases.waitForWakesForTesting()
        #expect(wakes.pending == 1)
        #expect(wakes.next() == .written)
        #expect(leases.stats.waiting == 0)
    }

    @Test func boundsWaitersPerKeyAndInTotal() {
        let wakes = Wakes()
        guard let (leases, e) = Self.heldLease("a", waiters: 2, wakes: wakes) else { return }
        #expect(leases.acquire(key: "a", owner: 2, ttl: 60, wait: 0, observed: e, wake: wakes.add) == .held)
        #expect(leases.acquire(key: "a", owner: 2, ttl: 60, wait: 30, observed: e, wake: wakes.add).isParked)
        #expect(leases.acquire(key: "a", owner: 3, ttl: 60, wait: 30, observed: e, wake: wakes.add)
            == .refused(.tooManyLeaseWaitersForKey))
        _ = leases.acquire(key: "b", owner: 1, ttl: 60, wait: 0, observed: e, wake: wakes.add)
        #expect(leases.acquire(key: "b", owner: 2, ttl: 60, wait: 30, observed: e, wake: wakes.add).isParked)
        #expect(leases.acquire(key: "c", owner: 1, ttl: 60, wait: 0, observed: e, wake: wakes.add).isParked == false)
        _ = leases.acquire(key: "d", owner: 1, ttl: 60, wait: 0, observed: e, wake: wakes.add)
        #expect(leases.acquire(key: "d", owner: 3, ttl: 60, wait: 30, observed: e, wake: wakes.add)
            == .refused(.tooManyLeaseWaiters))
        #expect(leases.stats.waiting == 2)
        #expect(leases.stats.refused == 2)
        // The owner of the waiters goes away: they are dropped, unanswered.
        leases.releaseAll(owner: 2)
        #expect(leases.stats.waiting == 0)
    }

    @Test func aWriteWakesEveryWaiterAndEndsTheLease() {
        let leases = Leases()
        let wakes = Wakes()
        let e = leases.epoch
        _ = leases.acquire(key: "k", owner: 1, ttl: 60, wait: 0, observed: e, wake: wakes.add)
        #expect(leases.acquire(key: "k", owner: 2, ttl: 60, wait: 30, observed: e, wake: wakes.add).isParked)
        #expect(leases.acquire(key: "k", owner: 3, ttl: 60, wait: 30, observed: e, wake: wakes.add).isParked)
        leases.written(key: "k")
        #expect(wakes.next() == .written)
        #expect(wakes.next() == .written)
        #expect(leases.stats.held == 0)
        // A caller whose read came before that write must read again.
        #expect(leases.acquire(key: "k", owner: 4, ttl: 60, wait: 0, observed: e, wake: wakes.add) == .retry)
        guard case .granted = leases.acquire(key: "k", owner: 4, ttl: 60, wait: 0, observed: leases.epoch, wake: wakes.add)
        else { Issue.record("not granted after reading again"); return }
    }

    @Test func releaseAndHolderLossHandTheLeaseToTheFirstWaiter() {
        let leases = Leases()
        let wakes = Wakes()
        let e = leases.epoch
        guard case .granted(let token) = leases.acquire(key: "k", owner: 1, ttl: 60, wait: 0, observed: e, wake: wakes.add)
        else { Issue.record("not granted"); return }
        _ = leases.acquire(key: "k", owner: 2, ttl: 60, wait: 30, observed: e, wake: wakes.add)
        _ = leases.acquire(key: "k", owner: 3, ttl: 60, wait: 30, observed: e, wake: wakes.add)
        #expect(!leases.release(key: "k", token: "wrong"))
        #expect(leases.release(key: "k", token: token))
        guard case .granted = wakes.next() else { Issue.record("owner 2 not granted"); return }
        leases.releaseAll(owner: 2)
        guard case .granted = wakes.next() else { Issue.record("owner 3 not granted"); return }
        #expect(leases.stats.held == 1)
        #expect(leases.stats.waiting == 0)
    }
}
