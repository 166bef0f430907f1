// The one write path of this host's keys. Every change to either tier (store, touch,
// remove, clear, removeExpired, trim, the sweep, the memory-only store and the
// write-back of extended lifetimes) is a `WriteOperation` value, and `perform(_:)` is
// the one function that applies it, on the ioQueue (the inline memory-only store, which
// the spec lets run at arrival, goes through it too, under the write book's lock).
// Nothing else writes a tier. This is the seam where a write-ahead journal appends each
// operation before it is applied and before its reply goes out.
//
// One lifetime per entry. The local store owns an entry's lifetime; the memory node keeps
// it (`MemoryStorage.Node`), and a read answered from memory extends it there without
// touching the file, so the file's times lag behind. They catch up by write-back, lazily
// but surely:
//
// - Threshold: after an extension, if the file has at most half of the new remaining
//   lifetime left (for `cacheTime`: half the TTL has passed since the file was last
//   updated), or the extension shortened the lifetime, the node's lifetime goes into the
//   memory tier's pending set. A hot key costs about two metadata writes per TTL, whatever
//   its read rate.
//
// - Departure: when a node leaves memory (eviction, residency end, a clear of memory, a
//   remove with `fromDisk: false`), the same threshold decides. Without it a full memory
//   tier turns every disk hit into a write: the hit evicts another entry, whose few seconds
//   of slide on a days-long lifetime would be written back and journaled each time.
//
// - Batched: when the set stops being empty, the memory tier calls its handler (no lock
//   held), which queues one job; it takes the whole set as one `.writeBack`: one `futimens`
//   per file (`DiskStorage.Backend.writeBack`, metadata only, never creating a file), a
//   record of a key stored, touched or removed since dropped by generation. With the
//   journal on, the job first appends a `lifetime` record per key (one write for the
//   batch), so a restart that replays the key's set record ends on the extended lifetime.
//
// - Maintenance and shutdown: `removeExpired`, `trim`, the after-store size check and the
//   sweep first write back every lifetime ahead of its file, then judge files, sparing
//   those of entries memory still vouches for (`liveLifetimes`); trim orders files by the
//   later of the file's and memory's last access. `shutdown()` writes back everything.
//
// A disk hit reads the file with `.none` and computes the extension the same way, putting
// the value back as a resident copy whose `diskExpiresAt` is the file's; a synchronous disk
// read of a key with a pending write-back goes to the queue instead, behind the job that
// writes it.
//
// What a crash or a departure can lose, the bound: a file's expiration is never less than
// half of the remaining lifetime memory last promised for it (the threshold), so a crash,
// or an eviction followed by a disk read, loses at most half of an entry's remaining
// lifetime (half a TTL for a sliding entry), plus the full extension of write-backs due but
// still queued at the kill. The read is then a miss, never a stale hit: write-backs carry
// only lifetimes memory computed, and a shortening is written back at once. A clean
// shutdown loses nothing.
//
// Cost, counted (`HybridCacheWriteBackCostTests`: 1,000 hot keys read 10,000 times a second
// from memory, on a ManualClock; Benchmarks/RESULTS.md "The write-back cost of sliding
// lifetimes"): 500 metadata writes/s over the first four TTLs at a 3 s TTL, 29/s at 60 s;
// the steady state is 2 x keys / TTL per second (667/s at 3 s, 33/s at 60 s), independent
// of the read rate (without the threshold: 10,000/s). Tested on one ManualClock for both
// tiers in `HybridCacheLifetimeTests` (and the node alone in `MemoryStorageTests`).
//
// An absolute lifetime (`.date`) has no `timeToLive`: reads and touches without an
// expiration leave it, so it needs no write-back; the kind travels in the node, the
// unwritten table, the journal's records and the file's times.

import Foundation

extension LocalStore {
    /// One write, as a plain value: everything a journal record of it needs.
    enum WriteOperation: Sendable {
        /// A set: the value goes to memory and, unless `toDisk` is false, to disk.
        case store(Store)
        /// A new expiration counted from `Touch.countedFrom`, without touching the value.
        case touch(Touch)
        /// Lifetimes that memory extended, written into the disk copies' file times.
        case writeBack([MemoryStorage.WriteBack])
        case remove(key: CacheKey, fromMemory: Bool, fromDisk: Bool, forcedExtension: String?)
        case clear(memory: Bool, disk: Bool)
        case removeExpired(memory: Bool, disk: Bool, referenceDate: Date?)
        case trim
        /// The periodic sweep: departed memory copies, expired files, the size limit.
        case sweep

