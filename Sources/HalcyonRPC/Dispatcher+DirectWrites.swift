// The direct write path: a write the journal can take at once (`cache.set`, and the
// read-modify-writes `cache.add`, `cache.cas` and `cache.incr`) is not queued on its
// own. The transport gathers the writes of one read burst and commits them as one group
// from its own thread (`HybridCache.commitDirect`), then writes their replies straight
// into its reply buffer: no storage task, no responder, no hop to the ioQueue's thread
// and back. Anything else (bad params, a value too large for the journal, a forced
// extension, `toDisk: false`, `--fsync always`, bounds nearly full) is left to `handle`,
// which answers it as before.

import HalcyonCache
import HalcyonJSON

extension Dispatcher {
    /// A write waiting to be committed with the others of its burst.
    public struct DirectWrite: Sendable {
        let id: RPCID
        let write: HybridCache.DirectWrite

        /// The bytes of the value it may store (the transport bounds a group by them).
        public var valueSize: Int { write.valueSize }
        /// The key it writes.
        public var key: CacheKey { write.key }
    }

    /// A method's direct write, from its checked params and the connection's options.
    /// Throws what `handle` would refuse the request with (which then answers it).
    typealias DirectWriteBuilder = @Sendable (_ params: Params, _ options: HybridCache.Options)
        throws(RPCError) -> HybridCache.DirectWrite

    /// One line of `directWrites`: a struct for the reason `MemoryAnswerLine` gives.
    struct DirectWriteLine: Sendable {
        let name: String
        let build: DirectWriteBuilder

        init(_ name: String, _ build: @escaping DirectWriteBuilder) {
            self.name = name
            self.build = build
        }
    }

    /// The methods with a direct path; each must be a `write` line of the table.
    static let directWrites: [DirectWriteLine] = [
        .init("cache.set", WriteMethods.directSet),
        .init("cache.add", AtomicMethods.directAdd),
        .init("cache.cas", AtomicMethods.directCas),
        .init("cache.incr", AtomicMethods.directIncr),
    ]

    /// The request as a direct write, or nil: then hand it to `handle` (which refuses bad
    /// params with the same error). Only for requests with an id.
    ///
    /// Threading: on the requesting connection's event loop thread, like `handle`.
    public func directWrite(_ request: RPCRequest, id: RPCID, session: ConnectionSession) -> DirectWrite? {
        guard let route = request.route, let line = route.directWrite else { return nil }
        do throws(RPCError) {
            let (params, options) = try prepare(route.spec, request, session: session)
            let write = try line.build(params, options)
            guard cache.canCommitDirect(write) else { return nil }
            return DirectWrite(id: id, write: write)
        } catch {
            return nil
        }
    }

    /// Whether `request`'s method may take the direct path (`directWrite` decides).
    public func hasDirectWrite(_ request: RPCRequest) -> Bool {
        request.route?.directWrite != nil
    }

    /// What a memory-answered read of `request` depends on, for a transport holding
    /// direct writes not committed yet: nil when `request` has no memory answer (commit
    /// first), `.some(nil)` when its answer reads no key (`server.ping`), else the key.
    /// The key is the stored one, in the connection's namespace (`--access`); a request
    /// naming a namespace of its own commits first.
    public func memoryAnswerKey(_ request: RPCRequest, session: ConnectionSession) -> CacheKey?? {
        guard request.route?.memoryAnswer != nil else { return nil }
        guard let params = request.paramsNode?.view, let key = params["key"] else { return .some(nil) }
        if session.access != nil, params["namespace"] != nil { return nil }
        // A key that is not a string is refused by the answer itself, writing nothing.
        let wire = key.withStringBytes { CacheKey(utf8: $0) } ?? ""
        return .some(KeyNamespace.cacheKey(wire, in: session.access?.namespace))
    }

    /// A committed direct write: what its reply says.
    public struct DirectOutcome: Sendable {
        let write: DirectWrite
        let result: HybridCache.DirectOutcome

        /// Whether the write may have changed its key, so the key's lease ends (the rule of
        /// `Leases.mayHaveWritten`): a refusal (`stored: false`, not an integer, an
        /// overflow) did not.
        var mayHaveWritten: Bool {
            switch result {
            case .stored(let r): Leases.mayHaveWritten(r) { _ in true }
            case .conditional(let r): Leases.mayHaveWritten(r) { $0.stored }
            case .incremented(let r): Leases.mayHaveWritten(r) { $0.stored }
            }
        }
    }

    /// Commits `writes` as one group, in order (see `HybridCache.commitDirect`). Write
    /// each reply with `writeReply`, then call `endLeases` once they are all written.
    ///
    /// Threading: on an event loop thread; it waits there for the ioQueue.
    public func commitDirectWrites(_ writes: [DirectWrite]) -> [DirectOutcome] {
        let results = cache.commitDirect(writes.map(\.write))
        return zip(writes, results).map { DirectOutcome(write: $0, result: $1) }
    }

    /// Appends the reply line of `outcome` to `writer`; returns its error (nil for a
    /// success). The same line `handle` would have answered with.
    public func writeReply(_ outcome: DirectOutcome, into writer: inout JSONWriter) -> RPCError? {
        let id = outcome.write.id
        switch outcome.result {
        case .stored(let r):
            if case .success(let stored) = r, RPCResponseWriter.storedLine(id: id, stored, into: &writer) { return nil }
            return Self.reply(r, id: id, into: &writer, WriteMethods.writeSet)
        case .conditional(let r): return Self.reply(r, id: id, into: &writer) { r, w in w.conditionalStore(r) }
        case .incremented(let r): return Self.reply(r, id: id, into: &writer, AtomicMethods.writeIncrement)
        }
    }

    private static func reply<T>(
        _ result: Result<T, CacheError>, id: RPCID, into writer: inout JSONWriter,
        _ write: (T, inout JSONWriter) throws(RPCError) -> Void
    ) -> RPCError? {
        switch result {
        case .success(let value):
            return RPCResponseWriter.success(id: id, into: &writer) { (w: inout JSONWriter) throws(RPCError) in
                try write(value, &w)
            }
        case .failure(let failure):
            let error = RPCError(failure)
            RPCResponseWriter.error(id: id, error, into: &writer)
            return error
        }
    }

    /// Ends the leases of the keys the outcomes wrote. Their parked callers may be
    /// answered on this thread before this returns, so call it after the replies of the
    /// outcomes are written and with no reply buffer borrowed.
    public func endLeases(_ outcomes: [DirectOutcome]) {
        for outcome in outcomes where outcome.mayHaveWritten {
            leases.written(key: outcome.write.key)
        }
    }
}
