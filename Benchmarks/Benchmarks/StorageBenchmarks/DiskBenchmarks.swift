// DiskStorage.Backend: store and read one value per iteration at three sizes.
//
// The backend does plain blocking I/O on the caller's thread (the daemon calls it
// on its ioQueue), so these run single-threaded. Files stay in the page cache:
// the numbers are the cost of the file-system calls (open, write, rename,
// futimens; open, read, metadata), not of the device. Stores are not fsynced
// (`synchronousWrites` is false by default, as in the daemon).
import Benchmark
import Foundation
import HalcyonCache

/// One backend in its own temporary folder, with keys and a value of one size.
/// Threading: used only on the benchmark's thread (setup, closure and teardown
/// run one after another); `@unchecked Sendable` only so it can cross the
/// harness's async setup hook, which hands it over once.
final class DiskFixture: @unchecked Sendable {
    let folder: TemporaryFolder
    let backend: DiskStorage.Backend
    let keys: [CacheKey]
    let value: [UInt8]
    var next = 0

    init(size: Int, keyCount: Int, prefill: Bool) throws {
        folder = TemporaryFolder("disk-\(size)")
        backend = DiskStorage.Backend(config: .init(name: "bench", sizeLimit: 0, directory: folder.url))
        backend.waitForInitialScan()
        keys = makeKeys(keyCount)
        value = makeValue(size)
        if prefill {
            for key in keys { try backend.store(value: value, forKey: key) }
        }
    }

    /// The next key, round robin: every key is rewritten or reread in turn.
    func nextKey() -> CacheKey {
        let key = keys[next]
        next = next + 1 == keys.count ? 0 : next + 1
        return key
    }
}

private let sizes: [(label: String, bytes: Int, keys: Int)] = [
    ("100 B", 100, 1_000),
    ("4 KiB", 4_096, 1_000),
    ("256 KiB", 262_144, 200),
]

func registerDiskBenchmarks() {
    for size in sizes {
        nonisolated(unsafe) var fixture: DiskFixture?

        Benchmark(
            "Disk store \(size.label)",
            configuration: .init(maxIterations: size.bytes > 100_000 ? 2_000 : 20_000),
            closure: { (benchmark: Benchmark, fixture: DiskFixture) in
                for _ in benchmark.scaledIterations {
                    do {
                        blackHole(try fixture.backend.store(value: fixture.value, forKey: fixture.nextKey()))
                    } catch {
                        benchmark.error("store failed: \(error)")
                    }
                }
            },
            setup: {
                let made = try DiskFixture(size: size.bytes, keyCount: size.keys, prefill: false)
                fixture = made
                return made
            },
            teardown: {
                fixture?.folder.remove()
                fixture = nil
            }
        )

        nonisolated(unsafe) var readFixture: DiskFixture?

        Benchmark(
            "Disk read \(size.label)",
            configuration: .init(maxIterations: size.bytes > 100_000 ? 5_000 : 20_000),
            closure: { (benchmark: Benchmark, fixture: DiskFixture) in
                for _ in benchmark.scaledIterations {
                    do {
                        guard let entry = try fixture.backend.value(forKey: fixture.nextKey()) else {
                            benchmark.error("read missed")
                            return
                        }
                        blackHole(entry)
                    } catch {
                        benchmark.error("read failed: \(error)")
                    }
                }
            },
            setup: {
                let made = try DiskFixture(size: size.bytes, keyCount: size.keys, prefill: true)
                readFixture = made
                return made
            },
            teardown: {
                readFixture?.folder.remove()
                readFixture = nil
            }
        )
    }
}
