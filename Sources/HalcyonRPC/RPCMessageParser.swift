// Turns one request line into requests, following JSON-RPC 2.0 to the letter.

import HalcyonJSON

/// Parses request lines.
///
/// Threading: stateless; call from any thread (the transport calls it on the event
/// loop that read the line).
public enum RPCMessageParser {
    /// The members a request object may have; anything else is `-32600 unknownMember`,
    /// so a typo such as `param` is not silently treated as "no params".
    static let envelopeMembers: Set<String> = ["jsonrpc", "method", "params", "id"]

    /// Parses one line (without its `\n`; a trailing `\r` is ignored too).
    ///
    /// - Parameter maxBatch: the largest batch accepted; a larger one is one
    ///   `batchTooLarge` failure and none of it runs.
    public static func parse(line: UnsafeRawBufferPointer, maxBatch: Int) -> RPCIncoming {
        var line = line
        if let last = line.last, last == UInt8(ascii: "\r") {
            line = UnsafeRawBufferPointer(rebasing: line.dropLast())
        }
        let value: JSONValue
        switch JSONValue.parse(line) {
        case .success(let parsed): value = parsed
        case .failure(let error): return .failure(.parseError(error))
        }
        guard value.kind == .array else { return .single(element(value)) }
        let count = value.count
        if count == 0 { return .failure(.invalidRequest(reason: .emptyBatch, message: "Invalid Request: empty batch")) }
        if count > maxBatch { return .failure(.batchTooLarge(limit: maxBatch)) }
        return .batch((value.array ?? []).map(element))
    }

    /// Parses one line held in an array.
    public static func parse(line: [UInt8], maxBatch: Int) -> RPCIncoming {
        line.withUnsafeBytes { parse(line: $0, maxBatch: maxBatch) }
    }

    /// Parses one line given as a String (tests, the CLI).
    public static func parse(line: String, maxBatch: Int) -> RPCIncoming {
        parse(line: Array(line.utf8), maxBatch: maxBatch)
    }

    /// Classifies one JSON value as a request or an invalid element.
    public static func element(_ value: JSONValue) -> RPCElement {
        guard value.kind == .object else {
            return .invalid(id: .null, .invalidRequest(reason: .notAnObject, message: "Invalid Request: not an object"))
        }
        // The id first, so that every later error can carry it.
        var id: RPCID? = nil
        if let idValue = value["id"] {
            guard let parsed = RPCID(idValue) else {
                return .invalid(id: .null, .invalidRequest(reason: .invalidID,
                                                           message: "Invalid Request: id must be a string, number or null"))
            }
            id = parsed
        }
        // A malformed request is answered even without an id (JSON-RPC 2.0 §5: id null
        // when it cannot be determined); only well-formed notifications stay silent.
        let replyID = id ?? .null
        guard let version = value["jsonrpc"], version.string == "2.0" else {
            return .invalid(id: replyID, .invalidRequest(reason: .invalidVersion,
                                                         message: "Invalid Request: jsonrpc must be \"2.0\""))
        }
        guard let methodValue = value["method"] else {
            return .invalid(id: replyID, .invalidRequest(reason: .missingMethod, message: "Invalid Request: missing method"))
        }
        guard let method = methodValue.string else {
            return .invalid(id: replyID, .invalidRequest(reason: .methodNotString,
                                                         message: "Invalid Request: method must be a string"))
        }
        // Counting is cheaper than walking the members; walk only when there are extras.
        let known = 2 + (id == nil ? 0 : 1) + (value["params"] == nil ? 0 : 1)
        if value.count > known {
            if let unknown = value.keys.first(where: { !envelopeMembers.contains($0) }) {
                var error = RPCError.invalidRequest(reason: .unknownMember,
                                                    message: "Invalid Request: unknown member '\(unknown)'")
                error.data.append(.init("member", .string(unknown)))
                return .invalid(id: replyID, error)
            }
        }
        var params: JSONValue? = nil
        if let paramsValue = value["params"] {
            switch paramsValue.kind {
            case .object:
                params = paramsValue
            case .array:
                // A structurally valid request whose params the methods cannot take:
                // invalid params, and a notification of this kind stays silent.
                return .invalid(id: id, .positionalParams)
            default:
                return .invalid(id: replyID, .invalidRequest(reason: .invalidParamsType,
                                                             message: "Invalid Request: params must be an object"))
            }
        }
        return .request(RPCRequest(id: id, method: method, params: params))
    }
}
