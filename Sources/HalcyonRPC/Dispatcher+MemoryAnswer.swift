// The synchronous reply path: a `fast` read that memory answers, and that no queued
// write concerns, is answered on the calling thread straight into the caller's writer:
// no storage task, no responder, no callback. Anything else (a miss that needs the disk,
// a key behind a queued write, bad params) is handed on, prepared, to `handle`, which
// answers it as before; a miss goes with what the memory answer found out, so the handler
// neither reads the params nor asks memory again. Each method's memory answer is beside
// its handler (ReadMethods, InfoMethods) and named in its spec (MethodTable.swift).

import Foundation
import HalcyonCache
import HalcyonJSON

extension Dispatcher {
    /// What `answerFromMemory` did.
    public enum MemoryAnswerOutcome {
        /// The reply line (with its `\n`) is in the writer; the error it carries, if any
        /// (for instance `-32004 cannotEncode`).
        case answered(RPCError?)
        /// Nothing was written: hand the call to `handle` (its `memory` says what the
        /// memory answer found out).
        case notAnswered
    }

    /// What a method's memory answer did (`MethodSpec.MemoryAnswerFunction`).
    enum MemoryAnswerResult {
        /// The reply line is in the writer, with the error it carries, if any.
        case answered(RPCError?)
        /// Nothing was written; the handler runs with what memory was found to hold.
        case declined(MemoryFinding)
    }

    /// What a memory answer that declined found out, handed to its method's handler with
    /// the call so that the handler goes on from there.
    enum MemoryFinding {
        /// Nothing the handler needs: memory was not asked, or its answer is not kept.
        case nothing
        /// `cache.get`'s query, read, whose memory lookup missed (and counted the miss):
        /// the handler goes on to the disk without asking memory again.
        case getMissed(ReadMethods.GetQuery)
    }

    /// Answers `call` at once into `writer` when memory (or the daemon's own state) can:
    /// the read-your-writes check is the write book's, as for every read. Otherwise leaves
    /// the call for `handle`, with what its memory answer found out in `call.memory`.
    ///
    /// Only a request with an id is answered here (a notification's reply is dropped, and
    /// its effects are `handle`'s). The reply is complete when this returns, so no later
    /// `$/cancelRequest` can concern it.
    ///
    /// Threading: on the requesting connection's event loop thread, like `handle`.
    public func answerFromMemory(_ call: inout PreparedCall, into writer: inout JSONWriter) -> MemoryAnswerOutcome {
        switch memoryAnswer(call, into: &writer) {
        case .answered(let error):
            return .answered(error)
        case .declined(let found):
            call.memory = found
            return .notAnswered
        }
    }

    /// The memory answer itself, reading `call` in place: its params and options reach the
    /// method's memory answer borrowed, where reading them out of the `inout` call would
    /// copy them (a counted reference for each object they hold).
    private func memoryAnswer(_ call: borrowing PreparedCall, into writer: inout JSONWriter) -> MemoryAnswerResult {
        guard let id = call.id, case .accepted(let spec) = call.verdict,
              let memoryAnswer = spec.memoryAnswer else { return .declined(.nothing) }
        do throws(RPCError) {
            return try memoryAnswer.answer(self, call.params, call.options, id, &writer)
        } catch {
            // The handler refuses the same params with the same error.
            return .declined(.nothing)
        }
    }

    // MARK: Hot lines

    /// What `answerHotGet` did.
    public enum HotGetOutcome {
        /// The reply line is in the writer, with the error it carries, if any.
        case answered(RPCError?)
        /// Memory does not hold the key, and counted the miss: `retrieve(after:session:respond:)`
        /// goes on to the disk without asking memory again.
        case missed(HotGetMiss)
        /// Nothing was read or written: the line goes to `RPCMessageParser` like any other
        /// (a key the params would refuse, a key behind a queued write, a connection under
        /// `--access`).
        case declined
    }

    /// A hot `cache.get` whose memory lookup missed, with the query it read.
    public struct HotGetMiss {
        fileprivate let id: RPCID
        fileprivate let query: ReadMethods.GetQuery
    }

    /// The `cache.get` of a hot line (`HotLine.read`) with id `id` and key `key`, answered as
    /// the request the line parses to would be by `prepare` and `answerFromMemory`: the
    /// same key checks (a refusal is declined, for the parser's path to answer with its
    /// error), the connection's options, and the same memory answer (`ReadMethods.answerGet`).
    /// `arrivedBy`: a reading of `memoryClock` taken after the line arrived whole, which a
    /// memory hit is judged at (`HybridCache.Options.arrivedBy`); nil: the clock's now.
    ///
    /// Threading: on the requesting connection's event loop thread, like `answerFromMemory`.
    public func answerHotGet(
        id: Int64, key: CacheKey, session: ConnectionSession, arrivedBy: Date? = nil, into writer: inout JSONWriter
    ) -> HotGetOutcome {
        guard session.access == nil, accepts(key) else { return .declined }
        var options = Self.sessionOptions(session)
        options.arrivedBy = arrivedBy
        let query = ReadMethods.GetQuery.keyOnly(key, options)
        let rpcID = RPCID.number(id)
        switch ReadMethods.answerGet(self, query, rpcID, &writer) {
        case .answered(let error): return .answered(error)
        case .declined(.getMissed(let query)): return .missed(HotGetMiss(id: rpcID, query: query))
        case .declined(.nothing): return .declined
        }
    }

    /// A hot `cache.get` after its memory lookup missed: read from the disk as the
    /// request's handler would (`ReadMethods.get`), its reply delivered through `respond`
    /// by the connection's callback queue. Returns the storage task, for cancellation.
    ///
    /// Threading: on the requesting connection's event loop thread.
    public func retrieve(
        after miss: HotGetMiss, session: ConnectionSession, respond: @escaping @Sendable (RPCReply) -> Void
    ) -> CacheTask? {
        let responder = Responder(id: miss.id, callbackQueue: session.callbackQueue, priority: .normal, respond: respond)
        return ReadMethods.retrieveAfterMiss(self, miss.query, responder)
    }
}
