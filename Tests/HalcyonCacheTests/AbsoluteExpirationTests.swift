// An absolute `.date(T)` lifetime never slides: not on a memory hit, a disk hit, an
// unwritten (journaled) hit, nor after a restart that replays the journal; a touch
// without an expiration leaves it, an explicit one replaces it and its kind. Every case
// on a ManualClock, so "later" is exact.

import Foundation
import Testing

@testable import HalcyonCache

@Suite("Absolute expiration")
struct AbsoluteExpirationTests {
    /// 100 s after the fixtures' clock start, a whole second.
    static let end = Date(timeIntervalSince1970: 1_700_000_100)

    static func dated(_ instant: Date = end) -> HybridCache.Options {
        var options = HybridCache.Options()
        options.diskExpiration = .date(instant)
        return options
    }

    static func get(_ cache: HybridCache, _ key: CacheKey, _ options: HybridCache.Options = .init()) async throws
        -> HybridCache.RetrieveResult
    {
        try await result { cache.retrieve(forKey: key, options: options, completion: $0) }.get()
    }

    static func touch(_ cache: HybridCache, _ key: CacheKey, _ expiration: StorageExpiration? = nil) async throws
        -> HybridCache.TouchResult
    {
        var options = HybridCache.Options()
        options.diskExpiration = expiration
        return try await result { cache.touch(forKey: key, options: options, completion: $0) }.get()
    }

    // MARK: The tiers alone

    @Test func theMemoryTierKeepsTheInstantOnSlidingReads() {
        let clock = ManualClock()
        var config = MemoryStorage.Config()
        config.clock = clock
        config.cleanInterval = 0
        let memory = MemoryStorage.Backend(config: config)
        memory.store(CacheEntry(bytes: [1]), forKey: "a", expiration: .date(Self.end))
        memory.store(CacheEntry(bytes: [2]), forKey: "s", expiration: .seconds(100))
        clock.advance(by: 60)
        #expect(memory.valueAndMeta(forKey: "a")?.meta.expiration == Self.end)
        #expect(memory.valueAndMeta(forKey: "a")?.meta.isAbsolute == true)
        #expect(memory.valueAndMeta(forKey: "s")?.meta.expiration == clock.now().addingTimeInterval(100))
        clock.advance(by: 40)
        #expect(memory.value(forKey: "a") == nil)
        #expect(memory.value(forKey: "s") != nil)
    }

