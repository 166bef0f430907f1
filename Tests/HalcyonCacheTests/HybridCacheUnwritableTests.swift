// A journaled value whose file can never be written (a key the folder cannot name a file
// with, a directory where the file belongs) is dropped, counted and reported with its key
// and error, and never holds up the values behind it; replay drops such keys the same
// way and never acts on a name outside the folder. See `WriteBehind.dropIfNeverWritable`.

import Foundation
import HalcyonSupport
import Testing

@testable import HalcyonCache

@Suite("HybridCache values whose files can never be written")
struct HybridCacheUnwritableTests {
    /// The keys and errors `onDroppedEntry` was told of.
    final class Reports: Sendable {
        let entries = Locked<[(key: CacheKey, error: CacheError)]>([])
        var hook: @Sendable (CacheKey, CacheError) -> Void { { key, error in self.entries.withLock { $0.append((key, error)) } } }
        var keys: [CacheKey] { entries.withLock { $0.map(\.key) } }
    }

    static let badKeys: [CacheKey] = ["a/b", ".", "..", CacheKey(String(repeating: "k", count: 256)), "a\u{0}b", "../escape"]

    @Test func keysThatCannotNameAFileAreDroppedAndTheRestDrain() async throws {
        let f = JournalCacheFixture()
        let reports = Reports()
        f.held.withLock { $0 = true }
        // The engine's own API does not check keys (the daemon refuses them before this):
        // what such a key does here is what an old journal brings back.
        let cache = f.open(plainNames: true, onDroppedEntry: reports.hook)
        _ = try await HybridCacheJournalTests.store(cache, "before", "1")
        for key in Self.badKeys { _ = try await HybridCacheJournalTests.store(cache, key, "bad") }
        _ = try await HybridCacheJournalTests.store(cache, "after", "2")
        f.held.withLock { $0 = false }
        await HybridCacheJournalTests.materialize(cache)

        let journal = try #require(cache.stats().journal)
        #expect(journal.unwrittenEntries == 0)
        #expect(journal.droppedEntries == Self.badKeys.count)
        #expect(journal.fileWriteFailures == 0)
        #expect(reports.keys == Self.badKeys)
        #expect(reports.entries.withLock { $0.allSatisfy { $0.error == .invalidKey(key: $0.key) } })
        #expect(f.fileExists(cache, "before") && f.fileExists(cache, "after"))
        // Gone from memory too: no tier keeps a value the other lost.
        for key in Self.badKeys { #expect(cache.memoryStorage.meta(forKey: key) == nil) }
        // Writes go on.
        #expect(try await HybridCacheJournalTests.store(cache, "later", "3").stored)
        await HybridCacheJournalTests.materialize(cache)
        #expect(f.fileExists(cache, "later"))
        #expect(!FileManager.default.fileExists(atPath: f.root.appendingPathComponent("escape").path))
    }

    @Test func aDirectoryWhereTheFileBelongsDropsThatValueOnly() async throws {
        let f = JournalCacheFixture()
        let reports = Reports()
        f.held.withLock { $0 = true }
        let cache = f.open(onDroppedEntry: reports.hook)
        try FileManager.default.createDirectory(at: cache.diskStorage.cacheFileURL(forKey: "k"), withIntermediateDirectories: true)
        _ = try await HybridCacheJournalTests.store(cache, "k", "v")
        _ = try await HybridCacheJournalTests.store(cache, "other", "w")
        f.held.withLock { $0 = false }
        await HybridCacheJournalTests.materialize(cache)

        #expect(cache.stats().journal?.unwrittenEntries == 0)
        #expect(cache.stats().journal?.droppedEntries == 1)
        let report = try #require(reports.entries.withLock { $0.first })
        #expect(report.key == "k")
        #expect(report.error.errno == EISDIR)
        #expect(f.fileExists(cache, "other"))
        #expect(try await HybridCacheJournalTests.read(cache, "k") == nil)
    }

    @Test func replayDropsSetsOfKeysThatCannotNameAFileAndActsOnNoOtherName() async throws {
        let f = JournalCacheFixture()
        let outside = f.root.appendingPathComponent("escape")
        try FileManager.default.createDirectory(at: f.root, withIntermediateDirectories: true)
        try Data("outside the cache folder".utf8).write(to: outside)
        let frozen = Locked(true)
        // A cache whose journal holds them: its materializer never runs (the crash).
        let first = f.open(held: frozen, plainNames: true)
        _ = try await HybridCacheJournalTests.store(first, "good", "1")
        for key in Self.badKeys { _ = try await HybridCacheJournalTests.store(first, key, "bad") }
        _ = await result { first.remove(forKey: "../escape", completion: $0) }
        _ = await result { first.touch(forKey: "../escape", completion: $0) }

        let reports = Reports()
        f.held.withLock { $0 = true }
        let second = f.open(plainNames: true, onDroppedEntry: reports.hook)
        let journal = try #require(second.stats().journal)
        #expect(journal.droppedEntries == Self.badKeys.count)
        #expect(Set(reports.keys) == Set(Self.badKeys))
        #expect(journal.unwrittenEntries == 1)
        #expect(try await HybridCacheJournalTests.read(second, "good") == "1")
        #expect(try String(contentsOf: outside, encoding: .utf8) == "outside the cache folder")
        f.held.withLock { $0 = false }
        await HybridCacheJournalTests.materialize(second)
        #expect(second.stats().journal?.unwrittenEntries == 0)
        #expect(f.fileExists(second, "good"))
    }
}
