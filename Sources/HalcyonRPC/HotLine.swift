// The hottest request lines read straight off their bytes: a `cache.get` of one key and a
// `cache.set` of one key to a plain value, with a number id. A memory hit or a direct write
// of such a line needs no document, no request, no params and no prepared call: the bytes
// give the id, the key and the value, and the reply is written as the request's would be.

/// A request line of the plainest shape: `jsonrpc`, `id`, `method` and `params` (each once,
/// in any order, with any JSON whitespace between tokens), the id a JSON integer of at most
/// 18 digits, every string printable ASCII without escapes, and either `cache.get` whose
/// `params` hold `key` alone, or `cache.set` whose `params` hold `key` and `value` (a
/// string: the value's bytes, stored as `utf8`). Every other line, however valid, is left
/// to `RPCMessageParser` (`HotLine.read` answers nil), which defines what it means; on the
/// lines this reader accepts the two agree (the request fuzzer checks each input against
/// jansson).
///
/// Threading: a value; any thread.
public struct HotRequest {
    public enum Method {
        /// `cache.get` of `key`.
        case get
        /// `cache.set` of `key` to `value`.
        case set
    }

    public let method: Method
    /// The request's id.
    public let id: Int64
    /// Where the key's bytes lie in the line.
    public let key: Range<Int>
    /// Where the value's bytes lie in the line (`set`); empty for `get`.
    public let value: Range<Int>

    /// The index of the method in the method table (for its latency series).
    public var methodIndex: Int {
        switch method {
        case .get: Self.getIndex
        case .set: Self.setIndex
        }
    }

    private static let getIndex = MethodSpec.byName["cache.get"]!.index
    private static let setIndex = MethodSpec.byName["cache.set"]!.index
}

/// Reads lines of the hot shapes without parsing them into a document.
///
/// Threading: stateless; any thread.
public enum HotLine {
    /// The request `line` (without its `\n`) makes, when it has a hot shape (see
    /// `HotRequest`); nil otherwise, for `RPCMessageParser` to read.
    public static func read(_ line: UnsafeRawBufferPointer) -> HotRequest? {
        var reader = Reader(line)
        return reader.request()
    }

    /// A cursor over one line. Every step either matches what a hot shape allows next or
    /// gives up (nil): nothing here reports errors, which are the parser's.
    private struct Reader {
        let bytes: UnsafeRawBufferPointer
        var at = 0

        init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

        /// The members seen, one bit each, so a repeated member gives up (the parser, not
        /// this reader, says what a duplicate means).
        private struct Seen: OptionSet {
            let rawValue: UInt8
            static let version = Seen(rawValue: 1)
            static let id = Seen(rawValue: 2)
            static let method = Seen(rawValue: 4)
            static let params = Seen(rawValue: 8)
            static let key = Seen(rawValue: 16)
            static let value = Seen(rawValue: 32)
            static let envelope: Seen = [.version, .id, .method, .params]
        }

        mutating func request() -> HotRequest? {
            var seen: Seen = []
            var id: Int64 = 0
            var method: HotRequest.Method?
            var key = 0..<0
            var value = 0..<0
            guard take(UInt8(ascii: "{")) else { return nil }
            repeat {
                guard let name = string(), take(UInt8(ascii: ":")) else { return nil }
                let member: Seen
                if spells(name, "jsonrpc") {
                    guard let version = string(), spells(version, "2.0") else { return nil }
                    member = .version
                } else if spells(name, "id") {
                    guard let number = integer() else { return nil }
                    id = number
                    member = .id
                } else if spells(name, "method") {
                    guard let name = string() else { return nil }
                    if spells(name, "cache.get") {
                        method = .get
                    } else if spells(name, "cache.set") {
                        method = .set
                    } else {
                        return nil
                    }
                    member = .method
                } else if spells(name, "params") {
                    guard take(UInt8(ascii: "{")) else { return nil }
                    repeat {
                        guard let inner = string(), take(UInt8(ascii: ":")), let text = string() else { return nil }
                        let param: Seen
                        if spells(inner, "key") {
                            key = text
                            param = .key
                        } else if spells(inner, "value") {
                            value = text
                            param = .value
                        } else {
                            return nil
                        }
                        guard seen.insert(param).inserted else { return nil }
                    } while take(UInt8(ascii: ","))
                    guard take(UInt8(ascii: "}")) else { return nil }
                    member = .params
                } else {
                    return nil
                }
                guard seen.insert(member).inserted else { return nil }
            } while take(UInt8(ascii: ","))
            guard take(UInt8(ascii: "}")), seen.isSuperset(of: .envelope), seen.contains(.key), let method else { return nil }
            skipSpace()
            guard at == bytes.count else { return nil }
            switch method {
            case .get: guard !seen.contains(.value) else { return nil }
            case .set: guard seen.contains(.value) else { return nil }
            }
            return HotRequest(method: method, id: id, key: key, value: value)
        }
        /// JSON whitespace (the line holds no `\n`; a `\r` before it is whitespace too).
        private mutating func skipSpace() {
            while at < bytes.count {
                switch bytes[at] {
                case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r"), UInt8(ascii: "\n"): at += 1
                default: return
                }
            }
        }

