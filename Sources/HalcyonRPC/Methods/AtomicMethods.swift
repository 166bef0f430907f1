// The atomic writes: cache.add (set-if-absent), cache.cas (compare-and-set on the
// version) and cache.incr. Each is one step on the ioQueue, in order with every other
// write (queued, or in its burst's direct commit); a stored value ends the key's lease
// like any write.

import Foundation
import HalcyonCache
import HalcyonJSON

extension Dispatcher {
    /// Handlers of the methods in this file; their lines in the table are in `MethodTable.swift`.
    enum AtomicMethods {
        /// `cache.add`
        static func add(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            let (key, entry, options) = try call.storeRequest()
            let responder = call.responder
            return dispatcher.cache.add(entry, forKey: key, options: options, callbackQueue: call.callbackQueue) { result in
                responder.finish(result) { (r, w) throws(RPCError) in w.conditionalStore(r) }
            }
        }

        /// `cache.cas`
        static func cas(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            let (key, entry, options) = try call.storeRequest()
            let version = try casVersion(call.params)
            let responder = call.responder
            return dispatcher.cache.compareAndStore(
                entry, forKey: key, version: version, options: options,
                callbackQueue: call.callbackQueue
            ) { result in
                responder.finish(result) { (r, w) throws(RPCError) in w.conditionalStore(r) }
            }
        }

        /// `cache.incr`
        static func incr(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            let p = try IncrParams(call.params, call.options)
            let responder = call.responder
            return dispatcher.cache.increment(
                forKey: p.key, by: p.by, initial: p.initial, flags: ValueEncoding.json.flags, options: p.options,
                callbackQueue: call.callbackQueue
            ) { result in
                responder.finish(result, writeIncrement)
            }
        }

        /// What `cache.incr` takes.
        struct IncrParams: Sendable {
            /// The member names `cache.incr`'s params may hold.
            static let params: ParamNames = [
                "key", "by", "initial", "create", "expiration", "memoryExpiration", "toDisk", "options",
            ]

            var key: CacheKey
            var by: Int64
            /// Where a missing key starts; nil with `create: false` (a missing key is refused).
            var initial: Int64?
            var options: HybridCache.Options

            /// Both inputs borrowed, as `ReadMethods.GetQuery`'s.
            init(_ params: borrowing Params, _ connectionOptions: borrowing HybridCache.Options) throws(RPCError) {
                key = try params.key()
                by = try params.int64("by") ?? 1
                let start = try params.int64("initial") ?? 0
                initial = try params.bool("create", default: true) ? start : nil
                options = try MethodCall.optionsWithExpirations(params, connectionOptions)
                options.toDisk = try params.bool("toDisk", default: true)
            }
        }

        /// `cache.incr`'s result, or its refusal.
        @Sendable static func writeIncrement(_ outcome: HybridCache.IncrementOutcome, into w: inout JSONWriter) throws(RPCError) {
            switch outcome {
            case .incremented(let value, let version, let expiresAt):
                w.beginObject()
                w.field("value", Int(value))
                w.field("version", version)
                w.field("expiresAt", expiresAt: expiresAt)
                w.endObject()
            case .notAnInteger:
                throw .invalidParams(reason: .notAnInteger, param: "key",
                                     message: "the value under the key is not a JSON integer")
            case .overflow:
                throw .invalidParams(reason: .integerOverflow, param: "by",
                                     message: "the result does not fit a signed 64-bit integer")
            case .missing:
                // Not an error: "no such key" is an answer the caller asked to be told
                // (memcached's NOT_FOUND), and the value is never null otherwise.
                w.beginObject()
                w.key("value"); w.null()
                w.key("version"); w.null()
                w.key("expiresAt"); w.null()
                w.endObject()
            }
        }

        // The direct writes (`MethodSpec.directWrite`): the same params, read the same way.

        @Sendable static func directAdd(_ params: Params, _ options: HybridCache.Options) throws(RPCError) -> HybridCache.DirectWrite {
            let s = try WriteMethods.SetParams.read(params, options)
            return .update(.init(key: s.key, change: .add(s.entry), options: s.options))
        }

        @Sendable static func directCas(_ params: Params, _ options: HybridCache.Options) throws(RPCError) -> HybridCache.DirectWrite {
            let s = try WriteMethods.SetParams.read(params, options)
            let version = try casVersion(params)
            return .update(.init(key: s.key, change: .compareAndStore(s.entry, version: version), options: s.options))
        }

        @Sendable static func directIncr(_ params: Params, _ options: HybridCache.Options) throws(RPCError) -> HybridCache.DirectWrite {
            let p = try IncrParams(params, options)
            return .update(.init(
                key: p.key, change: .increment(by: p.by, initial: p.initial, flags: ValueEncoding.json.flags), options: p.options))
        }

        /// `cache.cas`'s `version`.
        static func casVersion(_ params: Params) throws(RPCError) -> UInt64 {
            guard let version = try params.int64("version") else { throw .missingParam("version") }
            return UInt64(bitPattern: version)
        }
    }

}

extension MethodCall {
    /// What cache.set, cache.add and cache.cas take (cas adds `version`).
    static let storeParams: ParamNames = [
        "key", "value", "encoding", "expiration", "memoryExpiration", "toDisk", "forcedExtension", "lease", "options",
    ]
    /// cache.cas: those of cache.set and the `version` to compare.
    static let casParams = ParamNames(storeParams.names + ["version"])

    /// The key, the entry and the options of a set-shaped request, read in cache.set's order.
    func storeRequest() throws(RPCError) -> (key: CacheKey, entry: CacheEntry, options: HybridCache.Options) {
        let s = try Dispatcher.WriteMethods.SetParams.read(params, options)
        return (s.key, s.entry, s.options)
    }
}

extension Params {
    /// An optional 64-bit integer; reals, even integral ones, are `wrongType`.
    func int64(_ name: String) throws(RPCError) -> Int64? {
        guard let member = value(name) else { return nil }
        guard let number = member.int64 else { throw .wrongType(name, expected: "integer") }
        return number
    }
}

extension JSONWriter {
    /// `{"stored": …, "version": n|null, "expiresAt": T|null}` (cache.add, cache.cas).
    mutating func conditionalStore(_ r: HybridCache.ConditionalStoreResult) {
        beginObject()
        field("stored", r.stored)
        key("version"); if let v = r.version { int(Int64(clamping: v)) } else { null() }
        field("expiresAt", expiresAt: r.expiresAt)
        endObject()
    }
}
