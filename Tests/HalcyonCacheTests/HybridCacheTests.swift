// HybridCache's requests one by one against a real disk tier: which tier answers, what
// each write does to both tiers, where reads and completions run, the size limit, the
// sweep, the counters, and a disk tier that is not ready. The fixture at the end (a real
// cache on a fresh temporary folder, one manual clock for both tiers, await helpers) is
// shared by the other HybridCache suites.

import Foundation
import HalcyonSupport
import Testing

@testable import HalcyonCache

@Suite("HybridCache", .timeLimit(.minutes(1)))
struct HybridCacheTests {
    @Test func storeThenRetrieveFromMemoryThenDisk() async throws {
        let f = HybridCacheFixture()
        let cache = f.cache
        let stored = try await result { cache.store(CacheEntry(bytes: utf8Bytes("v1"), flags: 3), forKey: "k", completion: $0) }.get()
        #expect(stored.stored)
        #expect(stored.size == 2)
        #expect(stored.expiresAt == f.clock.now().addingTimeInterval(7 * 86_400))
        #expect(cache.memoryStorage.isCached(forKey: "k"))
        #expect(cache.diskStorage.isCached(forKey: "k"))

        let hit = try await result { cache.retrieve(forKey: "k", completion: $0) }.get()
        #expect(hit.cacheType == .memory)
        // The entry carries the version its store was given (kept in the file too).
        let version = try #require(stored.version)
        #expect(hit.entry == CacheEntry(bytes: utf8Bytes("v1"), flags: 3, version: version))

        cache.memoryStorage.removeAll()
        let fromDisk = try await result { cache.retrieve(forKey: "k", completion: $0) }.get()
        #expect(fromDisk.cacheType == .disk)
        #expect(fromDisk.entry == CacheEntry(bytes: utf8Bytes("v1"), flags: 3, version: version))
        // Put back into memory.
        #expect(cache.memoryStorage.value(forKey: "k", extendingExpiration: .none)?.flags == 3)

        let miss = try await result { cache.retrieve(forKey: "nope", completion: $0) }.get()
        #expect(miss.cacheType == .none)
        #expect(miss.entry == nil)
    }

    @Test func memoryCopyCarriesTheLifetimeAndItsOwnResidency() async throws {
        let f = HybridCacheFixture(memoryExpiration: .seconds(1_000))
        let cache = f.cache
        var options = HybridCache.Options()
        options.diskExpiration = .seconds(10)
        _ = await result { cache.store(CacheEntry(bytes: [1]), forKey: "k", options: options, completion: $0) }
        let meta = cache.memoryStorage.meta(forKey: "k")!
        #expect(meta.expiration == f.clock.now().addingTimeInterval(10))
        #expect(meta.memoryExpiration == f.clock.now().addingTimeInterval(1_000))
        cache.memoryStorage.removeAll()
        var read = HybridCache.Options()
        read.extendingExpiration = .none
        let hit = try await result { cache.retrieve(forKey: "k", options: read, completion: $0) }.get()
        #expect(hit.cacheType == .disk)
        #expect(hit.expiresAt == f.clock.now().addingTimeInterval(10))
        #expect(cache.memoryStorage.meta(forKey: "k")!.expiration == hit.expiresAt!)
    }

    @Test func toDiskFalseStoresInMemoryInline() async throws {
        let f = HybridCacheFixture()
        let cache = f.cache
        var options = HybridCache.Options()
        options.toDisk = false
        // Until the start-up scan is done the maybeCached set cannot say "no file".
        cache.diskStorage.waitForInitialScan()
        let inline = Locked<HybridCache.StoreResult?>(nil)
        cache.store(CacheEntry(bytes: [7]), forKey: "m", options: options) { r in inline.withLock { $0 = r.value } }
        #expect(inline.withLock { $0 }?.stored == true)  // completed before store returned
        #expect(cache.memoryStorage.isCached(forKey: "m"))
        #expect(!cache.diskStorage.isCached(forKey: "m"))
    }

