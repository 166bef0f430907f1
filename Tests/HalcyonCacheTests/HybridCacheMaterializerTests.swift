// The materializer rewrites per-key files in place, and that stays safe: a file torn by a
// crash mid-rewrite is never served (replay writes the journaled value again), a disk
// reader off the ioQueue makes it rename instead, and the key listing never opens a file
// the unwritten table answers for. See `LocalStore.WriteBehind.materializeSlice`.

import Foundation
import HalcyonSupport
import Synchronization
import Testing

@testable import HalcyonCache
#if canImport(Glibc)
import Glibc
#endif

@Suite("HybridCache materializer, files rewritten in place")
struct HybridCacheMaterializerTests {
    static func materializeSlice(_ cache: HybridCache) async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            cache.local.scheduler.holdForTesting {
                cache.local.writeBehind!.materializeSlice(files: 100, into: cache.local)
                c.resume()
            }
        }
    }

    static func fileValue(_ cache: HybridCache, _ key: CacheKey) throws -> String? {
        try cache.diskStorage.value(forKey: key, extendingExpiration: .none).map { String(decoding: $0.bytes, as: UTF8.self) }
    }

    @Test func aRewriteKeepsTheInodeUnlessAnOffQueueReaderIsInFlight() async throws {
        let f = JournalCacheFixture()
        let cache = f.open()
        let wb = try #require(cache.local.writeBehind)
        let url = cache.diskStorage.cacheFileURL(forKey: "k")

        _ = try await HybridCacheJournalTests.store(cache, "k", "v1")
        await Self.materializeSlice(cache)
        let first = try #require(diskInode(url))
        #expect(try Self.fileValue(cache, "k") == "v1")

        // No reader: the same inode, the new value.
        f.clock.advance(by: 3)
        _ = try await HybridCacheJournalTests.store(cache, "k", "v2, longer")
        await Self.materializeSlice(cache)
        #expect(diskInode(url)?.inode == first.inode)
        #expect(try Self.fileValue(cache, "k") == "v2, longer")
        let meta = try #require(try cache.diskStorage.meta(forKey: "k"))
        #expect(abs(meta.lastAccess.timeIntervalSince(f.clock.now())) < 0.001)

        // A reader in flight: the file is replaced by a rename (a new inode).
        wb.beginReadingFiles()
        _ = try await HybridCacheJournalTests.store(cache, "k", "v3")
        await Self.materializeSlice(cache)
        let renamed = try #require(diskInode(url))
        #expect(renamed.inode != first.inode)
        #expect(try Self.fileValue(cache, "k") == "v3")
        wb.endReadingFiles()

        // And in place again once it is gone.
        _ = try await HybridCacheJournalTests.store(cache, "k", "v4")
        await Self.materializeSlice(cache)
        #expect(diskInode(url)?.inode == renamed.inode)
        #expect(try Self.fileValue(cache, "k") == "v4")
        #expect(cache.stats().journal?.filesWritten == 4)
        #expect(wb.offQueueReaderCount == 0)
    }

    @Test func readsOnTheCallersThreadCountThemselvesOnlyWhileTheyRun() async throws {
        let f = JournalCacheFixture()
        let cache = f.open()
        _ = try await HybridCacheJournalTests.store(cache, "k", "v1")
        await HybridCacheJournalTests.materialize(cache)
        cache.memoryStorage.removeAll()
        var options = HybridCache.Options()
        options.loadDiskFileSynchronously = true
        let hit = try await result { cache.retrieve(forKey: "k", options: options, completion: $0) }.get()
        #expect(hit.cacheType == .disk)
        let described = try await result { cache.describe(forKey: "nope", options: options, completion: $0) }.get()
        #expect(described.cacheType == .none)
        _ = try await result { cache.listKeys(prefix: "", cursor: nil, limit: 10, completion: $0) }.get()
        #expect(cache.local.writeBehind?.offQueueReaderCount == 0)
    }

    /// The bytes of a complete format-2 file for `key` and `value`, as another backend
    /// writes it.
    static func fileBytes(key: CacheKey, value: String, version: UInt64) throws -> [UInt8] {
        let folder = DiskTestFolder()
        let other = folder.backend()
        try other.store(value: Array(value.utf8), forKey: key, expiration: .never, version: version)
        return try Array(Data(contentsOf: other.cacheFileURL(forKey: key)))
    }

    @Test func aFileTornMidRewriteIsNeverServedAndReplayWritesItAgain() async throws {
        let f = JournalCacheFixture()
        let first = f.open(held: f.frozen)
        f.frozen.withLock { $0 = false }
        _ = try await HybridCacheJournalTests.store(first, "k", "aaaaaaaaaaaaaaaaaaaaaaaa")
        await HybridCacheJournalTests.materialize(first)
        let url = first.diskStorage.cacheFileURL(forKey: "k")
        let before = try #require(diskInode(url))

        // The next value is acknowledged (journal record, table entry) and its rewrite is
        // cut short by the crash: the new header and the first half of the new value, the
        // rest still the old bytes, at the same length.
        f.frozen.withLock { $0 = true }
        let acknowledged = try await HybridCacheJournalTests.store(first, "k", "bbbbbbbbbbbbbbbbbbbbbbbb")
        let version = try #require(acknowledged.version)
        let new = try Self.fileBytes(key: "k", value: "bbbbbbbbbbbbbbbbbbbbbbbb", version: version)
        let old = try Array(Data(contentsOf: url))
        #expect(new.count == old.count)
        let torn = Array(new[0..<(new.count - 12)] + old[(old.count - 12)...])
        let fd = open(url.path, O_WRONLY)
        #expect(fd >= 0)
        #expect(torn.withUnsafeBytes { pwrite(fd, $0.baseAddress!, $0.count, 0) } == torn.count)
        close(fd)

        // On its own, that file is a miss (its CRC32C fails), and it is removed.
        let alone = DiskTestFolder()
        try FileManager.default.createDirectory(at: alone.root.appendingPathComponent("default"), withIntermediateDirectories: true)
        let aloneDisk = alone.backend()
        try Data(torn).write(to: aloneDisk.cacheFileURL(forKey: "k"))
        aloneDisk.knownNames.insert(url.lastPathComponent)
        #expect(try aloneDisk.value(forKey: "k") == nil)
        #expect(aloneDisk.corruptionCount == 1)

        // The restart: the record is replayed; reads answer from the table, never the file.
        let second = f.open(held: Locked(true))
        #expect(second.stats().journal?.unwrittenEntries == 1)
        #expect(try await HybridCacheJournalTests.read(second, "k") == "bbbbbbbbbbbbbbbbbbbbbbbb")
        var inline = HybridCache.Options()
        inline.loadDiskFileSynchronously = true
        second.memoryStorage.removeAll()
        let hit = try await result { second.retrieve(forKey: "k", options: inline, completion: $0) }.get()
        #expect(hit.entry?.bytes == Array("bbbbbbbbbbbbbbbbbbbbbbbb".utf8))
        #expect(second.diskStorage.corruptionCount == 0)

        // The materializer writes it again, over the torn file, in place.
        await Self.materializeSlice(second)
        #expect(diskInode(url)?.inode == before.inode)
        #expect(try Self.fileValue(second, "k") == "bbbbbbbbbbbbbbbbbbbbbbbb")
        #expect(second.diskStorage.corruptionCount == 0)
    }

    @Test func theKeyListingNeverOpensAFileTheTableAnswersFor() async throws {
        let f = JournalCacheFixture()
        let cache = f.open()
        _ = try await HybridCacheJournalTests.store(cache, "k", "aaaaaaaa")
        _ = try await HybridCacheJournalTests.store(cache, "other", "x")
        await HybridCacheJournalTests.materialize(cache)
        f.held.withLock { $0 = true }
        _ = try await HybridCacheJournalTests.store(cache, "k", "bbbbbbbb")
        // What a listing would meet mid-rewrite: a file that is not whole.
        let url = cache.diskStorage.cacheFileURL(forKey: "k")
        let fd = open(url.path, O_WRONLY)
        #expect(fd >= 0)
        #expect(ftruncate(fd, 30) == 0)
        close(fd)

        let page = try await result { cache.listKeys(prefix: "", cursor: nil, limit: 100, completion: $0) }.get()
        #expect(page.keys.sorted() == ["k", "other"])
        #expect(cache.diskStorage.corruptionCount == 0)
        #expect(diskInode(url)?.size == 30)
        f.held.withLock { $0 = false }
        await HybridCacheJournalTests.materialize(cache)
        #expect(try Self.fileValue(cache, "k") == "bbbbbbbb")
    }
}
