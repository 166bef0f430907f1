// The journal in the hybrid cache's write path: sets answered before their files exist
// (read from the unwritten table), files written behind, a restart that replays what no
// file holds, removed and cleared keys not coming back, a crash between a file's rename
// and the checkpoint, large values written straight to their files, and back-pressure
// with the materializer held (writes wait, then diskBacklog, nothing lost).
// A "crash" here is a second cache opened on the same folders while the first is held
// (its materializer stopped, nothing flushed): what the second sees is what a restart
// after kill -9 would see. The kill -9 of a real daemon is in
// Clients/python/tests/test_durability.py.

import Foundation
import HalcyonSupport
import Testing

@testable import HalcyonCache

/// A cache with a journal on a fresh folder, and the means to reopen it.
final class JournalCacheFixture: Sendable {
    let root: URL
    let clock = ManualClock()
    let held = Locked(false)
    /// For the cache that "crashes": held for good, it never writes another file.
    let frozen = Locked(true)

    init() {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("halcyon-wal-\(UUID().uuidString)")
    }

    deinit { try? FileManager.default.removeItem(at: root) }

    func open(
        maxUnwritten: UInt64 = 64 << 20, backlogWait: Double = 2, directValueSize: Int = 1 << 20,
        memoryCostLimit: Int = 1 << 20, diskSizeLimit: UInt64 = 0, segmentSize: UInt64 = 16 << 20,
        held: Locked<Bool>? = nil, plainNames: Bool = false, materializerRest: DispatchTimeInterval = .milliseconds(25),
        onDroppedEntry: (@Sendable (CacheKey, CacheError) -> Void)? = nil
    ) -> HybridCache {
        var memory = MemoryStorage.Config(totalCostLimit: memoryCostLimit)
        memory.clock = clock
        memory.cleanInterval = 0
        var disk = DiskStorage.Config(name: "test", sizeLimit: diskSizeLimit, directory: root)
        disk.clock = clock
        disk.usesHashedFileName = !plainNames
        var config = HybridCache.Config(memory: memory, disk: disk)
        config.sweepInterval = 0
        var journal = HybridCache.JournalConfig(fsync: .never)
        journal.onDroppedEntry = onDroppedEntry
        journal.maxUnwrittenBytes = maxUnwritten
        journal.backlogWait = backlogWait
        journal.directValueSize = directValueSize
        journal.segmentSize = segmentSize
        journal.materializerRest = materializerRest
        let held = held ?? self.held
        journal.materializerHeld = { held.withLock { $0 } }
        config.journal = journal
        return HybridCache(config: config)
    }

    var folder: String { root.appendingPathComponent("test").path }
    var journalFolder: String { folder + ".journal" }

    func fileExists(_ cache: HybridCache, _ key: CacheKey) -> Bool {
        FileManager.default.fileExists(atPath: cache.diskStorage.cacheFileURL(forKey: key).path)
    }
}

@Suite("HybridCache journal")
struct HybridCacheJournalTests {
    static func store(_ cache: HybridCache, _ key: CacheKey, _ value: String) async throws -> HybridCache.StoreResult {
        try await result { cache.store(CacheEntry(bytes: Array(value.utf8)), forKey: key, completion: $0) }.get()
    }

    static func read(_ cache: HybridCache, _ key: CacheKey) async throws -> String? {
        let r = try await result { cache.retrieve(forKey: key, completion: $0) }.get()
        return r.entry.map { String(decoding: $0.bytes, as: UTF8.self) }
    }

