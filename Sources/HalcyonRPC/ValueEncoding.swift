// How a value's bytes are shown on the wire, how that choice is remembered with the
// entry, and how one encoding converts to another on read.

import HalcyonJSON

/// The wire form of a value (Docs/PROTOCOL.md §4).
///
/// Conversion on read (rows: the entry's stored encoding; columns: requested):
///
/// | stored \ requested | utf8 | base64 | json |
/// |---|---|---|---|
/// | utf8   | the text | base64 of its bytes | the text parsed as JSON, else -32004 |
/// | base64 | the bytes if valid UTF-8, else -32004 | the bytes | the bytes parsed as JSON, else -32004 |
/// | json   | the compact JSON text as a string | base64 of the text | the value |
///
/// A read without `encoding` answers in the stored encoding. Entries with flags 0 (or
/// any unknown value) are treated as `base64` (raw bytes), which can show anything.
/// JSON produced by conversion is re-serialised compactly, so it never contains a line feed.
public enum ValueEncoding: String, Sendable, Equatable, CaseIterable {
    case utf8, base64, json

    /// The value kept in `CacheEntry.flags`. These numbers are on disk: never change them.
    public var flags: UInt32 {
        switch self {
        case .utf8: return 1
        case .base64: return 2
        case .json: return 3
        }
    }

    /// The encoding an entry was stored with; 0 (legacy/unknown) and unknown values mean
    /// raw bytes, shown as base64.
    public init(storedFlags: UInt32) {
        switch storedFlags {
        case 1: self = .utf8
        case 3: self = .json
        default: self = .base64
        }
    }

    /// The bytes to store for `value` sent in this encoding.
    ///
    /// - utf8: `value` must be a JSON string; its UTF-8 bytes.
    /// - base64: `value` must be a string of strict standard base64; the decoded bytes.
    /// - json: any JSON value; its compact serialisation.
    public func decode(_ value: JSONValue) throws(RPCError) -> [UInt8] {
        defer { withExtendedLifetime(value) {} }
        return try decode(value.view)
    }

    /// `decode` of a node read in place (the request path).
    public func decode(_ value: JSONView) throws(RPCError) -> [UInt8] {
        switch self {
        case .utf8:
            guard let bytes = value.withStringBytes({ [UInt8]($0) }) else {
                throw .invalidParams(reason: .invalidValue, param: "value",
                                     message: "with encoding utf8, 'value' must be a string")
            }
            return bytes
        case .base64:
            guard let decoded = value.withStringBytes({ StrictBase64.decode($0) }) else {
                throw .invalidParams(reason: .invalidValue, param: "value",
                                     message: "with encoding base64, 'value' must be a string")
            }
            guard let bytes = decoded else {
                throw .invalidParams(reason: .invalidBase64, param: "value",
                                     message: "'value' is not standard padded base64")
            }
            return bytes
        case .json:
            return value.serializedCompact()
        }
    }

    /// Writes `bytes` as the `value` JSON in the requested encoding (or the stored one
    /// when `requested` is nil) and returns the encoding written, for `result.encoding`.
    ///
    /// Throws `-32004 cannotEncode` when the bytes cannot be shown that way; nothing is
    /// written then (see the table on the type).
    @discardableResult
    public static func write(bytes: [UInt8], storedFlags: UInt32, requested: ValueEncoding?,
                             into writer: inout JSONWriter) throws(RPCError) -> ValueEncoding {
        let stored = ValueEncoding(storedFlags: storedFlags)
        let target = requested ?? stored
        switch (stored, target) {
        case (_, .base64):
            writer.base64(bytes)
        case (.utf8, .utf8), (.base64, .utf8), (.json, .utf8):
            // Stored utf8/json bytes came from a JSON string or jansson, so they are
            // valid; checked anyway so a damaged file can never produce a broken line.
            // ASCII that needs no escape, most values, is valid as it is: one pass over the
            // bytes instead of a check and then a scan for escapes.
            if bytes.withUnsafeBytes(JSONWriter.isPlainASCII) {
                writer.string(plainASCII: bytes)
            } else {
                guard isValidUTF8(bytes) else { throw .cannotEncode(encoding: .utf8, stored: stored) }
                writer.string(utf8Bytes: bytes)
            }
        case (.json, .json):
            // Our own compact serialisation: written as is, unless it holds a control
            // byte (only a damaged entry can), which would break the line framing.
            if !bytes.contains(where: { $0 < 0x20 }), !bytes.isEmpty {
                writer.raw(bytes)
            } else {
                try writeParsed(bytes, stored: stored, into: &writer)
            }
        case (.utf8, .json), (.base64, .json):
            try writeParsed(bytes, stored: stored, into: &writer)
        }
        return target
    }

    private static func writeParsed(_ bytes: [UInt8], stored: ValueEncoding,
                                    into writer: inout JSONWriter) throws(RPCError) {
        guard case .success(let value) = JSONValue.parse(bytes) else {
            throw .cannotEncode(encoding: .json, stored: stored)
        }
        writer.value(value)
    }
}
