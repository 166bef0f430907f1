// Turns one request line into requests, following JSON-RPC 2.0 to the letter.

import HalcyonJSON
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Parses request lines.
///
/// Threading: stateless; call from any thread (the transport calls it on the event
/// loop that read the line).
public enum RPCMessageParser {
    /// Whether plain lines go through `JSONScanner` first (the default). With
    /// `HALCYON_JSON_SCANNER=off` in the daemon's environment every line goes to jansson:
    /// the way to measure what the scanner saves, or to rule it out. Read once.
    public static let usesScanner: Bool = {
        guard let value = getenv("HALCYON_JSON_SCANNER") else { return true }
        return String(cString: value) != "off"
    }()

    /// Parses one line (without its `\n`; a trailing `\r` is ignored too).
    ///
    /// - Parameter maxBatch: the largest batch accepted; a larger one is one
    ///   `batchTooLarge` failure and none of it runs.
    public static func parse(line: UnsafeRawBufferPointer, maxBatch: Int) -> RPCIncoming {
        var line = line
        if let last = line.last, last == UInt8(ascii: "\r") {
            line = UnsafeRawBufferPointer(rebasing: line.dropLast())
        }
        // The scanner takes the plain lines that are most of the traffic into a flat
        // document; anything else (batches, escapes, unusual numbers, errors) is jansson's,
        // which defines what every line means.
        if usesScanner, case .parsed(let scanned) = JSONScanner.scan(line) {
            // A scanned text is always one object: one element.
            // `scanned` lives through the call, which it is an argument of.
            return .single(element(scanned.root, in: scanned))
        }
        let root: JSONValue
        switch JSONValue.parse(line) {
        case .success(let parsed): root = parsed
        case .failure(let error): return .failure(.parseError(error))
        }
        // Every element borrows from `root`; requests keep it alive through their params.
        return withExtendedLifetime(root) {
            let value = root.view
            guard value.isArray else { return .single(element(value, in: root)) }
            let count = value.count
            if count == 0 { return .failure(.invalidRequest(reason: .emptyBatch, message: "Invalid Request: empty batch")) }
            if count > maxBatch { return .failure(.batchTooLarge(limit: maxBatch)) }
            var elements: [RPCElement] = []
            elements.reserveCapacity(count)
            for index in 0..<count {
                if let item = value[index] { elements.append(element(item, in: root)) }
            }
            return .batch(elements)
        }
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
        withExtendedLifetime(value) { element(value.view, in: value) }
    }

    /// Classifies one node of `owner`'s value. Members are read in place, in one pass over
    /// the object: the only things copied out are the method name and a string id.
    static func element(_ value: JSONView, in owner: AnyObject & Sendable) -> RPCElement {
        guard value.isObject else {
            return .invalid(id: .null, .invalidRequest(reason: .notAnObject, message: "Invalid Request: not an object"))
        }
        var version: JSONView?
        var idValue: JSONView?
        var methodValue: JSONView?
        var paramsValue: JSONView?
        var unknown: UnsafeRawBufferPointer?
        value.forEachMember { name, member in
            switch Envelope(name) {
            case .jsonrpc: version = member
            case .id: idValue = member
            case .method: methodValue = member
            case .params: paramsValue = member
            case nil: if unknown == nil { unknown = name }
            }
            return true
        }
        // The id first, so that every later error can carry it.
        var id: RPCID? = nil
        if let idValue {
            guard let parsed = RPCID(idValue) else {
                return .invalid(id: .null, .invalidRequest(reason: .invalidID,
                                                           message: "Invalid Request: id must be a string, number or null"))
            }
            id = parsed
        }
        // A malformed request is answered even without an id (JSON-RPC 2.0 §5: id null
        // when it cannot be determined); only well-formed notifications stay silent.
        let replyID = id ?? .null
        guard let version, version.stringEquals("2.0") else {
            return .invalid(id: replyID, .invalidRequest(reason: .invalidVersion,
                                                         message: "Invalid Request: jsonrpc must be \"2.0\""))
        }
        guard let methodValue else {
            return .invalid(id: replyID, .invalidRequest(reason: .missingMethod, message: "Invalid Request: missing method"))
        }
        // A name the table holds is not copied out: the spec names it.
        guard let (spec, unknownMethod) = methodValue.withStringBytes({ bytes -> (MethodSpec?, String?) in
            let spec = MethodSpec.named(bytes)
            return (spec, spec == nil ? String(decoding: bytes, as: UTF8.self) : nil)
        }) else {
            return .invalid(id: replyID, .invalidRequest(reason: .methodNotString,
                                                         message: "Invalid Request: method must be a string"))
        }
        if let unknown {
            let name = String(decoding: unknown, as: UTF8.self)
            var error = RPCError.invalidRequest(reason: .unknownMember, message: "Invalid Request: unknown member '\(name)'")
            error.data.append(.init("member", .string(name)))
            return .invalid(id: replyID, error)
        }
        var params: JSONNode? = nil
        if let paramsValue {
            if paramsValue.isObject {
                params = JSONNode(paramsValue, in: owner)
            } else if paramsValue.isArray {
                // A structurally valid request whose params the methods cannot take:
                // invalid params, and a notification of this kind stays silent.
                return .invalid(id: id, .positionalParams)
            } else {
                return .invalid(id: replyID, .invalidRequest(reason: .invalidParamsType,
                                                             message: "Invalid Request: params must be an object"))
            }
        }
        return .request(RPCRequest(id: id, spec: spec, unknownMethod: unknownMethod, paramsNode: params))
    }

    /// The members a request object may have; anything else is `-32600 unknownMember`,
    /// so a typo such as `param` is not silently treated as "no params".
    enum Envelope {
        case jsonrpc, id, method, params

        /// The member `name`'s bytes spell, or nil for any other name.
        init?(_ name: UnsafeRawBufferPointer) {
            func spells(_ word: StaticString) -> Bool {
                name.count == word.utf8CodeUnitCount && memcmp(name.baseAddress!, word.utf8Start, name.count) == 0
            }
            switch name.count {
            case 2 where spells("id"): self = .id
            case 6 where spells("method"): self = .method
            case 6 where spells("params"): self = .params
            case 7 where spells("jsonrpc"): self = .jsonrpc
            default: return nil
            }
        }
    }
}
