// Group commit: how writes with the journal on reach it and are applied. A journaled write
// joins the scheduler's journal queue with its ticket; when its job runs first among the
// writes queued right after it with nothing between them (the run at the head of the
// order, `IOScheduler.takeRun`), it appends their records with one write (Redis's rule:
// one turn, one write, replies after), applies each in order and answers them; the jobs
// of the others find their write done. A write queued behind any other job (a read, an
// update, maintenance) is never taken ahead of it. A caller that gathers its own writes
// (the transport, the writes of one read burst) commits them itself with `commitDirect`
// (in `LocalStore+DirectWrites.swift`), on the ioQueue, waiting on its own thread: no
// hop to the ioQueue's thread and back.
//
// The invariant both keep: journal order is apply order is enqueue order. Every write is
// applied by the same call that appended its record, before any later record is appended.
//
// A group begins its writes' tasks (a task cancelled before that is skipped and never
// journaled; after it, a cancel gets `cancelled(started: true)` and the write stands),
// stamps their times and versions (`VersionClock`), appends all their records with one
// `write`, applies them in order, and answers them. A failed append (ENOSPC, EIO) fails
// every write of the group with `cannotWriteJournal` and its errno (-32002); none is
// applied; reads go on. Records: `set` for a disk store, `delete` for a remove from disk
// and for a memory-only store (it drops the disk copy), `lifetime` for a touch, `clear` for
// a clear of the disk. Removes, clears, trims and sweeps change the files right away,
// before the reply, so "deletes are applied to files before their segment goes" holds
// trivially. Forced extensions bypass the journal (their files are written before the
// reply): their records could not name the file.
//
// Writes inside their own job. `incr`, `add`, `cas` and `setMany` read and then write in
// one job (or, for the first three, in their loop's direct commit), so nothing may run
// between their steps and they cannot join a group other jobs commit. Their new values go
// through `applyInJob`: the job's records are appended with one write, then applied exactly
// as a group's. Writes queued meanwhile are not taken: their jobs come later, so their
// records follow.
//
// No single-set inline writes: a set run on the caller's thread whenever the queue is idle
// would be a `write(2)` of its own under concurrency, which defeats group commit. The
// direct path commits a read burst's sets as one group instead, still inside the queue's
// order.
//
// Bounds and back-pressure. `--journal-limit` (bytes of segments, default 256 MiB; segments
// at most a quarter of it, 16 MiB by default) and `--unwritten-limit` (bytes in the table,
// default 64 MiB). A group that finds either bound reached gives the materializer the queue
// (slices of 64 files, checkpoints) for up to `backlogWait` (2 s); if the bound still
// holds, the group's writes fail with -32005 `diskBacklog` (`journalBytes`,
// `unwrittenBytes`) and are not applied. Nothing acknowledged is dropped.

import Foundation

extension LocalStore {
    /// A write with the journal on: the operation and what group commit decided for it.
    /// Created by its caller; `ticket` is set once, before its job is queued; every other
    /// `var` is written and read on the ioQueue only (`@unchecked Sendable`: the ioQueue
    /// guards them).
    final class PendingWrite: @unchecked Sendable {
        /// The write; the group's journal stamps it in place (`WriteOperation.stamp`, through
        /// `withOperation`) before it is journaled or applied.
        private(set) var operation: WriteOperation
        /// What the write holds in the write book until it is applied.
        let scope: WriteScope
        /// Nil for a write its caller commits itself (it cannot be cancelled).
        let task: CacheTask?
        /// Takes the outcome once the write is applied and uncounted (nil: cancelled before
        /// it began); runs on the ioQueue. Nil for a write its caller commits itself.
        let finish: (@Sendable (Result<WriteOutcome, CacheError>?) -> Void)?
        /// A group commit has taken it. Set under the scheduler's book lock, on the ioQueue.
        var taken = false
        /// Its place in the scheduler's order (set when it is enqueued).
        var ticket: UInt64 = 0
        /// Its task began (false: cancelled before, skipped and not journaled).
        var began = false
        /// Where its record starts, when it has one.
        var start: Journal.Position?
        /// The group's append or the bound refused it.
        var failure: CacheError?

