// The keyed reads of this host's keys: retrieve and describe. Each answers
// from memory on the caller's thread when it can; a memory miss reads the disk on the
// ioQueue (or inline with `loadDiskFileSynchronously`). A read of a key with a queued
// write, or during a queued whole-cache write, runs entirely on the ioQueue after it.
// A disk read counts itself as an off-queue reader, so the materializer never rewrites a
// file in place under it.

import Foundation
import Synchronization

extension LocalStore {
    /// How one read is served: the one decision every read makes (`retrieve`,
    /// `describe`, `cachedType`, `getMany`, and the transport's memory answers).
    enum ReadPlan<Found> {
        /// Memory holds the key live, and no write of it is queued: the answer.
        case memoryHit(Found)
        /// A `fromMemoryOnly` read that memory missed: a miss, at once.
        case memoryOnlyMiss
        /// A write of the key (or a whole-cache write) is queued or running: the whole
        /// read runs on the ioQueue after it, and asks memory there.
        case behindWrite
        /// Memory missed: read the disk on the caller's thread
        /// (`loadDiskFileSynchronously`); a hit goes back into memory only if the epochs
        /// taken with the decision have not moved (no write of the key meanwhile).
        case diskInline(Epochs)
        /// Memory missed: read the disk on the ioQueue.
        case diskQueued
    }

    /// Decides how a read of `key` is served (see `ReadPlan`). `lookInMemory` is the
    /// read's memory lookup (it counts a hit or a miss and may extend the entry); it runs
    /// at most once, and not at all when `memoryAsked` (the caller's own lookup missed).
    ///
    /// Whether a write is queued is asked again after any memory lookup. A read that may
    /// read the disk on the caller's thread (`loadDiskFileSynchronously`) takes it and the
    /// epochs its put-back compares under one hold of the write book's lock
    /// (`IOScheduler.readStamp`): a write queued later changes the epochs, so an older disk
    /// value never replaces it. Any other read needs no epochs (a queued read takes its
    /// own on the ioQueue), so while no write at all is queued it takes no lock, hit or
    /// miss: the event loops' misses do not contend with the ioQueue's put-backs, which
    /// hold the book's lock.
    @inline(__always)
    func readPlan<Found>(
        forKey key: CacheKey, options: Options, memoryAsked: Bool = false, _ lookInMemory: () -> Found?
    ) -> ReadPlan<Found> {
        var asked = memoryAsked
        if !asked, !scheduler.mustQueue(key) {
            asked = true
            if let found = lookInMemory() { return .memoryHit(found) }
        }
        let inline = options.loadDiskFileSynchronously && !options.fromMemoryOnly
        let (mustQueue, epochs): (Bool, Epochs?) = inline
            ? scheduler.readStamp(forKey: key) : (scheduler.mustQueue(key), nil)
        if mustQueue { return .behindWrite }
        // A write queued after this check comes after this read: memory may answer now.
        if !asked, let found = lookInMemory() { return .memoryHit(found) }
        if options.fromMemoryOnly { return .memoryOnlyMiss }
        // A pending write-back of this key goes first on the ioQueue: read after it.
        if let epochs, !memoryStorage.hasPendingWriteBack(forKey: key) {
            return .diskInline(epochs)
        }
        return .diskQueued
    }

    /// A memory lookup of `key` as `retrieve` makes it (extending per `options`).
    func memoryRetrieve(forKey key: CacheKey, options: Options) -> RetrieveResult? {
        // A `take` that takes nothing leaves every hit copied.
        memoryRead(forKey: key, options: options, taking: { _, _ in false }) ?? nil
    }

    /// `memoryRetrieve`'s lookup, lending a hit to `take` where it lies with its lifetime
    /// (nil = never) first (`MemoryStorage.Backend.lendValue`, whose rules `take` follows):
    /// nil on a miss, `.some(nil)` when `take` took the hit, else the hit copied.
    @inline(__always)
    func memoryRead(
        forKey key: CacheKey, options: Options, taking take: (LentEntry, _ expiresAt: Date?) -> Bool
    ) -> RetrieveResult?? {
        let lent = memoryStorage.lendValue(
            forKey: key, referenceDate: options.referenceDate, extendingExpiration: options.extendingExpiration,
            arrivedBy: options.arrivedBy
        ) { entry, expiration in
            take(entry, HybridCache.optionalDate(expiration))
        }
        switch lent {
        case nil: return nil
        case .taken: return .some(nil)
        case .declined(let entry, let expiresAt):
            return RetrieveResult(cacheType: .memory, entry: entry, expiresAt: HybridCache.optionalDate(expiresAt))
        }
    }

