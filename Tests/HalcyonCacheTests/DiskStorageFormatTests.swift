// The cache file format 2: key, version and checksum kept with the value; format-1 files
// still read; damaged files a counted miss and removed; FIFOs and symbolic links in the
// folder never block, never followed; the key listing.

import Dispatch
import Foundation
import HalcyonSupport
import Testing
@testable import HalcyonCache
#if canImport(Glibc)
import Glibc
#endif

@Suite("DiskStorage file format")
struct DiskStorageFormatTests {
    /// Runs `body` on another thread and fails (instead of hanging) if it takes more than
    /// `seconds`: a read that blocks on a FIFO must fail the test, not stall it.
    func withinTimeLimit<T: Sendable>(_ seconds: Double = 10, _ body: @escaping @Sendable () throws -> T) throws -> T? {
        let done = DispatchSemaphore(value: 0)
        let box = Locked<Result<T, any Error>?>(nil)
        DispatchQueue.global().async {
            let result = Result { try body() }
            box.withLock { $0 = result }
            done.signal()
        }
        guard done.wait(timeout: .now() + seconds) == .success else {
            Issue.record("did not finish within \(seconds) s")
            return nil
        }
        return try box.withLock { $0 }!.get()
    }

    @Test func keyVersionAndFlagsSurviveANewBackend() throws {
        let folder = DiskTestFolder()
        let disk = folder.backend()
        let meta = try #require(try disk.store(value: diskBytes("value"), flags: 9, forKey: "k", version: 42))
        #expect(meta.version == 42)
        #expect(meta.fileSize == 48 + 1 + 5)
        let again = folder.backend()
        #expect(try again.value(forKey: "k") == CacheEntry(bytes: diskBytes("value"), flags: 9, version: 42))
        #expect(try again.meta(forKey: "k")?.version == 42)
        // A new store replaces the version.
        try again.store(value: diskBytes("v2"), forKey: "k", version: 43)
        #expect(try again.value(forKey: "k")?.version == 43)
    }

    @Test func formatOneFilesAreStillRead() throws {
        let folder = DiskTestFolder()
        let disk = folder.backend()
        let url = disk.cacheFileURL(forKey: "old")
        try Data([0x48, 0x43, 0x59, 0x31, 5, 0, 0, 0] + diskBytes("legacy")).write(to: url)
        // Expiration in mtime, as format 1 kept it too: an hour after the clock's now.
        let expiry = Int64(diskT0.timeIntervalSince1970) + 3600
        var times = [timespec(tv_sec: Int(expiry - 3600), tv_nsec: 0), timespec(tv_sec: Int(expiry), tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, url.path, &times, 0) == 0)
        let fresh = folder.backend()
        #expect(try fresh.value(forKey: "old", extendingExpiration: .none) == CacheEntry(bytes: diskBytes("legacy"), flags: 5, version: 0))
        // The listing cannot name its key; it counts it instead.
        let page = try fresh.listKeys()
        #expect(page.keys.isEmpty)
        #expect(page.unlistableFiles == 1)
        #expect(fresh.corruptionCount == 0)
    }

    /// Stores a value, damages its file with `damage`, and checks that a read is a miss,
    /// counted, with the file removed.
    func expectDamageDetected(_ damage: (FileHandle, URL) throws -> Void) throws {
        let folder = DiskTestFolder()
        let disk = folder.backend()
        let value = (0..<1000).map { UInt8(truncatingIfNeeded: $0) }
        try disk.store(value: value, forKey: "k", expiration: .days(1))
        let url = disk.cacheFileURL(forKey: "k")
        let handle = try FileHandle(forUpdating: url)
        try damage(handle, url)
        try handle.close()
        #expect(try disk.value(forKey: "k") == nil)
        #expect(disk.corruptionCount == 1)
        #expect(!FileManager.default.fileExists(atPath: url.path))
        #expect(try disk.value(forKey: "k") == nil)
        #expect(disk.corruptionCount == 1)
    }

    @Test func aTruncatedFileIsAMissCountedAndRemoved() throws {
        try expectDamageDetected { handle, _ in try handle.truncate(atOffset: 48 + 1 + 500) }
    }

