// What the whole deployment holds, for shared keys: `listKeys` goes on from this host's
// local keys to the upstream's keys (every node of a cluster), and the lease status of
// a shared key is the upstream lease's, whichever host holds it.

import Foundation

extension HybridCache {
    /// A `listKeys` page of shared keys, from the upstream (`Upstream.Tier.listKeys`),
    /// `cursor` the upstream's own (nil: the start). Only keys this host would share are
    /// listed (the upstream may hold others, under prefixes not shared).
    func sharedKeyPage(
        _ near: NearCache, prefix: CacheKey, cursor: String?, limit: Int, callbackQueue: CallbackQueue,
        completion: @escaping @Sendable (Result<KeyPage, CacheError>) -> Void
    ) -> CacheTask {
        let task = makeTask(callbackQueue, .normal, completion)
        guard task.begin() else { return task }
        near.tier.listKeys(prefix: prefix, cursor: cursor, limit: limit) { [self] result in
            deliver(HybridCache.mapped(result, near) { page in
                KeyPage(keys: page.keys.filter(near.shares), cursor: page.cursor.map { "u" + $0 })
            }, task: task, callbackQueue, .normal, completion)
        }
        return task
    }

    /// The lease on a shared key, as `cache.leaseStatus` shows it.
    public struct SharedLeaseStatus: Sendable, Equatable {
        /// When it ends at the latest; nil: no end.
        public var endsAt: Date?
        /// This host's callers waiting for it.
        public var waiting: Int
    }

    /// Whether anyone, on any host, holds the lease on the shared `key` (asked of the
    /// upstream): nil when not.
    public func sharedLeaseStatus(_ key: CacheKey, completion: @escaping @Sendable (Result<SharedLeaseStatus?, CacheError>) -> Void) {
        guard let near = shared(key) else { return completion(.success(nil)) }
        near.tier.leaseStatus(key) { result in
            completion(HybridCache.mapped(result, near) { held in
                held.map { timeToLive in SharedLeaseStatus(endsAt: HybridCache.expiry(timeToLive), waiting: near.leaseWaiters(for: key)) }
            })
        }
    }
}