        struct Store: Sendable {
            var key: CacheKey
            /// The bytes and the flags (the wire encoding) kept with them.
            var entry: CacheEntry
            var toDisk: Bool
            /// The entry's expiration (the disk copy's; for `toDisk: false`, unused).
            var expiration: StorageExpiration
            /// The memory expiration: residency for a disk-backed entry, the lifetime of a
            /// memory-only one.
            var memoryExpiration: StorageExpiration
            var forcedExtension: String?
            /// The instant the expirations count from; `perform` fills it when nil.
            var countedFrom: Date?
            /// True when `expiration` is a `.date` that only carries the instant a sliding
            /// lifetime has reached (an update keeping the live entry's lifetime): the
            /// entry keeps sliding rather than becoming absolute.
            var keepsSliding = false

            /// Whether the lifetime ends at a fixed instant that no read moves.
            var isAbsolute: Bool { expiration.isAbsolute && !keepsSliding }
            /// The expiry instant (as the disk tier rounds it) and the span a sliding read
            /// counts again (nil: none, for never and absolute lifetimes).
            var expiresAt: Date? { countedFrom.map { Lifetime.end(of: expiration, from: $0) } }
            var timeToLive: TimeInterval? {
                countedFrom.flatMap { isAbsolute ? nil : expiration.timeToLive(from: $0) }
            }
        }

        struct Touch: Sendable {
            var key: CacheKey
            /// The new expiration of the entry (its disk copy's).
            var expiration: StorageExpiration
            /// The new memory expiration; nil keeps the memory copy's own.
            var memoryExpiration: StorageExpiration?
            /// The new lifetime of an entry held in memory only; nil keeps its own.
            var memoryOnlyExpiration: StorageExpiration?
            var forcedExtension: String?
            /// The instant the expiration counts from; `perform` fills it when nil.
            var countedFrom: Date?
            /// True when `expiration` is only the default (the caller named none): an
            /// entry whose lifetime is absolute keeps it, and the touch is an access only.
            /// An explicit expiration replaces the lifetime and its kind.
            var keepsAbsolute = false

            /// The new expiry instant.
            var expiresAt: Date? { countedFrom.map { Lifetime.end(of: expiration, from: $0) } }
            /// The new span a sliding read counts again (nil for never and absolute).
            var timeToLive: TimeInterval? { countedFrom.flatMap { expiration.slidingTimeToLive(from: $0) } }
        }

        /// A set whose value goes to the journal (and its file later): applying it
        /// touches memory and the unwritten table, no file.
        func isJournaledSet(directValueSize: Int) -> Bool {
            guard case .store(let s) = self else { return false }
            return Self.journalsValue(
                toDisk: s.toDisk, forcedExtension: s.forcedExtension, size: s.entry.bytes.count,
                directValueSize: directValueSize)
        }

        /// Whether a store with these settings puts its value in the journal.
        static func journalsValue(toDisk: Bool, forcedExtension: String?, size: Int, directValueSize: Int) -> Bool {
            toDisk && forcedExtension == nil && size < directValueSize
        }

        /// The same operation with every relative time resolved against `now`, and a store
        /// given its entry's version from `versions` (unless it carries one already).
        func stamped(_ now: Date, versions: VersionClock) -> WriteOperation {
            var operation = self
            operation.stamp(now, versions: versions)
            return operation
        }

        /// `stamped`, in place: the payload is moved out and back, not copied (a copy
        /// counts a reference for each object it holds).
        mutating func stamp(_ now: Date, versions: VersionClock) {
            stamp(now) { versions.next() }
        }

        /// `stamp`, a store's version taken from `run` (one the group reserved).
        mutating func stamp(_ now: Date, versions run: inout VersionClock.Run) {
            stamp(now) { run.take() }
        }

