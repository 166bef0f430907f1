// Leases on shared keys, held in the upstream so that one caller on all hosts computes a
// missing value: taken with `SET NX PX` and a token, given back by compare-and-delete.
// A caller that finds the lease held waits for the lease key to change, which the
// upstream announces as an invalidation (its release or expiry on another host), or
// which this host sees itself (a release through it): no polling.

import Foundation

extension HybridCache {
    /// The longest lease on a shared key; a lease asked "until written" gets this, so a
    /// holder whose host dies cannot block the key for ever.
    public static let longestSharedLease: TimeInterval = 86_400

    /// Whether `key` lives in the upstream (`Config.upstream` and its prefixes).
    public func isShared(_ key: CacheKey) -> Bool { shared(key) != nil }

    /// Tries to take the upstream lease on the shared `key` with `token` for `ttl` seconds,
    /// for `owner` (an opaque number, the daemon's connection id: `releaseSharedLeases`
    /// gives its leases back). Completes `true` when taken; `false` when another holder has it: then `changed` is
    /// called once, on any thread, when that lease next changes (released, expired, or
    /// every copy dropped), and the caller reads and tries again. A caller that gives up
    /// waiting may ignore the call.
    public func acquireSharedLease(
        _ key: CacheKey, token: String, ttl: TimeInterval, owner: UInt64, changed: @escaping @Sendable () -> Void,
        completion: @escaping @Sendable (Result<Bool, CacheError>) -> Void
    ) {
        guard let near = shared(key) else { return completion(.success(true)) }
        let seconds = ttl.isFinite ? min(ttl, HybridCache.longestSharedLease) : HybridCache.longestSharedLease
        near.beginLeaseAttempt()
        near.tier.acquireLease(key, token: token, lifetime: max(1, Int64((seconds * 1000).rounded(.up)))) { result in
            switch result {
            case .success(.acquired):
                near.leaseTaken(key, token: token, owner: owner)
                near.endLeaseAttempt()
                completion(.success(true))
            case .success(.held(_, let leaseKey, let sequence)):
                near.watch(leaseKey: leaseKey, of: key, sequence: sequence, changed)
                completion(.success(false))
            case .failure(let failure):
                near.endLeaseAttempt()
                completion(.failure(HybridCache.cacheError(failure, near)))
            }
        }
    }

    /// Gives the upstream lease on the shared `key` back if `token` still holds it; wakes
    /// this host's callers waiting on it. Completes with whether it was held.
    public func releaseSharedLease(_ key: CacheKey, token: String, completion: @escaping @Sendable (Result<Bool, CacheError>) -> Void) {
        guard let near = shared(key) else { return completion(.success(false)) }
        near.leaseGivenBack(key, token: token)
        near.tier.releaseLease(key, token: token) { result in
            if case .success(true) = result { near.leaseEnded(for: key) }
            completion(HybridCache.mapped(result, near) { $0 })
        }
    }

    /// `owner` went away (the daemon: its connection closed): every shared lease it took
    /// through this host and still holds is given back upstream (compare-and-delete with
    /// its token), so waiters on every host wake at once instead of at the lease's end.
    public func releaseSharedLeases(owner: UInt64) {
        guard let nearCache else { return }
        for (key, token) in nearCache.ownerGone(owner) {
            releaseSharedLease(key, token: token) { _ in }
        }
    }

    /// Callers of this host waiting on shared leases now.
    public var sharedLeaseWaiters: Int { nearCache?.leaseWaiters ?? 0 }
}
