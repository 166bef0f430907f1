// Key listing and removal by prefix: cache.keys (pages with an opaque cursor, from both
// tiers, values never loaded) and cache.removePrefix (one write on the ioQueue).

import Foundation
import HalcyonCache
import HalcyonJSON

extension Dispatcher {
    /// The most keys one `cache.keys` page may ask for.
    static let maxKeysPerPage = 10_000

    /// Handlers of the methods in this file; their lines in the table are in `MethodTable.swift`.
    enum KeyListMethods {
        /// `cache.keys`
        static func keys(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            let prefix = try call.params.keyPrefix() ?? KeyNamespace.cacheKey("", in: call.params.namespace)
            let namespace = call.params.namespace
            let cursor = try call.params.string("cursor")
            guard HybridCache.isValidKeyCursor(cursor) else {
                throw .invalidParams(reason: .invalidCursor, param: "cursor",
                                     message: "'cursor' must be a cursor from a previous cache.keys reply")
            }
            let limit = try call.params.int("limit") ?? 1000
            guard (1 ... Dispatcher.maxKeysPerPage).contains(limit) else {
                var error = RPCError.invalidParams(
                    reason: .outOfRange, param: "limit", message: "'limit' must be 1 to \(Dispatcher.maxKeysPerPage)")
                error.data.append(.init("limit", .int(Int64(Dispatcher.maxKeysPerPage))))
                throw error
            }
            let responder = call.responder
            return dispatcher.cache.listKeys(
                prefix: prefix, cursor: cursor, limit: limit, callbackQueue: call.callbackQueue
            ) { result in
                responder.finish(result) { (page, w) throws(RPCError) in
                    w.beginObject()
                    w.key("keys")
                    w.beginArray()
                    for key in page.keys { w.string((namespace?.wireKey(key) ?? key).string) }
                    w.endArray()
                    w.key("cursor")
                    if let next = page.cursor { w.string(next) } else { w.null() }
                    w.endObject()
                }
            }
        }

        /// `cache.removePrefix`
        static func removePrefix(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            guard let prefix = try call.params.string("prefix") else { throw .missingParam("prefix") }
            guard !prefix.isEmpty else {
                throw .invalidParams(reason: .emptyPrefix, param: "prefix",
                                     message: "'prefix' must not be empty (cache.clear removes everything)")
            }
            return removeKeys(dispatcher, call, prefix: KeyNamespace.cacheKey(CacheKey(prefix), in: call.params.namespace))
        }

        /// Removes every key starting with `prefix` from every tier; answers `{"removed": n}`
        /// (`cache.removePrefix`, and `cache.clear` inside a namespace).
        static func removeKeys(_ dispatcher: Dispatcher, _ call: MethodCall, prefix: CacheKey) -> CacheTask? {
            let responder = call.responder
            return dispatcher.cache.removePrefix(prefix, callbackQueue: call.callbackQueue) { result in
                responder.finish(result) { (count, w) throws(RPCError) in
                    w.beginObject(); w.field("removed", count); w.endObject()
                }
            }
        }
    }

}
