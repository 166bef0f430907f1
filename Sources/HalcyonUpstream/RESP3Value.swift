// The values of the RESP3 protocol (Redis 6 and later, Valkey): every type a server can
// send, as one enum, with the small accessors the client reads replies with.

import NIOCore

/// One RESP3 value.
///
/// Streamed forms (`$?` strings, `*?`/`%?`/`~?` aggregates) decode to their plain cases:
/// a stream is a transport detail, not a different value. A RESP2 null (`$-1`, `*-1`)
/// decodes to `.null`. Attributes (`|`) wrap the value they precede, so a reply keeps
/// them without the caller having to skip them.
///
/// ```swift
/// let reply: RESP3Value = .array([.blobString(ByteBuffer(string: "invalidate")), .null])
/// reply.array?.first?.string   // "invalidate"
/// ```
///
/// Threading: a value type; `Sendable`.
public indirect enum RESP3Value: Sendable, Hashable {
    /// `+`: a short status line (never contains CR or LF).
    case simpleString(ByteBuffer)
    /// `-`: an error line, `CODE message`.
    case simpleError(ByteBuffer)
    /// `:`: a signed 64-bit integer.
    case integer(Int64)
    /// `$`: binary-safe bytes.
    case blobString(ByteBuffer)
    /// `!`: a binary-safe error, `CODE message`.
    case blobError(ByteBuffer)
    /// `_` (and RESP2's `$-1` / `*-1`).
    case null
    /// `,`: a double, `inf`, `-inf` or `nan` included.
    case double(Double)
    /// `#t` / `#f`.
    case boolean(Bool)
    /// `(`: an integer of any size, kept as its decimal text (an optional `-` and digits).
    case bigNumber(String)
    /// `=`: text with a three-letter format (`txt`, `mkd`).
    case verbatimString(format: String, text: ByteBuffer)
    /// `*`: an ordered list.
    case array([RESP3Value])
    /// `%`: key-value pairs, in the order the server sent them (duplicates kept).
    case map([Pair])
    /// `~`: an unordered collection, in the order the server sent it.
    case set([RESP3Value])
    /// `|` attributes followed by the value they describe.
    case attributed([Pair], RESP3Value)
    /// `>`: an out-of-band message (invalidations, pub/sub), never a command's reply.
    case push([RESP3Value])

    /// One entry of a map or of attributes.
    public struct Pair: Sendable, Hashable {
        public var key: RESP3Value
        public var value: RESP3Value
        public init(_ key: RESP3Value, _ value: RESP3Value) {
            self.key = key
            self.value = value
        }
    }
}

extension RESP3Value {
    /// A blob string holding `text`'s UTF-8 bytes.
    public static func blob(_ text: String) -> RESP3Value { .blobString(ByteBuffer(string: text)) }

    /// A blob string holding `bytes`.
    public static func blob(_ bytes: [UInt8]) -> RESP3Value { .blobString(ByteBuffer(bytes: bytes)) }

    /// The value without its attributes.
    public var unattributed: RESP3Value {
        if case .attributed(_, let value) = self { return value.unattributed }
        return self
    }

    /// The bytes of a simple, blob or verbatim string; nil for other types.
    public var bytes: ByteBuffer? {
        switch unattributed {
        case .simpleString(let bytes), .blobString(let bytes): return bytes
        case .verbatimString(_, let text): return text
        default: return nil
        }
    }

    /// `bytes` as UTF-8 text (invalid sequences repaired); nil for non-strings.
    public var string: String? { bytes.map { String(buffer: $0) } }

    /// An integer, or a string holding a decimal integer (Redis answers some counts that way).
    public var int64: Int64? {
        switch unattributed {
        case .integer(let value): return value
        case .bigNumber(let text): return Int64(text)
        default: return string.flatMap { Int64($0) }
        }
    }

    /// The elements of an array, set or push; nil otherwise.
    public var array: [RESP3Value]? {
        switch unattributed {
        case .array(let elements), .set(let elements), .push(let elements): return elements
        default: return nil
        }
    }

    /// The pairs of a map, or of an array of even length read as alternating keys and
    /// values (RESP2's way of sending maps); nil otherwise.
    public var pairs: [Pair]? {
        switch unattributed {
        case .map(let pairs): return pairs
        case .array(let elements) where elements.count % 2 == 0:
            return stride(from: 0, to: elements.count, by: 2).map { Pair(elements[$0], elements[$0 + 1]) }
        default: return nil
        }
    }

    /// The value under the string key `name` of a map (or flat key-value array).
    public subscript(field name: String) -> RESP3Value? {
        pairs?.first(where: { $0.key.string == name })?.value
    }

    /// Whether this is `.null`.
    public var isNull: Bool { unattributed == .null }

    /// The text of an error reply (simple or blob); nil for other types.
    public var errorText: String? {
        switch unattributed {
        case .simpleError(let text), .blobError(let text): return String(buffer: text)
        default: return nil
        }
    }
}
