// The disk tier's per-key API: store, value, valueAndMeta, isCached, meta, touch,
// remove, every expiration and extending kind, names, keys, persistence, and the
// folder failure modes.

import Foundation
import HalcyonSupport
import Testing
@testable import HalcyonCache
#if canImport(Glibc)
import Glibc
#endif

@Suite("DiskStorage", .timeLimit(.minutes(1)))
struct DiskStorageTests {
    /// File names are the SHA-256 of the key in lowercase hex, and must never change: an
    /// upgraded daemon has to find the files the old one wrote. Known-answer vectors
    /// (FIPS 180-2), and a key that is not ASCII (`sha256sum` of its UTF-8).
    @Test func hashedFileNamesAreStable() {
        #expect(DiskStorage.sha256Hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(DiskStorage.sha256Hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(DiskStorage.sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")
            == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(DiskStorage.sha256Hex("clé/ключ") == "026b95adf695ea20c93adc6677ac578a2504ae8a45bea3ba2e49232daccb8838")
    }

    @Test func storeAndLoadKeepsBytesAndFlags() throws {
        let folder = DiskTestFolder()
        let disk = folder.backend()
        let value = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let meta = try #require(try disk.store(value: value, flags: 0xDEAD_BEEF, forKey: "k"))
        #expect(meta.size == 10_000)
        #expect(meta.flags == 0xDEAD_BEEF)
        #expect(meta.url == disk.cacheFileURL(forKey: "k"))
        #expect(try disk.value(forKey: "k") == CacheEntry(bytes: value, flags: 0xDEAD_BEEF))
        #expect(try disk.value(forKey: "other") == nil)
        // Empty values are values.
        try disk.store(value: [], flags: 7, forKey: "empty")
        #expect(try disk.value(forKey: "empty") == CacheEntry(bytes: [], flags: 7))
        // File = 48-byte header + key + value.
        let attributes = try FileManager.default.attributesOfItem(atPath: meta.url.path)
        #expect((attributes[.size] as? NSNumber)?.intValue == 48 + 1 + 10_000)
        #expect(meta.fileSize == 48 + 1 + 10_000)
    }

    /// A write-back gives the file the expiration it names, to the second, whatever the
    /// instant it was counted from: a record rebuilt from the journal at start carries
    /// "what is left" as its TTL from a fractional now, which must not round up to the next
    /// second (it did: the file then outlived the lifetime every reply had reported).
    @Test func writeBackKeepsTheExactExpiration() throws {
        let folder = DiskTestFolder()
        let disk = folder.backend()
        try disk.store(value: [1], forKey: "k", expiration: .seconds(1000), referenceDate: diskT0)
        let expiresAt = diskT0.addingTimeInterval(2000)
        for fraction in [0.1234567, 0.9999996, 0.5000004, 0.0000003, 0.3141593, 0.7777777] {
            let now = diskT0.addingTimeInterval(100 + fraction)
            let record = MemoryStorage.WriteBack(
                key: "k", forcedExtension: nil, expiresAt: expiresAt,
                timeToLive: expiresAt.timeIntervalSince(now), extendedAt: now)
            #expect(try disk.writeBack(record))
            let meta = try #require(try disk.valueAndMeta(forKey: "k", referenceDate: now, extendingExpiration: .none)?.meta)
            #expect(meta.expiration == expiresAt, "counted from +\(fraction) s")
        }
    }

