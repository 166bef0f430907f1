// Reading RESP3 from bytes: an incremental parser that takes whole values off the front
// of a buffer, leaves a partial value where it is, and refuses malformed or oversized
// input with a typed reason instead of trapping or growing without bound.

import NIOCore

/// Why bytes are not RESP3 (or are more than the parser's limits allow). Each case name is
/// stable; the connection that meets one closes, since nothing after it can be framed.
///
/// Threading: a value type; `Sendable`.
public enum RESP3ParseError: Error, Sendable, Equatable {
    /// The first byte of a value names no RESP3 type.
    case unknownType(UInt8)
    /// A line (type byte up to CRLF) does not end in CRLF, or a blob is not followed by it.
    case missingCRLF
    /// A length is not a decimal count, is negative where only -1 may be, or has a sign or
    /// leading zeros where RESP3 allows none.
    case badLength
    /// An integer (`:`) is not a decimal signed 64-bit integer.
    case badInteger
    /// A double (`,`) is not a number, `inf`, `-inf` or `nan`.
    case badDouble
    /// A boolean (`#`) is neither `t` nor `f`.
    case badBoolean
    /// A big number (`(`) is not an optional `-` followed by digits.
    case badBigNumber
    /// A verbatim string (`=`) lacks its `xxx:` format prefix.
    case badVerbatim
    /// A streamed string chunk (`;`) or end marker (`.`) where none may be.
    case badStream
    /// A line is longer than `Limits.maxLineLength`.
    case lineTooLong
    /// A string is longer than `Limits.maxBlobLength`.
    case blobTooLong
    /// An aggregate declares more elements than `Limits.maxAggregateLength`.
    case aggregateTooLong
    /// Aggregates nest deeper than `Limits.maxDepth`.
    case tooDeep
}

/// Takes RESP3 values off the front of a buffer.
///
/// ```swift
/// var parser = RESP3Parser()
/// var bytes = ByteBuffer(string: ":1\r\n$3\r\nabc\r\n$2\r\nx")
/// try parser.next(from: &bytes)   // .integer(1)
/// try parser.next(from: &bytes)   // .blobString("abc")
/// try parser.next(from: &bytes)   // nil: "$2\r\nx" stays in `bytes` until more arrives
/// ```
///
/// A partial value is parsed again from its first byte when more bytes arrive; a long
/// blob is not copied until it is complete, so the cost of waiting for one is a length
/// check per read.
///
/// Threading: a value type with no shared state; use each instance from one thread at a time.
public struct RESP3Parser: Sendable {
    /// Bounds on what one value may hold: a server (or anything impersonating one) can
    /// make the client allocate only this much.
    public struct Limits: Sendable {
        /// Longest line (simple string, error, number). Default 64 KiB.
        public var maxLineLength = 64 << 10
        /// Longest string. Default 512 MiB, Redis's own `proto-max-bulk-len`.
        public var maxBlobLength = 512 << 20
        /// Most elements one aggregate may declare. Default 2^24.
        public var maxAggregateLength = 1 << 24
        /// Deepest nesting of aggregates. Default 64.
        public var maxDepth = 64
        public init() {}
    }

    public var limits: Limits

    public init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// The first complete value in `buffer`, consumed; nil (and `buffer` untouched) when
    /// the bytes so far end inside a value.
    /// - Throws: `RESP3ParseError` when the bytes cannot be RESP3.
    public func next(from buffer: inout ByteBuffer) throws(RESP3ParseError) -> RESP3Value? {
        var cursor = Cursor(buffer: buffer, limits: limits)
        guard let value = try cursor.value(depth: 0) else { return nil }
        buffer.moveReaderIndex(to: cursor.offset)
        return value
    }
}

/// The walk over one attempt at a value: `offset` moves only forward, and nothing in
/// `buffer` is consumed until a whole value has been read.
private struct Cursor {
    let buffer: ByteBuffer
    let limits: RESP3Parser.Limits
    var offset: Int
    let end: Int

