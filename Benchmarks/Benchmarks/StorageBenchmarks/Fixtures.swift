// Shared helpers: temporary folders, keys and values, and running a body on N
// threads at once. Nothing here is measured by itself.
import Foundation
import HalcyonCache

/// A fresh folder under the system temp folder, removed by `remove()`.
/// Threading: create and remove on the benchmark's thread; not shared.
struct TemporaryFolder {
    let url: URL

    init(_ label: String) {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("halcyon-bench-\(label)-\(UInt64.random(in: 0 ... .max))", isDirectory: true)
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func remove() {
        try? FileManager.default.removeItem(at: url)
    }
}

/// Keys are built once, so String formatting is not part of what is measured.
func makeKeys(_ count: Int, prefix: String = "key:") -> [CacheKey] {
    (0..<count).map { CacheKey("\(prefix)\($0)") }
}

/// Printable bytes, like the values the load generator sends.
func makeValue(_ size: Int) -> [UInt8] {
    (0..<size).map { UInt8(ascii: "a") + UInt8($0 % 26) }
}

/// Runs `body(threadIndex)` on `count` new threads that start together and
/// returns when all have finished. Thread creation is outside the timed part
/// only in the sense that it is tiny next to the work each thread does (tens
/// of thousands of operations); the start gate keeps threads from running
/// alone while the others are still being created.
func runOnThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let started = DispatchSemaphore(value: 0)
    let gate = DispatchSemaphore(value: 0)
    let finished = DispatchGroup()
    for index in 0..<count {
        finished.enter()
        let thread = Thread {
            started.signal()
            gate.wait()
            body(index)
            finished.leave()
        }
        thread.stackSize = 1 << 20
        thread.start()
    }
    for _ in 0..<count { started.wait() }
    for _ in 0..<count { gate.signal() }
    finished.wait()
}

/// A small xorshift generator: cheap, deterministic, one per thread.
struct FastRandom {
    private var state: UInt64

    init(seed: Int) {
        state = 0x9E37_79B9_7F4A_7C15 &* UInt64(seed + 1)
    }

    mutating func next(below bound: Int) -> Int {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return Int(state % UInt64(bound))
    }
}
