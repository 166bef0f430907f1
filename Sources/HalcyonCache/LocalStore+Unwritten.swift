// The entries that are in the journal but not yet in their per-key files: the
// "unwritten table". A read that misses memory looks here before the files; the
// materializer drains it oldest first into files; the disk-side primitives of the write
// path (remove, touch, write-back, clear) go through here so that a file and its
// unwritten newer value never disagree.
//
// An entry holds key, bytes, flags, version, lifetime, TTL, and where its oldest record
// starts; by key, not by file name, so a set never computes its SHA-256 file name on its
// way. A newer set of the key replaces the entry, so only the newest version is ever
// written (coalescing). Reads look in memory, then in the table, then in the file; an
// expired table entry is a miss (the older file must not answer). Touches, lifetime write-
// backs and removes of a key in the table change the table entry (touches and write-backs
// also leave a `lifetime` record, so replay ends on the same lifetime; a key with a write
// queued behind the write-back gets its record too: that write's record follows it).
//
// Disk copies changed outside the journal. Two kinds of write change a key's disk copy
// without a record of their own, and each leaves one so that replay agrees: a value written
// straight to its file (1 MiB and more) drops the key's unwritten entry and journals
// `written` (`supersedeUnwritten`), so neither a read, nor the materializer, nor replay
// brings an older journaled value back; and a removal of a disk copy no record covers
// (`removePrefix`, a `toDisk: false` store of `setMany` or `add`, a directly written value
// found already expired) journals a `delete` first (`removeDiskCopy`), failing the write if
// that append fails. Both were bugs found this way: a key set through the journal and then
// through `setMany` or `cas` answered the older value once memory let it go, and keys
// removed by `removePrefix` came back after a crash (`HybridCacheJournalTests` has both).
//
// A third kind removes disk copies without any record: the size limit's trim after a
// materializer slice or a sweep (an explicit `cache.trim` writes every file and checkpoints
// first). A restart may then replay an evicted key's set record and bring the value back,
// which a cache may do, unless the key has since been given a memory-only value:
// `store(toDisk: false)` runs inline when the key has neither file nor unwritten entry, and
// journals nothing. So the trim notes the names it evicted with the journal's end
// (`WriteBehind.evicted`), `mayHoldDiskCopy` counts such a name as a disk copy, which sends
// the memory-only store to the queue, where it journals a `delete`, and a checkpoint past
// the noted end forgets the name.

import Foundation

extension LocalStore {
    /// One acknowledged value whose file is not written yet.
    struct Unwritten: Sendable {
        var key: CacheKey
        var entry: CacheEntry
        /// The entry's lifetime (`Date.distantFuture`: never) and its original TTL (nil:
        /// reads do not move the lifetime: never, or absolute).
        var expiresAt: Date
        var timeToLive: TimeInterval?
        /// The store or last touch: what the file's last-access time will say.
        var countedFrom: Date
        /// Where the oldest journal record this entry carries starts: the checkpoint may
        /// not pass it until the entry is in its file.
        var start: Journal.Position

        var bytes: Int { entry.bytes.count + key.utf8.count + 64 }

        /// The expiration the file is written with, counted from `countedFrom`: the
        /// instant itself, so the file says exactly the lifetime the reply did (its TTL is
        /// then the span from `countedFrom`, as the file format keeps it).
        var fileExpiration: StorageExpiration {
            expiresAt == .distantFuture ? .never : .date(expiresAt)
        }

        /// The lifetime ends at a fixed instant (stored or touched with `.date`); the file
        /// is written with that kind (`fileExpiration` alone says only the instant).
        var isAbsolute: Bool { timeToLive == nil && expiresAt != .distantFuture }

        func isLive(at now: Date) -> Bool { expiresAt > now }

        /// The record that restates this entry in the journal: its set, or a delete for
        /// one that expired before its file was written (so the older file still goes).
        var journalRecord: Journal.Record {
            guard expiresAt > countedFrom else { return .delete(key: key) }
            return LocalStore.setRecord(key: key, entry: entry, expiresAt: expiresAt, timeToLive: timeToLive)
        }

        /// The meta a file holding this entry would have.
        func meta(url: URL) -> DiskStorage.FileMeta {
            DiskStorage.FileMeta(
                url: url, size: UInt64(entry.bytes.count), flags: entry.flags, expiration: expiresAt,
                lastAccess: countedFrom,
                fileSize: UInt64(DiskStorage.FileHeader.size + key.utf8.count + entry.bytes.count),
                version: entry.version, isAbsolute: isAbsolute)
        }
    }

    /// What the unwritten table says about a key.
    enum UnwrittenLookup {
        /// Not in the table: the file decides.
        case absent
        /// In the table and live.
        case live(Unwritten)
        /// In the table and expired: a miss (the older file must not answer).
        case expired
    }