    init(buffer: ByteBuffer, limits: RESP3Parser.Limits) {
        self.buffer = buffer
        self.limits = limits
        offset = buffer.readerIndex
        end = buffer.writerIndex
    }

    /// The bytes of the line starting at `offset` (without CRLF), moving past the CRLF;
    /// nil when the line is not complete yet.
    mutating func line() throws(RESP3ParseError) -> ByteBuffer? {
        let searchEnd = min(end, offset + limits.maxLineLength + 2)
        let start = offset, readerIndex = buffer.readerIndex
        let found: Int? = buffer.withUnsafeReadableBytes { raw in
            var index = start - readerIndex
            let stop = searchEnd - readerIndex
            while index < stop {
                if raw[index] == UInt8(ascii: "\r") { return index + readerIndex }
                index += 1
            }
            return nil
        }
        guard let carriageReturn = found else {
            if end - offset > limits.maxLineLength + 1 { throw .lineTooLong }
            return nil
        }
        guard carriageReturn + 1 < end else { return nil }
        guard buffer.getInteger(at: carriageReturn + 1, as: UInt8.self) == UInt8(ascii: "\n") else {
            throw .missingCRLF
        }
        let text = buffer.getSlice(at: offset, length: carriageReturn - offset)!
        offset = carriageReturn + 2
        return text
    }

    /// A length: decimal digits, no sign, no leading zero (except "0"); or -1 when
    /// `allowNull`; or `?` (returned as nil inside `.streamed`).
    enum Length { case count(Int), null, streamed }

    mutating func length(allowNull: Bool, allowStreamed: Bool) throws(RESP3ParseError) -> Length? {
        guard let text = try line() else { return nil }
        let bytes = text.readableBytesView
        if allowStreamed, bytes.elementsEqual([UInt8(ascii: "?")]) { return .streamed }
        if allowNull, bytes.elementsEqual([UInt8(ascii: "-"), UInt8(ascii: "1")]) { return .null }
        guard let count = Cursor.decimal(bytes), count >= 0 else { throw .badLength }
        return .count(count)
    }

