// Write-behind: the materializer writes the per-key files from the unwritten table,
// oldest journal record first, in small slices on the ioQueue, and moves the checkpoint
// so whole segments can be deleted. Only the newest version of a key is in the table,
// so a key set many times is written once. It rewrites an existing file in place
// rather than through a temporary file and a rename (45 times cheaper on ext4), which
// the journal makes safe: see `materializeSlice`.
//
// Pacing. It runs as jobs of a few files each, so an acknowledgement waits for at most one
// slice. Below 30 % of the fuller bound it works only after 3 ms without a journaled write
// or a direct commit (files wait for a pause in the load; a direct commit of refused
// updates appends nothing but is load all the same: without it the materializer wrote files
// back to back under a stream of refused increments, each one the loops' next commit waited
// behind, 73k against 168k refusals/s at 8 x 16); from 30 % one file per millisecond; from
// 60 % four files per queue turn; from 90 % 32.
//
// Copying forward instead of writing files. Under a steady load of rewrites the journal
// fills with records later sets superseded, and what pins the oldest segment is a few keys
// not rewritten since. When the journal is at 30 % of its bound or more while the table is
// below 30 % of its own and holds at most a quarter of the journal's bytes, and the load is
// not paused, a tick appends the records of up to 1024 of the oldest live entries anew with
// one append (`copyForward`), points the entries at the new records
// (`UnwrittenTable.moveStart`) and checkpoints past the freed segments: a record costs its
// bytes in one `writev`, a file a create or a rewrite. Replay meets the old record and then
// the copy, the same version and lifetime. The quarter keeps each round freeing several
// times what it writes, so copying ends once the journal is below 30 %; an expired entry at
// the head stops it, and the files take over, as they do when the table itself is full. The
// checkpoint syncs the journal before the old segments go. A 60 s set load over 100,000
// keys (8 x 16) wrote about 1,200 files a second before (a quarter of the daemon's CPU) and
// about none after, copying about 1,000 records a second: 69k -> 93k sets/s
// (`recordsCopiedForward`).
//
// Checkpoint and segment deletion. The checkpoint may go up to the oldest of: the oldest
// table entry's record, the oldest record journaled but not yet applied, the end of the
// journal. It is written when that frees a segment (or, with the table empty, once a second
// at most), after `syncfs` of the cache folder (unless `--fsync never`) so it never vouches
// for file data the kernel has not written; then segments wholly before it are deleted.
//
// A value whose file can never be written. A failed file write is retried (a full disk,
// EIO, a folder it may not write to: the entries behind it would meet the same failure). A
// failure tied to the one entry is not: its key cannot name a file, the file system refuses
// the name (`ENAMETOOLONG`, `EINVAL`), or a directory or a symlink loop sits where the file
// belongs (`EISDIR`, `ELOOP`). Retried, such an entry would pin the checkpoint until every
// write failed with `diskBacklog`. `dropIfNeverWritable` drops it from the table and
// memory, counts it (`droppedEntries`) and reports it with its key and error, which the
// daemon logs. Replay applies the same rule to keys. The protocol layer refuses such keys
// before any reply (`Params.keyRule`), so only a journal of an older daemon, or a folder
// changed by hand, can hold one.
//
// Files rewritten in place, and why that is safe (what must stay true for it to remain so).
// A crash mid-rewrite: the materializer only writes entries of the table; their records
// stay until a checkpoint passes them, the checkpoint never passes the oldest table entry,
// and it is written only after `syncfs` of the cache folder (unless `--fsync never`). So a
// file torn by a crash still has its record: replay puts the value back in the table, reads
// answer from the table and never open the file, and the materializer writes it again. A
// torn file met otherwise fails the format-2 length or CRC32C check: a miss, counted in
// `diskCorruptions` and removed. Only format-2 files are rewritten in place (a format-1
// header has no checksum). Never a torn value served. (Under `--fsync never` a power cut
// may lose a rewritten value whose checkpoint reached the disk before its data: a miss.)
//
// Readers off the queue. A read with `loadDiskFileSynchronously`, an inline
// `describe`/`cachedType`, and a page of `cache.keys` (on a utility queue) open files on
// their own threads; meeting a file mid-rewrite, they would take it for damaged and delete
// it or date it. Each counts itself in `WriteBehind.offQueueReaders` from before its look
// at the table until its file is closed (`readingFiles`); the materializer rewrites in
// place only when the count is 0 at the moment it decides, and otherwise renames, which a
// reader holding the old inode never notices. A reader that counts itself after that
// decision finds the key in the table (it is there from before the decision until after the
// write, and the table's lock orders the two) and answers from it without opening the file;
// the key listing likewise never opens a file whose name the table holds. The start-up scan
// only lists the folder and deletes other instances' temporary files; every other file
// access runs on the queue, in turn with the materializer. Direct writes (values of 1 MiB
// and more), forced extensions and every write outside the materializer keep temp + rename:
// no record stands behind them.

