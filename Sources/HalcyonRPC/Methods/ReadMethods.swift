// The read methods: cache.get, cache.isCached, cache.describe, each with its memory answer
// (`MethodSpec.memoryAnswer`). A memory hit is answered on the reading thread, by the memory
// answer straight into the transport's writer where the transport offers it, else by the
// handler; a disk read runs where the hybrid cache puts it (ioQueue, or the reading thread
// with loadDiskFileSynchronously), behind any queued write to the key.

import Foundation
import HalcyonCache
import HalcyonJSON

extension Dispatcher {
    /// Handlers and memory answers of the methods in this file; their specs are in `MethodTable.swift`.
    enum ReadMethods {
        /// What `cache.get` asks, read from its params over the call's options; shared by
        /// the handler and the memory answer so they cannot drift apart.
        struct GetQuery {
            /// The member names `cache.get`'s params may hold.
            static let params: ParamNames = [
                "key", "encoding", "extendingExpiration", "forcedExtension", "fromMemoryOnly", "referenceDate", "options",
            ]

            let key: CacheKey
            let encoding: ValueEncoding?
            let options: HybridCache.Options

            private init(key: CacheKey, encoding: ValueEncoding?, options: consuming HybridCache.Options) {
                self.key = key
                self.encoding = encoding
                self.options = options
            }

            /// The query `params` ask over the call's options `base`. Both inputs borrowed:
            /// a function takes its arguments owned unless told otherwise, which costs the
            /// caller a copy of each (a counted reference for every object they hold), and
            /// neither is kept. A function, not a throwing initialiser: such an initialiser
            /// builds its `self` aside and copies it out.
            static func read(_ params: borrowing Params, _ base: borrowing HybridCache.Options) throws(RPCError) -> GetQuery {
                let key = try params.key()
                let encoding = try params.encoding("encoding")
                var options = copy base
                if let extending = try params.extending("extendingExpiration") { options.extendingExpiration = extending }
                options.forcedExtension = try params.string("forcedExtension")
                options.fromMemoryOnly = try params.bool("fromMemoryOnly", default: false)
                options.referenceDate = try params.date("referenceDate")
                return GetQuery(key: key, encoding: encoding, options: options)
            }

            /// The query of params that hold the key alone (a hot line's, `HotLine`): what
            /// `read` gives for them, each optional member at its default.
            static func keyOnly(_ key: CacheKey, _ base: borrowing HybridCache.Options) -> GetQuery {
                var options = copy base
                options.forcedExtension = nil
                options.fromMemoryOnly = false
                options.referenceDate = nil
                return GetQuery(key: key, encoding: nil, options: options)
            }
        }

        /// `cache.get`. After a memory lookup that missed (`MemoryFinding.getMissed`), the
        /// query it read goes on to the disk without asking memory again.
        static func get(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            if case .getMissed(let query) = call.memory {
                return retrieveAfterMiss(dispatcher, query, call.responder)
            }
            let query = try GetQuery.read(call.params, call.options)
            return dispatcher.cache.retrieve(
                forKey: query.key, options: query.options, callbackQueue: call.callbackQueue,
                completion: reply(in: query.encoding, to: call.responder))
        }

        /// `cache.get` after its memory lookup missed (and counted the miss): the disk, without
        /// asking memory again.
        static func retrieveAfterMiss(_ dispatcher: Dispatcher, _ query: GetQuery, _ responder: Responder) -> CacheTask? {
            dispatcher.cache.retrieveAfterMemoryMiss(
                forKey: query.key, options: query.options, callbackQueue: responder.callbackQueue,
                completion: reply(in: query.encoding, to: responder))
        }

        /// The completion of a `cache.get`: its result, in `encoding`, through `responder`.
        private static func reply(
            in encoding: ValueEncoding?, to responder: Responder
        ) -> @Sendable (Result<HybridCache.RetrieveResult, CacheError>) -> Void {
            { result in
                responder.finish(result, line: { found, id, w in
                    RPCResponseWriter.foundGetLine(id: id, found, encoding: encoding, into: &w)
                }) { (found, w) throws(RPCError) in
                    try w.getResult(found, encoding: encoding)
                }
            }
        }

        /// `cache.get` from memory.
        static func getFromMemory(
            _ dispatcher: Dispatcher, _ params: Params, _ options: HybridCache.Options, _ id: RPCID,
            _ writer: inout JSONWriter
        ) throws(RPCError) -> MemoryAnswerResult {
            answerGet(dispatcher, try GetQuery.read(params, options), id, &writer)
        }

