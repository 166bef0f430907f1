// Stampede protection, one type with two homes: a lease call reads the key like a get;
// on a miss it takes the key's lease (this caller computes the value) or waits, without a
// thread, until the holder writes the key, gives the lease back, goes away, or the lease
// or the wait runs out; then it reads again. A local key's lease lives in this host's
// lease table (`Leases`, which parks the waiting caller and hands the lease on); a shared
// key's lives in the upstream (`SharedStore+Leases.swift`: `SET NX PX` with a token, and a
// watch on the lease key for callers that wait). `HybridCache.lease` picks the home with
// the key's placement.

import Foundation
import HalcyonSupport

extension HybridCache {
    /// What a lease call found.
    public enum LeaseOutcome: Sendable, Equatable {
        /// The key holds a value: the read's result (never `.none`).
        case found(RetrieveResult)
        /// The caller holds the lease, with this token: it computes and stores the value.
        case granted(token: String)
        /// Another caller holds the lease, and this caller's wait ran out (or was 0).
        case held
    }

    /// Where a key's lease lives.
    enum LeaseHome: Sendable {
        /// This host's lease table.
        case local(Leases)
        /// The upstream, through the shared store.
        case shared(SharedStore)
    }
}

/// One lease call, from its first read to its one completion; read again each time the
/// key may have changed (a write woke it, a lease key changed upstream, a write came
/// between its read and its attempt).
///
/// Threading: `run` and `cancel` may be called from any thread. `step` (a `Locked`)
/// orders a cancel against parking, waking and answering: it is held across the local
/// table's `acquire` (lock order: `step`, then the lease table's), so a wake always finds
/// the waiter's id recorded and a cancel always finds what to withdraw. The completion is
/// delivered once, through the call's callback queue, never under a lock.
final class LeaseAttempt: Sendable {
    /// Where the call stands.
    enum Step: Sendable {
        /// Reading the key, or about to.
        case reading
        /// Parked in the local table as this waiter.
        case parked(UInt64)
        /// Cancelled while reading or trying: the next step answers `cancelled`.
        case cancelled
        /// Answered.
        case done
    }

    let cache: HybridCache
    let home: HybridCache.LeaseHome
    let key: CacheKey
    let owner: UInt64
    let ttl: TimeInterval
    /// When the caller stops waiting for another holder.
    let deadline: Date
    let options: HybridCache.Options
    let callbackQueue: CallbackQueue
    let completion: @Sendable (Result<HybridCache.LeaseOutcome, CacheError>) -> Void
    private let step = Locked(Step.reading)
    /// The token of the latest upstream attempt, whose watch (if it left one) goes when
    /// the call is answered.
    private let upstreamToken = Locked<String?>(nil)

    init(
        cache: HybridCache, home: HybridCache.LeaseHome, key: CacheKey, owner: UInt64, ttl: TimeInterval,
        wait: TimeInterval, options: HybridCache.Options, callbackQueue: CallbackQueue,
        completion: @escaping @Sendable (Result<HybridCache.LeaseOutcome, CacheError>) -> Void
    ) {
        self.cache = cache
        self.home = home
        self.key = key
        self.owner = owner
        self.ttl = ttl
        deadline = Date().addingTimeInterval(wait)
        self.options = options
        self.callbackQueue = callbackQueue
        self.completion = completion
    }

    /// Starts the call. Upstream, the wait's end is a timer of its own (a local wait's end
    /// is the table's).
    func start() {
        if case .shared = home {
            let wait = deadline.timeIntervalSinceNow
            if wait > 0 {
                DispatchQueue.global().asyncAfter(deadline: .now() + wait) { [self] in answer(.success(.held)) }
            }
        }
        run()
    }

    /// Withdraws a waiting call and answers `cancelled` (nothing was done: no lease
    /// taken); a call reading or trying answers so at its next step. A lease granted to
    /// a cancelled call is given back at once, so the next waiter need not wait for its
    /// end.
    func cancel() {
        let withdrawn = step.withLock { step -> Bool in
            switch step {
            case .reading:
                step = .cancelled
                return false
            case .parked(let waiter):
                guard case .local(let leases) = home, leases.withdraw(key: key, waiter: waiter) else {
                    step = .cancelled
                    return false
                }
                step = .done
                return true
            case .cancelled, .done:
                return false
            }
        }
        if withdrawn { deliver(.failure(.cancelled(started: false))) }
        // Upstream nothing is parked: the watch goes with the answer.
        if case .shared = home { answer(.failure(.cancelled(started: false))) }
    }

    // MARK: Reading