    func unwrittenLookup(forKey key: CacheKey, forcedExtension: String?, at now: Date) -> UnwrittenLookup {
        guard let writeBehind, forcedExtension == nil else { return .absent }
        guard let e = writeBehind.unwritten(forKey: key) else { return .absent }
        return e.isLive(at: now) ? .live(e) : .expired
    }

    // MARK: Disk-side primitives of the write path (ioQueue)

    /// Removes the disk copy of `key`: its unwritten value and its file.
    ///
    /// `journaled`: a record that removes the copy at replay (the write's `delete`, or a
    /// touch's expired lifetime) is in the journal already. Otherwise (`removePrefix`, a
    /// `toDisk: false` store of `setMany` or `add`, a directly written value that turned
    /// out expired) a `delete` record is appended first, or the journal's older set
    /// records of the key would bring it back at replay; if that append fails, nothing
    /// is removed and the failure is the write's.
    func removeDiskCopy(forKey key: CacheKey, forcedExtension: String?, journaled: Bool) throws(CacheError) -> Bool {
        var removed = false
        if let writeBehind, forcedExtension == nil {
            if !journaled { _ = try writeBehind.append([.delete(key: key)]) }
            removed = writeBehind.removeUnwritten(key)
        }
        let old = existingFile(forKey: key, forcedExtension: forcedExtension)
        if try diskStorage.remove(forKey: key, forcedExtension: forcedExtension) {
            adjustDiskUsage(forKey: key, replacing: old, with: nil)
            removed = true
        }
        return removed
    }

    /// A value of `key` went to its file directly, not through the journal (a value too
    /// large for it, `setMany`, `add`, `cas`, `incr`): an older unwritten value of the key
    /// must neither answer reads (the table comes before the file) nor be written over the
    /// file later, nor come back at replay. Drops the table's entry and journals a
    /// `written` record, which makes replay drop every older value of the file. Before
    /// the write's reply, so a crash before the record only loses a write never
    /// acknowledged.
    func supersedeUnwritten(forKey key: CacheKey, version: UInt64) {
        guard let writeBehind else { return }
        writeBehind.removeUnwritten(key)
        let name = diskStorage.fileName(forKey: key, forcedExtension: nil)
        // A failure is counted, not fatal: the file holds the value and the table has none
        // now; only a replay could bring an older value back.
        _ = try? writeBehind.append([.written(name: name, version: version)])
    }

    /// Writes a lifetime into the disk copy: the unwritten value when there is one (its
    /// file will carry it), else the file's times.
    func writeBackDiskCopy(_ record: MemoryStorage.WriteBack) throws(CacheError) -> Bool {
        if let writeBehind, record.forcedExtension == nil {
            let updated = writeBehind.updateUnwritten(record.key) { e in
                e.expiresAt = record.expiresAt
                e.timeToLive = record.timeToLive
                e.countedFrom = record.extendedAt
            }
            if updated != nil { return true }
        }
        return try diskStorage.writeBack(record)
    }

    /// A touch of a key memory does not hold: the unwritten value, else the file.
    /// `keepingAbsolute`: `expiration` is only the default, which an absolute lifetime
    /// does not take (see `DiskStorage.Backend.touch`).
    func touchDiskCopy(
        forKey key: CacheKey, expiration: StorageExpiration, forcedExtension: String?, now: Date, keepingAbsolute: Bool
    ) throws(CacheError) -> DiskStorage.FileMeta? {
        if let writeBehind, forcedExtension == nil {
            let url = diskStorage.url(of: diskStorage.fileName(forKey: key, forcedExtension: nil))
            let result = writeBehind.touchUnwritten(
                key, expiration: expiration, now: now, keepingAbsolute: keepingAbsolute, url: url)
            if case .some(let meta) = result {
                if meta?.expiration == .distantPast {
                    // The file may hold an older value: it goes too.
                    _ = try removeDiskCopy(forKey: key, forcedExtension: nil, journaled: true)
                }
                return meta
            }
        }
        return try diskStorage.touch(
            forKey: key, expiration: expiration, forcedExtension: forcedExtension, keepingAbsolute: keepingAbsolute)
    }

    /// Whether `key` may have a disk copy (file, unwritten value, or a record a restart
    /// would replay for a file the size limit evicted), without I/O.
    func mayHoldDiskCopy(key: CacheKey, forcedExtension: String?) -> Bool {
        if diskStorage.mayHold(key: key, forcedExtension: forcedExtension) { return true }
        guard let writeBehind, forcedExtension == nil, diskStorage.isReady else { return false }
        if writeBehind.holdsUnwritten(key) { return true }
        return writeBehind.mayReplayEvicted(name: diskStorage.fileName(forKey: key, forcedExtension: nil))
    }
}