        private mutating func stamp(_ now: Date, version: () -> UInt64) {
            switch consume self {
            case .store(var s):
                if s.countedFrom == nil { s.countedFrom = now }
                if s.entry.version == 0 { s.entry.version = version() }
                self = .store(s)
            case .touch(var t):
                if t.countedFrom == nil { t.countedFrom = now }
                self = .touch(t)
            case let other:
                self = other
            }
        }
    }

    /// What applying a write produced.
    enum WriteOutcome: Sendable {
        case stored(StoreResult)
        case touched(TouchResult)
        /// Entries removed (or, for a key's remove, 1 when either tier held it).
        case removed(Int)
        /// A clear or a removal of expired entries: the host's own entries removed, and
        /// the copies of shared keys dropped (the keys themselves stay upstream).
        case cleared(removed: Int, droppedShared: Int)
        case trimmed(TrimResult)
        /// Files whose times were written back.
        case wroteBack(Int)
    }

    /// Applies one write to both tiers. The one function every write goes through.
    ///
    /// - Important: only on the ioQueue, except the memory-only store of a key that
    ///   certainly has no file and nothing queued, which the caller runs inline with the
    ///   write book's lock held (`inline: true`).
    ///
    /// `journaled`: group commit appended the operation's record before this runs. A
    /// removal of a disk copy that is not journaled so journals a `delete` itself (see
    /// `removeDiskCopy`).
    func perform(_ operation: WriteOperation, inline: Bool = false, journaled: Bool = false) -> Result<WriteOutcome, CacheError> {
        if !inline { scheduler.assertOnQueue() }
        // With a journal, `enqueueJournaled` has appended the operation's record (and
        // stamped it) before this runs; stamping again changes nothing.
        let operation = operation.stamped(config.disk.clock.now(), versions: versions)
        switch operation {
        case .store(let s):
            let result = s.toDisk ? storeInBothTiers(s) : storeInMemoryOnly(s, inline: inline, journaled: journaled)
            // A set is a store that completed: `stored: false` (already expired) counts, a
            // disk error does not (the key is then in neither tier, or memory only).
            if case .success = result {
                counters.withLock { $0.sets += 1 }
                memoryStorage.countSet(forKey: s.key)
                written(s.key)
            }
            return result.map { .stored($0) }
        case .touch(let t):
            return applyTouch(t).map { .touched($0) }
        case .writeBack(let records):
            return .success(.wroteBack(applyWriteBacks(records)))
        case .remove(let key, let fromMemory, let fromDisk, let forcedExtension):
            let result = applyRemove(
                key: key, fromMemory: fromMemory, fromDisk: fromDisk, forcedExtension: forcedExtension, journaled: journaled)
            if case .success(true) = result { written(key) }
            return result.map { .removed($0 ? 1 : 0) }
        case .clear(let memory, let disk):
            let droppedShared = memory ? neighbour?.dropCopies(nil) ?? 0 : 0
            return applyClear(memory: memory, disk: disk).map {
                .cleared(removed: $0.removed, droppedShared: droppedShared + $0.copies)
            }
        case .removeExpired(let memory, let disk, let referenceDate):
            let droppedShared = memory ? neighbour?.dropCopies(referenceDate ?? config.memory.clock.now()) ?? 0 : 0
            return applyRemoveExpired(memory: memory, disk: disk, referenceDate: referenceDate)
                .map { .cleared(removed: $0, droppedShared: droppedShared) }
        case .trim:
            return applyTrim().map { .trimmed($0) }
        case .sweep:
            applySweep()
            return .success(.removed(0))
        }
    }

    /// Queues `operation` as a counted write (see `enqueue`) and delivers its outcome,
    /// mapped to the caller's result type.
    func enqueueWrite<T: Sendable>(
        _ operation: WriteOperation, scope: WriteScope, _ callbackQueue: CallbackQueue,
        _ priority: Operation.QueuePriority, _ completion: (@Sendable (Result<T, CacheError>) -> Void)?,
        _ map: @escaping @Sendable (WriteOutcome) -> T
    ) -> CacheTask {
        if writeBehind != nil {
            return enqueueJournaled(operation, scope: scope, callbackQueue, priority, completion, map)
        }
        return enqueue(write: scope, callbackQueue, priority, completion) { [self] in
            perform(operation).map(map)
        }
    }

