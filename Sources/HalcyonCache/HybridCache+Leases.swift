// Leases through the façade: one API for both homes of a key (`LeaseAttempt.swift`):
// `lease`, `releaseLease`, `leaseStatus` and `releaseLeases(owner:)`.

import Foundation

extension HybridCache {
    /// The longest lease on a shared key; a lease asked "until written" gets this, so a
    /// holder whose host dies cannot block the key for ever.
    public static let longestSharedLease: TimeInterval = 86_400

    /// How often releases that could not reach the upstream are tried again.
    public static let releaseRetryInterval: TimeInterval = 0.1

    /// Reads `key`; on a miss takes its lease for `ttl` seconds (`.infinity`: until
    /// written, at most `longestSharedLease` for a shared key) for `owner` (an opaque
    /// number, the daemon's connection id: `releaseLeases(owner:)` gives its leases back),
    /// or, when another caller holds it, waits up to `wait` seconds without a thread for
    /// the holder to write the key (then it reads again), give the lease back, or go away
    /// (then the lease may pass to this caller). A local key's lease is this host's; a
    /// shared key's is the upstream's, one holder on all hosts. Any write of a local key
    /// ends its lease (`LocalStore.written`); a shared key's holder gives it back.
    ///
    /// - Returns (through `completion`, on `callbackQueue`): `.found`, `.granted(token)` or
    ///   `.held`; `tooManyLeaseWaiters` / `tooManyLeaseWaitersForKey` when waiting would
    ///   pass a bound. Cancelling the task answers `cancelled(started: false)` and leaves
    ///   no lease taken.
    @discardableResult
    public func lease(
        _ key: CacheKey, ttl: TimeInterval, wait: TimeInterval, owner: UInt64, options: Options = .init(),
        callbackQueue: CallbackQueue = .untouch,
        completion: @escaping @Sendable (Result<LeaseOutcome, CacheError>) -> Void
    ) -> CacheTask {
        let home: LeaseHome
        switch placement(key) {
        case .local: home = .local(local.leases)
        case .shared(let shared): home = .shared(shared)
        }
        let attempt = LeaseAttempt(
            cache: self, home: home, key: key, owner: owner, ttl: ttl, wait: wait, options: options,
            callbackQueue: callbackQueue, completion: completion)
        attempt.start()
        return CacheTask.cancellable { attempt.cancel() }
    }

    /// Gives `key`'s lease back if `token` holds it; the next waiting caller gets it (a
    /// local key), or every host's waiters wake (a shared key). Completes with whether it
    /// was held. A shared release that cannot reach the upstream fails
    /// (`upstreamUnavailable`) and is tried again every `releaseRetryInterval` until the
    /// upstream answers (compare-and-delete: a lease taken since by another token is left
    /// alone).
    public func releaseLease(_ key: CacheKey, token: String, completion: @escaping @Sendable (Result<Bool, CacheError>) -> Void) {
        switch placement(key) {
        case .local: completion(.success(local.leases.release(key: key, token: token)))
        case .shared(let shared): shared.releaseLease(key, token: token, completion: completion)
        }
    }

    /// Whether anyone holds `key`'s lease (for a shared key: on any host, asked of the
    /// upstream): nil when not.
    public func leaseStatus(_ key: CacheKey, completion: @escaping @Sendable (Result<LeaseStatus?, CacheError>) -> Void) {
        switch placement(key) {
        case .local:
            completion(.success(local.leases.status(key: key).map { LeaseStatus(endsAt: $0.endsAt, waiting: $0.waiting) }))
        case .shared(let shared):
            shared.leaseStatus(key, completion: completion)
        }
    }

    /// `owner` went away (the daemon: its connection closed): its leases on this host's
    /// keys end (each passing to the next waiting caller) and its waiting calls are
    /// dropped; every shared lease it took through this host is given back upstream, so
    /// waiters on every host wake at once instead of at the lease's end.
    public func releaseLeases(owner: UInt64) {
        local.leases.releaseAll(owner: owner)
        shared?.releaseLeases(owner: owner)
    }

    /// The local lease table's counts.
    public var leaseStats: Leases.Stats { local.leases.stats }

    /// Callers of this host waiting on shared leases now.
    public var sharedLeaseWaiters: Int { shared?.leaseWaiters ?? 0 }

    /// Releases of shared leases waiting for the upstream to be reachable again.
    public var pendingSharedLeaseReleases: Int { shared?.pendingReleases ?? 0 }
}
