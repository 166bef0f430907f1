// The maybeCached shortcut: misses answered without touching the disk, a start-up scan
// that does not block requests, and mutations during the scan not lost.

import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import HalcyonCache

@Suite("DiskStorage maybeCached", .timeLimit(.minutes(1)))
struct DiskStorageMaybeCachedTests {
    @Test func aMissDoesNotTouchTheDisk() throws {
        let folder = DiskTestFolder()
        let disk = folder.backend()
        try disk.store(value: [1], forKey: "present")
        let before = disk.diskLookups.load(ordering: .relaxed)
        #expect(try disk.value(forKey: "absent") == nil)
        #expect(!disk.isCached(forKey: "absent"))
        #expect(try disk.meta(forKey: "absent") == nil)
        #expect(try !disk.remove(forKey: "absent"))
        #expect(disk.diskLookups.load(ordering: .relaxed) == before)
        #expect(try disk.value(forKey: "present")?.bytes == [1])
        #expect(disk.diskLookups.load(ordering: .relaxed) == before + 1)

        // A file placed behind the backend's back is not seen until the set knows it...
        let other = folder.backend(name: "default-copy")
        try other.store(value: [7], flags: 5, forKey: "sneaky")
        try FileManager.default.copyItem(at: other.cacheFileURL(forKey: "sneaky"), to: disk.cacheFileURL(forKey: "sneaky"))
        #expect(try disk.value(forKey: "sneaky") == nil)
        // ...and a new backend's scan finds it.
        let rescanned = folder.backend()
        #expect(try rescanned.value(forKey: "sneaky") == CacheEntry(bytes: [7], flags: 5))
    }

    /// The set keeps 64-byte names as words and every other name as its bytes; either
    /// kind is found, and forgotten, as itself only.
    @Test func theNameSetTellsEveryKindOfNameApart() {
        let hashed = DiskStorage.sha256Hex("k")
        let sibling = DiskStorage.sha256Hex("k2")
        let upper = hashed.uppercased()
        // 64 bytes that differ from `hashed` only in the last one, and a 64-byte name of
        // 63 characters (one of two bytes).
        let lastByte = String(hashed.dropLast()) + (hashed.hasSuffix("0") ? "1" : "0")
        let twoByte = String(repeating: "a", count: 62) + "\u{E9}"
        let names = [hashed, hashed + ".png", upper, lastByte, twoByte, String(hashed.dropLast()), "plain-key",
                     "caf\u{E9}", "cafe\u{301}"]
        #expect(DiskStorage.Name64(hashed) != nil)
        #expect(DiskStorage.Name64(twoByte) != nil)
        #expect(DiskStorage.Name64(hashed + ".png") == nil)
        var set = DiskStorage.FileNameSet()
        for name in names { #expect(!set.contains(name)) }
        for (i, name) in names.enumerated() {
            set.insert(name)
            for (j, other) in names.enumerated() { #expect(set.contains(other) == (j <= i), "\(other) after \(name)") }
        }
        #expect(!set.contains(sibling))
        for (i, name) in names.enumerated() {
            set.remove(name)
            for (j, other) in names.enumerated() { #expect(set.contains(other) == (j > i), "\(other) after removing \(name)") }
        }
    }

    @Test func theFirstRequestIsAnsweredBeforeTheScanCompletes() throws {
        let folder = DiskTestFolder()
        let seed = folder.backend()
        let fileCount = 5_000
        // Creating 5,000 inodes takes ~25 s on this shared VM disk; 5,000 hard links to
        // one stored file take under a second and are 5,000 cache entries all the same.
        let template = try #require(try seed.store(value: [0xEE], flags: 4, forKey: "template"))
        for i in 0..<fileCount - 1 where i != 42 {  // + k42 + template = 5,000 files
            #expect(link(template.url.path, seed.cacheFileURL(forKey: "k\(i)").path) == 0)
        }
        try seed.store(value: [42], forKey: "k42")

        let gate = DispatchSemaphore(value: 0)
        let scanStarted = DispatchSemaphore(value: 0)
        let disk = DiskStorage.Backend(config: folder.config {
            $0.initialScanWillStart = {
                scanStarted.signal()
                gate.wait()
            }
        })
        try #require(scanStarted.wait(timeout: .now() + 30) == .success, "the scan never started")
        // The scan is held: requests are still answered, from the disk.
        #expect(!disk.isInitialScanComplete)
        #expect(try disk.value(forKey: "k42")?.bytes == [42])
        #expect(try disk.value(forKey: "nope") == nil)
        // Writes and removals during the scan are kept when it ends.
        try disk.store(value: [1], forKey: "during")
        #expect(try disk.remove(forKey: "k7"))
        #expect(!disk.isInitialScanComplete)
        gate.signal()
        disk.waitForInitialScan()
        #expect(disk.isInitialScanComplete)
        #expect(try disk.value(forKey: "during")?.bytes == [1])
        #expect(try disk.value(forKey: "k7") == nil)
        // The links all hold the template's file, which names its own key: found under
        // that key, a miss under the others (format 2 keeps the key in the file).
        #expect(try disk.value(forKey: "template") == CacheEntry(bytes: [0xEE], flags: 4))
        #expect(try disk.value(forKey: "k4998") == nil)
        #expect(try disk.count() == fileCount)
        let before = disk.diskLookups.load(ordering: .relaxed)
        #expect(try disk.value(forKey: "k7") == nil)
        #expect(disk.diskLookups.load(ordering: .relaxed) == before)
    }

    @Test func removeAllAndTrimKeepTheSetCurrent() throws {
        let folder = DiskTestFolder()  // keeps the folder until the test ends
        let disk = folder.backend(sizeLimit: 300)
        for i in 0..<3 {
            try disk.store(value: [UInt8](repeating: 0, count: 60), forKey: "k\(i)", referenceDate: diskT0.addingTimeInterval(Double(i)))
        }
        // 3 x (48 + 2 + 60) = 330 bytes > 300; down to <= 150: k0 and k1 go.
        #expect(try disk.removeSizeExceededValues().count == 2)
        var before = disk.diskLookups.load(ordering: .relaxed)
        #expect(!disk.isCached(forKey: "k0") && !disk.isCached(forKey: "k1"))
        #expect(disk.diskLookups.load(ordering: .relaxed) == before)
        #expect(try disk.removeAll() == 1)
        before = disk.diskLookups.load(ordering: .relaxed)
        #expect(!disk.isCached(forKey: "k2"))
        #expect(disk.diskLookups.load(ordering: .relaxed) == before)
        try disk.store(value: [1], forKey: "k2")
        #expect(disk.isCached(forKey: "k2"))
    }
}