    @Test func toDiskFalseRemovesTheDiskCopySoAnEvictionMissesInsteadOfGoingBack() async throws {
        let f = HybridCacheFixture()
        let cache = f.cache
        _ = await result { cache.store(CacheEntry(bytes: utf8Bytes("old")), forKey: "k", completion: $0) }
        var options = HybridCache.Options()
        options.toDisk = false
        let done: HybridCache.StoreResult? = await withCheckedContinuation { c in
            cache.store(CacheEntry(bytes: utf8Bytes("new")), forKey: "k", options: options) { r in c.resume(returning: r.value) }
        }
        #expect(done?.stored == true)
        #expect(!cache.diskStorage.isCached(forKey: "k"))
        cache.memoryStorage.removeAll()  // as memory pressure would
        let got = try await result { cache.retrieve(forKey: "k", completion: $0) }.get()
        #expect(got.cacheType == CacheType.none)
    }

    @Test func toDiskFalseQueuesBehindAWriteToTheSameKey() async throws {
        let f = HybridCacheFixture()
        let cache = f.cache
        let gate = DispatchSemaphore(value: 0)
        cache.local.scheduler.holdForTesting { gate.wait() }  // holds the ioQueue until the checks below are done
        cache.store(CacheEntry(bytes: utf8Bytes("disk")), forKey: "k")
        var options = HybridCache.Options()
        options.toDisk = false
        let order = Recorder<String>()
        cache.store(CacheEntry(bytes: utf8Bytes("memory")), forKey: "k", options: options) { _ in order.append("memory-store") }
        #expect(order.all.isEmpty)  // not inline: a write to "k" is queued
        gate.signal()
        let got = try await result { cache.retrieve(forKey: "k", completion: $0) }.get()
        #expect(got.entry?.bytes == utf8Bytes("memory"))
        #expect(order.all == ["memory-store"])
    }

    @Test func storingAlreadyExpiredStoresNothingAndRemovesTheOldValue() async throws {
        let f = HybridCacheFixture()
        let cache = f.cache
        _ = await result { cache.store(CacheEntry(bytes: [1]), forKey: "k", completion: $0) }
        var options = HybridCache.Options()
        options.diskExpiration = .expired
        let r = try await result { cache.store(CacheEntry(bytes: [2]), forKey: "k", options: options, completion: $0) }.get()
        #expect(!r.stored)
        #expect(r.expiresAt == nil)
        #expect(!cache.memoryStorage.isCached(forKey: "k"))
        #expect(!cache.diskStorage.isCached(forKey: "k"))
    }

    @Test func cachedTypeAndDescribeNeverLoadOrExtend() async throws {
        let f = HybridCacheFixture()
        let cache = f.cache
        var options = HybridCache.Options()
        options.diskExpiration = .seconds(100)
        options.memoryExpiration = .seconds(50)
        _ = await result { cache.store(CacheEntry(bytes: [1, 2, 3], flags: 9), forKey: "k", options: options, completion: $0) }
        let storedAt = f.clock.now()
        f.clock.advance(by: 5)
        #expect(try await result { cache.cachedType(forKey: "k", completion: $0) }.get() == .memory)
        let inMemory = try await result { cache.describe(forKey: "k", completion: $0) }.get()
        #expect(inMemory.cacheType == .memory)
        #expect(inMemory.size == 3)
        #expect(inMemory.flags == 9)
        // The entry's lifetime (the disk expiration), and the memory copy's residency.
        #expect(inMemory.expiresAt == storedAt.addingTimeInterval(100))
        #expect(inMemory.memoryExpiresAt == storedAt.addingTimeInterval(50))
        #expect(inMemory.lastAccessAt == storedAt)

        cache.memoryStorage.removeAll()
        #expect(try await result { cache.cachedType(forKey: "k", completion: $0) }.get() == .disk)
        let onDisk = try await result { cache.describe(forKey: "k", completion: $0) }.get()
        #expect(onDisk.cacheType == .disk)
        #expect(onDisk.size == 3)
        #expect(onDisk.flags == 9)
        #expect(onDisk.expiresAt == storedAt.addingTimeInterval(100))
        #expect(onDisk.lastAccessAt == storedAt)
        #expect(!cache.memoryStorage.isCached(forKey: "k"))  // describe does not load
        var memoryOnly = HybridCache.Options()
        memoryOnly.fromMemoryOnly = true
        #expect(try await result { cache.cachedType(forKey: "k", options: memoryOnly, completion: $0) }.get() == .none)
        #expect(try await result { cache.cachedType(forKey: "zzz", completion: $0) }.get() == .none)
        #expect(cache.stats().diskHits == 0)
    }

