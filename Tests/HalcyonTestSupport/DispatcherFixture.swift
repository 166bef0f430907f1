// A dispatcher in process, in front of a real journaled cache in a private folder: for
// tests of the dispatcher and of the transport's parts without a daemon.

import Foundation
@testable import HalcyonCache
import HalcyonRPC

/// A `Dispatcher` over a `HybridCache` in a fresh temporary folder (journal without
/// fsync, no sweep timer), removed when the fixture goes.
///
/// Threading: immutable; the cache and dispatcher are thread-safe themselves.
public final class DispatcherFixture: Sendable {
    public let folder: URL
    public let cache: HybridCache
    public let dispatcher: Dispatcher

    /// - Parameters:
    ///   - prefix: the start of the folder's name, to tell tests' folders apart.
    ///   - debugMethods: whether debug methods (`debug.sleep`) are enabled.
    public init(prefix: String, debugMethods: Bool) {
        folder = URL(fileURLWithPath: NSTemporaryDirectory())
            .appendingPathComponent("\(prefix)-\(UUID().uuidString.prefix(8))")
        var config = HybridCache.Config(memory: .init(), disk: .init(directory: folder))
        config.sweepInterval = 0
        config.journal = HybridCache.JournalConfig(fsync: .never)
        cache = HybridCache(config: config)
        let facts = ServerFacts(
            version: "test", socketPath: "/nowhere", startedAt: Date(), limits: [],
            diskExpiration: .never, memoryExpiration: .never, debugMethodsEnabled: debugMethods,
            liveCounters: { LiveCounters() }
        )
        dispatcher = Dispatcher(cache: cache, facts: facts)
    }

    /// Waits on this thread until the ioQueue is idle, so that a write may take the direct
    /// path (`HybridCache.canCommitDirect`): a flush queues behind whatever start-up work
    /// the cache queued, and the job count drops just after its completion runs.
    public func waitUntilIdle() {
        let done = DispatchSemaphore(value: 0)
        cache.flush { _ in done.signal() }
        done.wait()
        while !cache.local.scheduler.isIdle { sched_yield() }
    }

    deinit { try? FileManager.default.removeItem(at: folder) }
}
