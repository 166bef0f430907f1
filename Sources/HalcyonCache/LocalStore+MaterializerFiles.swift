// The files the write-behind store's materializer writes: the local store's side of it
// (WriteBehind.swift holds the materializer itself, beside the state it works on).

import Foundation

extension LocalStore: WriteBehindFileTier {
    func materialize(_ e: Unwritten, replacing: DiskStorage.FileReplacement) throws(CacheError) {
        let old = existingFile(forKey: e.key, forcedExtension: nil)
        if e.isLive(at: config.disk.clock.now()) {
            let meta = try diskStorage.store(
                value: e.entry.bytes, flags: e.entry.flags, forKey: e.key, expiration: e.fileExpiration,
                forcedExtension: nil, referenceDate: e.countedFrom, version: e.entry.version,
                replacing: replacing, absolute: e.isAbsolute)
            adjustDiskUsage(forKey: e.key, replacing: old, with: meta)
        } else if try diskStorage.remove(forKey: e.key, forcedExtension: nil) {
            // Expired before it reached its file: the older file goes instead.
            adjustDiskUsage(forKey: e.key, replacing: old, with: nil)
        }
    }

    func didMaterialize() {
        enforceDiskSizeLimit()
        enforceDiskQuotas()
    }

    func dropMemoryCopy(key: CacheKey, version: UInt64) {
        if memoryStorage.meta(forKey: key)?.version == version { memoryStorage.remove(forKey: key) }
    }

    func noteMaintenanceError() { counters.withLock { $0.maintenanceErrors += 1 } }

    var folderPath: String { diskStorage.directoryPath }

    func now() -> Date { config.disk.clock.now() }

    /// Writes every unwritten entry to its file and checkpoints (see
    /// `WriteBehind.materializeAll`). ioQueue only.
    func materializeAll() {
        writeBehind?.materializeAll(into: self)
    }

    /// `HybridCache.materializeNow` for this host's keys (see there).
    func materializeNow(completion: @escaping @Sendable () -> Void) {
        scheduler.enqueue(.background) { [self] in
            materializeAll()
            completion()
        }
    }
}
