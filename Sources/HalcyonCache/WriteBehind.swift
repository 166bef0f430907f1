// The write-behind store: the journal's writer, the unwritten table, and the state the
// journal keeps between group commits, checkpoints and the materializer. The local store
// composes one (nil without a journal) and reaches it only through its methods:
// LocalStore+Journal.swift opens it at start, LocalStore+GroupCommit.swift appends to
// it, and its materializer (below, beside the private state it works on) drains it into
// the files the store lends it (LocalStore+MaterializerFiles.swift).

import CHalcyonSystem
import Foundation
import HalcyonSupport
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension LocalStore {
    /// The journal's writer and the write-behind state of one cache.
    ///
    /// Every stored property but `versions` (a plain read of a `Sendable` `let`, the
    /// clock the cache shares) is private: the local store composes the store through
    /// the named methods below and the materializer's, and never reaches into its
    /// fields. The materializer is in this file because it works on those fields.
    ///
    /// Threading: `table`, `counters`, `appends`, `evicted` and `materializerScheduled`
    /// are `Locked` (any thread); `offQueueReaders` and `recentPressure` are atomics; the
    /// writer is thread-safe. What only the ordered work may touch (which records are
    /// journaled but not applied, the last checkpoint, a pending rebuild) is `QueueState`,
    /// private, reached only through `onQueue`, which checks that it runs on the
    /// scheduler's queue. `@unchecked Sendable`: `queueState` is touched only on the
    /// IOScheduler's queue (checked in `onQueue`); every other stored property is a
    /// `let` of a `Sendable` type.
    final class WriteBehind: @unchecked Sendable {
        private let writer: Journal.Writer
        private let directory: String
        private let config: JournalConfig
        private let table: Locked<UnwrittenTable>
        private let counters = Locked(JournalStats())
        /// Read by the cache at init: the one version clock both share. A `let` of a
        /// `Sendable` type, so a plain read needs no method.
        let versions: VersionClock
        /// Disk reads that may open cache files off the ioQueue, in flight; while any
        /// is, the materializer renames instead of rewriting in place (see
        /// `materializeSlice`). Any thread, through `readingFiles`.
        private let offQueueReaders = Atomic<Int>(0)
        /// The order every call that touches `queueState` runs in, and the queue the
        /// materializer's slices are enqueued on.
        private let scheduler: IOScheduler
        private var queueState: QueueState

        /// The state only the ordered work touches.
        private struct QueueState {
            /// Starts of records journaled by a group but not yet applied, oldest first.
            var unapplied: [Journal.Position] = []
            var unappliedHead = 0
            /// The last checkpoint written (or found at start), and when (monotonic ns).
            var lastCheckpoint: Journal.Position?
            var lastCheckpointNanos: UInt64 = 0
            /// The journal lost its segments and the table's entries are not in it again
            /// yet (see `rebuild`).
            var rebuildPending = false
        }

        /// The one way to `queueState`: only on the scheduler's queue (in a job, or in a
        /// direct commit, which runs inside the queue).
        private func onQueue<T, E: Error>(_ body: (inout QueueState) throws(E) -> T) throws(E) -> T {
            scheduler.assertOnQueue()
            return try body(&queueState)
        }

        /// Bytes of each live segment, and when the last journaled write was made
        /// (monotonic ns). A `Locked`: group commit notes appends on the ioQueue, and
        /// `cache.stats` reads them from any thread.
        private let appends = Locked(Appends())
        /// Whether the materializer has a tick queued, and whether that tick is a rest
        /// (see `MaterializerTurn`).
        private let materializerScheduled = Locked(MaterializerTurn())
        /// Files the size limit evicted while their keys' set records may still be past the
        /// checkpoint, by name, with the journal's end at the eviction: a restart would
        /// replay such a record and bring the evicted value back, which is harmless for a
        /// cache unless a newer memory-only value of the key was stored without a record
        /// (`store(toDisk: false)` inline). So while a key's name is here, such a store is
        /// queued, and journals its delete. Dropped as the checkpoint passes them.
        private let evicted = Locked([CacheKey: Journal.Position]())

        /// Notes files the size limit just removed (see `evicted`). ioQueue only.
        func noteEvicted(names: [String]) {
            guard !names.isEmpty else { return }
            let end = writer.position
            evicted.withLock { for name in names { $0[CacheKey(name)] = end } }
        }

        /// Whether the file `name` was evicted with records of its key perhaps still to
        /// replay. Any thread.
        func mayReplayEvicted(name: @autoclosure () -> String) -> Bool {
            guard !evicted.withLock({ $0.isEmpty }) else { return false }
            // The name (a SHA-256) is computed outside the lock.
            let name = CacheKey(name())
            return evicted.withLock { $0[name] != nil }
        }

        /// The journal lost its segments and the table's entries are not in it again yet
        /// (see `rebuild`): the next append, or the materializer's tick, rebuilds first.
        private var rebuildPending: Bool { onQueue { $0.rebuildPending } }

        /// The last checkpoint written, or found at start.
        var lastCheckpoint: Journal.Position? { onQueue { $0.lastCheckpoint } }

        /// When the last checkpoint was written (monotonic ns; 0: none since start).
        private var lastCheckpointNanos: UInt64 { onQueue { $0.lastCheckpointNanos } }

        /// Writes the checkpoint file at `candidate` and notes it, `nanos` (monotonic)
        /// now, forgetting the evicted names it passes (see `evicted`). Queue only.
        private func writeCheckpoint(_ candidate: Journal.Position, at nanos: UInt64) throws(CacheError) {
            try Journal.Checkpoint.write(candidate, directory: directory)
            onQueue {
                $0.lastCheckpoint = candidate
                $0.lastCheckpointNanos = nanos
            }
            evicted.withLock { $0 = $0.filter { $0.value > candidate } }
        }

        /// Counts the bytes of a segment found at start.
        func noteSegment(_ sequence: UInt64, bytes: UInt64) {
            appends.withLock { $0.segmentBytes[sequence] = bytes }
        }

        /// When the last journaled write (or direct commit) was made, monotonic ns.
        var lastWriteNanos: UInt64 { appends.withLock { $0.lastWriteNanos } }

        /// The oldest segment still counted; nil when none is.
        private var oldestSegment: UInt64? { appends.withLock { $0.segmentBytes.keys.min() } }

        /// The one materializer tick in flight. Under a steady load at low pressure the
        /// files wait for a pause, and the tick that looks for the pause *rests*: it comes
        /// back after `JournalConfig.materializerRest`, not at once. Each tick that comes back by a timer wakes
        /// the timer thread and a queue thread, so a short rest would cost a steady stream
        /// of small requests a wake-up every few of them. A group commit that finds the
        /// bounds filling ends a rest at once: it queues a fresh tick and bumps
        /// `generation`, and the resting tick, stale, does nothing when its timer fires.
        struct MaterializerTurn {
            var queued = false
            var resting = false
            var generation: UInt64 = 0
        }

        /// Claims the one materializer tick: returns the generation to queue one with, or
        /// nil when one is queued already (a resting one is taken over when the bounds are
        /// at 30 % or more). Any thread.
        private func claimMaterializerTick() -> UInt64? {
            let filling = recentPressure.load(ordering: .relaxed) >= 300
            return materializerScheduled.withLock { turn -> UInt64? in
                if turn.queued, !(turn.resting && filling) { return nil }
                if turn.queued { turn.generation &+= 1 }
                turn.queued = true
                turn.resting = false
                return turn.generation
            }
        }

        /// Notes a materializer tick queued, resting or not; returns its generation.
        private func noteMaterializerTickQueued(resting: Bool) -> UInt64 {
            materializerScheduled.withLock { turn in
                turn.queued = true
                turn.resting = resting
                return turn.generation
            }
        }

        /// Begins the tick of `generation`: false when it is stale (a group commit took
        /// over its rest), and then it must do nothing.
        private func beginMaterializerTick(_ generation: UInt64) -> Bool {
            materializerScheduled.withLock { turn in
                guard turn.generation == generation else { return false }
                turn.queued = false
                turn.resting = false
                return true
            }
        }

        /// Whether the fuller bound was at 90 % or more when last computed (`pressure()`):
        /// for a caller on the hot path that must not take the table's lock.
        var isNearBounds: Bool { recentPressure.load(ordering: .relaxed) >= 900 }

        /// Notes the start of a record journaled by a group and not yet applied.
        func noteUnapplied(_ start: Journal.Position) {
            onQueue { $0.unapplied.append(start) }
        }

        struct Appends {
            var segmentBytes: [UInt64: UInt64] = [:]
            /// The last append, or direct commit (see `noteWriteActivity`).
            var lastWriteNanos: UInt64 = 0
            var journalBytes: UInt64 { segmentBytes.values.reduce(0, +) }
        }

        /// Appends `records` with one write and notes the append; a failed append is
        /// counted (`failedAppends`) and thrown. ioQueue only, like the writer.
        func append(_ records: [Journal.Record]) throws(CacheError) -> Journal.Position {
            var end = onQueue({ $0.rebuildPending }) ? try rebuild(then: records) : try appendOnce(records)
            // The folder (or the segment) was removed under the daemon: what the lost
            // segments held for the table must be in the journal again before any reply.
            var attempts = 0
            while writer.takeLoss(), attempts < 3 {
                attempts += 1
                end = try rebuild(then: records)
            }
            return end
        }

        /// Appends the unwritten table's entries anew (a set for each live one, a delete
        /// for one that expired before its file was written), then `records`, after the
        /// writer found its segments gone. The entries' starts move to their new records,
        /// and only the segments still in the folder are counted. ioQueue only.
        ///
        /// The contract: what the journal alone held (the table) is journaled again before
        /// any later reply. A value whose file was already written (its entry left the
        /// table, a checkpoint may have passed its record) is not: if the folder went, the
        /// file went with it, as any file someone deletes, and a memory copy of it answers
        /// only until it leaves memory or the daemon restarts.
        private func rebuild(then records: [Journal.Record]) throws(CacheError) -> Journal.Position {
            // Until an append of the rebuilt records succeeds, every append retries it.
            onQueue { $0.rebuildPending = true }
            let entries = table.withLock { $0.all }
            let rebuilt = entries.map(\.journalRecord)
            let all = rebuilt + records
            let end = try appendOnce(all)
            onQueue { $0.rebuildPending = false }
            counters.withLock { $0.journalRebuilds += 1 }
            moveStarts(of: entries, to: rebuilt, endingBefore: end, trailing: records)
            forgetGoneSegments()
            return end
        }

        /// Stops counting the bytes of segments no longer in the folder (deleted behind a
        /// checkpoint, or lost with the folder).
        private func forgetGoneSegments() {
            guard let live = try? Set(Journal.SegmentName.list(in: directory)) else { return }
            appends.withLock { a in
                for sequence in Array(a.segmentBytes.keys) where !live.contains(sequence) { a.segmentBytes[sequence] = nil }
            }
        }

        /// Points each of `entries` at its record among `restated`, which were appended
        /// together, followed by `trailing`, ending at `end`.
        private func moveStarts(
            of entries: [Unwritten], to restated: [Journal.Record], endingBefore end: Journal.Position,
            trailing: [Journal.Record] = []
        ) {
            let size = (restated + trailing).reduce(0) { $0 + Journal.RecordCodec.framedSize($1) }
            var offset = end.offset - UInt64(size)
            table.withLock { t in
                for (e, record) in zip(entries, restated) {
                    t.moveStart(e.key, to: Journal.Position(segment: end.segment, offset: offset))
                    offset += UInt64(Journal.RecordCodec.framedSize(record))
                }
            }
        }

        private func appendOnce(_ records: [Journal.Record]) throws(CacheError) -> Journal.Position {
            let end: Journal.Position
            do throws(CacheError) {
                end = try writer.append(records)
            } catch {
                counters.withLock { $0.failedAppends += 1 }
                throw error
            }
            noteAppend(ending: end)
            return end
        }

        /// Notes a direct commit that may have appended nothing (updates that were all
        /// refused): the write path is busy all the same, so the materializer must not
        /// take it for idle and write files back to back, each of which the next commit
        /// would wait behind.
        func noteWriteActivity() {
            let now = MonotonicClock.nanoseconds()
            appends.withLock { $0.lastWriteNanos = now }
        }

        private func noteAppend(ending end: Journal.Position) {
            let now = MonotonicClock.nanoseconds()
            appends.withLock {
                $0.segmentBytes[end.segment] = max($0.segmentBytes[end.segment] ?? 0, end.offset)
                $0.lastWriteNanos = now
            }
        }

        /// - Parameters:
        ///   - lastCheckpoint: the checkpoint recovery found.
        ///   - table: the unwritten entries recovery replayed.
        init(
            writer: Journal.Writer, directory: String, config: JournalConfig, versions: VersionClock,
            scheduler: IOScheduler, lastCheckpoint: Journal.Position?, table: UnwrittenTable
        ) {
            self.writer = writer
            self.table = Locked(table)
            self.directory = directory
            self.config = config
            self.versions = versions
            self.scheduler = scheduler
            queueState = QueueState(lastCheckpoint: lastCheckpoint)
        }

        var journalBytes: UInt64 { appends.withLock { $0.journalBytes } }

        private var isHeld: Bool { config.materializerHeld?() ?? false }

        /// How full the fuller bound is, 0...1 and beyond. Also kept in `recentPressure`.
        func pressure() -> Double {
            let (journal, unwritten) = pressures()
            return max(journal, unwritten)
        }

        /// How full each bound is: the journal's bytes and the unwritten bytes, 0...1 and
        /// beyond. Also refreshes `recentPressure` (the fuller of the two).
        private func pressures() -> (journal: Double, unwritten: Double) {
            let journal = Double(journalBytes) / Double(max(1, config.maxJournalBytes))
            let unwritten = Double(table.withLock { $0.bytes }) / Double(max(1, config.maxUnwrittenBytes))
            recentPressure.store(Int(min(max(journal, unwritten), 1000) * 1000), ordering: .relaxed)
            return (journal, unwritten)
        }

        /// `pressure()` as last computed, in thousandths: every group commit and every
        /// materializer turn computes it. For a caller on the hot path that must not take
        /// the table's lock (which the group being committed may hold) to ask whether the
        /// bounds are near; `waitForRoom` still checks the exact value inside the commit.
        private let recentPressure = Atomic<Int>(0)

        /// The oldest unapplied record was applied (or its write failed).
        func popUnapplied() {
            onQueue { q in
                guard q.unappliedHead < q.unapplied.count else { return }
                q.unappliedHead += 1
                if q.unappliedHead == q.unapplied.count {
                    q.unapplied.removeAll(keepingCapacity: true)
                    q.unappliedHead = 0
                }
            }
        }

        /// The start of the oldest record journaled but not yet applied: the checkpoint
        /// may not pass it.
        var oldestUnapplied: Journal.Position? {
            onQueue { $0.unappliedHead < $0.unapplied.count ? $0.unapplied[$0.unappliedHead] : nil }
        }

        // MARK: What the local store asks of the store

        /// The journal's bound on values: one of this size or more goes to its file before
        /// the reply, not to the journal.
        var directValueSize: Int { config.directValueSize }

        /// When the journal reaches the device.
        var fsync: Journal.FsyncPolicy { config.fsync }

        /// The journal's end. Queue only, like the writer.
        var journalEnd: Journal.Position { writer.position }

        /// Syncs the journal to the device unless its policy is `never` (a clean shutdown).
        func syncUnlessNever() {
            if config.fsync != .never { try? writer.sync() }
        }

        /// Runs `body`, which may open cache files off the ioQueue, counted in
        /// `offQueueReaders` from before it looks in the table until it returns: the
        /// materializer then renames instead of rewriting in place (see `materializeSlice`).
        /// Any thread.
        @inline(__always)
        func readingFiles<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
            beginReadingFiles()
            defer { endReadingFiles() }
            return try body()
        }

        /// The two halves of `readingFiles`, for a reader whose files stay open across
        /// an `await` (tests). Every begin needs its end. Any thread.
        @inline(__always)
        func beginReadingFiles() { offQueueReaders.add(1, ordering: .sequentiallyConsistent) }

        @inline(__always)
        func endReadingFiles() { offQueueReaders.subtract(1, ordering: .sequentiallyConsistent) }

        /// Off-queue readers in flight (for tests).
        var offQueueReaderCount: Int { offQueueReaders.load(ordering: .sequentiallyConsistent) }

        /// The unwritten entry of `key`, live or not. Any thread.
        func unwritten(forKey key: CacheKey) -> Unwritten? {
            table.withLock { $0[key] }
        }

        /// Whether the table holds an entry of `key`. Any thread.
        func holdsUnwritten(_ key: CacheKey) -> Bool {
            table.withLock { $0.contains(key) }
        }

        /// How many entries the table holds, and their bytes. Any thread.
        var unwrittenTotals: (count: Int, bytes: Int) {
            table.withLock { ($0.count, $0.bytes) }
        }

        /// The bytes of the table's entries whose key begins with `prefix` (a walk of the
        /// table). Any thread.
        /// The namespace prefixes of the keys with values still in the table.
        func unwrittenNamespacePrefixes() -> Set<CacheKey> {
            table.withLock { table in
                Set(table.keys.compactMap { key in key.namespacePrefixLength.map { key.leading($0) } })
            }
        }

        func unwrittenBytes(withPrefix prefix: CacheKey) -> Int {
            table.withLock { $0.all.reduce(0) { $1.key.hasPrefix(prefix) ? $0 + $1.bytes : $0 } }
        }

        /// Enters `e`, replacing any entry of its key. Queue only (a group's apply).
        func putUnwritten(_ e: consuming Unwritten) {
            // Moved into the table, not copied: a copy counts a reference for each object
            // the entry holds.
            var moving: Unwritten? = consume e
            table.withLock { $0.put(moving.take()!) }
        }

        /// Removes the entry of `key`; whether there was one. Queue only.
        @discardableResult
        func removeUnwritten(_ key: CacheKey) -> Bool {
            table.withLock { $0.remove(key) } != nil
        }

        /// Empties the table; how many entries it held. Queue only.
        func removeAllUnwritten() -> Int {
            table.withLock { t in
                defer { t.removeAll() }
                return t.count
            }
        }

        /// Changes the entry of `key` with `change`; the changed entry, nil without one.
        /// Queue only.
        func updateUnwritten(_ key: CacheKey, _ change: (inout Unwritten) -> Void) -> Unwritten? {
            table.withLock { $0.update(key, change) }
        }

        /// A touch of `key`'s unwritten value, under one hold of the table's lock (see
        /// `LocalStore.touchDiskCopy`): `.none` when the table has no entry; `.some(nil)`
        /// when it expired; the entry's meta (at `url`) after the touch otherwise, with
        /// `expiration` `.distantPast` when the touch expired it (the entry is removed).
        /// Queue only.
        func touchUnwritten(
            _ key: CacheKey, expiration: StorageExpiration, now: Date, keepingAbsolute: Bool, url: URL
        ) -> DiskStorage.FileMeta?? {
            let expired = expiration.isExpired || Lifetime.end(of: expiration, from: now) <= now
            return table.withLock { table -> DiskStorage.FileMeta?? in
                guard let e = table[key] else { return .none }
                guard e.isLive(at: now) else { return .some(nil) }
                if keepingAbsolute, e.isAbsolute { return .some(e.meta(url: url)) }
                if expired {
                    table.remove(key)
                    var meta = e.meta(url: url)
                    meta.expiration = .distantPast
                    return .some(meta)
                }
                let updated = table.update(key) { e in
                    e.expiresAt = Lifetime.end(of: expiration, from: now)
                    e.timeToLive = expiration.slidingTimeToLive(from: now)
                    e.countedFrom = now
                }
                return .some(updated?.meta(url: url))
            }
        }

        /// The live keys of the table that start with `prefix`, and (when `allKeys`)
        /// every key it holds, live or not, read under one hold of its lock. Any thread.
        func unwrittenKeys(prefix: CacheKey, at now: Date, allKeys: Bool) -> (live: [CacheKey], all: [CacheKey]) {
            table.withLock { ($0.liveKeys(prefix: prefix, at: now), allKeys ? $0.keys : []) }
        }

        /// A write too large for the journal went to its file directly (counted).
        func noteDirectWrite() {
            counters.withLock { $0.directWrites += 1 }
        }

        /// Notes what recovery found: records replayed, how long it took, entries dropped.
        func noteRecovery(records: Int, millis: Double, dropped: Int) {
            counters.withLock {
                $0.replayedRecords = records
                $0.replayMillis = millis
                $0.droppedEntries = dropped
            }
        }

        /// The store's counters, with the writer's and the table's, for `stats()`. Any
        /// thread.
        func stats() -> JournalStats {
            var s = counters.withLock { $0 }
            let w = writer.stats
            s.groups = w.groups
            s.records = w.records
            s.largestGroup = w.largestGroup
            s.groupSizes = w.groupSizes
            s.syncs = w.syncs
            s.syncFailures = w.syncFailures
            s.lastSyncLagMillis = Double(w.lastSyncLagNanos) / 1e6
            s.maxSyncLagMillis = Double(w.maxSyncLagNanos) / 1e6
            s.failedAppends = max(s.failedAppends, w.failedAppends)
            let (entries, bytes) = unwrittenTotals
            s.unwrittenEntries = entries
            s.unwrittenBytes = bytes
            s.bytes = journalBytes
            return s
        }
    }
}