        /// Skips whitespace, then takes `byte` if it is next.
        private mutating func take(_ byte: UInt8) -> Bool {
            skipSpace()
            guard at < bytes.count, bytes[at] == byte else { return false }
            at += 1
            return true
        }

        /// A string of printable ASCII without escapes, after whitespace: its contents' span.
        private mutating func string() -> Range<Int>? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            let start = at
            at = HotLine.plainEnd(bytes, from: at)
            guard at < bytes.count, bytes[at] == UInt8(ascii: "\"") else { return nil }
            at += 1
            return start..<(at - 1)
        }

        /// A JSON integer of at most 18 digits (so it fits in an `Int64`), after whitespace:
        /// `0`, or an optional `-` and a digit other than 0 followed by digits; not a
        /// fraction or an exponent, and not `-0`.
        private mutating func integer() -> Int64? {
            skipSpace()
            let negative = at < bytes.count && bytes[at] == UInt8(ascii: "-")
            if negative { at += 1 }
            let start = at
            var value: Int64 = 0
            while at < bytes.count, bytes[at] >= UInt8(ascii: "0"), bytes[at] <= UInt8(ascii: "9") {
                value = value &* 10 &+ Int64(bytes[at] &- UInt8(ascii: "0"))
                at += 1
            }
            let digits = at - start
            guard digits > 0, digits <= 18 else { return nil }
            if bytes[start] == UInt8(ascii: "0"), digits > 1 || negative { return nil }
            if at < bytes.count {
                switch bytes[at] {
                case UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"): return nil
                default: break
                }
            }
            return negative ? -value : value
        }

        /// Whether the span's bytes spell `word`.
        private func spells(_ span: Range<Int>, _ word: StaticString) -> Bool {
            guard span.count == word.utf8CodeUnitCount else { return false }
            for i in 0..<span.count where bytes[span.lowerBound + i] != word.utf8Start[i] { return false }
            return true
        }
    }
}

extension HotLine {
    /// The index of the first byte at or after `from` that may not stand in a hot string
    /// as it is: a quote (the string's end), a backslash (an escape), or a byte outside
    /// 0x20...0x7E (a control character, which is invalid, or part of a multi-byte
    /// character: both the parser's); `bytes.count` when there is none.
    ///
    /// Eight bytes a step: a value is most of a set's line, and this is its only pass
    /// over it before the copy. Each test below flags a byte with its high bit; a flag
    /// can be wrong only in a byte above a rightly flagged one (the borrow of a
    /// subtraction runs upwards), so the lowest flag is always right.
    static func plainEnd(_ bytes: UnsafeRawBufferPointer, from: Int) -> Int {
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        /// The high bit of each byte of `w` that is zero (exact for the lowest).
        func zeros(_ w: UInt64) -> UInt64 { (w &- ones) & ~w & highs }
        var at = from
        while at &+ 8 <= bytes.count {
            let w = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: at, as: UInt64.self))
            let flags = (w & highs)  // 0x80...0xFF
                | ((w &- ones &* 0x20) & ~w & highs)  // below 0x20
                | zeros(w ^ (ones &* 0x22)) | zeros(w ^ (ones &* 0x5C)) | zeros(w ^ (ones &* 0x7F))
            if flags != 0 { return at &+ flags.trailingZeroBitCount / 8 }
            at &+= 8
        }
        while at < bytes.count {
            let byte = bytes[at]
            if byte < 0x20 || byte > 0x7E || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { return at }
            at &+= 1
        }
        return at
    }
}