    @Test func touchMovesBothTiers() async throws {
        let f = HybridCacheFixture()
        let cache = f.cache
        _ = await result { cache.store(CacheEntry(bytes: [1]), forKey: "k", completion: $0) }
        f.clock.advance(by: 100)
        var options = HybridCache.Options()
        options.diskExpiration = .seconds(60)
        options.memoryExpiration = .seconds(600)
        let touched = try await result { cache.touch(forKey: "k", options: options, completion: $0) }.get()
        #expect(touched.touched)
        #expect(touched.expiresAt == f.clock.now().addingTimeInterval(60))
        // One lifetime: the memory copy carries the new one; its residency restarted.
        #expect(cache.memoryStorage.meta(forKey: "k")?.memoryExpiration == f.clock.now().addingTimeInterval(600))
        #expect(cache.memoryStorage.meta(forKey: "k")?.expiration == f.clock.now().addingTimeInterval(60))
        #expect(try cache.diskStorage.meta(forKey: "k")?.expiration == f.clock.now().addingTimeInterval(60))
        let missing = try await result { cache.touch(forKey: "missing", completion: $0) }.get()
        #expect(!missing.touched)
    }

    @Test func removeClearRemoveExpiredTrimTotalSize() async throws {
        let f = HybridCacheFixture()
        let cache = f.cache
        for i in 0..<6 {
            var options = HybridCache.Options()
            options.diskExpiration = i < 2 ? .seconds(10) : .never
            options.memoryExpiration = i < 2 ? .seconds(10) : .never
            cache.store(CacheEntry(bytes: [UInt8](repeating: 1, count: 100)), forKey: "k\(i)", options: options)
        }
        #expect(try await result { cache.remove(forKey: "k5", completion: $0) }.get())
        #expect(try await result { cache.remove(forKey: "k5", completion: $0) }.get() == false)
        #expect(try await result { cache.remove(forKey: "k4", fromMemory: true, fromDisk: false, completion: $0) }.get())
        #expect(cache.diskStorage.isCached(forKey: "k4"))
        let usage = try await result { cache.totalSize(completion: $0) }.get()
        #expect(usage.count == 5)
        #expect(usage.bytes >= 500)
        f.clock.advance(by: 20)
        #expect(try await result { cache.removeExpired(completion: $0) }.get().removed == 2)
        #expect(try await result { cache.trim(completion: $0) }.get().removed == 0)  // no size limit
        #expect(try await result { cache.clear(memory: false, disk: true, completion: $0) }.get().removed == 3)
        #expect(cache.memoryStorage.count == 2)  // k2, k3 (k4 left memory above)
        #expect(try await result { cache.clear(completion: $0) }.get().removed == 2)
        #expect(cache.memoryStorage.count == 0)
        let stats = cache.stats()
        #expect(stats.removals == 2)
        #expect(stats.diskExpirations == 2)
        #expect(stats.memoryExpirations == 2)
        #expect(stats.sets == 6)
    }

    @Test func trimAndSizeLimitAfterStore() async throws {
        // Each file is 108 bytes (48-byte header, 2-byte key, 58-byte value); the limit is 550.
        let f = HybridCacheFixture(diskSizeLimit: 550)
        let cache = f.cache
        for i in 0..<5 {
            _ = await result { cache.store(CacheEntry(bytes: [UInt8](repeating: 1, count: 58)), forKey: "k\(i)", completion: $0) }
            f.clock.advance(by: 1)
        }
        #expect(try cache.diskStorage.totalSize() <= 550)
        _ = await result { cache.store(CacheEntry(bytes: [UInt8](repeating: 1, count: 58)), forKey: "k5", completion: $0) }
        // The store took the disk over the limit; the trim ran right after it, down to half.
        #expect(try cache.diskStorage.totalSize() <= 275)
        #expect(cache.diskStorage.isCached(forKey: "k5"))
        #expect(!cache.diskStorage.isCached(forKey: "k0"))
        #expect(cache.stats().diskEvictions >= 3)
        let trimmed = try await result { cache.trim(completion: $0) }.get()
        #expect(trimmed.removed == 0)
        #expect(trimmed.totalSize <= 275)
    }

