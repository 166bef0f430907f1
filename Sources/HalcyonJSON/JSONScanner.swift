// A hand-written scanner for the plain request lines that make up almost all traffic
// (`{"jsonrpc":"2.0","id":7,"method":"get","params":{"key":"k"}}`), beside jansson, the
// parser of record. jansson's lexer costs 15–23 ns a byte; this one skips a plain string
// eight bytes at a time and builds the same jansson tree directly.

import CJansson

/// Scans one JSON text of the hot subset into the tree `json_loadb` would build from it,
/// or says why the text is left to jansson.
///
/// The subset: one object, optionally surrounded by JSON whitespace, whose members are
/// strings without escapes (valid UTF-8, no control characters), integers in plain form
/// with at most 18 digits (no `-0`), `true`, `false`, `null`, or objects of the same kind
/// nested at most `maxDepth` deep (the request, its params, an option object such as
/// `{"seconds": 5}`). That is the shape of `ping`, `get`, `set`, `touch`, `remove`,
/// `incr`, `add` and `cas` as clients send them. Everything else is deferred: arrays
/// (batches, `getMany`), escapes, fractions and exponents, duplicate member names,
/// invalid UTF-8, malformed text. A deferred line is parsed by jansson, so what a request
/// means never depends on which of the two read it; `HalcyonFuzzing`'s differential
/// target checks that the scanner's trees equal jansson's, member order included.
///
/// Threading: pure; any thread.
public enum JSONScanner {
    /// What one scan came to.
    public enum Outcome {
        /// The text is in the subset; the tree is what jansson would have built.
        case parsed(JSONValue)
        /// The text is left to jansson, for this reason.
        case deferred(Deferral)
    }

    /// Why a text is left to jansson. Each is a shape the scanner does not take, not an
    /// error: jansson decides whether the text is valid JSON.
    public enum Deferral: Sendable, Equatable {
        /// The text is not one object (an array or batch, a scalar, nothing).
        case notAnObject
        /// A string holds a backslash escape.
        case escape
        /// A string holds a byte below U+0020 (jansson refuses those unescaped).
        case controlCharacter
        /// A string is not valid UTF-8.
        case invalidUTF8
        /// A number with a fraction, an exponent, a leading zero, `-0`, or more than 18 digits.
        case unusualNumber
        /// An object holds the same member name twice (jansson is told to refuse that).
        case duplicateMember
        /// An array anywhere, or objects nested deeper than `maxDepth`.
        case nesting
        /// Bytes after the object other than whitespace.
        case trailingBytes
        /// Anything else that is not in the subset: truncated text, a stray byte, a bad literal.
        case malformed
    }

    /// How deep objects may nest: the request, its params, one option object.
    public static let maxDepth = 3

    /// Scans `bytes` (one line without its line end).
    public static func scan(_ bytes: UnsafeRawBufferPointer) -> Outcome {
        guard let base = bytes.baseAddress else { return .deferred(.notAnObject) }
        var cursor = Cursor(base: base.assumingMemoryBound(to: UInt8.self), end: bytes.count)
        cursor.skipWhitespace()
        guard cursor.peek == UInt8(ascii: "{") else { return .deferred(.notAnObject) }
        guard let root = cursor.object(depth: 1) else { return .deferred(cursor.deferral) }
        cursor.skipWhitespace()
        guard cursor.index == cursor.end else {
            json_decref(root)
            return .deferred(.trailingBytes)
        }
        return .parsed(JSONValue(owning: root))
    }

    /// A position in the text and the reason for the first deferral met.
    ///
    /// Threading: a local value of one scan.
    struct Cursor {
        let base: UnsafePointer<UInt8>
        let end: Int
        var index = 0
        var deferral = Deferral.malformed

        init(base: UnsafePointer<UInt8>, end: Int) {
            self.base = base
            self.end = end
        }

        /// The byte at the cursor, or 0 at the end (0 is never valid JSON outside a string).
        var peek: UInt8 { index < end ? base[index] : 0 }

