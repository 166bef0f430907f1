// A summary, once per interval, of what a cache does on its own. Everything is counted
// always (cache.stats, the metrics); the log gets warnings only for what an operator must
// act on (failed maintenance, storage errors), and evictions at debug: evicting is what
// an LRU cache under its limits does, and halcyon_cache_evictions_total shows its rate.
//
// Nothing is dropped silently: every eviction (memory limits, disk size limit) and every
// expiration is counted in the storage engine and shown by `cache.stats`, per tier. This
// monitor compares those counters every 10 seconds on the lifecycle queue, so a full disk
// shows up in the log once per interval rather than once per request.

import Dispatch
import HalcyonCache
import HalcyonRPC
import Logging

/// Compares the cache's and the transport's counters every `interval` and logs what grew.
///
/// Threading: all its state lives on `queue` (the daemon's lifecycle queue), where its timer
/// fires; `start()` may be called from any thread, once.
final class PressureMonitor: @unchecked Sendable {
    // @unchecked: `last` and `lastStorageErrors` are only touched by the timer handler on `queue`.
    private let cache: HybridCache
    private let counters: ServerCounters
    private let logger: Logger
    private let queue: DispatchQueue
    private let interval: Double
    /// The timer and its handler hold each other (and so this monitor) for the daemon's life.
    private var timer: (any DispatchSourceTimer)?
    /// Counters at the previous check; the cache's start from zero.
    private var last = CacheStats()
    private var lastStorageErrors = 0

    init(cache: HybridCache, counters: ServerCounters, logger: Logger, queue: DispatchQueue, interval: Double = 10) {
        self.cache = cache
        self.counters = counters
        self.logger = logger
        self.queue = queue
        self.interval = interval
    }

    func start() {
        queue.async { [self] in
            let timer = DispatchSource.makeTimerSource(queue: queue)
            timer.schedule(deadline: .now() + interval, repeating: interval, leeway: .seconds(1))
            timer.setEventHandler { [self] in check() }
            timer.resume()
            self.timer = timer
        }
    }

    /// Logs what grew since the last summary now, without waiting for the timer: the
    /// daemon calls it while shutting down, so errors of the last seconds are not lost.
    /// Only on `queue`.
    func checkNow() {
        check()
    }

    private func check() {
        dispatchPrecondition(condition: .onQueue(queue))
        let now = cache.stats()
        defer { last = now }
        do {
            let before = last
            let memoryEvicted = now.memoryEvictions - before.memoryEvictions
            let diskEvicted = now.diskEvictions - before.diskEvictions
            if memoryEvicted > 0 || diskEvicted > 0 {
                logger.debug("evicted entries to stay within limits", metadata: [
                    "memory": "\(memoryEvicted)", "disk": "\(diskEvicted)", "seconds": "\(Int(interval))",
                    "memoryBytes": "\(now.memoryBytes)", "diskBytes": "\(now.diskBytes)",
                ])
            }
            let failed = now.maintenanceErrors - before.maintenanceErrors
            if failed > 0 {
                // Sweeps, trims, lifetime write-backs and the per-key file writes behind the
                // journal: all are retried. A value whose file can never be written is
                // dropped and logged on its own, with its key and errno.
                let fileWrites = (now.journal?.fileWriteFailures ?? 0) - (before.journal?.fileWriteFailures ?? 0)
                var metadata: Logger.Metadata = ["count": "\(failed)", "fileWrites": "\(fileWrites)"]
                if fileWrites > 0, let last = now.journal?.lastFileWriteFailure {
                    metadata["lastFileWriteFailure"] = "\(last.reason)"
                    if let code = last.errno { metadata["errnoName"] = "\(RPCError.errnoName(code))" }
                }
                logger.error("disk maintenance failed and will be retried", metadata: metadata)
            }
        }
        let storage = counters.storageErrors
        if storage.count > lastStorageErrors {
            logger.error("storage errors answered to clients", metadata: [
                "count": "\(storage.count - lastStorageErrors)", "last": "\(storage.last)",
            ])
            lastStorageErrors = storage.count
        }
    }
}
