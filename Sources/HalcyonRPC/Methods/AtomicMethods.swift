// The atomic writes: cache.add (set-if-absent), cache.cas (compare-and-set on the
// version) and cache.incr. Each is one step on the ioQueue, in order with every other
// write; a stored value ends the key's lease like any write.

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
            let leases = dispatcher.leases
            return dispatcher.cache.add(entry, forKey: key, options: options, callbackQueue: call.callbackQueue) { result in
                if Leases.mayHaveWritten(result, { $0.stored }) { leases.written(key: key) }
                responder.finish(result) { (r, w) throws(RPCError) in w.conditionalStore(r) }
            }
        }

        /// `cache.cas`
        static func cas(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            let (key, entry, options) = try call.storeRequest()
            guard let version = try call.params.int64("version") else { throw .missingParam("version") }
            let responder = call.responder
            let leases = dispatcher.leases
            return dispatcher.cache.compareAndStore(
                entry, forKey: key, version: UInt64(bitPattern: version), options: options,
                callbackQueue: call.callbackQueue
            ) { result in
                if Leases.mayHaveWritten(result, { $0.stored }) { leases.written(key: key) }
                responder.finish(result) { (r, w) throws(RPCError) in w.conditionalStore(r) }
            }
        }

        /// `cache.incr`
        static func incr(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            let key = try call.params.key()
            let by = try call.params.int64("by") ?? 1
            let initial = try call.params.int64("initial") ?? 0
            var options = try call.optionsWithExpirations()
            options.toDisk = try call.params.bool("toDisk", default: true)
            let responder = call.responder
            let leases = dispatcher.leases
            return dispatcher.cache.increment(
                forKey: key, by: by, initial: initial, flags: ValueEncoding.json.flags, options: options,
                callbackQueue: call.callbackQueue
            ) { result in
                if Leases.mayHaveWritten(result, { if case .incremented = $0 { true } else { false } }) {
                    leases.written(key: key)
                }
                responder.finish(result) { (outcome, w) throws(RPCError) in
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
                    }
                }
            }
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
    func storeRequest() throws(RPCError) -> (key: String, entry: CacheEntry, options: HybridCache.Options) {
        let key = try params.key()
        let encoding = try params.encoding("encoding") ?? .utf8
        let bytes = try params.valueBytes(encoding: encoding)
        var options = try optionsWithExpirations()
        options.toDisk = try params.bool("toDisk", default: true)
        options.forcedExtension = try params.string("forcedExtension")
        _ = try params.string("lease")  // any write of the key ends its lease
        return (key, CacheEntry(bytes: bytes, flags: encoding.flags), options)
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

    /// A `cache.get` result for `found` (cache.getMany elements, cache.lease hits).
    mutating func getResult(_ found: HybridCache.RetrieveResult, encoding: ValueEncoding?) throws(RPCError) {
        beginObject()
        guard let entry = found.entry, found.cacheType != .none else {
            field("found", false)
            endObject()
            return
        }
        field("found", true)
        key("value")
        let shown = try ValueEncoding.write(bytes: entry.bytes, storedFlags: entry.flags, requested: encoding, into: &self)
        field("encoding", shown.rawValue)
        field("cacheType", found.cacheType.rawValue)
        field("expiresAt", expiresAt: found.expiresAt)
        field("version", entry.version)
        endObject()
    }
}
