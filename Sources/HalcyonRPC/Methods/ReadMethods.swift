// The read methods: cache.get, cache.isCached, cache.describe. A memory hit is answered
// on the reading thread; a disk read runs where the hybrid cache puts it (ioQueue, or the
// reading thread with loadDiskFileSynchronously), behind any queued write to the key.

import Foundation
import HalcyonCache
import HalcyonJSON

extension Dispatcher {
    /// Handlers of the methods in this file; their lines in the table are in `MethodTable.swift`.
    enum ReadMethods {
        /// `cache.get`
        static func get(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            let key = try call.params.key()
            let encoding = try call.params.encoding("encoding")
            var options = call.options
            if let extending = try call.params.extending("extendingExpiration") { options.extendingExpiration = extending }
            options.forcedExtension = try call.params.string("forcedExtension")
            options.fromMemoryOnly = try call.params.bool("fromMemoryOnly", default: false)
            options.referenceDate = try call.params.date("referenceDate")
            let responder = call.responder
            return dispatcher.cache.retrieve(forKey: key, options: options, callbackQueue: call.callbackQueue) { result in
                responder.finish(result) { (found, w) throws(RPCError) in
                    w.beginObject()
                    guard let entry = found.entry, found.cacheType != .none else {
                        w.field("found", false)
                        w.endObject()
                        return
                    }
                    w.field("found", true)
                    w.key("value")
                    let shown = try ValueEncoding.write(
                        bytes: entry.bytes, storedFlags: entry.flags, requested: encoding, into: &w
                    )
                    w.field("encoding", shown.rawValue)
                    w.field("cacheType", found.cacheType.rawValue)
                    w.field("expiresAt", expiresAt: found.expiresAt)
                    w.field("version", entry.version)
                    w.endObject()
                }
            }
        }

        /// `cache.isCached`
        static func isCached(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            let (key, options) = try call.keyAndLookupOptions()
            let responder = call.responder
            return dispatcher.cache.cachedType(forKey: key, options: options, callbackQueue: call.callbackQueue) { result in
                responder.finish(result) { (type, w) throws(RPCError) in
                    w.beginObject()
                    w.field("cached", type != .none)
                    w.field("cacheType", type.rawValue)
                    w.endObject()
                }
            }
        }

        /// `cache.describe`
        static func describe(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            let (key, options) = try call.keyAndLookupOptions()
            let responder = call.responder
            return dispatcher.cache.describe(forKey: key, options: options, callbackQueue: call.callbackQueue) { result in
                responder.finish(result) { (d, w) throws(RPCError) in
                    w.beginObject()
                    w.field("found", d.cacheType != .none)
                    w.field("cacheType", d.cacheType.rawValue)
                    if d.cacheType != .none {
                        w.field("size", d.size)
                        w.field("encoding", ValueEncoding(storedFlags: d.flags).rawValue)
                        w.field("expiresAt", expiresAt: d.expiresAt)
                        if d.cacheType == .memory { w.field("memoryExpiresAt", expiresAt: d.memoryExpiresAt) }
                        w.field("lastAccessAt", roundedDown: d.lastAccessAt)
                        w.field("version", d.version)
                    }
                    w.endObject()
                }
            }
        }
    }
}
