// Stampede protection across processes: cache.lease, cache.releaseLease and
// cache.leaseStatus. A lease call
// reads the key like cache.get; on a miss it takes the key's lease, or parks its reply in
// the lease table (no thread waits) until the holder writes the key, gives the lease
// back, disconnects, or the lease or the wait runs out. See `Leases`.

import Foundation
import HalcyonCache
import HalcyonJSON
import HalcyonSupport

extension Dispatcher {
    /// Handlers of the methods in this file; their lines in the table are in `MethodTable.swift`.
    enum LeaseMethods {
        /// `cache.lease`
        static func lease(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            let key = try call.params.key()
            guard let ttlForm = try call.params.expiration("ttl") else { throw .missingParam("ttl") }
            let ttl: TimeInterval
            switch ttlForm {
            case .never: ttl = .infinity
            case .expired:
                throw .invalidParams(reason: .invalidExpiration, param: "ttl", message: "'ttl' must not be \"expired\"")
            default:
                let now = Date()
                ttl = ttlForm.estimatedExpirationSince(now).timeIntervalSince(now)
                guard ttl > 0 else {
                    throw .invalidParams(reason: .invalidExpiration, param: "ttl", message: "'ttl' is already over")
                }
            }
            let wait = try call.params.double("wait") ?? 0
            guard wait >= 0, wait.isFinite else {
                throw .invalidParams(reason: .outOfRange, param: "wait", message: "'wait' must be 0 or more seconds")
            }
            if dispatcher.cache.isShared(key) {
                return SharedLeaseAttempt(
                    dispatcher: dispatcher, key: key, owner: call.session.id, ttl: ttl, deadline: Date().addingTimeInterval(wait),
                    encoding: try call.params.encoding("encoding"), options: call.options, responder: call.responder
                ).start()
            }
            let attempt = LeaseAttempt(
                dispatcher: dispatcher, key: key, owner: call.session.id, ttl: ttl,
                deadline: Date().addingTimeInterval(wait), encoding: try call.params.encoding("encoding"),
                options: call.options, responder: call.responder, progress: LeaseAttempt.Progress())
            attempt.run()
            // A cancel takes a parked call out of the lease table and answers it at once,
            // instead of when its wait ends.
            return CacheTask.cancellable { attempt.cancel() }
        }

        /// `cache.releaseLease`
        static func releaseLease(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            let key = try call.params.key()
            guard let token = try call.params.string("lease") else { throw .missingParam("lease") }
            if dispatcher.cache.isShared(key) { return releaseShared(dispatcher, call, key: key, token: token) }
            let released = dispatcher.leases.release(key: key, token: token)
            call.responder.deliverNow(.success(id: call.id) { (w: inout JSONWriter) throws(RPCError) in
                w.beginObject(); w.field("released", released); w.endObject()
            })
            return nil
        }

        /// `cache.leaseStatus`
        static func leaseStatus(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            let key = try call.params.key()
            if dispatcher.cache.isShared(key) { return leaseStatusShared(dispatcher, call, key: key) }
            let status = dispatcher.leases.status(key: key)
            call.responder.deliverNow(.success(id: call.id) { (w: inout JSONWriter) throws(RPCError) in
                writeLeaseStatus(status.map { ($0.endsAt, $0.waiting) }, to: &w)
            })
            return nil
        }

        /// A `cache.leaseStatus` result: `{"leased": false}` for nil, else the lease's end
        /// at the latest (nil: none) and its waiting callers.
        static func writeLeaseStatus(_ status: (endsAt: Date?, waiting: Int)?, to w: inout JSONWriter) {
            w.beginObject()
            w.field("leased", status != nil)
            if let status {
                w.field("expiresAt", expiresAt: status.endsAt)
                w.field("waiters", status.waiting)
            }
            w.endObject()
        }
    }

}

/// One `cache.lease` request, from its first read to its one reply; re-run when a write
/// wakes it. Every reply goes through the connection's callback queue.
///
/// Threading: `Sendable`; `run` and `cancel` may be called from any thread. `progress`
/// (a `Locked`) orders a cancel against parking and waking: it is held across `acquire`
/// (lock order: `progress`, then the lease table's), so a wake always finds the waiter's
/// id recorded.
struct LeaseAttempt: Sendable {
    /// Where the request stands, for a cancel.
    enum Step: Sendable {
        /// Reading the key, or about to.
        case reading
        /// In the lease table as this waiter.
        case parked(UInt64)
        /// Cancelled while reading: the next step answers `cancelled` instead of parking.
        case cancelled
        /// Answered.
        case done
    }

    /// The call's `Step`, shared by its runs, its wake and its cancel.
    ///
    /// Threading: any thread; `step` is a `Locked`.
    final class Progress: Sendable {
        let step = Locked(Step.reading)
    }