    /// Reads the key; a hit answers, a miss tries the lease.
    private func run() {
        guard !isAnswered else { return }
        let observed: UInt64
        if case .local(let leases) = home { observed = leases.epoch } else { observed = 0 }
        cache.retrieve(forKey: key, options: options, callbackQueue: .untouch) { [self] result in
            switch result {
            case .failure(let error):
                answer(.failure(error))
            case .success(let found) where found.cacheType != .none:
                answer(.success(.found(found)))
            case .success:
                switch home {
                case .local(let leases): tryLocal(leases, observed: observed)
                case .shared(let shared): tryShared(shared)
                }
            }
        }
    }

    private var isAnswered: Bool {
        step.withLock { step in
            if case .done = step { return true }
            return false
        }
    }

    // MARK: This host's table

    private func tryLocal(_ leases: Leases, observed: UInt64) {
        let wait = max(0, deadline.timeIntervalSinceNow)
        // Under `step`: a cancel sees either the call before it parked or its waiter id,
        // and a wake (on another thread) waits for the id to be recorded.
        let outcome = step.withLock { step -> Leases.Acquire? in
            if case .cancelled = step {
                step = .done
                return nil
            }
            let outcome = leases.acquire(key: key, owner: owner, ttl: ttl, wait: wait, observed: observed) { [self] wake in
                woken(wake, leases)
            }
            if case .parked(let waiter) = outcome { step = .parked(waiter) }
            return outcome
        }
        guard let outcome else { return deliver(.failure(.cancelled(started: false))) }
        switch outcome {
        case .granted(let token): answer(.success(.granted(token: token)))
        case .parked: break
        case .held: answer(.success(.held))
        case .retry: run()
        case .refused(.tooManyLeaseWaitersForKey): answer(.failure(.tooManyLeaseWaitersForKey(limit: leases.limits.waitersPerKey)))
        case .refused(.tooManyLeaseWaiters): answer(.failure(.tooManyLeaseWaiters(limit: leases.limits.waiters)))
        }
    }

    /// The local table woke the parked call.
    private func woken(_ wake: Leases.Wake, _ leases: Leases) {
        let cancelled = step.withLock { step -> Bool in
            let cancelled: Bool
            if case .cancelled = step { cancelled = true } else { cancelled = false }
            step = wake == .written && !cancelled ? .reading : .done
            return cancelled
        }
        switch wake {
        case .written where cancelled:
            deliver(.failure(.cancelled(started: false)))
        case .written:
            run()
        case .granted(let token) where cancelled:
            // Nobody will use it: the next parked caller gets it now, not at its ttl.
            leases.release(key: key, token: token)
            deliver(.failure(.cancelled(started: false)))
        case .granted(let token):
            deliver(.success(.granted(token: token)))
        case .timedOut:
            deliver(.success(.held))
        }
    }

    // MARK: The upstream

    private func tryShared(_ shared: SharedStore) {
        let token = UUID().uuidString
        upstreamToken.withLock { $0 = token }
        // The wake comes on the upstream's thread, which must not be held: read elsewhere.
        // A caller that does not wait (its deadline has passed) leaves no watch.
        let waits = deadline.timeIntervalSinceNow > 0
        let wake: @Sendable () -> Void = { [self] in DispatchQueue.global().async { self.run() } }
        let changed = waits ? wake : nil
        shared.acquireLease(key, token: token, ttl: ttl, owner: owner, changed: changed) { [self] result in
            switch result {
            case .success(true):
                // Answered already (cancelled, timed out): nobody will use the lease.
                if !answer(.success(.granted(token: token))) { shared.releaseLease(key, token: token) { _ in } }
            case .success(false):
                if !waits || deadline.timeIntervalSinceNow <= 0 { answer(.success(.held)) }
                // Answered meanwhile (timed out, cancelled, a read found the value): the
                // watch just left is nobody's.
                if isAnswered { shared.withdrawLeaseWatch(key, token: token) }
            case .failure(let error):
                answer(.failure(error))
            }
        }
    }

    // MARK: Answering

    /// Delivers `result` unless the call was answered already; whether it was. A watch
    /// left upstream goes with the answer.
    @discardableResult
    private func answer(_ result: Result<HybridCache.LeaseOutcome, CacheError>) -> Bool {
        let first = step.withLock { step -> Bool in
            if case .done = step { return false }
            step = .done
            return true
        }
        guard first else { return false }
        if case .shared(let shared) = home, let token = upstreamToken.withLock({ $0 }) {
            shared.withdrawLeaseWatch(key, token: token)
        }
        deliver(result)
        return true
    }

    /// Hands `result` to the callback queue (the call is marked answered by then).
    private func deliver(_ result: Result<HybridCache.LeaseOutcome, CacheError>) {
        let completion = self.completion
        callbackQueue.execute(priority: options.priority) { completion(result) }
    }
}
