// One lifetime per entry: reads extend the entry whichever tier answers, the memory copy's
// residency bounds only its stay in RAM, the extension reaches the file lazily (about
// twice per TTL, departures from memory by the same rule, everything at shutdown), and no
// maintenance deletes an entry that memory keeps alive. All on the fixture's one
// ManualClock for both tiers.

import Foundation
import Testing

@testable import HalcyonCache

@Suite("HybridCache lifetime")
struct HybridCacheLifetimeTests {
    static func ttl(_ seconds: TimeInterval, memory: StorageExpiration? = nil) -> HybridCache.Options {
        var options = HybridCache.Options()
        options.diskExpiration = .seconds(seconds)
        options.memoryExpiration = memory
        return options
    }

    static func store(_ f: HybridCacheFixture, _ key: CacheKey, _ options: HybridCache.Options, bytes: Int = 1) async throws
        -> HybridCache.StoreResult
    {
        try await result { f.cache.store(CacheEntry(bytes: [UInt8](repeating: 7, count: bytes)), forKey: key, options: options, completion: $0) }.get()
    }

    static func get(_ f: HybridCacheFixture, _ key: CacheKey, _ options: HybridCache.Options = .init()) async throws
        -> HybridCache.RetrieveResult
    {
        try await result { f.cache.retrieve(forKey: key, options: options, completion: $0) }.get()
    }

    static func fileExpiry(_ f: HybridCacheFixture, _ key: CacheKey) throws -> Date? {
        try f.cache.diskStorage.meta(forKey: key, referenceDate: .distantPast)?.expiration
    }

    /// The case: a 3 s TTL read every 0.6 s for 8 s never misses, although every
    /// read is answered from memory.
    @Test func slidingOnMemoryHits() async throws {
        let f = HybridCacheFixture()
        _ = try await Self.store(f, "k", Self.ttl(3))
        for _ in 0..<14 {
            f.clock.advance(by: 0.6)
            let hit = try await Self.get(f, "k")
            #expect(hit.cacheType == .memory)
            #expect(hit.expiresAt! >= f.clock.now().addingTimeInterval(2.999))
            await f.drain()
        }
        // The file followed (lazily): a fresh reader of the disk alone would hit too.
        #expect(try Self.fileExpiry(f, "k")! > f.clock.now())
    }

    /// A hot key costs about two file-time writes per TTL, whatever its read rate.
    @Test func writeBackThreshold() async throws {
        let f = HybridCacheFixture(memoryExpiration: .never)
        _ = try await Self.store(f, "hot", Self.ttl(100))
        for _ in 0..<1_000 {  // 1,000 reads over 1,000 s: ten TTLs
            f.clock.advance(by: 1)
            #expect(try await Self.get(f, "hot").cacheType == .memory)
            await f.drain()
        }
        let writes = f.cache.stats().extensionWriteBacks
        #expect(writes >= 19 && writes <= 21)
        // Never more than half a TTL behind.
        #expect(try Self.fileExpiry(f, "hot")! >= f.clock.now().addingTimeInterval(50))
    }

    /// An eviction writes a lifetime back only when the write-back threshold says it is
    /// due: a small slide stays in memory's word alone; a lifetime whose file has at most
    /// half of it left reaches the file.
    @Test func evictionWritesBackOnlyWhenDue() async throws {
        let f = HybridCacheFixture(memoryCostLimit: 8)
        let stored = try await Self.store(f, "a", Self.ttl(1_000), bytes: 5)
        f.clock.advance(by: 100)
        let hit = try await Self.get(f, "a")  // 100 s ahead of the file: below the threshold
        await f.drain()
        #expect(try Self.fileExpiry(f, "a")! < hit.expiresAt!)
        f.clock.advance(by: 1)
        _ = try await Self.store(f, "b", Self.ttl(1_000), bytes: 5)  // evicts "a": 899 of 999 s left, not due
        await f.drain()
        #expect(f.cache.memoryStorage.meta(forKey: "a") == nil)
        #expect(try Self.fileExpiry(f, "a") == stored.expiresAt)
        #expect(f.cache.stats().extensionWriteBacks == 0)

        f.clock.advance(by: 100)
        let hitB = try await Self.get(f, "b")  // again 100 s ahead of its file
        await f.drain()
        f.clock.advance(by: 800)  // the file has 100 s left of the 200 s memory promises: due
        _ = try await Self.store(f, "c", Self.ttl(1_000), bytes: 5)  // evicts "b"
        await f.drain()
        #expect(f.cache.memoryStorage.meta(forKey: "b") == nil)
        #expect(try Self.fileExpiry(f, "b") == hitB.expiresAt)
        #expect(f.cache.stats().extensionWriteBacks == 1)
    }

