// Leases on shared keys, held in the upstream so that one caller on all hosts computes a
// missing value: taken with `SET NX PX` and a token, given back by compare-and-delete.
// A caller that finds the lease held waits for the lease key to change, which the
// upstream announces as an invalidation (its release or expiry on another host), or
// which this host sees itself (a release through it): no polling.

import Foundation
import HalcyonSupport

extension HybridCache {
    /// The longest lease on a shared key; a lease asked "until written" gets this, so a
    /// holder whose host dies cannot block the key for ever.
    public static let longestSharedLease: TimeInterval = 86_400

    /// Whether `key` lives in the upstream (`Config.upstream` and its prefixes).
    public func isShared(_ key: CacheKey) -> Bool { shared(key) != nil }

    /// Tries to take the upstream lease on the shared `key` with `token` for `ttl` seconds,
    /// for `owner` (an opaque number, the daemon's connection id: `releaseSharedLeases`
    /// gives its leases back). Completes `true` when taken; `false` when another holder
    /// has it: then, for a caller that waits (`changed` not nil), unless
    /// `UpstreamConfig.leaseWaitersLimit` callers wait already (`tooManyLeaseWaiters`), `changed` is called
    /// once, on any thread, when that lease next changes (released, expired, or every copy
    /// dropped), and the caller reads and tries again. A caller that stops waiting first
    /// calls `withdrawSharedLeaseWatch` with the same token, so nothing is kept for it.
    public func acquireSharedLease(
        _ key: CacheKey, token: String, ttl: TimeInterval, owner: UInt64, changed: (@Sendable () -> Void)?,
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
                guard let changed else {
                    near.endLeaseAttempt()
                    return completion(.success(false))
                }
                guard near.watch(leaseKey: leaseKey, of: key, token: token, sequence: sequence, changed) else {
                    return completion(.failure(.tooManyLeaseWaiters(limit: near.leaseWaitersLimit)))
                }
                completion(.success(false))
            case .failure(let failure):
                near.endLeaseAttempt()
                completion(.failure(HybridCache.cacheError(failure, near)))
            }
        }
    }

    /// The caller of the attempt with `token` stopped waiting for `key`'s lease: the
    /// watch `acquireSharedLease` left for it goes.
    public func withdrawSharedLeaseWatch(_ key: CacheKey, token: String) {
        shared(key)?.withdrawWatch(of: key, token: token)
    }

    /// Gives the upstream lease on the shared `key` back if `token` still holds it; wakes
    /// this host's callers waiting on it. Completes with whether it was held. A release
    /// that cannot reach the upstream fails (`upstreamUnavailable`) and is also tried again
    /// every `releaseRetryInterval` until the upstream answers, so a lease whose holder
    /// gave it back, or went away, during an outage ends soon after the upstream returns
    /// (compare-and-delete: a lease taken since by another token is left alone).
    public func releaseSharedLease(_ key: CacheKey, token: String, completion: @escaping @Sendable (Result<Bool, CacheError>) -> Void) {
        guard let near = shared(key) else { return completion(.success(false)) }
        near.leaseGivenBack(key, token: token)
        HybridCache.release(key, token: token, near) { result in completion(HybridCache.mapped(result, near) { $0 }) }
    }

    /// How often releases that could not reach the upstream are tried again.
    public static let releaseRetryInterval: TimeInterval = 0.1

    /// One compare-and-delete upstream; a failure to reach it queues a retry.
    private static func release(
        _ key: CacheKey, token: String, _ near: NearCache, completion: @escaping @Sendable (Result<Bool, Upstream.Failure>) -> Void
    ) {
        near.tier.releaseLease(key, token: token) { result in
            switch result {
            case .success(true): near.leaseEnded(for: key)
            case .failure(.unavailable), .failure(.unauthorized):
                if near.releaseFailed(key, token: token) { retryReleases(near) }
            case .success(false), .failure(.refused): break
            }
            completion(result)
        }
    }

    /// After `releaseRetryInterval`, tries every pending release again; goes on while any
    /// is left.
    private static func retryReleases(_ near: NearCache) {
        DispatchQueue.global().asyncAfter(deadline: .now() + releaseRetryInterval) {
            let pending = near.takePendingReleases()
            guard !pending.isEmpty else { return }
            let left = Locked(pending.count)
            for (key, token) in pending {
                release(key, token: token, near) { _ in
                    let last = left.withLock { left -> Bool in
                        left -= 1
                        return left == 0
                    }
                    if last { retryReleases(near) }
                }
            }
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

    /// Releases of shared leases waiting for the upstream to be reachable again.
    public var pendingSharedLeaseReleases: Int { nearCache?.pendingReleases ?? 0 }
}
