// The hottest request line read straight off its bytes: a `cache.get` of one key with a
// number id. A memory hit of such a line needs no document, no request, no params and no
// prepared call: the bytes give the id and the key, and the reply is written from the
// entry where it lies.

/// A `cache.get` line of the plainest shape: `jsonrpc`, `id`, `method` and `params` (each
/// once, in any order, with any JSON whitespace between tokens), the id a JSON integer of
/// at most 18 digits, `params` an object whose only member is `key`, and every string
/// printable ASCII without escapes. Every other line, however valid, is left to
/// `RPCMessageParser` (`HotLine.get` answers nil), which defines what it means; on the
/// lines this reader accepts the two agree (the request fuzzer checks each input against
/// the parser).
///
/// Threading: a value; any thread.
public struct HotGet {
    /// The request's id.
    public let id: Int64
    /// Where the key's bytes lie in the line.
    public let keyStart: Int
    public let keyCount: Int

    /// The index of `cache.get` in the method table (for its latency series).
    public static let methodIndex = MethodSpec.byName["cache.get"]!.index
}

/// Reads lines of the hot shapes without parsing them into a document.
///
/// Threading: stateless; any thread.
public enum HotLine {
    /// The `cache.get` that `line` (without its `\n`) asks for, when it has the hot shape
    /// (see `HotGet`); nil otherwise, for `RPCMessageParser` to read.
    public static func get(_ line: UnsafeRawBufferPointer) -> HotGet? {
        var reader = Reader(line)
        return reader.get()
    }

    /// A cursor over one line. Every step either matches what the hot shape allows next or
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
            static let all: Seen = [.version, .id, .method, .params]
        }

        mutating func get() -> HotGet? {
            var seen: Seen = []
            var id: Int64 = 0
            var key = (start: 0, count: 0)
            guard take(UInt8(ascii: "{")) else { return nil }
            repeat {
                guard let name = string(), take(UInt8(ascii: ":")) else { return nil }
                let member: Seen
                if spells(name, "jsonrpc") {
                    guard let value = string(), spells(value, "2.0") else { return nil }
                    member = .version
                } else if spells(name, "id") {
                    guard let number = integer() else { return nil }
                    id = number
                    member = .id
                } else if spells(name, "method") {
                    guard let value = string(), spells(value, "cache.get") else { return nil }
                    member = .method
                } else if spells(name, "params") {
                    guard take(UInt8(ascii: "{")), let inner = string(), spells(inner, "key"),
                          take(UInt8(ascii: ":")), let value = string(), take(UInt8(ascii: "}")) else { return nil }
                    key = value
                    member = .params
                } else {
                    return nil
                }
                guard !seen.contains(member) else { return nil }
                seen.insert(member)
            } while take(UInt8(ascii: ","))
            guard take(UInt8(ascii: "}")), seen == .all else { return nil }
            skipSpace()
            guard at == bytes.count else { return nil }
            return HotGet(id: id, keyStart: key.start, keyCount: key.count)
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
        private mutating func string() -> (start: Int, count: Int)? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            let start = at
            while at < bytes.count {
                let byte = bytes[at]
                if byte == UInt8(ascii: "\"") {
                    at += 1
                    return (start, at - 1 - start)
                }
                // A backslash starts an escape; anything outside 0x20...0x7E is a control
                // character (invalid) or part of a multi-byte character: the parser's.
                guard byte >= 0x20, byte <= 0x7E, byte != UInt8(ascii: "\\") else { return nil }
                at += 1
            }
            return nil
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
        private func spells(_ span: (start: Int, count: Int), _ word: StaticString) -> Bool {
            guard span.count == word.utf8CodeUnitCount else { return false }
            for i in 0..<span.count where bytes[span.start + i] != word.utf8Start[i] { return false }
            return true
        }
    }
}