    @Test func loadDiskFileSynchronouslyReadsOnTheCallersThread() async throws {
        let f = HybridCacheFixture()
        let cache = f.cache
        _ = await result { cache.store(CacheEntry(bytes: [5]), forKey: "k", completion: $0) }
        cache.memoryStorage.removeAll()
        // Hold the ioQueue: a queued read could not finish before store() returns.
        cache.debugSleep(seconds: 0.3)
        var options = HybridCache.Options()
        options.loadDiskFileSynchronously = true
        let caller = pthread_self()
        let seen = Locked<(HybridCache.RetrieveResult?, Bool)>((nil, false))
        cache.retrieve(forKey: "k", options: options) { r in
            seen.withLock { $0 = (r.value, pthread_equal(pthread_self(), caller) != 0) }
        }
        let (got, sameThread) = seen.withLock { $0 }
        #expect(got?.cacheType == .disk)
        #expect(got?.entry?.bytes == [5])
        #expect(sameThread)
    }

    @Test func memoryHitCompletesOnTheCallersThreadWhileTheIOQueueIsBusy() async throws {
        let f = HybridCacheFixture()
        let cache = f.cache
        var options = HybridCache.Options()
        options.diskExpiration = .never
        options.memoryExpiration = .never
        _ = await result { cache.store(CacheEntry(bytes: [3]), forKey: "k", options: options, completion: $0) }
        cache.debugSleep(seconds: 0.3)  // not a write: reads of "k" need not wait for it
        let caller = pthread_self()
        let seen = Locked<(HybridCache.RetrieveResult?, Bool)>((nil, false))
        cache.retrieve(forKey: "k") { r in seen.withLock { $0 = (r.value, pthread_equal(pthread_self(), caller) != 0) } }
        let (got, sameThread) = seen.withLock { $0 }
        #expect(got?.cacheType == .memory)
        #expect(got?.expiresAt == nil)  // never
        #expect(sameThread)
        let described = Locked<HybridCache.EntryDescription?>(nil)
        cache.describe(forKey: "absent", options: { var o = HybridCache.Options(); o.fromMemoryOnly = true; return o }()) { r in
            described.withLock { $0 = r.value }
        }
        #expect(described.withLock { $0 }?.cacheType == CacheType.none)
    }

    @Test func completionsRunWhereTheCallbackQueueSays() async throws {
        let f = HybridCacheFixture()
        let cache = f.cache
        let onIO: Bool = await withCheckedContinuation { c in
            cache.store(CacheEntry(bytes: [1]), forKey: "k") { _ in c.resume(returning: HybridCacheFixture.onIOQueue) }
        }
        #expect(onIO)  // .untouch: ioQueue work completes on the ioQueue
        let key = DispatchSpecificKey<Int>()
        let queue = DispatchQueue(label: "halcyon.tests.callback")
        queue.setSpecific(key: key, value: 42)
        let tag: Int? = await withCheckedContinuation { c in
            cache.retrieve(forKey: "k", callbackQueue: .dispatch(queue)) { _ in c.resume(returning: DispatchQueue.getSpecific(key: key)) }
        }
        #expect(tag == 42)
        let mainHit: Bool = await withCheckedContinuation { c in
            cache.retrieve(forKey: "k", callbackQueue: .mainAsync) { _ in c.resume(returning: CallbackQueue.isOnMainQueue) }
        }
        #expect(mainHit)
    }