        /// The memory answer of `query`, the one shared by a request's memory answer
        /// (`getFromMemory`) and a hot line's (`Dispatcher.answerHotGet`).
        static func answerGet(
            _ dispatcher: Dispatcher, _ query: borrowing GetQuery, _ id: RPCID, _ writer: inout JSONWriter
        ) -> MemoryAnswerResult {
            // A hit of the common shape is written from the entry where it lies (nil);
            // any other is copied out and written the general way.
            let lookup = dispatcher.cache.memoryLookup(forKey: query.key, options: query.options) { entry, expiresAt in
                RPCResponseWriter.foundGetLine(
                    id: id, entry, cacheType: .memory, expiresAt: expiresAt, encoding: query.encoding, into: &writer)
            }
            switch lookup {
            case .answered(nil):
                return .answered(nil)
            case .answered(let found?):
                return .answered(RPCResponseWriter.success(id: id, into: &writer) { (w: inout JSONWriter) throws(RPCError) in
                    try w.getResult(found, encoding: query.encoding)
                })
            case .missed:
                return .declined(.getMissed(copy query))
            case .behindWrite:
                return .declined(.nothing)
            }
        }

        /// `cache.isCached`
        static func isCached(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            let (key, options) = try call.keyAndLookupOptions()
            let responder = call.responder
            return dispatcher.cache.cachedType(forKey: key, options: options, callbackQueue: call.callbackQueue) { result in
                responder.finish(result) { (type, w) throws(RPCError) in writeIsCached(type, into: &w) }
            }
        }

        /// `cache.isCached` from memory: a key memory holds (a miss may still be on disk).
        static func isCachedFromMemory(
            _ dispatcher: Dispatcher, _ params: Params, _ options: HybridCache.Options, _ id: RPCID,
            _ writer: inout JSONWriter
        ) throws(RPCError) -> MemoryAnswerResult {
            try lookupFromMemory(dispatcher, params, options, id, &writer) { found, w in writeIsCached(found.cacheType, into: &w) }
        }

        /// The result of `cache.isCached`.
        static func writeIsCached(_ type: CacheType, into w: inout JSONWriter) {
            w.beginObject()
            w.field("cached", type != .none)
            w.field("cacheType", type)
            w.endObject()
        }

        /// `cache.describe`
        static func describe(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            let (key, options) = try call.keyAndLookupOptions()
            let responder = call.responder
            return dispatcher.cache.describe(forKey: key, options: options, callbackQueue: call.callbackQueue) { result in
                responder.finish(result) { (d, w) throws(RPCError) in writeDescription(d, into: &w) }
            }
        }

        /// `cache.describe` from memory: a key memory holds.
        static func describeFromMemory(
            _ dispatcher: Dispatcher, _ params: Params, _ options: HybridCache.Options, _ id: RPCID,
            _ writer: inout JSONWriter
        ) throws(RPCError) -> MemoryAnswerResult {
            try lookupFromMemory(dispatcher, params, options, id, &writer) { found, w in writeDescription(found, into: &w) }
        }

        /// The result of `cache.describe`.
        static func writeDescription(_ d: HybridCache.EntryDescription, into w: inout JSONWriter) {
            w.beginObject()
            w.field("found", d.cacheType != .none)
            w.field("cacheType", d.cacheType)
            if d.cacheType != .none {
                w.field("size", d.size)
                w.field("encoding", ValueEncoding(storedFlags: d.flags))
                w.field("expiresAt", expiresAt: d.expiresAt)
                if d.cacheType == .memory { w.field("memoryExpiresAt", expiresAt: d.memoryExpiresAt) }
                w.field("lastAccessAt", roundedDown: d.lastAccessAt)
                w.field("version", d.version)
            }
            w.endObject()
        }

        /// The lookups that never load a value (isCached, describe): answered when memory
        /// holds the key, with `write` shaping the result.
        private static func lookupFromMemory(
            _ dispatcher: Dispatcher, _ params: Params, _ options: HybridCache.Options, _ id: RPCID,
            _ writer: inout JSONWriter, _ write: (HybridCache.EntryDescription, inout JSONWriter) -> Void
        ) throws(RPCError) -> MemoryAnswerResult {
            let (key, options) = try MethodCall.keyAndLookupOptions(params, options)
            guard let found = dispatcher.cache.memoryDescription(forKey: key, options: options) else {
                return .declined(.nothing)
            }
            return .answered(RPCResponseWriter.success(id: id, into: &writer) { (w: inout JSONWriter) throws(RPCError) in
                write(found, &w)
            })
        }
    }
}

extension JSONWriter {
    /// A `cache.get` result for `found` (cache.get, cache.getMany elements, cache.lease hits).
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
        field("encoding", shown)
        field("cacheType", found.cacheType)
        field("expiresAt", expiresAt: found.expiresAt)
        field("version", entry.version)
        endObject()
    }
}
