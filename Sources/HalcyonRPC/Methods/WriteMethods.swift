// The write methods: cache.set, cache.touch, cache.remove, cache.clear,
// cache.removeExpired, cache.trim. Each runs on the hybrid cache's ioQueue, in arrival
// order across all connections, changing both tiers in one step.

import Foundation
import HalcyonCache
import HalcyonJSON

extension Dispatcher {
    /// Handlers of the methods in this file; their lines in the table are in `MethodTable.swift`.
    enum WriteMethods {
        /// `cache.set`
        static func set(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            let set = try SetParams.read(call.params, call.options)
            let responder = call.responder
            let key = set.key
            let cache = dispatcher.cache
            return cache.store(set.entry, forKey: key, options: set.options, callbackQueue: call.callbackQueue) { result in
                // The writer's lease goes with its write: a local key's ended in the write
                // itself; a shared key's lives upstream, and giving it back wakes every host's waiters.
                if let token = set.lease, case .success = result {
                    return cache.releaseLease(key, token: token) { _ in responder.finish(result, writeSet) }
                }
                responder.finish(result, writeSet)
            }
        }

        /// What a `cache.set` line asks for, read from its params over the connection's
        /// options (the queued and the direct path read it here, so they refuse alike).
        struct SetParams {
            var key: CacheKey
            var entry: CacheEntry
            var options: HybridCache.Options
            /// The lease the writer holds (a shared key's is given back upstream).
            var lease: String?

            /// The write `params` ask for over the connection's options. Both inputs borrowed,
            /// and a function rather than a throwing initialiser, as `ReadMethods.GetQuery.read`.
            static func read(_ params: borrowing Params, _ connectionOptions: borrowing HybridCache.Options) throws(RPCError) -> SetParams {
                let key = try params.key()
                let encoding = try params.encoding("encoding") ?? .utf8
                // Not `value(_:)`, which reads null as absent: with "json", null is a value.
                let bytes = try params.valueBytes(encoding: encoding)
                var options = try MethodCall.optionsWithExpirations(params, connectionOptions)
                options.toDisk = try params.bool("toDisk", default: true)
                try params.checkEntrySize(key: key, valueBytes: bytes.count, toDisk: options.toDisk)
                options.forcedExtension = try params.string("forcedExtension")
                let lease = try params.string("lease")  // any write of the key ends its lease (LeaseMethods.swift)
                return SetParams(key: key, entry: CacheEntry(bytes: bytes, flags: encoding.flags), options: options, lease: lease)
            }

            /// The write of params that hold a key and a `utf8` value alone (a hot line's,
            /// `HotLine`): what `read` gives for them, each optional member at its default;
            /// nil where `read` would refuse them, for the parser's path to say why.
            static func keyAndValue(
                _ key: CacheKey, _ bytes: [UInt8], _ connectionOptions: borrowing HybridCache.Options, rules: Params.Rules
            ) -> SetParams? {
                guard rules.entryLimits.exceeded(key: key, valueBytes: bytes.count, toDisk: true) == nil else { return nil }
                var options = copy connectionOptions
                options.diskExpiration = nil
                options.memoryExpiration = nil
                options.toDisk = true
                options.forcedExtension = nil
                return SetParams(key: key, entry: CacheEntry(bytes: bytes, flags: ValueEncoding.utf8.flags), options: options, lease: nil)
            }
        }

        /// `cache.set`'s direct write (`MethodSpec.directWrite`).
        @Sendable static func directSet(_ params: Params, _ options: HybridCache.Options) throws(RPCError) -> HybridCache.DirectWrite {
            let s = try SetParams.read(params, options)
            return .store(.init(key: s.key, entry: s.entry, options: s.options))
        }

        /// `cache.set`'s result.
        @Sendable static func writeSet(_ r: HybridCache.StoreResult, into w: inout JSONWriter) {
            w.beginObject()
            w.field("stored", r.stored)
            w.field("size", r.size)
            w.field("expiresAt", expiresAt: r.expiresAt)
            w.key("version"); if let v = r.version { w.int(Int64(clamping: v)) } else { w.null() }
            w.endObject()
        }

