// The write-ahead journal in the write path: the settings, the state the ioQueue keeps
// for it, and group commit. Writes waiting on the ioQueue are appended together with one
// write (Redis's rule: one turn, one write, replies after), then each is applied in
// order and answered. A set then lives in memory and in the unwritten table until the
// materializer (WriteBehind.swift) writes its file.
//
// Restart. `openJournal` reads the journal past the checkpoint (`Journal.recover`, torn
// tail cut), replays it into the table (idempotent: sets put entries, deletes and clears
// drop them and are applied to the files at once, lifetime records change a table entry or
// the file's times, `written` drops older entries), deletes segments a crash left behind a
// checkpoint, opens a new segment, and requests are answered at once; the materializer
// writes the replayed entries in the background. Replay time and record count are in
// `cache.stats` (`journal.replayMicros`, `journal.replayedRecords`); a large journal's
// replay time is in Benchmarks/RESULTS.md, "Writes with the journal".
//
// Crash guarantees. kill -9: every acknowledged write is in the journal (or, for a large
// value or a forced extension, in its file) and comes back; removed and cleared keys stay
// gone. Power loss: up to about a second of writes under `everysec`, none under `always`,
// whatever the kernel had not written under `never`.
//
// Large values. Values of 1 MiB and more skip the journal: their file is written before the
// reply, then a `written` record notes the version: journaling a value costs in
// proportion to its size on top of the file write, and every journaled byte fills the
// journal's bound, so past 1 MiB the double write costs more than answering before the
// file saves (Benchmarks/RESULTS.md, "Journal I/O").