        init(
            _ operation: WriteOperation, scope: WriteScope, task: CacheTask?,
            finish: (@Sendable (Result<WriteOutcome, CacheError>?) -> Void)?
        ) {
            self.operation = operation
            self.scope = scope
            self.task = task
            self.finish = finish
        }

        /// `body` of the operation, lent where it lies: reading a class's stored property
        /// as a value copies it.
        func withOperation<R>(_ body: (inout WriteOperation) -> R) -> R {
            body(&operation)
        }
    }

    /// Queues a write with the journal on: the pending write joins the scheduler's journal
    /// queue, and its job commits the run it heads (see `IOScheduler.takeRun`).
    func enqueueJournaled<T: Sendable>(
        _ operation: WriteOperation, scope: WriteScope, _ callbackQueue: CallbackQueue,
        _ priority: Operation.QueuePriority, _ completion: (@Sendable (Result<T, CacheError>) -> Void)?,
        _ map: @escaping @Sendable (WriteOutcome) -> T
    ) -> CacheTask {
        let task = makeTask(callbackQueue, priority, completion)
        let pending = PendingWrite(operation, scope: scope, task: task) { [self] outcome in
            if let outcome { deliver(outcome.map(map), task: task, callbackQueue, priority, completion) }
        }
        // A journaled set's job is a short one touching no file (it commits a run, as a
        // direct commit behind it would wait for anyway), so it is not counted for
        // `isIdle`: counted, one set that had to be queued would keep the next ones off the
        // direct path for as long as sets keep coming. Every other write may do file I/O
        // when applied (an unlink, file times, a large value's file, a trim) and is
        // counted, so a loop does not wait for it.
        let short = operation.isJournaledSet(directValueSize: writeBehind?.directValueSize ?? 0)
        scheduler.enqueueJournaled(pending, countedWhileQueued: !short) { [self] ticket in commitRun(startingAt: ticket) }
        return task
    }

    /// Applies `operations`, in order, from inside a job already counted in the write book
    /// (a conditional store, `incr`, `setMany`: jobs that read and then write, so nothing
    /// may run between their steps): their records are appended with one write, then each
    /// is applied as a group commit applies it (a journaled set goes to memory and the
    /// unwritten table; its file comes later). Writes queued by others are not taken: their
    /// jobs come later in the queue (a run is only ever taken by its own first job), so
    /// their records follow these. Without a journal, `perform`. ioQueue only.
    func applyInJob(_ operations: [WriteOperation]) -> [Result<WriteOutcome, CacheError>] {
        scheduler.assertOnQueue()
        guard let wb = writeBehind else { return operations.map { perform($0) } }
        // The scope is unused here: the job's caller counted the job in the write book.
        let group = operations.map { PendingWrite($0, scope: .wholeCache, task: nil, finish: nil) }
        for p in group {
            p.taken = true
            p.began = true
        }
        journal(group, wb)
        var sets = 0
        defer { count(sets: sets) }
        return group.map { apply($0, sets: &sets) }
    }

    /// Takes the run of journaled writes that the job of `ticket` heads and commits it.
    /// ioQueue only, from that job.
    func commitRun(startingAt ticket: UInt64) {
        let group = scheduler.takeRun(startingAt: ticket)
        guard !group.isEmpty else { return }
        let outcomes = commit(group)
        for (p, outcome) in zip(group, outcomes) { p.finish?(outcome) }
    }

    /// Commits a group, every write of which is counted in the write book: begins their
    /// tasks, appends their records with one write, applies each in order, then uncounts
    /// them all. Returns each write's outcome (nil for one cancelled before it began).
    /// A failed append fails every write of the group; none of them is applied.
    func commit(_ group: [PendingWrite]) -> [Result<WriteOutcome, CacheError>?] {
        scheduler.assertOnQueue()
        for p in group {
            p.taken = true
            p.began = p.task?.begin() ?? true
        }
        if let wb = writeBehind { journal(group, wb) }
        var sets = 0
        let outcomes = group.map { p in p.began ? apply(p, sets: &sets) : nil }
        count(sets: sets)
        scheduler.finish(group.map(\.scope))
        return outcomes
    }

