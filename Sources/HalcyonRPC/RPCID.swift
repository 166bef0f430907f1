// The id of a JSON-RPC request, echoed unchanged in its reply.

import HalcyonJSON

/// A request id as JSON-RPC 2.0 allows it: a string, a number, or null.
///
/// Integral numbers are kept as `number`; a number with a fraction (the spec says ids
/// SHOULD NOT have one, but they are legal) is kept as `fractional` and echoed in
/// shortest round-trip form. A request without an id is a notification; that is
/// `RPCRequest.id == nil`, not `.null`.
public enum RPCID: Sendable, Hashable, CustomStringConvertible {
    case string(String)
    case number(Int64)
    case fractional(Double)
    case null

    /// Reads an id from a JSON value; nil when the value cannot be an id (object,
    /// array, boolean).
    public init?(_ value: JSONValue) {
        self.init(value.view)
    }

    /// Reads an id from a node in place (a string id is the only one copied).
    public init?(_ value: JSONView) {
        switch value.kind {
        case .string: self = .string(value.string ?? "")
        case .integer: self = .number(value.int64 ?? 0)
        case .real: self = .fractional(value.double ?? 0)
        case .null: self = .null
        case .object, .array, .bool: return nil
        }
    }

    /// Writes the id as a JSON value.
    public func write(to writer: inout JSONWriter) {
        switch self {
        case .string(let s): writer.string(s)
        case .number(let n): writer.int(n)
        case .fractional(let d): writer.double(d)
        case .null: writer.null()
        }
    }

    public var description: String {
        var w = JSONWriter(capacity: 32)
        write(to: &w)
        return String(decoding: w.bytes, as: UTF8.self)
    }
}
