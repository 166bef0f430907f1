// The write-behind store: the journal's writer, the unwritten table, and the state the
// journal keeps between group commits, checkpoints and the materializer. The hybrid cache
// composes one (nil without a journal); HybridCache+Journal.swift opens it at start,
// HybridCache+GroupCommit.swift appends to it, HybridCache+Materializer.swift drains it.

import Foundation
import Synchronization

extension HybridCache {
    /// The journal's writer and the write-behind state of one cache.
    ///
    /// Threading: `table`, `counters` and the private `appends`, `evicted` and
    /// `materializerScheduled` are `Locked` (any thread); `offQueueReaders` and `recentPressure` are atomics; the
    /// writer is thread-safe. What only the ordered work may touch (which records are
    /// journaled but not applied, the last checkpoint, a pending rebuild) is `QueueState`,
    /// private, reached only through `onQueue`, which checks that it runs on the
    /// scheduler's queue. `@unchecked Sendable`: `queueState` is touched only on the
    /// IOScheduler's queue (checked in `onQueue`); every other stored property is a
    /// `let` of a `Sendable` type.
    final class WriteBehind: @unchecked Sendable {
        let writer: Journal.Writer
        private let directory: String
        let config: JournalConfig
        let table = Locked(UnwrittenTable())
        let counters = Locked(JournalStats())
        let versions: VersionClock
        /// Disk reads that may open cache files off the ioQueue, in flight; while any
        /// is, the materializer renames instead of rewriting in place (see
        /// `HybridCache.materializeSlice`). Any thread.
        let offQueueReaders = Atomic<Int>(0)
        /// The order every call that touches `queueState` runs in.
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
        /// The materializer has a tick queued (set by whoever queues one).
        private let materializerScheduled = Locked(false)
        /// Files the size limit evicted while their keys' set records may still be past the
        /// checkpoint, by name, with the journal's end at the eviction: a restart would
        /// replay such a record and bring the evicted value back, which is harmless for a
        /// cache unless a newer memory-only value of the key was stored without a record
        /// (`store(toDisk: false)` inline). So while a key's name is here, such a store is
        /// queued, and journals its delete. Dropped as the checkpoint passes them.
        private let evicted = Locked([String: Journal.Position]())

        /// Notes files the size limit just removed (see `evicted`). ioQueue only.
        func noteEvicted(names: [String]) {
            guard !names.isEmpty else { return }
            let end = writer.position
            evicted.withLock { for name in names { $0[name] = end } }
        }

        /// Whether the file `name` was evicted with records of its key perhaps still to
        /// replay. Any thread.
        func mayReplayEvicted(name: @autoclosure () -> String) -> Bool {
            guard !evicted.withLock({ $0.isEmpty }) else { return false }
            // The name (a SHA-256) is computed outside the lock.
            let name = name()
            return evicted.withLock { $0[name] != nil }
        }

        /// The journal lost its segments and the table's entries are not in it again yet
        /// (see `rebuild`): the next append, or the materializer's tick, rebuilds first.
        var rebuildPending: Bool { onQueue { $0.rebuildPending } }

        /// The last checkpoint written, or found at start.
        var lastCheckpoint: Journal.Position? { onQueue { $0.lastCheckpoint } }

        /// When the last checkpoint was written (monotonic ns; 0: none since start).
        var lastCheckpointNanos: UInt64 { onQueue { $0.lastCheckpointNanos } }

        /// Writes the checkpoint file at `candidate` and notes it, `nanos` (monotonic)
        /// now, forgetting the evicted names it passes (see `evicted`). Queue only.
        func writeCheckpoint(_ candidate: Journal.Position, at nanos: UInt64) throws(CacheError) {
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
        var oldestSegment: UInt64? { appends.withLock { $0.segmentBytes.keys.min() } }

        /// Claims the one queued materializer tick: true when none was queued (the caller
        /// queues it). Any thread.
        func claimMaterializerTick() -> Bool {
            materializerScheduled.withLock { scheduled -> Bool in
                defer { scheduled = true }
                return !scheduled
            }
        }

        /// Notes a materializer tick queued (`true`) or begun (`false`).
        func noteMaterializerTick(queued: Bool) {
            materializerScheduled.withLock { $0 = queued }
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
        func rebuild(then records: [Journal.Record]) throws(CacheError) -> Journal.Position {
            // Until an append of the rebuilt records succeeds, every append retries it.
            onQueue { $0.rebuildPending = true }
            let entries = table.withLock { Array($0.entries.values) }
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
        func forgetGoneSegments() {
            guard let live = try? Set(Journal.SegmentName.list(in: directory)) else { return }
            appends.withLock { a in
                for sequence in Array(a.segmentBytes.keys) where !live.contains(sequence) { a.segmentBytes[sequence] = nil }
            }
        }

        /// Points each of `entries` at its record among `restated`, which were appended
        /// together, followed by `trailing`, ending at `end`.
        func moveStarts(
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

        func noteAppend(ending end: Journal.Position) {
            let now = MonotonicClock.nanoseconds()
            appends.withLock {
                $0.segmentBytes[end.segment] = max($0.segmentBytes[end.segment] ?? 0, end.offset)
                $0.lastWriteNanos = now
            }
        }

        /// - Parameter lastCheckpoint: the checkpoint recovery found.
        init(
            writer: Journal.Writer, directory: String, config: JournalConfig, versions: VersionClock,
            scheduler: IOScheduler, lastCheckpoint: Journal.Position?
        ) {
            self.writer = writer
            self.directory = directory
            self.config = config
            self.versions = versions
            self.scheduler = scheduler
            queueState = QueueState(lastCheckpoint: lastCheckpoint)
        }

        var journalBytes: UInt64 { appends.withLock { $0.journalBytes } }

        var isHeld: Bool { config.materializerHeld?() ?? false }

        /// How full the fuller bound is, 0...1 and beyond. Also kept in `recentPressure`.
        func pressure() -> Double {
            let (journal, unwritten) = pressures()
            return max(journal, unwritten)
        }

        /// How full each bound is: the journal's bytes and the unwritten bytes, 0...1 and
        /// beyond. Also refreshes `recentPressure` (the fuller of the two).
        func pressures() -> (journal: Double, unwritten: Double) {
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
    }
}