// MARK: - The materializer
//
// The materializer writes the per-key files from the unwritten table,
// oldest journal record first, in small slices on the ioQueue, and moves the checkpoint
// so whole segments can be deleted. Only the newest version of a key is in the table,
// so a key set many times is written once. It rewrites an existing file in place
// rather than through a temporary file and a rename (no new inode, no flush before a
// rename), which the journal makes safe: see `materializeSlice`.
//
// Pacing. It runs as jobs of a few files each, so an acknowledgement waits for at most one
// slice. Below 30 % of the fuller bound it works only after 3 ms without a journaled write
// or a direct commit (files wait for a pause in the load; a direct commit of refused
// updates appends nothing but is load all the same, or the materializer would write files
// back to back under a stream of refused increments, each one the loops' next commit waits
// behind); from 30 % one file per millisecond; from
// 60 % four files per queue turn; from 90 % 32. While it waits for a pause it looks every
// 25 ms (`JournalConfig.materializerRest`), and a group commit that finds the bounds at 30 % cuts the rest
// short: each look is a timer and a queue thread woken, so a shorter period costs a
// stream of single small sets context switches.
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
// checkpoint syncs the journal before the old segments go. Copies are counted
// (`recordsCopiedForward`); what copying saves under a long set load is in
// Benchmarks/RESULTS.md, "The write-behind store: copy-forward and the materializer's
// pacing".
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

