// Shared helpers for the DiskStorage suites: a fresh folder per test, a manual clock,
// and raw file-time reads that bypass the backend.

import Foundation
@testable import HalcyonCache
#if canImport(Glibc)
import Glibc
#endif

/// A uniquely named root folder for one test, removed when this object is released:
/// keep it in a local for the whole test (`DiskTestFolder().backend()` would delete the
/// folder at once, and the backend would silently recreate it and leave it behind).
final class DiskTestFolder: @unchecked Sendable {  // immutable after init
    let root: URL
    let clock: ManualClock

    init(_ label: String = #function) {
        let safe = label.filter { $0.isLetter || $0.isNumber }
        root = FileManager.default.temporaryDirectory
            .appendingPathComponent("halcyon-disk-\(safe)-\(UUID().uuidString)", isDirectory: true)
        clock = ManualClock(Date(timeIntervalSince1970: 1_700_000_000))
    }

    deinit { try? FileManager.default.removeItem(at: root) }

    func config(name: String = "default", sizeLimit: UInt64 = 0,
                _ adjust: (inout DiskStorage.Config) -> Void = { _ in }) -> DiskStorage.Config {
        var config = DiskStorage.Config(name: name, sizeLimit: sizeLimit, directory: root)
        config.clock = clock
        adjust(&config)
        return config
    }

    /// A backend whose start-up scan has finished (so the maybeCached set is exact).
    func backend(name: String = "default", sizeLimit: UInt64 = 0,
                 _ adjust: (inout DiskStorage.Config) -> Void = { _ in }) -> DiskStorage.Backend {
        let backend = DiskStorage.Backend(config: config(name: name, sizeLimit: sizeLimit, adjust))
        backend.waitForInitialScan()
        return backend
    }
}

/// The raw (atime, mtime) of a file, read with stat(2), which never changes them.
func diskRawTimes(_ url: URL) -> (atime: timespec, mtime: timespec)? {
    var st = stat()
    guard lstat(url.path, &st) == 0 else { return nil }
    return (st.st_atim, st.st_mtim)
}

func diskBytes(_ text: String) -> [UInt8] { Array(text.utf8) }

let diskT0 = Date(timeIntervalSince1970: 1_700_000_000)
