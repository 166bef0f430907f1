// The multi-key methods: cache.getMany (one get per key, answered together in order),
// cache.setMany (every store in order as one step on the ioQueue) and cache.removeMany
// (every removal in order as one step). Each takes at most `--max-batch` elements.

import Foundation
import HalcyonCache
import HalcyonJSON

extension Dispatcher {
    /// Handlers of the methods in this file; their lines in the table are in `MethodTable.swift`.
    enum MultiKeyMethods {
        /// `cache.getMany`
        static func getMany(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            let keys = try dispatcher.keyList(call.params)
            let encoding = try call.params.encoding("encoding")
            var options = call.options
            if let extending = try call.params.extending("extendingExpiration") { options.extendingExpiration = extending }
            options.fromMemoryOnly = try call.params.bool("fromMemoryOnly", default: false)
            let responder = call.responder
            dispatcher.cache.retrieveMany(forKeys: keys, options: options, callbackQueue: call.callbackQueue) { result in
                responder.finish(result) { (found, w) throws(RPCError) in
                    w.beginObject()
                    w.key("entries")
                    w.beginArray()
                    for r in found { try w.getResult(r, encoding: encoding) }
                    w.endArray()
                    w.endObject()
                }
            }
            return nil
        }

        /// `cache.removeMany`
        static func removeMany(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            let keys = try dispatcher.keyList(call.params)
            let fromMemory = try call.params.bool("fromMemory", default: true)
            let fromDisk = try call.params.bool("fromDisk", default: true)
            let responder = call.responder
            return dispatcher.cache.removeMany(
                forKeys: keys, fromMemory: fromMemory, fromDisk: fromDisk, options: call.options,
                callbackQueue: call.callbackQueue
            ) { result in
                responder.finish(result) { (removed, w) throws(RPCError) in
                    w.beginObject()
                    w.field("removed", removed.filter { $0 }.count)
                    w.key("found")
                    w.beginArray()
                    for r in removed { w.bool(r) }
                    w.endArray()
                    w.endObject()
                }
            }
        }

        /// `cache.setMany`
        static func setMany(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            guard let list = try call.params.require("entries").owned.array else {
                throw .wrongType("entries", expected: "array")
            }
            try dispatcher.checkBatch(list.count, param: "entries")
            var items: [HybridCache.StoreItem] = []
            items.reserveCapacity(list.count)
            let toDisk = try call.params.bool("toDisk", default: true)
            for (index, member) in list.enumerated() {
                var p = try Params(member, allowed: ["key", "value", "encoding", "expiration", "memoryExpiration"])
                p.rules = call.params.rules
                p.namespace = call.params.namespace
                guard p.object != nil else { throw .wrongType("entries", expected: "array of objects") }
                let key = try p.key()
                let encoding = try p.encoding("encoding") ?? .utf8
                let bytes = try p.valueBytes(encoding: encoding)
                try p.checkEntrySize(key: key, valueBytes: bytes.count, toDisk: toDisk, param: "entries[\(index)].value")
                items.append(HybridCache.StoreItem(
                    key: key, entry: CacheEntry(bytes: bytes, flags: encoding.flags),
                    diskExpiration: try p.expiration("expiration"), memoryExpiration: try p.expiration("memoryExpiration")))
            }
            var options = call.options
            options.toDisk = toDisk
            let responder = call.responder
            return dispatcher.cache.storeMany(items, options: options, callbackQueue: call.callbackQueue) { result in
                responder.finish(result) { (results, w) throws(RPCError) in
                    w.beginObject()
                    w.field("stored", results.filter(\.stored).count)
                    w.key("versions")
                    w.beginArray()
                    for r in results { if let v = r.version { w.int(Int64(clamping: v)) } else { w.null() } }
                    w.endArray()
                    w.endObject()
                }
            }
        }
    }


    /// The `keys` member of a multi-key call: an array of at most `--max-batch` keys,
    /// each checked as `Params.key` checks a `key` (a bad one named `keys[i]`).
    func keyList(_ params: Params) throws(RPCError) -> [CacheKey] {
        guard let list = try params.require("keys").owned.array else { throw .wrongType("keys", expected: "array") }
        try checkBatch(list.count, param: "keys")
        var keys: [CacheKey] = []
        keys.reserveCapacity(list.count)
        for (index, member) in list.enumerated() {
            let key = try Dispatcher.keyElement(member, param: "keys[\(index)]", rule: params.keyRule)
            keys.append(KeyNamespace.cacheKey(key, in: params.namespace))
        }
        return keys
    }

    /// One key of a list, checked as `Params.key` checks a `key` member.
    static func keyElement(_ member: JSONValue, param: String, rule: DiskStorage.KeyRule) throws(RPCError) -> CacheKey {
        guard let key = member.withStringBytes({ CacheKey(utf8: $0) }) else {
            throw .wrongType(param, expected: "string")
        }
        try Params.checkKeyLength(key.count, param: param)
        guard rule.accepts(key) else { throw .invalidKey(param: param) }
        return key
    }

    /// `tooManyKeys` past `--max-batch`.
    func checkBatch(_ count: Int, param: String) throws(RPCError) {
        let limit = maxBatch
        guard count <= limit else {
            var error = RPCError.invalidParams(
                reason: .tooManyKeys, param: param, message: "'\(param)' holds \(count) elements; at most \(limit)")
            error.data.append(.init("limit", .int(Int64(limit))))
            throw error
        }
    }
}
