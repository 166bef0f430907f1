// The write-back cost of sliding expiration, counted (not timed): 1,000 hot keys read
// 10,000 times a second on a ManualClock, every read answered from memory. The number
// of file-time writes per simulated second is what the lazy write-back costs the disk;
// it must not depend on the read rate. The printed figures go to
// Benchmarks/RESULTS.md, "The write-back cost of sliding lifetimes".

import Foundation
import Testing

@testable import HalcyonCache

@Suite("HybridCache write-back cost")
struct HybridCacheWriteBackCostTests {
    @Test(arguments: [3.0, 60.0]) func thousandHotKeysAtTenThousandReadsPerSecond(ttl: TimeInterval) async throws {
        let f = HybridCacheFixture(memoryCostLimit: 1 << 24, memoryExpiration: .never)
        var options = HybridCache.Options()
        options.diskExpiration = .seconds(ttl)
        let keys = (0..<1_000).map { CacheKey("hot\($0)") }
        for key in keys {
            _ = try await result { f.cache.store(CacheEntry(bytes: [1]), forKey: key, options: options, completion: $0) }.get()
        }
        let simulated = 4 * ttl  // seconds of simulated time
        let readsPerSecond = 10_000
        let step = 0.01  // 100 ticks a second, 100 reads a tick, round-robin over the keys
        var next = 0
        var misses = 0
        for _ in 0..<Int(simulated / step) {
            f.clock.advance(by: step)
            for _ in 0..<(readsPerSecond / 100) {
                if f.cache.memoryStorage.valueAndMeta(forKey: keys[next]) == nil { misses += 1 }
                next = (next + 1) % keys.count
            }
            await f.drain()
        }
        let writes = f.cache.stats().extensionWriteBacks
        let perSecond = Double(writes) / simulated
        print("lifetime write-back: ttl \(ttl) s, 1000 keys, \(readsPerSecond) reads/s, \(simulated) s simulated: "
            + "\(writes) file-time writes = \(perSecond) /s (bound 2 x keys / TTL = \(2_000 / ttl) /s); misses \(misses)")
        #expect(misses == 0)
        // About two per key per TTL, whatever the read rate (10 per key per second here).
        #expect(perSecond <= 2_000 / ttl * 1.1)
    }
}
