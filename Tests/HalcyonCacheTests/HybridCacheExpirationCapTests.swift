// A memory entry that mirrors a disk copy must never be promised a life the disk copy
// does not have: memory hits extend only the memory entry, so every extension is capped
// at the disk copy's expiration as known at store, put-back and touch. All on the
// fixture's one ManualClock for both tiers.

import Foundation
import Testing

@testable import HalcyonCache

@Suite("HybridCache expiration cap", .timeLimit(.minutes(1)))
struct HybridCacheExpirationCapTests {
    static func read(_ extending: ExpirationExtending) -> HybridCache.Options {
        var options = HybridCache.Options()
        options.extendingExpiration = extending
        return options
    }

    /// The review's case: `cache.set` with `expiration: {"days": 1}`, then a read asking
    /// for "never" answered from memory.
    @Test func memoryHitAskingForNeverIsCappedAtTheDiskExpiry() async throws {
        let f = HybridCacheFixture()
        let cache = f.cache
        var options = HybridCache.Options()
        options.diskExpiration = .days(1)
        options.memoryExpiration = .never
        let stored = try await result { cache.store(CacheEntry(bytes: [1]), forKey: "k", options: options, completion: $0) }.get()
        let diskExpiry = f.clock.now().addingTimeInterval(86_400)
        #expect(stored.expiresAt == diskExpiry)

        let hit = try await result { cache.retrieve(forKey: "k", options: Self.read(.expirationTime(.never)), completion: $0) }.get()
        #expect(hit.cacheType == .memory)
        #expect(hit.expiresAt == diskExpiry)
        #expect(try cache.diskStorage.meta(forKey: "k")?.expiration == diskExpiry)
        let described = try await result { cache.describe(forKey: "k", completion: $0) }.get()
        #expect(described.expiresAt == diskExpiry)

        // Once the disk copy is gone, so is the memory copy: no answer the disk could not give.
        f.clock.advance(by: 86_400)
        let after = try await result { cache.retrieve(forKey: "k", completion: $0) }.get()
        #expect(after.cacheType == .none)
    }

    @Test func slidingMemoryHitsStopAtTheDiskExpiry() async throws {
        let f = HybridCacheFixture(memoryExpiration: .seconds(300))
        let cache = f.cache
        var options = HybridCache.Options()
        options.diskExpiration = .seconds(1_000)
        _ = try await result { cache.store(CacheEntry(bytes: [1]), forKey: "k", options: options, completion: $0) }.get()
        let diskExpiry = f.clock.now().addingTimeInterval(1_000)
        var last: Date?
        for _ in 0..<5 {
            f.clock.advance(by: 250)  // 1,250 s in all, but each hit lands inside the slid window
            let hit = try await result { cache.retrieve(forKey: "k", options: Self.read(.cacheTime), completion: $0) }.get()
            guard hit.cacheType == .memory else { break }
            #expect(hit.expiresAt! <= diskExpiry)
            last = hit.expiresAt
        }
        #expect(last == diskExpiry)
        f.clock.advance(by: 1)
        #expect(try await result { cache.retrieve(forKey: "k", completion: $0) }.get().cacheType == .none)
    }

    @Test func diskHitPutBackCarriesTheCap() async throws {
        let f = HybridCacheFixture(memoryExpiration: .never)
        let cache = f.cache
        var options = HybridCache.Options()
        options.diskExpiration = .seconds(100)
        _ = try await result { cache.store(CacheEntry(bytes: [1]), forKey: "k", options: options, completion: $0) }.get()
        cache.memoryStorage.removeAll()
        // The disk hit slides the disk copy to now + 100; memory mirrors that instant.
        f.clock.advance(by: 40)
        let fromDisk = try await result { cache.retrieve(forKey: "k", completion: $0) }.get()
        #expect(fromDisk.cacheType == .disk)
        let diskExpiry = try #require(fromDisk.expiresAt)
        #expect(diskExpiry == f.clock.now().addingTimeInterval(100))
        #expect(cache.memoryStorage.meta(forKey: "k")?.expirationCap == diskExpiry)
        let hit = try await result { cache.retrieve(forKey: "k", options: Self.read(.expirationTime(.never)), completion: $0) }.get()
        #expect(hit.cacheType == .memory)
        #expect(hit.expiresAt == diskExpiry)
    }

    @Test func synchronousDiskHitPutBackCarriesTheCap() async throws {
        let f = HybridCacheFixture(memoryExpiration: .never)
        let cache = f.cache
        var options = HybridCache.Options()
        options.diskExpiration = .seconds(100)
        _ = try await result { cache.store(CacheEntry(bytes: [1]), forKey: "k", options: options, completion: $0) }.get()
        cache.memoryStorage.removeAll()
        var read = Self.read(.none)
        read.loadDiskFileSynchronously = true
        #expect(try await result { cache.retrieve(forKey: "k", options: read, completion: $0) }.get().cacheType == .disk)
        let diskExpiry = try #require(try cache.diskStorage.meta(forKey: "k")?.expiration)
        #expect(cache.memoryStorage.meta(forKey: "k")?.expirationCap == diskExpiry)
    }

    @Test func touchMovesTheCapWithTheDiskCopy() async throws {
        let f = HybridCacheFixture(memoryExpiration: .never)
        let cache = f.cache
        var options = HybridCache.Options()
        options.diskExpiration = .seconds(100)
        _ = try await result { cache.store(CacheEntry(bytes: [1]), forKey: "k", options: options, completion: $0) }.get()

        // Longer: memory may now live to the disk's new instant, not beyond.
        options.diskExpiration = .seconds(500)
        let touched = try await result { cache.touch(forKey: "k", options: options, completion: $0) }.get()
        let later = f.clock.now().addingTimeInterval(500)
        #expect(touched.expiresAt == later)
        #expect(cache.memoryStorage.meta(forKey: "k")?.expirationCap == later)
        #expect(cache.memoryStorage.meta(forKey: "k")?.expiration == later)
        let hit = try await result { cache.retrieve(forKey: "k", options: Self.read(.expirationTime(.never)), completion: $0) }.get()
        #expect(hit.expiresAt == later)

        // Disk "never": the cap is lifted.
        options.diskExpiration = .never
        _ = try await result { cache.touch(forKey: "k", options: options, completion: $0) }.get()
        #expect(cache.memoryStorage.meta(forKey: "k")?.expirationCap == nil)
        let free = try await result { cache.retrieve(forKey: "k", options: Self.read(.expirationTime(.never)), completion: $0) }.get()
        #expect(free.cacheType == .memory)
        #expect(free.expiresAt == nil)
    }

    @Test func memoryOnlyStoresHaveNoCap() async throws {
        let f = HybridCacheFixture()
        let cache = f.cache
        var options = HybridCache.Options()
        options.toDisk = false
        options.memoryExpiration = .seconds(10)
        _ = try await result { cache.store(CacheEntry(bytes: [1]), forKey: "m", options: options, completion: $0) }.get()
        #expect(cache.memoryStorage.meta(forKey: "m")?.expirationCap == nil)
        let hit = try await result { cache.retrieve(forKey: "m", options: Self.read(.expirationTime(.never)), completion: $0) }.get()
        #expect(hit.cacheType == .memory)
        #expect(hit.expiresAt == nil)
    }
}
