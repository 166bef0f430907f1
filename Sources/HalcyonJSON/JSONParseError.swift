// Why a byte string is not a JSON text, in stable words the daemon can put on the wire.

import CJansson

/// A failure to parse a JSON text, reduced to a stable reason.
///
/// `reason.rawValue` is used verbatim as `data.reason` of a `-32700` reply, so cases
/// are never renamed.
public struct JSONParseError: Error, Sendable, Equatable {
    /// The stable classification of the failure.
    public enum Reason: String, Sendable, Equatable, CaseIterable {
        /// Not JSON: bad syntax, truncated input, trailing garbage, NUL in a key, empty input.
        case invalidJSON
        /// The bytes are not valid UTF-8.
        case invalidUTF8
        /// Arrays/objects nested deeper than jansson's limit (2048).
        case nestingTooDeep
        /// An integer outside Int64, or a real outside Double.
        case numberOutOfRange
        /// An object names the same member twice.
        case duplicateKey
    }

    /// The stable classification.
    public var reason: Reason
    /// jansson's own explanation, for humans.
    public var message: String
    /// Byte offset at which jansson stopped.
    public var position: Int

    public init(reason: Reason, message: String, position: Int) {
        self.reason = reason
        self.message = message
        self.position = position
    }

    /// Maps a jansson error (`json_error_code`) to a reason.
    init(_ error: inout json_error_t) {
        switch json_error_code(&error) {
        case json_error_invalid_utf8: reason = .invalidUTF8
        case json_error_stack_overflow: reason = .nestingTooDeep
        case json_error_numeric_overflow: reason = .numberOutOfRange
        case json_error_duplicate_key: reason = .duplicateKey
        default: reason = .invalidJSON
        }
        message = withUnsafeBytes(of: &error.text) { raw in
            let bytes = raw.bindMemory(to: UInt8.self)
            let end = bytes.firstIndex(of: 0) ?? bytes.count
            return String(decoding: bytes[..<min(end, bytes.count - 1)], as: UTF8.self)
        }
        position = Int(error.position)
    }
}
