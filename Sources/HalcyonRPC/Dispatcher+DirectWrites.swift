// The direct write path: a `cache.set` the journal can take at once is not queued on its
// own. The transport gathers the sets of one read burst and commits them as one group
// from its own thread (`HybridCache.commitStores`), then writes their replies straight
// into its reply buffer: no storage task, no responder, no hop to the ioQueue's thread
// and back. Anything else (bad params, a value too large for the journal, a forced
// extension, `toDisk: false`, `--fsync always`, bounds nearly full) is left to `handle`,
// which answers it as before.

import HalcyonCache
import HalcyonJSON

extension Dispatcher {
    /// A `cache.set` waiting to be committed with the others of its burst.
    public struct DirectWrite: Sendable {
        let id: RPCID
        let store: HybridCache.DirectStore

        /// The value's bytes (the transport bounds a group by them).
        public var valueSize: Int { store.entry.bytes.count }
        /// The key it writes.
        public var key: String { store.key }
    }

    /// The request as a direct write, or nil: then hand it to `handle` (which refuses bad
    /// params with the same error). Only for requests with an id.
    ///
    /// Threading: on the requesting connection's event loop thread, like `handle`.
    public func directWrite(_ request: RPCRequest, id: RPCID, session: ConnectionSession) -> DirectWrite? {
        guard let spec = request.route?.spec, spec.name == Self.directWriteMethod else { return nil }
        do throws(RPCError) {
            let (params, options) = try prepare(spec, request, session: session)
            let set = try WriteMethods.SetParams(params, options)
            guard cache.canCommitStore(valueSize: set.entry.bytes.count, options: set.options) else { return nil }
            return DirectWrite(id: id, store: .init(key: set.key, entry: set.entry, options: set.options))
        } catch {
            return nil
        }
    }

    /// The one method with a direct path.
    static let directWriteMethod = "cache.set"

    /// Whether requests of `method` may take the direct path (`directWrite` decides).
    public func hasDirectWrite(_ method: String) -> Bool {
        method == Self.directWriteMethod
    }

    /// What a memory-answered read of `request` depends on, for a transport holding
    /// direct writes not committed yet: nil when `request` has no memory answer (commit
    /// first), `.some(nil)` when its answer reads no key (`server.ping`), else the key.
    public func memoryAnswerKey(_ request: RPCRequest) -> String?? {
        guard request.route?.memoryAnswer != nil else { return nil }
        guard let key = request.paramsNode?.view["key"] else { return .some(nil) }
        // A key that is not a string is refused by the answer itself, writing nothing.
        return .some(key.string ?? "")
    }

    /// A committed direct write: what its reply says.
    public struct DirectOutcome: Sendable {
        let write: DirectWrite
        let result: Result<HybridCache.StoreResult, CacheError>
    }

    /// Commits `writes` as one group, in order (one journal append; see
    /// `HybridCache.commitStores`). Write each reply with `writeReply`, then call
    /// `endLeases` once they are all written.
    ///
    /// Threading: on an event loop thread; it waits there for the ioQueue.
    public func commitDirectWrites(_ writes: [DirectWrite]) -> [DirectOutcome] {
        let results = cache.commitStores(writes.map(\.store))
        return zip(writes, results).map { DirectOutcome(write: $0, result: $1) }
    }

    /// Appends the reply line of `outcome` to `writer`; returns its error (nil for a
    /// success).
    public func writeReply(_ outcome: DirectOutcome, into writer: inout JSONWriter) -> RPCError? {
        switch outcome.result {
        case .success(let r):
            return RPCResponseWriter.success(id: outcome.write.id, into: &writer) { (w: inout JSONWriter) in
                WriteMethods.writeSet(r, into: &w)
            }
        case .failure(let failure):
            let error = RPCError(failure)
            RPCResponseWriter.error(id: outcome.write.id, error, into: &writer)
            return error
        }
    }

    /// Ends the leases of the keys the outcomes wrote. Their parked callers may be
    /// answered on this thread before this returns, so call it after the replies of the
    /// outcomes are written and with no reply buffer borrowed.
    public func endLeases(_ outcomes: [DirectOutcome]) {
        for outcome in outcomes where Leases.mayHaveWritten(outcome.result, { _ in true }) {
            leases.written(key: outcome.write.store.key)
        }
    }
}
