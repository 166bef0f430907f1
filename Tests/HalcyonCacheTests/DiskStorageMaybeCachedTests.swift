// The maybeCached shortcut: misses answered without touching the disk, a start-up scan
// that does not block requests, and mutations during the scan not lost.

import Foundation
import Testing
@testable import HalcyonCache

@Suite("DiskStorage maybeCached")
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

    @Test func theFirstRequestIsAnsweredBeforeTheScanCompletes() throws {
        let folder = DiskTestFolder()
        let seed = folder.backend()
        let fileCount = 5_000
        for i in 0..<fileCount { try seed.store(value: [UInt8(truncatingIfNeeded: i)], forKey: "k\(i)") }

        let gate = DispatchSemaphore(value: 0)
        let scanStarted = DispatchSemaphore(value: 0)
        let disk = DiskStorage.Backend(config: folder.config {
            $0.initialScanWillStart = {
                scanStarted.signal()
                gate.wait()
            }
        })
        scanStarted.wait()
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
        #expect(try disk.value(forKey: "k4999")?.bytes == [UInt8(truncatingIfNeeded: 4999)])
        #expect(try disk.count() == fileCount)
        let before = disk.diskLookups.load(ordering: .relaxed)
        #expect(try disk.value(forKey: "k7") == nil)
        #expect(disk.diskLookups.load(ordering: .relaxed) == before)
    }

    @Test func removeAllAndTrimKeepTheSetCurrent() throws {
        let disk = DiskTestFolder().backend(sizeLimit: 100)
        for i in 0..<3 {
            try disk.store(value: [UInt8](repeating: 0, count: 40), forKey: "k\(i)", referenceDate: t0.addingTimeInterval(Double(i)))
        }
        // 3 x 48 = 144 bytes > 100; down to <= 50: k0 and k1 go.
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
