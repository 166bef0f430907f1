// What the whole deployment holds, for shared keys: `listKeys` goes on from this host's
// local keys to the upstream's keys (every node of a cluster), and the lease status of
// a shared key is the upstream lease's, whichever host holds it.

import Foundation

extension SharedStore {
    /// A `listKeys` page of shared keys, from the upstream (`Upstream.Tier.listKeys`),
    /// `cursor` the upstream's own (nil: the start). Only keys this host would share are
    /// listed (the upstream may hold others, under prefixes not shared).
    func keyPage(
        prefix: CacheKey, cursor: String?, limit: Int, callbackQueue: CallbackQueue,
        completion: @escaping @Sendable (Result<KeyPage, CacheError>) -> Void
    ) -> CacheTask {
        let task = makeTask(callbackQueue, .normal, completion)
        guard task.begin() else { return task }
        self.tier.listKeys(prefix: prefix, cursor: cursor, limit: limit) { [self] result in
            deliver(self.mapped(result) { page in
                KeyPage(keys: page.keys.filter(self.shares), cursor: page.cursor.map { "u" + $0 })
            }, task: task, callbackQueue, .normal, completion)
        }
        return task
    }

    /// Whether anyone, on any host, holds the lease on the shared `key` (asked of the
    /// upstream): nil when not.
    func leaseStatus(_ key: CacheKey, completion: @escaping @Sendable (Result<HybridCache.LeaseStatus?, CacheError>) -> Void) {
        self.tier.leaseStatus(key) { result in
            completion(self.mapped(result) { held in
                held.map { timeToLive in HybridCache.LeaseStatus(endsAt: SharedStore.expiry(timeToLive), waiting: self.leaseWaiters(for: key)) }
            })
        }
    }
}