    // MARK: Write-back of extended lifetimes

    /// Called by the memory tier when write-backs become pending: one ioQueue job drains
    /// the whole pending set, so a burst of extensions costs one job. (The memory tier
    /// calls this from inside stores, some of which run with the write book held: work
    /// that counts no write never takes the book's lock to be queued.)
    func scheduleWriteBackDrain() {
        scheduler.enqueue(.background) { [weak self] in
            guard let self else { return }
            _ = perform(.writeBack(memoryStorage.takeWriteBacks()))
        }
    }

    /// `HybridCache.flush` for this host's keys (see there).
    @discardableResult
    func flush(
        callbackQueue: CallbackQueue = .untouch, completion: (@Sendable (Result<Int, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        enqueue(write: nil, callbackQueue, .normal, completion) { [self] in
            guard case .success(.wroteBack(let n)) = perform(.writeBack(memoryStorage.takeAllWriteBacks())) else {
                return .success(0)
            }
            return .success(n)
        }
    }

    /// `HybridCache.shutdown` for this host's keys (see there).
    func shutdown() {
        sweepTimer?.cancel()
        let done = DispatchSemaphore(value: 0)
        scheduler.enqueue(.background) { [self] in
            _ = perform(.writeBack(memoryStorage.takeAllWriteBacks()))
            // Everything acknowledged is in the journal; make it reach the device too.
            writeBehind?.syncUnlessNever()
            done.signal()
        }
        done.wait()
    }

    func applyWriteBacks(_ records: [MemoryStorage.WriteBack]) -> Int {
        guard !records.isEmpty else { return 0 }
        journalWriteBacks(records)
        var written = 0
        var failed = 0
        for record in records {
            do throws(CacheError) {
                if try writeBackDiskCopy(record) { written += 1 }
            } catch {
                failed += 1
            }
        }
        counters.withLock {
            $0.extensionWriteBacks += written
            $0.maintenanceErrors += failed
        }
        return written
    }

    /// Appends a touch record per write-back (one write for the batch) before the
    /// lifetimes are applied. Without it a restart that replays an older set record of the
    /// key (its value not yet in its file, or its file written but the checkpoint not yet
    /// past the record) would put back the lifetime the set gave, undoing every extension
    /// since; replayed after the set, the touch restores the extended one. A failed append
    /// is counted; the write-back itself still goes to the file or the unwritten entry.
    private func journalWriteBacks(_ records: [MemoryStorage.WriteBack]) {
        guard let wb = writeBehind else { return }
        // Every key gets its touch, also one with a write queued: that write's job comes
        // later in the order, so its record follows this touch (a run never takes writes
        // queued behind other jobs), and a replay ends with the write's own lifetime.
        let touches: [Journal.Record] = records.compactMap { r in
            r.forcedExtension == nil
                ? LocalStore.lifetimeRecord(key: r.key, expiresAt: r.expiresAt, timeToLive: r.timeToLive, keepsAbsolute: false)
                : nil
        }
        guard !touches.isEmpty else { return }
        _ = try? wb.append(touches)  // a failure is counted; the files' times still get the lifetimes
    }

    // MARK: Applying each kind (only from `perform`)

    private func storeInBothTiers(_ s: WriteOperation.Store) -> Result<StoreResult, CacheError> {
        let now = s.countedFrom!
        let old = existingFile(forKey: s.key, forcedExtension: s.forcedExtension)
        do throws(CacheError) {
            let meta = try diskStorage.store(
                value: s.entry.bytes, flags: s.entry.flags, forKey: s.key, expiration: s.expiration,
                forcedExtension: s.forcedExtension, referenceDate: now, version: s.entry.version, replacing: .rename,
                absolute: s.isAbsolute)
            guard let meta else {
                // Already expired: nothing stored; an older value must not outlive this write.
                memoryStorage.remove(forKey: s.key)
                _ = try removeDiskCopy(forKey: s.key, forcedExtension: s.forcedExtension, journaled: false)
                return .success(StoreResult(stored: false, size: s.entry.bytes.count, expiresAt: nil, version: nil))
            }
            adjustDiskUsage(forKey: s.key, replacing: old, with: meta)
            if s.forcedExtension == nil { supersedeUnwritten(forKey: s.key, version: s.entry.version) }
            memoryStorage.store(
                s.entry, forKey: s.key, residency: s.memoryExpiration,
                mirroring: .init(
                    expiresAt: meta.expiration, timeToLive: s.timeToLive, extendedAt: now,
                    diskExpiresAt: meta.expiration, forcedExtension: s.forcedExtension))
            enforceDiskSizeLimit()
            enforceDiskQuota(forKey: s.key)
            return .success(StoreResult(
                stored: true, size: s.entry.bytes.count, expiresAt: HybridCache.optionalDate(meta.expiration),
                version: s.entry.version))
        } catch {
            memoryStorage.remove(forKey: s.key)
            _ = try? removeDiskCopy(forKey: s.key, forcedExtension: s.forcedExtension, journaled: false)
            return .failure(error)
        }
    }

    /// A `toDisk: false` store: memory gets the value, the disk loses its older copy (so
    /// that when memory later drops the value a read misses instead of finding an older
    /// one). Inline, the caller has made sure no file exists. A disk that is not ready
    /// holds no copy, so that is no failure; a removal that fails otherwise is reported,
    /// with memory already holding the new value.
    private func storeInMemoryOnly(_ s: WriteOperation.Store, inline: Bool, journaled: Bool) -> Result<StoreResult, CacheError> {
        let stored = memoryStorage.store(
            s.entry, forKey: s.key, expiration: s.memoryExpiration, absolute: s.memoryExpiration.isAbsolute && !s.keepsSliding)
        let expiresAt = stored ? memoryStorage.meta(forKey: s.key)?.expiration : nil
        let result = StoreResult(
            stored: stored, size: s.entry.bytes.count, expiresAt: expiresAt.flatMap(HybridCache.optionalDate),
            version: stored ? s.entry.version : nil)
        guard !inline, diskStorage.isReady else { return .success(result) }
        do throws(CacheError) {
            _ = try removeDiskCopy(forKey: s.key, forcedExtension: s.forcedExtension, journaled: journaled)
            return .success(result)
        } catch {
            return .failure(error)
        }
    }

    /// The entry gets `t.expiration` counted from `t.countedFrom` in both tiers; the
    /// memory copy restarts its residency. A resident copy vouches for the entry even
    /// when its file's own times lag behind (the lifetime memory extended is written
    /// with the touch); otherwise the file decides. A memory-only entry gets
    /// `t.memoryOnlyExpiration` (or its own). A new lifetime already over ends the entry
    /// now (`expireByTouch`). A touch with only the default expiration
    /// (`t.keepsAbsolute`) leaves an absolute lifetime as it is: the memory copy restarts
    /// its residency, the file records an access.
    private func applyTouch(_ t: WriteOperation.Touch) -> Result<TouchResult, CacheError> {
        let now = t.countedFrom!
        do throws(CacheError) {
            let resident = memoryStorage.meta(forKey: t.key)
            let memoryOnly = resident.map { !$0.hasDiskCopy } ?? false
            if t.keepsAbsolute, let resident, resident.hasDiskCopy, resident.isAbsolute {
                let expiresAt = memoryStorage.touch(forKey: t.key, expiration: t.memoryExpiration)
                return .success(TouchResult(touched: expiresAt != nil, expiresAt: expiresAt.flatMap(HybridCache.optionalDate)))
            }
            if let lifetime = memoryOnly ? t.memoryOnlyExpiration : t.expiration,
               lifetime.isExpired || Lifetime.end(of: lifetime, from: now) <= now
            {
                return .success(try expireByTouch(t, memoryOnly: memoryOnly, now: now))
            }
            if let resident, resident.hasDiskCopy {
                let expiresAt = t.expiresAt!
                let timeToLive = t.timeToLive
                let wrote = try writeBackDiskCopy(.init(
                    key: t.key, forcedExtension: t.forcedExtension, expiresAt: expiresAt, timeToLive: timeToLive,
                    extendedAt: now))
                guard wrote else {
                    // The file went (trimmed): the resident copy has nothing left to mirror.
                    memoryStorage.remove(forKey: t.key)
                    return .success(TouchResult(touched: false, expiresAt: nil))
                }
                memoryStorage.touch(
                    forKey: t.key, expiration: t.memoryExpiration,
                    mirroring: .init(
                        expiresAt: expiresAt, timeToLive: timeToLive, extendedAt: now, diskExpiresAt: expiresAt,
                        forcedExtension: t.forcedExtension))
                return .success(TouchResult(touched: true, expiresAt: HybridCache.optionalDate(expiresAt)))
            }
            let diskMeta = try touchDiskCopy(
                forKey: t.key, expiration: t.expiration, forcedExtension: t.forcedExtension, now: now,
                keepingAbsolute: t.keepsAbsolute)
            // A memory-only entry: its memory expiration is its lifetime.
            let memoryDate = diskMeta == nil ? memoryStorage.touch(forKey: t.key, expiration: t.memoryOnlyExpiration) : nil
            let expiresAt = diskMeta.map(\.expiration) ?? memoryDate
            return .success(TouchResult(
                touched: diskMeta != nil || memoryDate != nil, expiresAt: expiresAt.flatMap(HybridCache.optionalDate)))
        } catch {
            return .failure(error)
        }
    }

    /// A touch whose new lifetime is already over: the entry ends now, as Redis's EXPIRE
    /// with a past time ends a key. Both tiers lose it, it counts once as an expiration
    /// (of memory for a memory-only entry, else of disk), and the result says when: the
    /// current whole second, a real instant (never `Date.distantPast`).
    private func expireByTouch(_ t: WriteOperation.Touch, memoryOnly: Bool, now: Date) throws(CacheError) -> TouchResult {
        let inMemory = memoryOnly ? memoryStorage.expire(forKey: t.key) : memoryStorage.remove(forKey: t.key)
        // Journaled: the touch's record (an expired lifetime) went first, so replay ends it too.
        let onDisk = try removeDiskCopy(forKey: t.key, forcedExtension: t.forcedExtension, journaled: true)
        if onDisk { counters.withLock { $0.diskExpirations += 1 } }
        guard inMemory || onDisk else { return TouchResult(touched: false, expiresAt: nil) }
        return TouchResult(touched: true, expiresAt: Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down)))
    }