    @Test func aFileCutInsideItsHeaderIsAMissCountedAndRemoved() throws {
        try expectDamageDetected { handle, _ in try handle.truncate(atOffset: 20) }
    }

    @Test func aLongerFileIsAMissCountedAndRemoved() throws {
        try expectDamageDetected { handle, _ in
            try handle.seekToEnd()
            try handle.write(contentsOf: Data([1, 2, 3]))
        }
    }

    @Test func aFlippedValueByteIsAMissCountedAndRemoved() throws {
        try expectDamageDetected { handle, _ in
            try handle.seek(toOffset: 48 + 1 + 700)
            try handle.write(contentsOf: Data([0xEE]))
        }
    }

    @Test func aFlippedHeaderByteIsCaughtByTheChecksum() throws {
        try expectDamageDetected { handle, _ in
            try handle.seek(toOffset: 17)  // inside the version
            try handle.write(contentsOf: Data([0x77]))
        }
    }

    /// A file that holds another key under this key's name (copied there by hand, or a
    /// hash collision) is a miss, neither counted as damage nor removed, whether the other
    /// key is as long as this one (read in one pass) or not.
    @Test(arguments: ["k2", "key-two"] as [CacheKey])
    func aFileHoldingAnotherKeyIsAMissLeftInPlace(other: CacheKey) throws {
        let folder = DiskTestFolder()
        let disk = folder.backend()
        try disk.store(value: diskBytes("mine"), forKey: "k1")
        try disk.store(value: diskBytes("theirs"), forKey: other)
        let url = disk.cacheFileURL(forKey: "k1")
        try FileManager.default.removeItem(at: url)
        try FileManager.default.copyItem(at: disk.cacheFileURL(forKey: other), to: url)
        #expect(try disk.value(forKey: "k1") == nil)
        #expect(disk.corruptionCount == 0)
        #expect(FileManager.default.fileExists(atPath: url.path))
        #expect(try disk.value(forKey: other)?.bytes == diskBytes("theirs"))
    }

    /// An empty value is read whole too (the one-read path asks for no value bytes).
    @Test func anEmptyValueIsReadBack() throws {
        let folder = DiskTestFolder()
        let disk = folder.backend()
        try disk.store(value: [], flags: 3, forKey: "empty", version: 7)
        #expect(try folder.backend().value(forKey: "empty") == CacheEntry(bytes: [], flags: 3, version: 7))
    }

    @Test func aFifoWhereACacheFileBelongsIsAMissAndNeverBlocks() throws {
        let folder = DiskTestFolder()
        let disk = folder.backend()
        try disk.store(value: [1], forKey: "other")
        let url = disk.cacheFileURL(forKey: "fifo")
        #expect(mkfifo(url.path, 0o600) == 0)
        let fresh = folder.backend()
        let found = try withinTimeLimit { try fresh.value(forKey: "fifo") }
        #expect(found == .some(nil))
        #expect(try withinTimeLimit { fresh.isCached(forKey: "fifo") } == false)
        #expect(try withinTimeLimit { try fresh.touch(forKey: "fifo", expiration: .days(2)) } == .some(nil))
        #expect(try withinTimeLimit { try fresh.listKeys().keys.map(\.key) } == ["other"])
        #expect(fresh.foreignEntryCount >= 2)
        // Still a FIFO, never unlinked as "corrupt".
        var st = stat()
        #expect(lstat(url.path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFIFO)
    }

