// cache.lease and cache.releaseLease on shared keys (keys kept in the upstream): the lease
// is held in the upstream, so one caller on all hosts computes a missing value. A caller
// that finds it held waits, without polling, until the holder (on any host) gives it back
// or writes the key with it, or its time runs out; then it reads again. See
// `HybridCache.acquireSharedLease`.

import Foundation
import HalcyonCache
import HalcyonJSON
import HalcyonSupport

/// One `cache.lease` request on a shared key, from its first read to its one reply.
///
/// Threading: `Sendable`; `run` and `cancel` may be called from any thread. `answered`
/// (a `Locked`) makes the reply happen once, whichever of a read, a grant, the wait's end
/// or a cancel comes first.
struct SharedLeaseAttempt: Sendable {
    let dispatcher: Dispatcher
    let key: CacheKey
    /// The connection taking the lease: its close gives the lease back.
    let owner: UInt64
    let ttl: TimeInterval
    let deadline: Date
    let encoding: ValueEncoding?
    let options: HybridCache.Options
    let responder: Responder
    let answered = Locked(false)
    /// The token of the latest lease attempt, whose watch (if it left one) must go when
    /// the request is answered.
    let attempt = Locked<String?>(nil)

    /// Starts the attempt; the wait's end answers `leased` if nothing else answered first.
    func start() -> CacheTask {
        let wait = deadline.timeIntervalSinceNow
        if wait > 0 {
            DispatchQueue.global().asyncAfter(deadline: .now() + wait) { [self] in answer(held()) }
        }
        run()
        return CacheTask.cancellable { [self] in answer(.error(id: responder.id, .cancelled(started: false))) }
    }

    private var isAnswered: Bool { answered.withLock { $0 } }

    /// Reads the key; a hit answers, a miss tries the lease.
    private func run() {
        guard !isAnswered else { return }
        dispatcher.cache.retrieve(forKey: key, options: options, callbackQueue: .untouch) { [self] result in
            switch result {
            case .failure(let error):
                answer(.error(id: responder.id, RPCError(error)))
            case .success(let found) where found.cacheType != .none:
                answer(.success(id: responder.id) { (w: inout JSONWriter) throws(RPCError) in
                    try w.getResult(found, encoding: encoding)
                })
            case .success:
                tryLease()
            }
        }
    }

    private func tryLease() {
        let token = UUID().uuidString
        attempt.withLock { $0 = token }
        // The wake comes on the upstream's thread, which must not be held: read elsewhere.
        // A caller that does not wait (its deadline has passed) leaves no watch.
        let waits = deadline.timeIntervalSinceNow > 0
        let wake: @Sendable () -> Void = { [self] in DispatchQueue.global().async { run() } }
        let changed = waits ? wake : nil
        dispatcher.cache.acquireSharedLease(key, token: token, ttl: ttl, owner: owner, changed: changed) { [self] result in
            switch result {
            case .success(true):
                if !answer(.success(id: responder.id) { (w: inout JSONWriter) throws(RPCError) in
                    w.beginObject(); w.field("found", false); w.field("lease", token); w.endObject()
                }) {
                    // Answered already (cancelled, timed out): nobody will use the lease.
                    dispatcher.cache.releaseSharedLease(key, token: token) { _ in }
                }
            case .success(false):
                if deadline.timeIntervalSinceNow <= 0 { answer(held()) }
                // Answered meanwhile (timed out, cancelled, a read found the value): the
                // watch just left is nobody's.
                if isAnswered { dispatcher.cache.withdrawSharedLeaseWatch(key, token: token) }
            case .failure(let error):
                answer(.error(id: responder.id, RPCError(error)))
            }
        }
    }

    private func held() -> RPCReply {
        .success(id: responder.id) { (w: inout JSONWriter) throws(RPCError) in
            w.beginObject(); w.field("found", false); w.field("leased", true); w.endObject()
        }
    }

    /// Sends `reply` unless something was answered already; whether it was sent.
    @discardableResult
    private func answer(_ reply: RPCReply) -> Bool {
        let first = answered.withLock { done -> Bool in
            defer { done = true }
            return !done
        }
        if first {
            if let token = attempt.withLock({ $0 }) { dispatcher.cache.withdrawSharedLeaseWatch(key, token: token) }
            responder.deliverNow(reply)
        }
        return first
    }
}

extension Dispatcher.LeaseMethods {
    /// `cache.releaseLease` of a shared key: compare-and-delete upstream.
    static func releaseShared(_ dispatcher: Dispatcher, _ call: MethodCall, key: CacheKey, token: String) -> CacheTask? {
        let responder = call.responder
        dispatcher.cache.releaseSharedLease(key, token: token) { result in
            responder.finish(result) { (released, w) throws(RPCError) in
                w.beginObject(); w.field("released", released); w.endObject()
            }
        }
        return nil
    }

    /// `cache.leaseStatus` of a shared key: the upstream lease, whichever host holds it;
    /// `waiters` counts this host's callers waiting for it.
    static func leaseStatusShared(_ dispatcher: Dispatcher, _ call: MethodCall, key: CacheKey) -> CacheTask? {
        let responder = call.responder
        dispatcher.cache.sharedLeaseStatus(key) { result in
            responder.finish(result) { (status, w) throws(RPCError) in
                writeLeaseStatus(status.map { ($0.endsAt, $0.waiting) }, to: &w)
            }
        }
        return nil
    }
}