import CHalcyonSystem
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension HybridCache {
    /// How long the ioQueue must have seen no journaled write before the materializer
    /// works at low pressure: under a steady load files wait, and are written when the
    /// load pauses or the bounds fill.
    static let materializerIdleNanos: UInt64 = 3_000_000

    /// Queues a tick unless one is queued. Any thread.
    func kickMaterializer(_ wb: WriteBehind) {
        let claimed = wb.claimMaterializerTick()
        // Counted only while it runs, like every slice (see `IOScheduler`): a commit may
        // wait behind one slice, and a group commit kicks the materializer each time.
        if claimed { scheduler.enqueue(.slice) { [weak self] in self?.materializerTick() } }
    }

    /// Queues the next slice. ioQueue only.
    func scheduleMaterializer(_ wb: WriteBehind, after delay: DispatchTimeInterval? = nil) {
        scheduler.assertOnQueue()
        wb.noteMaterializerTick(queued: true)
        let job: @Sendable () -> Void = { [weak self] in self?.materializerTick() }
        if let delay {
            scheduler.enqueue(after: delay, .slice, job)
        } else {
            scheduler.enqueue(.slice, job)
        }
    }

    /// One turn of the materializer: a few files (more as the bounds fill), then a
    /// checkpoint when it frees a segment, then the next turn behind whatever queued
    /// meanwhile, so an acknowledgement waits for at most one slice.
    private func materializerTick() {
        guard let wb = writeBehind else { return }
        wb.noteMaterializerTick(queued: false)
        // While no write comes, this is what notices the journal's folder deleted under
        // the daemon; a write's own append notices it at once.
        wb.writer.checkSegment()
        if wb.writer.takeLoss() || wb.rebuildPending {
            do throws(CacheError) { _ = try wb.rebuild(then: []) } catch { counters.withLock { $0.maintenanceErrors += 1 } }
        }
        if wb.isHeld {
            scheduleMaterializer(wb, after: .milliseconds(10))
            return
        }
        let (journalPressure, unwrittenPressure) = wb.pressures()
        let pressure = max(journalPressure, unwrittenPressure)
        let lastWrite = wb.lastWriteNanos
        let idle = MonotonicClock.nanoseconds() &- lastWrite >= HybridCache.materializerIdleNanos
        if !idle, journalPressure >= 0.3, unwrittenPressure < 0.3,
           UInt64(wb.table.withLock { $0.bytes }) * 4 <= wb.journalBytes {
            // The journal is filling but what it holds unwritten is small (a quarter of it
            // at most, so copying frees several times what it writes): records of keys
            // rewritten since are superseded, and the few live old ones that pin the oldest
            // segment are cheaper to append again than to write to files (a file per key
            // costs a create or a rewrite; a record, its bytes in one append).
            if copyForward(wb, limit: 1024) > 0 {
                checkpointIfUseful(wb, force: false)
                scheduleMaterializer(wb, after: .milliseconds(1))
                return
            }
            // The oldest entry cannot be copied (it expired, or it is the tombstone of a
            // value that arrived expired): the files below handle it.
        }
        // Below 30 % the files wait for a pause in the load; above, the materializer's
        // share of the queue grows with the pressure (one file per millisecond, then a
        // few per queue turn, then many).
        let files = pressure >= 0.9 ? 32 : pressure >= 0.6 ? 4 : pressure >= 0.3 || idle ? 1 : 0
        if files == 0 {
            scheduleMaterializer(wb, after: .milliseconds(5))
            return
        }
        let written = materializeSlice(wb, files: files)
        let empty = wb.table.withLock { $0.count == 0 }
        let quiet = MonotonicClock.nanoseconds() &- wb.lastCheckpointNanos >= 1_000_000_000
        checkpointIfUseful(wb, force: empty && quiet)
        if !empty {
            let paced = pressure < 0.6 && !idle
            scheduleMaterializer(wb, after: written == 0 ? .milliseconds(50) : paced ? .milliseconds(1) : nil)
        }
    }

    /// Writes up to `files` per-key files from the table, oldest first. Returns how many
    /// it handled. A failed write leaves the entry in the table (retried later).
    ///
    /// Files are rewritten in place (`DiskStorage.FileReplacement.inPlace`), not through
    /// a temporary file and a rename, and that must stay safe on two counts:
    ///
    /// - A crash mid-write. Every entry written here is in the unwritten table, whose
    ///   journal records stay until a checkpoint passes them; `checkpointIfUseful` writes
    ///   a checkpoint only after the files are flushed (syncfs, unless fsync is `never`)
    ///   and never past the oldest entry still in the table, which leaves it only after
    ///   its file is written. So a file torn by a crash still has its record: its length
    ///   or CRC32C check fails (format-2 header), a read takes it for a miss and removes
    ///   it, and replay puts the value back in the table, whence it is written again.
    ///   Until then reads answer from the table and never open the file. A torn value is
    ///   never served.
    /// - Readers off the ioQueue (`loadDiskFileSynchronously` reads, `describe`, the key
    ///   listing) could open the file during the rewrite, take it for damaged and delete
    ///   the new value with it (`discardCorrupt`: same inode), or date it wrongly. Each
    ///   such reader counts itself in `offQueueReaders` before it looks in the table and
    ///   until its file is closed, and the rewrite happens only when the count is 0 at
    ///   the moment of the decision; otherwise the file is replaced by a rename, which
    ///   a reader holding the old file never notices. A reader that counts itself after
    ///   the decision finds the key in the table (it is there from before the decision
    ///   until after the write; the table's lock orders its lookup after the entry went
    ///   in, and an entry it finds gone was written first) and answers from it without
    ///   opening the file; the listing skips the files the table names.
    ///
    /// Direct writes (values of `directValueSize` and more, written before their reply),
    /// forced-extension files and every other write keep temp + rename: no journal
    /// record stands behind them.
    @discardableResult
    func materializeSlice(_ wb: WriteBehind, files: Int) -> Int {
        scheduler.assertOnQueue()
        var handled = 0
        while handled < files, let e = wb.table.withLock({ $0.oldest() }) {
            let old = existingFile(forKey: e.key, forcedExtension: nil)
            do throws(CacheError) {
                if e.isLive(at: config.disk.clock.now()) {
                    // The decision: `e` stays in the table until after the write below.
                    let quiet = wb.offQueueReaders.load(ordering: .sequentiallyConsistent) == 0
                    let meta = try diskStorage.store(
                        value: e.entry.bytes, flags: e.entry.flags, forKey: e.key, expiration: e.fileExpiration,
                        forcedExtension: nil, referenceDate: e.countedFrom, version: e.entry.version,
                        replacing: quiet ? .inPlace : .rename, absolute: e.isAbsolute)
                    adjustDiskUsage(replacing: old, with: meta)
                } else if try diskStorage.remove(forKey: e.key, forcedExtension: nil) {
                    // Expired before it reached its file: the older file goes instead.
                    adjustDiskUsage(replacing: old, with: nil)
                }
                wb.table.withLock { $0.remove(e.key, ifVersion: e.entry.version) }
                wb.counters.withLock { $0.filesWritten += 1 }
            } catch {
                if !dropIfNeverWritable(e, error, wb) {
                    wb.counters.withLock {
                        $0.fileWriteFailures += 1
                        $0.lastFileWriteFailure = error
                    }
                    counters.withLock { $0.maintenanceErrors += 1 }
                    break
                }
            }
            handled += 1
        }
        if handled > 0 { enforceDiskSizeLimit() }
        return handled
    }

    /// Drops `e` when `error` says its file can never be written, whatever is retried:
    /// the key cannot name a file, or the name is too long, is a directory, a symlink loop
    /// or otherwise refused by the file system (`ENAMETOOLONG`, `EISDIR`, `ELOOP`,
    /// `EINVAL`). Retrying such an entry would pin the checkpoint and stop every entry
    /// behind it until the bounds refuse all writes. A failure of the folder or the
    /// device (`ENOSPC`, `EIO`, `EACCES`, ...) is no reason: it is retried, as the
    /// entries behind would meet it too. The memory copy of the same version goes with
    /// the entry, so no tier keeps a value the other lost; the drop is counted
    /// (`droppedEntries`) and reported through `JournalConfig.onDroppedEntry`. Replay
    /// applies the same rule to keys (`openJournal`). Returns whether it dropped `e`.
    /// ioQueue only.
    func dropIfNeverWritable(_ e: Unwritten, _ error: CacheError, _ wb: WriteBehind) -> Bool {
        scheduler.assertOnQueue()
        switch error {
        case .invalidKey:
            break
        case .cannotCreateCacheFile(_, let code) where [ENAMETOOLONG, EISDIR, ELOOP, EINVAL].contains(code):
            break
        default:
            return false
        }
        wb.table.withLock { $0.remove(e.key, ifVersion: e.entry.version) }
        if memoryStorage.meta(forKey: e.key)?.version == e.entry.version { memoryStorage.remove(forKey: e.key) }
        wb.counters.withLock { $0.droppedEntries += 1 }
        wb.config.onDroppedEntry?(e.key, error)
        return true
    }

    /// Appends anew the records of up to `limit` of the oldest unwritten entries (live,
    /// with their records in a segment before the one being written), with one append,
    /// and points the entries at the new records, so the checkpoint can pass the
    /// segments that held the old ones without their files being written. Replay
    /// meets the old record, then the new one: the same version and lifetime, applied
    /// twice to the same result. Returns how many it copied. ioQueue only.
    @discardableResult
    func copyForward(_ wb: WriteBehind, limit: Int) -> Int {
        scheduler.assertOnQueue()
        let current = wb.writer.position.segment
        let entries = wb.table.withLock { $0.oldestLive(limit: limit, at: config.disk.clock.now(), before: current) }
        guard !entries.isEmpty else { return 0 }
        let records = entries.map(\.journalRecord)
        do throws(CacheError) {
            let end = try wb.append(records)
            wb.moveStarts(of: entries, to: records, endingBefore: end)
        } catch {
            // Counted by the append; the materializer writes files instead meanwhile.
            return 0
        }
        wb.counters.withLock { $0.recordsCopiedForward += entries.count }
        return entries.count
    }

    /// Writes a checkpoint when it lets a segment go (or when `force` and it moved),
    /// then deletes the segments before it. The files it vouches for are flushed first
    /// unless fsync is `never`, so a checkpoint never outruns the files it covers.
    func checkpointIfUseful(_ wb: WriteBehind, force: Bool, at explicit: Journal.Position? = nil) {
        scheduler.assertOnQueue()
        // Under the write book's lock: an inline store appends and enters the table under
        // it, so the journal's end is never read between the two.
        var candidate = scheduler.withBookHeld { () -> Journal.Position in
            let oldestTable = wb.table.withLock { t -> Journal.Position? in t.oldest()?.start }
            var c = explicit ?? wb.writer.position
            if let p = oldestTable, p < c { c = p }
            return c
        }
        if let p = wb.oldestUnapplied, p < candidate { candidate = p }
        if let last = wb.lastCheckpoint, candidate <= last { return }
        let oldestSegment = wb.oldestSegment ?? candidate.segment
        let freesSegment = candidate.segment > oldestSegment
        let now = MonotonicClock.nanoseconds()
        guard freesSegment || force else { return }
        if wb.config.fsync != .never {
            syncFileSystem(of: diskStorage.directoryPath)
            // Records copied forward must be on the device before the segments that held
            // their older copies go (the journal may be on another file system).
            try? wb.writer.sync()
        }
        var deleted = 0
        do throws(CacheError) {
            if let explicit, candidate == explicit {
                // Everything is in (synced) files: the segments can go even before the
                // checkpoint is written, which on a full disk may not fit until they have.
                deleted += try wb.writer.deleteSegments(before: candidate)
            }
            try wb.writeCheckpoint(candidate, at: now)
            deleted += try wb.writer.deleteSegments(before: candidate)
        } catch {
            counters.withLock { $0.maintenanceErrors += 1 }
        }
        if deleted > 0 { wb.forgetGoneSegments() }
        wb.counters.withLock {
            $0.checkpoints += wb.lastCheckpointNanos == now ? 1 : 0
            $0.segmentsDeleted += deleted
        }
    }

    private func syncFileSystem(of path: String) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = hc_syncfs(fd)
        close(fd)
    }

    /// Writes every unwritten entry to its file and checkpoints: for tests, a clean
    /// shutdown, and whole-cache work that wants the files complete. ioQueue only.
    func materializeAll() {
        guard let wb = writeBehind else { return }
        while materializeSlice(wb, files: 256) > 0 {}
        // Everything is in files: a new segment lets the current one go too (this is how
        // a trim after a full disk gives the journal its space back).
        let empty = wb.table.withLock { $0.count == 0 } && wb.oldestUnapplied == nil
        if empty, wb.writer.position.offset > UInt64(Journal.SegmentHeader.size),
           let next = try? wb.writer.retire()
        {
            checkpointIfUseful(wb, force: true, at: next)
        } else {
            checkpointIfUseful(wb, force: true)
        }
    }

    /// Test hook: runs `materializeAll` on the ioQueue after every queued job.
    public func materializeNow(completion: @escaping @Sendable () -> Void) {
        scheduler.enqueue(.background) { [self] in
            materializeAll()
            completion()
        }
    }
}
