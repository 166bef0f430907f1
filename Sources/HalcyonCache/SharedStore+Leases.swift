// Leases on shared keys, held in the upstream so that one caller on all hosts computes a
// missing value: taken with `SET NX PX` and a token, given back by compare-and-delete.
// A caller that finds the lease held waits for the lease key to change, which the
// upstream announces as an invalidation (its release or expiry on another host), or
// which this host sees itself (a release through it): no polling.

import Foundation
import HalcyonSupport

extension SharedStore {
    /// Tries to take the upstream lease on the shared `key` with `token` for `ttl` seconds,
    /// for `owner` (an opaque number, the daemon's connection id: `releaseLeases(owner:)`
    /// gives its leases back). Completes `true` when taken; `false` when another holder
    /// has it: then, for a caller that waits (`changed` not nil), unless
    /// `UpstreamConfig.leaseWaitersLimit` callers wait already (`tooManyLeaseWaiters`), `changed` is called
    /// once, on any thread, when that lease next changes (released, expired, or every copy
    /// dropped), and the caller reads and tries again. A caller that stops waiting first
    /// calls `withdrawLeaseWatch` with the same token, so nothing is kept for it.
    func acquireLease(
        _ key: CacheKey, token: String, ttl: TimeInterval, owner: UInt64, changed: (@Sendable () -> Void)?,
        completion: @escaping @Sendable (Result<Bool, CacheError>) -> Void
    ) {
        let seconds = ttl.isFinite ? min(ttl, HybridCache.longestSharedLease) : HybridCache.longestSharedLease
        self.beginLeaseAttempt()
        self.tier.acquireLease(key, token: token, lifetime: max(1, Int64((seconds * 1000).rounded(.up)))) { result in
            switch result {
            case .success(.acquired):
                self.leaseTaken(key, token: token, owner: owner)
                self.endLeaseAttempt()
                completion(.success(true))
            case .success(.held(_, let leaseKey, let sequence)):
                guard let changed else {
                    self.endLeaseAttempt()
                    return completion(.success(false))
                }
                guard self.watch(leaseKey: leaseKey, of: key, token: token, sequence: sequence, changed) else {
                    return completion(.failure(.tooManyLeaseWaiters(limit: self.leaseWaitersLimit)))
                }
                completion(.success(false))
            case .failure(let failure):
                self.endLeaseAttempt()
                completion(.failure(self.cacheError(failure)))
            }
        }
    }

    /// The caller of the attempt with `token` stopped waiting for `key`'s lease: the
    /// watch `acquireLease` left for it goes.
    func withdrawLeaseWatch(_ key: CacheKey, token: String) {
        withdrawWatch(of: key, token: token)
    }

    /// Gives the upstream lease on the shared `key` back if `token` still holds it; wakes
    /// this host's callers waiting on it. Completes with whether it was held. A release
    /// that cannot reach the upstream fails (`upstreamUnavailable`) and is also tried again
    /// every `releaseRetryInterval` until the upstream answers, so a lease whose holder
    /// gave it back, or went away, during an outage ends soon after the upstream returns
    /// (compare-and-delete: a lease taken since by another token is left alone).
    func releaseLease(_ key: CacheKey, token: String, completion: @escaping @Sendable (Result<Bool, CacheError>) -> Void) {
        leaseGivenBack(key, token: token)
        release(key, token: token) { result in completion(self.mapped(result) { $0 }) }
    }

    /// One compare-and-delete upstream; a failure to reach it queues a retry.
    private func release(
        _ key: CacheKey, token: String, completion: @escaping @Sendable (Result<Bool, Upstream.Failure>) -> Void
    ) {
        self.tier.releaseLease(key, token: token) { result in
            switch result {
            case .success(true): self.leaseEnded(for: key)
            case .failure(.unavailable), .failure(.unauthorized):
                if self.releaseFailed(key, token: token) { self.retryReleases() }
            case .success(false), .failure(.refused): break
            }
            completion(result)
        }
    }

    /// After `releaseRetryInterval`, tries every pending release again; goes on while any
    /// is left.
    private func retryReleases() {
        DispatchQueue.global().asyncAfter(deadline: .now() + HybridCache.releaseRetryInterval) {
            let pending = self.takePendingReleases()
            guard !pending.isEmpty else { return }
            let left = Locked(pending.count)
            for (key, token) in pending {
                self.release(key, token: token) { _ in
                    let last = left.withLock { left -> Bool in
                        left -= 1
                        return left == 0
                    }
                    if last { self.retryReleases() }
                }
            }
        }
    }

    /// `owner` went away (the daemon: its connection closed): every shared lease it took
    /// through this host and still holds is given back upstream (compare-and-delete with
    /// its token), so waiters on every host wake at once instead of at the lease's end.
    func releaseLeases(owner: UInt64) {
        for (key, token) in ownerGone(owner) {
            releaseLease(key, token: token) { _ in }
        }
    }
}