    private func applyRemove(
        key: CacheKey, fromMemory: Bool, fromDisk: Bool, forcedExtension: String?, journaled: Bool
    ) -> Result<Bool, CacheError> {
        // Memory alone: the disk copy stays, and gets the lifetime memory extended.
        let inMemory = fromMemory && memoryStorage.remove(forKey: key, writingBack: !fromDisk)
        do throws(CacheError) {
            let onDisk = fromDisk ? try removeDiskCopy(forKey: key, forcedExtension: forcedExtension, journaled: journaled) : false
            // Disk alone: the memory copy is now all a read answers from, so it becomes a
            // memory-only entry (a touch then extends it, instead of finding no disk copy).
            if fromDisk && !fromMemory { memoryStorage.detachFromDisk(forKey: key) }
            if inMemory || onDisk { counters.withLock { $0.removals += 1 } }
            return .success(inMemory || onDisk)
        } catch {
            if inMemory { counters.withLock { $0.removals += 1 } }
            return .failure(error)
        }
    }

    /// The larger of the two tiers' counts, so a key held in both tiers counts once.
    /// Returns the entries removed, and apart from them the copies of the upstream's keys
    /// that reached memory after `dropCopies` and went with the rest: a copy is counted as
    /// one whenever it is removed.
    private func applyClear(memory: Bool, disk: Bool) -> Result<(removed: Int, copies: Int), CacheError> {
        // Clearing memory alone keeps the disk copies: they get the lifetimes memory extended.
        let (removedFromMemory, copies) = memory
            ? memoryStorage.removeAll(writingBack: !disk, countingCopies: neighbour?.isCopy) : (0, 0)
        let fromMemory = removedFromMemory - copies
        if memory && !disk { _ = applyWriteBacks(memoryStorage.takeWriteBacks()) }
        do throws(CacheError) {
            var unwritten = 0
            if disk, let writeBehind {
                unwritten = writeBehind.removeAllUnwritten()
            }
            let fromDisk = disk ? max(unwritten, try diskStorage.removeAll()) : 0
            if disk { diskUsage.withLock { $0 = DiskUsage(bytes: 0, count: 0) } }
            return .success((max(fromMemory, fromDisk), copies))
        } catch {
            return .failure(error)
        }
    }

