// Whole-cache work of the local store: clear, removeExpired and trim (writes that every
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

    /// `HybridCache.removeExpired` for this host's keys (see there).
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

    /// `HybridCache.trim` for this host's keys (see there).
    @discardableResult
    func trim(
        callbackQueue: CallbackQueue = .untouch, completion: (@Sendable (Result<TrimResult, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        enqueueWrite(.trim, scope: .wholeCache, callbackQueue, .normal, completion) {
            if case .trimmed(let r) = $0 { return r }
            return TrimResult(removed: 0, totalSize: 0)
        }
    }

    /// `HybridCache.totalSize` for this host's keys (see there).
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

    /// `HybridCache.debugSleep` for this host's keys (see there).
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

    /// `HybridCache.sweepNow` for this host's keys (see there).
    func sweepNow() {
        scheduler.enqueue(.background) { [self] in sweep() }
    }
}
