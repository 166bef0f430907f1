// The memory tier: LRU order, both limits, each expiration and extension kind (on a
// ManualClock, so nothing sleeps except the clean-timer test), touch, removal, counters,
// and many threads at once. Each test runs against both designs: one global lock
// (shardCount 1) and 16 shards.

import Foundation
import HalcyonSupport
import Testing

@testable import HalcyonCache

@Suite("MemoryStorage", .timeLimit(.minutes(1)))
struct MemoryStorageTests {
    static let designs = [1, 16]

    static func make(
        shards: Int, costLimit: Int = 0, countLimit: Int = 0, expiration: StorageExpiration = .seconds(300)
    ) -> (MemoryStorage.Backend, ManualClock) {
        let clock = ManualClock()
        var config = MemoryStorage.Config(totalCostLimit: costLimit)
        config.countLimit = countLimit
        config.expiration = expiration
        config.cleanInterval = 0
        config.clock = clock
        config.shardCount = shards
        return (MemoryStorage.Backend(config: config), clock)
    }

    static func entry(_ size: Int, _ byte: UInt8 = 1, flags: UInt32 = 0) -> CacheEntry {
        CacheEntry(bytes: [UInt8](repeating: byte, count: size), flags: flags)
    }

    /// A hit lent where it lies (`lendValue`) shows the bytes the key holds, through
    /// replacements by values of other sizes, removals whose slots later stores reuse, and
    /// a change of the caller's own array after the store; a declined hit is the same entry
    /// copied.
    @Test(arguments: designs) func lentHitsShowTheStoredBytes(shards: Int) {
        let (memory, _) = Self.make(shards: shards)
        var expected: [CacheKey: CacheEntry] = [:]
        func store(_ key: CacheKey, _ entry: CacheEntry) {
            #expect(memory.store(entry, forKey: key))
            expected[key] = entry
        }
        for i in 0..<64 { store(CacheKey("k\(i)"), Self.entry(i % 7 + 1, UInt8(i), flags: UInt32(i))) }
        for i in stride(from: 0, to: 64, by: 3) {
            #expect(memory.remove(forKey: CacheKey("k\(i)")))
            expected[CacheKey("k\(i)")] = nil
        }
        for i in 64..<80 { store(CacheKey("k\(i)"), Self.entry(200 + i, UInt8(i))) }
        for i in stride(from: 1, to: 64, by: 3) { store(CacheKey("k\(i)"), Self.entry(1000 + i, UInt8(255 - i))) }
        var mine: [UInt8] = [9, 9, 9]
        store("mine", CacheEntry(bytes: mine, flags: 3, version: 42))
        mine[0] = 0
        mine.append(contentsOf: [UInt8](repeating: 0, count: 4096))

        for i in 0..<80 {
            let key = CacheKey("k\(i)")
            var seen: (bytes: [UInt8], flags: UInt32, version: UInt64)?
            let lent = memory.lendValue(forKey: key) { entry, _ in
                seen = (Array(entry.bytes), entry.flags, entry.version)
                return true
            }
            guard let want = expected[key] else {
                #expect(lent == nil, "k\(i) was removed")
                continue
            }
            guard case .taken = lent else { Issue.record("k\(i): not lent"); continue }
            #expect(seen?.bytes == want.bytes, "k\(i)")
            #expect(seen?.flags == want.flags && seen?.version == want.version, "k\(i)")
        }
        var seen: [UInt8] = []
        _ = memory.lendValue(forKey: "mine") { entry, _ in seen = Array(entry.bytes); return true }
        #expect(seen == [9, 9, 9])
        guard case .declined(let copied, _) = memory.lendValue(forKey: "mine", taking: { _, _ in false }) else {
            Issue.record("a declined hit answers the entry copied")
            return
        }
        #expect(copied == CacheEntry(bytes: [9, 9, 9], flags: 3, version: 42))
    }

