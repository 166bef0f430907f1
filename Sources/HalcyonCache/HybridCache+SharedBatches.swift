// `storeMany` and `removeMany` when some of their keys are shared: the host-local keys
// go as one local step, as ever, and the shared ones as one upstream batch
// (`Upstream.Tier.writeMany`: the Redis tier writes them together, one pipelined write
// per node) instead of one round trip per key. The reply comes after every write is in
// the upstream. Each shared key keeps its place in the key's order (`NearCache`).

import Foundation
import HalcyonSupport

extension HybridCache {
    /// `storeMany` with shared keys: the local items as one `storeMany` of their own, the
    /// shared ones as one upstream batch; the results together, in the items' order.
    func storeManySplit(
        _ items: [StoreItem], options: Options, callbackQueue: CallbackQueue,
        completion: (@Sendable (Result<[StoreResult], CacheError>) -> Void)?
    ) -> CacheTask {
        guard let near = nearCache else { return storeMany(items, options: options, callbackQueue: callbackQueue, completion: completion) }
        let (sharedIndexes, localIndexes) = HybridCache.split(items.indices, by: { near.shares(items[$0].key) })
        let writes: [Upstream.Write] = sharedIndexes.map { index in
            var itemOptions = options
            itemOptions.diskExpiration = items[index].diskExpiration ?? options.diskExpiration
            itemOptions.memoryExpiration = items[index].memoryExpiration ?? options.memoryExpiration
            // An expiration already over stores nothing and removes any older value.
            guard let lifetime = upstreamLifetime(itemOptions) else { return .remove(items[index].key) }
            return .set(items[index].key, items[index].entry, lifetime)
        }
        return joined(sharedIndexes, localIndexes, callbackQueue, options.priority, completion, shared: { done in
            self.writeManyShared(near, writes, options.priority) { results in
                done(results.map { outcome in
                    outcome.map { write, written in
                        guard case .set(_, let entry, _) = write else {
                            return StoreResult(stored: false, size: 0, expiresAt: nil, version: nil)
                        }
                        return StoreResult(stored: true, size: entry.bytes.count, expiresAt: HybridCache.expiry(written.timeToLive),
                                           version: written.version)
                    }
                })
            }
        }, local: { done in
            self.storeMany(localIndexes.map { items[$0] }, options: options, callbackQueue: .untouch, completion: done)
        })
    }

    /// `removeMany` with shared keys, as `storeManySplit`. Removing from memory alone
    /// (`fromDisk: false`) touches no upstream: each key then goes on its own.
    func removeManySplit(
        _ keys: [CacheKey], fromMemory: Bool, fromDisk: Bool, options: Options, callbackQueue: CallbackQueue,
        completion: (@Sendable (Result<[Bool], CacheError>) -> Void)?
    ) -> CacheTask {
        guard let near = nearCache, fromDisk else {
            return gather(keys.count, callbackQueue, options.priority, completion) { index, done in
                remove(forKey: keys[index], fromMemory: fromMemory, fromDisk: fromDisk, options: options, completion: done)
            }
        }
        let (sharedIndexes, localIndexes) = HybridCache.split(keys.indices, by: { near.shares(keys[$0]) })
        let writes = sharedIndexes.map { Upstream.Write.remove(keys[$0]) }
        return joined(sharedIndexes, localIndexes, callbackQueue, options.priority, completion, shared: { done in
            self.writeManyShared(near, writes, options.priority) { results in
                done(results.map { outcome in outcome.map { _, written in written.stored } })
            }
        }, local: { done in
            self.removeMany(forKeys: localIndexes.map { keys[$0] }, fromMemory: fromMemory, fromDisk: fromDisk, options: options,
                            callbackQueue: .untouch, completion: done)
        })
    }

