// The memory tier's namespace quotas: a namespace over its quota loses its own least
// recently used entries and never another's; a value larger than its quota is not
// stored; a shrunk quota evicts down to it; the per-namespace counters add up. Each test
// runs against one lock and 16 shards, on a ManualClock (recency follows its instants).

import Foundation
import HalcyonSupport
import Testing

@testable import HalcyonCache

@Suite("MemoryStorage quotas", .timeLimit(.minutes(1)))
struct MemoryStorageQuotaTests {
    static let designs = [1, 16]
    static let a = Namespace("a")!
    static let b = Namespace("b")!

    static func key(_ namespace: Namespace, _ i: Int) -> CacheKey {
        Namespace.cacheKey("k\(i)", in: namespace)
    }

    /// A tier with room for everything, where `a` may hold 1000 bytes and `b` has no quota.
    static func make(shards: Int, quotaA: Int = 1000) -> (MemoryStorage.Backend, ManualClock) {
        let (memory, clock) = MemoryStorageTests.make(shards: shards)
        memory.setQuotas(Quotas([a: .init(memory: quotaA)]))
        memory.register(b)
        return (memory, clock)
    }

    static func stats(_ memory: MemoryStorage.Backend, _ namespace: Namespace) -> MemoryStorage.NamespaceStats? {
        memory.namespaceStats().first { $0.namespace == namespace }
    }

    @Test func namespaceOfAKey() {
        #expect(Self.key(Self.a, 1).namespace == Self.a)
        #expect(CacheKey("plain").namespace == nil)
        #expect(CacheKey("\u{1F}k").namespace == nil)
        #expect(CacheKey("sp ace\u{1F}k").namespace == nil)
        #expect(CacheKey(String(repeating: "n", count: 65) + "\u{1F}k").namespace == nil)
        #expect(CacheKey("a\u{1F}x\u{1F}y").namespacePrefixLength == 2)
    }

