// The disk tier's rewrite in place (DiskStorage+InPlace.swift): the inode stays, the new
// value and times read back, a shorter value cuts the file, a missing file or folder is
// created, and anything at the name that is not a lone format-2 file (a FIFO, a symbolic
// link, a hard-linked file, a format-1 file) is replaced whole, never written through.

import Foundation
import Testing

@testable import HalcyonCache
#if canImport(Glibc)
import Glibc
#endif

/// The inode and size at `url` (not following a link), or nil when nothing is there.
func diskInode(_ url: URL) -> (inode: UInt64, size: Int, isRegular: Bool, links: Int)? {
    var st = stat()
    guard lstat(url.path, &st) == 0 else { return nil }
    return (UInt64(st.st_ino), Int(st.st_size), (st.st_mode & S_IFMT) == S_IFREG, Int(st.st_nlink))
}

@Suite("DiskStorage in-place rewrite")
struct DiskStorageInPlaceTests {
    static func rewrite(
        _ disk: DiskStorage.Backend, _ key: CacheKey, _ value: String, flags: UInt32 = 0,
        expiration: StorageExpiration = .seconds(100), version: UInt64 = 2
    ) throws -> DiskStorage.FileMeta? {
        try disk.store(
            value: diskBytes(value), flags: flags, forKey: key, expiration: expiration, forcedExtension: nil,
            referenceDate: nil, version: version, replacing: .inPlace)
    }

    @Test(arguments: [false, true])
    func aRewriteKeepsTheInodeAndReadsBackTheNewValueAndTimes(synchronous: Bool) throws {
        let folder = DiskTestFolder()
        let disk = folder.backend { $0.synchronousWrites = synchronous }
        try disk.store(value: diskBytes("the first, longer value"), forKey: "k", expiration: .seconds(60), version: 1)
        let url = disk.cacheFileURL(forKey: "k")
        let before = try #require(diskInode(url))

        folder.clock.advance(by: 7)
        let meta = try #require(try Self.rewrite(disk, "k", "second", flags: 9, expiration: .seconds(100), version: 2))
        let after = try #require(diskInode(url))
        #expect(after.inode == before.inode)
        // Shorter: cut to the new length (48-byte header, 1-byte key, 6-byte value).
        #expect(after.size == 48 + 1 + 6)
        #expect(UInt64(after.size) == meta.fileSize)

        let read = try #require(try disk.valueAndMeta(forKey: "k", extendingExpiration: .none))
        #expect(read.entry == CacheEntry(bytes: diskBytes("second"), flags: 9, version: 2))
        let now = folder.clock.now()
        #expect(read.meta.expiration == now.addingTimeInterval(100))
        #expect(abs(read.meta.lastAccess.timeIntervalSince(now)) < 0.001)
        #expect(disk.corruptionCount == 0)

        // And longer again: the file grows in place.
        _ = try Self.rewrite(disk, "k", "a third value, longer than both", version: 3)
        #expect(diskInode(url)?.inode == before.inode)
        #expect(try disk.value(forKey: "k", extendingExpiration: .none)?.bytes == diskBytes("a third value, longer than both"))
    }

    @Test func aMissingFileIsCreatedAtItsNameAndAMissingFolderIsRecreated() throws {
        let folder = DiskTestFolder()
        let disk = folder.backend()
        _ = try Self.rewrite(disk, "new", "fresh")
        #expect(disk.isCached(forKey: "new"))
        #expect(try disk.value(forKey: "new")?.bytes == diskBytes("fresh"))

        try FileManager.default.removeItem(at: disk.directoryURL)
        _ = try Self.rewrite(disk, "again", "after the folder went")
        #expect(try disk.value(forKey: "again")?.bytes == diskBytes("after the folder went"))
        // No temporary file was left behind.
        let names = try FileManager.default.contentsOfDirectory(atPath: disk.directoryURL.path)
        #expect(names.allSatisfy { !$0.hasPrefix(DiskStorage.temporaryPrefix) })
    }

    @Test func aFIFOAtTheNameIsReplacedWithoutBlocking() throws {
        let folder = DiskTestFolder()
        let disk = folder.backend()
        let url = disk.cacheFileURL(forKey: "k")
        #expect(mkfifo(url.path, 0o600) == 0)
        disk.knownNames.insert(url.lastPathComponent)
        _ = try Self.rewrite(disk, "k", "value")
        #expect(diskInode(url)?.isRegular == true)
        #expect(try disk.value(forKey: "k")?.bytes == diskBytes("value"))
    }

    @Test func aSymbolicLinkAtTheNameIsReplacedAndItsTargetLeftAlone() throws {
        let folder = DiskTestFolder()
        let disk = folder.backend()
        let outside = folder.root.appendingPathComponent("outside")
        let original = diskBytes("HCY2 pretends to be a cache file, but lives outside the folder")
        try Data(original).write(to: outside)
        let url = disk.cacheFileURL(forKey: "k")
        #expect(symlink(outside.path, url.path) == 0)
        disk.knownNames.insert(url.lastPathComponent)

        _ = try Self.rewrite(disk, "k", "value")
        #expect(diskInode(url)?.isRegular == true)
        #expect(try Array(Data(contentsOf: outside)) == original)
        #expect(try disk.value(forKey: "k")?.bytes == diskBytes("value"))
    }

    @Test func aHardLinkedFileIsReplacedAndTheOtherLinkKeepsTheOldValue() throws {
        let folder = DiskTestFolder()
        let disk = folder.backend()
        try disk.store(value: diskBytes("old"), forKey: "k", version: 1)
        let url = disk.cacheFileURL(forKey: "k")
        let outside = folder.root.appendingPathComponent("linked")
        #expect(link(url.path, outside.path) == 0)
        let original = try Data(contentsOf: outside)
        let before = try #require(diskInode(url))
        #expect(before.links == 2)

        _ = try Self.rewrite(disk, "k", "new")
        let after = try #require(diskInode(url))
        #expect(after.inode != before.inode)
        #expect(after.links == 1)
        #expect(try Data(contentsOf: outside) == original)
        #expect(try disk.value(forKey: "k")?.bytes == diskBytes("new"))
    }

    @Test func aFormatOneFileIsReplacedNotRewritten() throws {
        let folder = DiskTestFolder()
        let disk = folder.backend()
        let url = disk.cacheFileURL(forKey: "k")
        try Data(DiskFileHeader.encode(flags: 3) + diskBytes("an old format-1 value")).write(to: url)
        disk.knownNames.insert(url.lastPathComponent)
        let before = try #require(diskInode(url))
        #expect(try disk.value(forKey: "k")?.bytes == diskBytes("an old format-1 value"))

        _ = try Self.rewrite(disk, "k", "new")
        #expect(diskInode(url)?.inode != before.inode)
        #expect(try disk.value(forKey: "k")?.bytes == diskBytes("new"))
    }
}
