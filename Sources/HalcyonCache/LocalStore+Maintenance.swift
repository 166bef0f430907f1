// Whole-cache work of the hybrid cache: clear, removeExpired and trim (writes that every
// later read queues behind, applied by `perform`), totalSize, the debug hold of the
// ioQueue, and the periodic sweep that removes expired entries and enforces the disk
// size limit.

import Foundation

extension LocalStore {

    /// Removes every entry from the chosen tiers. A whole-cache write on the ioQueue.
    /// With an upstream, clearing memory also drops this host's copies of shared keys,
    /// counted apart (`ClearResult.droppedShared`): the keys stay upstream for every host.
    /// `shared: true` removes the shared keys upstream too (`clearShared`), for every host.
    @discardableResult
    func clear(
        memory: Bool = true, disk: Bool = true, callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<ClearResult, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        return enqueueWrite(.clear(memory: memory, disk: disk), scope: .wholeCache, callbackQueue, .normal, completion,
                            LocalStore.clearResult)
    }

    /// Removes the entries whose lifetime ends at or before `referenceDate` (default now)
    /// from the chosen tiers and counts them as expirations; memory copies whose residency
    /// is over leave too. A file is judged by the lifetime the cache knows: lifetimes that
    /// memory extended are written back first, and no live entry's file is deleted. A
    /// whole-cache write on the ioQueue. Copies of shared keys whose upstream lifetime is
    /// over are dropped from memory and counted apart (`ClearResult.droppedShared`).
    @discardableResult
    func removeExpired(
        memory: Bool = true, disk: Bool = true, referenceDate: Date? = nil, callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<ClearResult, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        enqueueWrite(
            .removeExpired(memory: memory, disk: disk, referenceDate: referenceDate), scope: .wholeCache,
            callbackQueue, .normal, completion, LocalStore.clearResult)
    }

    @Sendable static func clearResult(_ outcome: WriteOutcome) -> ClearResult {
        if case .cleared(let removed, let droppedShared) = outcome { return ClearResult(removed: removed, droppedShared: droppedShared) }
        return ClearResult(removed: 0)
    }

    /// When the disk tier is over its size limit (bytes on disk, headers included),
    /// removes least recently accessed files until it is at or below half the limit; an
    /// entry read from memory counts as accessed then. A whole-cache write on the ioQueue.
    @discardableResult
    func trim(
        callbackQueue: CallbackQueue = .untouch, completion: (@Sendable (Result<TrimResult, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        enqueueWrite(.trim, scope: .wholeCache, callbackQueue, .normal, completion) {
            if case .trimmed(let r) = $0 { return r }
            return TrimResult(removed: 0, totalSize: 0)
        }
    }

    /// The disk tier's bytes and file count, read on the ioQueue (after queued writes).
    @discardableResult
    func totalSize(
        callbackQueue: CallbackQueue = .untouch, completion: @escaping @Sendable (Result<DiskUsage, CacheError>) -> Void
    ) -> CacheTask {
        enqueue(write: nil, callbackQueue, .normal, completion) { [self] in
            // The files are the measure: unwritten entries are written first.
            materializeAll()
            do throws(CacheError) {
                let usage = DiskUsage(bytes: try diskStorage.totalSize(), count: try diskStorage.count())
                diskUsage.withLock { $0 = usage }
                return .success(usage)
            } catch {
                return .failure(error)
            }
        }
    }

    /// Holds the ioQueue for `seconds` (a plain queued job, not a write: reads of keys
    /// without queued writes still answer from memory). For tests and `debug.sleep`.
    @discardableResult
    func debugSleep(
        seconds: Double, callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<Void, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        enqueue(write: nil, callbackQueue, .normal, completion) {
            Thread.sleep(forTimeInterval: seconds)
            return .success(())
        }
    }

    /// The periodic sweep, on the ioQueue: departed memory copies, lifetimes written
    /// back, expired files (sparing live entries), then the disk size limit. Goes through
    /// `perform` like every write, and is counted (`CacheStats.sweeps`); not a counted
    /// write in the write book: it removes only what no read may return anyway (expired)
    /// or what the disk tier may drop at any time (size pressure).
    func sweep() {
        _ = perform(.sweep)
    }

    /// Runs a sweep now, on the ioQueue; for tests and operators.
    func sweepNow() {
        scheduler.enqueue(.background) { [self] in sweep() }
    }
}