    static func materialize(_ cache: HybridCache) async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in cache.materializeNow { c.resume() } }
    }

    @Test func aSetIsAnsweredFromTheUnwrittenTableThenWrittenBehind() async throws {
        let f = JournalCacheFixture()
        f.held.withLock { $0 = true }
        let cache = f.open()
        #expect(try await Self.store(cache, "k", "v1").stored)
        #expect(!f.fileExists(cache, "k"))
        cache.memoryStorage.removeAll()
        let hit = try await result { cache.retrieve(forKey: "k", completion: $0) }.get()
        #expect(hit.cacheType == .disk)
        #expect(hit.entry?.bytes == Array("v1".utf8))
        #expect(cache.stats().journal?.unwrittenEntries == 1)
        f.held.withLock { $0 = false }
        await Self.materialize(cache)
        #expect(f.fileExists(cache, "k"))
        #expect(cache.stats().journal?.unwrittenEntries == 0)
        #expect(cache.stats().journal?.filesWritten == 1)
        let file = try cache.diskStorage.valueAndMeta(forKey: "k", extendingExpiration: .none)
        #expect(file?.entry.bytes == Array("v1".utf8))
        #expect(file?.meta.version ?? 0 > 0)
    }

    @Test func aRestartReplaysWhatNoFileHoldsAndNothingRemovedComesBack() async throws {
        let f = JournalCacheFixture()
        let frozen = Locked(false)
        let first = f.open(held: frozen)
        _ = try await Self.store(first, "kept", "old")
        _ = try await Self.store(first, "removed", "x")
        _ = try await Self.store(first, "cleared", "y")
        await Self.materialize(first)  // files exist for all three
        frozen.withLock { $0 = true }
        f.held.withLock { $0 = true }
        _ = try await result { first.clear(completion: $0) }.get()
        _ = try await Self.store(first, "kept", "new")
        _ = try await Self.store(first, "removed", "z")
        _ = try await result { first.remove(forKey: "removed", completion: $0) }.get()
        _ = try await Self.store(first, "later", "w")
        #expect(!f.fileExists(first, "later"))

        // The crash: `first` never writes another file; a new cache opens the folders.
        let second = f.open()
        #expect(second.stats().journal?.replayedRecords ?? 0 >= 4)
        #expect(try await Self.read(second, "kept") == "new")
        #expect(try await Self.read(second, "later") == "w")
        #expect(try await Self.read(second, "removed") == nil)
        #expect(try await Self.read(second, "cleared") == nil)
        f.held.withLock { $0 = false }
        await Self.materialize(second)
        #expect(f.fileExists(second, "later"))
        #expect(!f.fileExists(second, "cleared"))
        // And once more, after the checkpoint: still the same answers.
        let third = f.open()
        #expect(try await Self.read(third, "kept") == "new")
        #expect(try await Self.read(third, "removed") == nil)
        #expect(try await Self.read(third, "cleared") == nil)
    }

    @Test func aCrashBetweenTheFileRenameAndTheCheckpointReplaysIdempotently() async throws {
        let f = JournalCacheFixture()
        let first = f.open(held: f.frozen)
        _ = try await Self.store(first, "k", "v1")
        _ = try await Self.store(first, "k", "v2")
        _ = try await Self.store(first, "gone", "x")
        _ = try await result { first.remove(forKey: "gone", completion: $0) }.get()
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            first.local.scheduler.holdForTesting {
                first.local.writeBehind!.materializeSlice(files: 100, into: first.local)  // files only, no checkpoint
                c.resume()
            }
        }
        #expect(f.fileExists(first, "k"))
        // The files are renamed into place; the checkpoint that would follow is lost.
        try? FileManager.default.removeItem(atPath: f.journalFolder + "/" + Journal.Checkpoint.fileName)
        let second = f.open()
        #expect(second.stats().journal?.replayedRecords ?? 0 >= 4)
        #expect(try await Self.read(second, "k") == "v2")
        #expect(try await Self.read(second, "gone") == nil)
        await Self.materialize(second)
        let file = try second.diskStorage.valueAndMeta(forKey: "k", extendingExpiration: .none)
        #expect(file?.entry.bytes == Array("v2".utf8))
    }

    /// Stores [7] under "s" for 10 s, then reads it `after` seconds later (extending it to
    /// 10 s from then) and returns that hit.
    static func storeThenExtend(
        _ f: JournalCacheFixture, _ cache: HybridCache, after seconds: Double
    ) async throws -> HybridCache.RetrieveResult {
        var options = HybridCache.Options()
        options.diskExpiration = .seconds(10)
        _ = try await result { cache.store(CacheEntry(bytes: [7]), forKey: "s", options: options, completion: $0) }.get()
        f.clock.advance(by: seconds)
        let hit = try await result { cache.retrieve(forKey: "s", completion: $0) }.get()
        #expect(hit.expiresAt == f.clock.now().addingTimeInterval(10))
        return hit
    }

    /// Reopens the cache (a restart that replays the journal), `after` seconds later, and
    /// expects "s" with the lifetime of `hit`.
    static func expectReplayKeeps(_ hit: HybridCache.RetrieveResult, _ f: JournalCacheFixture, after seconds: Double) async throws {
        let second = f.open()
        f.clock.advance(by: seconds)
        var look = HybridCache.Options()
        look.extendingExpiration = ExpirationExtending.none
        let after = try await result { second.retrieve(forKey: "s", options: look, completion: $0) }.get()
        #expect(after.entry?.bytes == [7])
        #expect(after.expiresAt == hit.expiresAt)
    }

    /// A lifetime extended in memory and written back reaches the journal as a touch
    /// record: a restart that replays the key's set record (its file never written) keeps
    /// the extended lifetime instead of the one the set gave.
    @Test func aWrittenBackExtensionSurvivesAReplayOfTheSet() async throws {
        let f = JournalCacheFixture()
        let first = f.open(held: f.frozen)
        let hit = try await Self.storeThenExtend(f, first, after: 8)
        #expect(hit.cacheType == .memory)
        first.shutdown()  // the write-backs of a clean stop; no file is written (frozen)
        #expect(!f.fileExists(first, "s"))

        // Past the set's lifetime (10 s), within the extended one (18 s).
        try await Self.expectReplayKeeps(hit, f, after: 4)
    }

    /// The write-back's touch record is journaled even while a write of the key is queued
    /// behind it: that write comes later in the order, so the touch cannot undo it; and
    /// when it never happens (cancelled before it began), a replay keeps the extension.
    @Test func anExtensionIsJournaledWhileAWriteOfTheKeyIsQueuedBehindIt() async throws {
        let f = JournalCacheFixture()
        let first = f.open(held: f.frozen)
        // Extended below half the TTL: no write-back is due yet; the flush below takes it.
        let hit = try await Self.storeThenExtend(f, first, after: 4)

        let gate = DispatchSemaphore(value: 0)
        first.local.scheduler.holdForTesting { gate.wait() }
        let flushed = Locked<Result<Int, CacheError>?>(nil)
        let flushDone = DispatchSemaphore(value: 0)
        first.flush { r in
            flushed.withLock { $0 = r }
            flushDone.signal()
        }
        // Queued behind the write-back, then cancelled before it begins: it never happens.
        let later = first.store(CacheEntry(bytes: [8]), forKey: "s")
        later.cancel()
        gate.signal()
        #expect(flushDone.wait(timeout: .now() + 10) == .success)
        #expect(try flushed.withLock({ $0 })?.get() ?? 0 >= 1)
        #expect(!f.fileExists(first, "s"))  // frozen: only the journal holds the key

        // Past the set's lifetime (10 s), within the extended one (14 s).
        try await Self.expectReplayKeeps(hit, f, after: 8)
    }

    @Test func aLargeValueGoesStraightToItsFileAndHidesAnOlderUnwrittenOne() async throws {
        let f = JournalCacheFixture()
        f.held.withLock { $0 = true }
        let first = f.open(directValueSize: 1024, held: f.frozen)
        _ = try await Self.store(first, "big", "small first")
        let large = String(repeating: "L", count: 4096)
        _ = try await Self.store(first, "big", large)
        #expect(f.fileExists(first, "big"))
        #expect(first.stats().journal?.directWrites == 1)
        let second = f.open(directValueSize: 1024)
        #expect(try await Self.read(second, "big") == large)
    }

    /// setMany, cas and incr run inside jobs of their own (they read, then write), not
    /// through group commit. A key with an older journaled value still unwritten must
    /// answer their newer one, both while memory holds nothing (the table comes before
    /// the file) and after a crash (replay must not bring the older value back), and the
    /// materializer must not write the older value over the newer one.
    @Test func setManyCasAndIncrWinOverAnOlderUnwrittenValue() async throws {
        let f = JournalCacheFixture()
        f.held.withLock { $0 = true }
        let first = f.open(held: f.frozen)
        for key in ["many", "cas", "incr"] as [CacheKey] { _ = try await Self.store(first, key, "1") }
        _ = try await result {
            first.storeMany([.init(key: "many", entry: CacheEntry(bytes: Array("2".utf8)))], completion: $0)
        }.get()
        let version = try await result { first.retrieve(forKey: "cas", completion: $0) }.get().entry?.version ?? 0
        let swapped = try await result {
            first.compareAndStore(CacheEntry(bytes: Array("2".utf8)), forKey: "cas", version: version, completion: $0)
        }.get()
        #expect(swapped.stored)
        _ = try await result { first.increment(forKey: "incr", by: 1, flags: 0, completion: $0) }.get()
        // They went to the journal, not to their files (the materializer is held).
        for key in ["many", "cas", "incr"] as [CacheKey] { #expect(!f.fileExists(first, key), "\(key)") }

        for key in ["many", "cas", "incr"] as [CacheKey] {
            // Memory forgets the key; the disk copy (table, then file) answers.
            _ = try await result { first.remove(forKey: key, fromMemory: true, fromDisk: false, completion: $0) }.get()
            #expect(try await Self.read(first, key) == "2", "\(key), live")
        }
        // A restart after kill -9: the journal still holds the "1" records.
        let second = f.open()
        for key in ["many", "cas", "incr"] as [CacheKey] {
            #expect(try await Self.read(second, key) == "2", "\(key), after replay")
        }
        await Self.materialize(second)
        let third = f.open()
        for key in ["many", "cas", "incr"] as [CacheKey] {
            #expect(try await Self.read(third, key) == "2", "\(key), after the replayed entries were written")
        }
    }

    /// A direct commit (what an event loop runs for the writes of one read burst): each
    /// update decides on the writes before it in the same commit, refusals change
    /// nothing, and a crash replays exactly the values the outcomes reported.
    @Test func aDirectCommitDecidesEachUpdateOnTheWritesBeforeItAndReplaysThem() async throws {
        let f = JournalCacheFixture()
        f.held.withLock { $0 = true }
        let first = f.open(held: f.frozen)
        func entry(_ text: String) -> CacheEntry { CacheEntry(bytes: Array(text.utf8)) }
        func store(_ key: CacheKey, _ text: String) -> HybridCache.DirectWrite {
            .store(.init(key: key, entry: entry(text), options: .init()))
        }
        func update(_ key: CacheKey, _ change: HybridCache.DirectUpdate.Change) -> HybridCache.DirectWrite {
            .update(.init(key: key, change: change, options: .init()))
        }
        let outcomes = first.commitDirect([
            store("n", "5"),
            update("n", .increment(by: 2, initial: 0, flags: 0)),
            update("n", .add(entry("x"))),
            update("fresh", .add(entry("1"))),
            update("fresh", .increment(by: 10, initial: 0, flags: 0)),
            store("text", "abc"),
            update("text", .increment(by: 1, initial: 0, flags: 0)),
            update("counter", .increment(by: -3, initial: 100, flags: 0)),
        ])
        #expect(outcomes.count == 8)
        guard case .stored(.success(let set)) = outcomes[0], let setVersion = set.version,
              case .incremented(.success(.incremented(let seven, let sevenVersion, _))) = outcomes[1],
              case .conditional(.success(let refused)) = outcomes[2],
              case .conditional(.success(let added)) = outcomes[3],
              case .incremented(.success(.incremented(let eleven, _, _))) = outcomes[4],
              case .incremented(.success(let notInteger)) = outcomes[6],
              case .incremented(.success(.incremented(let ninetySeven, _, _))) = outcomes[7]
        else {
            Issue.record("unexpected outcomes: \(outcomes)")
            return
        }
        #expect(seven == 7 && sevenVersion > setVersion)
        #expect(!refused.stored && refused.version == sevenVersion)
        #expect(added.stored)
        #expect(eleven == 11)
        #expect(notInteger == .notAnInteger)
        #expect(ninetySeven == 97)

        // A compare-and-set on the version the increment reported wins once; the second,
        // on the same (now old) version, is refused.
        let swaps = first.commitDirect([
            update("n", .compareAndStore(entry("100"), version: sevenVersion)),
            update("n", .compareAndStore(entry("200"), version: sevenVersion)),
        ])
        guard case .conditional(.success(let won)) = swaps[0], case .conditional(.success(let lost)) = swaps[1] else {
            Issue.record("unexpected outcomes: \(swaps)")
            return
        }
        #expect(won.stored && !lost.stored && lost.version == won.version)
        #expect(try await Self.read(first, "n") == "100")

        // kill -9 and a restart: nothing reached a file; the journal gives back every value.
        for key in ["n", "fresh", "text", "counter"] as [CacheKey] { #expect(!f.fileExists(first, key), "\(key)") }
        let second = f.open()
        #expect(try await Self.read(second, "n") == "100")
        #expect(try await Self.read(second, "fresh") == "11")
        #expect(try await Self.read(second, "text") == "abc")
        #expect(try await Self.read(second, "counter") == "97")
    }

    /// A direct commit whose updates are all refused appends nothing, yet the write path
    /// is busy: it must count as write activity, or the materializer takes the load for a
    /// pause and writes files back to back, each of which the next commit waits behind
    /// (measured: refused increments at 8 × 16 ran at 73k/s instead of 168k/s).
    @Test func aDirectCommitOfRefusedUpdatesCountsAsWriteActivity() async throws {
        let f = JournalCacheFixture()
        f.held.withLock { $0 = true }
        let cache = f.open()
        _ = try await Self.store(cache, "text", "not a number")
        guard let wb = cache.local.writeBehind else {
            Issue.record("no journal")
            return
        }
        let before = wb.lastWriteNanos
        let appendedBefore = wb.journalBytes
        let outcomes = cache.commitDirect([
            .update(.init(key: "text", change: .increment(by: 1, initial: 0, flags: 0), options: .init())),
            .update(.init(key: "text", change: .add(CacheEntry(bytes: Array("x".utf8))), options: .init())),
        ])
        guard case .incremented(.success(.notAnInteger)) = outcomes[0],
              case .conditional(.success(let added)) = outcomes[1], !added.stored
        else {
            Issue.record("unexpected outcomes: \(outcomes)")
            return
        }
        #expect(wb.journalBytes == appendedBefore, "a refusal appends nothing")
        #expect(wb.lastWriteNanos > before)
    }

    /// An update takes the direct path (decided on an event loop) only when it can decide
    /// without opening a file: its key in memory or in the unwritten table, or no file
    /// possible for it. A key only its file knows goes the queued way, so the loop never
    /// reads a file for it.
    @Test func anUpdateIsDirectOnlyWhenItDecidesWithoutAFile() async throws {
        let f = JournalCacheFixture()
        let cache = f.open()
        cache.diskStorage.waitForInitialScan()
        _ = try await Self.store(cache, "cold", "1")
        await Self.materialize(cache)
        _ = try await result { cache.remove(forKey: "cold", fromMemory: true, fromDisk: false, completion: $0) }.get()
        #expect(f.fileExists(cache, "cold"))
        _ = try await Self.store(cache, "hot", "1")
        f.held.withLock { $0 = true }
        _ = try await Self.store(cache, "unwritten", "1")
        _ = try await result { cache.remove(forKey: "unwritten", fromMemory: true, fromDisk: false, completion: $0) }.get()

        #expect(!cache.local.decidesWithoutFiles("cold", forcedExtension: nil), "only its file knows it")
        #expect(cache.local.decidesWithoutFiles("hot", forcedExtension: nil), "memory holds it")
        #expect(cache.local.decidesWithoutFiles("unwritten", forcedExtension: nil), "the unwritten table holds it")
        #expect(cache.local.decidesWithoutFiles("never", forcedExtension: nil), "no file can exist")
        // The queued way gives the answer the file holds.
        let outcome = try await result { cache.increment(forKey: "cold", by: 1, flags: 0, completion: $0) }.get()
        guard case .incremented(let value, _, _) = outcome else {
            Issue.record("unexpected outcome: \(outcome)")
            return
        }
        #expect(value == 2)
    }

    /// Removals that do not go through group commit (removePrefix, a `toDisk: false`
    /// store of setMany) journal their own delete: after a crash the journal's older set
    /// records must not bring the keys back.
    @Test func removalsOutsideGroupCommitStayRemovedAfterACrash() async throws {
        let f = JournalCacheFixture()
        f.held.withLock { $0 = true }
        let first = f.open(held: f.frozen)
        for key in ["p:1", "p:2", "q"] as [CacheKey] { _ = try await Self.store(first, key, "old") }
        let removed = try await result { first.removePrefix("p:", completion: $0) }.get()
        #expect(removed == 2)
        var memoryOnly = HybridCache.Options()
        memoryOnly.toDisk = false
        _ = try await result {
            first.storeMany([.init(key: "q", entry: CacheEntry(bytes: Array("new".utf8)))], options: memoryOnly, completion: $0)
        }.get()
        #expect(try await Self.read(first, "p:1") == nil)
        #expect(try await Self.read(first, "q") == "new")

        // A restart after kill -9: memory is empty, the journal holds the "old" sets.
        let second = f.open()
        #expect(try await Self.read(second, "p:1") == nil)
        #expect(try await Self.read(second, "p:2") == nil)
        #expect(try await Self.read(second, "q") == nil)
    }

    @Test func writesAfterTheFolderIsDeletedUnderTheCacheSurviveACrash() async throws {
        let f = JournalCacheFixture()
        f.held.withLock { $0 = true }
        let first = f.open(held: f.frozen)
        _ = try await Self.store(first, "before", "unwritten")
        // Someone deletes the whole cache folder, journal and all; the journal's open
        // segment still takes writes, which a crash would lose.
        try FileManager.default.removeItem(at: f.root)
        _ = try await Self.store(first, "after", "acknowledged")
        #expect(first.stats().journal?.journalRebuilds == 1)
        #expect(FileManager.default.fileExists(atPath: f.journalFolder))

        // kill -9 and a restart: the acknowledged write is back, and so is the value the
        // daemon still answered from its table when the folder went.
        let second = f.open()
        #expect(try await Self.read(second, "after") == "acknowledged")
        #expect(try await Self.read(second, "before") == "unwritten")
    }

    @Test func aMemoryOnlyStoreOfAKeyTheSizeLimitEvictedStaysAfterACrash() async throws {
        let f = JournalCacheFixture()
        f.held.withLock { $0 = true }
        let first = f.open(diskSizeLimit: 1000, held: f.frozen)
        let big = String(repeating: "x", count: 600)
        _ = try await Self.store(first, "evicted", "old" + big)
        _ = try await Self.store(first, "other", "value" + big)
        // Written to files and trimmed (the limit evicts both), with no checkpoint: the
        // set records are still in the journal.
        guard let wb = first.local.writeBehind else {
            Issue.record("no journal")
            return
        }
        let written = first.local.scheduler.runNowForTesting { wb.materializeSlice(files: 10, into: first.local) }
        #expect(written == 2)
        #expect(!f.fileExists(first, "evicted"))
        #expect(first.local.scheduler.runNowForTesting { wb.lastCheckpoint } == nil)  // queue-only state

        // A memory-only value replaces the evicted one; it needs no file, but a restart
        // must not bring the old value back from the journal either.
        var memoryOnly = HybridCache.Options()
        memoryOnly.toDisk = false
        _ = try await result {
            first.store(CacheEntry(bytes: Array("new".utf8)), forKey: "evicted", options: memoryOnly, completion: $0)
        }.get()
        #expect(try await Self.read(first, "evicted") == "new")

        let second = f.open()
        #expect(try await Self.read(second, "evicted") == nil)
    }

    @Test func recordsCopiedForwardLetTheCheckpointPassWithoutFilesAndReplayTheSameValues() async throws {
        let f = JournalCacheFixture()
        f.held.withLock { $0 = true }
        let first = f.open(segmentSize: 1 << 16, held: f.frozen)
        let pad = String(repeating: "v", count: 500)
        // Twenty keys written once pin the first segment; one hot key fills the next ones.
        for i in 0..<20 { _ = try await Self.store(first, "k\(i)", "\(i)" + pad) }
        for i in 0..<300 { _ = try await Self.store(first, "hot", "\(i)" + pad) }
        guard let wb = first.local.writeBehind else {
            Issue.record("no journal")
            return
        }
        let segmentsBefore = first.local.scheduler.runNowForTesting { wb.journalEnd.segment }
        #expect(segmentsBefore >= 3)
        let copied = first.local.scheduler.runNowForTesting { () -> Int in
            let n = wb.copyForward(limit: 64, at: first.local.now())
            wb.checkpointIfUseful(first.local, force: false)
            return n
        }
        #expect(copied == 20)  // the hot key's record is already in the segment being written
        let stats = first.stats().journal
        #expect(stats?.recordsCopiedForward == 20)
        #expect(stats?.segmentsDeleted ?? 0 >= 2)
        #expect(stats?.filesWritten == 0)
        #expect(!f.fileExists(first, "k1"))
        // After the copies: a rewrite and a removal, which replay must keep.
        _ = try await Self.store(first, "k0", "rewritten")
        _ = try await result { first.remove(forKey: "k1", completion: $0) }.get()

        // kill -9 and a restart: only the segments after the checkpoint are replayed.
        let second = f.open()
        #expect(try await Self.read(second, "k0") == "rewritten")
        #expect(try await Self.read(second, "k1") == nil)
        for i in 2..<20 { #expect(try await Self.read(second, "k\(i)") == "\(i)" + pad) }
        #expect(try await Self.read(second, "hot") == "299" + pad)
    }

    @Test func atTheBoundWritesWaitThenGetDiskBacklogAndNothingIsLost() async throws {
        let f = JournalCacheFixture()
        f.held.withLock { $0 = true }
        let cache = f.open(maxUnwritten: 16 << 10, backlogWait: 0.2)
        var acknowledged: [CacheKey: String] = [:]
        var refusal: CacheError?
        for i in 0..<400 {
            let value = String(repeating: "v", count: 200) + "\(i)"
            do {
                _ = try await Self.store(cache, "k\(i)", value)
                acknowledged["k\(i)"] = value
            } catch {
                refusal = error as? CacheError
                break
            }
        }
        #expect(refusal?.reason == "diskBacklog")
        #expect(!acknowledged.isEmpty)
        #expect(cache.stats().journal?.backlogRefusals == 1)
        #expect(cache.stats().journal?.stalls ?? 0 >= 1)
        // Released, the materializer makes room and writes resume.
        f.held.withLock { $0 = false }
        #expect(try await Self.store(cache, "after", "ok").stored)
        cache.memoryStorage.removeAll()
        for (key, value) in acknowledged { #expect(try await Self.read(cache, key) == value) }
        f.held.withLock { $0 = true }
        let reopened = f.open()
        for (key, value) in acknowledged { #expect(try await Self.read(reopened, key) == value) }
    }

    @Test func boundsFillingCutTheMaterializersRestShort() async throws {
        // A rest far longer than the test's time limit: files written in time prove that
        // the writes filling the bounds ended it, not its timer.
        let f = JournalCacheFixture()
        let cache = f.open(maxUnwritten: 64 << 10, materializerRest: .seconds(600))
        _ = try await Self.store(cache, "first", "v")
        let value = String(repeating: "v", count: 1024)
        for i in 0..<40 { _ = try await Self.store(cache, "k\(i)", value) }
        let deadline = ContinuousClock.now + .seconds(20)
        while (cache.stats().journal?.filesWritten ?? 0) == 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect((cache.stats().journal?.filesWritten ?? 0) > 0, "the files waited for the materializer's rest to end")
        for i in 0..<40 { #expect(try await Self.read(cache, "k\(i)") == value) }
    }

    @Test func touchAndExpiryOfAnUnwrittenEntryFollowTheJournal() async throws {
        let f = JournalCacheFixture()
        let cache = f.open(held: f.frozen)
        var options = HybridCache.Options()
        options.diskExpiration = .seconds(10)
        _ = try await result { cache.store(CacheEntry(bytes: [1]), forKey: "t", options: options, completion: $0) }.get()
        var touch = HybridCache.Options()
        touch.diskExpiration = .seconds(100)
        cache.memoryStorage.removeAll()
        let touched = try await result { cache.touch(forKey: "t", options: touch, completion: $0) }.get()
        #expect(touched.touched)
        #expect(touched.expiresAt == f.clock.now().addingTimeInterval(100))
        let reopened = f.open()
        f.clock.advance(by: 50)
        #expect(try await result { reopened.retrieve(forKey: "t", completion: $0) }.get().entry?.bytes == [1])
    }
}

@Suite("HybridCache journal, disk full")
struct HybridCacheJournalDiskFullTests {
    @Test func aFullJournalFailsTheWriteWithENOSPCReadsGoOnAndATrimLetsWritesResume() async throws {
        let f = JournalCacheFixture()
        let mountPoint = f.root.appendingPathComponent("journal-tmpfs").path
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        guard JournalTests.run("/bin/mount", ["-t", "tmpfs", "-o", "size=256k", "tmpfs", mountPoint]) else {
            print("HybridCacheJournalDiskFullTests: skipping: cannot mount a tmpfs here")
            return
        }
        defer { _ = JournalTests.run("/bin/umount", ["-l", mountPoint]) }
        var memory = MemoryStorage.Config(totalCostLimit: 1 << 20)
        memory.clock = f.clock
        var disk = DiskStorage.Config(name: "test", directory: f.root)
        disk.clock = f.clock
        var config = HybridCache.Config(memory: memory, disk: disk)
        config.sweepInterval = 0
        var journal = HybridCache.JournalConfig(fsync: .never)
        journal.directory = URL(fileURLWithPath: mountPoint + "/j")
        let held = f.held
        held.withLock { $0 = true }
        journal.materializerHeld = { held.withLock { $0 } }
        config.journal = journal
        let cache = HybridCache(config: config)

        let value = String(repeating: "x", count: 20_000)
        var stored: [CacheKey] = []
        var failure: CacheError?
        for i in 0..<40 {
            do {
                _ = try await HybridCacheJournalTests.store(cache, "k\(i)", value)
                stored.append("k\(i)")
            } catch {
                failure = error as? CacheError
                break
            }
        }
        #expect(failure?.reason == "cannotWriteJournal")
        #expect(failure?.errno == ENOSPC)
        #expect(!stored.isEmpty)
        #expect(cache.stats().journal?.failedAppends ?? 0 >= 1)
        // Reads go on, from memory and from the unwritten table.
        cache.memoryStorage.removeAll()
        for key in stored { #expect(try await HybridCacheJournalTests.read(cache, key) == value) }
        // A trim writes the files and lets the journal's segments go: writes resume.
        held.withLock { $0 = false }
        _ = try await result { cache.trim(completion: $0) }.get()
        #expect(try await HybridCacheJournalTests.store(cache, "after", "ok").stored)
        for key in stored { #expect(try await HybridCacheJournalTests.read(cache, key) == value) }
    }
}