/// What the materializer writes into: the per-key files, and the cache state that
/// goes with them (the disk usage and size limit, the memory copy of an entry it
/// drops, the maintenance error count). The local store is one; the write-behind store
/// holds it only weakly, through the jobs it queues. Outside `LocalStore`, which conforms
/// to it: a type cannot conform to a protocol nested in itself. Every method is called on
/// the scheduler's queue.
protocol WriteBehindFileTier: AnyObject, Sendable {
    /// Writes `e`'s value to its file, or removes the file when `e` expired before it
    /// got there, replacing an existing file per `replacing`; counts the disk usage.
    func materialize(_ e: LocalStore.Unwritten, replacing: DiskStorage.FileReplacement) throws(CacheError)
    /// Files were written: the size limit may evict some.
    func didMaterialize()
    /// The memory copy of `key` goes with a dropped entry of the same `version`.
    func dropMemoryCopy(key: CacheKey, version: UInt64)
    func noteMaintenanceError()
    /// The store whose materializer writes into this tier (held strongly by the tier).
    var writeBehind: LocalStore.WriteBehind? { get }
    /// The cache folder, flushed before a checkpoint vouches for its files.
    var folderPath: String { get }
    func now() -> Date
}

extension LocalStore.WriteBehind {
    /// How long the ioQueue must have seen no journaled write before the materializer
    /// works at low pressure: under a steady load files wait, and are written when the
    /// load pauses or the bounds fill.
    static let idleNanos: UInt64 = 3_000_000