    /// Counts the journaled sets a group applied, once for the group: the counters' lock
    /// is taken by every reader of `cache.stats` as well.
    private func count(sets: Int) {
        if sets > 0 { counters.withLock { $0.sets += sets } }
    }

    /// Stamps the group's writes, waits for room under the bounds, and appends their
    /// records with one write.
    ///
    /// The group's versions are reserved at once (`VersionClock.reserve`): one reading of
    /// the clock and one hold of its lock for the group, not one of each per write.
    private func journal(_ group: [PendingWrite], _ wb: WriteBehind) {
        let now = config.disk.clock.now()
        var run = versions.reserve(group.count)
        var records: [Journal.Record] = []
        var owners: [PendingWrite] = []
        records.reserveCapacity(group.count)
        for p in group where p.began {
            let record = p.withOperation { operation -> Journal.Record? in
                operation.stamp(now, versions: &run)
                return journalRecord(for: operation, wb)
            }
            if let record {
                records.append(record)
                owners.append(p)
            }
        }
        guard !records.isEmpty else { return }
        let size = records.reduce(0) { $0 + Journal.RecordCodec.framedSize($1) }
        if let refusal = wb.waitForRoom(self) {
            for p in owners { p.failure = refusal }
            return
        }
        let end: Journal.Position
        do throws(CacheError) {
            end = try wb.append(records)
        } catch {
            for p in owners { p.failure = error }
            return
        }
        // Refreshes `recentPressure` with this group counted, so the next direct commit
        // is not taken on a reading from before it.
        _ = wb.pressure()
        var offset = end.offset - UInt64(size)
        for (p, record) in zip(owners, records) {
            let start = Journal.Position(segment: end.segment, offset: offset)
            p.start = start
            wb.noteUnapplied(start)
            offset += UInt64(Journal.RecordCodec.framedSize(record))
        }
        wb.kickMaterializer(self)
    }

    /// The record a write leaves in the journal; nil when it needs none (a write to
    /// memory only, a forced extension (those files are written before the reply), a
    /// value written straight to its file, the whole-cache maintenance that only drops
    /// what no read may return).
    private func journalRecord(for operation: WriteOperation, _ wb: WriteBehind) -> Journal.Record? {
        switch operation {
        case .store(let s):
            guard s.forcedExtension == nil else { return nil }
            guard s.toDisk else { return .delete(key: s.key) }
            guard s.entry.bytes.count < wb.directValueSize else { return nil }
            return LocalStore.setRecord(key: s.key, entry: s.entry, expiresAt: s.expiresAt!, timeToLive: s.timeToLive)
        case .touch(let t):
            guard t.forcedExtension == nil else { return nil }
            return LocalStore.lifetimeRecord(
                key: t.key, expiresAt: t.expiresAt!, timeToLive: t.timeToLive, keepsAbsolute: t.keepsAbsolute)
        case .remove(let key, _, let fromDisk, let forcedExtension):
            guard fromDisk, forcedExtension == nil else { return nil }
            return .delete(key: key)
        case .clear(_, let disk):
            return disk ? .clear : nil
        case .writeBack, .removeExpired, .trim, .sweep:
            return nil
        }
    }

    static func nanos(_ date: Date) -> Int64 {
        date == .distantFuture ? -1 : max(0, clampedNanos(date.timeIntervalSince1970))
    }

    /// Seconds as nanoseconds, clamped to what an Int64 holds (a far date or an
    /// "already expired" TTL must not trap).
    static func clampedNanos(_ seconds: Double) -> Int64 {
        let n = seconds * 1e9
        guard n.isFinite else { return n > 0 ? .max : .min }
        return n >= 9.2e18 ? .max - 1 : n <= -9.2e18 ? .min + 1 : Int64(n)
    }

