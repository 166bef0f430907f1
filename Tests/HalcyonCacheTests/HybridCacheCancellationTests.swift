// CacheTask's guarantees, first on the state machine alone, then through HybridCache:
// cancelled before start (the work never runs, both tiers untouched, the completion gets
// started: false at cancel time), cancelled after the work but before delivery
// (started: true, effects stand), and a stress run of cancels racing deliveries.

import Foundation
import HalcyonSupport
import Testing

@testable import HalcyonCache

@Suite("HybridCache cancellation", .timeLimit(.minutes(1)))
struct HybridCacheCancellationTests {
    // MARK: The state machine

    @Test func cancelWhilePendingFiresOnceAndBeginFails() {
        let fired = Locked(0)
        let task = CacheTask(onCancelBeforeStart: { fired.withLock { $0 += 1 } })
        DispatchQueue.concurrentPerform(iterations: 8) { _ in task.cancel() }
        #expect(fired.withLock { $0 } == 1)
        #expect(task.isCancelled)
        #expect(!task.begin())
    }

    @Test func cancelWhileRunningOrAwaitingDeliveryWithdrawsTheResult() {
        let running = CacheTask(onCancelBeforeStart: { Issue.record("must not fire after begin") })
        #expect(running.begin())
        running.cancel()
        running.workFinished()
        #expect(running.claimDelivery() == false)

        let awaiting = CacheTask(onCancelBeforeStart: nil)
        #expect(awaiting.begin())
        awaiting.workFinished()
        awaiting.cancel()
        #expect(awaiting.claimDelivery() == false)

        let clean = CacheTask(onCancelBeforeStart: nil)
        #expect(clean.begin())
        clean.workFinished()
        #expect(clean.claimDelivery())
        clean.cancel()  // after delivery: no effect beyond the flag
        #expect(clean.isCancelled)
    }

    // MARK: Through the cache

    @Test func cancelledQueuedStoreChangesNeitherTierAndIsAnsweredAtCancelTime() async throws {
        let f = HybridCacheFixture()
        let cache = f.cache
        let events = Recorder<String>()
        let gate = DispatchSemaphore(value: 0)
        cache.local.scheduler.holdForTesting { gate.wait() }  // holds the ioQueue until the checks below are done
        cache.debugSleep(seconds: 0.01) { _ in events.append("sleep done") }
        let outcome = Locked<Result<HybridCache.StoreResult, CacheError>?>(nil)
        let task = cache.store(CacheEntry(bytes: [1]), forKey: "k") { r in
            outcome.withLock { $0 = r }
            events.append("store answered")
        }
        let removeTask = cache.remove(forKey: "never-there") { _ in events.append("remove answered") }
        task.cancel()
        // .untouch: the cancelled completion ran inside cancel(), while the ioQueue is still held.
        #expect(outcome.withLock { $0 }?.error == .cancelled(started: false))
        #expect(events.all == ["store answered"])
        #expect(cache.stats().writesQueued == 2)
        _ = removeTask
        gate.signal()
        await f.drain()
        #expect(events.all == ["store answered", "sleep done", "remove answered"])
        #expect(!cache.memoryStorage.isCached(forKey: "k"))
        #expect(!cache.diskStorage.isCached(forKey: "k"))
        #expect(cache.stats().sets == 0)
        #expect(cache.stats().writesQueued == 0)
        task.cancel()  // again: nothing more is delivered
        #expect(events.all.count == 3)
    }

    @Test func cancelledQueuedReadIsAnsweredOnItsCallbackQueueAtCancelTime() async throws {
        let f = HybridCacheFixture()
        let cache = f.cache
        let queue = DispatchQueue(label: "halcyon.tests.cancel-read")
        let released = DispatchSemaphore(value: 0)
        cache.local.scheduler.holdForTesting { released.wait() }  // holds the ioQueue until released
        let task = cache.retrieve(forKey: "k", callbackQueue: .dispatch(queue)) { _ in }
        let got: Result<HybridCache.RetrieveResult, CacheError> = await withCheckedContinuation { c in
            let t = cache.retrieve(forKey: "k2", callbackQueue: .dispatch(queue)) { c.resume(returning: $0) }
            t.cancel()
        }
        #expect(got.error == .cancelled(started: false))
        task.cancel()
        released.signal()
        await f.drain()
    }