    /// Queues a tick unless one is queued (or ends a rest, see `MaterializerTurn`). Any thread.
    func kickMaterializer(_ tier: WriteBehindFileTier) {
        // Counted only while it runs, like every slice (see `IOScheduler`): a commit may
        // wait behind one slice, and a group commit kicks the materializer each time.
        if let generation = claimMaterializerTick() { enqueueTick(tier, after: nil, generation: generation) }
    }

    /// Queues the next slice; a `resting` one (the load has not paused) may be taken over
    /// by a group commit. Queue only.
    func scheduleMaterializer(_ tier: WriteBehindFileTier, after delay: DispatchTimeInterval? = nil, resting: Bool = false) {
        scheduler.assertOnQueue()
        let generation = noteMaterializerTickQueued(resting: resting)
        enqueueTick(tier, after: delay, generation: generation)
    }

    private func enqueueTick(_ tier: WriteBehindFileTier, after delay: DispatchTimeInterval?, generation: UInt64) {
        // Weak: a queued tick must keep neither the cache nor its store alive. The store is
        // reached through the cache, which holds it, so that nothing references the store
        // weakly: an object weakly referenced keeps its counts in a side table, and every
        // retain of it then takes the runtime's slow path (the transport's threads retain
        // the store on each direct write).
        let job: @Sendable () -> Void = { [weak tier] in
            guard let tier, let store = tier.writeBehind, store.beginMaterializerTick(generation) else { return }
            store.materializerTick(tier)
        }
        if let delay {
            scheduler.enqueue(after: delay, .slice, job)
        } else {
            scheduler.enqueue(.slice, job)
        }
    }

