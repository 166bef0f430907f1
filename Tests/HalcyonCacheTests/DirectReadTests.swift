// A disk read that finds the ioQueue idle runs through `sync` on the reading thread: its
// completion (under `untouch`) has run by the time `retrieve` returns. Behind queued work it
// queues, and runs in the queue's order.

import Dispatch
import HalcyonSupport
import Testing
@testable import HalcyonCache

@Suite("Disk reads on an idle ioQueue", .timeLimit(.minutes(1)))
struct DirectReadTests {
    /// A fixture whose `key` is in its file only.
    static func onDiskOnly(_ key: CacheKey) async throws -> HybridCacheFixture {
        let f = HybridCacheFixture()
        _ = try await result { f.cache.store(CacheEntry(bytes: [1, 2, 3]), forKey: key, completion: $0) }.get()
        await f.drain()
        #expect(f.cache.local.memoryStorage.remove(forKey: key))
        return f
    }

    @Test func aDiskReadOnAnIdleQueueIsAnsweredBeforeRetrieveReturns() async throws {
        let f = try await Self.onDiskOnly("k")
        let answer = Locked<(HybridCache.RetrieveResult?, onQueue: Bool)?>(nil)
        _ = f.cache.retrieve(forKey: "k") { outcome in
            answer.withLock { $0 = (outcome.value, HybridCacheFixture.onIOQueue) }
        }
        let seen = answer.withLock { $0 }
        #expect(seen != nil, "the read was queued")
        #expect(seen?.0?.cacheType == .disk)
        #expect(seen?.0?.entry?.bytes == [1, 2, 3])
        // Delivered after `sync` returned, not from inside the queue.
        #expect(seen?.onQueue == false)
    }

    @Test func aDiskReadBehindQueuedWorkWaitsForIt() async throws {
        let f = try await Self.onDiskOnly("k")
        let gate = DispatchSemaphore(value: 0)
        f.cache.local.scheduler.holdForTesting { gate.wait() }
        let answered = Locked(false)
        let done = await withCheckedContinuation { (continuation: CheckedContinuation<HybridCache.RetrieveResult?, Never>) in
            _ = f.cache.retrieve(forKey: "k") { outcome in
                answered.withLock { $0 = true }
                continuation.resume(returning: outcome.value)
            }
            #expect(!answered.withLock { $0 }, "the read ran past the held queue")
            gate.signal()
        }
        #expect(done?.cacheType == .disk)
    }
}