    /// Judges both tiers by the lifetime the cache knows: memory copies first (a departed
    /// one's lifetime goes to its file), then every lifetime memory extended is written
    /// back, and files of entries memory still vouches for are spared.
    private func applyRemoveExpired(memory: Bool, disk: Bool, referenceDate: Date?) -> Result<Int, CacheError> {
        // The files are the measure (the unwritten entries go to theirs first).
        if disk { materializeAll() }
        let fromMemory = memory ? memoryStorage.removeExpired(referenceDate: referenceDate) : 0
        _ = applyWriteBacks(memoryStorage.takeAllWriteBacks())
        do throws(CacheError) {
            var fromDisk = 0
            if disk {
                fromDisk = try diskStorage.removeExpiredValues(
                    referenceDate: referenceDate, liveLifetimes: residentLifetimes()).count
                counters.withLock { $0.diskExpirations += fromDisk }
                recountDiskUsage()
            }
            return .success(max(fromMemory, fromDisk))
        } catch {
            return .failure(error)
        }
    }

    private func applyTrim() -> Result<TrimResult, CacheError> {
        materializeAll()
        _ = applyWriteBacks(memoryStorage.takeAllWriteBacks())
        do throws(CacheError) {
            let removed = try diskStorage.removeSizeExceededValues(recentAccess: residentAccesses()).count
            counters.withLock { $0.diskEvictions += removed }
            recountDiskUsage()
            return .success(TrimResult(removed: removed, totalSize: diskUsage.withLock { $0?.bytes } ?? 0))
        } catch {
            return .failure(error)
        }
    }

