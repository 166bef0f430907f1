// The direct write path: a write the journal can take at once (`cache.set`, and the
// read-modify-writes `cache.add`, `cache.cas` and `cache.incr`) is not queued on its
// own. The transport gathers the writes of one read burst and commits them as one group
// from its own thread (`HybridCache.commitDirect`), then writes their replies straight
// into its reply buffer: no storage task, no responder, no hop to the ioQueue's thread
// and back. Anything else (bad params, a value too large for the journal, a forced
// extension, `toDisk: false`, `--fsync always`, bounds nearly full) is left to `handle`,
// which answers it as before, from the same prepared call.

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

    /// `call` as a direct write, or nil: then hand it to `handle` (which refuses bad params
    /// with the same error). Only a request with an id takes the direct path.
    ///
    /// Threading: on the requesting connection's event loop thread, like `handle`.
    public func directWrite(_ call: PreparedCall) -> DirectWrite? {
        guard let id = call.id, case .accepted(let spec) = call.verdict,
              let directWrite = spec.directWrite else { return nil }
        do throws(RPCError) {
            let write = try directWrite.build(call.params, call.options)
            guard cache.canCommitDirect(write) else { return nil }
            return DirectWrite(id: id, write: write)
        } catch {
            return nil
        }
    }

    /// The direct write of a hot `cache.set` line (`HotLine.read`) with id `id`, key `key`
    /// and `utf8` value `value`, or nil: then the line goes to the parser like any other. The
    /// same checks as `prepare` and `directWrite` give the request the line parses to: the
    /// key as the params check it, the entry's size, the connection's options, and whether
    /// the journal can take it at once.
    ///
    /// Threading: on the requesting connection's event loop thread, like `directWrite`.
    public func hotDirectWrite(id: Int64, key: CacheKey, value: [UInt8], session: ConnectionSession) -> DirectWrite? {
        guard session.access == nil, accepts(key),
              let set = WriteMethods.SetParams.keyAndValue(key, value, Self.sessionOptions(session), rules: paramRules)
        else { return nil }
        let write = HybridCache.DirectWrite.store(.init(key: set.key, entry: set.entry, options: set.options))
        guard cache.canCommitDirect(write) else { return nil }
        return DirectWrite(id: .number(id), write: write)
    }

    /// Whether `key`, sent as a method's `key` param, passes the checks `Params.key` makes
    /// (outside `--access`: no namespace).
    func accepts(_ key: CacheKey) -> Bool {
        (1...Params.maxKeyBytes).contains(key.count) && paramRules.keyRule.accepts(key)
    }

    /// Whether `request`'s method may take the direct path (`directWrite` decides).
    public func hasDirectWrite(_ request: RPCRequest) -> Bool {
        request.spec?.directWrite != nil
    }

    /// What a memory-answered read of `request` depends on, for a transport holding
    /// direct writes not committed yet: nil when `request` has no memory answer (commit
    /// first), `.some(nil)` when its answer reads no key (`server.ping`), else the key.
    /// The key is the stored one, in the connection's namespace (`--access`); a request
    /// naming a namespace of its own commits first.
    public func memoryAnswerKey(_ request: RPCRequest, session: ConnectionSession) -> CacheKey?? {
        guard request.spec?.memoryAnswer != nil else { return nil }
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

    }

    /// Commits `writes` as one group, in order (see `HybridCache.commitDirect`). Write
    /// each reply with `writeReply`. (The leases of the keys written end in the write
    /// path itself: `LocalStore.written`.)
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
}
