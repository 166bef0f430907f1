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
    }

    /// The request as a direct write, or nil: then hand it to `handle` (which refuses bad
    /// params with the same error). Only for requests with an id.
    ///
    /// Threading: on the requesting connection's event loop thread, like `handle`.
    public func directWrite(_ request: RPCRequest, id: RPCID, session: ConnectionSession) -> DirectWrite? {
        guard request.method == Self.directWriteMethod, let spec = table[request.method] else { return nil }
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

    /// Commits `writes` as one group, in order, and appends each one's reply line to
    /// `writer`; then ends the leases of the keys written, whose parked callers may be
    /// answered on this thread before this returns (so `writer` must not be the buffer
    /// those answers go to). Returns each reply's error (nil for a success), in order.
    ///
    /// Threading: on the event loop thread of the connection the writes came from. It
    /// waits there for the ioQueue (see `HybridCache.commitStores`).
    public func commitDirectWrites(_ writes: [DirectWrite], into writer: inout JSONWriter) -> [RPCError?] {
        let results = cache.commitStores(writes.map(\.store))
        var errors: [RPCError?] = []
        errors.reserveCapacity(writes.count)
        for (write, result) in zip(writes, results) {
            switch result {
            case .success(let r):
                errors.append(RPCResponseWriter.success(id: write.id, into: &writer) { (w: inout JSONWriter) in
                    WriteMethods.writeSet(r, into: &w)
                })
            case .failure(let failure):
                let error = RPCError(failure)
                RPCResponseWriter.error(id: write.id, error, into: &writer)
                errors.append(error)
            }
        }
        // After the replies: a woken lease caller's reply may be written at once, on this
        // thread (see `Leases.written`).
        for (write, result) in zip(writes, results) where Leases.mayHaveWritten(result, { _ in true }) {
            leases.written(key: write.store.key)
        }
        return errors
    }
}
