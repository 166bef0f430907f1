// The local store's running account of the disk tier's bytes and files. The disk tier
// can only answer `totalSize()`/`count()` by listing its folder (O(files)), which is too
// slow to ask after every store; but every change to the folder goes through the ioQueue,
// so the ioQueue can keep the account itself: exact after each listing (at start, and
// after every removeExpired, trim or sweep, which list the folder anyway), adjusted by
// each store, remove and clear in between. It can only err high (a file the disk tier
// dropped on its own, a failed removal), which at worst makes a size check list the
// folder one time too many; it never lets the folder sit over its limit unnoticed.
// Known cost: on a huge folder the initial listing delays the first queued writes (reads
// from memory are unaffected).

import Foundation

extension LocalStore {
    /// Lists the folder and resets the account to what it holds. ioQueue only.
    func recountDiskUsage() {
        scheduler.assertOnQueue()
        do throws(CacheError) {
            let usage = DiskUsage(bytes: try diskStorage.totalSize(), count: try diskStorage.count())
            diskUsage.withLock { $0 = usage }
        } catch {
            diskUsage.withLock { $0 = nil }
        }
        recountNamespaceDisk()
    }

    /// The bytes a stored value occupies on disk (its file, header included).
    static func fileBytes(_ meta: DiskStorage.FileMeta) -> UInt64 {
        meta.fileSize
    }

    /// The file `key` has now, expired or not (a store replaces it, a remove deletes it),
    /// for adjusting the account. ioQueue only.
    func existingFile(forKey key: CacheKey, forcedExtension: String?) -> DiskStorage.FileMeta? {
        try? diskStorage.meta(forKey: key, referenceDate: .distantPast, forcedExtension: forcedExtension)
    }

    /// Applies one file's change to the account: `old` replaced by `new` (either nil), and
    /// to the account of `key`'s namespace. ioQueue only.
    func adjustDiskUsage(forKey key: CacheKey, replacing old: DiskStorage.FileMeta?, with new: DiskStorage.FileMeta?) {
        adjustNamespaceDisk(forKey: key, replacing: old, with: new)
        diskUsage.withLock { usage in usage?.apply(replacing: old, with: new) }
    }
}

extension HybridCache.DiskUsage {
    /// One file's change: `old` replaced by `new` (either nil); never below zero.
    mutating func apply(replacing old: DiskStorage.FileMeta?, with new: DiskStorage.FileMeta?) {
        if let old {
            bytes -= min(bytes, LocalStore.fileBytes(old))
            count = max(0, count - 1)
        }
        if let new {
            bytes += LocalStore.fileBytes(new)
            count += 1
        }
    }
}