    @Test(arguments: designs) func storeAndReadBack(shards: Int) {
        let (memory, clock) = Self.make(shards: shards)
        #expect(memory.store(CacheEntry(bytes: [1, 2, 3], flags: 7), forKey: "k"))
        #expect(memory.value(forKey: "k") == CacheEntry(bytes: [1, 2, 3], flags: 7))
        #expect(memory.value(forKey: "other") == nil)
        let meta = memory.meta(forKey: "k")
        #expect(meta?.size == 3)
        #expect(meta?.flags == 7)
        #expect(meta?.expiration == clock.now().addingTimeInterval(300))
        #expect(memory.totalCost == 3)
        #expect(memory.count == 1)
        memory.store(CacheEntry(bytes: [9]), forKey: "k")
        #expect(memory.value(forKey: "k")?.bytes == [9])
        #expect(memory.totalCost == 1)
        #expect(memory.count == 1)
        let stats = memory.stats
        #expect(stats.hits == 2)
        #expect(stats.misses == 1)
    }

    @Test(arguments: designs) func eachExpirationKind(shards: Int) {
        let (memory, clock) = Self.make(shards: shards)
        let now = clock.now()
        memory.store(Self.entry(1), forKey: "never", expiration: .never)
        memory.store(Self.entry(1), forKey: "seconds", expiration: .seconds(10))
        memory.store(Self.entry(1), forKey: "days", expiration: .days(1))
        memory.store(Self.entry(1), forKey: "date", expiration: .date(now.addingTimeInterval(20)))
        #expect(!memory.store(Self.entry(1), forKey: "expired", expiration: .expired))
        #expect(!memory.store(Self.entry(1), forKey: "past", expiration: .date(now.addingTimeInterval(-1))))
        #expect(memory.meta(forKey: "never")?.expiration == .distantFuture)
        #expect(memory.meta(forKey: "days")?.expiration == now.addingTimeInterval(86_400))
        #expect(!memory.isCached(forKey: "expired"))
        #expect(!memory.isCached(forKey: "past"))
        clock.advance(by: 10)
        #expect(!memory.isCached(forKey: "seconds"))  // expiration instant itself counts as expired
        #expect(memory.isCached(forKey: "date"))
        clock.advance(by: 10)
        #expect(memory.value(forKey: "date") == nil)
        clock.advance(by: 86_400)
        #expect(memory.value(forKey: "days") == nil)
        #expect(memory.value(forKey: "never") != nil)
        // "date" and "days" were found expired on read; "seconds" by `isCached`, which
        // removes a departed entry (so that a lifetime ahead of its file is written back).
        #expect(memory.stats.expirations == 3)
    }

    @Test(arguments: designs) func storingExpiredRemovesTheOlderValue(shards: Int) {
        let (memory, _) = Self.make(shards: shards)
        memory.store(Self.entry(4), forKey: "k")
        #expect(!memory.store(Self.entry(4), forKey: "k", expiration: .seconds(0)))
        #expect(memory.value(forKey: "k") == nil)
        #expect(memory.totalCost == 0)
    }

    @Test(arguments: designs) func eachExtendingKind(shards: Int) {
        let (memory, clock) = Self.make(shards: shards)
        memory.store(Self.entry(1), forKey: "slide", expiration: .seconds(10))
        memory.store(Self.entry(1), forKey: "fixed", expiration: .seconds(10))
        memory.store(Self.entry(1), forKey: "reset", expiration: .seconds(10))
        clock.advance(by: 6)
        _ = memory.value(forKey: "slide")  // .cacheTime by default
        _ = memory.value(forKey: "fixed", extendingExpiration: .none)
        let reset = memory.valueAndMeta(forKey: "reset", extendingExpiration: .expirationTime(.seconds(100)))
        #expect(reset?.meta.expiration == clock.now().addingTimeInterval(100))
        #expect(memory.meta(forKey: "slide")?.expiration == clock.now().addingTimeInterval(10))
        #expect(memory.meta(forKey: "slide")?.lastAccess == clock.now())
        clock.advance(by: 6)
        #expect(memory.isCached(forKey: "slide"))
        #expect(!memory.isCached(forKey: "fixed"))
        #expect(memory.isCached(forKey: "reset"))
    }