    let dispatcher: Dispatcher
    let key: CacheKey
    let owner: UInt64
    let ttl: TimeInterval
    /// When the caller stops waiting for another holder.
    let deadline: Date
    let encoding: ValueEncoding?
    let options: HybridCache.Options
    let responder: Responder
    let progress: Progress

    /// Withdraws a parked call and answers `cancelled` (nothing was done: no lease taken);
    /// a call still reading answers so instead of parking. A call being woken answers as
    /// its wake says, and the transport turns a success into `cancelled`; a lease granted
    /// to it meanwhile is given back.
    func cancel() {
        let withdrawn = progress.step.withLock { step -> Bool in
            switch step {
            case .reading:
                step = .cancelled
                return false
            case .parked(let waiter):
                guard dispatcher.leases.withdraw(key: key, waiter: waiter) else {
                    step = .cancelled
                    return false
                }
                step = .done
                return true
            case .cancelled, .done:
                return false
            }
        }
        if withdrawn { responder.deliverNow(.error(id: responder.id, .cancelled(started: false))) }
    }

    /// Reads the key; a hit answers, a miss goes to the lease table.
    func run() {
        let leases = dispatcher.leases
        let observed = leases.epoch
        dispatcher.cache.retrieve(forKey: key, options: options, callbackQueue: .untouch) { result in
            switch result {
            case .failure(let error):
                responder.deliverNow(.error(id: responder.id, RPCError(error)))
            case .success(let found) where found.cacheType != .none:
                responder.deliverNow(.success(id: responder.id) { (w: inout JSONWriter) throws(RPCError) in
                    try w.getResult(found, encoding: encoding)
                })
            case .success:
                let wait = max(0, deadline.timeIntervalSinceNow)
                // Under `progress`: a cancel sees either the call before it parked or its
                // waiter id, and a wake (on another thread) waits for the id to be recorded.
                let outcome = progress.step.withLock { step -> Leases.Acquire? in
                    if case .cancelled = step {
                        step = .done
                        return nil
                    }
                    let outcome = leases.acquire(
                        key: key, owner: owner, ttl: ttl, wait: wait, observed: observed
                    ) { wake in woken(wake) }
                    if case .parked(let waiter) = outcome { step = .parked(waiter) }
                    return outcome
                }
                guard let outcome else {
                    responder.deliverNow(.error(id: responder.id, .cancelled(started: false)))
                    return
                }
                switch outcome {
                case .granted(let token): answerLease(token)
                case .parked: break
                case .held: answerHeld()
                case .retry: run()
                case .refused(let refusal):
                    let reason: RPCError.OverloadReason = refusal == .tooManyLeaseWaitersForKey
                        ? .tooManyLeaseWaitersForKey : .tooManyLeaseWaiters
                    let limit = refusal == .tooManyLeaseWaitersForKey ? leases.limits.waitersPerKey : leases.limits.waiters
                    responder.deliverNow(.error(id: responder.id, .overloaded(reason: reason, limit: limit)))
                }
            }
        }
    }

    /// The lease table woke the parked call.
    private func woken(_ wake: Leases.Wake) {
        let cancelled = progress.step.withLock { step -> Bool in
            defer { step = wake == .written ? .reading : .done }
            if case .cancelled = step { return true }
            return false
        }
        switch wake {
        case .written where cancelled:
            progress.step.withLock { $0 = .done }
            responder.deliverNow(.error(id: responder.id, .cancelled(started: false)))
        case .written: run()
        case .granted(let token) where cancelled:
            // Nobody will use it: the next parked caller gets it now, not at its ttl.
            dispatcher.leases.release(key: key, token: token)
            responder.deliverNow(.error(id: responder.id, .cancelled(started: false)))
        case .granted(let token): answerLease(token)
        case .timedOut: answerHeld()
        }
    }

    private func answerLease(_ token: String) {
        responder.deliverNow(.success(id: responder.id) { (w: inout JSONWriter) throws(RPCError) in
            w.beginObject(); w.field("found", false); w.field("lease", token); w.endObject()
        })
    }

    private func answerHeld() {
        responder.deliverNow(.success(id: responder.id) { (w: inout JSONWriter) throws(RPCError) in
            w.beginObject(); w.field("found", false); w.field("leased", true); w.endObject()
        })
    }
}

extension Leases {
    /// Whether a write's outcome may have changed the key, so its lease must end and its
    /// parked callers read again: a success that `changed` says wrote, or a write that ran
    /// but whose reply was withdrawn by a cancel (its effects stand; reading again is
    /// harmless when it did not store).
    static func mayHaveWritten<T>(_ result: Result<T, CacheError>, _ changed: (T) -> Bool) -> Bool {
        switch result {
        case .success(let value): return changed(value)
        case .failure(.cancelled(started: true)): return true
        case .failure: return false
        }
    }
}
