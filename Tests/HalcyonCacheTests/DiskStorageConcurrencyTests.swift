// Many threads storing, reading and removing the same and different keys: no crash, no
// error, and every value read is exactly one of the values written (no torn files).

import Foundation
import HalcyonSupport
import Testing
@testable import HalcyonCache

@Suite("DiskStorage concurrency", .timeLimit(.minutes(1)))
struct DiskStorageConcurrencyTests {
    /// A value made of one repeated byte with a 4-byte prefix, so a torn mix of two
    /// writes (or a short read) cannot equal any written value.
    static func value(writer: Int, round: Int, size: Int) -> [UInt8] {
        let tag = UInt8(truncatingIfNeeded: writer &* 16 &+ round)
        return [0xAB, tag, UInt8(truncatingIfNeeded: size), UInt8(truncatingIfNeeded: size >> 8)]
            + [UInt8](repeating: tag, count: size)
    }

    @Test func manyThreadsOnSharedAndOwnKeys() throws {
        let folder = DiskTestFolder()  // keeps the folder until the test ends
        let disk = folder.backend()
        let threads = 8
        let rounds = 60
        let sizes = [0, 100, 4096, 65_536]
        let failures = DiskFailureLog()
        let fail = failures.record
        // Every value any writer may put under a shared key.
        var allowed = Set<[UInt8]>()
        for writer in 0..<threads { for round in 0..<rounds { allowed.insert(Self.value(writer: writer, round: round, size: sizes[(writer + round) % sizes.count])) } }
        let allowedValues = allowed

        DispatchQueue.concurrentPerform(iterations: threads) { writer in
            for round in 0..<rounds {
                let size = sizes[(writer + round) % sizes.count]
                let mine = Self.value(writer: writer, round: round, size: size)
                let shared: CacheKey = "shared-\(round % 3)"
                do {
                    try disk.store(value: mine, flags: UInt32(writer), forKey: shared)
                    try disk.store(value: mine, flags: UInt32(round), forKey: "own-\(writer)")
                    if let read = try disk.value(forKey: "own-\(writer)"), read != CacheEntry(bytes: mine, flags: UInt32(round)) {
                        fail("own key read back a different value")
                    }
                    for key in ["shared-0", "shared-1", "shared-2"] as [CacheKey] {
                        if let read = try disk.value(forKey: key, extendingExpiration: round % 2 == 0 ? .cacheTime : .none),
                           !allowedValues.contains(read.bytes) {
                            fail("torn or foreign value under \(key): \(read.bytes.prefix(8))")
                        }
                        _ = disk.isCached(forKey: key)
                        _ = try disk.meta(forKey: key)
                    }
                    if round % 7 == writer % 7 { try disk.remove(forKey: shared) }
                    if round % 20 == 19 { _ = try disk.touch(forKey: shared, expiration: .seconds(60)) }
                    if writer == 0 && round % 15 == 0 { _ = try disk.removeExpiredValues(); _ = try disk.count() }
                } catch {
                    fail("error \(error)")
                }
            }
        }
        #expect(failures.messages == [])
        // Each own key holds its writer's last value.
        for writer in 0..<threads {
            let last = rounds - 1
            #expect(try disk.value(forKey: "own-\(writer)") ==
                    CacheEntry(bytes: Self.value(writer: writer, round: last, size: sizes[(writer + last) % sizes.count]), flags: UInt32(last)))
        }
        // No temporary debris.
        let names = try FileManager.default.contentsOfDirectory(atPath: disk.directoryPath)
        #expect(!names.contains { $0.hasPrefix(".tmp-") })
    }

    @Test func removeAllRacingStoresNeverHidesAStoredValue() throws {
        let folder = DiskTestFolder()  // keeps the folder until the test ends
        let disk = folder.backend()
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            for round in 0..<100 {
                if worker == 0 {
                    _ = try? disk.removeAll()
                } else {
                    let key: CacheKey = "w\(worker)-\(round)"
                    _ = try? disk.store(value: [UInt8(worker)], forKey: key)
                }
            }
        }
        // Whatever survived on disk must be visible through the shortcut.
        let names = Set(try FileManager.default.contentsOfDirectory(atPath: disk.directoryPath))
        for worker in 1..<4 {
            for round in 0..<100 {
                let key: CacheKey = "w\(worker)-\(round)"
                let onDisk = names.contains(disk.cacheFileURL(forKey: key).lastPathComponent)
                #expect(disk.isCached(forKey: key) == onDisk, "\(key)")
            }
        }
    }
}

/// Collects failures from many threads. Threading: thread-safe; a `Locked` holds the list.
final class DiskFailureLog: Sendable {
    private let list = Locked<[String]>([])
    @Sendable func record(_ message: String) { list.withLock { $0.append(message) } }
    var messages: [String] { list.withLock { $0 } }
}