    private func applySweep() {
        counters.withLock { $0.sweeps += 1 }
        memoryStorage.removeExpired()
        _ = applyWriteBacks(memoryStorage.takeAllWriteBacks())
        do throws(CacheError) {
            let expired = try diskStorage.removeExpiredValues(referenceDate: nil, liveLifetimes: residentLifetimes()).count
            counters.withLock { $0.diskExpirations += expired }
        } catch {
            counters.withLock { $0.maintenanceErrors += 1 }
        }
        recountDiskUsage()
        enforceDiskSizeLimit()
    }

    /// After a store: keeps the disk tier within its size limit now, not at the next
    /// sweep. Checks the running account (O(1)); only when it says "over" does the disk
    /// tier list the folder, trim to half the limit (judging last access by what memory
    /// knows), and the account get recounted.
    func enforceDiskSizeLimit() {
        scheduler.assertOnQueue()
        let limit = config.disk.sizeLimit
        guard limit > 0 else { return }
        if diskUsage.withLock({ $0 }) == nil { recountDiskUsage() }
        guard let usage = diskUsage.withLock({ $0 }), usage.bytes > limit else { return }
        _ = applyWriteBacks(memoryStorage.takeAllWriteBacks())
        do throws(CacheError) {
            let removed = try diskStorage.removeSizeExceededValues(recentAccess: residentAccesses())
            counters.withLock { $0.diskEvictions += removed.count }
            writeBehind?.noteEvicted(names: removed.map(\.lastPathComponent))
        } catch {
            counters.withLock { $0.maintenanceErrors += 1 }
        }
        recountDiskUsage()
    }

    /// File name -> lifetime of every resident copy of a disk entry.
    private func residentLifetimes() -> [CacheKey: Date] {
        var out: [CacheKey: Date] = [:]
        for e in memoryStorage.residentDiskEntries() {
            out[CacheKey(diskStorage.fileName(forKey: e.key, forcedExtension: e.forcedExtension))] = e.expiresAt
        }
        return out
    }

    /// File name -> last access of every resident copy of a disk entry.
    func residentAccesses() -> [CacheKey: Date] {
        var out: [CacheKey: Date] = [:]
        for e in memoryStorage.residentDiskEntries() {
            out[CacheKey(diskStorage.fileName(forKey: e.key, forcedExtension: e.forcedExtension))] = e.lastAccess
        }
        return out
    }
}
