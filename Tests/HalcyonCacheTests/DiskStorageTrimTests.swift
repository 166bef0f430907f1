// Whole-folder operations: removeExpiredValues, removeSizeExceededValues (LRU order,
// half-limit target), totalSize/count, and temporary files at start.

import Foundation
import Testing
@testable import HalcyonCache

@Suite("DiskStorage trim", .timeLimit(.minutes(1)))
struct DiskStorageTrimTests {
    @Test func removeExpiredReturnsWhatItRemoved() throws {
        let folder = DiskTestFolder()  // keeps the folder until the test ends
        let disk = folder.backend()
        try disk.store(value: [1], forKey: "short", expiration: .seconds(10), referenceDate: diskT0)
        try disk.store(value: [2], forKey: "long", expiration: .seconds(100), referenceDate: diskT0)
        try disk.store(value: [3], forKey: "never", expiration: .never, referenceDate: diskT0)
        #expect(try disk.removeExpiredValues(referenceDate: diskT0.addingTimeInterval(9)).isEmpty)
        let removed = try disk.removeExpiredValues(referenceDate: diskT0.addingTimeInterval(10))
        #expect(removed == [disk.cacheFileURL(forKey: "short")])
        #expect(try disk.count() == 2)
        #expect(Set(try disk.removeExpiredValues(referenceDate: Date(timeIntervalSince1970: 7_000_000_000)))
                == [disk.cacheFileURL(forKey: "long")])
        #expect(try disk.value(forKey: "never", referenceDate: diskT0, actuallyLoad: true, extendingExpiration: .none,
                               forcedExtension: nil)?.entry?.bytes == [3])
        // The clock is the default reference date.
        let clockFolder = DiskTestFolder()
        let clocked = clockFolder.backend()
        try clocked.store(value: [1], forKey: "k", expiration: .seconds(5))
        #expect(try clocked.removeExpiredValues().isEmpty)
        clockFolder.clock.advance(by: 5)
        #expect(try clocked.removeExpiredValues().count == 1)
    }

    @Test func sizeTrimRemovesLeastRecentlyAccessedDownToHalfTheLimit() throws {
        let folder = DiskTestFolder()
        // Ten files of 100 value bytes = 150 file bytes each (48-byte header, 2-byte key): 1500 bytes.
        let disk = folder.backend(sizeLimit: 1400)
        for i in 0..<10 {
            try disk.store(value: [UInt8](repeating: UInt8(i), count: 100), forKey: "k\(i)", expiration: .days(1),
                           referenceDate: diskT0.addingTimeInterval(Double(i)))
        }
        #expect(try disk.totalSize() == 1500)
        // Reading k0 and k1 makes them the most recent.
        _ = try disk.valueAndMeta(forKey: "k0", referenceDate: diskT0.addingTimeInterval(100))
        _ = try disk.valueAndMeta(forKey: "k1", referenceDate: diskT0.addingTimeInterval(101))
        let removed = try disk.removeSizeExceededValues()
        // Down to <= 700 bytes: 4 files (600 bytes) stay; the 6 least recent go, oldest first.
        #expect(removed == (2...7).map { disk.cacheFileURL(forKey: "k\($0)") })
        #expect(try disk.totalSize() == 600)
        for key in ["k0", "k1", "k8", "k9"] as [CacheKey] { #expect(disk.isCached(forKey: key, referenceDate: diskT0)) }
        // Under the limit: nothing to do.
        #expect(try disk.removeSizeExceededValues().isEmpty)
    }

    @Test func noSizeLimitMeansNoTrim() throws {
        let folder = DiskTestFolder()  // keeps the folder until the test ends
        let disk = folder.backend(sizeLimit: 0)
        for i in 0..<5 { try disk.store(value: [UInt8](repeating: 1, count: 1000), forKey: "k\(i)") }
        #expect(try disk.removeSizeExceededValues().isEmpty)
        #expect(try disk.count() == 5)
        // 5 x 1050 bytes over a 2100 limit: down to <= 1050, so 4 go.
        disk.config.sizeLimit = 2100
        #expect(try disk.removeSizeExceededValues().count == 4)
    }

    @Test func countAndTotalSizeIgnoreTemporaryFilesAndStaleOnesGoAtStart() throws {
        let folder = DiskTestFolder()
        let disk = folder.backend()
        try disk.store(value: [1, 2, 3], forKey: "a")
        try disk.store(value: [4], forKey: "b")
        let stale = disk.directoryURL.appendingPathComponent(".tmp-deadbeef-1")
        try Data(repeating: 0, count: 50).write(to: stale)
        #expect(try disk.count() == 2)
        #expect(try disk.totalSize() == (48 + 1 + 3) + (48 + 1 + 1))
        // A new backend on the folder deletes the stale temp file in its scan.
        let again = folder.backend()
        #expect(!FileManager.default.fileExists(atPath: stale.path))
        #expect(try again.count() == 2)
    }
}