    @Test func aSymbolicLinkIsNeverFollowed() throws {
        let folder = DiskTestFolder()
        let disk = folder.backend()
        // An outside file that looks like a valid cache file for the key.
        let outside = folder.root.appendingPathComponent("outside-file")
        try disk.store(value: diskBytes("secret"), forKey: "k", expiration: .days(1))
        try FileManager.default.moveItem(at: disk.cacheFileURL(forKey: "k"), to: outside)
        let before = try #require(diskRawTimes(outside))
        #expect(symlink(outside.path, disk.cacheFileURL(forKey: "k").path) == 0)
        let fresh = folder.backend()
        // The link is refused (ELOOP from O_NOFOLLOW): a read error, never the outside value.
        let loop = CacheError.cannotLoadDataFromDisk(path: disk.cacheFileURL(forKey: "k").path, errno: ELOOP)
        #expect(throws: loop) { try fresh.value(forKey: "k") }
        #expect(throws: loop) { try fresh.value(forKey: "k", extendingExpiration: .expirationTime(.days(9))) }
        #expect(throws: loop) { try fresh.touch(forKey: "k", expiration: .days(5)) }
        #expect(!fresh.isCached(forKey: "k"))
        #expect(try fresh.listKeys().keys.isEmpty)
        let after = try #require(diskRawTimes(outside))
        #expect(after.mtime.tv_sec == before.mtime.tv_sec && after.mtime.tv_nsec == before.mtime.tv_nsec)
        #expect(after.atime.tv_sec == before.atime.tv_sec && after.atime.tv_nsec == before.atime.tv_nsec)
        #expect(FileManager.default.fileExists(atPath: outside.path))
        // A store renames a real file over the link; the outside file is untouched.
        try fresh.store(value: diskBytes("mine"), forKey: "k")
        #expect(try fresh.value(forKey: "k")?.bytes == diskBytes("mine"))
        #expect(try Data(contentsOf: outside).count == 48 + 1 + 6)
    }

    @Test func keyListingPagesThroughEveryLiveKeyOnceWithoutValues() throws {
        let folder = DiskTestFolder()
        let disk = folder.backend()
        var expected: [CacheKey: UInt64] = [:]
        for i in 0..<25 {
            let key = CacheKey((i % 2 == 0 ? "user:" : "item:") + String(i) + String(repeating: "x", count: i * 20))  // some keys > 208 bytes
            try disk.store(value: [UInt8](repeating: UInt8(i), count: i), forKey: key, expiration: .days(1), version: UInt64(100 + i))
            expected[key] = UInt64(100 + i)
        }
        try disk.store(value: [1], forKey: "gone", expiration: .seconds(5), referenceDate: diskT0)
        folder.clock.advance(by: 10)  // "gone" has expired

        let fresh = folder.backend()
        var seen: [CacheKey: UInt64] = [:]
        var cursor: String?
        var pages = 0
        repeat {
            let page = try fresh.listKeys(after: cursor, limit: 4)
            for listed in page.keys {
                #expect(seen[listed.key] == nil, "listed twice: \(listed.key)")
                seen[listed.key] = listed.version
            }
            cursor = page.nextCursor
            pages += 1
        } while cursor != nil && pages < 100
        #expect(seen == expected)
        #expect(pages == 7)  // 26 files, 4 per page

        var users = 0
        cursor = nil
        repeat {
            let page = try fresh.listKeys(prefix: "user:", after: cursor, limit: 10)
            #expect(page.keys.allSatisfy { $0.key.hasPrefix("user:") })
            users += page.keys.count
            cursor = page.nextCursor
        } while cursor != nil
        #expect(users == 13)
    }

    @Test func versionClockIsStrictlyIncreasingAndFollowsTheWallClock() {
        let clock = ManualClock(Date(timeIntervalSince1970: 1_000))
        let versions = VersionClock(clock: clock)
        let a = versions.next(), b = versions.next()
        #expect(a == 1_000_000_000 && b == a + 1)
        clock.advance(by: 1)
        #expect(versions.next() == 1_001_000_000)
        clock.advance(by: -100)  // stepped back: still increasing
        #expect(versions.next() == 1_001_000_001)
        versions.observe(5_000_000_000)
        #expect(versions.next() == 5_000_000_001)
    }

    /// A group's reserved versions are consecutive, above every earlier one, and every
    /// version handed out after the reservation lies above all of them, used or not.
    @Test func reservedVersionsFollowEveryEarlierOneAndPrecedeEveryLaterOne() {
        let clock = ManualClock(Date(timeIntervalSince1970: 1_000))
        let versions = VersionClock(clock: clock)
        let before = versions.next()
        var run = versions.reserve(3)
        let after = versions.next()
        let taken = [run.take(), run.take()]
        #expect(taken == [before + 1, before + 2])
        #expect(after == before + 4)
        clock.advance(by: 2)
        var later = versions.reserve(2)
        #expect(later.take() == 1_002_000_000)
        #expect(versions.current == 1_002_000_001)
    }
}