    @Test(arguments: designs) func metaAndIsCachedNeverExtendReorderOrCount(shards: Int) {
        let (memory, clock) = Self.make(shards: shards, countLimit: 2)
        memory.store(Self.entry(1), forKey: "a", expiration: .seconds(10))
        clock.advance(by: 1)
        memory.store(Self.entry(1), forKey: "b")
        clock.advance(by: 1)
        #expect(memory.isCached(forKey: "a"))
        #expect(memory.meta(forKey: "a")?.lastAccess == clock.now().addingTimeInterval(-2))
        memory.store(Self.entry(1), forKey: "c")  // "a" is still least recently used
        #expect(!memory.isCached(forKey: "a"))
        #expect(memory.stats.hits == 0)
        #expect(memory.stats.misses == 0)
    }

    /// Recency is kept in whole seconds, the precision `lastAccessAt` is reported in: a
    /// read in the same second as the entry's last access leaves it where it is (and its
    /// last access as it was), a read in a later second makes it the newest.
    @Test(arguments: designs) func recencyMovesOncePerWholeSecond(shards: Int) {
        let (memory, clock) = Self.make(shards: shards, countLimit: 2)
        clock.advance(by: 0.1)  // 1_700_000_000.1: the second begins before the first store
        memory.store(Self.entry(1), forKey: "a")
        let stored = clock.now()
        clock.advance(by: 0.3)
        memory.store(Self.entry(1), forKey: "b")
        clock.advance(by: 0.3)
        #expect(memory.value(forKey: "a") != nil)  // the same second as its store
        #expect(memory.meta(forKey: "a")?.lastAccess == stored)
        memory.store(Self.entry(1), forKey: "c")
        #expect(!memory.isCached(forKey: "a"), "a read within the second does not move the entry")
        #expect(memory.isCached(forKey: "b") && memory.isCached(forKey: "c"))

        clock.advance(by: 0.5)  // the next whole second
        #expect(memory.value(forKey: "b") != nil)
        #expect(memory.meta(forKey: "b")?.lastAccess == clock.now())
        memory.store(Self.entry(1), forKey: "d")
        #expect(memory.isCached(forKey: "b"), "a read in a later second makes the entry the newest")
        #expect(!memory.isCached(forKey: "c"))
    }

    @Test(arguments: designs) func costLimitEvictsLeastRecentlyUsed(shards: Int) {
        let (memory, clock) = Self.make(shards: shards, costLimit: 30)
        for key in ["a", "b", "c"] as [CacheKey] {
            memory.store(Self.entry(10), forKey: key)
            clock.advance(by: 1)
        }
        _ = memory.value(forKey: "a")
        clock.advance(by: 1)
        memory.store(Self.entry(10), forKey: "d")
        #expect(memory.isCached(forKey: "a"))
        #expect(!memory.isCached(forKey: "b"))
        #expect(memory.isCached(forKey: "c"))
        #expect(memory.isCached(forKey: "d"))
        #expect(memory.totalCost == 30)
        clock.advance(by: 1)
        memory.store(Self.entry(25), forKey: "big")  // needs three victims: c, a, d
        #expect(memory.count == 1)
        #expect(memory.totalCost == 25)
        #expect(memory.stats.evictions == 4)
        #expect(!memory.store(Self.entry(31), forKey: "huge"))  // larger than the whole limit
        #expect(memory.isCached(forKey: "big"))
    }

    /// Eviction picks its shard by each shard's published oldest access: removals,
    /// replacements and a clear must each leave the next victim the true oldest.
    @Test(arguments: designs) func evictionFollowsRemovalsReplacementsAndClears(shards: Int) {
        let (memory, clock) = Self.make(shards: shards, costLimit: 30)
        for key in ["a", "b", "c"] as [CacheKey] {
            memory.store(Self.entry(10), forKey: key)
            clock.advance(by: 1)
        }
        memory.remove(forKey: "a")
        memory.store(Self.entry(10), forKey: "b")  // replaced: now the newest
        clock.advance(by: 1)
        memory.store(Self.entry(10), forKey: "d")
        clock.advance(by: 1)
        memory.store(Self.entry(10), forKey: "e")  // over the limit: "c" is the oldest
        #expect(!memory.isCached(forKey: "c"))
        #expect(["b", "d", "e"].allSatisfy { memory.isCached(forKey: $0) })
        memory.removeAll()
        for key in ["f", "g", "h", "i"] as [CacheKey] {
            clock.advance(by: 1)
            memory.store(Self.entry(10), forKey: key)
        }
        #expect(!memory.isCached(forKey: "f"))
        #expect(["g", "h", "i"].allSatisfy { memory.isCached(forKey: $0) })
        #expect(memory.stats.evictions == 2)
    }