        /// `cache.touch`
        static func touch(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            let key = try call.params.key()
            var options = try call.optionsWithExpirations()
            options.forcedExtension = try call.params.string("forcedExtension")
            let responder = call.responder
            return dispatcher.cache.touch(forKey: key, options: options, callbackQueue: call.callbackQueue) { result in
                responder.finish(result) { (r, w) throws(RPCError) in
                    w.beginObject()
                    w.field("touched", r.touched)
                    w.field("expiresAt", expiresAt: r.expiresAt)
                    w.endObject()
                }
            }
        }

        /// `cache.remove`
        static func remove(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            let key = try call.params.key()
            let fromMemory = try call.params.bool("fromMemory", default: true)
            let fromDisk = try call.params.bool("fromDisk", default: true)
            var options = call.options
            options.forcedExtension = try call.params.string("forcedExtension")
            let responder = call.responder
            return dispatcher.cache.remove(
                forKey: key, fromMemory: fromMemory, fromDisk: fromDisk, options: options,
                callbackQueue: call.callbackQueue
            ) { result in
                responder.finish(result) { (removed, w) throws(RPCError) in
                    w.beginObject(); w.field("removed", removed); w.endObject()
                }
            }
        }

        /// `cache.clear`
        static func clear(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            let memory = try call.params.bool("memory", default: true)
            let disk = try call.params.bool("disk", default: true)
            let shared = try call.params.bool("shared", default: false)
            let cache = dispatcher.cache
            if shared && !cache.hasUpstream {
                throw .invalidParams(reason: .noUpstream, param: "shared",
                                     message: "'shared' needs an upstream (the daemon runs without --upstream)")
            }
            if let namespace = call.params.namespace {
                // A namespace is a prefix of the keyspace: clearing it removes that prefix
                // from every tier, and counts only its keys.
                if let tier = [("memory", memory), ("disk", disk)].first(where: { !$0.1 })?.0 {
                    throw .invalidParams(reason: .wholeNamespaceOnly, param: tier,
                                         message: "'\(tier)' must be true: a namespace is cleared from every tier")
                }
                return KeyListMethods.removeKeys(dispatcher, call, prefix: namespace.prefix)
            }
            let responder = call.responder
            return cache.clear(memory: memory, disk: disk, shared: shared, callbackQueue: call.callbackQueue) { result in
                responder.finish(result) { (r, w) throws(RPCError) in writeCleared(r, upstream: cache.hasUpstream, into: &w) }
            }
        }

        /// `cache.removeExpired`
        static func removeExpired(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            let memory = try call.params.bool("memory", default: true)
            let disk = try call.params.bool("disk", default: true)
            let referenceDate = try call.params.date("referenceDate")
            let responder = call.responder
            let cache = dispatcher.cache
            return cache.removeExpired(
                memory: memory, disk: disk, referenceDate: referenceDate, callbackQueue: call.callbackQueue
            ) { result in
                responder.finish(result) { (r, w) throws(RPCError) in writeCleared(r, upstream: cache.hasUpstream, into: &w) }
            }
        }

        /// The result of `cache.clear` and `cache.removeExpired`: `removed` (the host's own
        /// entries); with an upstream, `droppedShared` (this host's copies of shared keys),
        /// and `removedShared` when the shared keys were removed upstream.
        private static func writeCleared(_ r: HybridCache.ClearResult, upstream: Bool, into w: inout JSONWriter) {
            w.beginObject()
            w.field("removed", r.removed)
            if upstream { w.field("droppedShared", r.droppedShared) }
            if let removedShared = r.removedShared { w.field("removedShared", removedShared) }
            w.endObject()
        }

        /// `cache.trim`
        static func trim(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            let responder = call.responder
            let cache = dispatcher.cache
            return cache.trim(callbackQueue: call.callbackQueue) { result in
                responder.finish(result) { (r, w) throws(RPCError) in
                    w.beginObject(); w.field("removed", r.removed); w.field("totalSize", r.totalSize)
                    // The disk tier is all a trim touches: shared keys have no file, so it drops none.
                    if cache.hasUpstream { w.field("droppedShared", 0) }
                    w.endObject()
                }
            }
        }
    }
}
