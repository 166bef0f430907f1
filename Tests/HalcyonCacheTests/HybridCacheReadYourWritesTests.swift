// Read-your-writes under races: many threads store and immediately read the same keys
// without waiting for the store, through every read path (memory, queued disk read,
// synchronous disk read), with a memory tier small enough that most reads miss memory,
// and with memory-only stores mixed in. Each thread must always read its own latest write
// (or, after a memory-only write that memory evicted, a miss), never an older value.

import Foundation
import HalcyonSupport
import Testing

@testable import HalcyonCache

@Suite("HybridCache read-your-writes", .timeLimit(.minutes(1)))
struct HybridCacheReadYourWritesTests {
    @Test(arguments: [false, true]) func eachThreadReadsItsOwnLatestWrite(synchronousDiskReads: Bool) async throws {
        // 200 bytes of memory: about one entry, so reads mostly go to the disk and put back.
        let f = HybridCacheFixture(memoryCostLimit: 200)
        let cache = f.cache
        let wrong = Recorder<String>()
        let group = DispatchGroup()
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for i in 0..<120 {
                let key: CacheKey = "t\(thread)-\(i % 4)"
                let value = utf8Bytes("\(thread):\(i):" + String(repeating: "x", count: i % 50))
                var write = HybridCache.Options()
                write.memoryExpiration = i % 5 == 0 ? .seconds(1) : nil
                // Every third write is memory-only: memory may evict it at once (200 bytes),
                // so a miss is fine then, but never an older value from the disk.
                write.toDisk = i % 3 != 0
                let mayMiss = !write.toDisk
                cache.store(CacheEntry(bytes: value), forKey: key, options: write)
                var read = HybridCache.Options()
                read.loadDiskFileSynchronously = synchronousDiskReads && i % 2 == 0
                group.enter()
                cache.retrieve(forKey: key, options: read) { r in
                    let got = r.value?.entry?.bytes
                    if got != value && !(mayMiss && r.value?.cacheType == CacheType.none) {
                        wrong.append("\(key): wanted \(String(decoding: value, as: UTF8.self)), got \(String(describing: r))")
                    }
                    group.leave()
                }
                if i % 10 == 9 {
                    // And after the write has certainly run, from memory or a plain disk read.
                    group.enter()
                    cache.retrieve(forKey: key, options: read) { r in
                        if r.value?.entry?.bytes != value && !(mayMiss && r.value?.cacheType == CacheType.none) {
                            wrong.append("\(key) (second read)")
                        }
                        group.leave()
                    }
                }
            }
        }
        #expect(group.wait(timeout: .now() + 60) == .success)
        #expect(wrong.all.isEmpty, "\(wrong.all.prefix(5))")
        #expect(cache.stats().writesQueued == 0)
    }

    @Test func sharedKeysNeverGoBackwards() async throws {
        // Every thread writes increasing numbers to the same few keys and reads right after;
        // a read must return a value at least as new as the reader's own last write, since
        // the writes run in call order and the read queues behind them.
        let f = HybridCacheFixture(memoryCostLimit: 64)
        let cache = f.cache
        let sequence = Locked<Int>(0)
        let wrong = Recorder<String>()
        let group = DispatchGroup()
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for i in 0..<100 {
                let key: CacheKey = "shared-\(i % 3)"
                // Numbered and enqueued under one lock, so queue order is number order.
                let mine = sequence.withLock { n in
                    n += 1
                    cache.store(CacheEntry(bytes: withUnsafeBytes(of: n.bigEndian, Array.init)), forKey: key)
                    return n
                }
                group.enter()
                cache.retrieve(forKey: key) { r in
                    let got = r.value?.entry.map { $0.bytes.reduce(0) { $0 << 8 | Int($1) } } ?? -1
                    if got < mine { wrong.append("\(key): own write \(mine), read \(got)") }
                    group.leave()
                }
                _ = thread
            }
        }
        #expect(group.wait(timeout: .now() + 60) == .success)
        #expect(wrong.all.isEmpty, "\(wrong.all.prefix(5))")
    }
}