    /// The end of residency follows the same threshold. A copy kept past its file's own
    /// expiry by reads writes its lifetime back before the disk read that follows (the
    /// ioQueue runs them in order), so that read hits.
    @Test func residencyEndWritesBackWhenDue() async throws {
        let f = HybridCacheFixture(memoryExpiration: .seconds(60))
        let small = try await Self.store(f, "small", Self.ttl(1_000))
        _ = try await Self.store(f, "k", Self.ttl(100))
        f.clock.advance(by: 40)
        _ = try await Self.get(f, "small")  // 40 s of a 1,000 s lifetime: never due
        let hit = try await Self.get(f, "k")  // lifetime +140; the file still says +100
        f.clock.advance(by: 61)  // both residencies are over; k's file has expired
        var read = HybridCache.Options()
        read.extendingExpiration = .none
        let again = try await Self.get(f, "k", read)
        #expect(again.cacheType == .disk)
        #expect(again.expiresAt == hit.expiresAt)
        #expect(try Self.fileExpiry(f, "k") == hit.expiresAt)
        let smallAgain = try await Self.get(f, "small", read)
        #expect(smallAgain.cacheType == .disk)
        #expect(smallAgain.expiresAt == small.expiresAt)
        #expect(f.cache.stats().extensionWriteBacks == 1)
    }

    /// A clear of memory follows the threshold; a clean shutdown writes back every lifetime
    /// memory still holds.
    @Test func clearOfMemoryFollowsTheThresholdAndShutdownFlushes() async throws {
        let f = HybridCacheFixture()
        let storedA = try await Self.store(f, "a", Self.ttl(1_000))
        _ = try await Self.store(f, "b", Self.ttl(1_000))
        f.clock.advance(by: 10)
        let a = try await Self.get(f, "a")
        _ = await result { f.cache.clear(memory: true, disk: false, completion: $0) }
        #expect(try Self.fileExpiry(f, "a") == storedA.expiresAt)
        #expect(try Self.fileExpiry(f, "a")! < a.expiresAt!)

        f.clock.advance(by: 10)
        let b = try await Self.get(f, "b")
        #expect(try Self.fileExpiry(f, "b")! < b.expiresAt!)
        f.cache.shutdown()
        #expect(try Self.fileExpiry(f, "b") == b.expiresAt)
        #expect(f.cache.stats().extensionWriteBacks == 1)
    }

    @Test func sweepAndRemoveExpiredNeverDeleteAnEntryExtendedInMemory() async throws {
        let f = HybridCacheFixture(memoryExpiration: .never)
        _ = try await Self.store(f, "live", Self.ttl(100))
        _ = try await Self.store(f, "dead", Self.ttl(100))
        f.clock.advance(by: 40)
        let hit = try await Self.get(f, "live")  // lifetime now +140; the file still says +100
        await f.drain()
        f.clock.advance(by: 70)  // past the file's expiry, inside the lifetime
        #expect(try await result { f.cache.removeExpired(completion: $0) }.get().removed == 1)  // "dead" only
        #expect(try Self.fileExpiry(f, "live") == hit.expiresAt)
        f.cache.memoryStorage.removeAll()  // not even memory's word is needed now
        #expect(try await Self.get(f, "live").cacheType == .disk)

        _ = try await Self.store(f, "live2", Self.ttl(100))
        f.clock.advance(by: 40)
        let hit2 = try await Self.get(f, "live2")
        await f.drain()
        f.clock.advance(by: 70)
        f.cache.sweepNow()
        await f.drain()
        #expect(try Self.fileExpiry(f, "live2") == hit2.expiresAt)
        #expect(f.cache.stats().sweeps == 1)
    }