    @Test func operationQueueDeliveriesFollowTheRequestPriority() async throws {
        let f = HybridCacheFixture()
        let cache = f.cache
        let deliveries = OperationQueue()
        deliveries.maxConcurrentOperationCount = 1
        deliveries.isSuspended = true
        let order = Recorder<String>()
        let group = DispatchGroup()
        for (name, priority) in [("low", Operation.QueuePriority.low), ("high", .high), ("normal", .normal)] {
            var options = HybridCache.Options()
            options.priority = priority
            group.enter()
            cache.retrieve(forKey: CacheKey(name), options: options, callbackQueue: .operationQueue(deliveries)) { _ in
                order.append(name)
                group.leave()
            }
        }
        await f.drain()  // all three answered (misses) and waiting on the suspended queue
        deliveries.isSuspended = false
        #expect(group.wait(timeout: .now() + 10) == .success)
        #expect(order.all == ["high", "normal", "low"])
    }

    @Test func wholeCacheWriteMakesEveryReadQueue() async throws {
        let f = HybridCacheFixture()
        let cache = f.cache
        _ = await result { cache.store(CacheEntry(bytes: [1]), forKey: "k", completion: $0) }
        cache.debugSleep(seconds: 0.1)
        cache.clear()
        let answeredInline = Locked(false)
        let got: HybridCache.RetrieveResult? = await withCheckedContinuation { c in
            cache.retrieve(forKey: "k") { r in
                answeredInline.withLock { $0 = !HybridCacheFixture.onIOQueue }
                c.resume(returning: r.value)
            }
        }
        #expect(!answeredInline.withLock { $0 })
        #expect(got?.cacheType == CacheType.none)
    }

    @Test func sweepRemovesExpiredFromBothTiersAndEnforcesTheLimit() async throws {
        let f = HybridCacheFixture()
        let cache = f.cache
        var options = HybridCache.Options()
        options.diskExpiration = .seconds(5)
        options.memoryExpiration = .seconds(5)
        _ = await result { cache.store(CacheEntry(bytes: [1]), forKey: "old", options: options, completion: $0) }
        _ = await result { cache.store(CacheEntry(bytes: [1]), forKey: "new", completion: $0) }
        f.clock.advance(by: 10)
        cache.sweepNow()
        await f.drain()
        #expect(!cache.diskStorage.isCached(forKey: "old", referenceDate: .distantPast))
        #expect(cache.memoryStorage.count == 1)
        #expect(cache.stats().diskExpirations == 1)
        #expect(cache.stats().memoryExpirations == 1)
    }