    /// Random stores, reads, removals and clears of 40 keys under a count limit of 10,
    /// against a model that evicts exactly the least recently used: with 16 shards most
    /// shards hold several keys, so every way a shard's oldest entry changes (a touch, a
    /// replacement, a removal, an eviction, a clear) is met whatever the hash seed places
    /// where, and a shard that published a stale oldest access makes the sets differ.
    @Test(arguments: designs) func evictionMatchesAnExactLeastRecentlyUsedModel(shards: Int) {
        let (memory, clock) = Self.make(shards: shards, countLimit: 10)
        let keys = (0..<40).map { CacheKey("k\($0)") }
        var model: [CacheKey: Int] = [:]  // key -> step of its last access
        var random: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next(_ bound: Int) -> Int {
            random = random &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((random >> 33) % UInt64(bound))
        }
        for step in 0..<3_000 {
            clock.advance(by: 1)
            let key = keys[next(keys.count)]
            switch next(100) {
            case 0..<45:
                memory.store(Self.entry(1), forKey: key)
                model[key] = step
                while model.count > 10 {
                    let oldest = model.min { $0.value < $1.value }!.key
                    model[oldest] = nil
                }
            case 45..<85:
                let found = memory.value(forKey: key) != nil
                #expect(found == (model[key] != nil), "step \(step): read of \(key)")
                if found { model[key] = step }
            case 85..<99:
                memory.remove(forKey: key)
                model[key] = nil
            default:
                memory.removeAll()
                model.removeAll()
            }
            let cached = Set(keys.filter { memory.isCached(forKey: $0) })
            if cached != Set(model.keys) {
                Issue.record("step \(step): cached \(cached.sorted()), model \(model.keys.sorted())")
                return
            }
        }
    }

    @Test(arguments: designs) func countLimitEvictsLeastRecentlyUsed(shards: Int) {
        let (memory, clock) = Self.make(shards: shards, countLimit: 3)
        for i in 0..<10 {
            memory.store(Self.entry(1), forKey: "k\(i)")
            clock.advance(by: 1)
        }
        #expect(memory.count == 3)
        #expect((7..<10).allSatisfy { memory.isCached(forKey: "k\($0)") })
        #expect(memory.stats.evictions == 7)
    }

    @Test(arguments: designs) func touch(shards: Int) {
        let (memory, clock) = Self.make(shards: shards)
        memory.store(Self.entry(1), forKey: "k", expiration: .seconds(10))
        clock.advance(by: 5)
        #expect(memory.touch(forKey: "k") == clock.now().addingTimeInterval(10))
        #expect(memory.touch(forKey: "k", expiration: .never) == .distantFuture)
        #expect(memory.touch(forKey: "missing") == nil)
        #expect(memory.touch(forKey: "k", expiration: .expired) == nil)
        #expect(!memory.isCached(forKey: "k"))
        #expect(memory.count == 0)
    }

    static func mirror(_ clock: ManualClock, ttl: TimeInterval) -> MemoryStorage.Mirror {
        let end = clock.now().addingTimeInterval(ttl)
        return .init(expiresAt: end, timeToLive: ttl, extendedAt: clock.now(), diskExpiresAt: end, forcedExtension: nil)
    }