    /// One turn of the materializer: a few files (more as the bounds fill), then a
    /// checkpoint when it frees a segment, then the next turn behind whatever queued
    /// meanwhile, so an acknowledgement waits for at most one slice.
    private func materializerTick(_ tier: WriteBehindFileTier) {
        // While no write comes, this is what notices the journal's folder deleted under
        // the daemon; a write's own append notices it at once.
        writer.checkSegment()
        if writer.takeLoss() || rebuildPending {
            do throws(CacheError) { _ = try rebuild(then: []) } catch { tier.noteMaintenanceError() }
        }
        if isHeld {
            scheduleMaterializer(tier, after: .milliseconds(10))
            return
        }
        let (journalPressure, unwrittenPressure) = pressures()
        let pressure = max(journalPressure, unwrittenPressure)
        let idle = MonotonicClock.nanoseconds() &- lastWriteNanos >= Self.idleNanos
        if !idle, journalPressure >= 0.3, unwrittenPressure < 0.3,
           UInt64(table.withLock { $0.bytes }) * 4 <= journalBytes {
            // The journal is filling but what it holds unwritten is small (a quarter of it
            // at most, so copying frees several times what it writes): records of keys
            // rewritten since are superseded, and the few live old ones that pin the oldest
            // segment are cheaper to append again than to write to files (a file per key
            // costs a create or a rewrite; a record, its bytes in one append).
            if copyForward(limit: 1024, at: tier.now()) > 0 {
                checkpointIfUseful(tier, force: false)
                scheduleMaterializer(tier, after: .milliseconds(1))
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
            // Files wait this much longer after the load pauses (their records are in
            // the journal); the bounds filling ends the rest at once (`kickMaterializer`).
            scheduleMaterializer(tier, after: config.materializerRest, resting: true)
            return
        }
        let written = materializeSlice(files: files, into: tier)
        let empty = table.withLock { $0.count == 0 }
        let quiet = MonotonicClock.nanoseconds() &- lastCheckpointNanos >= 1_000_000_000
        checkpointIfUseful(tier, force: empty && quiet)
        if !empty {
            let paced = pressure < 0.6 && !idle
            scheduleMaterializer(tier, after: written == 0 ? .milliseconds(50) : paced ? .milliseconds(1) : nil)
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
    ///   such reader counts itself in `offQueueReaders` (`readingFiles`) before it looks
    ///   in the table and until its file is closed, and the rewrite happens only when the
    ///   count is 0 at the moment of the decision; otherwise the file is replaced by a
    ///   rename, which a reader holding the old file never notices. A reader that counts
    ///   itself after the decision finds the key in the table (it is there from before
    ///   the decision until after the write; the table's lock orders its lookup after the
    ///   entry went in, and an entry it finds gone was written first) and answers from it
    ///   without opening the file; the listing skips the files the table names.
    ///
    /// Direct writes (values of `directValueSize` and more, written before their reply),
    /// forced-extension files and every other write keep temp + rename: no journal
    /// record stands behind them.
    @discardableResult
    func materializeSlice(files: Int, into tier: WriteBehindFileTier) -> Int {
        scheduler.assertOnQueue()
        var handled = 0
        while handled < files, let e = table.withLock({ $0.oldest() }) {
            do throws(CacheError) {
                // The decision: `e` stays in the table until after the write below.
                let quiet = offQueueReaders.load(ordering: .sequentiallyConsistent) == 0
                try tier.materialize(e, replacing: quiet ? .inPlace : .rename)
                table.withLock { $0.remove(e.key, ifVersion: e.entry.version) }
                counters.withLock { $0.filesWritten += 1 }
            } catch {
                if !dropIfNeverWritable(e, error, tier) {
                    counters.withLock {
                        $0.fileWriteFailures += 1
                        $0.lastFileWriteFailure = error
                    }
                    tier.noteMaintenanceError()
                    break
                }
            }
            handled += 1
        }
        if handled > 0 { tier.didMaterialize() }
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
    /// applies the same rule to keys (`LocalStore.openJournal`). Returns whether it
    /// dropped `e`. Queue only.
    private func dropIfNeverWritable(_ e: LocalStore.Unwritten, _ error: CacheError, _ tier: WriteBehindFileTier) -> Bool {
        switch error {
        case .invalidKey:
            break
        case .cannotCreateCacheFile(_, let code) where [ENAMETOOLONG, EISDIR, ELOOP, EINVAL].contains(code):
            break
        default:
            return false
        }
        table.withLock { $0.remove(e.key, ifVersion: e.entry.version) }
        tier.dropMemoryCopy(key: e.key, version: e.entry.version)
        counters.withLock { $0.droppedEntries += 1 }
        config.onDroppedEntry?(e.key, error)
        return true
    }

    /// Appends anew the records of up to `limit` of the oldest unwritten entries (live
    /// at `now`, with their records in a segment before the one being written), with one
    /// append, and points the entries at the new records, so the checkpoint can pass the
    /// segments that held the old ones without their files being written. Replay
    /// meets the old record, then the new one: the same version and lifetime, applied
    /// twice to the same result. Returns how many it copied. Queue only.
    @discardableResult
    func copyForward(limit: Int, at now: Date) -> Int {
        scheduler.assertOnQueue()
        let current = writer.position.segment
        let entries = table.withLock { $0.oldestLive(limit: limit, at: now, before: current) }
        guard !entries.isEmpty else { return 0 }
        let records = entries.map(\.journalRecord)
        do throws(CacheError) {
            let end = try append(records)
            moveStarts(of: entries, to: records, endingBefore: end)
        } catch {
            // Counted by the append; the materializer writes files instead meanwhile.
            return 0
        }
        counters.withLock { $0.recordsCopiedForward += entries.count }
        return entries.count
    }

    /// Writes a checkpoint when it lets a segment go (or when `force` and it moved),
    /// then deletes the segments before it. The files it vouches for are flushed first
    /// unless fsync is `never`, so a checkpoint never outruns the files it covers.
    func checkpointIfUseful(_ tier: WriteBehindFileTier, force: Bool, at explicit: Journal.Position? = nil) {
        scheduler.assertOnQueue()
        // Under the write book's lock: an inline store appends and enters the table under
        // it, so the journal's end is never read between the two.
        var candidate = scheduler.withBookHeld { () -> Journal.Position in
            let oldestTable = table.withLock { $0.oldestStart }
            var c = explicit ?? writer.position
            if let p = oldestTable, p < c { c = p }
            return c
        }
        if let p = oldestUnapplied, p < candidate { candidate = p }
        if let last = lastCheckpoint, candidate <= last { return }
        let oldestSegment = self.oldestSegment ?? candidate.segment
        let freesSegment = candidate.segment > oldestSegment
        let now = MonotonicClock.nanoseconds()
        guard freesSegment || force else { return }
        if config.fsync != .never {
            Self.syncFileSystem(of: tier.folderPath)
            // Records copied forward must be on the device before the segments that held
            // their older copies go (the journal may be on another file system).
            try? writer.sync()
        }
        var deleted = 0
        do throws(CacheError) {
            if let explicit, candidate == explicit {
                // Everything is in (synced) files: the segments can go even before the
                // checkpoint is written, which on a full disk may not fit until they have.
                deleted += try writer.deleteSegments(before: candidate)
            }
            try writeCheckpoint(candidate, at: now)
            deleted += try writer.deleteSegments(before: candidate)
        } catch {
            tier.noteMaintenanceError()
        }
        if deleted > 0 { forgetGoneSegments() }
        let wrote = lastCheckpointNanos == now
        counters.withLock {
            $0.checkpoints += wrote ? 1 : 0
            $0.segmentsDeleted += deleted
        }
    }

    private static func syncFileSystem(of path: String) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = hc_syncfs(fd)
        close(fd)
    }

    /// Writes every unwritten entry to its file and checkpoints: for tests, a clean
    /// shutdown, and whole-cache work that wants the files complete. Queue only.
    func materializeAll(into tier: WriteBehindFileTier) {
        while materializeSlice(files: 256, into: tier) > 0 {}
        // Everything is in files: a new segment lets the current one go too (this is how
        // a trim after a full disk gives the journal its space back).
        let empty = table.withLock { $0.count == 0 } && oldestUnapplied == nil
        if empty, writer.position.offset > UInt64(Journal.SegmentHeader.size),
           let next = try? writer.retire()
        {
            checkpointIfUseful(tier, force: true, at: next)
        } else {
            checkpointIfUseful(tier, force: true)
        }
    }

    /// Nil when there is room; otherwise gives the materializer the queue until there
    /// is, or until `backlogWait` has passed (then the refusal, counted). Queue only.
    func waitForRoom(_ tier: WriteBehindFileTier) -> CacheError? {
        guard pressure() >= 1 else { return nil }
        counters.withLock { $0.stalls += 1 }
        let deadline = MonotonicClock.nanoseconds() + UInt64(config.backlogWait * 1e9)
        while pressure() >= 1 {
            if MonotonicClock.nanoseconds() >= deadline {
                counters.withLock { $0.backlogRefusals += 1 }
                return .diskBacklog(journalBytes: journalBytes, unwrittenBytes: UInt64(table.withLock { $0.bytes }))
            }
            if isHeld || materializeSlice(files: 64, into: tier) == 0 {
                usleep(2000)
            }
            checkpointIfUseful(tier, force: false)
        }
        return nil
    }
}