    @Test func synchronousWritesStoreTheSameWay() throws {
        let folder = DiskTestFolder()  // keeps the folder until the test ends
        let disk = folder.backend { $0.synchronousWrites = true }
        let meta = try #require(try disk.store(value: diskBytes("durable"), flags: 5, forKey: "k", expiration: .seconds(30), referenceDate: diskT0))
        #expect(meta.expiration == diskT0.addingTimeInterval(30))
        #expect(try disk.valueAndMeta(forKey: "k", referenceDate: diskT0, extendingExpiration: .none)?.entry
                == CacheEntry(bytes: diskBytes("durable"), flags: 5))
    }

    @Test func defaultRootIsTheXDGCacheFolder() {
        // The process environment is shared by parallel tests, so this only checks the shape.
        let root = DiskStorage.Config().resolvedRoot
        #expect(root.path.hasPrefix("/"))
        #expect(root.lastPathComponent == "halcyon")
        if let xdg = ProcessInfo.processInfo.environment["XDG_CACHE_HOME"], xdg.hasPrefix("/") {
            #expect(root.deletingLastPathComponent().standardizedFileURL.path == URL(fileURLWithPath: xdg).standardizedFileURL.path)
        } else {
            #expect(root.deletingLastPathComponent().lastPathComponent == ".cache")
        }
        let config = DiskStorage.Config()
        #expect(config.name == "default" && config.sizeLimit == 0 && config.expiration == .days(7))
        #expect(config.usesHashedFileName && !config.autoExtAfterHashedFileName && !config.synchronousWrites)
        #expect(config.pathExtension == nil && config.directory == nil)
    }

    @Test func overwriteReplacesValueAndFlags() throws {
        let folder = DiskTestFolder()  // keeps the folder until the test ends
        let disk = folder.backend()
        try disk.store(value: diskBytes("one"), flags: 1, forKey: "k")
        try disk.store(value: diskBytes("two!"), flags: 2, forKey: "k")
        #expect(try disk.value(forKey: "k") == CacheEntry(bytes: diskBytes("two!"), flags: 2))
        #expect(try disk.count() == 1)
    }

    @Test func expirationKindsAndRoundingUp() throws {
        let folder = DiskTestFolder()
        let disk = folder.backend()
        let now = diskT0.addingTimeInterval(0.25)
        let cases: [(StorageExpiration, Date)] = [
            (.seconds(10), Date(timeIntervalSince1970: 1_700_000_011)),       // 10.25 rounds up to 11
            (.seconds(0.5), Date(timeIntervalSince1970: 1_700_000_001)),
            (.days(2), Date(timeIntervalSince1970: 1_700_172_801)),
            (.date(Date(timeIntervalSince1970: 1_800_000_000.1)), Date(timeIntervalSince1970: 1_800_000_001)),
            (.date(Date(timeIntervalSince1970: 1_800_000_000)), Date(timeIntervalSince1970: 1_800_000_000)),
            (.never, .distantFuture),
        ]
        for (index, (expiration, expected)) in cases.enumerated() {
            let meta = try #require(try disk.store(value: [1], forKey: "k\(index)", expiration: expiration, referenceDate: now))
            #expect(meta.expiration == expected, "\(expiration)")
            #expect(try disk.meta(forKey: "k\(index)", referenceDate: now)?.expiration == expected)
            if expected != .distantFuture {
                let mtime = try #require(diskRawTimes(meta.url)).mtime
                // Whole seconds; the nanoseconds mark an absolute lifetime (`.date`).
                let mark = expiration.isAbsolute ? Int(FileTimes.absoluteMarkNanos) : 0
                #expect(mtime.tv_sec == Int(expected.timeIntervalSince1970) && mtime.tv_nsec == mark)
                // Valid until the instant, expired at it.
                #expect(disk.isCached(forKey: "k\(index)", referenceDate: expected.addingTimeInterval(-0.001)))
                #expect(!disk.isCached(forKey: "k\(index)", referenceDate: expected))
                #expect(try disk.value(forKey: "k\(index)", referenceDate: expected, actuallyLoad: true,
                                       extendingExpiration: .none, forcedExtension: nil) == nil)
            } else {
                #expect(disk.isCached(forKey: "k\(index)", referenceDate: Date(timeIntervalSince1970: 7_000_000_000)))
            }
        }
        // The default expiration is the config's (7 days).
        let meta = try #require(try disk.store(value: [1], forKey: "default", referenceDate: diskT0))
        #expect(meta.expiration == diskT0.addingTimeInterval(7 * 86_400))
        // Far beyond what ext4 stores: kept as never.
        let far = try #require(try disk.store(value: [1], forKey: "far", expiration: .days(10_000_000), referenceDate: diskT0))
        #expect(far.expiration == .distantFuture)
    }

    @Test func storingAlreadyExpiredStoresNothing() throws {
        let folder = DiskTestFolder()  // keeps the folder until the test ends
        let disk = folder.backend()
        for expiration in [StorageExpiration.expired, .seconds(0), .seconds(-5), .days(0), .date(diskT0.addingTimeInterval(-1)), .date(diskT0)] {
            #expect(try disk.store(value: [1], forKey: "k", expiration: expiration, referenceDate: diskT0) == nil)
        }
        #expect(try disk.count() == 0)
        #expect(!disk.isCached(forKey: "k"))
    }

    @Test func slidingCacheTimeKeepsTheOriginalTimeToLive() throws {
        let folder = DiskTestFolder()
        let disk = folder.backend()
        try disk.store(value: diskBytes("v"), forKey: "k", expiration: .seconds(100), referenceDate: diskT0)
        let read = try #require(try disk.value(forKey: "k", referenceDate: diskT0.addingTimeInterval(60), actuallyLoad: true,
                                               extendingExpiration: .cacheTime, forcedExtension: nil))
        #expect(read.entry?.bytes == diskBytes("v"))
        #expect(read.meta.expiration == diskT0.addingTimeInterval(160))
        #expect(read.meta.lastAccess == diskT0.addingTimeInterval(60))
        // Another thread's later lookup sees the extension (it lives on the inode).
        let seen = try Thread.diskRunAndWait { try disk.meta(forKey: "k", referenceDate: diskT0.addingTimeInterval(150)) }
        #expect(seen?.expiration == diskT0.addingTimeInterval(160))
        #expect(disk.isCached(forKey: "k", referenceDate: diskT0.addingTimeInterval(159)))

        // Fractional TTL and fractional instants: many slides, no drift.
        try disk.store(value: diskBytes("v"), forKey: "f", expiration: .seconds(2.5), referenceDate: diskT0.addingTimeInterval(0.3))
        var now = diskT0.addingTimeInterval(0.3)
        for _ in 0..<50 {
            now = now.addingTimeInterval(1.37)
            let meta = try #require(try disk.valueAndMeta(forKey: "f", referenceDate: now, extendingExpiration: .cacheTime)).meta
            // Never earlier than now + 2.5, never more than a second of rounding later.
            #expect(meta.expiration >= now.addingTimeInterval(2.5))
            #expect(meta.expiration < now.addingTimeInterval(3.5))
            #expect(meta.expiration.timeIntervalSince1970 == meta.expiration.timeIntervalSince1970.rounded())
        }
        // `never` stays never and records the access.
        try disk.store(value: diskBytes("v"), forKey: "n", expiration: .never, referenceDate: diskT0)
        let n = try #require(try disk.valueAndMeta(forKey: "n", referenceDate: diskT0.addingTimeInterval(5))).meta
        #expect(n.expiration == .distantFuture)
        #expect(n.lastAccess == diskT0.addingTimeInterval(5))
    }

    @Test func extendingNoneAndExpirationTime() throws {
        let folder = DiskTestFolder()  // keeps the folder until the test ends
        let disk = folder.backend()
        try disk.store(value: diskBytes("v"), forKey: "k", expiration: .seconds(100), referenceDate: diskT0)
        let untouched = try #require(try disk.valueAndMeta(forKey: "k", referenceDate: diskT0.addingTimeInterval(10), extendingExpiration: .none))
        #expect(untouched.meta.expiration == diskT0.addingTimeInterval(100))
        #expect(untouched.meta.lastAccess == diskT0)
        let reset = try #require(try disk.valueAndMeta(forKey: "k", referenceDate: diskT0.addingTimeInterval(20),
                                                       extendingExpiration: .expirationTime(.seconds(1000))))
        #expect(reset.meta.expiration == diskT0.addingTimeInterval(1020))
        #expect(try disk.meta(forKey: "k", referenceDate: diskT0.addingTimeInterval(30))?.expiration == diskT0.addingTimeInterval(1020))
        let never = try #require(try disk.valueAndMeta(forKey: "k", referenceDate: diskT0.addingTimeInterval(30),
                                                       extendingExpiration: .expirationTime(.never)))
        #expect(never.meta.expiration == .distantFuture)
        let toDate = try #require(try disk.valueAndMeta(forKey: "k", referenceDate: diskT0.addingTimeInterval(30),
                                                        extendingExpiration: .expirationTime(.date(diskT0.addingTimeInterval(99.5)))))
        #expect(toDate.meta.expiration == diskT0.addingTimeInterval(100))
        // Reading with an expiration that is already over returns the value, then it is gone.
        let last = try #require(try disk.valueAndMeta(forKey: "k", referenceDate: diskT0.addingTimeInterval(40),
                                                      extendingExpiration: .expirationTime(.expired)))
        #expect(last.entry.bytes == diskBytes("v"))
        #expect(!disk.isCached(forKey: "k", referenceDate: diskT0.addingTimeInterval(40)))
        #expect(try disk.removeExpiredValues(referenceDate: diskT0.addingTimeInterval(40)).count == 1)
    }

    @Test func isCachedAndMetaNeverLoadOrExtend() throws {
        let folder = DiskTestFolder()
        let disk = folder.backend()
        let stored = try #require(try disk.store(value: diskBytes("abc"), flags: 9, forKey: "k", expiration: .seconds(50), referenceDate: diskT0))
        let before = try #require(diskRawTimes(stored.url))
        #expect(disk.isCached(forKey: "k", referenceDate: diskT0.addingTimeInterval(40)))
        let meta = try #require(try disk.meta(forKey: "k", referenceDate: diskT0.addingTimeInterval(40)))
        #expect(meta == stored)
        let after = try #require(diskRawTimes(stored.url))
        #expect(before.atime.tv_sec == after.atime.tv_sec && before.atime.tv_nsec == after.atime.tv_nsec)
        #expect(before.mtime.tv_sec == after.mtime.tv_sec)
        #expect(try disk.meta(forKey: "k", referenceDate: diskT0.addingTimeInterval(50)) == nil)
        #expect(try disk.meta(forKey: "missing") == nil)
    }

    @Test func readsDoNotLetTheKernelMoveAtime() throws {
        // ext4 relatime updates atime on read when atime < mtime, which is always so with
        // a future expiration in mtime. O_NOATIME must prevent it.
        let folder = DiskTestFolder()
        let disk = folder.backend()
        let stored = try #require(try disk.store(value: diskBytes("abc"), forKey: "k", expiration: .days(1), referenceDate: diskT0))
        for _ in 0..<3 {
            _ = try disk.value(forKey: "k", referenceDate: diskT0, actuallyLoad: true, extendingExpiration: .none, forcedExtension: nil)
        }
        let times = try #require(diskRawTimes(stored.url))
        #expect(times.atime.tv_sec == 1_700_000_000)
        #expect(times.mtime.tv_sec == 1_700_086_400)
        // Control: an ordinary read does move it on this file system (relatime); if not,
        // the mount is noatime and the test above proves less, but still holds.
        _ = try Data(contentsOf: stored.url)
        let control = try #require(diskRawTimes(stored.url))
        if control.atime.tv_sec == 1_700_000_000 {
            print("note: this file system did not update atime on read (noatime mount?)")
        }
    }

    @Test func touchSetsANewExpirationFromNow() throws {
        let folder = DiskTestFolder()
        let disk = folder.backend()
        try disk.store(value: diskBytes("v"), flags: 3, forKey: "k", expiration: .seconds(10), referenceDate: diskT0)
        folder.clock.advance(by: 5)
        let touched = try #require(try disk.touch(forKey: "k", expiration: .seconds(100)))
        #expect(touched.expiration == diskT0.addingTimeInterval(105))
        #expect(touched.lastAccess == diskT0.addingTimeInterval(5))
        #expect(touched.flags == 3 && touched.size == 1)
        #expect(try disk.meta(forKey: "k") == touched)
        // Default: the config's expiration.
        let byDefault = try #require(try disk.touch(forKey: "k"))
        #expect(byDefault.expiration == diskT0.addingTimeInterval(5 + 7 * 86_400))
        // Misses: absent, or expired already.
        #expect(try disk.touch(forKey: "absent") == nil)
        try disk.store(value: diskBytes("v"), forKey: "old", expiration: .seconds(1), referenceDate: diskT0)
        #expect(try disk.touch(forKey: "old", expiration: .never) == nil)
        // .expired removes.
        let removed = try #require(try disk.touch(forKey: "k", expiration: .expired))
        #expect(removed.expiration == .distantPast)
        #expect(!FileManager.default.fileExists(atPath: removed.url.path))
        #expect(try disk.value(forKey: "k") == nil)
    }

    @Test func removeAndRemoveAll() throws {
        let folder = DiskTestFolder()  // keeps the folder until the test ends
        let disk = folder.backend()
        for i in 0..<5 { try disk.store(value: [UInt8(i)], forKey: "k\(i)") }
        #expect(try disk.remove(forKey: "k0"))
        #expect(try !disk.remove(forKey: "k0"))
        #expect(try !disk.remove(forKey: "never-stored"))
        #expect(try disk.value(forKey: "k0") == nil)
        #expect(try disk.count() == 4)
        #expect(try disk.removeAll() == 4)
        #expect(try disk.count() == 0)
        #expect(try disk.value(forKey: "k1") == nil)
        try disk.store(value: [1], forKey: "k1")
        #expect(try disk.value(forKey: "k1")?.bytes == [1])
    }

    @Test func persistsAcrossANewBackend() throws {
        let folder = DiskTestFolder()
        do {
            let disk = folder.backend()
            try disk.store(value: diskBytes("a"), flags: 11, forKey: "a", expiration: .seconds(100), referenceDate: diskT0)
            try disk.store(value: diskBytes("bb"), flags: 22, forKey: "b", expiration: .never, referenceDate: diskT0.addingTimeInterval(1))
            try disk.store(value: diskBytes("ccc"), flags: 33, forKey: "c", expiration: .days(1), referenceDate: diskT0.addingTimeInterval(2))
            // Reading a makes it the most recently used.
            _ = try disk.valueAndMeta(forKey: "a", referenceDate: diskT0.addingTimeInterval(3), extendingExpiration: .cacheTime)
        }
        let again = folder.backend()
        #expect(try again.value(forKey: "a", referenceDate: diskT0.addingTimeInterval(4), actuallyLoad: true,
                                extendingExpiration: .none, forcedExtension: nil)?.entry == CacheEntry(bytes: diskBytes("a"), flags: 11))
        let a = try #require(try again.meta(forKey: "a", referenceDate: diskT0.addingTimeInterval(4)))
        let b = try #require(try again.meta(forKey: "b", referenceDate: diskT0.addingTimeInterval(4)))
        let c = try #require(try again.meta(forKey: "c", referenceDate: diskT0.addingTimeInterval(4)))
        #expect(a.expiration == diskT0.addingTimeInterval(103) && a.flags == 11)
        #expect(b.expiration == .distantFuture && b.flags == 22 && b.size == 2)
        #expect(c.expiration == diskT0.addingTimeInterval(2 + 86_400) && c.flags == 33)
        #expect(b.lastAccess < c.lastAccess && c.lastAccess < a.lastAccess)
        #expect(try again.count() == 3)
    }

    @Test func hashedAndPlainNamesAndExtensions() throws {
        let folder = DiskTestFolder()
        let hashed = folder.backend(name: "hashed")
        // SHA-256("abc")
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        #expect(hashed.cacheFileURL(forKey: "abc").lastPathComponent == abc)
        #expect(hashed.cacheFileURL(forKey: "abc", forcedExtension: "png").lastPathComponent == abc + ".png")
        #expect(hashed.cacheFileURL(forKey: "a/b.jpg").lastPathComponent == DiskStorage.sha256Hex("a/b.jpg"))
        #expect(hashed.cacheFileURL(forKey: "abc").deletingLastPathComponent().standardizedFileURL
                == folder.root.appendingPathComponent("hashed").standardizedFileURL)

        let auto = folder.backend(name: "auto") { $0.autoExtAfterHashedFileName = true }
        #expect(auto.cacheFileURL(forKey: "https://x.org/a/b.jpg?size=2").lastPathComponent == DiskStorage.sha256Hex("https://x.org/a/b.jpg?size=2") + ".jpg")
        #expect(auto.cacheFileURL(forKey: "noext").lastPathComponent == DiskStorage.sha256Hex("noext"))
        #expect(auto.cacheFileURL(forKey: "x.jpg", forcedExtension: "gif").pathExtension == "gif")

        let withExt = folder.backend(name: "ext") { $0.pathExtension = "bin" }
        try withExt.store(value: [1], forKey: "k")
        #expect(withExt.cacheFileURL(forKey: "k").pathExtension == "bin")
        #expect(FileManager.default.fileExists(atPath: withExt.cacheFileURL(forKey: "k").path))
        // A forced extension names a different file.
        try withExt.store(value: [2], forKey: "k", forcedExtension: "dat")
        #expect(try withExt.value(forKey: "k")?.bytes == [1])
        #expect(try withExt.value(forKey: "k", forcedExtension: "dat")?.bytes == [2])

        let plain = folder.backend(name: "plain") { $0.usesHashedFileName = false }
        try plain.store(value: [3], forKey: "my-key.txt")
        #expect(plain.cacheFileURL(forKey: "my-key.txt").lastPathComponent == "my-key.txt")
        #expect(try plain.value(forKey: "my-key.txt")?.bytes == [3])
        #expect(plain.cacheFileURL(forKey: "k", forcedExtension: "e").lastPathComponent == "k.e")
    }

    @Test func invalidKeysWithoutHashing() throws {
        let folder = DiskTestFolder()
        let plain = folder.backend { $0.usesHashedFileName = false }
        // ".tmp-\u{301}x" starts with the temporary prefix's bytes, though not with its
        // characters: the folder scan would take its file for debris.
        let bad: [CacheKey] = ["", ".", "..", "a/b", "/abs", "nul\u{0}x", CacheKey(String(repeating: "x", count: 256)), ".tmp-sneaky",
                               ".tmp-\u{301}x"]
        for key in bad {
            #expect(throws: CacheError.invalidKey(key: key)) { try plain.validate(key: key) }
            #expect(throws: CacheError.invalidKey(key: key)) { try plain.store(value: [1], forKey: key) }
            #expect(throws: CacheError.invalidKey(key: key)) { try plain.value(forKey: key) }
            #expect(throws: CacheError.invalidKey(key: key)) { try plain.remove(forKey: key) }
            #expect(!plain.isCached(forKey: key))
        }
        try plain.validate(key: CacheKey(String(repeating: "x", count: 255)))
        try plain.validate(key: "..a")
        // An extension that makes the name too long or unsafe is refused too.
        #expect(throws: CacheError.invalidKey(key: "k")) { try plain.store(value: [1], forKey: "k", forcedExtension: "a/b") }
        // With hashing every key is fine.
        let hashed = folder.backend(name: "hashed")
        for key in bad {
            try hashed.validate(key: key)
            try hashed.store(value: [9], forKey: key)
            #expect(try hashed.value(forKey: key)?.bytes == [9])
        }
    }

    @Test func folderDeletedWhileRunningIsRecreatedByTheNextStore() throws {
        let folder = DiskTestFolder()
        let disk = folder.backend()
        try disk.store(value: [1], forKey: "a")
        try FileManager.default.removeItem(at: disk.directoryURL)
        #expect(try disk.value(forKey: "a") == nil)
        #expect(try disk.count() == 0)
        #expect(try disk.totalSize() == 0)
        #expect(try disk.removeAll() == 0)
        #expect(try disk.store(value: [2], forKey: "b") != nil)
        #expect(try disk.value(forKey: "b")?.bytes == [2])
        // Also when the whole root is gone.
        try FileManager.default.removeItem(at: folder.root)
        try disk.store(value: [3], forKey: "c")
        #expect(try disk.value(forKey: "c")?.bytes == [3])
    }

    @Test func notReadyWhenAFileIsInThePlaceOfTheFolder() throws {
        let folder = DiskTestFolder()
        try FileManager.default.createDirectory(at: folder.root, withIntermediateDirectories: true)
        try Data("not a folder".utf8).write(to: folder.root.appendingPathComponent("blocked"))
        let disk = DiskStorage.Backend(config: folder.config(name: "blocked"))
        disk.waitForInitialScan()
        #expect(!disk.isReady)
        try expectNotReady(disk)
        // A file in the place of a parent folder.
        let nested = DiskStorage.Backend(config: folder.config(name: "blocked/inner"))
        #expect(!nested.isReady)
        try expectNotReady(nested)
    }

    @Test func notReadyWhenTheFolderCannotBeWritten() throws {
        // Tests run as root, which chmod 000 does not stop; an immutable folder does.
        let folder = DiskTestFolder()
        let parent = folder.root.appendingPathComponent("immutable")
        try FileManager.default.createDirectory(at: parent, withIntermediateDirectories: true)
        guard diskRunChattr("+i", parent.path) else {
            print("skipped: chattr +i is not available here, cannot make a folder unwritable for root")
            return
        }
        defer { _ = diskRunChattr("-i", parent.path) }
        let missing = DiskStorage.Backend(config: folder.config(name: "immutable/cache"))
        #expect(!missing.isReady)
        try expectNotReady(missing)
        #expect(throws: CacheError.diskStorageIsNotReady(path: missing.directoryPath, errno: EPERM)) {
            try missing.store(value: [1], forKey: "k")
        }
        // The folder itself exists but cannot be written.
        let existing = DiskStorage.Backend(config: DiskStorage.Config(name: "immutable", directory: folder.root))
        #expect(!existing.isReady)
        try expectNotReady(existing)
    }

    @Test func writeFailuresCarryTheirStageAndErrno() throws {
        // An immutable folder or file (chattr +i) makes each stage fail even for root.
        let folder = DiskTestFolder()
        let disk = folder.backend()
        try disk.store(value: [1], flags: 2, forKey: "kept", expiration: .seconds(100))
        let kept = disk.cacheFileURL(forKey: "kept")
        guard diskRunChattr("+i", kept.path) else {
            print("skipped: chattr +i is not available here")
            return
        }
        defer { _ = diskRunChattr("-i", kept.path) }
        #expect(throws: CacheError.cannotSetCacheFileAttribute(path: kept.path, errno: EPERM)) {
            try disk.touch(forKey: "kept", expiration: .seconds(5))
        }
        // A read still answers when its sliding extension cannot be written.
        #expect(try disk.value(forKey: "kept") == CacheEntry(bytes: [1], flags: 2))

        #expect(diskRunChattr("+i", disk.directoryPath))
        defer { _ = diskRunChattr("-i", disk.directoryPath) }
        #expect(throws: CacheError.cannotCreateCacheFile(path: disk.cacheFileURL(forKey: "new").path, errno: EPERM)) {
            try disk.store(value: [1], forKey: "new")
        }
        #expect(throws: CacheError.cannotRemoveCacheFile(path: kept.path, errno: EPERM)) {
            try disk.remove(forKey: "kept")
        }
        // Nothing half-done is left behind, and the value is intact.
        #expect(try disk.value(forKey: "kept")?.bytes == [1])
        let names = try FileManager.default.contentsOfDirectory(atPath: disk.directoryPath)
        #expect(names == [kept.lastPathComponent])
    }

    private func expectNotReady(_ disk: DiskStorage.Backend) throws {
        func isNotReady(_ body: () throws -> Void) -> Bool {
            do { try body(); return false } catch {
                if case .diskStorageIsNotReady(let path, let code) = error as? CacheError { return path == disk.directoryPath && code != 0 }
                return false
            }
        }
        #expect(isNotReady { try disk.store(value: [1], forKey: "k") })
        #expect(isNotReady { _ = try disk.value(forKey: "k") })
        #expect(isNotReady { _ = try disk.valueAndMeta(forKey: "k") })
        #expect(isNotReady { _ = try disk.meta(forKey: "k") })
        #expect(isNotReady { _ = try disk.touch(forKey: "k") })
        #expect(isNotReady { try disk.remove(forKey: "k") })
        #expect(isNotReady { try disk.removeAll() })
        #expect(isNotReady { try disk.removeExpiredValues() })
        #expect(isNotReady { try disk.removeSizeExceededValues() })
        #expect(isNotReady { _ = try disk.totalSize() })
        #expect(isNotReady { _ = try disk.count() })
        #expect(!disk.isCached(forKey: "k"))
    }
}

/// Runs `chattr flag path`; false when chattr is missing or refuses.
func diskRunChattr(_ flag: String, _ path: String) -> Bool {
    guard FileManager.default.isExecutableFile(atPath: "/usr/bin/chattr") else { return false }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/chattr")
    process.arguments = [flag, path]
    process.standardError = FileHandle.nullDevice
    do { try process.run() } catch { return false }
    process.waitUntilExit()
    return process.terminationStatus == 0
}

extension Thread {
    /// Runs `body` on a new thread and waits for its result.
    static func diskRunAndWait<T: Sendable>(_ body: @escaping @Sendable () throws -> T) throws -> T {
        let box = Locked<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            let result = Result { try body() }
            box.withLock { $0 = result }
            done.signal()
        }
        thread.start()
        done.wait()
        return try box.withLock { $0 }!.get()
    }
}