    /// A hit given the instant its request had arrived by (`lendValue(arrivedBy:)`) is
    /// judged and extended at it, not at the clock's now; but never at an instant before the
    /// entry's own last change or use, so a read that arrived before a later store or read of
    /// the key cannot take back the lifetime those gave it.
    @Test(arguments: designs) func aHitIsJudgedWhenItsRequestArrived(shards: Int) {
        let (memory, clock) = Self.make(shards: shards)
        func lend(_ key: CacheKey, arrivedBy: Date) -> Date? {
            switch memory.lendValue(forKey: key, arrivedBy: arrivedBy, taking: { _, _ in false }) {
            case .declined(_, let expiresAt): return expiresAt
            case .taken, nil: return nil
            }
        }
        let arrived = clock.now()
        clock.advance(by: 5)
        #expect(memory.store(Self.entry(1), forKey: "k", residency: nil, mirroring: Self.mirror(clock, ttl: 10)))
        // Stored 5 s after the read arrived: judged at the store, its lifetime stays.
        #expect(lend("k", arrivedBy: arrived) == clock.now().addingTimeInterval(10))
        // Arrived 4 s later than the store: extended from that instant, not the clock's now.
        clock.advance(by: 6)
        #expect(lend("k", arrivedBy: clock.now().addingTimeInterval(-2)) == clock.now().addingTimeInterval(8))
        // Past its lifetime at the clock's now, but not when its read arrived: a hit.
        clock.advance(by: 9)
        #expect(lend("k", arrivedBy: clock.now().addingTimeInterval(-2)) == clock.now().addingTimeInterval(8))
        // Past its lifetime when the read arrived: a miss, and the entry leaves.
        clock.advance(by: 30)
        #expect(lend("k", arrivedBy: clock.now().addingTimeInterval(-1)) == nil)
        #expect(!memory.isCached(forKey: "k"))
    }

    /// A resident copy of a disk entry: the lifetime slides with reads, the residency
    /// (memory expiration) bounds only how long the bytes stay, and the copy leaves at
    /// the earlier of the two.
    @Test(arguments: designs) func lifetimeAndResidencyAreSeparate(shards: Int) {
        let (memory, clock) = Self.make(shards: shards)
        #expect(memory.store(Self.entry(1), forKey: "k", residency: .seconds(300), mirroring: Self.mirror(clock, ttl: 1_000)))
        var meta = memory.meta(forKey: "k")
        #expect(meta?.expiration == clock.now().addingTimeInterval(1_000))
        #expect(meta?.memoryExpiration == clock.now().addingTimeInterval(300))
        #expect(meta?.hasDiskCopy == true)
        // A read 200 s later slides both: the lifetime by its own TTL, residency by 300 s.
        clock.advance(by: 200)
        meta = memory.valueAndMeta(forKey: "k")?.meta
        #expect(meta?.expiration == clock.now().addingTimeInterval(1_000))
        #expect(meta?.memoryExpiration == clock.now().addingTimeInterval(300))
        // Without reads the residency ends first: the copy leaves. Its file still holds 500
        // of the 700 s memory promised, more than half: by the write-back threshold that
        // departure writes nothing.
        clock.advance(by: 300)
        #expect(memory.value(forKey: "k") == nil)
        #expect(memory.takeWriteBacks().isEmpty)
        // A lifetime shorter than the residency ends the copy at the lifetime.
        #expect(memory.store(Self.entry(1), forKey: "short", residency: .seconds(300), mirroring: Self.mirror(clock, ttl: 10)))
        clock.advance(by: 10)
        #expect(memory.value(forKey: "short") == nil)
        #expect(memory.takeWriteBacks().isEmpty)
    }

    /// `referenceDate` judges the lifetime: at or after it the entry is a miss, and it
    /// stays (unextended) for reads at the real now.
    @Test(arguments: designs) func referenceDateJudgesTheLifetime(shards: Int) {
        let (memory, clock) = Self.make(shards: shards)
        memory.store(Self.entry(1), forKey: "k", residency: .seconds(300), mirroring: Self.mirror(clock, ttl: 100))
        let end = clock.now().addingTimeInterval(100)
        #expect(memory.valueAndMeta(forKey: "k", referenceDate: end, extendingExpiration: .cacheTime) == nil)
        #expect(memory.meta(forKey: "k", referenceDate: end) == nil)
        #expect(memory.meta(forKey: "k", referenceDate: end.addingTimeInterval(-1))?.expiration == end)
        #expect(memory.meta(forKey: "k")?.expiration == end)
        #expect(memory.removeExpired(referenceDate: end) == 1)
        #expect(memory.count == 0)
    }

