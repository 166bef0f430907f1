// A touch extends whatever copy a read would answer from (also the memory copy left by a
// removal from disk alone), a lifetime already over ends the entry now and counts as an
// expiration (never `Date.distantPast` in a result), and a memory-only entry lives for the
// expiration its caller asked for. With and without the journal.

import Foundation
import HalcyonSupport
import Testing

@testable import HalcyonCache

@Suite("HybridCache touch")
struct HybridCacheTouchTests {
    typealias L = HybridCacheLifetimeTests

    static func touch(_ cache: HybridCache, _ key: CacheKey, _ options: HybridCache.Options) async throws
        -> HybridCache.TouchResult
    {
        try await result { cache.touch(forKey: key, options: options, completion: $0) }.get()
    }

    static func ttl(_ expiration: StorageExpiration) -> HybridCache.Options {
        var options = HybridCache.Options()
        options.diskExpiration = expiration
        return options
    }

    @Test func aTouchAfterARemovalFromDiskAloneExtendsTheMemoryCopy() async throws {
        let f = HybridCacheFixture()
        _ = try await L.store(f, "tk", L.ttl(600))
        #expect(try await result { f.cache.remove(forKey: "tk", fromMemory: false, completion: $0) }.get())
        #expect(try await L.get(f, "tk", Self.ttl(.never).with { $0.extendingExpiration = .none }).cacheType == .memory)

        let touched = try await Self.touch(f.cache, "tk", Self.ttl(.seconds(3600)))
        #expect(touched.touched)
        let expected = f.clock.now().addingTimeInterval(3600)
        #expect(abs(try #require(touched.expiresAt).timeIntervalSince(expected)) < 1.001)
        // The next read finds it, long after the memory default (300 s) would have ended it.
        f.clock.advance(by: 1800)
        let hit = try await L.get(f, "tk")
        #expect(hit.cacheType == .memory)
        #expect(hit.entry != nil)
        let described = try await result { f.cache.describe(forKey: "tk", completion: $0) }.get()
        #expect(described.cacheType == .memory)
    }

    @Test func aRemovalFromDiskAloneLeavesTheMemoryCopyItsOwnEnd() async throws {
        let f = HybridCacheFixture()
        _ = try await L.store(f, "k", L.ttl(60))  // lifetime 60 s, residency 300 s
        _ = try await result { f.cache.remove(forKey: "k", fromMemory: false, completion: $0) }.get()
        f.clock.advance(by: 59)
        #expect(try await L.get(f, "k", Self.ttl(.never).with { $0.extendingExpiration = .none }).entry != nil)
        f.clock.advance(by: 2)
        #expect(try await L.get(f, "k").entry == nil)
    }

    /// Each kind of copy a touch can meet, ended by a lifetime already over.
    @Test(arguments: ["resident", "fileOnly", "memoryOnly", "absent"])
    func aLifetimeAlreadyOverEndsTheEntryNowAndCountsAsAnExpiration(copy: String) async throws {
        let f = HybridCacheFixture()
        switch copy {
        case "resident": _ = try await L.store(f, "k", L.ttl(600))
        case "fileOnly":
            _ = try await L.store(f, "k", L.ttl(600))
            _ = try await result { f.cache.remove(forKey: "k", fromDisk: false, completion: $0) }.get()
        case "memoryOnly": _ = try await L.store(f, "k", L.ttl(600).with { $0.toDisk = false })
        default: break
        }
        let before = f.cache.stats()
        for over in [StorageExpiration.expired, .date(Date(timeIntervalSince1970: 1000))] {
            var options = Self.ttl(over)
            if copy == "memoryOnly" { options.memoryExpiration = over }
            let r = try await Self.touch(f.cache, "k", options)
            if copy == "absent" || over != .expired {
                // Absent, or already ended by the first touch.
                #expect(!r.touched && r.expiresAt == nil)
                continue
            }
            #expect(r.touched)
            let at = try #require(r.expiresAt)
            #expect(at <= f.clock.now() && at > f.clock.now().addingTimeInterval(-1))
            #expect(at.timeIntervalSince1970 == at.timeIntervalSince1970.rounded())
        }
        #expect(try await L.get(f, "k").entry == nil)
        #expect(try await result { f.cache.describe(forKey: "k", completion: $0) }.get().cacheType == .none)
        let after = f.cache.stats()
        let expired = (after.memoryExpirations + after.diskExpirations) - (before.memoryExpirations + before.diskExpirations)
        #expect(expired == (copy == "absent" ? 0 : 1))
    }

    @Test func aJournaledEntryEndedByATouchStaysEndedAfterACrash() async throws {
        let f = JournalCacheFixture()
        let frozen = Locked(true)
        let first = f.open(held: frozen)
        _ = try await HybridCacheJournalTests.store(first, "k", "v")
        let r = try await Self.touch(first, "k", Self.ttl(.expired))
        #expect(r.touched && r.expiresAt != nil && r.expiresAt! > Date(timeIntervalSince1970: 0))
        #expect(try await HybridCacheJournalTests.read(first, "k") == nil)
        let second = f.open()
        #expect(try await HybridCacheJournalTests.read(second, "k") == nil)
    }

    @Test func aMemoryOnlyEntryLivesForTheExpirationItsCallerGave() async throws {
        let f = HybridCacheFixture()
        let stored = try await L.store(f, "m", L.ttl(3600).with { $0.toDisk = false })
        let expected = f.clock.now().addingTimeInterval(3600)
        #expect(abs(try #require(stored.expiresAt).timeIntervalSince(expected)) < 1.001)
        f.clock.advance(by: 1800)  // past the 300 s memory default
        #expect(try await L.get(f, "m", Self.ttl(.never).with { $0.extendingExpiration = .none }).entry != nil)
        // A touch with an expiration gives it that lifetime too; memoryExpiration wins over it.
        let touched = try await Self.touch(f.cache, "m", Self.ttl(.seconds(7200)))
        #expect(abs(try #require(touched.expiresAt).timeIntervalSince(f.clock.now().addingTimeInterval(7200))) < 1.001)
        let both = try await Self.touch(f.cache, "m", Self.ttl(.seconds(7200)).with { $0.memoryExpiration = .seconds(60) })
        #expect(abs(try #require(both.expiresAt).timeIntervalSince(f.clock.now().addingTimeInterval(60))) < 1.001)
        // Without any expiration the memory default still applies.
        let plain = try await L.store(f, "d", HybridCache.Options().with { $0.toDisk = false })
        #expect(abs(try #require(plain.expiresAt).timeIntervalSince(f.clock.now().addingTimeInterval(300))) < 1.001)
    }
}

extension HybridCache.Options {
    /// A copy changed by `change`.
    func with(_ change: (inout HybridCache.Options) -> Void) -> HybridCache.Options {
        var copy = self
        change(&copy)
        return copy
    }
}