    @Test func trimKeepsWhatMemoryReadRecently() async throws {
        // Files of 4,096 + header + 5 key bytes (format 2 keeps the key); the limit holds four.
        let fileBytes = 4_096 + UInt64(DiskStorage.FileHeader.size) + 5
        let f = HybridCacheFixture(memoryCostLimit: 1 << 20, diskSizeLimit: fileBytes * 4 + 1)
        _ = try await Self.store(f, "hot00", Self.ttl(1_000), bytes: 4_096)
        for i in 0..<3 {
            f.clock.advance(by: 1)
            _ = try await Self.store(f, "cold\(i)", Self.ttl(1_000), bytes: 4_096)
        }
        f.clock.advance(by: 1)
        _ = try await Self.get(f, "hot00")  // read from memory: its file's last access is the oldest
        f.clock.advance(by: 1)
        _ = try await Self.store(f, "new00", Self.ttl(1_000), bytes: 4_096)  // over the limit: trims
        await f.drain()
        #expect(try f.cache.diskStorage.meta(forKey: "hot00") != nil)
        #expect(try f.cache.diskStorage.meta(forKey: "cold0") == nil)
        // One measure: bytes on disk as stored, at or below half the limit after the trim.
        let usage = try await result { f.cache.totalSize(completion: $0) }.get()
        #expect(usage.bytes <= (fileBytes * 4 + 1) / 2)
        #expect(usage.bytes == UInt64(usage.count) * fileBytes)
        #expect(f.cache.stats().diskBytes == usage.bytes)
    }

    @Test func referenceDateJudgesBothTiers() async throws {
        let f = HybridCacheFixture()
        let stored = try await Self.store(f, "k", Self.ttl(100))
        var at = HybridCache.Options()
        at.referenceDate = stored.expiresAt
        at.extendingExpiration = .none
        var before = at
        before.referenceDate = stored.expiresAt!.addingTimeInterval(-1)
        for tier in ["memory", "disk"] {
            if tier == "disk" { f.cache.memoryStorage.removeAll() }
            #expect(try await Self.get(f, "k", at).cacheType == .none, "get, \(tier)")
            #expect(try await result { f.cache.cachedType(forKey: "k", options: at, completion: $0) }.get() == .none)
            #expect(try await result { f.cache.describe(forKey: "k", options: at, completion: $0) }.get().cacheType == .none)
            #expect(try await result { f.cache.cachedType(forKey: "k", options: before, completion: $0) }.get().rawValue == tier)
        }
        #expect(try await result { f.cache.removeExpired(referenceDate: stored.expiresAt, completion: $0) }.get().removed == 1)
    }

    @Test func describeReportsLifetimeAndMemoryExpiry() async throws {
        let f = HybridCacheFixture(memoryExpiration: .seconds(300))
        _ = try await Self.store(f, "k", Self.ttl(7 * 86_400))
        let described = try await result { f.cache.describe(forKey: "k", completion: $0) }.get()
        #expect(described.cacheType == .memory)
        #expect(described.expiresAt == f.clock.now().addingTimeInterval(7 * 86_400))
        #expect(described.memoryExpiresAt == f.clock.now().addingTimeInterval(300))
        // The touch's new lifetime, also from memory.
        var touch = Self.ttl(5_000)
        touch.memoryExpiration = nil
        let touched = try await result { f.cache.touch(forKey: "k", options: touch, completion: $0) }.get()
        #expect(touched.expiresAt == f.clock.now().addingTimeInterval(5_000))
        let hit = try await Self.get(f, "k")
        #expect(hit.expiresAt == f.clock.now().addingTimeInterval(5_000))
        f.cache.memoryStorage.removeAll()
        let onDisk = try await result { f.cache.describe(forKey: "k", completion: $0) }.get()
        #expect(onDisk.cacheType == .disk)
        #expect(onDisk.expiresAt == hit.expiresAt)
        #expect(onDisk.memoryExpiresAt == nil)
    }

    @Test func memoryOnlyEntryLivesByItsMemoryExpiration() async throws {
        let f = HybridCacheFixture()
        var options = Self.ttl(1_000, memory: .seconds(10))
        options.toDisk = false
        let stored = try await Self.store(f, "m", options)
        #expect(stored.expiresAt == f.clock.now().addingTimeInterval(10))
        let described = try await result { f.cache.describe(forKey: "m", completion: $0) }.get()
        #expect(described.memoryExpiresAt == described.expiresAt)
        f.clock.advance(by: 10)
        #expect(try await Self.get(f, "m").cacheType == .none)
    }
}
