// What one request line turns into once parsed: a single element, a batch, or an
// error about the whole line.

import HalcyonJSON

/// A well-formed JSON-RPC 2.0 request or notification.
///
/// Threading: immutable and `Sendable`; any thread (the params tree is shared
/// read-only, see `JSONValue`).
public struct RPCRequest: Sendable {
    /// The id to echo; nil for a notification, which never gets a reply.
    public var id: RPCID?
    /// The method name, as sent.
    public let method: String
    /// The method's spec, looked up once here; nil for a name the table does not hold.
    public let spec: MethodSpec?
    /// The params object, kept alive with the line it was parsed from (no object of its
    /// own); nil when absent. Never an array (see `RPCMessageParser`).
    public var paramsNode: JSONNode?

    public init(id: RPCID?, method: String, params: JSONValue?) {
        self.init(id: id, method: method, paramsNode: params.map(JSONNode.init))
    }

    public init(id: RPCID?, method: String, paramsNode: JSONNode?) {
        self.init(id: id, method: method, spec: MethodSpec.byName[method], paramsNode: paramsNode)
    }

    /// A request whose method the caller has already looked up (`MethodSpec.named`).
    init(id: RPCID?, method: String, spec: MethodSpec?, paramsNode: JSONNode?) {
        self.id = id
        self.method = method
        self.spec = spec
        self.paramsNode = paramsNode
    }

    /// The params object as a value of its own (tests, logs); the request path reads
    /// `paramsNode` instead.
    public var params: JSONValue? { paramsNode?.value }

    /// The flags of the method's spec; empty for a method the table does not hold.
    public var flags: MethodFlags { spec?.flags ?? [] }

    /// True when no reply may be written for this request.
    public var isNotification: Bool { id == nil }
}

/// One element of a line: a request to run, or something to answer with an error.
public enum RPCElement: Sendable {
    /// A request to dispatch.
    case request(RPCRequest)
    /// Not runnable. Reply with the error and `id` — unless `id` is nil, which means
    /// the element was a well-formed notification (only its params were wrong): then,
    /// as JSON-RPC requires, write nothing. An element whose id could not be read has
    /// `id == .null`, and is answered.
    case invalid(id: RPCID?, RPCError)
}

/// What a whole line holds.
public enum RPCIncoming: Sendable {
    /// One request object (or one invalid value).
    case single(RPCElement)
    /// A batch, in order; its replies go into one array line (none when every
    /// element is a notification).
    case batch([RPCElement])
    /// The line as a whole is answered with this error and `id: null`: not JSON, an
    /// empty batch, or a batch larger than the limit (none of it runs).
    case failure(RPCError)
}