    /// The write-back threshold: a hot key's lifetime goes to the write-back set only once
    /// the disk copy has at most half of the lifetime left, whatever the read rate.
    @Test(arguments: designs) func writeBackOnlyPastHalfTheTTL(shards: Int) {
        let (memory, clock) = Self.make(shards: shards)
        memory.store(Self.entry(1), forKey: "k", residency: .never, mirroring: Self.mirror(clock, ttl: 100))
        var taken: [MemoryStorage.WriteBack] = []
        for _ in 0..<1_000 {  // 1,000 reads over 1,000 s: ten TTLs
            clock.advance(by: 1)
            #expect(memory.value(forKey: "k") != nil)
            taken += memory.takeWriteBacks()
        }
        // One write-back every half TTL (50 s): about 20, never one per read.
        #expect(taken.count >= 19 && taken.count <= 21)
        #expect(taken.allSatisfy { $0.timeToLive == 100 })
    }

    /// A departure (eviction, memory-only removal or clear) follows the write-back threshold
    /// as a resident node does: a lifetime that slid a little ahead of its file writes
    /// nothing; one whose file has at most half of the remaining lifetime left is queued.
    @Test(arguments: designs) func departuresFollowTheWriteBackThreshold(shards: Int) {
        let (memory, clock) = Self.make(shards: shards, costLimit: 8)
        for key in ["a", "b", "c", "d"] as [CacheKey] {
            memory.store(Self.entry(2), forKey: key, residency: .never, mirroring: Self.mirror(clock, ttl: 100))
        }
        clock.advance(by: 9)
        for key in ["a", "b", "c", "d"] as [CacheKey] {  // 10-13 s ahead of the files: not due
            clock.advance(by: 1)
            _ = memory.value(forKey: key)
        }
        #expect(memory.takeWriteBacks().isEmpty)
        // Evicting "a" now: its file still has 87 of the 97 s memory promises.
        memory.store(Self.entry(2), forKey: "e", residency: .never, mirroring: Self.mirror(clock, ttl: 100))
        #expect(!memory.isCached(forKey: "a"))
        #expect(memory.stats.evictions == 1)
        #expect(memory.takeWriteBacks().isEmpty)
        // At 89 s the file of b has 11 s left of the 22 s memory promises (c and d likewise
        // at most half): due.
        clock.advance(by: 76)
        memory.store(Self.entry(2), forKey: "f", residency: .never, mirroring: Self.mirror(clock, ttl: 100))
        #expect(!memory.isCached(forKey: "b"))
        let evicted = memory.takeWriteBacks()
        #expect(evicted.map(\.key) == ["b"])
        #expect(evicted.first?.expiresAt == clock.now().addingTimeInterval(22))
        #expect(memory.remove(forKey: "c", writingBack: true))
        #expect(memory.takeWriteBacks().map(\.key) == ["c"])
        // A clear of memory alone writes back d (due) but not e and f (fresh, no lag).
        memory.removeAll(writingBack: true)
        #expect(memory.takeWriteBacks().map(\.key) == ["d"])
    }

    /// The handler told that write-backs are pending keeps its call depth over a million
    /// empty-to-pending cycles. A closure held as the `Value` of `Locked` and read with
    /// `withLock({ $0 })` grew two reabstraction thunks per read, so the depth rose by two
    /// every cycle; the loop stops at the first change so that such a regression fails at
    /// once instead of running the quadratic chain.
    @Test func writeBackHandlerKeepsItsDepth() {
        let (memory, clock) = Self.make(shards: 1)
        let calls = Locked(0)
        let depths = Locked<[Int]>([])
        let sampled: Set<Int> = [1, 2, 3, 10, 1_000, 100_000, 500_000, 1_000_000]
        memory.setWriteBackHandler {
            let n = calls.withLock { $0 += 1; return $0 }
            if sampled.contains(n) {
                let depth = Thread.callStackReturnAddresses.count
                depths.withLock { $0.append(depth) }
            }
        }
        let record = MemoryStorage.WriteBack(
            key: "k", forcedExtension: nil, expiresAt: clock.now().addingTimeInterval(60), timeToLive: 60,
            extendedAt: clock.now())
        var wrongTakes = 0
        for _ in 0..<1_000_000 {
            memory.queueWriteBack(record)
            if memory.takeWriteBacks().count != 1 { wrongTakes += 1 }
            let seen = depths.withLock { $0 }
            if seen.count > 1 && seen.last != seen.first { break }
        }
        #expect(wrongTakes == 0)
        #expect(calls.withLock { $0 } == 1_000_000)
        let seen = depths.withLock { $0 }
        #expect(seen.count == sampled.count)
        #expect(Set(seen).count == 1, "handler call depth at cycles \(sampled.sorted()): \(seen)")
    }