        mutating func skipWhitespace() {
            while index < end {
                switch base[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        /// Notes why the scan stops and yields nil, for the caller to propagate.
        mutating func stop<T>(_ reason: Deferral) -> T? {
            deferral = reason
            return nil
        }

        /// Scans an object whose `{` is at the cursor; a new reference, or nil (deferred).
        mutating func object(depth: Int) -> UnsafeMutablePointer<json_t>? {
            guard depth <= JSONScanner.maxDepth else { return stop(.nesting) }
            index += 1
            guard let object = json_object() else { return stop(.malformed) }
            skipWhitespace()
            if peek == UInt8(ascii: "}") {
                index += 1
                return object
            }
            while true {
                guard peek == UInt8(ascii: "\"") else {
                    json_decref(object)
                    return stop(.malformed)
                }
                guard let name = stringSpan() else {
                    json_decref(object)
                    return nil
                }
                skipWhitespace()
                guard peek == UInt8(ascii: ":") else {
                    json_decref(object)
                    return stop(.malformed)
                }
                index += 1
                skipWhitespace()
                guard let value = value(depth: depth) else {
                    json_decref(object)
                    return nil
                }
                // Setting a name already present replaces it and leaves the size as it
                // was: that is how a duplicate shows, at the cost of no extra lookup.
                let before = json_object_size(object)
                let key = UnsafeRawPointer(base + name.lowerBound).assumingMemoryBound(to: CChar.self)
                // `_new` takes over `value`'s reference, even when it fails.
                guard json_object_setn_new_nocheck(object, key, name.count, value) == 0 else {
                    json_decref(object)
                    return stop(.malformed)
                }
                guard json_object_size(object) == before + 1 else {
                    json_decref(object)
                    return stop(.duplicateMember)
                }
                skipWhitespace()
                switch peek {
                case UInt8(ascii: ","):
                    index += 1
                    skipWhitespace()
                case UInt8(ascii: "}"):
                    index += 1
                    return object
                default:
                    json_decref(object)
                    return stop(.malformed)
                }
            }
        }

        /// Scans one value at the cursor; a new reference, or nil (deferred).
        mutating func value(depth: Int) -> UnsafeMutablePointer<json_t>? {
            switch peek {
            case UInt8(ascii: "\""):
                guard let span = stringSpan() else { return nil }
                let text = UnsafeRawPointer(base + span.lowerBound).assumingMemoryBound(to: CChar.self)
                return json_stringn_nocheck(text, span.count) ?? stop(.malformed)
            case UInt8(ascii: "{"):
                return object(depth: depth + 1)
            case UInt8(ascii: "["):
                return stop(.nesting)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                return integer()
            case UInt8(ascii: "t"):
                return literal("true") ? json_true() : stop(.malformed)
            case UInt8(ascii: "f"):
                return literal("false") ? json_false() : stop(.malformed)
            case UInt8(ascii: "n"):
                return literal("null") ? json_null() : stop(.malformed)
            default:
                return stop(.malformed)
            }
        }

        /// Consumes `word` when the text holds it at the cursor.
        mutating func literal(_ word: StaticString) -> Bool {
            let count = word.utf8CodeUnitCount
            guard end - index >= count else { return false }
            for offset in 0..<count where base[index + offset] != word.utf8Start[offset] {
                return false
            }
            index += count
            return true
        }

        /// Scans a plain integer: `-?(0|[1-9][0-9]{0,17})` not followed by `.`, `e` or `E`.
        mutating func integer() -> UnsafeMutablePointer<json_t>? {
            var negative = false
            if peek == UInt8(ascii: "-") {
                negative = true
                index += 1
            }
            let first = index
            var magnitude: Int64 = 0
            while index < end {
                let digit = base[index] &- UInt8(ascii: "0")
                guard digit < 10 else { break }
                magnitude = magnitude &* 10 &+ Int64(digit)
                index += 1
            }
            let digits = index - first
            guard digits > 0 else { return stop(.malformed) }
            // A leading zero (jansson refuses `01`), `-0` (kept apart so the scanner never
            // has to know how jansson signs a zero), and 19 digits or more (which may
            // overflow, where jansson fails) all go to jansson.
            if base[first] == UInt8(ascii: "0") && (digits > 1 || negative) { return stop(.unusualNumber) }
            guard digits <= 18 else { return stop(.unusualNumber) }
            switch peek {
            case UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"): return stop(.unusualNumber)
            default: break
            }
            return json_integer(negative ? -magnitude : magnitude) ?? stop(.malformed)
        }

        /// Scans a string whose `"` is at the cursor and returns the span of its contents;
        /// nil (deferred) for an escape, a control character, invalid UTF-8 or no end.
        mutating func stringSpan() -> Range<Int>? {
            index += 1
            let start = index
            var sawNonASCII = false
            while true {
                // Eight bytes at a time while none is `"`, `\`, below 0x20 or above 0x7F.
                while index + 8 <= end {
                    let word = UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self)
                    if Self.needsAttention(word) { break }
                    index += 8
                }
                let stopAt = min(index + 8, end)
                guard index < stopAt else { return stop(.malformed) }
                while index < stopAt {
                    let byte = base[index]
                    switch byte {
                    case UInt8(ascii: "\""):
                        let span = start..<index
                        index += 1
                        if sawNonASCII,
                           !isValidUTF8(UnsafeRawBufferPointer(start: base + span.lowerBound, count: span.count)) {
                            return stop(.invalidUTF8)
                        }
                        return span
                    case UInt8(ascii: "\\"):
                        return stop(.escape)
                    case 0..<0x20:
                        return stop(.controlCharacter)
                    case 0x80...:
                        sawNonASCII = true
                    default:
                        break
                    }
                    index += 1
                }
            }
        }

        private static let ones: UInt64 = 0x0101_0101_0101_0101
        private static let highs: UInt64 = 0x8080_8080_8080_8080

        /// True when some byte of `word` is `"`, `\`, below 0x20 or above 0x7F (exact as a
        /// yes or no for the whole word; the byte loop finds which).
        @inline(__always)
        static func needsAttention(_ word: UInt64) -> Bool {
            @inline(__always) func hasZeroByte(_ x: UInt64) -> UInt64 { (x &- ones) & ~x & highs }
            let below0x20 = (word &- ones &* 0x20) & ~word & highs
            let quote = hasZeroByte(word ^ (ones &* 0x22))
            let backslash = hasZeroByte(word ^ (ones &* 0x5C))
            return (word & highs) | below0x20 | quote | backslash != 0
        }
    }
}
