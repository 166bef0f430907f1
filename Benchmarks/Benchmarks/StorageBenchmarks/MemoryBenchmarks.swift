// MemoryStorage.Backend: get and set from 1, 2 and 8 threads at once, with the
// tier's default sharded locks and with one global lock (shardCount 1), so the
// choice of design stays measured.
//
// One iteration is 1,000,000 operations split evenly over the threads, and the
// scaling factor is `.mega`, so the harness reports wall-clock time per
// operation and throughput in operations per second, comparable across thread
// counts. This machine has 2 cores, so 8 threads measure contention, not
// parallel speed-up.
import Benchmark
import Foundation
import HalcyonCache

let operationsPerIteration = 1_000_000

/// A memory tier filled with `keyCount` 100-byte entries.
/// Threading: the backend is thread-safe; the fixture itself is immutable.
final class MemoryFixture: Sendable {
    let backend: MemoryStorage.Backend
    let keys: [CacheKey]
    let entry: CacheEntry

    init(shardCount: Int, keyCount: Int = 10_000) {
        var config = MemoryStorage.Config()
        config.shardCount = shardCount
        config.cleanInterval = 0  // no sweep timer firing in the middle of a run
        backend = MemoryStorage.Backend(config: config)
        keys = makeKeys(keyCount)
        entry = CacheEntry(bytes: makeValue(100))
        for key in keys { backend.store(entry, forKey: key) }
    }
}

func registerMemoryBenchmarks() {
    for shards in [16, 1] {
        let design = shards == 1 ? "one lock" : "\(shards) shards"
        for threads in [1, 2, 8] {
            let perThread = operationsPerIteration / threads
            let configuration = Benchmark.Configuration(scalingFactor: .mega, maxDuration: .seconds(3), maxIterations: 100)

            Benchmark(
                "Memory get 100 B, \(threads) threads, \(design)",
                configuration: configuration,
                closure: { (_: Benchmark, fixture: MemoryFixture) in
                    runOnThreads(threads) { index in
                        var random = FastRandom(seed: index)
                        let keys = fixture.keys
                        for _ in 0..<perThread {
                            blackHole(fixture.backend.value(forKey: keys[random.next(below: keys.count)]))
                        }
                    }
                },
                setup: { MemoryFixture(shardCount: shards) }
            )

            Benchmark(
                "Memory set 100 B, \(threads) threads, \(design)",
                configuration: configuration,
                closure: { (_: Benchmark, fixture: MemoryFixture) in
                    runOnThreads(threads) { index in
                        var random = FastRandom(seed: index)
                        let keys = fixture.keys
                        for _ in 0..<perThread {
                            blackHole(fixture.backend.store(fixture.entry, forKey: keys[random.next(below: keys.count)]))
                        }
                    }
                },
                setup: { MemoryFixture(shardCount: shards) }
            )
        }
    }
}