    /// `HybridCache.retrieve` of a local key (see there). `memoryAsked`: the caller's
    /// `memoryLookup` already missed in memory (and counted it), so the inline path goes
    /// straight on to the disk; a read that must queue behind a write asks memory again
    /// there, after the write.
    @discardableResult
    func retrieve(
        forKey key: CacheKey, options: Options, callbackQueue: CallbackQueue, memoryAsked: Bool = false,
        completion: @escaping @Sendable (Result<RetrieveResult, CacheError>) -> Void
    ) -> CacheTask {
        switch readPlan(forKey: key, options: options, memoryAsked: memoryAsked, { memoryRetrieve(forKey: key, options: options) }) {
        case .memoryHit(let found):
            return runInline(callbackQueue, options.priority, completion) { .success(found) }
        case .memoryOnlyMiss:
            return runInline(callbackQueue, options.priority, completion) {
                .success(RetrieveResult(cacheType: .none, entry: nil, expiresAt: nil))
            }
        case .behindWrite:
            return enqueue(write: nil, callbackQueue, options.priority, completion) { [self] in
                let inlineEpoch = scheduler.epochs.inline
                return retrieveNow(forKey: key, options: options, putBackIf: { $0.inline == inlineEpoch })
            }
        case .diskInline(let epochs):
            return runInline(callbackQueue, options.priority, completion) {
                retrieveFromDisk(forKey: key, options: options, putBackIf: { $0.all == epochs.all })
            }
        case .diskQueued:
            let read: @Sendable () -> Result<RetrieveResult, CacheError> = { [self] in
                let inlineEpoch = scheduler.epochs.inline
                return retrieveFromDisk(forKey: key, options: options, putBackIf: { $0.inline == inlineEpoch })
            }
            // Delivered after `sync` returns: a completion may start the connection's next
            // request, which must not find itself inside the queue.
            if let found = scheduler.runReadDirectIfIdle(read) {
                return runInline(callbackQueue, options.priority, completion) { found }
            }
            return enqueue(write: nil, callbackQueue, options.priority, completion, read)
        }
    }

    /// `HybridCache.describe` of a local key (see there): the read plan `retrieve` takes,
    /// without loading or extending the entry.
    @discardableResult
    func describe(
        forKey key: CacheKey, options: Options, callbackQueue: CallbackQueue,
        completion: @escaping @Sendable (Result<EntryDescription, CacheError>) -> Void
    ) -> CacheTask {
        let lookUp: @Sendable (Bool) -> Result<EntryDescription, CacheError> = { [self] memoryOnly in
            describeNow(forKey: key, options: options, memoryOnly: memoryOnly)
        }
        let plan = readPlan(forKey: key, options: options) {
            memoryStorage.meta(forKey: key, referenceDate: options.referenceDate)
        }
        switch plan {
        case .memoryHit(let meta):
            return runInline(callbackQueue, options.priority, completion) { .success(HybridCache.description(of: meta)) }
        case .memoryOnlyMiss:
            return runInline(callbackQueue, options.priority, completion) { lookUp(true) }
        case .behindWrite:
            return enqueue(write: nil, callbackQueue, options.priority, completion) { lookUp(options.fromMemoryOnly) }
        case .diskInline:
            return runInline(callbackQueue, options.priority, completion) { lookUp(false) }
        case .diskQueued:
            return enqueue(write: nil, callbackQueue, options.priority, completion) { lookUp(false) }
        }
    }


    private func describeNow(forKey key: CacheKey, options: Options, memoryOnly: Bool) -> Result<EntryDescription, CacheError> {
        if let meta = memoryStorage.meta(forKey: key, referenceDate: options.referenceDate) {
            return .success(HybridCache.description(of: meta))
        }
        let miss = EntryDescription(cacheType: .none, size: 0, flags: 0, expiresAt: nil, lastAccessAt: nil)
        if memoryOnly { return .success(miss) }
        do throws(CacheError) {
            let found: DiskStorage.FileMeta? = try readingFiles { () throws(CacheError) -> DiskStorage.FileMeta? in
                switch unwrittenLookup(
                    forKey: key, forcedExtension: options.forcedExtension, at: options.referenceDate ?? config.disk.clock.now())
                {
                case .live(let e): return e.meta(url: diskStorage.cacheFileURL(forKey: key))
                case .expired: return nil
                case .absent:
                    return try diskStorage.meta(
                        forKey: key, referenceDate: options.referenceDate, forcedExtension: options.forcedExtension)
                }
            }
            guard let meta = found else { return .success(miss) }
            return .success(EntryDescription(
                cacheType: .disk, size: Int(meta.size), flags: meta.flags,
                expiresAt: HybridCache.optionalDate(meta.expiration), lastAccessAt: meta.lastAccess,
                version: meta.version))
        } catch {
            return .failure(error)
        }
    }

    /// Memory, then disk; for reads queued behind a write (on the ioQueue).
    private func retrieveNow(
        forKey key: CacheKey, options: Options, putBackIf: @escaping (Epochs) -> Bool
    ) -> Result<RetrieveResult, CacheError> {
        if let (entry, meta) = memoryStorage.valueAndMeta(
            forKey: key, referenceDate: options.referenceDate, extendingExpiration: options.extendingExpiration)
        {
            return .success(RetrieveResult(cacheType: .memory, entry: entry, expiresAt: HybridCache.optionalDate(meta.expiration)))
        }
        if options.fromMemoryOnly {
            return .success(RetrieveResult(cacheType: .none, entry: nil, expiresAt: nil))
        }
        return retrieveFromDisk(forKey: key, options: options, putBackIf: putBackIf)
    }