    @Test func theDiskTierMarksTheFileAndNeitherAReadNorADefaultTouchSlidesIt() throws {
        let clock = ManualClock()
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("halcyon-abs-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        var config = DiskStorage.Config(name: "test", sizeLimit: 0, directory: root)
        config.clock = clock
        let disk = DiskStorage.Backend(config: config)
        try disk.store(value: [1], forKey: "a", expiration: .date(Self.end))
        try disk.store(value: [2], forKey: "s", expiration: .seconds(100))
        clock.advance(by: 60)
        let a = try #require(try disk.valueAndMeta(forKey: "a"))
        #expect(a.meta.expiration == Self.end)
        #expect(a.meta.isAbsolute)
        let s = try #require(try disk.valueAndMeta(forKey: "s"))
        #expect(s.meta.expiration == clock.now().addingTimeInterval(100))
        #expect(!s.meta.isAbsolute)

        // A default touch leaves it; an explicit one replaces the lifetime and its kind.
        #expect(try disk.touch(forKey: "a", expiration: .seconds(500), keepingAbsolute: true)?.expiration == Self.end)
        let retouched = try #require(try disk.touch(forKey: "a", expiration: .seconds(500)))
        #expect(retouched.expiration == clock.now().addingTimeInterval(500))
        #expect(!retouched.isAbsolute)
        clock.advance(by: 100)
        #expect(try disk.valueAndMeta(forKey: "a")?.meta.expiration == clock.now().addingTimeInterval(500))

        // And back: an explicit date makes it absolute again, past a default touch.
        let later = clock.now().addingTimeInterval(1_000)
        #expect(try disk.touch(forKey: "a", expiration: .date(later))?.isAbsolute == true)
        #expect(try disk.touch(forKey: "a", expiration: .seconds(5), keepingAbsolute: true)?.expiration == later)
        clock.advance(by: 999)
        #expect(try disk.valueAndMeta(forKey: "a")?.meta.expiration == later)
        clock.advance(by: 1)
        #expect(try disk.valueAndMeta(forKey: "a") == nil)
    }

    @Test func aFileOfAnOlderBuildHasNoMarkAndSlides() {
        // mtime's nanoseconds were always 0: such times are not absolute.
        var st = stat()
        st.st_mode = S_IFREG
        st.st_mtim = timespec(tv_sec: 1_700_000_100, tv_nsec: 0)
        st.st_atim = timespec(tv_sec: 1_700_000_000, tv_nsec: 0)
        let times = POSIX.Status(st).times
        #expect(!times.isAbsolute)
        #expect(times.slid(to: Date(timeIntervalSince1970: 1_700_000_050)).expirationSeconds == 1_700_000_150)
        st.st_mtim.tv_nsec = Int(FileTimes.absoluteMarkNanos)
        let marked = POSIX.Status(st).times
        #expect(marked.isAbsolute)
        #expect(marked.slid(to: Date(timeIntervalSince1970: 1_700_000_050)).expirationSeconds == 1_700_000_100)
    }

    // MARK: The hybrid cache, without a journal

    @Test func memoryAndDiskHitsKeepTheInstantAndTheDefaultTouchLeavesIt() async throws {
        let f = HybridCacheFixture()
        let stored = try await result {
            f.cache.store(CacheEntry(bytes: [1]), forKey: "a", options: Self.dated(), completion: $0)
        }.get()
        #expect(stored.expiresAt == Self.end)
        f.clock.advance(by: 30)
        let memoryHit = try await Self.get(f.cache, "a")
        #expect(memoryHit.cacheType == .memory)
        #expect(memoryHit.expiresAt == Self.end)

        f.cache.memoryStorage.removeAll()
        await f.drain()
        f.clock.advance(by: 30)
        let diskHit = try await Self.get(f.cache, "a")
        #expect(diskHit.cacheType == .disk)
        #expect(diskHit.expiresAt == Self.end)
        #expect(try await Self.get(f.cache, "a").expiresAt == Self.end)

        let touched = try await Self.touch(f.cache, "a")
        #expect(touched.touched)
        #expect(touched.expiresAt == Self.end)
        f.cache.memoryStorage.removeAll()
        await f.drain()
        #expect(try await Self.touch(f.cache, "a").expiresAt == Self.end)  // the file's path
        f.clock.advance(by: 40)
        #expect(try await Self.get(f.cache, "a").entry == nil)
    }

    @Test func anExplicitTouchMakesItSlideAndADateMakesItAbsoluteAgain() async throws {
        let f = HybridCacheFixture()
        _ = try await result { f.cache.store(CacheEntry(bytes: [1]), forKey: "a", options: Self.dated(), completion: $0) }.get()
        #expect(try await Self.touch(f.cache, "a", .seconds(50)).expiresAt == f.clock.now().addingTimeInterval(50))
        f.clock.advance(by: 20)
        #expect(try await Self.get(f.cache, "a").expiresAt == f.clock.now().addingTimeInterval(50))

        let later = f.clock.now().addingTimeInterval(200)
        #expect(try await Self.touch(f.cache, "a", .date(later)).expiresAt == later)
        f.clock.advance(by: 20)
        #expect(try await Self.get(f.cache, "a").expiresAt == later)
        #expect(try await Self.touch(f.cache, "a").expiresAt == later)
    }

    @Test func anIncrementKeepsTheLifetimeAndItsKind() async throws {
        let f = HybridCacheFixture()
        _ = try await result { f.cache.store(utf8Bytes("1").entry, forKey: "a", options: Self.dated(), completion: $0) }.get()
        _ = try await result {
            f.cache.store(utf8Bytes("1").entry, forKey: "s", options: HybridCacheLifetimeTests.ttl(100), completion: $0)
        }.get()
        f.clock.advance(by: 10)
        for key in ["a", "s"] as [CacheKey] {
            _ = try await result { f.cache.increment(forKey: key, by: 1, flags: 0, completion: $0) }.get()
        }
        f.clock.advance(by: 10)
        #expect(try await Self.get(f.cache, "a").expiresAt == Self.end)
        // The sliding entry still slides (from what was left of it at the increment: 90 s).
        #expect(try await Self.get(f.cache, "s").expiresAt == f.clock.now().addingTimeInterval(90))
    }

    // MARK: Through the journal and a restart

    @Test func anUnwrittenEntryAndItsReplayKeepTheInstant() async throws {
        let f = JournalCacheFixture()
        let first = f.open(held: f.frozen)
        _ = try await result { first.store(CacheEntry(bytes: [7]), forKey: "a", options: Self.dated(), completion: $0) }.get()
        f.clock.advance(by: 30)
        first.memoryStorage.removeAll()
        let unwritten = try await Self.get(first, "a")  // from the unwritten table
        #expect(unwritten.entry?.bytes == [7])
        #expect(unwritten.expiresAt == Self.end)
        #expect(try await Self.get(first, "a").expiresAt == Self.end)
        #expect(try await Self.touch(first, "a").expiresAt == Self.end)
        first.shutdown()
        #expect(!f.fileExists(first, "a"))

        let second = f.open()
        f.clock.advance(by: 30)
        let replayed = try await Self.get(second, "a")
        #expect(replayed.entry?.bytes == [7])
        #expect(replayed.expiresAt == Self.end)
        await Self.materialize(second)
        second.memoryStorage.removeAll()
        let fromFile = try await Self.get(second, "a")
        #expect(f.fileExists(second, "a"))
        #expect(fromFile.cacheType == .disk)
        #expect(fromFile.expiresAt == Self.end)
        f.clock.advance(by: 40)
        #expect(try await Self.get(second, "a").entry == nil)
    }

    @Test func touchesReplayWithTheirKind() async throws {
        let f = JournalCacheFixture()
        let first = f.open(held: f.frozen)
        _ = try await result {
            first.store(CacheEntry(bytes: [1]), forKey: "s", options: HybridCacheLifetimeTests.ttl(100), completion: $0)
        }.get()
        _ = try await result { first.store(CacheEntry(bytes: [2]), forKey: "a", options: Self.dated(), completion: $0) }.get()
        let later = f.clock.now().addingTimeInterval(300)
        // "s" becomes absolute, "a" sliding; then default touches, which change neither kind.
        #expect(try await Self.touch(first, "s", .date(later)).expiresAt == later)
        #expect(try await Self.touch(first, "a", .seconds(50)).expiresAt == f.clock.now().addingTimeInterval(50))
        #expect(try await Self.touch(first, "s").expiresAt == later)
        first.shutdown()

        let second = f.open()
        f.clock.advance(by: 20)
        #expect(try await Self.get(second, "s").expiresAt == later)
        #expect(try await Self.get(second, "a").expiresAt == f.clock.now().addingTimeInterval(50))
    }

    @Test func theLifetimeRecordRoundTripsAndTheOlderTouchStillDecodes() {
        let records: [Journal.Record] = [
            .lifetime(key: "k", expiresAtNanos: 1_700_000_100_000_000_000, ttlNanos: -1, keepsAbsolute: true),
            .lifetime(key: "k", expiresAtNanos: -1, ttlNanos: 5_000_000_000, keepsAbsolute: false),
            .touch(key: "old", expiresAtNanos: 1_800_000_000_000_000_000),
        ]
        var bytes: [UInt8] = []
        for r in records { Journal.RecordCodec.append(r, salt: 7, to: &bytes) }
        var decoded: [Journal.Record] = []
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count, case .record(let r, let size) = Journal.RecordCodec.decode(raw, at: offset, salt: 7) {
                decoded.append(r)
                offset += size
            }
        }
        #expect(decoded == records)
        #expect(records.map(Journal.RecordCodec.framedSize).reduce(0, +) == bytes.count)
    }

    static func materialize(_ cache: HybridCache) async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in cache.materializeNow { c.resume() } }
    }
}

extension Array where Element == UInt8 {
    fileprivate var entry: CacheEntry { CacheEntry(bytes: self) }
}