    @Test func cancelAfterWorkBeforeDeliveryKeepsTheEffects() async throws {
        let f = HybridCacheFixture()
        let cache = f.cache
        let callbacks = DispatchQueue(label: "halcyon.tests.suspended")
        callbacks.suspend()
        let outcome = Locked<Result<HybridCache.StoreResult, CacheError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        let task = cache.store(CacheEntry(bytes: [4]), forKey: "k", callbackQueue: .dispatch(callbacks)) { r in
            outcome.withLock { $0 = r }
            done.signal()
        }
        await f.drain()  // the store's work has run; its delivery waits on the suspended queue
        #expect(cache.diskStorage.isCached(forKey: "k"))
        task.cancel()
        callbacks.resume()
        try #require(done.wait(timeout: .now() + 30) == .success, "no reply within 30 s")
        #expect(outcome.withLock { $0 }?.error == .cancelled(started: true))
        #expect(cache.memoryStorage.isCached(forKey: "k"))

        // The same for a memory hit answered at once.
        callbacks.suspend()
        let read = Locked<Result<HybridCache.RetrieveResult, CacheError>?>(nil)
        let hit = cache.retrieve(forKey: "k", callbackQueue: .dispatch(callbacks)) { r in
            read.withLock { $0 = r }
            done.signal()
        }
        hit.cancel()
        callbacks.resume()
        try #require(done.wait(timeout: .now() + 30) == .success, "no reply within 30 s")
        #expect(read.withLock { $0 }?.error == .cancelled(started: true))
    }

    /// Per task: how often its completion ran, whether it succeeded, and whether the task
    /// was still unsettled (its delivery not yet claimed) right after `cancel()` returned.
    /// Unsettled then means the claim came after the cancel, so it must not be a success.
    /// (Checking a flag inside the completion instead would race with the few instructions
    /// between the claim and the completion's first line, and raise false alarms.)
    final class Probe: Sendable {
        struct State { var unsettledAfterCancel = false; var completions = 0; var successes = 0 }
        let state = Locked(State())
    }

    @Test func noSuccessAfterCancelReturnedAndExactlyOneCompletion() async throws {
        let f = HybridCacheFixture()
        let cache = f.cache
        for i in 0..<16 {
            cache.store(CacheEntry(bytes: [UInt8(i)]), forKey: "k\(i)")
        }
        await f.drain()
        let callbacks = DispatchQueue(label: "halcyon.tests.stress", attributes: .concurrent)
        let cancellers = DispatchQueue(label: "halcyon.tests.cancellers", attributes: .concurrent)
        let count = 2_000
        let probes = (0..<count).map { _ in Probe() }
        let group = DispatchGroup()
        for i in 0..<count {
            let probe = probes[i]
            group.enter()
            let completion: @Sendable (Bool) -> Void = { success in
                probe.state.withLock { s in
                    s.completions += 1
                    if success { s.successes += 1 }
                }
                group.leave()
            }
            let task: CacheTask
            switch i % 4 {
            case 0: task = cache.retrieve(forKey: "k\(i % 16)", callbackQueue: .dispatch(callbacks)) { completion($0.value != nil) }
            case 1: task = cache.store(CacheEntry(bytes: [1]), forKey: "s\(i % 32)", callbackQueue: .dispatch(callbacks)) { completion($0.value != nil) }
            case 2: task = cache.describe(forKey: "k\(i % 16)", callbackQueue: .untouch) { completion($0.value != nil) }
            default: task = cache.remove(forKey: "s\(i % 32)", callbackQueue: .untouch) { completion($0.value != nil) }
            }
            cancellers.async {
                if i % 3 != 0 { usleep(UInt32(i % 7) * 20) }
                task.cancel()
                let settled = task.isSettled
                probe.state.withLock { $0.unsettledAfterCancel = !settled }
            }
        }
        #expect(group.wait(timeout: .now() + 30) == .success)
        await f.drain()
        let states = probes.map { $0.state.withLock { $0 } }
        #expect(states.allSatisfy { $0.completions == 1 })
        #expect(states.filter { $0.unsettledAfterCancel && $0.successes > 0 }.isEmpty)
        #expect(cache.stats().writesQueued == 0)
        // Both outcomes happened, so the cancels really raced the deliveries.
        let successes = states.filter { $0.successes == 1 }.count
        #expect(successes > 0)
        #expect(successes < count)
    }
}
