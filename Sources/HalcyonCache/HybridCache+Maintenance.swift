// Whole-cache work of the hybrid cache: clear, removeExpired and trim (writes that every
// later read queues behind), totalSize, the debug hold of the ioQueue, and the periodic
// sweep that removes expired entries and enforces the disk size limit.

import Foundation

extension HybridCache {
    /// Removes every entry from the chosen tiers. A whole-cache write on the ioQueue.
    ///
    /// - Returns (through `completion`): the larger of the two tiers' counts, so a key held
    ///   in both tiers counts once.
    @discardableResult
    public func clear(
        memory: Bool = true, disk: Bool = true, callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<Int, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        enqueue(write: .wholeCache, callbackQueue, .normal, completion) { [self] in
            dispatchPrecondition(condition: .onQueue(ioQueue))
            let fromMemory = memory ? memoryStorage.removeAll() : 0
            do throws(CacheError) {
                let fromDisk = disk ? try diskStorage.removeAll() : 0
                if disk { diskUsage.withLock { $0 = DiskUsage(bytes: 0, count: 0) } }
                return .success(max(fromMemory, fromDisk))
            } catch {
                return .failure(error)
            }
        }
    }

    /// Removes the entries expired at `referenceDate` (default now) from the chosen tiers
    /// and counts them as expirations. A whole-cache write on the ioQueue.
    ///
    /// - Returns (through `completion`): the larger of the two tiers' counts.
    @discardableResult
    public func removeExpired(
        memory: Bool = true, disk: Bool = true, referenceDate: Date? = nil, callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<Int, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        enqueue(write: .wholeCache, callbackQueue, .normal, completion) { [self] in
            dispatchPrecondition(condition: .onQueue(ioQueue))
            let fromMemory = memory ? memoryStorage.removeExpired(referenceDate: referenceDate) : 0
            do throws(CacheError) {
                let fromDisk = disk ? try diskStorage.removeExpiredValues(referenceDate: referenceDate).count : 0
                counters.withLock { $0.diskExpirations += fromDisk }
                if disk { recountDiskUsage() }
                return .success(max(fromMemory, fromDisk))
            } catch {
                return .failure(error)
            }
        }
    }

    /// When the disk tier is over its size limit, removes least recently accessed files
    /// until it is at or below half the limit. A whole-cache write on the ioQueue.
    @discardableResult
    public func trim(
        callbackQueue: CallbackQueue = .untouch, completion: (@Sendable (Result<TrimResult, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        enqueue(write: .wholeCache, callbackQueue, .normal, completion) { [self] in
            dispatchPrecondition(condition: .onQueue(ioQueue))
            do throws(CacheError) {
                let removed = try diskStorage.removeSizeExceededValues().count
                counters.withLock { $0.diskEvictions += removed }
                recountDiskUsage()
                return .success(TrimResult(removed: removed, totalSize: try diskStorage.totalSize()))
            } catch {
                return .failure(error)
            }
        }
    }

    /// The disk tier's bytes and file count, read on the ioQueue (after queued writes).
    @discardableResult
    public func totalSize(
        callbackQueue: CallbackQueue = .untouch, completion: @escaping @Sendable (Result<DiskUsage, CacheError>) -> Void
    ) -> CacheTask {
        enqueue(write: nil, callbackQueue, .normal, completion) { [self] in
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

    /// The periodic sweep, on the ioQueue: expired entries of both tiers, then the disk
    /// size limit. Not a counted write: it removes only what no read may return anyway
    /// (expired) or what the disk tier may drop at any time (size pressure).
    func sweep() {
        dispatchPrecondition(condition: .onQueue(ioQueue))
        memoryStorage.removeExpired()
        do throws(CacheError) {
            let expired = try diskStorage.removeExpiredValues(referenceDate: nil).count
            counters.withLock { $0.diskExpirations += expired }
        } catch {
            counters.withLock { $0.maintenanceErrors += 1 }
        }
        recountDiskUsage()
        enforceDiskSizeLimit()
    }

    /// Runs a sweep now, on the ioQueue; for tests and operators.
    public func sweepNow() {
        ioQueue.async { [self] in sweep() }
    }
}
