// Stampede protection across processes: cache.lease, cache.releaseLease and
// cache.leaseStatus. A lease call reads the key like cache.get; on a miss it takes the
// key's lease, or waits (no thread waits) until the holder writes the key, gives the
// lease back, disconnects, or the lease or the wait runs out. The lease lives where the
// key does, on this host or upstream: `HybridCache.lease` (LeaseAttempt.swift).

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
            let encoding = try call.params.encoding("encoding")
            let responder = call.responder
            return dispatcher.cache.lease(
                key, ttl: ttl, wait: wait, owner: call.session.id, options: call.options, callbackQueue: call.callbackQueue
            ) { result in
                responder.finish(result) { (outcome, w) throws(RPCError) in
                    switch outcome {
                    case .found(let found):
                        try w.getResult(found, encoding: encoding)
                    case .granted(let token):
                        w.beginObject(); w.field("found", false); w.field("lease", token); w.endObject()
                    case .held:
                        w.beginObject(); w.field("found", false); w.field("leased", true); w.endObject()
                    }
                }
            }
        }

        /// `cache.releaseLease`
        static func releaseLease(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            let key = try call.params.key()
            guard let token = try call.params.string("lease") else { throw .missingParam("lease") }
            let responder = call.responder
            dispatcher.cache.releaseLease(key, token: token) { result in
                responder.finish(result) { (released, w) throws(RPCError) in
                    w.beginObject(); w.field("released", released); w.endObject()
                }
            }
            return nil
        }

        /// `cache.leaseStatus`
        static func leaseStatus(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            let key = try call.params.key()
            let responder = call.responder
            dispatcher.cache.leaseStatus(key) { result in
                responder.finish(result) { (status, w) throws(RPCError) in
                    writeLeaseStatus(status.map { ($0.endsAt, $0.waiting) }, to: &w)
                }
            }
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