    @Test(arguments: designs) func removals(shards: Int) {
        let (memory, clock) = Self.make(shards: shards)
        for i in 0..<20 {
            memory.store(Self.entry(2), forKey: "k\(i)", expiration: .seconds(i < 5 ? 1 : 100))
        }
        #expect(memory.remove(forKey: "k19"))
        #expect(!memory.remove(forKey: "k19"))
        clock.advance(by: 2)
        #expect(memory.removeExpired() == 5)
        #expect(memory.stats.expirations == 5)
        #expect(memory.count == 14)
        #expect(memory.totalCost == 28)
        #expect(memory.removeExpired(referenceDate: clock.now().addingTimeInterval(1_000)) == 14)
        memory.store(Self.entry(2), forKey: "again")
        #expect(memory.removeAll() == 1)
        #expect(memory.count == 0)
        #expect(memory.totalCost == 0)
    }

    @Test func cleanTimerRemovesExpiredEntries() async throws {
        let clock = ManualClock()
        var config = MemoryStorage.Config()
        config.cleanInterval = 0.02
        config.clock = clock
        let memory = MemoryStorage.Backend(config: config)
        memory.store(Self.entry(1), forKey: "k", expiration: .seconds(1))
        clock.advance(by: 2)
        for _ in 0..<200 where memory.count > 0 {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(memory.count == 0)
        #expect(memory.stats.expirations == 1)
    }

    @Test(arguments: designs) func manyThreadsKeepLimitsAndCountsConsistent(shards: Int) {
        let (memory, _) = Self.make(shards: shards, costLimit: 4_000, countLimit: 300)
        let torn = Recorder<String>()
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for i in 0..<2_000 {
                let key: CacheKey = "k\((i * 7 + thread) % 500)"
                switch i % 4 {
                case 0, 1: memory.store(Self.entry(i % 20 + 1, UInt8(thread)), forKey: key)
                case 2:
                    if let value = memory.value(forKey: key) {
                        // Never a torn value: every byte is the writer's.
                        if Set(value.bytes).count != 1 { torn.append(key.string) }
                    }
                default: memory.remove(forKey: key)
                }
            }
        }
        #expect(torn.all.isEmpty)
        let stats = memory.stats
        #expect(stats.totalCost == memory.totalCost)
        #expect(stats.count == memory.count)
        #expect(memory.totalCost <= 4_000)
        #expect(memory.count <= 300)
    }
}

extension MemoryStorageTests {
    /// A whole-tier removal that counts another tier's copies among what it removed: the
    /// memory-only entries whose key the predicate picks, not an entry with a disk copy,
    /// not another key.
    @Test(arguments: designs) func removeAllCountsTheCopiesItRemoves(shards: Int) {
        let (memory, clock) = Self.make(shards: shards)
        for i in 0..<5 { memory.store(Self.entry(3), forKey: CacheKey("s:\(i)")) }
        for i in 0..<4 { memory.store(Self.entry(3), forKey: CacheKey("local:\(i)")) }
        #expect(memory.store(Self.entry(3), forKey: "s:mirrored", residency: .seconds(300),
                             mirroring: Self.mirror(clock, ttl: 1_000)))
        let isCopy: (CacheKey) -> Bool = { $0.string.hasPrefix("s:") }
        let cleared = memory.removeAll(writingBack: false, countingCopies: isCopy)
        #expect(cleared.removed == 10)
        #expect(cleared.copies == 5)
        #expect(memory.count == 0)
        // Without a predicate nothing is counted apart.
        memory.store(Self.entry(3), forKey: "s:again")
        #expect(memory.removeAll(writingBack: false, countingCopies: nil) == (removed: 1, copies: 0))
    }
}