    /// Runs `writes` of shared keys as one upstream batch once the order of every key
    /// named allows (`NearCache.admitWrites`), keeps this host's copies of what was
    /// stored (drops the others: a failed write's outcome is not known), and hands back
    /// each outcome with its write, before the keys' next operations may start.
    func writeManyShared(
        _ near: NearCache, _ writes: [Upstream.Write], _ priority: Operation.QueuePriority,
        _ done: @escaping @Sendable ([Result<(Upstream.Write, Upstream.Written), CacheError>]) -> Void
    ) {
        let keys = Set(writes.map(\.key))
        near.admitWrites(keys) { [self] in
            near.tier.writeMany(writes) { results in
                let outcomes = zip(writes, results).map { write, result -> Result<(Upstream.Write, Upstream.Written), CacheError> in
                    switch (write, result) {
                    case (.set(let key, var entry, let lifetime), .success(let written)):
                        entry.version = written.version ?? 0
                        near.keep(key, entry, timeToLive: written.timeToLive, sequence: written.sequence,
                                  sliding: lifetime.slidingMilliseconds)
                        self.counters.withLock { $0.sets += 1 }
                    case (.remove(let key), .success(let written)):
                        near.drop(key)
                        if written.stored { self.counters.withLock { $0.removals += 1 } }
                    case (_, .failure):
                        near.drop(write.key)
                    }
                    return HybridCache.mapped(result, near) { (write, $0) }
                }
                done(outcomes)
                for key in keys { near.finish(key, write: true) }
            }
        }
    }

    /// The indexes for which `isShared` holds, and the others, each in order.
    static func split(_ indexes: Range<Int>, by isShared: (Int) -> Bool) -> (shared: [Int], local: [Int]) {
        var shared: [Int] = [], local: [Int] = []
        for index in indexes { if isShared(index) { shared.append(index) } else { local.append(index) } }
        return (shared, local)
    }

    /// Runs the shared part (per-item outcomes) and the local part (one outcome for all)
    /// and delivers every item's result in its place, or the first failure.
    private func joined<T: Sendable>(
        _ sharedIndexes: [Int], _ localIndexes: [Int], _ callbackQueue: CallbackQueue, _ priority: Operation.QueuePriority,
        _ completion: (@Sendable (Result<[T], CacheError>) -> Void)?,
        shared: @escaping @Sendable (@escaping @Sendable ([Result<T, CacheError>]) -> Void) -> Void,
        local: (@escaping @Sendable (Result<[T], CacheError>) -> Void) -> CacheTask
    ) -> CacheTask {
        // The work starts now and is not withdrawn: a cancel only changes the reply.
        let task = makeTask(callbackQueue, priority, completion)
        _ = task.begin()
        let parts = Locked((shared: [Result<T, CacheError>]?.none, local: Result<[T], CacheError>?.none, delivered: false))
        let finish: @Sendable () -> Void = { [self] in
            // The second part to arrive delivers.
            let both = parts.withLock { parts -> ([Result<T, CacheError>], Result<[T], CacheError>)? in
                guard let shared = parts.shared, let local = parts.local, !parts.delivered else { return nil }
                parts.delivered = true
                return (shared, local)
            }
            guard let (sharedResults, localResult) = both else { return }
            var results = [T?](repeating: nil, count: sharedIndexes.count + localIndexes.count)
            var failure: CacheError?
            for (index, result) in zip(sharedIndexes, sharedResults) {
                switch result {
                case .success(let value): results[index] = value
                case .failure(let error): failure = failure ?? error
                }
            }
            switch localResult {
            case .success(let values): for (index, value) in zip(localIndexes, values) { results[index] = value }
            case .failure(let error): failure = failure ?? error
            }
            deliver(failure.map { .failure($0) } ?? .success(results.map { $0! }), task: task, callbackQueue, priority, completion)
        }
        shared { results in
            parts.withLock { $0.shared = results }
            finish()
        }
        let record: @Sendable (Result<[T], CacheError>) -> Void = { result in
            parts.withLock { $0.local = result }
            finish()
        }
        if localIndexes.isEmpty { record(.success([])) } else { _ = local(record) }
        return task
    }
}