    /// Unsigned decimal digits without a leading zero (other than "0" itself), up to 18 of them.
    static func decimal(_ bytes: ByteBufferView) -> Int? {
        guard !bytes.isEmpty, bytes.count <= 18 else { return nil }
        if bytes.count > 1, bytes.first == UInt8(ascii: "0") { return nil }
        var value = 0
        for byte in bytes {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return value
    }

    /// `count` bytes followed by CRLF; nil when not all there yet.
    mutating func blob(count: Int) throws(RESP3ParseError) -> ByteBuffer? {
        guard count <= limits.maxBlobLength else { throw .blobTooLong }
        guard end - offset >= count + 2 else { return nil }
        guard buffer.getInteger(at: offset + count, as: UInt8.self) == UInt8(ascii: "\r"),
              buffer.getInteger(at: offset + count + 1, as: UInt8.self) == UInt8(ascii: "\n")
        else { throw .missingCRLF }
        let bytes = buffer.getSlice(at: offset, length: count)!
        offset += count + 2
        return bytes
    }

    mutating func value(depth: Int) throws(RESP3ParseError) -> RESP3Value? {
        guard depth <= limits.maxDepth else { throw .tooDeep }
        guard offset < end, let type = buffer.getInteger(at: offset, as: UInt8.self) else { return nil }
        let start = offset
        offset += 1
        let result: RESP3Value?
        switch type {
        case UInt8(ascii: "+"): result = try line().map { .simpleString($0) }
        case UInt8(ascii: "-"): result = try line().map { .simpleError($0) }
        case UInt8(ascii: ":"): result = try integer()
        case UInt8(ascii: "_"):
            guard let text = try line() else { result = nil; break }
            guard text.readableBytes == 0 else { throw .missingCRLF }
            result = .null
        case UInt8(ascii: ","): result = try double()
        case UInt8(ascii: "#"): result = try boolean()
        case UInt8(ascii: "("): result = try bigNumber()
        case UInt8(ascii: "$"): result = try blobString(allowStreamed: true)
        case UInt8(ascii: "!"): result = try blobString(allowStreamed: false).map {
                guard case .blobString(let bytes) = $0 else { return $0 }
                return .blobError(bytes)
            }
        case UInt8(ascii: "="): result = try verbatim()
        case UInt8(ascii: "*"): result = try elements(depth: depth, allowNull: true).map { $0.map(RESP3Value.array) ?? .null }
        case UInt8(ascii: "~"): result = try elements(depth: depth, allowNull: false).map { .set($0 ?? []) }
        case UInt8(ascii: ">"): result = try elements(depth: depth, allowNull: false).map { .push($0 ?? []) }
        case UInt8(ascii: "%"): result = try pairs(depth: depth).map { .map($0) }
        case UInt8(ascii: "|"):
            guard let attributes = try pairs(depth: depth) else { result = nil; break }
            guard let described = try value(depth: depth + 1) else { result = nil; break }
            result = .attributed(attributes, described)
        case UInt8(ascii: ";"), UInt8(ascii: "."): throw .badStream
        default: throw .unknownType(type)
        }
        if result == nil { offset = start }
        return result
    }

    mutating func integer() throws(RESP3ParseError) -> RESP3Value? {
        guard let text = try line() else { return nil }
        guard let value = Int64(String(decoding: text.readableBytesView, as: UTF8.self)),
              text.readableBytesView.first != UInt8(ascii: "+") else { throw .badInteger }
        return .integer(value)
    }

    mutating func double() throws(RESP3ParseError) -> RESP3Value? {
        guard let text = try line() else { return nil }
        let string = String(decoding: text.readableBytesView, as: UTF8.self)
        switch string {
        case "inf": return .double(.infinity)
        case "-inf": return .double(-.infinity)
        case "nan": return .double(.nan)
        default:
            // Digits, sign, point and exponent only: Swift's Double(String) would also take
            // hexadecimal and "infinity", which are not RESP3.
            let allowed = string.utf8.allSatisfy { byte in
                (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "-")
                    || byte == UInt8(ascii: "+") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "e")
                    || byte == UInt8(ascii: "E")
            }
            guard allowed, let value = Double(string), value.isFinite else { throw .badDouble }
            return .double(value)
        }
    }

    mutating func boolean() throws(RESP3ParseError) -> RESP3Value? {
        guard let text = try line() else { return nil }
        switch Array(text.readableBytesView) {
        case [UInt8(ascii: "t")]: return .boolean(true)
        case [UInt8(ascii: "f")]: return .boolean(false)
        default: throw .badBoolean
        }
    }

