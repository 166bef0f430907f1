// The synchronous reply path: a `fast` read that memory answers, and that no queued
// write concerns, is answered on the calling thread straight into the caller's writer:
// no storage task, no responder, no callback. Anything else (a miss that needs the disk,
// a key behind a queued write, bad params) is left to `handle`, which answers it as
// before; the transport calls `handle` next with what this path learned.

import HalcyonCache
import HalcyonJSON

extension Dispatcher {
    /// What `answerFromMemory` did.
    public enum MemoryAnswerOutcome: Sendable, Equatable {
        /// The reply line (with its `\n`) is in the writer; the error it carries, if any
        /// (for instance `-32004 cannotEncode`).
        case answered(RPCError?)
        /// Nothing was written: hand the request to `handle`, passing `memoryMissed`.
        case notAnswered(memoryMissed: Bool)
    }

    /// A method's memory answer: writes the whole reply for `id` into the writer, or
    /// writes nothing and says why. Throws (before any effect) for params `handle` will
    /// refuse, so the refusal has one source.
    typealias MemoryAnswer = @Sendable (
        Dispatcher, _ params: Params, _ options: HybridCache.Options, _ id: RPCID, inout JSONWriter
    ) throws(RPCError) -> MemoryAnswerOutcome

    /// One line of `memoryAnswers`. A struct, not a `(String, MemoryAnswer)` tuple: a
    /// function stored straight into a generic container (a tuple in an array, a dictionary
    /// value, an optional taken out of them) is kept at the generic calling convention, and
    /// every container it passed through added a reabstraction thunk to each call; inside a
    /// struct it keeps its own.
    struct MemoryAnswerLine: Sendable {
        let name: String
        let answer: MemoryAnswer

        init(_ name: String, _ answer: @escaping MemoryAnswer) {
            self.name = name
            self.answer = answer
        }
    }

    /// The methods with a memory answer; each must be a `fast` line of the table.
    static let memoryAnswers: [MemoryAnswerLine] = [
        .init("cache.get", ReadMethods.getFromMemory),
        .init("cache.isCached", ReadMethods.isCachedFromMemory),
        .init("cache.describe", ReadMethods.describeFromMemory),
        .init("server.ping", InfoMethods.serverPingNow),
    ]

    /// Answers `request` at once into `writer` when memory (or the daemon's own state)
    /// can: the read-your-writes check is the write book's, as for every read.
    ///
    /// Only for requests with an id (a notification's reply is dropped, and its effects
    /// are `handle`'s). The reply is complete when this returns, so no later
    /// `$/cancelRequest` can concern it.
    ///
    /// Threading: on the requesting connection's event loop thread, like `handle`.
    public func answerFromMemory(
        _ request: RPCRequest, id: RPCID, session: ConnectionSession, into writer: inout JSONWriter
    ) -> MemoryAnswerOutcome {
        guard let route = request.route, let line = route.memoryAnswer else { return .notAnswered(memoryMissed: false) }
        do throws(RPCError) {
            let (params, options) = try prepare(route.spec, request, session: session)
            return try line.answer(self, params, options, id, &writer)
        } catch {
            return .notAnswered(memoryMissed: false)
        }
    }
}

extension Dispatcher.ReadMethods {
    /// `cache.get` from memory.
    static func getFromMemory(
        _ dispatcher: Dispatcher, _ params: Params, _ options: HybridCache.Options, _ id: RPCID,
        _ writer: inout JSONWriter
    ) throws(RPCError) -> Dispatcher.MemoryAnswerOutcome {
        let query = try GetQuery(params, options)
        switch dispatcher.cache.memoryLookup(forKey: query.key, options: query.options) {
        case .answered(let found):
            if RPCResponseWriter.foundGetLine(id: id, found, encoding: query.encoding, into: &writer) { return .answered(nil) }
            return .answered(RPCResponseWriter.success(id: id, into: &writer) { (w: inout JSONWriter) throws(RPCError) in
                try w.getResult(found, encoding: query.encoding)
            })
        case .missed:
            return .notAnswered(memoryMissed: true)
        case .behindWrite:
            return .notAnswered(memoryMissed: false)
        }
    }

    /// `cache.isCached` from memory: a key memory holds (a miss may still be on disk).
    static func isCachedFromMemory(
        _ dispatcher: Dispatcher, _ params: Params, _ options: HybridCache.Options, _ id: RPCID,
        _ writer: inout JSONWriter
    ) throws(RPCError) -> Dispatcher.MemoryAnswerOutcome {
        try lookupFromMemory(dispatcher, params, options, id, &writer) { found, w in writeIsCached(found.cacheType, into: &w) }
    }

    /// `cache.describe` from memory: a key memory holds.
    static func describeFromMemory(
        _ dispatcher: Dispatcher, _ params: Params, _ options: HybridCache.Options, _ id: RPCID,
        _ writer: inout JSONWriter
    ) throws(RPCError) -> Dispatcher.MemoryAnswerOutcome {
        try lookupFromMemory(dispatcher, params, options, id, &writer) { found, w in writeDescription(found, into: &w) }
    }

    /// The lookups that never load a value (isCached, describe): answered when memory
    /// holds the key, with `write` shaping the result.
    private static func lookupFromMemory(
        _ dispatcher: Dispatcher, _ params: Params, _ options: HybridCache.Options, _ id: RPCID,
        _ writer: inout JSONWriter, _ write: (HybridCache.EntryDescription, inout JSONWriter) -> Void
    ) throws(RPCError) -> Dispatcher.MemoryAnswerOutcome {
        let (key, options) = try MethodCall.keyAndLookupOptions(params, options)
        guard let found = dispatcher.cache.memoryDescription(forKey: key, options: options) else {
            return .notAnswered(memoryMissed: false)
        }
        return .answered(RPCResponseWriter.success(id: id, into: &writer) { (w: inout JSONWriter) throws(RPCError) in
            write(found, &w)
        })
    }
}

extension Dispatcher.InfoMethods {
    /// `server.ping`, at once.
    static func serverPingNow(
        _ dispatcher: Dispatcher, _ params: Params, _ options: HybridCache.Options, _ id: RPCID,
        _ writer: inout JSONWriter
    ) throws(RPCError) -> Dispatcher.MemoryAnswerOutcome {
        .answered(RPCResponseWriter.success(id: id, into: &writer) { (w: inout JSONWriter) throws(RPCError) in
            writePong(into: &w)
        })
    }
}