    @Test func sweepTimerFires() async throws {
        let f = HybridCacheFixture(sweepInterval: 0.05)
        let cache = f.cache
        var options = HybridCache.Options()
        options.diskExpiration = .seconds(5)
        _ = await result { cache.store(CacheEntry(bytes: [1]), forKey: "old", options: options, completion: $0) }
        f.clock.advance(by: 10)
        for _ in 0..<200 where cache.stats().diskExpirations == 0 {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(cache.stats().diskExpirations == 1)
    }

    @Test func statsCountHitsMissesByTier() async throws {
        let f = HybridCacheFixture()
        let cache = f.cache
        _ = await result { cache.store(CacheEntry(bytes: [1, 2]), forKey: "k", completion: $0) }
        _ = await result { cache.retrieve(forKey: "k", completion: $0) }  // memory hit
        _ = await result { cache.retrieve(forKey: "x", completion: $0) }  // memory miss, disk miss
        cache.memoryStorage.removeAll()
        _ = await result { cache.retrieve(forKey: "k", completion: $0) }  // memory miss, disk hit
        let stats = cache.stats()
        #expect(stats.memoryHits == 1)
        #expect(stats.memoryMisses == 2)
        #expect(stats.diskHits == 1)
        #expect(stats.diskMisses == 1)
        #expect(stats.sets == 1)
        #expect(stats.memoryEntries == 1)
        #expect(stats.memoryBytes == 2)
        #expect(stats.diskEntries == 1)
        #expect(stats.diskBytes > 0)
        #expect(stats.writesQueued == 0)
    }

    @Test func diskAccountFollowsStoresOverwritesAndRemovals() async throws {
        let f = HybridCacheFixture()
        let cache = f.cache
        for i in 0..<10 {
            cache.store(CacheEntry(bytes: [UInt8](repeating: 1, count: 10 * i)), forKey: "k\(i % 4)")
        }
        cache.remove(forKey: "k1")
        var expired = HybridCache.Options()
        expired.diskExpiration = .expired
        cache.store(CacheEntry(bytes: [1]), forKey: "k2", options: expired)
        await f.drain()
        let stats = cache.stats()
        #expect(stats.diskBytes == (try cache.diskStorage.totalSize()))
        #expect(stats.diskEntries == (try cache.diskStorage.count()))
        #expect(stats.diskEntries == 2)
    }

    @Test func diskNotReadyFailsDiskCallsButMemoryStillWorks() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("halcyon-notready-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        // A plain file where the cache folder should be.
        _ = FileManager.default.createFile(atPath: root.appendingPathComponent("test").path, contents: Data([1]))
        let f = HybridCacheFixture(directory: root)
        let cache = f.cache
        #expect(!cache.diskStorage.isReady)
        let failed = await result { cache.store(CacheEntry(bytes: [1]), forKey: "k", completion: $0) }
        guard case .diskStorageIsNotReady = failed.error else {
            Issue.record("expected diskStorageIsNotReady, got \(failed)")
            return
        }
        #expect(!cache.memoryStorage.isCached(forKey: "k"))
        var memoryOnly = HybridCache.Options()
        memoryOnly.toDisk = false
        #expect(try await result { cache.store(CacheEntry(bytes: [2]), forKey: "m", options: memoryOnly, completion: $0) }.get().stored)
        memoryOnly.fromMemoryOnly = true
        #expect(try await result { cache.retrieve(forKey: "m", options: memoryOnly, completion: $0) }.get().entry?.bytes == [2])
        let diskRead = await result { cache.retrieve(forKey: "zz", completion: $0) }
        #expect(diskRead.error != nil)
        #expect(await result { cache.totalSize(completion: $0) }.error != nil)
        _ = cache.stats()  // no crash
    }
}

// MARK: - Fixture shared by the HybridCache suites

final class HybridCacheFixture: Sendable {
    let root: URL
    let clock = ManualClock()
    let cache: HybridCache
    /// Set on `cache.ioQueue`, so a block can tell it runs there.
    static let ioQueueKey = DispatchSpecificKey<Int>()

    init(
        memoryCostLimit: Int = 1 << 20, diskSizeLimit: UInt64 = 0, sweepInterval: TimeInterval = 0,
        directory: URL? = nil, memoryExpiration: StorageExpiration = .seconds(300)
    ) {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("halcyon-hybrid-\(UUID().uuidString)")
        var memory = MemoryStorage.Config(totalCostLimit: memoryCostLimit)
        memory.clock = clock
        memory.cleanInterval = 0
        memory.expiration = memoryExpiration
        var disk = DiskStorage.Config(name: "test", sizeLimit: diskSizeLimit, directory: directory ?? root)
        disk.clock = clock
        var config = HybridCache.Config(memory: memory, disk: disk)
        config.sweepInterval = sweepInterval
        cache = HybridCache(config: config)
        cache.local.scheduler.setSpecificForTesting(key: Self.ioQueueKey, value: 1)
    }

    deinit {
        try? FileManager.default.removeItem(at: root)
    }

    static var onIOQueue: Bool { DispatchQueue.getSpecific(key: ioQueueKey) != nil }

    /// Waits until every job queued on the ioQueue so far has run and delivered.
    func drain() async {
        _ = await result { (done: @escaping @Sendable (Result<Void, CacheError>) -> Void) in
            cache.debugSleep(seconds: 0, completion: done)
        }
    }
}

/// Starts a call and awaits its completion.
func result<T: Sendable>(
    _ start: (@escaping @Sendable (Result<T, CacheError>) -> Void) -> Void
) async -> Result<T, CacheError> {
    await withCheckedContinuation { continuation in
        start { continuation.resume(returning: $0) }
    }
}

func utf8Bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

extension Result {
    var value: Success? { try? get() }
    var error: Failure? {
        if case .failure(let e) = self { return e }
        return nil
    }
}
