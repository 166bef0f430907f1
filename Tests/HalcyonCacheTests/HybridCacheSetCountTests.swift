// Which stores `CacheStats.sets` counts: a store that completed (stored, or not stored
// because it was already expired) is a set; one that failed with a disk error is not.
// The disk errors are real: a folder where the key's file goes, a cache folder that is
// a plain file.

import Foundation
import Testing

@testable import HalcyonCache

@Suite("HybridCache set counting", .timeLimit(.minutes(1)))
struct HybridCacheSetCountTests {
    @Test func setsCountCompletedStoresOnly() async throws {
        let f = HybridCacheFixture()
        let cache = f.cache
        #expect(try await result { cache.store(CacheEntry(bytes: [1]), forKey: "ok", completion: $0) }.get().stored)
        var expired = HybridCache.Options()
        expired.diskExpiration = .expired
        // Completed, though nothing is stored: counted.
        #expect(try await result { cache.store(CacheEntry(bytes: [1]), forKey: "gone", options: expired, completion: $0) }.get().stored == false)
        // A non-empty folder where the key's file goes: the rename over it fails.
        let blocked = cache.diskStorage.cacheFileURL(forKey: "blocked")
        try FileManager.default.createDirectory(at: blocked.appendingPathComponent("x"), withIntermediateDirectories: true)
        let failed = await result { cache.store(CacheEntry(bytes: [1]), forKey: "blocked", completion: $0) }
        #expect(failed.error != nil)
        #expect(!cache.memoryStorage.isCached(forKey: "blocked"))
        var memoryOnly = HybridCache.Options()
        memoryOnly.toDisk = false
        #expect(try await result { cache.store(CacheEntry(bytes: [2]), forKey: "m", options: memoryOnly, completion: $0) }.get().stored)
        #expect(cache.stats().sets == 3)
    }

    @Test func setsIgnoreStoresToADiskThatIsNotReady() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("halcyon-notready-sets-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        _ = FileManager.default.createFile(atPath: root.appendingPathComponent("test").path, contents: Data([1]))
        let f = HybridCacheFixture(directory: root)
        let cache = f.cache
        #expect(await result { cache.store(CacheEntry(bytes: [1]), forKey: "k", completion: $0) }.error != nil)
        #expect(cache.stats().sets == 0)
    }
}