    /// Reads the disk tier and puts a hit back into memory, unless `putBackIf` (checked
    /// under the write book's lock, where the memory store then happens) says a write may
    /// have changed the key since the read began: an older value must never replace it.
    /// The file is read without touching its times; the read's extension of the lifetime
    /// goes into the resident copy (or, when memory cannot keep the value, straight into
    /// the write-back set once it is due), like a memory hit's.
    private func retrieveFromDisk(
        forKey key: CacheKey, options: Options, putBackIf: (Epochs) -> Bool
    ) -> Result<RetrieveResult, CacheError> {
        do throws(CacheError) {
            typealias Found = (entry: CacheEntry, meta: DiskStorage.FileMeta)
            let found: Found? = try readingFiles { () throws(CacheError) -> Found? in
                switch unwrittenLookup(
                    forKey: key, forcedExtension: options.forcedExtension, at: options.referenceDate ?? config.disk.clock.now())
                {
                case .live(let e): return (e.entry, e.meta(url: diskStorage.cacheFileURL(forKey: key)))
                case .expired: return nil
                case .absent:
                    return try diskStorage.valueAndMeta(
                        forKey: key, referenceDate: options.referenceDate, extendingExpiration: ExpirationExtending.none,
                        forcedExtension: options.forcedExtension)
                }
            }
            guard let (entry, meta) = found else {
                counters.withLock { $0.diskMisses += 1 }
                return .success(RetrieveResult(cacheType: .none, entry: nil, expiresAt: nil))
            }
            counters.withLock { $0.diskHits += 1 }
            let mirror = extendedLifetime(of: meta, options.extendingExpiration, forcedExtension: options.forcedExtension)
            scheduler.ifUnchanged(putBackIf) {
                let kept = memoryStorage.store(
                    entry, forKey: key, residency: options.memoryExpiration, mirroring: mirror)
                let now = mirror.extendedAt
                if !kept, MemoryStorage.Backend.isWriteBackDue(
                    expiresAt: mirror.expiresAt, diskExpiresAt: mirror.diskExpiresAt, now: now)
                {
                    memoryStorage.queueWriteBack(.init(
                        key: key, forcedExtension: options.forcedExtension, expiresAt: mirror.expiresAt,
                        timeToLive: mirror.timeToLive, extendedAt: mirror.extendedAt))
                }
            }
            return .success(RetrieveResult(
                cacheType: .disk, entry: entry, expiresAt: HybridCache.optionalDate(mirror.expiresAt)))
        } catch {
            return .failure(error)
        }
    }

    /// Runs `body`, a lookup in the unwritten table and then maybe in a cache file,
    /// counted in `offQueueReaders` from before the table lookup until the file is
    /// closed (`body` returns): while the count is above 0 the materializer replaces
    /// files by rename instead of rewriting them in place, so a read on the caller's
    /// thread (`loadDiskFileSynchronously`, an inline `describe`) never meets a file
    /// half rewritten. The argument for a reader that counts itself after the
    /// materializer decided is at `materializeSlice`: it finds the key in the table.
    /// Reads on the ioQueue count themselves too; they cannot overlap the materializer,
    /// and two atomic additions cost less than asking which thread this is.
    func readingFiles<T>(_ body: () throws(CacheError) -> T) throws(CacheError) -> T {
        guard let writeBehind else { return try body() }
        return try writeBehind.readingFiles(body)
    }

    /// The lifetime of a disk entry after a read extending it per `extending`. The file
    /// keeps its original time-to-live as the span between its last access and its
    /// expiration (see `FileTimes`); an absolute lifetime has none and does not slide.
    private func extendedLifetime(
        of meta: DiskStorage.FileMeta, _ extending: ExpirationExtending, forcedExtension: String?
    ) -> MemoryStorage.Mirror {
        let now = config.disk.clock.now()
        let stored: TimeInterval? = meta.expiration == .distantFuture || meta.isAbsolute
            ? nil : max(0, meta.expiration.timeIntervalSince(meta.lastAccess))
        var mirror = MemoryStorage.Mirror(
            expiresAt: meta.expiration, timeToLive: stored, extendedAt: meta.lastAccess,
            diskExpiresAt: meta.expiration, forcedExtension: forcedExtension)
        switch extending {
        case .none:
            break
        case .cacheTime:
            // Never or absolute (no span): the lifetime stays as the file has it.
            if let stored { mirror.expiresAt = Lifetime.end(of: .seconds(stored), from: now) }
            mirror.extendedAt = now
        case .expirationTime(let expiration):
            mirror.expiresAt = Lifetime.end(of: expiration, from: now)
            mirror.timeToLive = expiration.slidingTimeToLive(from: now)
            mirror.extendedAt = now
        }
        return mirror
    }
}