import Foundation
import HalcyonSupport
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension LocalStore {

    /// A lifetime replay gives a file whose key has no unwritten value.
    struct FileTouch {
        var key: CacheKey
        var expiresAt: Date
        var timeToLive: TimeInterval?
        var keepsAbsolute: Bool
    }

    /// A record's instant: nanoseconds since 1970, -1 for never.
    static func date(nanos: Int64) -> Date {
        nanos < 0 ? .distantFuture : Date(timeIntervalSince1970: Double(nanos) / 1e9)
    }

    /// The journal folder of a cache whose disk folder is `path`.
    static func journalDirectory(_ config: JournalConfig, diskPath: String) -> String {
        config.directory?.path ?? diskPath + ".journal"
    }

    // MARK: Start

    /// Replays the journal into the unwritten table and opens the writer. Runs in init,
    /// before any request: deletes and clears found are applied to the files now, so
    /// nothing removed comes back; sets are answered from the table at once and written
    /// to files in the background.
    static func openJournal(
        _ config: JournalConfig, diskStorage: DiskStorage.Backend, clock: any CacheClock, scheduler: IOScheduler
    ) -> WriteBehind? {
        guard diskStorage.isReady else { return nil }
        let directory = journalDirectory(config, diskPath: diskStorage.directoryPath)
        let started = MonotonicClock.nanoseconds()
        let versions = VersionClock(clock: clock)
        var table = UnwrittenTable()
        let recovery: Journal.Recovery
        do throws(CacheError) {
            recovery = try Journal.recover(directory: directory)
        } catch {
            return nil
        }
        var deletes = Set<CacheKey>()
        // The key of each file name replay saw set: a `written` record names a file. File
        // names are compared as bytes: with plain names a name is its key.
        var keysByName: [CacheKey: CacheKey] = [:]
        var clearFiles = false
        var fileTouches: [CacheKey: FileTouch] = [:]
        let now = clock.now()
        // A key the folder cannot name a file with (from a daemon that took such keys)
        // is dropped, as the materializer drops it: its set would never reach a file, and
        // a delete or touch of it has no file to act on (and must not reach outside the
        // folder through a name such as `../x`).
        let rule = diskStorage.keyRule
        var dropped = 0
        for r in recovery.records {
            if let key = r.record.key, !rule.accepts(key) {
                if case .set = r.record {
                    table.remove(key)
                    dropped += 1
                    config.onDroppedEntry?(key, .invalidKey(key: key))
                }
                continue
            }
            switch r.record {
            case .set(let key, let flags, let version, let expiresAtNanos, let ttlNanos, let value):
                versions.observe(version)
                let name = CacheKey(diskStorage.fileName(forKey: key, forcedExtension: nil))
                keysByName[name] = key
                let expiresAt = LocalStore.date(nanos: expiresAtNanos)
                let ttl: TimeInterval? = ttlNanos < 0 ? nil : Double(ttlNanos) / 1e9
                let countedFrom = ttl.map { expiresAt.addingTimeInterval(-$0) } ?? now
                table.put(Unwritten(
                    key: key, entry: CacheEntry(bytes: value, flags: flags, version: version),
                    expiresAt: expiresAt, timeToLive: ttl, countedFrom: countedFrom, start: r.start))
                fileTouches[name] = nil
            case .delete(let key):
                let name = CacheKey(diskStorage.fileName(forKey: key, forcedExtension: nil))
                table.remove(key)
                fileTouches[name] = nil
                deletes.insert(name)
            case .clear:
                table.removeAll()
                deletes.removeAll()
                fileTouches.removeAll()
                clearFiles = true
            case .touch(let key, let expiresAtNanos):
                // An older build's touch: the new end, the entry's own time-to-live.
                let name = CacheKey(diskStorage.fileName(forKey: key, forcedExtension: nil))
                let expiresAt = LocalStore.date(nanos: expiresAtNanos)
                let updated = table.update(key) { e in
                    if let ttl = e.timeToLive, expiresAt != .distantFuture {
                        e.countedFrom = expiresAt.addingTimeInterval(-ttl)
                    }
                    e.expiresAt = expiresAt
                    if expiresAt == .distantFuture { e.timeToLive = nil }
                }
                if updated == nil {
                    let ttl = expiresAt == .distantFuture ? nil : max(0, expiresAt.timeIntervalSince(now))
                    fileTouches[name] = FileTouch(key: key, expiresAt: expiresAt, timeToLive: ttl, keepsAbsolute: false)
                }
            case .lifetime(let key, let expiresAtNanos, let ttlNanos, let keepsAbsolute):
                let name = CacheKey(diskStorage.fileName(forKey: key, forcedExtension: nil))
                let expiresAt = LocalStore.date(nanos: expiresAtNanos)
                let ttl: TimeInterval? = ttlNanos < 0 || expiresAt == .distantFuture ? nil : Double(ttlNanos) / 1e9
                let updated = table.update(key) { e in
                    if keepsAbsolute, e.isAbsolute { return }
                    e.expiresAt = expiresAt
                    e.timeToLive = ttl
                    e.countedFrom = ttl.map { expiresAt.addingTimeInterval(-$0) } ?? now
                }
                if updated == nil {
                    fileTouches[name] = FileTouch(key: key, expiresAt: expiresAt, timeToLive: ttl, keepsAbsolute: keepsAbsolute)
                }
            case .written(let name, let version):
                versions.observe(version)
                if let key = keysByName[CacheKey(name)], let e = table[key], e.entry.version < version { table.remove(key) }
            }
        }
        // Apply what replay found for the files themselves (idempotent: a second crash
        // here replays the same records again).
        if clearFiles { _ = try? diskStorage.removeAll() }
        for name in deletes { _ = try? diskStorage.removeFile(named: name.string) }
        for (_, t) in fileTouches {
            _ = try? diskStorage.writeBack(
                .init(key: t.key, forcedExtension: nil, expiresAt: t.expiresAt, timeToLive: t.timeToLive, extendedAt: now),
                keepingAbsolute: t.keepsAbsolute)
        }

        var writerConfig = Journal.Config(fsync: config.fsync)
        writerConfig.segmentSizeLimit = max(1 << 16, min(config.segmentSize, config.maxJournalBytes / 4))
        let writer: Journal.Writer
        do throws(CacheError) {
            writer = try Journal.Writer(directory: directory, config: writerConfig)
        } catch {
            return nil
        }
        let wb = WriteBehind(
            writer: writer, directory: directory, config: config, versions: versions, scheduler: scheduler,
            lastCheckpoint: recovery.checkpoint, table: table)
        if let checkpoint = recovery.checkpoint {
            // A crash between a checkpoint and its deletions leaves older segments behind.
            _ = try? writer.deleteSegments(before: checkpoint)
        }
        for sequence in (try? Journal.SegmentName.list(in: directory)) ?? [] {
            var st = stat()
            if stat(directory + "/" + Journal.SegmentName.name(sequence), &st) == 0 {
                wb.noteSegment(sequence, bytes: UInt64(st.st_size))
            }
        }
        let elapsed = Double(MonotonicClock.nanoseconds() - started) / 1e6
        wb.noteRecovery(records: recovery.records.count, millis: elapsed, dropped: dropped)
        return wb
    }

    /// The journal's counters for `stats()`.
    func journalStats() -> JournalStats? {
        writeBehind?.stats()
    }
}