    mutating func bigNumber() throws(RESP3ParseError) -> RESP3Value? {
        guard let text = try line() else { return nil }
        let bytes = Array(text.readableBytesView)
        let digits = bytes.first == UInt8(ascii: "-") ? bytes.dropFirst() : bytes[...]
        guard !digits.isEmpty, digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            throw .badBigNumber
        }
        return .bigNumber(String(decoding: bytes, as: UTF8.self))
    }

    mutating func blobString(allowStreamed: Bool) throws(RESP3ParseError) -> RESP3Value? {
        guard let header = try length(allowNull: true, allowStreamed: allowStreamed) else { return nil }
        switch header {
        case .null: return .null
        case .count(let count): return try blob(count: count).map { .blobString($0) }
        case .streamed:
            // `;len` chunks up to `;0`; the concatenation is bounded like a single blob.
            var whole = ByteBuffer()
            while true {
                guard offset < end else { return nil }
                guard buffer.getInteger(at: offset, as: UInt8.self) == UInt8(ascii: ";") else { throw .badStream }
                offset += 1
                guard let chunkLength = try self.length(allowNull: false, allowStreamed: false) else { return nil }
                guard case .count(let count) = chunkLength else { throw .badStream }
                if count == 0 { return .blobString(whole) }
                guard whole.readableBytes + count <= limits.maxBlobLength else { throw .blobTooLong }
                guard var chunk = try blob(count: count) else { return nil }
                whole.writeBuffer(&chunk)
            }
        }
    }

    mutating func verbatim() throws(RESP3ParseError) -> RESP3Value? {
        guard let header = try length(allowNull: false, allowStreamed: false) else { return nil }
        guard case .count(let count) = header else { throw .badVerbatim }
        guard var body = try blob(count: count) else { return nil }
        guard count >= 4, body.getInteger(at: body.readerIndex + 3, as: UInt8.self) == UInt8(ascii: ":") else {
            throw .badVerbatim
        }
        let format = body.readString(length: 3)!
        body.moveReaderIndex(forwardBy: 1)
        return .verbatimString(format: format, text: body)
    }

    /// Whether the next bytes are a streamed aggregate's end, `.` CRLF (consumed if so);
    /// nil when too few bytes have arrived to tell.
    mutating func streamEnd() throws(RESP3ParseError) -> Bool? {
        guard offset < end else { return nil }
        guard buffer.getInteger(at: offset, as: UInt8.self) == UInt8(ascii: ".") else { return false }
        guard end - offset >= 3 else { return nil }
        guard buffer.getInteger(at: offset + 1, as: UInt8.self) == UInt8(ascii: "\r"),
              buffer.getInteger(at: offset + 2, as: UInt8.self) == UInt8(ascii: "\n") else { throw .missingCRLF }
        offset += 3
        return true
    }

    /// The elements of an array, set or push. `.some(nil)` for a null array.
    mutating func elements(depth: Int, allowNull: Bool) throws(RESP3ParseError) -> [RESP3Value]?? {
        guard let header = try length(allowNull: allowNull, allowStreamed: true) else { return .none }
        var elements: [RESP3Value] = []
        switch header {
        case .null: return .some(nil)
        case .count(let count):
            guard count <= limits.maxAggregateLength else { throw .aggregateTooLong }
            // Reserve by what has arrived, never by the declared count: a header alone must
            // not allocate.
            elements.reserveCapacity(min(count, (end - offset) / 3))
            for _ in 0..<count {
                guard let element = try value(depth: depth + 1) else { return .none }
                elements.append(element)
            }
        case .streamed:
            while true {
                guard let done = try streamEnd() else { return .none }
                if done { break }
                guard elements.count < limits.maxAggregateLength else { throw .aggregateTooLong }
                guard let element = try value(depth: depth + 1) else { return .none }
                elements.append(element)
            }
        }
        return .some(elements)
    }

    /// The pairs of a map or of attributes.
    mutating func pairs(depth: Int) throws(RESP3ParseError) -> [RESP3Value.Pair]? {
        guard let header = try length(allowNull: false, allowStreamed: true) else { return nil }
        var pairs: [RESP3Value.Pair] = []
        switch header {
        case .null: throw .badLength
        case .count(let count):
            guard count <= limits.maxAggregateLength / 2 else { throw .aggregateTooLong }
            pairs.reserveCapacity(min(count, (end - offset) / 6))
            for _ in 0..<count {
                guard let key = try value(depth: depth + 1), let value = try value(depth: depth + 1) else { return nil }
                pairs.append(.init(key, value))
            }
        case .streamed:
            while true {
                guard let done = try streamEnd() else { return nil }
                if done { break }
                guard pairs.count < limits.maxAggregateLength / 2 else { throw .aggregateTooLong }
                guard let key = try value(depth: depth + 1), let value = try value(depth: depth + 1) else { return nil }
                pairs.append(.init(key, value))
            }
        }
        return pairs
    }
}
