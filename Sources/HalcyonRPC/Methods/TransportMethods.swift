// The protocol-level methods the transport carries out itself ($/cancelRequest): their
// params are checked and decoded here, from the table, and the transport acts on the
// result, since only it knows the connection's requests in flight.

import HalcyonJSON

/// What the transport is to do for a request to a `transport` method.
public enum TransportAction: Sendable, Equatable {
    /// Cancel the requests of this connection whose id is this one (spec §6).
    case cancel(RPCID)
}

extension Dispatcher {
    /// Decoders of the transport methods; their lines in the table are in `MethodTable.swift`.
    enum TransportMethods {
        /// `$/cancelRequest`: `id` names the request to cancel (null names the request whose id was null).
        static func cancelRequest(_ params: Params) throws(RPCError) -> TransportAction {
            .cancel(try params.id("id"))
        }
    }

    /// What the transport is to do for `request`, a request to a `transport` method, after
    /// the table's checks (unknown params are `unknownParam`, as for any method).
    ///
    /// Threading: any thread; the transport calls it on the connection's event loop.
    public func transportAction(for request: RPCRequest) throws(RPCError) -> TransportAction {
        guard let spec = request.spec, case .transport(let decode) = spec.handler else {
            throw .methodNotFound(method: request.method)
        }
        return try decode(try Params(node: request.paramsNode, allowed: spec.params))
    }
}