    @Test(arguments: designs) func overItsQuotaANamespaceEvictsOnlyItsOwnLeastRecentlyUsed(shards: Int) {
        let (memory, clock) = Self.make(shards: shards)
        for i in 0..<20 {
            clock.advance(by: 1)
            #expect(memory.store(MemoryStorageTests.entry(100), forKey: Self.key(Self.b, i)))
        }
        for i in 0..<10 {
            clock.advance(by: 1)
            memory.store(MemoryStorageTests.entry(100), forKey: Self.key(Self.a, i))
        }
        // a0 read last: the least recently used of `a` is now a1.
        clock.advance(by: 1)
        #expect(memory.value(forKey: Self.key(Self.a, 0)) != nil)
        for i in 10..<15 {
            clock.advance(by: 1)
            memory.store(MemoryStorageTests.entry(100), forKey: Self.key(Self.a, i))
        }
        // b's entries are older than all of a's, and every one stays.
        for i in 0..<20 { #expect(memory.isCached(forKey: Self.key(Self.b, i)), "b\(i) evicted") }
        #expect(memory.isCached(forKey: Self.key(Self.a, 0)))
        for i in 1...5 { #expect(!memory.isCached(forKey: Self.key(Self.a, i)), "a\(i) kept") }
        for i in 6..<15 { #expect(memory.isCached(forKey: Self.key(Self.a, i))) }
        let a = Self.stats(memory, Self.a)
        #expect(a?.totalCost == 1000)
        #expect(a?.count == 10)
        #expect(a?.evictions == 5)
        #expect(a?.quota == 1000)
        let b = Self.stats(memory, Self.b)
        #expect(b?.totalCost == 2000)
        #expect(b?.evictions == 0)
        #expect(memory.stats.evictions == 5)
        #expect(memory.totalCost == 3000)
    }

    @Test(arguments: designs) func aValueLargerThanItsQuotaIsNotStored(shards: Int) {
        let (memory, _) = Self.make(shards: shards)
        let key = Self.key(Self.a, 1)
        #expect(memory.store(MemoryStorageTests.entry(10), forKey: key))
        #expect(!memory.store(MemoryStorageTests.entry(1001), forKey: key))
        #expect(!memory.isCached(forKey: key))
        #expect(memory.quota(forKey: key) == 1000)
        #expect(memory.quota(forKey: Self.key(Self.b, 1)) == 0)
        let limits = EntrySizeLimits(diskSizeLimit: 0, memoryLimit: 0)
        var withQuotas = limits
        withQuotas.holdToQuotas(of: memory)
        #expect(withQuotas.exceeded(key: key, valueBytes: 1001, toDisk: false)?.limit == 1000)
        #expect(withQuotas.exceeded(key: key, valueBytes: 1001, toDisk: false)?.quota == true)
        #expect(withQuotas.exceeded(key: key, valueBytes: 1000, toDisk: false) == nil)
        #expect(withQuotas.exceeded(key: key, valueBytes: 1001, toDisk: true) == nil)
    }

    @Test(arguments: designs) func aShrunkQuotaEvictsDownToIt(shards: Int) {
        let (memory, clock) = Self.make(shards: shards)
        for i in 0..<10 {
            clock.advance(by: 1)
            memory.store(MemoryStorageTests.entry(100), forKey: Self.key(Self.a, i))
            memory.store(MemoryStorageTests.entry(100), forKey: Self.key(Self.b, i))
        }
        memory.setQuotas(Quotas([Self.a: .init(memory: 300), Self.b: .init(memory: 0)]))
        #expect(Self.stats(memory, Self.a)?.totalCost == 300)
        #expect(Self.stats(memory, Self.a)?.evictions == 7)
        for i in 7..<10 { #expect(memory.isCached(forKey: Self.key(Self.a, i))) }
        #expect(Self.stats(memory, Self.b)?.count == 10)
    }

    @Test(arguments: designs) func entriesStoredBeforeTheirNamespaceIsAccountedJoinIt(shards: Int) {
        let (memory, _) = MemoryStorageTests.make(shards: shards)
        for i in 0..<4 { memory.store(MemoryStorageTests.entry(100), forKey: Self.key(Self.a, i)) }
        memory.store(MemoryStorageTests.entry(100), forKey: "plain")
        memory.setQuotas(Quotas([Self.a: .init(memory: 250)]))
        let a = Self.stats(memory, Self.a)
        #expect(a?.count == 2)
        #expect(a?.evictions == 2)
        #expect(memory.isCached(forKey: "plain"))
    }

    @Test(arguments: designs) func hitsMissesAndRemovalsCountInTheNamespace(shards: Int) {
        let (memory, _) = Self.make(shards: shards)
        let key = Self.key(Self.b, 1)
        memory.store(MemoryStorageTests.entry(10), forKey: key)
        #expect(memory.value(forKey: key) != nil)
        #expect(memory.value(forKey: Self.key(Self.b, 2)) == nil)
        #expect(memory.value(forKey: "plain") == nil)
        memory.countSet(forKey: key)
        var b = Self.stats(memory, Self.b)
        #expect(b?.hits == 1)
        #expect(b?.misses == 1)
        #expect(b?.sets == 1)
        #expect(b?.count == 1)
        memory.remove(forKey: key)
        b = Self.stats(memory, Self.b)
        #expect(b?.count == 0)
        #expect(b?.totalCost == 0)
        memory.store(MemoryStorageTests.entry(10), forKey: key)
        memory.removeAll()
        #expect(Self.stats(memory, Self.b)?.totalCost == 0)
        #expect(Self.stats(memory, Self.a)?.hits == 0)
    }
}

extension MemoryStorageQuotaTests {
    @Test(arguments: designs) func replacingAnEntryChangesItsNamespaceByTheDifference(shards: Int) {
        let (memory, clock) = Self.make(shards: shards)
        let key = Self.key(Self.b, 1)
        let mirror = MemoryStorageTests.mirror(clock, ttl: 1_000)
        #expect(memory.store(MemoryStorageTests.entry(10), forKey: key, residency: .seconds(300), mirroring: mirror, countingSet: true))
        #expect(memory.store(MemoryStorageTests.entry(40), forKey: key, residency: .seconds(300), mirroring: mirror, countingSet: true))
        memory.store(MemoryStorageTests.entry(5), forKey: key)
        var b = Self.stats(memory, Self.b)
        #expect(b?.count == 1)
        #expect(b?.totalCost == 5)
        #expect(b?.sets == 2)
        // A store refused (its lifetime already over) still counts when asked to.
        let over = MemoryStorage.Mirror(
            expiresAt: clock.now().addingTimeInterval(-1), timeToLive: nil, extendedAt: clock.now(),
            diskExpiresAt: clock.now().addingTimeInterval(-1), forcedExtension: nil)
        #expect(!memory.store(MemoryStorageTests.entry(10), forKey: key, residency: .seconds(300), mirroring: over, countingSet: true))
        b = Self.stats(memory, Self.b)
        #expect(b?.sets == 3)
        #expect(b?.count == 0)
        #expect(b?.totalCost == 0)
    }
}

/// The quotas through the hybrid cache's write path: sets count in their namespace, and a
/// value for the disk larger than the quota is kept there without a memory copy.
@Suite("HybridCache namespace quotas", .timeLimit(.minutes(1)))
struct HybridCacheQuotaTests {
    @Test func storesCountInTheirNamespaceAndTheDiskKeepsWhatTheQuotaCannot() async throws {
        let f = HybridCacheFixture()
        let cache = f.cache
        let a = MemoryStorageQuotaTests.a
        cache.setQuotas(Quotas([a: .init(memory: 100)]))
        let small = MemoryStorageQuotaTests.key(a, 1)
        let large = MemoryStorageQuotaTests.key(a, 2)
        #expect(try await result { cache.store(CacheEntry(bytes: [1]), forKey: small, completion: $0) }.get().stored)
        #expect(try await result {
            cache.store(CacheEntry(bytes: [UInt8](repeating: 2, count: 101)), forKey: large, completion: $0)
        }.get().stored)
        #expect(cache.memoryStorage.isCached(forKey: small))
        #expect(!cache.memoryStorage.isCached(forKey: large))
        let read = try await result { cache.retrieve(forKey: large, completion: $0) }.get()
        #expect(read.entry?.bytes.count == 101)
        let stats = cache.namespaceStats().first { $0.namespace == a }
        #expect(stats?.sets == 2)
        #expect(stats?.totalCost == 1)
        #expect(stats?.quota == 100)
    }
}

/// Journaled sets (group commit) count in their namespace once each, an already expired
/// one too, as the tier's own `sets` counts them.
@Suite("HybridCache journaled namespace sets", .timeLimit(.minutes(1)))
struct HybridCacheJournaledSetTests {
    @Test func journaledSetsCountOnceInTheirNamespace() async throws {
        let f = JournalCacheFixture()
        let cache = f.open()
        let (a, b) = (MemoryStorageQuotaTests.a, MemoryStorageQuotaTests.b)
        cache.setQuotas(Quotas([a: .init(memory: 1000)]))
        cache.registerNamespace(b)
        for i in 0..<3 {
            _ = try await HybridCacheJournalTests.store(cache, MemoryStorageQuotaTests.key(a, i), "value")
        }
        _ = try await HybridCacheJournalTests.store(cache, MemoryStorageQuotaTests.key(a, 0), "again")
        let expired = try await result {
            cache.store(CacheEntry(bytes: [1]), forKey: MemoryStorageQuotaTests.key(a, 9), options: HybridCacheTouchTests.ttl(.expired), completion: $0)
        }.get()
        #expect(!expired.stored)
        let stats = cache.namespaceStats()
        let sa = stats.first { $0.namespace == a }
        #expect(sa?.sets == 5)
        #expect(sa?.count == 3)
        #expect(stats.first { $0.namespace == b }?.sets == 0)
        #expect(cache.stats().sets == 5)
    }
}

/// The disk quota (LocalStore+DiskQuotas.swift): a namespace whose files pass its quota
/// loses its own least recently accessed files, down to half the quota; another
/// namespace's files all stay; the evictions count in the namespace and the tier.
@Suite("HybridCache namespace disk quotas", .timeLimit(.minutes(1)))
struct HybridCacheDiskQuotaTests {
    static func onDisk(_ cache: HybridCache, _ key: CacheKey) -> Bool {
        (try? cache.diskStorage.meta(forKey: key, referenceDate: .distantPast)) != nil
    }

    @Test func overItsDiskQuotaANamespaceLosesOnlyItsOwnOldestFiles() async throws {
        let f = HybridCacheFixture()
        let cache = f.cache
        let (a, b) = (MemoryStorageQuotaTests.a, MemoryStorageQuotaTests.b)
        let value = [UInt8](repeating: 7, count: 100)
        let fileSize = UInt64(DiskStorage.FileHeader.size + MemoryStorageQuotaTests.key(a, 0).count + value.count)
        cache.setQuotas(Quotas([a: .init(disk: 10 * fileSize)]))
        cache.registerNamespace(b)
        for i in 0..<10 {
            f.clock.advance(by: 1)
            _ = try await result { cache.store(CacheEntry(bytes: value), forKey: MemoryStorageQuotaTests.key(b, i), completion: $0) }.get()
        }
        for i in 0...10 {
            f.clock.advance(by: 1)
            _ = try await result { cache.store(CacheEntry(bytes: value), forKey: MemoryStorageQuotaTests.key(a, i), completion: $0) }.get()
        }
        await f.drain()
        // The eleventh file (a byte longer: its key is) took `a` over: its oldest went
        // until it held at most half its quota, 10 files less 7 plus the new one.
        for i in 0...6 { #expect(!Self.onDisk(cache, MemoryStorageQuotaTests.key(a, i)), "a\(i) kept") }
        for i in 7...10 { #expect(Self.onDisk(cache, MemoryStorageQuotaTests.key(a, i)), "a\(i) removed") }
        for i in 0..<10 { #expect(Self.onDisk(cache, MemoryStorageQuotaTests.key(b, i)), "b\(i) removed") }
        let stats = cache.namespaceStats()
        let sa = stats.first { $0.namespace == a }
        let sb = stats.first { $0.namespace == b }
        #expect(sa?.diskEvictions == 7)
        #expect(sa?.diskEntries == 4)
        #expect(sa?.diskBytes == 4 * fileSize + 1)
        #expect(sa?.diskQuota == 10 * fileSize)
        #expect(sb?.diskEntries == 10)
        #expect(sb?.diskEvictions == 0)
        #expect(cache.stats().diskEvictions == 7)

        // A smaller quota applies on the ioQueue, evicting down to half of it.
        cache.setQuotas(Quotas([a: .init(disk: 4 * fileSize)]))
        await f.drain()
        #expect(cache.namespaceStats().first { $0.namespace == a }?.diskEntries == 1)
        #expect(cache.namespaceStats().first { $0.namespace == a }?.diskEvictions == 10)
        #expect(Self.onDisk(cache, MemoryStorageQuotaTests.key(a, 10)))
        #expect(cache.namespaceStats().first { $0.namespace == b }?.diskEntries == 10)
    }
}
