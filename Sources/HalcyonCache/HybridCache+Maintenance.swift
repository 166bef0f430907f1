// Whole-cache work of the hybrid cache: clear, removeExpired and trim (writes that every
// later read queues behind, applied by `perform`), totalSize, the debug hold of the
// ioQueue, and the periodic sweep that removes expired entries and enforces the disk
// size limit.

import Foundation

extension HybridCache {
    /// What a clear or a removal of expired entries did.
    public struct ClearResult: Sendable, Equatable {
        /// The host's own entries removed: the larger of the two tiers' counts, so a key
        /// held in both tiers counts once.
        public var removed: Int
        /// This host's copies of shared keys dropped from memory (`Config.upstream`); the
        /// keys stay upstream, and the next read of one asks the upstream again.
        public var droppedShared: Int
        /// Shared keys removed upstream, for every host (`clear(shared: true)`); nil when
        /// not asked, or without an upstream.
        public var removedShared: Int?

        public init(removed: Int, droppedShared: Int = 0, removedShared: Int? = nil) {
            self.removed = removed
            self.droppedShared = droppedShared
            self.removedShared = removedShared
        }
    }

    /// Whether some keys are shared with other hosts (`Config.upstream`).
    public var hasUpstream: Bool { nearCache != nil }

    /// Removes every entry from the chosen tiers. A whole-cache write on the ioQueue.
    /// With an upstream, clearing memory also drops this host's copies of shared keys,
    /// counted apart (`ClearResult.droppedShared`): the keys stay upstream for every host.
    /// `shared: true` removes the shared keys upstream too (`clearShared`), for every host.
    @discardableResult
    public func clear(
        memory: Bool = true, disk: Bool = true, shared: Bool = false, callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<ClearResult, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        if shared, let nearCache {
            return clearShared(nearCache, memory: memory, disk: disk, callbackQueue: callbackQueue, completion: completion)
        }
        return enqueueWrite(.clear(memory: memory, disk: disk), scope: .wholeCache, callbackQueue, .normal, completion,
                            HybridCache.clearResult)
    }

    /// Removes the entries whose lifetime ends at or before `referenceDate` (default now)
    /// from the chosen tiers and counts them as expirations; memory copies whose residency
    /// is over leave too. A file is judged by the lifetime the cache knows: lifetimes that
    /// memory extended are written back first, and no live entry's file is deleted. A
    /// whole-cache write on the ioQueue. Copies of shared keys whose upstream lifetime is
    /// over are dropped from memory and counted apart (`ClearResult.droppedShared`).
    @discardableResult
    public func removeExpired(
        memory: Bool = true, disk: Bool = true, referenceDate: Date? = nil, callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<ClearResult, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        enqueueWrite(
            .removeExpired(memory: memory, disk: disk, referenceDate: referenceDate), scope: .wholeCache,
            callbackQueue, .normal, completion, HybridCache.clearResult)
    }

    @Sendable static func clearResult(_ outcome: WriteOutcome) -> ClearResult {
        if case .cleared(let removed, let droppedShared) = outcome { return ClearResult(removed: removed, droppedShared: droppedShared) }
        return ClearResult(removed: 0)
    }

    /// When the disk tier is over its size limit (bytes on disk, headers included),
    /// removes least recently accessed files until it is at or below half the limit; an
    /// entry read from memory counts as accessed then. A whole-cache write on the ioQueue.
    @discardableResult
    public func trim(
        callbackQueue: CallbackQueue = .untouch, completion: (@Sendable (Result<TrimResult, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        enqueueWrite(.trim, scope: .wholeCache, callbackQueue, .normal, completion) {
            if case .trimmed(let r) = $0 { return r }
            return TrimResult(removed: 0, totalSize: 0)
        }
    }

    /// The disk tier's bytes and file count, read on the ioQueue (after queued writes).
    @discardableResult
    public func totalSize(
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
    public func debugSleep(
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
    public func sweepNow() {
        scheduler.enqueue(.background) { [self] in sweep() }
    }
}
