// What one request line turns into once parsed: a single element, a batch, or an
// error about the whole line.

import HalcyonJSON

/// A well-formed JSON-RPC 2.0 request or notification.
///
/// A class: a request is handed on several times between the parser and its handler
/// (in its line's element, in the connection's queue while held), and each hand-off of a
/// struct would count a reference for every object it holds (its spec, its params'
/// owner, its method name); a class counts one. A method name the table holds is not
/// copied out of the line: the spec names it.
///
/// Threading: immutable; any thread (the params tree is shared read-only, see `JSONValue`).
public final class RPCRequest: Sendable {
    /// The id to echo; nil for a notification, which never gets a reply.
    public let id: RPCID?
    /// The method's spec, looked up once here; nil for a name the table does not hold.
    public let spec: MethodSpec?
    /// The method name as sent, when the table does not hold it (else the spec names it).
    private let unknownMethod: String?
    /// The params object, kept alive with the line it was parsed from (no object of its
    /// own); nil when absent. Never an array (see `RPCMessageParser`).
    public let paramsNode: JSONNode?

    public convenience init(id: RPCID?, method: String, params: JSONValue?) {
        self.init(id: id, method: method, paramsNode: params.map(JSONNode.init))
    }

    public convenience init(id: RPCID?, method: String, paramsNode: JSONNode?) {
        let spec = MethodSpec.byName[method]
        self.init(id: id, spec: spec, unknownMethod: spec == nil ? method : nil, paramsNode: paramsNode)
    }

    /// A request whose method the caller has already looked up (`MethodSpec.named`):
    /// `unknownMethod` is the name as sent when `spec` is nil.
    init(id: RPCID?, spec: MethodSpec?, unknownMethod: String?, paramsNode: JSONNode?) {
        self.id = id
        self.spec = spec
        self.unknownMethod = unknownMethod
        self.paramsNode = paramsNode
    }

    /// The method name, as sent.
    public var method: String { spec?.name ?? unknownMethod ?? "" }

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

extension RPCElement {
    /// The request's flags (`RPCRequest.flags`); nil for an invalid element. Read in
    /// place: the request is not copied out.
    public var requestFlags: MethodFlags? {
        if case .request(let request) = self { return request.flags }
        return nil
    }

    /// The request's id; nil for a notification or an invalid element.
    public var requestID: RPCID? {
        if case .request(let request) = self { return request.id }
        return nil
    }

    /// The id an invalid element is answered with (nil: no answer); nil for a request.
    public var invalidID: RPCID? {
        if case .invalid(let id, _) = self { return id }
        return nil
    }
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