    /// The journal record of a set of `entry` under `key` with this lifetime (`expiresAt`
    /// `.distantFuture`: never) and original TTL.
    static func setRecord(key: CacheKey, entry: CacheEntry, expiresAt: Date, timeToLive: TimeInterval?) -> Journal.Record {
        .set(
            key: key, flags: entry.flags, version: entry.version, expiresAtNanos: nanos(expiresAt),
            ttlNanos: ttlNanos(timeToLive), value: entry.bytes)
    }

    /// The journal record of a new lifetime of `key` (a touch, a write-back); see
    /// `Journal.Record.lifetime`.
    static func lifetimeRecord(key: CacheKey, expiresAt: Date, timeToLive: TimeInterval?, keepsAbsolute: Bool) -> Journal.Record {
        .lifetime(key: key, expiresAtNanos: nanos(expiresAt), ttlNanos: ttlNanos(timeToLive), keepsAbsolute: keepsAbsolute)
    }

    /// A time-to-live as records keep it: -1 for none (never, or absolute).
    static func ttlNanos(_ timeToLive: TimeInterval?) -> Int64 {
        timeToLive.map { clampedNanos(max(0, $0)) } ?? -1
    }

    /// Applies a write of a group being committed, in the group's order. A journaled set
    /// adds itself to `sets`, which the caller counts for the whole group.
    private func apply(_ p: PendingWrite, sets: inout Int) -> Result<WriteOutcome, CacheError> {
        guard let wb = writeBehind else { return perform(p.operation) }
        if let failure = p.failure {
            if p.start != nil { wb.popUnapplied() }
            return .failure(failure)
        }
        let start = p.start
        defer { if start != nil { wb.popUnapplied() } }
        return p.withOperation { stamped in
            if case .store(let s) = stamped, s.toDisk, s.forcedExtension == nil {
                if let start {
                    sets += 1
                    let result = storeUnwritten(s, start: start, wb)
                    written(s.key)
                    return result.map { .stored($0) }
                }
                // Too large to journal: the file first (which supersedes any unwritten value,
                // see `supersedeUnwritten`).
                let result = perform(stamped, journaled: false)
                if case .success(.stored(let r)) = result, r.stored {
                    wb.noteDirectWrite()
                }
                return result
            }
            return perform(stamped, journaled: start != nil)
        }
    }

    /// A journaled set: memory and the unwritten table; the file comes later. Its caller
    /// counts it in `sets`; its namespace's count is taken here, inside the memory store.
    private func storeUnwritten(_ s: WriteOperation.Store, start: Journal.Position, _ wb: WriteBehind) -> Result<StoreResult, CacheError> {
        let now = s.countedFrom!
        let expiresAt = s.expiresAt!
        guard !s.expiration.isExpired, expiresAt > now else {
            // Already expired: nothing stored; an older value must not outlive this write.
            // The record stays in the table so the file is removed before its segment goes.
            memoryStorage.countSet(forKey: s.key)
            memoryStorage.remove(forKey: s.key)
            wb.putUnwritten(Unwritten(key: s.key, entry: s.entry, expiresAt: now, timeToLive: 0, countedFrom: now, start: start))
            return .success(StoreResult(stored: false, size: s.entry.bytes.count, expiresAt: nil, version: nil))
        }
        // Computed, not stored: read once.
        let timeToLive = s.timeToLive
        wb.putUnwritten(Unwritten(
            key: s.key, entry: s.entry, expiresAt: expiresAt, timeToLive: timeToLive, countedFrom: now, start: start))
        memoryStorage.store(
            s.entry, forKey: s.key, residency: s.memoryExpiration,
            mirroring: .init(
                expiresAt: expiresAt, timeToLive: timeToLive, extendedAt: now,
                diskExpiresAt: expiresAt, forcedExtension: nil),
            countingSet: true)
        return .success(StoreResult(
            stored: true, size: s.entry.bytes.count, expiresAt: HybridCache.optionalDate(expiresAt), version: s.entry.version))
    }
}
